//! Where the time went: the server's CPU per request next to loadgen's, read from /proc, checked
//! against what `pidstat` (sysstat) reports for the same processes over a window around the run.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

/// CPU seconds of the processes `pidstat ARGS` selects and `keep` accepts (by pid), summed over
/// one-second samples taken while `during` runs (started one second into pidstat's window,
/// which ends two seconds after it returns).
fn pidstat_cpu_s<T>(
    select: &[&str],
    keep: impl Fn(u32) -> bool,
    during: impl FnOnce() -> T,
) -> (f64, T) {
    let child = Command::new("pidstat")
        .args(["-h", "-u"])
        .args(select)
        .arg("1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("pidstat (Debian sysstat: scripts/servers.sh installs it)");
    std::thread::sleep(Duration::from_millis(1200));
    let out = during();
    std::thread::sleep(Duration::from_millis(2200));
    kill("-INT", &child.id().to_string());
    let text = String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).to_string();
    // -h: one line per process and second; the header names the PID and %CPU columns.
    let header = text
        .lines()
        .find(|l| l.starts_with('#') && l.contains("%CPU"))
        .unwrap_or_else(|| panic!("no pidstat header in {text}"));
    let cols: Vec<&str> = header.trim_start_matches('#').split_whitespace().collect();
    let col = |name: &str| cols.iter().position(|c| *c == name).unwrap();
    let (pid_col, cpu_col) = (col("PID"), col("%CPU"));
    let total: f64 = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let pid: u32 = f.get(pid_col)?.parse().ok()?;
            keep(pid).then(|| f.get(cpu_col)?.parse::<f64>().ok())?
        })
        .sum();
    (total / 100.0, out)
}

/// The children of `parent` now, from /proc.
fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// loadgen's server CPU seconds for one run of `url`, and pidstat's over the same window.
fn both(url: &str, select: &[&str], keep: impl Fn(u32) -> bool) -> (f64, f64, serde_json::Value) {
    let (pidstat, (code, doc, err)) = pidstat_cpu_s(select, keep, || {
        run_json(&[url, "-d", "4s", "--warmup", "0s", "-c", "8"])
    });
    assert_eq!(code, 0, "{err}");
    let r = doc["runs"][0].clone();
    let ours = f(&r, "server_cpu.cpu_s");
    eprintln!("{url}: loadgen says the server used {ours:.2} s of CPU, pidstat {pidstat:.2} s");
    (ours, pidstat, r)
}

fn assert_close(ours: f64, pidstat: f64) {
    // pidstat samples whole seconds of processes alive at both ends of each; loadgen reads the
    // run's exact window: they agree to within a quarter, plus a tick's worth per second.
    assert!(ours > 0.2, "the server did measurable work: {ours}");
    assert!(
        (ours - pidstat).abs() <= 0.25 * pidstat + 0.1,
        "loadgen {ours:.2} s vs pidstat {pidstat:.2} s"
    );
}

#[test]
fn postgres_server_cpu_matches_pidstat_and_names_the_postmaster() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let postmaster = servers(&["pid", "postgres"]);
    // The reference is this server's process tree, never every process named postgres on the
    // machine: the postmaster and each child seen while pidstat samples (backends come and go
    // with the run's connections, so `pidstat -p` with a list taken up front would miss them).
    let pm: u32 = postmaster.parse().unwrap();
    let tree = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::from([
        pm,
    ])));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (tree, done) = (tree.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                tree.lock().unwrap().extend(children(pm));
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let seen = tree.clone();
    let (ours, pidstat, r) = both(&url, &["-C", "postgres"], move |pid| {
        seen.lock().unwrap().contains(&pid)
    });
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
    assert!(
        tree.lock().unwrap().len() > 8,
        "the run's 8 backends were seen"
    );
    assert_close(ours, pidstat);
    let s = &r["server_cpu"];
    assert_eq!(s["pid"].to_string(), postmaster, "{s}");
    assert_eq!(s["process"], "postgres");
    let per = f(&r, "server_cpu.per_request_us");
    let requests = u(&r, "requests") + u(&r, "warmup_requests");
    assert!(
        (per * requests as f64 / 1e6 - ours).abs() < 0.01 + ours * 0.01,
        "{s}"
    );
    assert!(f(&r, "server_cpu.cpu_bound_qps") > 0.0);
    let k = f(&r, "client_cpu.kernel_share");
    assert!(k > 0.0 && k < 1.0, "kernel share {k}");
}

#[test]
fn memcached_server_cpu_matches_pidstat() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let pid = servers(&["pid", "memcached"]);
    let (ours, pidstat, r) = both(&url, &["-p", &pid], |_| true);
    assert_close(ours, pidstat);
    assert_eq!(r["server_cpu"]["process"], "memcached");
}

#[test]
fn the_text_report_says_where_the_time_went() {
    // The embedded server runs in loadgen's own process: its CPU is the process's minus the
    // workers'.
    let out = run(&["run", "-d", "2s", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("cost/lookup"))
        .unwrap_or_else(|| panic!("no cost line in {text}"));
    assert!(line.contains("% kernel)"), "{line}");
    assert!(line.contains("in loadgen (embedded server)"), "{line}");
    assert!(line.contains("=> CPU-bound at ~"), "{line}");
}

#[test]
fn a_server_pid_that_does_not_exist_is_a_clear_error() {
    // Pids above pid_max are never in use.
    let out = run(&["run", "-d", "1s", "--server-pid", "99999999"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("--server-pid 99999999: no such process"),
        "{err}"
    );
}
