//! The live page of `--metrics`, opened during a run and checked against `/metrics`.

use super::*;

/// A loadgen of the test's own, killed if the test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The requests (every series summed) and the qps gauge of one `/metrics` text.
fn scraped(text: &str) -> Option<(f64, f64)> {
    let (mut requests, mut qps) = (0.0, None);
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, v)) = l.rsplit_once(' ') else {
            continue;
        };
        if series.starts_with("loadgen_requests_total{") {
            requests += v.parse::<f64>().ok()?;
        } else if series.starts_with("loadgen_qps{") {
            qps = Some(v.parse::<f64>().ok()?);
        }
    }
    Some((requests, qps?))
}

/// One scrape of `/metrics`: when it was asked and answered, its requests and qps.
type Scrape = (Instant, Instant, f64, f64);

/// Scrapes `/metrics` every 50 ms until `stop`. Its counters are current when scraped, so
/// each scrape is kept with the times it was asked and answered.
fn record_metrics(addr: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Scrape>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let asked = Instant::now();
            let r = http_request(&addr, "GET", "/metrics", "");
            if let Some((requests, qps)) = r.as_ref().and_then(|r| scraped(&r.body)) {
                seen.push((asked, Instant::now(), requests, qps));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        seen
    })
}

/// `/live.json` once it satisfies `ready` (panics after `limit`).
fn live_json_until(addr: &str, limit: Duration, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(r) = http_request(addr, "GET", "/live.json", "") {
            let v: Value = serde_json::from_str(&r.body).expect("live.json is JSON");
            if ready(&v) {
                return v;
            }
            last = Some(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("live.json never got ready in {limit:?}; last: {last:?}");
}

/// A server that holds one HTTP request open until told, then answers it: a page that loads
/// from it has its load event (and so Chromium's --dump-dom) held back until then, in real time.
fn held_open() -> (
    u16,
    std::sync::mpsc::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
        let _ = rx.recv_timeout(Duration::from_secs(60));
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/javascript\r\nContent-Length: 0\r\n\
              Connection: close\r\n\r\n",
        );
    });
    (port, tx, h)
}

/// The number the live page shows in element `id`, and the interval end it is of.
fn live_value(dom: &str, id: &str) -> (f64, i64) {
    let (tag, _) = element(dom, id);
    (
        attr(tag, "data-value").parse().unwrap(),
        attr(tag, "data-at").parse().unwrap(),
    )
}

