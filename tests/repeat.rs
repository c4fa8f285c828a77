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

/// `run --help`'s flags: (short, long) of each option line.
fn help_flags() -> Vec<(Option<String>, String)> {
    let o = run(&["run", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut flags = Vec::new();
    for line in help.lines() {
        // Option lines are indented 2 (with a short name) or 6; their help text 10.
        let indent = line.len() - line.trim_start().len();
        if !line.trim_start().starts_with('-') || indent > 6 {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let long = words.iter().find(|w| w.starts_with("--")).unwrap();
        let short = words[0].strip_suffix(',').map(String::from);
        flags.push((short, long.to_string()));
    }
    assert!(flags.len() > 40, "{help}");
    flags
}

/// Runs that together give every repeated flag a value other than its default: (the
/// environment variable of the server, None for the embedded one; the flags).
const ROUND_TRIPS: &[(Option<&str>, &[&str])] = &[
    (
        None,
        &[
            "-n",
            "300",
            "-c",
            "3",
            "-t",
            "1",
            "--warmup",
            "100ms",
            "--keys",
            "1-5000",
            "--dist",
            "zipf:0.8",
            "--mode",
            "simple",
            "--verify",
            "--timeout",
            "3s",
            "--interval",
            "500ms",
            "--seed",
            "7",
            "-R",
            "3000",
            "--arrival",
            "poisson",
            "--reconnect-backoff",
            "20ms,2s",
            "--max-errors",
            "100",
            "--mix",
            "read=90,update=5,insert=5",
            "--insert-from",
            "900000",
            "--reconnect-every",
            "100",
            "--instance",
            "gen1",
            "--retries",
            "2",
            // The embedded server takes no SQL: the statements are stored all the same.
            "--query",
            "SELECT 1",
            "--query-update",
            "U",
            "--query-insert",
            "I",
            "--query-delete",
            "D",
            "--query-upsert",
            "X",
        ],
    ),
    (
        None,
        &[
            "-d",
            "0.3",
            "-p",
            "2",
            "--batch",
            "3",
            "--ci",
            "qps=50%,p99=90%",
        ],
    ),
    (
        Some("LOADGEN_PG_URL"),
        &[
            "-n",
            "200",
            "-c",
            "2",
            "--mix",
            "read=50,update=50",
            "--txn",
            "2",
            // Updates that change no row, so the shared table keeps the rows others verify.
            "--query-update",
            "UPDATE usr SET user_name = $2 WHERE user_id = $1 AND false",
        ],
    ),
    (
        Some("LOADGEN_MC_URL"),
        &[
            "-n",
            "200",
            "-c",
            "2",
            "--mix",
            "read=80,update=20",
            "--ttl",
            "60",
            "--value-size",
            "100",
            "--key-format",
            "lgrepeat:%d",
        ],
    ),
];

/// The flags of the trace round trip (from another directory, below).
const TRACE_FLAGS: &[&str] = &["--trace", "keys.txt", "--speed", "2"];

#[test]
fn every_flag_of_run_help_is_repeated_or_listed_as_not_and_tried_here() {
    let help = help_flags();
    let listed = |f: &str| {
        loadgen::repeat::REPEATED.contains(&f)
            || loadgen::repeat::NOT_REPEATED.iter().any(|(n, _)| *n == f)
    };
    let unlisted: Vec<&String> = help.iter().map(|(_, l)| l).filter(|l| !listed(l)).collect();
    assert!(
        unlisted.is_empty(),
        "flags of `run --help` in neither loadgen::repeat::REPEATED nor NOT_REPEATED: {unlisted:?}"
    );
    let all: Vec<&str> = loadgen::repeat::REPEATED
        .iter()
        .copied()
        .chain(loadgen::repeat::NOT_REPEATED.iter().map(|(n, _)| *n))
        .collect();
    let stale: Vec<&&str> = all
        .iter()
        .filter(|f| !help.iter().any(|(_, l)| l == *f))
        .collect();
    assert!(
        stale.is_empty(),
        "listed but not in `run --help`: {stale:?}"
    );
    let long_of = |a: &str| -> Option<String> {
        help.iter()
            .find(|(s, l)| l == a || s.as_deref() == Some(a))
            .map(|(_, l)| l.clone())
    };
    let tried: Vec<String> = ROUND_TRIPS
        .iter()
        .flat_map(|(_, args)| args.iter())
        .chain(TRACE_FLAGS)
        .filter_map(|a| long_of(a))
        .collect();
    let untried: Vec<&&str> = loadgen::repeat::REPEATED
        .iter()
        .filter(|f| !tried.iter().any(|t| t == *f))
        .collect();
    assert!(
        untried.is_empty(),
        "repeated flags no round trip of tests/repeat.rs gives a value: {untried:?}"
    );
}

/// Each run of ROUND_TRIPS and its repeat have the same settings and instance, and the
/// repeat's command line gives back every flag the run was given (a value never stored would
/// leave both settings alike).
#[test]
fn every_repeated_flag_round_trips() {
    let help = help_flags();
    let d = dir("flags");
    for (i, (var, args)) in ROUND_TRIPS.iter().enumerate() {
        let url = match var {
            Some(v) => match server(v) {
                Some(url) => Some(url),
                None => continue,
            },
            None => None,
        };
        let mut all: Vec<&str> = url.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        let file = d.join(format!("{i}.json"));
        let (first, _) = run_to(&file, &all);
        let (code, again, err) = run_json(&["--repeat", file.to_str().unwrap()]);
        assert_eq!(code, 0, "{all:?}: {err}");
        assert_eq!(first["settings"], again["settings"], "{all:?}: {err}");
        assert_eq!(first["instance"], again["instance"], "{all:?}: {err}");
        assert_schema_valid(&again);
        if let Some(i) = args.iter().position(|a| *a == "--instance") {
            assert_eq!(again["instance"].as_str(), Some(args[i + 1]));
        }
        let line = err.lines().find(|l| l.contains("repeating")).unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        for (short, long) in &help {
            let given = args
                .iter()
                .any(|a| a == long || short.as_deref() == Some(a));
            assert!(!given || words.contains(&long.as_str()), "{long}: {line}");
        }
    }
}

#[test]
fn attached_overrides_replace_the_files_flags() {
    let d = dir("attached");
    let file = d.join("a.json");
    run_to(&file, &["-n", "200", "-c", "4", "--seed", "5"]);
    let f = file.to_str().unwrap();
    for (given, connections) in [
        (&["-c8", "-d1s"][..], 8),
        (&["--duration=1s", "--connections=2"][..], 2),
    ] {
        let mut all = vec!["--repeat", f];
        all.extend_from_slice(given);
        let (code, doc, err) = run_json(&all);
        assert_eq!(code, 0, "{given:?}: {err}");
        let s = &doc["settings"];
        assert_eq!(s["connections"].as_u64(), Some(connections), "{given:?}");
        assert_eq!(s["duration_s"].as_f64(), Some(1.0), "{given:?}");
        assert!(s["requests"].is_null(), "{given:?}");
        assert_eq!(s["seed"].as_u64(), Some(5), "{given:?}");
    }
}

/// A trace given by a relative path is stored absolute, and its repeat from another
/// directory replays the same file.
#[test]
fn a_relative_trace_repeats_from_another_directory() {
    let d = dir("trace");
    let (here, there) = (d.join("here"), d.join("there"));
    std::fs::create_dir_all(&here).unwrap();
    std::fs::create_dir_all(&there).unwrap();
    let keys: String = (1..=300).map(|k| format!("{k}\n")).collect();
    std::fs::write(here.join(TRACE_FLAGS[1]), keys).unwrap();
    let file = d.join("a.json");
    let mut args = vec!["run"];
    args.extend_from_slice(TRACE_FLAGS);
    args.extend_from_slice(&["-c", "2", "-o", file.to_str().unwrap(), "-q"]);
    let run_in = |dir: &PathBuf, args: &[&str]| {
        std::process::Command::new(bin())
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run_in(&here, &args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let first: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let stored = first["settings"]["trace"]["file"].as_str().unwrap();
    let real = std::fs::canonicalize(here.join(TRACE_FLAGS[1])).unwrap();
    assert_eq!(stored, real.to_str().unwrap());
    let o = run_in(
        &there,
        &[
            "run",
            "--repeat",
            file.to_str().unwrap(),
            "--format",
            "json",
            "-o",
            "-",
            "-q",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let again: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(first["settings"], again["settings"], "{err}");
    assert_eq!(u(&again["runs"][0], "requests"), 300);
}
