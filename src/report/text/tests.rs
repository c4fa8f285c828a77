use super::*;
use crate::result::TimelineRow;

fn run(target: &str, qps: f64) -> RunResult {
    let p = serde_json::json!({"count": 1, "min": 50.0, "mean": 90.0, "p50": 87.3, "p90": 120.0,
        "p99": 1240.0, "p999": 2100.0, "max": 3000.0});
    serde_json::from_value(serde_json::json!({
        "target": target, "kind": "hs", "started_at": "2026-12-03T10:00:00Z",
        "interrupted": false, "stopped_early": null, "duration_s": 5.0, "qps": qps,
        "requests": 5, "hits": 5, "misses": 0, "errors": {}, "error_total": 0,
        "error_samples": [], "reconnects": 0, "warmup_requests": 0,
        "latency_us": p, "service_us": p, "lag_us": null, "rate": null,
        "client_cpu": {"worker_s": 1.0, "process_s": 1.0, "per_request_us": 1.0,
            "utilization": 0.5, "saturated": false},
        "server_observed": null, "timeline": [], "histogram": ""
    }))
    .expect("a run result")
}

fn file(runs: Vec<RunResult>, sweeps: serde_json::Value) -> ResultFile {
    serde_json::from_value(serde_json::json!({
        "loadgen_version": "0", "started_at": "2026-12-03T10:00:00Z", "interrupted": false,
        "settings": {"connections": 16, "pipeline": 1, "threads": 2, "duration_s": 5.0,
            "requests": null, "warmup_s": 1.0, "keys": "1-1000", "dist": "uniform",
            "mode": "prepared", "verify": false, "timeout_ms": 1000, "interval_ms": 1000,
            "seed": 1, "rate": null, "arrival": "uniform", "query": null},
        "machine": {"cores": 2, "os": "linux", "hostname": "h"},
        "runs": runs, "sweeps": sweeps
    }))
    .expect("a result file")
}

#[test]
fn comparison_keeps_its_columns_with_a_long_url() {
    let long = format!(
        "hs://127.0.0.1:59998/loadgen/usr?mysql=mysql://bench:***@127.0.0.1:53306/loadgen{}&index=PRIMARY",
        "x".repeat(80)
    );
    let runs = vec![
        run("mysql://bench:***@127.0.0.1:53306/loadgen", 25107.0),
        run(&long, 226519.0),
        run("embedded", 108050.0),
    ];
    let table = comparison(&runs);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    // The long URL is cut to the target column, keeping its path (the table) whole and the
    // end of its options.
    let long_row = lines[2];
    assert!(
        long_row.starts_with("hs://127.0.0.1:59998/loadgen/usr?"),
        "{table}"
    );
    assert!(
        long_row.contains("…") && long_row.contains("index=PRIMARY  "),
        "{table}"
    );
    // Every row has its fields (right-aligned) ending at the same characters.
    let ends = |l: &str| -> Vec<usize> {
        let c: Vec<char> = l.chars().collect();
        (TARGET_WIDTH..c.len())
            .filter(|&i| c[i] != ' ' && c.get(i + 1).is_none_or(|&n| n == ' '))
            .collect()
    };
    for l in &lines[1..] {
        assert_eq!(l.chars().count(), lines[0].chars().count(), "{table}");
        assert_eq!(ends(l), ends(lines[1]), "{table}");
        assert_eq!(ends(l).len(), 6, "{table}");
        assert!(
            ends(l).iter().all(|e| ends(lines[0]).contains(e)),
            "{table}"
        );
    }
    assert!(table.contains("9.02x"), "{table}");
}

#[test]
fn comparison_marks_a_target_whose_verdict_is_not_valid() {
    let mut bad = run("memcache://127.0.0.1:11211", 50000.0);
    bad.verdict = crate::result::Verdict::from(vec!["client saturated".into()]);
    let runs = vec![run("embedded", 100000.0), bad];
    let table = comparison(&runs);
    let lines: Vec<&str> = table.lines().collect();
    assert!(!lines[1].contains("not valid"), "{table}");
    assert!(lines[2].ends_with("0.50x  ! not valid"), "{table}");
    assert!(lines[3].starts_with("! not valid: "), "{table}");
    let valid = comparison(&runs[..1]);
    assert!(!valid.contains("not valid"), "{valid}");
}

