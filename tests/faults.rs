//! Faults: servers killed, restarted and paused mid-run; Ctrl-C; bad input; password redaction.

mod common;
#[path = "faults/garbage.rs"]
mod garbage;
#[path = "faults/input.rs"]
mod input;
use common::fakes::{self, Behaviour, Proto};
use common::*;
use common::{fake_mysql, fake_pg};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Requests of the runs below: a fixed rate makes them last a known time (`-n` at `-R`).
const KILL_N: u64 = 24_000;
const KILL_RATE: &str = "2000";

/// Kills `name` 3 s into a 12 s run of exactly `KILL_N` requests, restarts it, and checks the
/// run kept counting and lost no request: each one is a hit, a miss or an error.
fn kill_and_restart(name: &str, url: &str, after_restart: impl FnOnce()) -> serde_json::Value {
    let url = url.to_string();
    let t0 = Instant::now();
    let h = std::thread::spawn(move || {
        run_json(&[
            &url,
            "-n",
            &KILL_N.to_string(),
            "-R",
            KILL_RATE,
            "--warmup",
            "0s",
            "-c",
            "8",
            "--timeout",
            "2s",
            "--reconnect-backoff",
            "50ms,500ms",
        ])
    });
    std::thread::sleep(Duration::from_secs(3));
    let pid = servers(&["pid", name]);
    kill("-KILL", &pid);
    std::thread::sleep(Duration::from_millis(500));
    servers(&["up", name]);
    // loadgen's clock starts after ours (it connects first): its times are at most ours.
    let restarted_s = t0.elapsed().as_secs_f64();
    after_restart();
    let (code, doc, err) = h.join().unwrap();
    let r = &doc["runs"][0];
    assert!(u(r, "error_total") > 0, "the kill must show as errors: {r}");
    assert_eq!(code, 1, "a run with errors: {err}");
    // `requests` is the sum of the outcomes: only `-n` says how many there must be.
    assert_eq!(u(r, "requests"), KILL_N, "a request was lost: {r}");
    // requests is hits + misses + errors by definition: check the parts instead, answers
    // before the kill and only the errors a kill makes.
    assert!(u(r, "hits") > 0, "{r}");
    // A killed server fails requests only as a kill can: refused, cut off, or unanswered.
    let kinds = ["connect", "io", "timeout"];
    let seen: u64 = kinds.iter().map(|k| u(&r["errors"], k)).sum();
    assert_eq!(seen, u(r, "error_total"), "{}", r["errors"]);
    // The server's own counter restarts with the server, so it cannot be compared here; the
    // pause below, where it survives, checks it.
    let timeline = r["timeline"].as_array().unwrap();
    let after = timeline
        .iter()
        .filter(|row| f(row, "t_s") - 1.0 >= restarted_s)
        .map(|row| u(row, "hits") + u(row, "misses"))
        .sum::<u64>();
    assert!(
        after > 0,
        "answers after the restart at {restarted_s:.1}s: {timeline:?}"
    );
    assert!(u(r, "reconnects") > 0);
    r.clone()
}

#[test]
fn postgres_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let r = kill_and_restart("postgres", &url, || {});
    // A new postmaster (and pg_stat_statements reset by it): not comparable, not lost requests.
    let so = &r["server_observed"];
    assert_eq!(so["not_comparable"], true, "{so}");
    assert!(so["delta"].is_null(), "{so}");
    assert!(
        so["note"].as_str().unwrap().contains("postmaster started"),
        "{so}"
    );
}

