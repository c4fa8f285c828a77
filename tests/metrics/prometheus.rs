//! A real Prometheus scraping loadgen: the rates and latencies it computes.

use super::*;

/// An instant query; the single result's value, or None when the result is empty.
fn prom_query(base: &str, q: &str, time: f64) -> Option<f64> {
    let data = prom_api(
        base,
        &format!("/api/v1/query?query={}&time={time:.3}", urlencode(q)),
    );
    let r = data["result"].as_array().unwrap();
    assert!(r.len() <= 1, "{q}: {data}");
    r.first()
        .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
}

/// The exporter's latency bucket bounds in seconds (docs/metrics.md), `+Inf` left out.
const BUCKET_BOUNDS_S: [f64; 19] = [
    1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0, 10.0,
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A run of the embedded server at `-R RATE` for `-d SECS` (1 s warm-up, 3 s linger) with
/// `--metrics` on a free one of the two ports scripts/servers.sh's Prometheus scrapes every
/// second, labelled `test_run=<run id>`. Returns (address, run id, the run's result).
fn scraped_run(what: &str, secs: &str, rate: &str) -> (String, String, Value) {
    let (child, addr, run_id) = start_scraped_run(what, secs, rate, |_| vec![]);
    let (code, doc, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    (addr, run_id, doc)
}

/// [`scraped_run`] started in the background: (the child, address, run id).
/// `extra` gives more arguments, knowing the port.
fn start_scraped_run(
    what: &str,
    secs: &str,
    rate: &str,
    extra: impl Fn(u16) -> Vec<String>,
) -> (Child, String, String) {
    let ports = scrape_ports();
    let port = ports
        .into_iter()
        .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .unwrap_or_else(|| panic!("neither scraped port {ports:?} is free"));
    let extra = extra(port);
    let run_id = format!("{what}-{}-{}", std::process::id(), now_unix() as u64);
    let addr = format!("127.0.0.1:{port}");
    let label = format!("test_run={run_id}");
    let mut args = vec![
        "--metrics",
        &addr,
        "--metrics-linger",
        "3s",
        "-d",
        secs,
        "--warmup",
        "1s",
        "-R",
        rate,
        "--keys",
        "1-100000",
        "--run-label",
        &label,
    ];
    args.extend(extra.iter().map(String::as_str));
    let child = spawn_run(&args);
    (child, addr, run_id)
}

#[test]
fn prometheus_sees_loadgens_rate_and_latency() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let _g = serial();
    let t0 = now_unix();
    let (addr, run_id, doc) = scraped_run("whole", "12s", "3000");
    let r = &doc["runs"][0];
    let loadgen_qps = f(r, "qps");
    let loadgen_p99_s = f(r, "latency_us.p99") / 1e6;

    let sel = format!("test_run=\"{run_id}\"");
    // Scrapes were working (Prometheus asks for OpenMetrics first, so this parses it too).
    let up = prom_query(
        &prom,
        &format!("up{{job=\"loadgen\",instance=\"{addr}\"}}"),
        t0 + 8.0,
    );
    assert_eq!(up, Some(1.0), "Prometheus scraped {addr}");
    // ...in OpenMetrics: only that format has UNIT lines and counter families without _total.
    let meta = prom_api(
        &prom,
        &format!(
            "/api/v1/targets/metadata?match_target={}",
            urlencode(&format!("{{instance=\"{addr}\"}}"))
        ),
    );
    let meta = meta.as_array().expect("metadata list");
    let of = |m: &str| meta.iter().find(|x| x["metric"] == m).cloned();
    let d = of("loadgen_request_duration_seconds").expect("histogram metadata");
    assert_eq!(
        (d["type"].as_str(), d["unit"].as_str()),
        (Some("histogram"), Some("seconds"))
    );
    let c = of("loadgen_requests").expect("counter family without _total");
    assert_eq!(c["type"], "counter");
    // Several evaluation times around 8 s into the run: rate() over 1 s scrapes of counters that
    // move once a second can be off by one step when the two clocks line up; the median is not.
    let times: Vec<f64> = (0..5).map(|i| t0 + 7.0 + i as f64 * 0.5).collect();
    let rates: Vec<f64> = times
        .iter()
        .map(|&t| {
            prom_query(
                &prom,
                &format!("sum(rate(loadgen_requests_total{{{sel}}}[5s]))"),
                t,
            )
            .unwrap_or_else(|| panic!("no rate at {t}"))
        })
        .collect();
    let rate = median(rates.clone());
    eprintln!("prometheus rate {rates:?} -> {rate:.1}/s; loadgen {loadgen_qps}/s");
    for want in [3000.0, loadgen_qps] {
        assert!(
            (rate - want).abs() <= want * 0.10,
            "Prometheus {rate:.1}/s vs {want}/s ({rates:?})"
        );
    }
    let q = format!(
        "histogram_quantile(0.99, sum by (le) (rate(loadgen_request_duration_seconds_bucket{{{sel}}}[5s])))"
    );
    let p99s: Vec<f64> = times
        .iter()
        .map(|&t| prom_query(&prom, &q, t).unwrap_or_else(|| panic!("no p99 at {t}")))
        .collect();
    let p99 = median(p99s.clone());
    eprintln!("prometheus p99 {p99s:?} -> {p99:.6}s over 5 s windows; loadgen {loadgen_p99_s:.6}s");
    assert!(p99.is_finite() && p99 > 0.0, "{p99s:?}");
    // The whole run, from the last scraped buckets (the same samples as loadgen's histogram):
    // histogram_quantile interpolates inside the bucket that holds the 99th percentile, so
    // Prometheus' p99 lies between that bucket's bounds, and they are read here from the
    // result's own histogram, the way the exporter files a sample: by the low end of its
    // HdrHistogram slot.
    let h = loadgen::result::decode_histogram(r["histogram"].as_str().unwrap()).unwrap();
    let low = h.lowest_equivalent(h.value_at_quantile(0.99));
    let bounds: Vec<f64> = [0.0]
        .into_iter()
        .chain(BUCKET_BOUNDS_S.iter().copied())
        .collect();
    let b = bounds
        .iter()
        .position(|&le| low <= (le * 1e9).round() as u64)
        .expect("p99 within the largest bucket");
    let (lo, hi) = (bounds[b - 1], bounds[b]);
    let whole = prom_query(
        &prom,
        &format!(
            "histogram_quantile(0.99, sum by (le) (max_over_time(loadgen_request_duration_seconds_bucket{{{sel}}}[60s])))"
        ),
        now_unix(),
    )
    .expect("a whole-run p99");
    eprintln!("prometheus whole-run p99 {whole:.6}s, bucket ({lo}, {hi}]");
    assert!(
        (lo..=hi).contains(&whole),
        "Prometheus p99 {whole}s outside the bucket ({lo}, {hi}] that holds loadgen's {loadgen_p99_s}s"
    );
    // The last scrape (during the linger) holds the final count.
    let hits = prom_query(
        &prom,
        &format!("max_over_time(loadgen_requests_total{{{sel},outcome=\"hit\"}}[60s])"),
        now_unix(),
    );
    let total = u(r, "hits") + u(r, "warmup_requests");
    assert_eq!(
        hits,
        Some(total as f64),
        "last scraped hit counter vs the run's hits + warm-up"
    );
}

/// Counters move once per interval and Prometheus scrapes on its own clock at the same period:
/// without the samples' own timestamps a scrape sees one step twice or skips it, and a short
/// rate() window is off by a fifth. With them every evaluation is the paced rate.
#[test]
fn prometheus_rate_over_four_seconds_is_the_paced_rate_at_one_second_scrapes() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let _g = serial();
    let (_, run_id, doc) = scraped_run("paced", "16s", "15000");
    let qps = f(&doc["runs"][0], "qps");
    // Only a generator that kept its pace second by second makes "the paced rate" the truth at
    // every moment; on a machine too busy for that, the rates at now cannot be judged.
    let timeline = doc["runs"][0]["timeline"].as_array().unwrap();
    let steady = timeline[..timeline.len() - 1]
        .iter()
        .all(|row| (f(row, "qps") - 15000.0).abs() <= 150.0);
    if !steady {
        eprintln!("loadgen did not keep -R 15000 each second on this machine: not judged");
        assert!(
            (qps - 15000.0).abs() < 150.0,
            "the run kept its pace: {qps}/s"
        );
        return;
    }
    assert!(
        (qps - 15000.0).abs() < 150.0,
        "the run kept its pace: {qps}/s"
    );
    let sel = format!("test_run=\"{run_id}\"");
    // The first stored sample: the end of the run's first interval (its own timestamp), so the
    // windows below lie inside the run, whenever the connect phase let it start.
    let first = prom_api(
        &prom,
        &format!(
            "/api/v1/query?query={}&time={:.3}",
            urlencode(&format!(
                "loadgen_requests_total{{{sel},outcome=\"hit\"}}[60s]"
            )),
            now_unix()
        ),
    );
    let first = first["result"][0]["values"][0][0]
        .as_f64()
        .unwrap_or_else(|| panic!("no stored sample: {first}"));
    let q = format!("sum(rate(loadgen_requests_total{{{sel}}}[4s]))");
    // Ten consecutive evaluations, one a second, inside the run (17 s from its start).
    let rates: Vec<f64> = (0..10)
        .map(|i| {
            let t = first + 4.0 + i as f64;
            prom_query(&prom, &q, t)
                .unwrap_or_else(|| panic!("no rate at first sample + {}", 4 + i))
        })
        .collect();
    eprintln!("prometheus rate[4s] at 1 s steps: {rates:?}; loadgen {qps}/s");
    // A window that lost a scrape (Prometheus itself starved on a busy machine) makes rate()
    // extrapolate short: a fault of the scrape, not of the counters, so it is not judged.
    let whole: Vec<bool> = (0..10)
        .map(|i| window_whole(&prom, &sel, Some(first + 4.0 + i as f64)))
        .collect();
    if whole.iter().filter(|w| **w).count() < 5 {
        eprintln!("Prometheus lost scrapes in most windows on this machine: not judged {whole:?}");
        return;
    }
    for (r, _) in rates.iter().zip(&whole).filter(|(_, w)| **w) {
        assert!(
            (r - 15000.0).abs() <= 15000.0 * 0.05,
            "rate {r:.0}/s is more than 5% off the paced 15000/s: {rates:?} (whole windows {whole:?})"
        );
    }
}

