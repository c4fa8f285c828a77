//! `loadgen run --repeat RESULT.json`: the command line that runs an earlier result's settings
//! and targets again (the same seed, so the same key streams). A flag given beside `--repeat`
//! overrides the file's value of it; targets given replace the file's.

use std::path::Path;

use crate::error::ConfigError;
use crate::result::{ResultFile, Settings};

/// The arguments after `run` that repeat `path`, before the user's own (`given`, the command
/// line after `run` without `--repeat FILE`); `targets_given`: the user named targets.
pub fn args_of(
    path: &Path,
    given: &[String],
    targets_given: bool,
) -> Result<Vec<String>, ConfigError> {
    let file = crate::merge::read_input(path)?.file;
    if !file.sweeps.is_empty() || !file.slo.is_empty() {
        return Err(ConfigError(format!(
            "--repeat {}: this result is a sweep or an SLO search; --repeat runs plain runs again: give the sweep's flags instead",
            path.display()
        )));
    }
    let mut out = Vec::new();
    if !targets_given {
        out.extend(targets(&file));
    }
    let longs = given_longs(given);
    for (long, value) in flags(&file.settings, file.instance.as_deref()) {
        if longs
            .iter()
            .any(|g| *g == long || replaces(g).contains(&long))
        {
            continue;
        }
        out.push(long.to_string());
        out.extend(value);
    }
    Ok(out)
}

/// The file's flags that a flag given beside `--repeat` keeps off too, as they exclude each
/// other: -n and -d; a mix and a trace (whose ops are its own).
fn replaces(given: &str) -> &'static [&'static str] {
    match given {
        "--requests" => &["--duration"],
        "--duration" => &["--requests"],
        "--mix" => &["--trace", "--speed"],
        "--trace" => &["--mix"],
        _ => &[],
    }
}

/// What a flag's output-only reason says.
const OUTPUT: &str = "output only";

/// `run`'s flags that a repeat does not give back, each with why. Every other flag of
/// `run --help` is in [`REPEATED`]; tests/repeat.rs fails on a flag in neither list.
pub const NOT_REPEATED: &[(&str, &str)] = &[
    ("--output", OUTPUT),
    ("--format", OUTPUT),
    ("--quiet", OUTPUT),
    ("--metrics", OUTPUT),
    ("--metrics-linger", OUTPUT),
    ("--run-label", OUTPUT),
    ("--hdr-log", OUTPUT),
    ("--record-trace", OUTPUT),
    (
        "--server-pid",
        "output only (the server CPU), and a process of that time",
    ),
    (
        "--strict",
        "the exit code only: the result holds the verdict either way",
    ),
    ("--start-at", "a moment past by the time of a repeat"),
    (
        "--sweep",
        "a repeat runs plain runs: a sweep's result is refused",
    ),
    (
        "--slo",
        "a repeat runs plain runs: an SLO search's result is refused",
    ),
    ("--repeat", "the repeat itself"),
    ("--help", OUTPUT),
];

/// `run`'s flags that a repeat gives back from the result's settings (and its instance):
/// each one changes what a run does.
pub const REPEATED: &[&str] = &[
    "--connections",
    "--pipeline",
    "--threads",
    "--duration",
    "--requests",
    "--warmup",
    "--keys",
    "--dist",
    "--query",
    "--mode",
    "--verify",
    "--timeout",
    "--interval",
    "--seed",
    "--rate",
    "--arrival",
    "--reconnect-backoff",
    "--max-errors",
    "--ci",
    "--mix",
    "--trace",
    "--value-size",
    "--key-format",
    "--speed",
    "--insert-from",
    "--txn",
    "--batch",
    "--reconnect-every",
    "--retries",
    "--ttl",
    "--query-update",
    "--query-insert",
    "--query-delete",
    "--query-upsert",
    "--instance",
];

/// The short names of the flags a repeat gives back.
const SHORTS: &[(&str, &str)] = &[
    ("-c", "--connections"),
    ("-p", "--pipeline"),
    ("-t", "--threads"),
    ("-d", "--duration"),
    ("-n", "--requests"),
    ("-R", "--rate"),
];

/// The long name of each flag in `given`, in any form clap takes: `-c 8`, `-c8`,
/// `--connections 8`, `--connections=8`.
fn given_longs(given: &[String]) -> Vec<&str> {
    given
        .iter()
        .filter_map(|a| match a.strip_prefix("--") {
            Some(_) => a.split('=').next(),
            None => a
                .get(..2)
                .and_then(|s| SHORTS.iter().find(|(short, _)| *short == s))
                .map(|(_, long)| *long),
        })
        .collect()
}

