//! The metrics server over real sockets: setup errors, paths, abuse, linger, the live page and its JSON.

use super::*;

fn cfg(addr: &str) -> MetricsConfig {
    MetricsConfig {
        addr: addr.into(),
        linger: Duration::ZERO,
        labels: Vec::new(),
        instance: None,
        pages: crate::app::METRICS_PAGES,
    }
}

#[tokio::test]
async fn setup_errors_are_one_clear_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let e = Exporter::start(cfg(&addr)).await.err().unwrap();
    assert_eq!(
        e,
        format!("cannot serve metrics on {addr}: address already in use (choose another --metrics port)").into()
    );
    for bad in ["9464", "localhost:9464", "127.0.0.1", ""] {
        let e = Exporter::start(cfg(bad)).await.err().unwrap();
        assert!(
            e.starts_with(&format!("cannot serve metrics on {bad}: not an IP:PORT")),
            "{e}"
        );
    }
    for (k, want) in [
        ("target", "loadgen sets that label itself"),
        ("instance_name", "loadgen sets that label itself"),
        ("le", "loadgen sets that label itself"),
        ("__x", "use letters, digits and _"),
        ("a-b", "use letters, digits and _"),
        ("1a", "use letters, digits and _"),
    ] {
        let mut c = cfg("127.0.0.1:0");
        c.labels = vec![(k.into(), "v".into())];
        let e = Exporter::start(c).await.err().unwrap();
        assert!(e.contains(want) && e.contains(k), "{k}: {e}");
        assert!(!e.contains('\n'));
    }
    let mut c = cfg("127.0.0.1:0");
    c.labels = vec![("a".into(), "1".into()), ("a".into(), "2".into())];
    assert!(Exporter::start(c).await.is_err());
}

async fn http(addr: SocketAddr, req: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(req).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf).into_owned()
}

fn get(method: &str, path: &str, extra: &str) -> Vec<u8> {
    format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n").into_bytes()
}