#[test]
fn unverified_postgres_tls_without_sslmode_names_libpqs_prefer() {
    let tls = |target: &str, kind: &str| {
        let mut r = run(target, 1.0);
        r.kind = kind.into();
        r.tls = Some(crate::result::TlsUsed {
            version: "TLSv1.3".into(),
            cipher: "TLS_AES_256_GCM_SHA384".into(),
            verified: "none".into(),
        });
        over(&r)
    };
    let plain_url = tls("postgres://u@127.0.0.1:5432/db", "postgres");
    assert!(
        plain_url.ends_with("(certificate not verified, libpq's default sslmode=prefer)"),
        "{plain_url}"
    );
    let asked = tls("postgres://u@127.0.0.1:5432/db?sslmode=require", "postgres");
    assert!(asked.ends_with("(certificate not verified)"), "{asked}");
    let redis = tls("rediss://127.0.0.1:6380", "redis");
    assert!(redis.ends_with("(certificate not verified)"), "{redis}");
}

#[test]
fn a_run_where_every_request_failed_says_so_not_0_qps() {
    let mut r = run("embedded", 0.0);
    (r.requests, r.hits, r.error_total) = (2000, 0, 2000);
    let text = render_run(&r);
    assert!(
        text.contains("2,000 in 5.00s: no request succeeded"),
        "{text}"
    );
    assert!(!text.contains("0 qps"), "{text}");
}

#[test]
fn an_interval_without_replies_shows_no_percentiles() {
    let row: TimelineRow = serde_json::from_value(serde_json::json!({"t_s": 3.0, "qps": 0.0,
        "hits": 0, "misses": 0, "errors": 40, "p50_us": 0.0, "p99_us": 0.0}))
    .unwrap();
    let line = progress_line(&row, 40, 0, 1.0);
    assert!(line.contains("p50         -  p99         -"), "{line}");
    assert!(!line.contains("0.0µs"), "{line}");
}

#[test]
fn an_slo_step_whose_run_is_not_valid_is_marked_on_its_line() {
    let step = |rate: f64, reasons: &[&str]| {
        serde_json::json!({"rate": rate, "achieved_qps": rate, "percentile_us": 900.0,
            "pass": true, "retry": false,
            "verdict": {"valid": reasons.is_empty(), "reasons": reasons}})
    };
    let mut f = file(vec![run("embedded", 1.0)], serde_json::json!([]));
    f.slo = serde_json::from_value(serde_json::json!([{"target": "embedded",
        "kind": "embedded", "slo": "p99 <= 1ms", "best_rate": 200.0, "max_qps": 400.0,
        "pass_rate": 200.0, "fail_rate": null, "stopped": "",
        "steps": [step(100.0, &[]), step(200.0, &["machine disturbed: x"])]}]))
    .unwrap();
    let text = render(&f);
    let line = |rate: &str| {
        text.lines()
            .find(|l| l.contains(&format!("rate {rate}/s")))
            .unwrap_or_else(|| panic!("no step at {rate}/s: {text}"))
    };
    assert!(!line("100").contains("not valid"), "{text}");
    assert!(
        line("200").ends_with("pass  ! not valid: machine disturbed: x"),
        "{text}"
    );
}

#[test]
fn a_sweep_names_the_connection_counts_it_swept() {
    let step = |c: u32| {
        serde_json::json!({"connections": c, "qps": 100.0 * c as f64,
        "p50_us": 80.0, "p99_us": 900.0, "errors": 0})
    };
    let sweeps = serde_json::json!([{"target": "embedded", "kind": "embedded",
        "steps": [step(1), step(2), step(4)], "peak_qps": 400.0, "peak_connections": 4}]);
    let text = render(&file(vec![run("embedded", 1.0)], sweeps));
    let settings = text.lines().next().unwrap();
    assert!(
        settings.starts_with("settings   connections swept: 1,2,4 x 1 in flight"),
        "{text}"
    );
    assert!(
        settings.contains(", 5s per step after 1s warm-up"),
        "{text}"
    );
    assert!(!settings.contains("16 connections"), "{text}");
    let plain = render(&file(vec![run("embedded", 1.0)], serde_json::json!([])));
    assert!(
        plain.starts_with("settings   16 connections x 1 in flight"),
        "{plain}"
    );
}

