//! `loadgen run --repeat RESULT.json`: the settings and targets of an earlier result run again,
//! the command line said on stderr; flags given beside it override single settings.

mod common;
use common::*;

use std::path::PathBuf;

fn dir(tag: &str) -> TempDir {
    TempDir::new(&format!("lg-repeat-{tag}"))
}

/// Runs `args` writing the result to `out`; the result and stderr.
fn run_to(out: &PathBuf, args: &[&str]) -> (serde_json::Value, String) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", out.to_str().unwrap(), "-q"]);
    let o = run(&all);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    (
        serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap(),
        err,
    )
}

#[test]
fn a_repeat_has_the_same_settings_and_keys_and_overrides_what_is_given() {
    let d = dir("emb");
    let (first, _) = run_to(
        &d.join("a.json"),
        &[
            "-n",
            "3000",
            "-c",
            "4",
            "-p",
            "2",
            "--keys",
            "1-5000",
            "--dist",
            "zipf:0.9",
            "--seed",
            "9",
            "--timeout",
            "2s",
            "--verify",
        ],
    );
    let (again, err) = run_to(
        &d.join("b.json"),
        &["--repeat", d.join("a.json").to_str().unwrap()],
    );
    assert!(err.contains("loadgen: repeating "), "{err}");
    assert!(
        err.contains("--seed 9") && err.contains("--dist zipf:0.9"),
        "{err}"
    );
    assert_eq!(first["settings"], again["settings"]);
    assert_eq!(again["runs"][0]["kind"], "embedded");
    assert_eq!(u(&again["runs"][0], "hits"), 3000);
    // Overrides: -c replaces the file's; -d replaces its -n.
    let (other, _) = run_to(
        &d.join("c.json"),
        &[
            "--repeat",
            d.join("a.json").to_str().unwrap(),
            "-c",
            "2",
            "-d",
            "1s",
        ],
    );
    let s = &other["settings"];
    assert_eq!(
        (s["connections"].as_u64(), s["seed"].as_u64()),
        (Some(2), Some(9))
    );
    assert_eq!(
        (s["requests"].is_null(), s["duration_s"].as_f64()),
        (true, Some(1.0))
    );
}

/// A PostgreSQL result repeats against the same server, its password from the environment;
/// the repeat's count is the server's own.
#[test]
fn a_postgres_result_repeats_and_the_server_counts_it() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let d = dir("pg");
    let (first, _) = run_to(
        &d.join("a.json"),
        &[
            &url, "-n", "4000", "-c", "4", "--dist", "seq", "--keys", "1-4000", "--verify",
        ],
    );
    let seen = OwnCount::before("pg_stat_statements.calls", &url);
    let (again, _) = run_to(
        &d.join("b.json"),
        &["--repeat", d.join("a.json").to_str().unwrap()],
    );
    let r = &again["runs"][0];
    assert_eq!(again["settings"], first["settings"]);
    assert_eq!(u(r, "hits"), 4000);
    seen.assert_saw(r, 4000, &url);
}

#[test]
fn a_file_that_is_no_result_is_one_line_exit_2() {
    let d = dir("bad");
    let p = d.join("x.json");
    std::fs::write(&p, "{}").unwrap();
    let o = run(&["run", "--repeat", p.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("is not a loadgen result file"), "{err}");
}
