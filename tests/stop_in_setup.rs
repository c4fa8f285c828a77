//! Ctrl-C / SIGTERM before the first lookup: whatever set-up is still under way (zipf set-up,
//! the preflight connection, the connect phase) gives way, and loadgen exits at once, cleanly.
//! The slow servers here are listeners of the test's own that never answer (loopback only).

mod common;
use common::fake_setup::Silent;
use common::*;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spawn(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen starts")
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM failed");
}

/// Waits up to `limit` for the child to exit; kills it (by pid) and fails if it does not.
/// Returns its exit code (None: killed by a signal) and its stderr.
fn exits_within(mut child: Child, limit: Duration, what: &str) -> (Option<i32>, String) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            return (status.code(), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: loadgen was still running {limit:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A result path in a temp dir of its own; the dir comes first, to be held until the test ends.
fn temp_json(name: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(&format!("loadgen-stop-{name}"));
    let json = dir.join("r.json");
    (dir, json)
}

/// Accepts the next connection within `limit` (the listener never answers it).
fn accept_within(l: &TcpListener, limit: Duration) -> std::net::TcpStream {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + limit;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return s;
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("loadgen did not connect: {e}"),
        }
    }
}

#[test]
fn sigterm_right_after_a_zipf_start_over_four_billion_keys() {
    // Set-up over 4e9 zipf keys used to sum zeta term by term (minutes) with the signal
    // unheard; now it is instant and the stop ends the run with its result.
    let served = Served::start(1000);
    let (_dir, out) = temp_json("zipf");
    let child = spawn(&[
        "run",
        &served.url,
        "--dist",
        "zipf",
        "--keys",
        "1-4000000000",
        "-d",
        "60s",
        "-c",
        "2",
        "-t",
        "1",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    sigterm(&child);
    let (code, err) = exits_within(child, Duration::from_secs(5), "zipf set-up");
    assert_eq!(code, Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    assert!(u(&doc["runs"][0], "requests") > 0, "no lookup was made");
}

#[test]
fn sigterm_during_the_preflight_connection() {
    // A "MySQL server" that never sends its greeting: the preflight would wait --timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("mysql://bench@127.0.0.1:{port}/loadgen");
    let child = spawn(&[
        "run",
        &url,
        "--timeout",
        "60s",
        "-n",
        "100",
        "-q",
        "-o",
        "-",
    ]);
    let _held = accept_within(&silent, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    sigterm(&child);
    let (code, err) = exits_within(child, Duration::from_secs(5), "preflight");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("stopped while connecting"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn sigterm_during_the_connect_phase() {
    // A listener that accepts only the preflight connection: its queue fills with the first
    // connections of the run and the kernel drops the others' SYNs, so they hang in connect.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/usr/{{key}}");
    let (_dir, out) = temp_json("connect");
    let child = spawn(&[
        "run",
        &url,
        "-c",
        "400",
        "-t",
        "1",
        "-n",
        "1000",
        "--timeout",
        "60s",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    // The preflight's first words (`OPTIONS *`, to learn what answers) get an HTTP reply; its
    // own connection then opens in the queue and closes: the connect phase is under way.
    let mut pre = accept_within(&l, Duration::from_secs(10));
    pre.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    let n = pre.read(&mut buf).unwrap_or(0);
    assert!(
        buf[..n].starts_with(b"OPTIONS * "),
        "preflight sent {n} bytes"
    );
    pre.write_all(b"HTTP/1.0 200 OK\r\n\r\n").unwrap();
    drop(pre);
    std::thread::sleep(Duration::from_millis(1000));
    sigterm(&child);
    let (code, err) = exits_within(child, Duration::from_secs(5), "connect phase");
    // Stopped in its connect phase with nothing failed: what was measured is written, exit 0.
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    let connected = u(&doc["runs"][0], "connected");
    assert!(
        connected < 400,
        "all {connected} connections opened: no hang to stop"
    );
    drop(l);
}

/// Runs loadgen to its end (killing it past `limit`); exit code, stderr, seconds taken.
fn run_until(args: &[&str], limit: Duration) -> (Option<i32>, String, f64) {
    let t = Instant::now();
    let child = spawn(args);
    let (code, err) = exits_within(child, limit, args[1]);
    (code, err, t.elapsed().as_secs_f64())
}

/// One clear line naming the hang, exit 2, no panic.
fn one_line_exit_2(code: Option<i32>, err: &str, what: &str) {
    assert_eq!(code, Some(2), "{what}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: not one line: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// `loadgen run URL --timeout 1s -d 3s -c 2` against a silent server, stopped after 10 s.
fn run_silent(url: &str) -> (Option<i32>, String, f64) {
    let args = [
        "run",
        url,
        "--timeout",
        "1s",
        "-d",
        "3s",
        "-c",
        "2",
        "-q",
        "-o",
        "-",
    ];
    run_until(&args, Duration::from_secs(10))
}

#[test]
fn a_memcached_that_never_answers_ends_the_run_within_the_timeout() {
    // It takes the connection (memcached has no greeting), then never answers `stats`: the
    // counter read before the run used to wait forever.
    let silent = Silent::start();
    let url = format!("memcache://127.0.0.1:{}", silent.port);
    let (code, err, secs) = run_silent(&url);
    one_line_exit_2(code, &err, "memcached run");
    assert!(err.contains("no answer within"), "{err}");
    assert!(secs < 3.5, "took {secs:.1}s with --timeout 1s");
}

#[test]
fn silent_redis_postgres_and_mysql_servers_end_the_run_within_the_timeout() {
    let silent = Silent::start();
    let p = silent.port;
    for url in [
        format!("redis://127.0.0.1:{p}"),
        format!("postgres://bench@127.0.0.1:{p}/loadgen?sslmode=disable"),
        format!("postgres://bench@127.0.0.1:{p}/loadgen?sslmode=disable&driver=wire"),
        format!("mysql://bench@127.0.0.1:{p}/loadgen"),
        format!("mysql://bench@127.0.0.1:{p}/loadgen?driver=wire"),
        format!("hs://127.0.0.1:{p}/loadgen/usr"),
    ] {
        let (code, err, secs) = run_silent(&url);
        one_line_exit_2(code, &err, &url);
        assert!(secs < 3.5, "{url}: took {secs:.1}s with --timeout 1s");
    }
}

#[test]
fn a_prepare_against_a_silent_server_ends_with_one_line() {
    let silent = Silent::start();
    let p = silent.port;
    for url in [
        format!("memcache://127.0.0.1:{p}"),
        format!("postgres://bench@127.0.0.1:{p}/loadgen?sslmode=disable"),
        format!("mysql://bench@127.0.0.1:{p}/loadgen"),
    ] {
        let args = ["prepare", &url, "--rows", "1000"];
        let (code, err, secs) = run_until(&args, Duration::from_secs(20));
        one_line_exit_2(code, &err, &url);
        assert!(secs < 13.0, "{url}: took {secs:.1}s");
    }
}

#[test]
fn sigterm_during_a_hung_counter_read_or_prepare() {
    let silent = Silent::start();
    let mc = format!("memcache://127.0.0.1:{}", silent.port);
    let pg = format!(
        "postgres://bench@127.0.0.1:{}/loadgen?sslmode=disable",
        silent.port
    );
    let runs: [&[&str]; 3] = [
        &["run", &mc, "--timeout", "60s", "-d", "3s", "-q", "-o", "-"],
        &["prepare", &mc, "--rows", "1000"],
        &["prepare", &pg, "--rows", "1000"],
    ];
    for args in runs {
        let child = spawn(args);
        std::thread::sleep(Duration::from_millis(700));
        sigterm(&child);
        let (code, err) = exits_within(child, Duration::from_secs(2), args[1]);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("stopped while"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// PostgreSQL and MySQL (each driver) that log in, prepare the lookup and then never answer
/// the count read before the run: one line and exit 2 within about 2 x --timeout, and a
/// SIGTERM during the hang ends loadgen within 2 s.
#[test]
fn a_sql_server_that_hangs_on_the_counter_query() {
    use common::fakes::Behaviour::HangOnCount;
    use common::{fake_mysql, fake_pg};
    for fake in [
        fake_pg::start(HangOnCount, "wire"),
        fake_pg::start(HangOnCount, ""),
        fake_mysql::start(HangOnCount, "wire"),
        fake_mysql::start(HangOnCount, ""),
    ] {
        let url = &fake.url;
        let (code, err, secs) = run_silent(url);
        one_line_exit_2(code, &err, url);
        assert!(err.contains("counter"), "{url}: {err}");
        assert!(
            secs < 3.5,
            "{url}: took {secs:.1}s with --timeout 1s: {err}"
        );
        let child = spawn(&["run", url, "--timeout", "60s", "-d", "3s", "-q", "-o", "-"]);
        std::thread::sleep(Duration::from_millis(1500));
        sigterm(&child);
        let (code, err) = exits_within(child, Duration::from_secs(2), url);
        assert_eq!(code, Some(2), "{url}: {err}");
        assert!(err.contains("stopped while"), "{url}: {err}");
        assert!(!err.contains("panicked"), "{url}: {err}");
    }
}