#[test]
fn a_writing_sweep_shows_each_write_ops_rate_and_time_per_10k() {
    let step = |c: u32, insert: f64| {
        serde_json::json!({"connections": c, "qps": insert + 500.0, "p50_us": 80.0,
        "p99_us": 900.0, "errors": 0, "ops": {"read": 500.0, "insert": insert}})
    };
    let sweep = serde_json::json!({"target": "pg", "kind": "postgres",
        "steps": [step(2, 1250.0), step(5, 4000.0), step(10, 0.0)], "peak_qps": 4500.0,
        "peak_connections": 5, "durability": {"synchronous_commit": "on", "fsync": "on"}});
    let sw: SweepResult = serde_json::from_value(sweep).unwrap();
    let table = sweep_table(&sw);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[1], "durability fsync=on  synchronous_commit=on",
        "{table}"
    );
    let cols = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        cols(lines[2]),
        [
            "connections",
            "qps",
            "insert/s",
            "10k",
            "inserts",
            "p50",
            "p99",
            "errors"
        ],
        "{table}"
    );
    // 10,000 inserts at 1,250/s take 8 s; at 4,000/s 2.5 s; none done: no time.
    assert_eq!(
        cols(lines[3])[..4],
        ["2", "1,750", "1,250", "8.00s"],
        "{table}"
    );
    assert_eq!(
        cols(lines[4])[..4],
        ["5", "4,500", "4,000", "2.50s"],
        "{table}"
    );
    assert_eq!(cols(lines[5])[..4], ["10", "500", "0", "-"], "{table}");
    // The columns line up under their (right-aligned) headers.
    for l in &lines[3..6] {
        let row = l.trim_end_matches("  <- peak");
        assert_eq!(row.chars().count(), lines[2].chars().count(), "{table}");
    }
    assert!(lines[4].ends_with("<- peak"), "{table}");
    // A read-only sweep keeps its columns.
    let mut ro = sw.clone();
    ro.durability.clear();
    ro.steps.iter_mut().for_each(|st| st.ops.clear());
    let table = sweep_table(&ro);
    assert!(
        !table.contains("insert") && !table.contains("durability"),
        "{table}"
    );
    assert_eq!(cols(table.lines().nth(1).unwrap()).len(), 5, "{table}");
}

#[test]
fn the_target_line_names_the_driver_that_ran() {
    let mut r = run("mysql://u@h:3306/db", 1.0);
    assert!(render_run(&r).starts_with("target     mysql://u@h:3306/db (hs)\n"));
    r.driver = Some("mysql_async".into());
    assert!(
        render_run(&r).starts_with("target     mysql://u@h:3306/db (hs, driver mysql_async)\n"),
        "{}",
        render_run(&r)
    );
}

#[test]
fn formats() {
    assert_eq!(thousands(1234567), "1,234,567");
    assert_eq!(thousands(12), "12");
    assert_eq!(micros(87.34), "87.3µs");
    assert_eq!(micros(1240.0), "1.24ms");
}

#[test]
fn the_progress_line_counts_down_and_names_the_target() {
    let d = RunLength::Seconds(11.0);
    assert_eq!(d.left(3.0, 0, 0.0, (0, 1)), "  left 8s");
    assert_eq!(d.left(12.0, 0, 0.0, (1, 3)), "  left 0s  target 2 of 3");
    assert_eq!(
        RunLength::Seconds(200.0).left(74.5, 0, 0.0, (0, 0)),
        "  left 2m06s"
    );
    // -n: what is left at the current rate.
    let n = RunLength::Requests(10_000);
    assert_eq!(n.left(2.0, 4_000, 1_000.0, (0, 1)), "  left 6s");
    assert_eq!(n.left(2.0, 4_000, 0.0, (0, 1)), "");
    assert_eq!(RunLength::Open.left(2.0, 0, 5.0, (2, 3)), "  target 3 of 3");
}
