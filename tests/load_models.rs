//! Fixed rate without coordinated omission, sweeps to the peak, SLO search: for real.

mod common;
use common::*;
use std::time::Duration;

#[test]
fn fixed_rate_is_held_within_two_percent() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[
        &url, "-R", "2000", "-d", "5s", "--warmup", "500ms", "-c", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let qps = f(r, "qps");
    assert!((qps - 2000.0).abs() <= 40.0, "qps {qps}");
    assert!(
        (f(&r["rate"], "achieved") - 2000.0).abs() <= 40.0,
        "{}",
        r["rate"]
    );
    assert!(r["lag_us"].is_object(), "a paced run reports schedule lag");
}

#[test]
fn fractional_rate_below_the_connection_count() {
    let (code, doc, err) = run_json(&[
        "-R", "2.5", "-c", "4", "-d", "4s", "--warmup", "0s", "--keys", "1-1000",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "requests"), 10, "{}", doc["runs"][0]);
}

#[test]
fn a_paused_server_shows_in_corrected_latency_not_in_service_time() {
    let served = Served::start(100_000);
    let url = served.url.clone();
    // 4 connections x 1 in flight: at most 4 requests are on the wire when the server stops, far
    // fewer than 0.1% of the ~12,000, so the service-time p99.9 stays short while every request
    // due during the pause waits for it in the corrected latency.
    let h = std::thread::spawn(move || {
        run_json(&[
            &url,
            "-R",
            "2000",
            "-c",
            "4",
            "-d",
            "6s",
            "--warmup",
            "0s",
            "--keys",
            "1-100000",
            "--timeout",
            "10s",
        ])
    });
    std::thread::sleep(Duration::from_millis(2500));
    served.signal("-STOP");
    std::thread::sleep(Duration::from_secs(1));
    served.signal("-CONT");
    let (code, doc, err) = h.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let corrected = f(&r["latency_us"], "p999");
    let service = f(&r["service_us"], "p999");
    assert!(
        corrected >= 900_000.0,
        "corrected p99.9 {corrected}µs should include the 1 s pause"
    );
    assert!(service < 500_000.0, "service p99.9 {service}µs should not");
    assert_eq!(u(r, "error_total"), 0);
}

#[test]
fn sweep_over_embedded_and_postgres_finds_the_peak_and_draws_it() {
    let Some(pg) = server("LOADGEN_PG_URL") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("loadgen-sweep-{}", std::process::id()));
    let path = dir.join("sweep.json");
    let out = run(&[
        "run",
        "embedded",
        &pg,
        "--sweep",
        "1,4,16",
        "-d",
        "1s",
        "--warmup",
        "200ms",
        "-o",
        path.to_str().unwrap(),
        "-q",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("<- peak").count(), 2, "{stdout}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let sweeps = doc["sweeps"].as_array().unwrap();
    assert_eq!(sweeps.len(), 2);
    for s in sweeps {
        let steps = s["steps"].as_array().unwrap();
        assert_eq!(
            steps
                .iter()
                .map(|st| u(st, "connections"))
                .collect::<Vec<_>>(),
            vec![1, 4, 16]
        );
        let best = steps.iter().map(|st| f(st, "qps")).fold(0.0, f64::max);
        assert_eq!(f(s, "peak_qps"), best);
        assert!(best > 0.0);
    }
    assert_eq!(doc["runs"].as_array().unwrap().len(), 6);
    let svg = std::fs::read_to_string(path.with_extension("svg")).unwrap();
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert_schema_valid(&doc);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slo_search_reports_a_rate_that_meets_the_bound() {
    let (code, doc, err) = run_json(&[
        "--slo", "p99=50ms", "-d", "1s", "--warmup", "200ms", "--keys", "1-10000", "-c", "4",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    let slo = &doc["slo"][0];
    let steps = slo["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    if let Some(best) = slo["best_rate"].as_f64() {
        // the reported rate is one that passed (or the closed-loop maximum when that passed)
        assert!(steps.iter().any(
            |s| s["pass"] == true && (s["rate"].as_f64() == Some(best) || s["rate"].is_null())
        ));
    }
}