/// The targets of the runs, each once, in order (labels carry no password; one comes from the
/// environment as for any run).
fn targets(file: &ResultFile) -> Vec<String> {
    let mut seen = Vec::new();
    for r in &file.runs {
        // The embedded server's label names a port of a process long gone: it is named again.
        let t = match r.kind.as_str() {
            "embedded" => crate::proto::table::EMBEDDED.to_string(),
            // A password shown as *** comes from the environment instead (PGPASSWORD, ...).
            _ => r.target.replacen(":***@", "@", 1),
        };
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    seen
}

type Flag = (&'static str, Option<String>);

/// Each setting as its flag (long name, value; None: a switch).
fn flags(s: &Settings, instance: Option<&str>) -> Vec<Flag> {
    let v = |x: String| Some(x);
    let mut f: Vec<Flag> = vec![
        ("--connections", v(s.connections.to_string())),
        ("--pipeline", v(s.pipeline.to_string())),
        ("--threads", v(s.threads.to_string())),
        ("--warmup", v(format!("{}", s.warmup_s))),
        ("--keys", v(s.keys.clone())),
        ("--dist", v(s.dist.clone())),
        ("--mode", v(s.mode.clone())),
        ("--timeout", v(format!("{}ms", s.timeout_ms))),
        ("--interval", v(format!("{}ms", s.interval_ms))),
        ("--seed", v(s.seed.to_string())),
        ("--arrival", v(s.arrival.clone())),
    ];
    let opt = |f: &mut Vec<Flag>, long, x: Option<String>| {
        if let Some(x) = x {
            f.push((long, Some(x)));
        }
    };
    opt(&mut f, "--duration", s.duration_s.map(|d| format!("{d}")));
    opt(&mut f, "--requests", s.requests.map(|n| n.to_string()));
    opt(&mut f, "--rate", s.rate.map(|r| format!("{r}")));
    opt(&mut f, "--query", s.query.clone());
    opt(&mut f, "--txn", s.txn.map(|n| n.to_string()));
    opt(&mut f, "--batch", s.batch.map(|n| n.to_string()));
    opt(&mut f, "--retries", s.retries.map(|n| n.to_string()));
    opt(&mut f, "--ttl", s.ttl.map(|n| n.to_string()));
    opt(
        &mut f,
        "--reconnect-every",
        s.reconnect_every.map(|n| n.to_string()),
    );
    opt(&mut f, "--value-size", s.value_size.clone());
    opt(&mut f, "--key-format", s.key_format.clone());
    opt(
        &mut f,
        "--reconnect-backoff",
        s.reconnect_backoff_us
            .map(|[lo, hi]| format!("{lo}us,{hi}us")),
    );
    opt(&mut f, "--max-errors", s.max_errors.map(|n| n.to_string()));
    opt(&mut f, "--ci", s.ci.clone());
    opt(
        &mut f,
        "--insert-from",
        s.insert_from.map(|n| n.to_string()),
    );
    // The instance names this generator's lane of insert keys.
    opt(&mut f, "--instance", instance.map(String::from));
    match &s.trace {
        // A trace's ops are its own: its mix is not a flag.
        Some(t) => {
            f.push(("--trace", v(t.file.clone())));
            f.push(("--speed", v(format!("{}", t.speed))));
        }
        None => opt(&mut f, "--mix", s.mix.clone()),
    }
    if s.verify {
        f.push(("--verify", None));
    }
    for (op, sql) in s.write_queries.iter().flatten() {
        let long = match op.as_str() {
            "update" => "--query-update",
            "insert" => "--query-insert",
            "delete" => "--query-delete",
            _ => "--query-upsert",
        };
        f.push((long, v(sql.clone())));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings with every optional one set, the trace's or the mix's.
    fn every(trace: bool) -> Settings {
        let mut s: Settings = serde_json::from_value(serde_json::json!({
            "connections": 3, "pipeline": 2, "threads": 1, "duration_s": 2.0, "requests": 9,
            "warmup_s": 0.5, "keys": "1-9", "dist": "seq", "mode": "simple", "verify": true,
            "timeout_ms": 9, "interval_ms": 99, "seed": 9, "rate": 99.0, "arrival": "poisson",
            "query": "q", "mix": "read=50,update=50", "txn": 2, "batch": 2, "retries": 1,
            "ttl": 9, "reconnect_every": 9, "key_format": "k:%d", "value_size": "9",
            "reconnect_backoff_us": [1, 2], "max_errors": 9, "insert_from": 9, "ci": "qps=1%",
            "write_queries": {"update": "u", "insert": "i", "delete": "d", "upsert": "x"},
        }))
        .unwrap();
        if trace {
            s.trace = Some(crate::result::TraceSettings {
                file: "/t".into(),
                lines: 1,
                span_s: 0.0,
                speed: 2.0,
                timed: true,
            });
        }
        s
    }

    #[test]
    fn every_repeated_flag_is_given_back_and_no_other() {
        let mut seen: Vec<&str> = [false, true]
            .into_iter()
            .flat_map(|t| flags(&every(t), Some("i")))
            .map(|(long, _)| long)
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let mut want = REPEATED.to_vec();
        want.sort_unstable();
        assert_eq!(seen, want);
        assert!(REPEATED
            .iter()
            .all(|r| NOT_REPEATED.iter().all(|(n, _)| n != r)));
    }

    #[test]
    fn a_given_flag_keeps_off_the_files_flags_it_excludes() {
        let dir = crate::test_dir::TempDir::new("lg-repeat-unit");
        let file = dir.join("r.json");
        let mut doc = serde_json::json!({
            "loadgen_version": "0", "started_at": "2026-12-07T00:00:00Z", "interrupted": false,
            "settings": every(true), "machine": {"cores": 1, "os": "linux"}, "runs": [],
        });
        doc["settings"]["requests"] = serde_json::Value::Null;
        std::fs::write(&file, doc.to_string()).unwrap();
        let args = |given: &[&str]| {
            let given: Vec<String> = given.iter().map(|g| g.to_string()).collect();
            args_of(&file, &given, true).unwrap()
        };
        let has = |a: &[String], f: &str| a.iter().any(|x| x == f);
        let a = args(&[]);
        assert!(has(&a, "--trace") && has(&a, "--duration") && !has(&a, "--mix"));
        let a = args(&["--mix", "read=1", "-n5"]);
        assert!(!has(&a, "--trace") && !has(&a, "--speed") && !has(&a, "--duration"));
        assert!(has(&a, "--connections"), "{a:?}");
    }

    #[test]
    fn given_flags_are_known_in_every_form() {
        let given: Vec<String> = ["-c8", "-d", "2s", "--rate=5", "--seed", "3", "-n9", "x"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            given_longs(&given),
            [
                "--connections",
                "--duration",
                "--rate",
                "--seed",
                "--requests"
            ]
        );
    }
}
