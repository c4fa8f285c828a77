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
    for (long, short, value) in flags(&file.settings) {
        let given_as = |a: &String| {
            a == long || a.starts_with(&format!("{long}=")) || short.is_some_and(|s| a == s)
        };
        // -n and -d exclude each other: either given keeps the other off too.
        let stop = ["--requests", "--duration"].contains(&long)
            && given
                .iter()
                .any(|a| ["-n", "-d", "--requests", "--duration"].contains(&a.as_str()));
        if given.iter().any(given_as) || stop {
            continue;
        }
        out.push(long.to_string());
        out.extend(value);
    }
    Ok(out)
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

type Flag = (&'static str, Option<&'static str>, Option<String>);

/// Each setting as its flag (long name, short name, value; None: a switch).
fn flags(s: &Settings) -> Vec<Flag> {
    let v = |x: String| Some(x);
    let mut f: Vec<Flag> = vec![
        ("--connections", Some("-c"), v(s.connections.to_string())),
        ("--pipeline", Some("-p"), v(s.pipeline.to_string())),
        ("--threads", Some("-t"), v(s.threads.to_string())),
        ("--warmup", None, v(format!("{}", s.warmup_s))),
        ("--keys", None, v(s.keys.clone())),
        ("--dist", None, v(s.dist.clone())),
        ("--mode", None, v(s.mode.clone())),
        ("--timeout", None, v(format!("{}ms", s.timeout_ms))),
        ("--interval", None, v(format!("{}ms", s.interval_ms))),
        ("--seed", None, v(s.seed.to_string())),
        ("--arrival", None, v(s.arrival.clone())),
    ];
    let opt = |f: &mut Vec<Flag>, long, short, x: Option<String>| {
        if let Some(x) = x {
            f.push((long, short, Some(x)));
        }
    };
    opt(
        &mut f,
        "--duration",
        Some("-d"),
        s.duration_s.map(|d| format!("{d}")),
    );
    opt(
        &mut f,
        "--requests",
        Some("-n"),
        s.requests.map(|n| n.to_string()),
    );
    opt(&mut f, "--rate", Some("-R"), s.rate.map(|r| format!("{r}")));
    opt(&mut f, "--query", None, s.query.clone());
    opt(&mut f, "--txn", None, s.txn.map(|n| n.to_string()));
    opt(&mut f, "--batch", None, s.batch.map(|n| n.to_string()));
    opt(&mut f, "--retries", None, s.retries.map(|n| n.to_string()));
    opt(&mut f, "--ttl", None, s.ttl.map(|n| n.to_string()));
    opt(
        &mut f,
        "--reconnect-every",
        None,
        s.reconnect_every.map(|n| n.to_string()),
    );
    opt(&mut f, "--value-size", None, s.value_size.clone());
    opt(&mut f, "--key-format", None, s.key_format.clone());
    match &s.trace {
        // A trace's ops are its own: its mix is not a flag.
        Some(t) => {
            f.push(("--trace", None, v(t.file.clone())));
            f.push(("--speed", None, v(format!("{}", t.speed))));
        }
        None => opt(&mut f, "--mix", None, s.mix.clone()),
    }
    if s.verify {
        f.push(("--verify", None, None));
    }
    for (op, sql) in s.write_queries.iter().flatten() {
        let long = match op.as_str() {
            "update" => "--query-update",
            "insert" => "--query-insert",
            "delete" => "--query-delete",
            _ => "--query-upsert",
        };
        f.push((long, None, v(sql.clone())));
    }
    f
}
