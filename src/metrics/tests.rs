use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::mix::Op;
use crate::outcome::{ErrorKind, Outcome};
use crate::recorder::Recorder;
use crate::totals::Totals;

const V: &str = env!("CARGO_PKG_VERSION");

#[allow(clippy::too_many_arguments)]
fn view<'a>(
    kind: &'a str,
    index: usize,
    run_start: f64,
    totals: &'a Totals,
    interval: &'a Totals,
    interval_s: f64,
    last: bool,
    rate: Option<f64>,
) -> IntervalView<'a> {
    IntervalView {
        target: "http://127.0.0.1:1/usr/{key}",
        kind,
        target_index: index,
        start_s: 0.0,
        end_s: interval_s,
        warm: false,
        last,
        run_start_unix: run_start,
        totals,
        interval,
        interval_s,
        in_flight: 7,
        connections: 16,
        rate,
        row: None,
        cells: None,
    }
}

fn shared(instance: Option<&str>, labels: &[(&str, &str)]) -> Shared {
    let cfg = MetricsConfig {
        addr: "127.0.0.1:0".into(),
        linger: Duration::ZERO,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        instance: instance.map(str::to_string),
    };
    Shared::new(common_labels(&cfg).unwrap())
}

/// Known counts: 1000 hits (990 counted + 10 in the warm-up), 50 misses, 6 errors.
fn known_totals() -> Totals {
    let mut r = Recorder::new(0, false);
    for _ in 0..590 {
        r.record(false, (Op::Read, 0, 0, 15_000), Ok(Outcome::Hit)); // 15 us
    }
    for _ in 0..300 {
        r.record(false, (Op::Read, 100, 200, 1_500_100), Ok(Outcome::Hit)); // 1.5 ms
    }
    for _ in 0..100 {
        r.record(false, (Op::Read, 0, 0, 250_000_000), Ok(Outcome::Hit)); // 250 ms
    }
    for _ in 0..50 {
        r.record(false, (Op::Read, 0, 0, 8_000), Ok(Outcome::Miss)); // 8 us
    }
    for _ in 0..3 {
        r.record(
            false,
            (Op::Read, 0, 0, 5_000_000_000),
            Err(ErrorKind::Timeout),
        ); // 5 s
    }
    for _ in 0..10 {
        r.record(true, (Op::Read, 0, 0, 1_000), Ok(Outcome::Hit));
    }
    r.record(true, (Op::Read, 0, 0, 1_000), Err(ErrorKind::Io));
    r.record(true, (Op::Read, 0, 0, 1_000), Err(ErrorKind::Io));
    r.record_error(false, ErrorKind::Connect, "refused");
    for _ in 0..4 {
        r.reconnected();
    }
    let mut t = Totals::default();
    t += &r.take(0, false);
    t
}

/// 500 counted and 100 warm-up hits in half a second: 1200 lookups/s.
fn known_interval() -> Totals {
    let mut r = Recorder::new(0, false);
    for i in 0..600 {
        r.record(i < 100, (Op::Read, 0, 0, 10_000), Ok(Outcome::Hit));
    }
    let mut t = Totals::default();
    t += &r.take(0, false);
    t
}

