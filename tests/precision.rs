//! Every run's 95% CIs (docs/statistics.md) against a real server: present and around the
//! run's own figures, missing with a reason when the run is too short or its intervals too
//! thin for a percentile, per op of a mix, and in the text report.

mod common;
use common::*;

fn ci(figures: &serde_json::Value, name: &str) -> (f64, f64) {
    let c = &figures[name];
    assert!(c["none"].is_null(), "{name}: {c}");
    (f(c, "low"), f(c, "high"))
}

#[test]
fn a_run_has_intervals_around_its_figures() {
    // A server of known service time: its p50 cannot be below 1 ms, so an interval below it
    // would be made of something else.
    let s = Served::start_with(100_000, &["--delay", "1ms"]);
    let (code, doc, err) = run_json(&[
        &s.url,
        "-d",
        "6s",
        "--warmup",
        "500ms",
        "--interval",
        "500ms",
        "-c",
        "16",
        "--keys",
        "1-100000",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_schema_valid(&doc);
    let r = &doc["runs"][0];
    let p = &r["precision"];
    // 12 intervals of 500 ms; a last cut one is left out.
    assert!((11..=12).contains(&u(p, "intervals")), "{p}");
    let (lo, hi) = ci(p, "qps");
    let qps = f(r, "qps");
    assert!(lo <= qps && qps <= hi && lo > 0.0, "{lo} {qps} {hi}");
    // 16 connections of 1 ms answer at most 16,000 a second: the interval lies under it.
    assert!(hi < 16_000.0 * 1.05, "{hi}");
    for name in ["p50", "p99"] {
        let (lo, hi) = ci(p, name);
        let v = f(&r["latency_us"], name);
        assert!(lo <= v && v <= hi, "{name}: {lo} {v} {hi}");
    }
    // The p50's interval is narrow, so it keeps to the server's floor; a p99's may reach below
    // it when the tail moves between intervals.
    let (lo, _) = ci(p, "p50");
    assert!(lo >= 1_000.0, "p50: {lo} under the server's 1 ms");
    // Under 8,000 answers per interval hold a p99 (10 in its tail need 1,000) but not a p99.9.
    let none = p["p999"]["none"].as_str().unwrap_or_else(|| panic!("{p}"));
    assert!(none.contains("needs 10000"), "{none}");
}

#[test]
fn a_short_run_says_why_it_has_none() {
    let (code, doc, err) = run_json(&["-d", "1s", "--warmup", "200ms", "--keys", "1-1000"]);
    assert_eq!(code, 0, "{err}");
    assert_schema_valid(&doc);
    let none = doc["runs"][0]["precision"]["qps"]["none"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", doc["runs"][0]["precision"]));
    assert!(none.contains("0 whole intervals; a CI needs 5"), "{none}");
}

#[test]
fn each_op_of_a_mix_has_its_own() {
    let (code, doc, err) = run_json(&[
        "-d",
        "3s",
        "--warmup",
        "300ms",
        "--interval",
        "250ms",
        "--keys",
        "1-10000",
        "--mix",
        "read=80,update=20",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_schema_valid(&doc);
    let r = &doc["runs"][0];
    for op in ["read", "update"] {
        let o = &r["ops"][op];
        let (lo, hi) = ci(&o["precision"], "qps");
        let qps = f(o, "qps");
        assert!(lo <= qps && qps <= hi, "{op}: {lo} {qps} {hi}");
    }
    // The ops' rates are a fifth and four fifths of the run's: so are their intervals.
    let (rl, rh) = ci(&r["ops"]["read"]["precision"], "qps");
    let (ul, uh) = ci(&r["ops"]["update"]["precision"], "qps");
    assert!(rl > uh && rh > ul, "read [{rl}, {rh}] update [{ul}, {uh}]");
}

#[test]
fn the_text_report_shows_them() {
    let dir = TempDir::new("loadgen-ci");
    let json = dir.join("r.json");
    let out = run(&[
        "run",
        "-d",
        "2s",
        "--warmup",
        "200ms",
        "--interval",
        "100ms",
        "--keys",
        "1-1000",
        "-q",
        "-o",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let requests = text.lines().find(|l| l.starts_with("requests")).unwrap();
    assert!(requests.contains(" qps ±"), "{requests}");
    let line = text.lines().find(|l| l.starts_with("95% CI")).unwrap();
    assert!(line.contains("p50 [") && line.contains("from "), "{line}");
}

#[test]
fn ci_stops_a_run_on_a_steady_server_sooner_than_on_a_noisy_one() {
    let steady = Served::start_with(100_000, &["--delay", "1ms"]);
    // Each 700 ms the noisy one's delay is scaled by a factor in [0.2, 1.8].
    let noisy = Served::start_with(100_000, &["--delay", "1ms", "--noise", "80%,700ms"]);
    let run = |url: &str| {
        let (code, doc, err) = run_json(&[
            url,
            "-c",
            "16",
            "-d",
            "8s",
            "--warmup",
            "500ms",
            "--interval",
            "200ms",
            "--ci",
            "8%",
            "--keys",
            "1-100000",
        ]);
        assert_schema_valid(&doc);
        assert_eq!(doc["settings"]["ci"], "qps=8%");
        (code, doc["runs"][0].clone(), err)
    };
    let lookups = || serve_lookups(std::net::TcpStream::connect(host_port(&steady.url)).unwrap());
    let before = lookups();
    let (code, s, err) = run(&steady.url);
    let served = lookups() - before;
    let g = &s["ci_goal"];
    assert_eq!(code, 0, "{err}\n{g}");
    assert_eq!(g["reached"], true, "{g}");
    // It stopped where it got there, from the tenth whole interval on, as a timed run ends:
    // its requests in flight answered, so the server's count is exact.
    let after = f(g, "after_s");
    assert!((2.0..8.0).contains(&after), "{g}");
    assert!(
        (f(&s, "duration_s") - after).abs() < 0.3,
        "{}",
        s["duration_s"]
    );
    assert!(f(g, "widths.qps") <= 0.08, "{g}");
    assert_eq!(u(&s, "error_total"), 0);
    assert_eq!(
        served,
        u(&s, "requests") + u(&s, "warmup_requests"),
        "the server's own count"
    );
    let (code, n, _) = run(&noisy.url);
    let g = &n["ci_goal"];
    assert_eq!(g["reached"], false, "{g}");
    assert!(f(g, "widths.qps") > 0.08, "{g}");
    assert!(
        f(&n, "duration_s") > after,
        "{} vs {after}",
        n["duration_s"]
    );
    // Not reaching it is in the verdict, and the exit says so with --strict only.
    let reasons = n["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("CI goal not reached: --ci qps=8%"),
        "{reasons}"
    );
    assert_exit_fits(code, &n, "noisy");
}

#[test]
fn bad_ci_goals_are_one_line_and_exit_2() {
    for (args, want) in [
        (&["--ci", "2"][..], "bad --ci '2'"),
        (&["--ci", "p98=2%"][..], "'p98' is not qps"),
        (
            &["--ci", "2%", "-n", "100"][..],
            "--ci runs until the CIs are narrow enough",
        ),
        (
            &["--ci", "2%", "--sweep", "1,2"][..],
            "each step of --sweep or --slo runs -d",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(one_error_line(&err).contains(want), "{args:?}: {err}");
    }
}
