//! `loadgen compare` on real runs: a server 10% slower is found slower with a CI that holds
//! the change, `--fail-if` gates on it (exit 4), PostgreSQL against memcached on the same data
//! gets its ratio with a CI, and bad input is one line with exit 2.

mod common;
use common::*;

use std::path::Path;

/// `loadgen run URL...` into `out` (the JSON), 6 s of 250 ms intervals, started.
fn spawn_to(out: &Path, urls: &[&str], c: &str) -> std::process::Child {
    std::process::Command::new(bin())
        .arg("run")
        .args(urls)
        .args([
            "-c",
            c,
            "-t",
            "1",
            "-d",
            "6s",
            "--warmup",
            "500ms",
            "--interval",
            "250ms",
        ])
        .args(["--keys", "1-1000", "-q", "-o", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("loadgen runs")
}

fn wait(child: std::process::Child) {
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn compare(args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut all = vec!["compare", "--format", "json"];
    all.extend_from_slice(args);
    let o = run(&all);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    (o.status.code().unwrap_or(-1), doc, err)
}

/// The change of `figure` in the comparison's row `row`.
fn change<'a>(doc: &'a serde_json::Value, row: usize, figure: &str) -> &'a serde_json::Value {
    doc["rows"][row]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == figure)
        .unwrap()
}

#[test]
fn a_server_ten_percent_slower_is_slower_with_a_ci_that_holds_it() {
    let dir = TempDir::new("loadgen-compare");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    // Both at once, so what else the machine does falls on both alike.
    let fast = Served::start_with(1000, &["--delay", "10ms"]);
    let slow = Served::start_with(1000, &["--delay", "11ms"]);
    let runs = [
        spawn_to(&a, &[&fast.url], "8"),
        spawn_to(&b, &[&slow.url], "8"),
    ];
    runs.into_iter().for_each(wait);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // Two servers are two targets: compared only when asked, and said so.
    let o = run(&["compare", a, b]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_error_line(&String::from_utf8_lossy(&o.stderr)).contains("--force"));
    let (code, doc, err) = compare(&[a, b, "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        doc["differs"][0].as_str().unwrap().starts_with("target "),
        "{doc}"
    );
    let p50 = change(&doc, 0, "p50");
    assert_eq!(p50["word"], "slower", "{p50}");
    let d = &p50["difference"];
    // The client's own share o of each answer makes the true change 10% x 10 / (10 + o ms):
    // under half a millisecond of it, 9.5% to 10%. The interval meets that range.
    assert!(
        f(d, "low") > 0.0 && f(d, "low") <= 0.10 && 0.095 <= f(d, "high"),
        "{d}"
    );
    // The gate: exit 4 and a line naming the change.
    let (code, _, err) = compare(&[a, b, "--force", "--fail-if", "p50>+3%"]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("loadgen: regression: http p50 +"), "{err}");
    let (code, _, err) = compare(&[a, b, "--force", "--fail-if", "p50>+50%,qps<-50%"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn postgres_against_memcached_on_the_same_data_gets_its_ratio() {
    let (Some(pg), Some(mc)) = (server("LOADGEN_PG_URL"), server("LOADGEN_MC_URL")) else {
        return;
    };
    let dir = TempDir::new("loadgen-compare-sql-nosql");
    let r = dir.join("r.json");
    wait(spawn_to(&r, &[&pg, &mc], "8"));
    let (code, doc, err) = compare(&[r.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["rows"][0]["target"], "memcache");
    assert_eq!(doc["differs"][0], "target postgres vs memcache");
    let qps = change(&doc, 0, "qps");
    let d = &qps["difference"];
    assert!(
        f(d, "low") <= f(d, "change") && f(d, "change") <= f(d, "high"),
        "{qps}"
    );
    let ratio = f(qps, "b") / f(qps, "a");
    assert!((f(d, "change") - (ratio - 1.0)).abs() < 1e-3, "{qps}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = TempDir::new("loadgen-compare-bad");
    let one = dir.join("one.json");
    let o = run(&["run", "-d", "1s", "-q", "-o", one.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let one = one.to_str().unwrap();
    let missing = dir.join("nope.json");
    for (args, want) in [
        (vec![one], "has one run: give two result files"),
        (vec![one, missing.to_str().unwrap()], "cannot read"),
        (
            vec![one, one, "--fail-if", "qps=5%"],
            "bad --fail-if 'qps=5%'",
        ),
    ] {
        let mut all = vec!["compare"];
        all.extend_from_slice(&args);
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(one_error_line(&err).contains(want), "{args:?}: {err}");
    }
}
