//! The default target: nothing installed, the embedded HTTP server in-process.

mod common;
use common::*;

#[test]
fn embedded_default_runs_with_qps_and_no_errors() {
    let (code, doc, err) = run_json(&[
        "-d", "2s", "--warmup", "500ms", "--keys", "1-100000", "-c", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(r["kind"], "embedded");
    assert!(f(r, "qps") > 0.0);
    assert_eq!(u(r, "error_total"), 0);
    assert!(u(r, "hits") > 0);
    // The server's own counter saw exactly what loadgen sent, warm-up included.
    assert_eq!(
        r["server_observed"]["matches"], true,
        "{}",
        r["server_observed"]
    );
    assert!(!r["timeline"].as_array().unwrap().is_empty());
    assert_schema_valid(&doc);
}

#[test]
fn embedded_verify_and_exact_count() {
    let (code, doc, err) = run_json(&[
        "-n", "50000", "--keys", "1-50000", "--dist", "seq", "--verify", "-c", "4", "-p", "4",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 50000);
    assert_eq!(u(r, "error_total"), 0);
    assert_eq!(u(&r["server_observed"], "delta"), 50000);
}

#[test]
fn result_file_is_written_atomically_and_valid() {
    let dir = std::env::temp_dir().join(format!("loadgen-test-{}", std::process::id()));
    let path = dir.join("r.json");
    let out = run(&[
        "run",
        "-n",
        "1000",
        "--keys",
        "1-1000",
        "-o",
        path.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(u(&doc["runs"][0], "hits"), 1000);
    assert_schema_valid(&doc);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path() != path)
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
