//! memcached, for real: conservation against its own stats, --verify.

mod common;
use common::*;

#[test]
fn memcached_conservation_against_get_hits() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let seen = OwnCount::before("memcached get_hits+get_misses", &url);
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 20000);
    seen.assert_saw(r, 20000, "");
    assert_schema_valid(&doc);
}

#[test]
fn memcached_verify_full_range() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[
        &url, "-n", "1000000", "--dist", "seq", "--verify", "-c", "8", "-p", "16",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 1_000_000);
    assert_eq!(u(r, "error_total"), 0);
}

#[test]
fn comparison_over_embedded_postgres_and_memcached() {
    let Some(pg) = server("LOADGEN_PG_URL") else {
        return;
    };
    let Some(mc) = server("LOADGEN_MC_URL") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("loadgen-cmp-{}", std::process::id()));
    let path = dir.join("cmp.json");
    let out = run(&[
        "run",
        "embedded",
        &pg,
        &mc,
        "-n",
        "20000",
        "-c",
        "8",
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
    // one side-by-side table: a header and one row per target, relative to the first
    let header = stdout
        .lines()
        .position(|l| l.starts_with("target") && l.contains("vs 1st"))
        .expect("comparison table");
    let rows: Vec<&str> = stdout.lines().skip(header + 1).take(3).collect();
    assert!(rows[0].contains("1.00x"), "{stdout}");
    assert!(
        rows[1].starts_with("postgres://") && rows[2].starts_with("memcache://"),
        "{stdout}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        assert_eq!(u(r, "hits"), 20000, "{}", r["target"]);
        assert_eq!(
            r["server_observed"]["matches"], true,
            "{}: {}",
            r["target"], r["server_observed"]
        );
        assert_eq!(u(&r["server_observed"], "delta"), 20000);
    }
    assert_schema_valid(&doc);
    let svg =
        std::fs::read_to_string(path.with_extension("svg")).expect("bar chart beside the JSON");
    assert_eq!(svg.matches("<rect x=").count(), 3);
    let _ = std::fs::remove_dir_all(&dir);
}