/// Whether Prometheus stored all four samples (one a second) of the run in the 4 s window
/// ending at `t` (None: now).
fn window_whole(prom: &str, sel: &str, t: Option<f64>) -> bool {
    let q = format!("count_over_time(loadgen_requests_total{{{sel},outcome=\"hit\"}}[4s])");
    let at = t.map_or(String::new(), |t| format!("&time={t:.3}"));
    let data = prom_api(prom, &format!("/api/v1/query?query={}{at}", urlencode(&q)));
    data["result"][0]["value"][1]
        .as_str()
        .and_then(|v| v.parse::<f64>().ok())
        .is_some_and(|n| n >= 4.0)
}

/// Where in its second Prometheus scrapes `127.0.0.1:port` (0 <= phase < 1), from the target's
/// last scrape time; None before its first scrape.
fn scrape_phase(prom: &str, port: u16) -> Option<f64> {
    let data = prom_api(prom, "/api/v1/targets?state=active");
    let want = format!("127.0.0.1:{port}");
    let t = data["activeTargets"]
        .as_array()?
        .iter()
        .find(|t| t["labels"]["instance"] == want.as_str())?;
    let last = t["lastScrape"].as_str()?;
    // 2026-12-05T02:50:01.123456789Z or ...+00:00: the fraction of the second is all we need.
    let frac = last.split_once('.').map_or("", |(_, f)| f);
    let digits: String = frac.chars().take_while(|c| c.is_ascii_digit()).collect();
    format!("0.{digits}").parse().ok()
}