#[test]
fn the_live_page_shows_what_metrics_says_then_the_report() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("live");
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(bin())
        .current_dir(&d)
        .args([
            "run",
            "-R",
            "2000",
            "-d",
            "8s",
            "--warmup",
            "500ms",
            "-c",
            "4",
            "-t",
            "1",
            "--keys",
            "1-10000",
            "-q",
            "-o",
            "run.json",
            "--metrics",
            &addr,
            "--metrics-linger",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen starts");
    let mut run = Running(child);
    let stop = Arc::new(AtomicBool::new(false));
    let recorder = record_metrics(addr.clone(), stop.clone());
    // Two timeline rows, so the charts have lines to draw.
    live_json_until(&addr, Duration::from_secs(30), |v| {
        v["targets"][0]["rows"]["t_s"]
            .as_array()
            .is_some_and(|r| r.len() >= 2)
    });

    // The page as served: its CSP lets it fetch from its own origin only, it names no URL
    // outside its data, and the target is shown as the report shows it.
    let served = http_get(&addr, "/");
    assert_eq!(served.status, 200);
    assert!(
        served.headers.contains(
            "content-security-policy: default-src 'none'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; img-src data:; connect-src 'self'\r\n"
        ),
        "{}",
        served.headers
    );
    assert_no_url_outside(&served.body, "live");
    let url = format!("http://{addr}/");
    let opened = Instant::now();
    let dom = open_url(browser, &d, &url, "live", &["--virtual-time-budget=3000"]);
    let closed = Instant::now();
    let (tag, _) = element(&dom, "live-status");
    let polls: u32 = attr(tag, "data-polls").parse().unwrap();
    assert!(polls >= 1, "the page never fetched live.json: {tag}");
    let (requests, at) = live_value(&dom, "live-requests-0");
    let (qps, qps_at) = live_value(&dom, "live-qps-0");
    assert_eq!(qps_at, at);
    // No bound on the rate itself: a busy machine moves it, and what the page must get right
    // is the gauge's value (checked against the scrapes below).
    assert!(
        qps > 0.0 && requests > 0.0,
        "{qps} qps, {requests} requests"
    );
    assert!(count(&dom, "tl-qps", "<polyline") >= 1);
    assert_eq!(count(&dom, "tl-lat", "<polyline"), 2, "p50 and p99");

    // A page left open until the run ends reloads into the report: a probe page frames it
    // and counts the frame's loads, its own load held back (in real time) until after the end.
    let (held, release, holder) = held_open();
    let probe = d.join("reload-probe.html");
    std::fs::write(
        &probe,
        format!(
            r#"<!doctype html><body><pre id="loads">0</pre><iframe id="f" src="{url}"
style="width:1280px;height:900px"></iframe><script>
let n = 0;
document.getElementById('f').addEventListener('load', () => {{
  n += 1;
  document.getElementById('loads').textContent = String(n);
}});
</script><script src="http://127.0.0.1:{held}/held.js"></script></body>"#
        ),
    )
    .unwrap();
    let (b, dir, p) = (browser.to_string(), d.clone(), probe.clone());
    let prober = std::thread::spawn(move || browse(&b, &dir, &["--dump-dom"], &p));

    // The run ends; the server lingers with the report.
    let done = live_json_until(&addr, Duration::from_secs(40), |v| v["done"] == true);
    // Past the framed page's next polls (many, for a browser slowed by a busy machine: the
    // reload waits on the page's poll, which a starved Chromium runs late), then the probe may
    // finish loading.
    std::thread::sleep(Duration::from_secs(20));
    let _ = release.send(());
    holder.join().unwrap();
    let out = prober.join().unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let (_, loads) = element(&dom, "loads");
    assert_eq!(
        loads, "2",
        "the open live page did not reload into the report"
    );
    let doc = read_json(&d.join("run.json"));
    stop.store(true, Ordering::Relaxed);
    let seen = recorder.join().expect("the scrapes were read");
    // The page and /metrics read the same live counters: every scrape answered before the page
    // was opened counted no more than the page shows, every one asked after it closed no less,
    // and the page's qps is a value the gauge had.
    let earlier: Vec<f64> = seen.iter().filter(|s| s.1 <= opened).map(|s| s.2).collect();
    let later: Vec<f64> = seen.iter().filter(|s| s.0 >= closed).map(|s| s.2).collect();
    assert!(!earlier.is_empty() && !later.is_empty(), "{seen:?}");
    assert!(
        earlier.iter().all(|&r| r <= requests) && later.iter().all(|&r| r >= requests),
        "page {requests} requests between scrapes {earlier:?} and {later:?}"
    );
    assert!(
        seen.iter().any(|s| s.3 == qps),
        "page qps {qps} never on /metrics: {seen:?}"
    );
    // Once the run has ended, the live rows are the result's timeline, row for row.
    let rows = &done["targets"][0]["rows"];
    let timeline = doc["runs"][0]["timeline"].as_array().unwrap();
    assert_eq!(rows["t_s"].as_array().unwrap().len(), timeline.len());
    for (k, t) in timeline.iter().enumerate() {
        for f in ["t_s", "qps", "hits", "errors", "p50_us", "p99_us"] {
            assert_eq!(rows[f][k], t[f], "row {k} {f}");
        }
    }

    let r = &doc["runs"][0];
    // Every request: the counted ones and the warm-up's, on /metrics and in live.json alike.
    let metrics = http_get(&addr, "/metrics");
    let (total, _) = scraped(&metrics.body).unwrap();
    assert_eq!(total as u64, u(r, "requests") + u(r, "warmup_requests"));
    assert_eq!(done["targets"][0]["requests"].as_f64(), Some(total));
    // `/` is now the report written beside the result, and shows its numbers.
    let page = http_get(&addr, "/");
    let written = std::fs::read_to_string(d.join("run.html")).unwrap();
    assert!(page.body == written, "/ is not the written report");
    assert!(
        page.headers.contains(
            "content-security-policy: default-src 'none'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; img-src data:\r\n"
        ),
        "{}",
        page.headers
    );
    let dom = open_url(browser, &d, &url, "live-report", &[]);
    assert_runs_shown(&dom, &doc);

    // SIGTERM ends the linger: the process exits cleanly and the port closes.
    kill("-TERM", &run.0.id().to_string());
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(st) = run.0.try_wait().unwrap() {
            break st.code();
        }
        assert!(Instant::now() < deadline, "loadgen did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    assert!(http_request(&addr, "GET", "/", "").is_none());
}