fn golden_text() -> String {
    let buckets = [
        ("1e-05", 50),
        ("2e-05", 640),
        ("5e-05", 640),
        ("0.0001", 640),
        ("0.0002", 640),
        ("0.0005", 640),
        ("0.001", 640),
        ("0.002", 940),
        ("0.005", 940),
        ("0.01", 940),
        ("0.02", 940),
        ("0.05", 940),
        ("0.1", 940),
        ("0.2", 940),
        ("0.5", 1040),
        ("1.0", 1040),
        ("2.0", 1040),
        ("5.0", 1043),
        ("10.0", 1043),
        ("+Inf", 1043),
    ];
    let mut s = format!(
        "# HELP loadgen_build_info Always 1; the version label is the loadgen version.
# TYPE loadgen_build_info gauge
loadgen_build_info{{version=\"{V}\"}} 1
# HELP loadgen_requests_total Completed requests by outcome (hit, miss, error), warm-up included.
# TYPE loadgen_requests_total counter
loadgen_requests_total{{target=\"embedded\",outcome=\"hit\"}} 1000
loadgen_requests_total{{target=\"embedded\",outcome=\"miss\"}} 50
loadgen_requests_total{{target=\"embedded\",outcome=\"error\"}} 6
# HELP loadgen_errors_total Failed requests by kind (connect, io, timeout, server, protocol, verify, duplicate, deadlock, serialization, readonly), warm-up included.
# TYPE loadgen_errors_total counter
loadgen_errors_total{{target=\"embedded\",kind=\"connect\"}} 1
loadgen_errors_total{{target=\"embedded\",kind=\"io\"}} 2
loadgen_errors_total{{target=\"embedded\",kind=\"timeout\"}} 3
loadgen_errors_total{{target=\"embedded\",kind=\"server\"}} 0
loadgen_errors_total{{target=\"embedded\",kind=\"protocol\"}} 0
loadgen_errors_total{{target=\"embedded\",kind=\"verify\"}} 0
loadgen_errors_total{{target=\"embedded\",kind=\"duplicate\"}} 0
loadgen_errors_total{{target=\"embedded\",kind=\"deadlock\"}} 0
loadgen_errors_total{{target=\"embedded\",kind=\"serialization\"}} 0
loadgen_errors_total{{target=\"embedded\",kind=\"readonly\"}} 0
# HELP loadgen_reconnects_total Connections replaced after a failure.
# TYPE loadgen_reconnects_total counter
loadgen_reconnects_total{{target=\"embedded\"}} 4
# HELP loadgen_request_duration_seconds {}
# TYPE loadgen_request_duration_seconds histogram
",
        render::FAMILIES[4].help
    );
    for (le, n) in buckets {
        s += &format!(
            "loadgen_request_duration_seconds_bucket{{target=\"embedded\",le=\"{le}\"}} {n}\n"
        );
    }
    s += "loadgen_request_duration_seconds_sum{target=\"embedded\"} SUM
loadgen_request_duration_seconds_count{target=\"embedded\"} 1043
# HELP loadgen_qps Answered lookups (hits and misses) per second in the last interval, warm-up included; 0 once the target's run has ended.
# TYPE loadgen_qps gauge
loadgen_qps{target=\"embedded\"} 1200
# HELP loadgen_in_flight_requests Requests sent and not yet answered at the end of the last interval.
# TYPE loadgen_in_flight_requests gauge
loadgen_in_flight_requests{target=\"embedded\"} 7
# HELP loadgen_connections Open connections at the end of the last interval.
# TYPE loadgen_connections gauge
loadgen_connections{target=\"embedded\"} 16
# HELP loadgen_target_rate The fixed rate asked for with --rate, in requests per second (absent in closed-loop runs).
# TYPE loadgen_target_rate gauge
loadgen_target_rate{target=\"embedded\"} 3000
";
    s
}

/// The exposition without the samples' timestamps (every per-target sample has one; the
/// timestamp test checks them).
fn untimed(text: &str) -> String {
    let out: Vec<&str> = text
        .lines()
        .map(|l| {
            if l.starts_with('#') || l.starts_with("loadgen_build_info") {
                l
            } else {
                l.rsplit_once(' ').map_or(l, |(sample, _)| sample)
            }
        })
        .collect();
    out.join("\n") + "\n"
}

/// Replaces the `_sum` value (HdrHistogram's slot midpoints make it inexact) with SUM and
/// returns it.
fn take_sum(text: &str) -> (String, f64) {
    let mut sum = f64::NAN;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("loadgen_request_duration_seconds_sum") {
                let (k, v) = l.rsplit_once(' ').unwrap();
                sum = v.parse().unwrap();
                format!("{k} SUM")
            } else {
                l.to_string()
            }
        })
        .collect();
    (out.join("\n") + "\n", sum)
}

#[test]
fn golden_exposition_text_with_known_counts() {
    let s = shared(None, &[]);
    let (t, iv) = (known_totals(), known_interval());
    s.update(&view("embedded", 0, 1.0, &t, &iv, 0.5, false, Some(3000.0)));
    let text = untimed(&s.render(Format::Text));
    for line in [
        "loadgen_requests_total{target=\"embedded\",outcome=\"hit\"} 1000",
        "loadgen_errors_total{target=\"embedded\",kind=\"verify\"} 0",
        "loadgen_errors_total{target=\"embedded\",kind=\"duplicate\"} 0",
        "loadgen_errors_total{target=\"embedded\",kind=\"deadlock\"} 0",
        "loadgen_errors_total{target=\"embedded\",kind=\"serialization\"} 0",
        "loadgen_errors_total{target=\"embedded\",kind=\"readonly\"} 0",
        "loadgen_request_duration_seconds_bucket{target=\"embedded\",le=\"0.002\"} 940",
        "loadgen_request_duration_seconds_bucket{target=\"embedded\",le=\"+Inf\"} 1043",
        "loadgen_request_duration_seconds_count{target=\"embedded\"} 1043",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    let (masked, sum) = take_sum(&text);
    assert_eq!(masked, golden_text());
    // 590 x 15 us + 300 x 1.5 ms + 100 x 250 ms + 50 x 8 us + 3 x 5 s, to HdrHistogram's 0.1%.
    let want = 590.0 * 15e-6 + 300.0 * 1.5e-3 + 100.0 * 0.25 + 50.0 * 8e-6 + 3.0 * 5.0;
    assert!((sum - want).abs() / want < 1e-3, "sum {sum} vs {want}");
}

#[test]
fn a_mix_that_writes_labels_requests_and_latency_by_op() {
    let mut r = Recorder::new(0, true);
    for _ in 0..90 {
        r.record(false, (Op::Read, 0, 0, 15_000), Ok(Outcome::Hit));
    }
    for _ in 0..7 {
        r.record(false, (Op::Update, 0, 0, 1_500_000), Ok(Outcome::Hit));
    }
    for _ in 0..3 {
        r.record(false, (Op::Update, 0, 0, 1_500_000), Ok(Outcome::Miss));
    }
    let mut t = Totals::default();
    t += &r.take(0, false);
    let s = shared(None, &[]);
    s.update(&view("embedded", 0, 1.0, &t, &t, 1.0, false, None));
    let text = untimed(&s.render(Format::Text));
    for line in [
        "loadgen_requests_total{target=\"embedded\",op=\"read\",outcome=\"hit\"} 90",
        "loadgen_requests_total{target=\"embedded\",op=\"update\",outcome=\"hit\"} 7",
        "loadgen_requests_total{target=\"embedded\",op=\"update\",outcome=\"miss\"} 3",
        "loadgen_request_duration_seconds_bucket{target=\"embedded\",op=\"read\",le=\"2e-05\"} 90",
        "loadgen_request_duration_seconds_bucket{target=\"embedded\",op=\"update\",le=\"0.001\"} 0",
        "loadgen_request_duration_seconds_count{target=\"embedded\",op=\"update\"} 10",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    // Ops without requests have no series; no series lacks the op label.
    assert!(!text.contains("op=\"insert\""));
    assert!(!text.contains("loadgen_requests_total{target=\"embedded\",outcome"));
}

#[test]
fn openmetrics_names_counter_families_without_total_and_ends_with_eof() {
    let s = shared(None, &[]);
    let (t, iv) = (known_totals(), known_interval());
    s.update(&view("embedded", 0, 1.0, &t, &iv, 0.5, false, None));
    let om = untimed(&s.render(Format::OpenMetrics));
    assert!(om.ends_with("\n# EOF\n"), "{om}");
    assert_eq!(om.matches("# EOF").count(), 1);
    for l in [
        "# TYPE loadgen_requests counter",
        "# HELP loadgen_requests Completed requests by outcome (hit, miss, error), warm-up included.",
        "# TYPE loadgen_errors counter",
        "# TYPE loadgen_reconnects counter",
        "# TYPE loadgen_request_duration_seconds histogram",
        "# UNIT loadgen_request_duration_seconds seconds",
        "loadgen_requests_total{target=\"embedded\",outcome=\"hit\"} 1000",
        "loadgen_request_duration_seconds_count{target=\"embedded\"} 1043",
    ] {
        assert!(om.lines().any(|x| x == l), "missing {l:?} in\n{om}");
    }
    assert!(!om.contains("# TYPE loadgen_requests_total"));
    // Without a rate there is no target_rate family.
    assert!(!om.contains("loadgen_target_rate"));
    // Both formats carry the same samples.
    let samples = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(samples(&om), samples(&untimed(&s.render(Format::Text))));
}

#[test]
fn before_the_first_interval_only_build_info() {
    let s = shared(Some("gen1"), &[]);
    let text = s.render(Format::Text);
    assert_eq!(
        text,
        format!(
            "# HELP loadgen_build_info Always 1; the version label is the loadgen version.\n\
             # TYPE loadgen_build_info gauge\n\
             loadgen_build_info{{version=\"{V}\",instance_name=\"gen1\"}} 1\n"
        )
    );
}

#[test]
fn every_series_carries_instance_name_and_run_labels_escaped() {
    let s = shared(
        Some("gen \"a\"\\b\nc"),
        &[("region", "eu"), ("note", "x\"y")],
    );
    let (t, iv) = (known_totals(), known_interval());
    s.update(&view("postgres", 0, 1.0, &t, &iv, 1.0, false, Some(10.0)));
    let text = s.render(Format::Text);
    let tail = r#"instance_name="gen \"a\"\\b\nc",region="eu",note="x\"y"}"#;
    let mut n = 0;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.contains(tail), "{l}");
        n += 1;
    }
    assert!(n > 30, "{n}");
    assert!(text.contains(&format!(
        "loadgen_requests_total{{target=\"postgres\",outcome=\"hit\",{tail} 1000"
    )));
    // Every line is one line: the newline in the value is escaped.
    assert!(text
        .lines()
        .all(|l| l.starts_with('#') || l.starts_with("loadgen_")));
}

#[test]
fn repeated_kinds_get_an_index_suffix() {
    let s = shared(None, &[]);
    let (t, iv) = (known_totals(), known_interval());
    for (kind, i) in [
        ("postgres", 0),
        ("memcache", 1),
        ("postgres", 2),
        ("postgres", 2),
    ] {
        s.update(&view(kind, i, 1.0 + i as f64, &t, &iv, 1.0, false, None));
    }
    let text = s.render(Format::Text);
    let targets: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("loadgen_reconnects_total"))
        .map(|l| l.split('"').nth(1).unwrap())
        .collect();
    assert_eq!(targets, ["postgres", "memcache", "postgres_2"]);
}

#[test]
fn counters_stay_monotonic_over_the_runs_of_a_sweep() {
    let s = shared(None, &[]);
    let (t, iv) = (known_totals(), known_interval());
    let empty = Totals::default();
    // Run 1 ends; run 2 (a new run_start) begins from zero totals, then reaches the same counts.
    s.update(&view("embedded", 0, 100.0, &t, &iv, 1.0, true, None));
    s.update(&view(
        "embedded", 0, 200.0, &empty, &empty, 1.0, false, None,
    ));
    let mid = untimed(&s.render(Format::Text));
    assert!(mid.contains("loadgen_requests_total{target=\"embedded\",outcome=\"hit\"} 1000\n"));
    s.update(&view("embedded", 0, 200.0, &t, &iv, 1.0, false, None));
    let text = untimed(&s.render(Format::Text));
    assert!(text.contains("loadgen_requests_total{target=\"embedded\",outcome=\"hit\"} 2000\n"));
    assert!(text.contains("loadgen_errors_total{target=\"embedded\",kind=\"timeout\"} 6\n"));
    assert!(text.contains("loadgen_reconnects_total{target=\"embedded\"} 8\n"));
    assert!(text.contains("loadgen_request_duration_seconds_count{target=\"embedded\"} 2086\n"));
    assert!(text.contains(
        "loadgen_request_duration_seconds_bucket{target=\"embedded\",le=\"+Inf\"} 2086\n"
    ));
}

#[test]
fn the_last_interval_zeroes_the_live_gauges() {
    let s = shared(None, &[]);
    let (t, iv) = (known_totals(), known_interval());
    s.update(&view("embedded", 0, 1.0, &t, &iv, 0.5, true, Some(5.0)));
    let text = untimed(&s.render(Format::Text));
    for l in [
        "loadgen_qps{target=\"embedded\"} 0",
        "loadgen_in_flight_requests{target=\"embedded\"} 0",
        "loadgen_connections{target=\"embedded\"} 0",
        "loadgen_target_rate{target=\"embedded\"} 5",
        "loadgen_requests_total{target=\"embedded\",outcome=\"hit\"} 1000",
    ] {
        assert!(text.lines().any(|x| x == l), "missing {l:?}");
    }
}

#[test]
fn every_sample_carries_the_time_its_interval_ended() {
    let s = shared(None, &[]);
    let (t, iv) = (known_totals(), known_interval());
    // Run start 1700000000.25 s, interval end 0.5 s later.
    let at = |last| view("embedded", 0, 1_700_000_000.25, &t, &iv, 0.5, last, None);
    s.update(&at(false));
    let stamps = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("loadgen_build_info"))
            .map(|l| l.rsplit_once(' ').unwrap().1.to_string())
            .collect()
    };
    let text = stamps(&s.render(Format::Text));
    assert!(text.len() > 30, "{text:?}");
    assert!(text.iter().all(|x| x == "1700000000750"), "{text:?}");
    let om = stamps(&s.render(Format::OpenMetrics));
    assert!(om.iter().all(|x| x == "1700000000.750"), "{om:?}");
    // The build info has no time: it is true whenever it is scraped.
    assert!(s
        .render(Format::Text)
        .contains(&format!("loadgen_build_info{{version=\"{V}\"}} 1\n")));
    // An update for the same interval end (the final one of a run) still moves the time on:
    // Prometheus drops a changed value under a timestamp it has already stored.
    s.update(&at(true));
    let again = stamps(&s.render(Format::Text));
    assert!(again.iter().all(|x| x == "1700000000751"), "{again:?}");
}

#[test]
fn bucket_bounds_are_ascending_and_their_labels_match() {
    for w in BUCKETS.windows(2) {
        assert!(w[0].1 < w[1].1);
    }
    for (le, ns) in BUCKETS {
        let v: f64 = le.parse().unwrap();
        assert_eq!((v * 1e9).round() as u64, ns, "{le}");
    }
    assert_eq!(BUCKETS[0].1, 10_000);
    assert!(BUCKETS.iter().any(|b| b.1 == 1_000_000_000));
}

#[test]
fn accept_header_negotiation() {
    use Format::*;
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    for (accept, want) in [
        (None, Text),
        (Some(""), Text),
        (Some("*/*"), Text),
        (Some("text/plain"), Text),
        (Some("application/openmetrics-text"), OpenMetrics),
        (
            Some("application/openmetrics-text; version=1.0.0"),
            OpenMetrics,
        ),
        (
            Some("Application/OpenMetrics-Text;Version=\"1.0.0\";q=0.9"),
            OpenMetrics,
        ),
        (Some("application/openmetrics-text;version=0.0.1"), Text),
        (
            Some("application/openmetrics-text;q=0.2,text/plain;q=0.8"),
            Text,
        ),
        (Some("application/openmetrics-text;q=0"), Text),
        (Some(prometheus), OpenMetrics),
        (Some("text/plain;version=0.0.4;q=0.5,*/*;q=0.1"), Text),
    ] {
        assert_eq!(Format::negotiate(accept), want, "{accept:?}");
    }
}

fn cfg(addr: &str) -> MetricsConfig {
    MetricsConfig {
        addr: addr.into(),
        linger: Duration::ZERO,
        labels: Vec::new(),
        instance: None,
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