/// RFC 3339 (UTC, milliseconds) of a Unix time.
fn rfc3339_ms(unix: f64) -> String {
    let (y, m, d, h, mi, s) = loadgen::date::civil(unix.floor() as i64);
    let ms = ((unix - unix.floor()) * 1000.0) as u32;
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// Grafana, alerting and recording rules evaluate at "now", not at a stored sample's time: the
/// counters a scrape reads are current when it lands, so rate() at now is the paced rate, in an
/// instant query and at the last point of a range query ending now.
///
/// A design that publishes each interval's totals stamped with the interval's end (as loadgen
/// once did) is exact only when the newest stamp is fresh at query time. So the run is started
/// (`--start-at`) with its intervals ending half a second before each scrape, and the instant
/// queries are 1.1 s apart, visiting every point of the scrape cycle: such a design reads short
/// at some of them.
#[test]
fn prometheus_rate_at_now_is_the_paced_rate() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let _g = serial();
    let start_at = |port: u16| {
        let deadline = Instant::now() + Duration::from_secs(5);
        let phase = loop {
            if let Some(p) = scrape_phase(&prom, port) {
                break p;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never scraped 127.0.0.1:{port}"
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        // The measured window opens after the 1 s warm-up, at phase + 0.5 of a second.
        let at = now_unix().ceil() + 2.0 + (phase + 0.5 - 1.0).rem_euclid(1.0);
        vec!["--start-at".to_string(), rfc3339_ms(at)]
    };
    let (child, _, run_id) = start_scraped_run("now", "24s", "15000", start_at);
    let sel = format!("test_run=\"{run_id}\"");
    let q = format!("sum(rate(loadgen_requests_total{{{sel}}}[4s]))");
    let instant = |q: &str| -> Option<f64> {
        let data = prom_api(&prom, &format!("/api/v1/query?query={}", urlencode(q)));
        let r = data["result"].as_array().unwrap().first().cloned()?;
        Some(r["value"][1].as_str().unwrap().parse().unwrap())
    };
    // The first scrape of the run, then 5 s more, so every 4 s window below lies inside it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while instant(&format!("loadgen_requests_total{{{sel},outcome=\"hit\"}}")).is_none() {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped the run"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(5));
    let mut rates = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..10 {
        rates.push(instant(&q).expect("a rate at now"));
        whole.push(window_whole(&prom, &sel, None));
        std::thread::sleep(Duration::from_millis(1100));
    }
    let end = now_unix();
    let range = prom_api(
        &prom,
        &format!(
            "/api/v1/query_range?query={}&start={:.3}&end={end:.3}&step=1",
            urlencode(&q),
            end - 10.0
        ),
    );
    let values = range["result"][0]["values"].as_array().cloned();
    let last: f64 = values
        .and_then(|v| v.last().cloned())
        .and_then(|p| p[1].as_str().map(|s| s.parse().unwrap()))
        .unwrap_or_else(|| panic!("no range result: {range}"));
    let (code, doc, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let qps = f(&doc["runs"][0], "qps");
    eprintln!("rate[4s] at now, 1.1 s apart: {rates:?}; range query's last point {last:.0}; loadgen {qps}/s");
    assert!(
        (qps - 15000.0).abs() < 150.0,
        "the run kept its pace: {qps}/s"
    );
    // As above: a window that lost a scrape is Prometheus's, not judged.
    if whole.iter().filter(|w| **w).count() < 5 {
        eprintln!("Prometheus lost scrapes in most windows on this machine: not judged {whole:?}");
        return;
    }
    let judged = rates
        .iter()
        .zip(&whole)
        .filter(|(_, w)| **w)
        .map(|(r, _)| r);
    for r in judged.chain(whole[9].then_some(&last)) {
        assert!(
            (r - 15000.0).abs() <= 15000.0 * 0.05,
            "rate {r:.0}/s at now is more than 5% off the paced 15000/s: {rates:?}, range {last:.0} (whole windows {whole:?})"
        );
    }
}