#[test]
fn memcached_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let reload = url.clone();
    let r = kill_and_restart("memcached", &url, move || {
        // memcached keeps nothing across a restart: load the rows again so hits come back
        let out = run(&["prepare", &reload, "--rows", "1000000"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    // Its counters restarted with it: the count is said to be not comparable, not a mismatch.
    let so = &r["server_observed"];
    assert_eq!(so["not_comparable"], true, "{so}");
    assert!(so["delta"].is_null(), "{so}");
    assert!(so["note"].as_str().unwrap().contains("restarted"), "{so}");
    // The verdict names it for what it is: not comparable, not a count that differs.
    let reasons = r["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("server count not comparable: the server restarted"),
        "{reasons}"
    );
    assert!(!reasons.contains("server count differs"), "{reasons}");
}

#[test]
fn redis_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let reload = url.clone();
    let r = kill_and_restart("redis", &url, move || {
        // servers.sh runs Redis without persistence: load the rows again so hits come back
        let out = run(&["prepare", &reload, "--rows", "1000000"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    // A new run_id: the count is said to be not comparable, whatever the counters did.
    let so = &r["server_observed"];
    assert_eq!(so["not_comparable"], true, "{so}");
    assert!(so["delta"].is_null(), "{so}");
    assert!(so["note"].as_str().unwrap().contains("run_id"), "{so}");
}

#[test]
fn mariadb_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    // A fresh server first: its statement counter then passes the one read before the run
    // again within the run, so only the server's start time (now - Uptime) tells the restart.
    let pid = servers(&["pid", "mariadb"]);
    kill("-TERM", &pid);
    let gone = Instant::now() + Duration::from_secs(60);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(100));
    }
    servers(&["up", "mariadb"]);
    let r = kill_and_restart("mariadb", &url, || {});
    let so = &r["server_observed"];
    assert_eq!(so["not_comparable"], true, "{so}");
    assert!(so["delta"].is_null(), "{so}");
    assert!(so["note"].as_str().unwrap().contains("Uptime"), "{so}");
}

#[test]
fn paused_server_gives_timeouts_then_recovers() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    pause_and_resume("memcached", &url, "memcached get_hits+get_misses");
}

#[test]
fn paused_redis_gives_timeouts_then_recovers() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    pause_and_resume("redis", &url, "INFO commandstats cmdstat_get.calls");
}

/// SIGSTOPs server `name` from 2 s to 4 s into an 8 s run: timeouts, no request lost, the
/// server's own counter (`source`) within what was answered and what was sent, traffic after.
fn pause_and_resume(name: &str, url: &str, source: &str) {
    // 16,000 requests at 2,000/s: 8 s, paused from 2 s to 4 s.
    const N: u64 = 16_000;
    let u2 = url.to_string();
    let h = std::thread::spawn(move || {
        run_json(&[
            &u2,
            "-n",
            &N.to_string(),
            "-R",
            "2000",
            "--warmup",
            "0s",
            "-c",
            "4",
            "--timeout",
            "500ms",
        ])
    });
    std::thread::sleep(Duration::from_secs(2));
    let pid = servers(&["pid", name]);
    kill("-STOP", &pid);
    std::thread::sleep(Duration::from_secs(2));
    kill("-CONT", &pid);
    let (code, doc, err) = h.join().unwrap();
    let r = &doc["runs"][0];
    assert!(u(r, "errors.timeout") > 0, "{r}");
    assert_eq!(code, 1, "a run with errors: {err}");
    assert_eq!(u(r, "requests"), N, "a request was lost: {r}");
    // The timeout's sample names the server that did not answer.
    let hostport = url.rsplit(['/', '@']).find(|p| p.contains(':')).unwrap();
    let samples = r["error_samples"].to_string();
    assert!(
        samples.contains(&format!("no reply within 500ms from {hostport}")),
        "{samples}"
    );
    // The server's own count: every answered lookup was executed; a timed-out one was sent and
    // may or may not have been (the server reads it after SIGCONT even from a closed socket);
    // a failed connect never reached it.
    let so = &r["server_observed"];
    assert_eq!(so["source"], source, "{so}");
    let answered = u(r, "hits") + u(r, "misses");
    let sent = N - u(r, "errors.connect");
    assert_eq!(u(so, "expected"), sent, "{so}");
    let counted = u(so, "delta");
    assert!(
        (answered..=sent).contains(&counted),
        "the server counted {counted}: answered {answered}, sent {sent}"
    );
    assert_eq!(so["matches"], true, "{so}");
    let timeline = r["timeline"].as_array().unwrap();
    // the pause ends 4 s in; the intervals after 5 s carry traffic again
    let after: u64 = timeline
        .iter()
        .filter(|row| f(row, "t_s") > 5.0)
        .map(|row| u(row, "hits"))
        .sum();
    assert!(after > 0, "traffic recovers after SIGCONT: {timeline:?}");
}

#[test]
fn sigint_stops_within_a_second_and_keeps_a_valid_result() {
    let dir = TempDir::new("loadgen-sigint"); // -o makes no directory
    let path = dir.join("r.json");
    let child = Command::new(bin())
        .args([
            "run",
            "-d",
            "60s",
            "--warmup",
            "0s",
            "--keys",
            "1-100000",
            "-c",
            "4",
            "-q",
            "-o",
            path.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let sent = Instant::now();
    kill("-INT", &child.id().to_string());
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(1), "took {took:?} to stop");
    assert!(
        out.status.code().is_some(),
        "exited, not killed by the signal"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    assert_eq!(doc["runs"][0]["interrupted"], true);
    assert!(u(&doc["runs"][0], "hits") > 0);
    assert_schema_valid(&doc);
}

#[test]
fn sigterm_also_stops_and_keeps_results() {
    let child = Command::new(bin())
        .args([
            "run", "-d", "60s", "--warmup", "0s", "--keys", "1-100000", "-c", "2", "-q", "-o", "-",
            "--format", "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    kill("-TERM", &child.id().to_string());
    let out = child.wait_with_output().unwrap();
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the report is printed");
    assert_eq!(doc["interrupted"], true);
    assert!(u(&doc["runs"][0], "hits") > 0);
    // Stopped short, the run says so in its verdict (it may have other reasons too).
    let v = &doc["runs"][0]["verdict"];
    assert_eq!(v["valid"], false, "{v}");
    assert!(
        v["reasons"].as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .starts_with("interrupted: stopped after")),
        "{v}"
    );
}

#[test]
fn max_errors_ends_the_run_early_with_exit_1_and_keeps_results() {
    let served = Served::start(10_000);
    let url = served.url.clone();
    let h = std::thread::spawn(move || {
        run_json(&[
            &url,
            "-d",
            "30s",
            "--max-errors",
            "20",
            "--warmup",
            "0s",
            "--keys",
            "1-10000",
            "-c",
            "2",
            "--reconnect-backoff",
            "10ms,50ms",
        ])
    });
    std::thread::sleep(Duration::from_secs(2));
    drop(served); // the server dies: connects fail from now on
    let started = Instant::now();
    let (code, doc, err) = h.join().unwrap();
    assert_eq!(code, 1, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "ended early, not at -d"
    );
    let r = &doc["runs"][0];
    assert!(
        r["stopped_early"]
            .as_str()
            .unwrap_or("")
            .contains("--max-errors"),
        "{r}"
    );
    assert!(
        u(r, "hits") > 0,
        "what was measured before the failure is kept"
    );
    assert!(u(r, "error_total") >= 20);
    // The line gives the count the outcomes give, not the one seen when the limit was hit.
    let stopped = r["stopped_early"].as_str().unwrap();
    assert!(
        stopped.contains(&format!("; {} errors in all", u(r, "error_total"))),
        "{stopped} / {}",
        u(r, "error_total")
    );
}
