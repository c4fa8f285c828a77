use super::*;
use crate::result::ResultFile;

/// A run of `kind` whose QPS and p50 have 95% CIs of ±`half` (a share) from 10 batches.
fn run(kind: &str, qps: f64, p50: f64, half: f64) -> serde_json::Value {
    let p = serde_json::json!({"count": 1000, "min": 1.0, "mean": p50, "p50": p50, "p90": p50,
        "p99": p50 * 2.0, "p999": p50 * 3.0, "max": p50 * 4.0});
    let ci = |c: f64| {
        serde_json::json!({"low": c * (1.0 - half), "high": c * (1.0 + half),
        "batches": 10, "batch_intervals": 1, "lag1": 0.0})
    };
    serde_json::json!({
        "target": format!("{kind}://h"), "kind": kind, "started_at": "2026-12-03T10:00:00Z",
        "interrupted": false, "stopped_early": null, "duration_s": 10.0, "qps": qps,
        "requests": 5, "hits": 5, "misses": 0, "errors": {}, "error_total": 0,
        "latency_us": p, "service_us": p, "lag_us": null, "rate": null,
        "client_cpu": {"worker_s": 1.0, "process_s": 1.0, "per_request_us": 1.0,
            "utilization": 0.5, "saturated": false},
        "server_observed": null, "timeline": [], "histogram": "",
        "precision": {"intervals": 10, "qps": ci(qps), "p50": ci(p50),
            "p90": {"none": "thin"}, "p99": ci(p50 * 2.0), "p999": {"none": "an interval answered 900 requests"}}
    })
}

fn input(name: &str, runs: Vec<serde_json::Value>, connections: u64) -> Input {
    let file: ResultFile = serde_json::from_value(serde_json::json!({
        "loadgen_version": "0", "started_at": "2026-12-03T10:00:00Z", "interrupted": false,
        "settings": {"connections": connections, "pipeline": 1, "threads": 2, "duration_s": 10.0,
            "requests": null, "warmup_s": 1.0, "keys": "1-1000", "dist": "uniform",
            "mode": "prepared", "verify": false, "timeout_ms": 1000, "interval_ms": 1000,
            "seed": 1, "rate": null, "arrival": "uniform", "query": null},
        "machine": {"cores": 2, "os": "linux"},
        "runs": runs
    }))
    .expect("a result file");
    Input {
        name: name.into(),
        file,
    }
}

fn figure<'a>(c: &'a Comparison, row: usize, name: &str) -> &'a Change {
    c.rows[row]
        .figures
        .iter()
        .find(|f| f.figure == name)
        .unwrap()
}

#[test]
fn a_change_beyond_the_noise_gets_a_word_and_one_within_it_none() {
    let a = input("a", vec![run("pg", 10_000.0, 100.0, 0.01)], 16);
    let b = input("b", vec![run("pg", 11_000.0, 100.5, 0.01)], 16);
    let c = compare(&a, Some(&b), false).unwrap();
    let q = figure(&c, 0, "qps");
    let d = q.difference.unwrap();
    assert!(
        (d.change - 0.1).abs() < 1e-9 && d.low > 0.08 && d.high < 0.12,
        "{d:?}"
    );
    assert_eq!(q.word, "faster");
    assert_eq!(figure(&c, 0, "p50").word, "no significant difference");
    // A percentile without a CI says why instead of a word.
    let p999 = figure(&c, 0, "p99.9");
    assert_eq!(p999.word, "no CI");
    assert!(p999.why.as_deref().unwrap().contains("900 requests"));
    // Latency that rose is slower.
    let b = input("b", vec![run("pg", 10_000.0, 120.0, 0.01)], 16);
    let c = compare(&a, Some(&b), false).unwrap();
    assert_eq!(figure(&c, 0, "p50").word, "slower");
    let text = render(&c);
    assert!(text.contains("+20.0% ["), "{text}");
}

#[test]
fn different_settings_or_targets_need_force_and_say_so() {
    let a = input("a", vec![run("pg", 10_000.0, 100.0, 0.01)], 16);
    let b = input("b", vec![run("pg", 10_000.0, 100.0, 0.01)], 32);
    let e = compare(&a, Some(&b), false).unwrap_err().0;
    assert!(
        e.contains("connections 16 vs 32") && e.contains("--force"),
        "{e}"
    );
    let c = compare(&a, Some(&b), true).unwrap();
    assert_eq!(c.differs, vec!["connections 16 vs 32".to_string()]);
    assert!(render(&c).contains("differs    connections 16 vs 32"));
    // One file of two targets: the second against the first, said so.
    let one = input(
        "r",
        vec![
            run("pg", 10_000.0, 100.0, 0.01),
            run("memcache", 40_000.0, 50.0, 0.01),
        ],
        16,
    );
    let c = compare(&one, None, false).unwrap();
    assert_eq!(c.rows.len(), 1);
    assert_eq!(c.differs, vec!["target pg vs memcache".to_string()]);
    assert!((figure(&c, 0, "qps").difference.unwrap().change - 3.0).abs() < 1e-9);
}

#[test]
fn fail_if_trips_only_on_a_significant_change_beyond_its_bound() {
    let f = FailIf::parse("qps<-5%,p99>+10%").unwrap();
    let a = input("a", vec![run("pg", 10_000.0, 100.0, 0.01)], 16);
    let worse = input("b", vec![run("pg", 9_000.0, 100.0, 0.01)], 16);
    let t = f.tripped(&compare(&a, Some(&worse), false).unwrap());
    assert_eq!(t.len(), 1, "{t:?}");
    assert!(t[0].what.starts_with("pg qps -10.0%"), "{t:?}");
    // -3% is significant but within the bound; -10% inside the noise is not significant.
    let near = input("b", vec![run("pg", 9_700.0, 100.0, 0.01)], 16);
    assert!(f
        .tripped(&compare(&a, Some(&near), false).unwrap())
        .is_empty());
    let noisy = input("b", vec![run("pg", 9_000.0, 100.0, 0.3)], 16);
    assert!(f
        .tripped(&compare(&a, Some(&noisy), false).unwrap())
        .is_empty());
    for bad in ["qps=5%", "x<5%", "qps<5", "qps<>5%"] {
        assert!(FailIf::parse(bad)
            .unwrap_err()
            .starts_with(&format!("bad --fail-if '{bad}'")));
    }
}
