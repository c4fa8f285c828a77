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
        progress_row: None,
        cells: None,
        members: None,
        precision: None,
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
        pages: crate::app::METRICS_PAGES,
    };
    Shared::new(common_labels(&cfg).unwrap(), cfg.pages)
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

mod server;