#[tokio::test]
async fn serves_get_and_head_on_metrics_only() {
    let e = Exporter::start(cfg("127.0.0.1:0")).await.unwrap();
    let addr = e.local_addr();
    let (t, iv) = (known_totals(), known_interval());
    (e.hook())(&view("embedded", 0, 1.0, &t, &iv, 1.0, false, None));

    let r = http(addr, &get("GET", "/metrics", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(
        r.contains("\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
        "{r}"
    );
    let body = r.split_once("\r\n\r\n").unwrap().1;
    assert_eq!(body, e.render(Format::Text));

    let r = http(
        addr,
        &get(
            "GET",
            "/metrics?x=1",
            "Accept: application/openmetrics-text; version=1.0.0\r\n",
        ),
    )
    .await;
    assert!(
        r.contains(
            "\r\ncontent-type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\n"
        ),
        "{r}"
    );
    assert!(r.ends_with("# EOF\n"), "{r}");

    let r = http(addr, &get("HEAD", "/metrics", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(r.ends_with("\r\n\r\n"), "HEAD has no body: {r}");

    let r = http(addr, &get("GET", "/index.html", "")).await;
    assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
    let r = http(addr, &get("POST", "/live.json", "Content-Length: 0\r\n")).await;
    assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
    let r = http(addr, &get("GET", "/metricsx", "")).await;
    assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
    let r = http(addr, &get("POST", "/metrics", "Content-Length: 0\r\n")).await;
    assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
    assert!(r.contains("\r\nallow: GET, HEAD\r\n"), "{r}");

    // Garbage: hyper answers 400 (or just closes); the server keeps serving.
    let r = http(
        addr,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
    )
    .await;
    assert!(r.is_empty() || r.starts_with("HTTP/1.1 400"), "{r}");
    let r = http(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    )
    .await;
    assert!(r.is_empty() || r.starts_with("HTTP/1.1 400"), "{r}");
    let r = http(addr, &get("GET", "/metrics", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");

    // Keep-alive: two requests on one connection.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    assert_eq!(
        String::from_utf8_lossy(&buf)
            .matches("HTTP/1.1 200 OK")
            .count(),
        2
    );

    e.finish().await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "port still open after finish"
    );
}

#[tokio::test]
async fn many_parallel_scrapes() {
    let e = Exporter::start(cfg("127.0.0.1:0")).await.unwrap();
    let addr = e.local_addr();
    let (t, iv) = (known_totals(), known_interval());
    let hook = e.hook();
    let mut tasks = Vec::new();
    for _ in 0..48 {
        tasks.push(tokio::spawn(async move {
            http(addr, &get("GET", "/metrics", "")).await
        }));
    }
    // The hook keeps publishing while scrapes run.
    for i in 0..20 {
        hook(&view("embedded", 0, 1.0, &t, &iv, 1.0, i == 19, None));
        tokio::task::yield_now().await;
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.contains("loadgen_build_info{version="), "{r}");
    }
    e.finish().await;
}

#[tokio::test]
async fn slow_clients_time_out_and_connections_are_capped() {
    let limits = Limits {
        max_connections: 2,
        header_timeout: Duration::from_millis(700),
        max_connection_age: Duration::from_secs(60),
    };
    let e = Exporter::start_with(cfg("127.0.0.1:0"), limits)
        .await
        .unwrap();
    let addr = e.local_addr();
    // Two clients that never finish their headers hold both slots...
    let mut slow1 = TcpStream::connect(addr).await.unwrap();
    slow1.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
    let mut slow2 = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // ...so a third is accepted and closed at once.
    let r = http(addr, &get("GET", "/metrics", "")).await;
    assert_eq!(r, "", "over the cap: closed without an answer");
    // The slow ones are cut off by the header timeout, which frees the slots.
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), slow1.read_to_end(&mut buf)).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), slow2.read_to_end(&mut buf)).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = http(addr, &get("GET", "/metrics", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    e.finish().await;
}

#[tokio::test]
async fn linger_keeps_serving_then_the_port_closes() {
    let mut c = cfg("127.0.0.1:0");
    c.linger = Duration::from_millis(600);
    let e = Exporter::start(c).await.unwrap();
    let addr = e.local_addr();
    let started = Instant::now();
    let finish = tokio::spawn(e.finish());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = http(addr, &get("GET", "/metrics", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    finish.await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn dropping_the_exporter_closes_the_port() {
    let e = Exporter::start(cfg("127.0.0.1:0")).await.unwrap();
    let addr = e.local_addr();
    drop(e);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(TcpStream::connect(addr).await.is_err());
}

/// A timeline row as the collector makes it, `t_s` after the warm-up.
fn row(t_s: f64, qps: f64) -> crate::result::TimelineRow {
    crate::result::TimelineRow {
        t_s,
        qps,
        hits: qps as u64,
        misses: 0,
        errors: 1,
        p50_us: 10.0,
        p99_us: 99.0,
        in_flight: 2,
        connections: 4,
        reconnects: 0,
    }
}

/// The value and timestamp of `name{labels}` in exposition text.
fn sample(text: &str, series: &str) -> (f64, i64) {
    let line = text
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {series} in {text}"));
    let mut f = line[series.len()..].split_whitespace();
    (
        f.next().unwrap().parse().unwrap(),
        f.next().unwrap().parse().unwrap(),
    )
}

#[test]
fn live_json_has_the_numbers_of_metrics_under_the_same_timestamp() {
    let s = shared(None, &[]);
    s.set_settings(
        serde_json::from_value(serde_json::json!({"connections": 4, "pipeline": 1,
        "threads": 1, "warmup_s": 0.5, "keys": "1-10", "dist": "uniform", "mode": "prepared",
        "verify": false, "timeout_ms": 1000, "interval_ms": 500, "seed": 1}))
        .unwrap(),
    );
    let (t, iv) = (known_totals(), known_interval());
    let rows = [row(0.5, 1000.0), row(1.0, 1200.0)];
    // A warm-up interval (no row), then two: the run started at 1700000000.25.
    for (k, r) in [None, Some(&rows[0]), Some(&rows[1])]
        .into_iter()
        .enumerate()
    {
        let mut v = view("embedded", 0, 1_700_000_000.25, &t, &iv, 0.5, false, None);
        v.target = "http://lg:Pw9liveS3cret@127.0.0.1:1/usr/{key}?token=Tk9liveS3cret";
        v.end_s = 0.5 * (k + 1) as f64;
        v.warm = r.is_none();
        v.row = r;
        s.update(&v);
    }
    let text = s.render(Format::Text);
    let live: serde_json::Value = serde_json::from_str(&s.live_json()).unwrap();
    assert_eq!(live["done"], false);
    assert_eq!(live["interval_ms"], 500);
    assert_eq!(live["settings"]["keys"], "1-10");
    let tg = &live["targets"][0];
    let series = |o: &str| format!("loadgen_requests_total{{target=\"embedded\",outcome=\"{o}\"}}");
    let (hits, at) = sample(&text, &series("hit"));
    let (misses, _) = sample(&text, &series("miss"));
    let (errors, _) = sample(&text, &series("error"));
    assert_eq!(tg["at_ms"], at);
    assert_eq!(at, 1_700_000_001_750);
    assert_eq!(tg["requests"].as_f64(), Some(hits + misses + errors));
    assert_eq!(tg["hits"].as_f64(), Some(hits));
    assert_eq!(tg["errors"].as_f64(), Some(errors));
    let (qps, qat) = sample(&text, "loadgen_qps{target=\"embedded\"}");
    assert_eq!((tg["qps"].as_f64(), qat), (Some(qps), at));
    // The rows the report will hold, each with its interval's end.
    let r = &tg["rows"];
    assert_eq!(r["t_s"], serde_json::json!([0.5, 1.0]));
    assert_eq!(r["qps"], serde_json::json!([1000.0, 1200.0]));
    assert_eq!(
        tg["rows_at_ms"],
        serde_json::json!([1_700_000_001_250i64, at])
    );
    assert_eq!(tg["merged"], 1);
    // The URL is shown redacted, as in the report; the secrets appear nowhere.
    let all = s.live_json();
    assert!(!all.contains("S3cret"), "{all}");
    assert_eq!(
        tg["target"],
        "http://lg:***@127.0.0.1:1/usr/{key}?token=***"
    );

    // A second run of the target (a sweep step) follows on the same time axis, 10 s later.
    let mut v = view("embedded", 0, 1_700_000_011.25, &t, &iv, 0.5, false, None);
    v.end_s = 1.0;
    v.row = Some(&rows[0]);
    s.update(&v);
    let live: serde_json::Value = serde_json::from_str(&s.live_json()).unwrap();
    let r = &live["targets"][0]["rows"];
    assert_eq!(r["t_s"], serde_json::json!([0.5, 1.0, 11.5]));
}

fn empty_result() -> crate::result::ResultFile {
    serde_json::from_value(serde_json::json!({
        "loadgen_version": "0.1.0", "started_at": "2026-12-04T10:00:00Z", "interrupted": false,
        "settings": {"connections": 4, "pipeline": 1, "threads": 1, "warmup_s": 0.0,
            "keys": "1-10", "dist": "uniform", "mode": "prepared", "verify": false,
            "timeout_ms": 1000, "interval_ms": 1000, "seed": 1},
        "machine": {"cores": 1, "os": "linux"}, "runs": []
    }))
    .unwrap()
}

#[tokio::test]
async fn serves_the_live_page_then_the_report_of_the_ended_run() {
    let e = Exporter::start(cfg("127.0.0.1:0")).await.unwrap();
    let addr = e.local_addr();
    let (t, iv) = (known_totals(), known_interval());
    (e.hook())(&view("embedded", 0, 1.0, &t, &iv, 1.0, false, None));

    let r = http(addr, &get("GET", "/", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    assert!(
        r.contains("\r\ncontent-type: text/html; charset=utf-8\r\n"),
        "{r}"
    );
    assert!(r.contains(&format!(
        "\r\ncontent-security-policy: {}\r\n",
        crate::report::html::LIVE_CSP
    )));
    let page = r.split_once("\r\n\r\n").unwrap().1;
    assert!(page.contains(r#"<script type="application/json" id="live">{"done":false"#));
    assert!(page.contains("connect-src 'self'"));
    let r = http(addr, &get("GET", "/live.json", "")).await;
    assert!(r.contains("\r\ncontent-type: application/json\r\n"), "{r}");
    assert_eq!(r.split_once("\r\n\r\n").unwrap().1, e.live_json());

    // The run ends: `/` is the report written beside the result, and live.json says so.
    let file = empty_result();
    e.run_ended(Some(&file));
    let r = http(addr, &get("GET", "/", "")).await;
    assert!(r.contains(&format!(
        "\r\ncontent-security-policy: {}\r\n",
        crate::report::html::CSP
    )));
    assert_eq!(
        r.split_once("\r\n\r\n").unwrap().1,
        crate::report::html::render(&file)
    );
    let live: serde_json::Value = serde_json::from_str(&e.live_json()).unwrap();
    assert_eq!(live["done"], true);
    assert_eq!(live["targets"][0]["hits"], 1000);
    e.finish().await;
}

#[tokio::test]
async fn a_run_that_ended_without_a_result_keeps_the_live_page_and_says_done() {
    let e = Exporter::start(cfg("127.0.0.1:0")).await.unwrap();
    let addr = e.local_addr();
    e.run_ended(None);
    let r = http(addr, &get("GET", "/", "")).await;
    assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
    // The page's own data says the run is over, so it does not poll (or reload) for ever.
    assert!(r.contains(r#"<script type="application/json" id="live">{"done":true,"#));
    assert!(r.contains(crate::report::html::LIVE_CSP));
    e.finish().await;
}
