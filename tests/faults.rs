//! Faults: servers killed, restarted and paused mid-run; Ctrl-C; bad input; password redaction.

mod common;
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
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    let r = &doc["runs"][0];
    assert!(u(r, "error_total") > 0, "the kill must show as errors: {r}");
    // `requests` is the sum of the outcomes: only `-n` says how many there must be.
    assert_eq!(u(r, "requests"), KILL_N, "a request was lost: {r}");
    // requests is hits + misses + errors by definition: check the parts instead, the error
    // kinds adding up to error_total and answers before the kill.
    assert!(u(r, "hits") > 0, "{r}");
    assert_eq!(error_kinds_sum(r), u(r, "error_total"), "{r}");
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
    assert!(code == 0 || code == 1, "{err}");
    let r = &doc["runs"][0];
    assert!(u(r, "errors.timeout") > 0, "{r}");
    assert_eq!(u(r, "requests"), N, "a request was lost: {r}");
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
    let dir = std::env::temp_dir().join(format!("loadgen-sigint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap(); // -o makes no directory
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
    let _ = std::fs::remove_dir_all(&dir);
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
}

/// (arguments, expected fragment of the one-line message). Every case exits 2.
const BAD_INPUTS: &[(&[&str], &str)] = &[
    (&["run", "ftp://127.0.0.1/x"], "unknown target scheme"),
    (&["run", "127.0.0.1:5432"], "bad target"),
    (&["run", "postgres://h:99999/db"], "port"),
    (&["run", "postgres://h:notaport/db"], "port"),
    (&["run", "--keys", "10-1"], "key range"),
    (&["run", "--keys", "a-b"], "key range"),
    (&["run", "-d", "ten"], "duration"),
    (&["run", "-d", "0s"], "--duration"),
    (&["run", "--duration=-5s"], "duration"),
    (&["run", "-n", "0"], "--requests"),
    (&["run", "-n", "lots"], "count"),
    (&["run", "-c", "0"], "--connections"),
    (&["run", "-p", "0"], "--pipeline"),
    (&["run", "-t", "0"], "--threads"),
    (&["run", "--rate=-5"], "--rate"),
    (&["run", "-R", "0"], "--rate"),
    (&["run", "--dist", "gauss"], "--dist"),
    (&["run", "--dist", "zipf:3"], "--dist"),
    (&["run", "--dist", "hot:0.2"], "--dist"),
    (&["run", "--timeout", "0s"], "--timeout"),
    (&["run", "--interval", "1ms"], "--interval"),
    (&["run", "-d", "5s", "-n", "100"], "cannot be used with"),
    (&["run", "--sweep", "1,x"], "--sweep"),
    (&["run", "--slo", "p98=1ms"], "--slo"),
    (&["run", "--reconnect-backoff", "1s"], "--reconnect-backoff"),
    (&["run", "--start-at", "tomorrow"], "RFC 3339"),
    (&["run", "--run-label", "x=y"], "--metrics"),
    (&["run", "--metrics", "nonsense"], "metrics"),
    (
        &["run", "http://127.0.0.1:1/usr/{key}", "-n", "5"],
        "cannot connect",
    ),
    (&["run", "hs://127.0.0.1:9998/only_db"], "DATABASE/TABLE"),
    // URL options are checked before connecting: a typo or a bad value is refused.
    (
        &["run", "http://127.0.0.1:1/usr/{key}?pipeline=yes"],
        "pipeline=yes",
    ),
    // HTTP: params other than loadgen's are the server's (sent, not refused); -p pipelines
    // HTTP as every other target, and a URL that forbids it contradicts -p.
    (
        &["run", "http://127.0.0.1:1/usr/{key}?pipelined=1", "-n", "5"],
        "cannot connect",
    ),
    (
        &["run", "http://127.0.0.1:1/usr/{key}", "-p", "16", "-n", "5"],
        "cannot connect",
    ),
    (
        &["run", "http://127.0.0.1:1/usr/{key}?pipeline=0", "-p", "16"],
        "-p sets the pipeline depth",
    ),
    (
        &["run", "memcache://127.0.0.1:1?prefx=usr:"],
        "unknown option 'prefx'",
    ),
    (
        &["run", "postgres://u@127.0.0.1:1/db?sslmod=disable"],
        "unknown option 'sslmod'",
    ),
    (
        &["run", "postgres://u@127.0.0.1:1/db?sslmode=on"],
        "sslmode=on in postgres://u@127.0.0.1:1/db?sslmode=on: use one of disable, allow, prefer, require, verify-ca, verify-full",
    ),
    (
        &["run", "postgres://u@127.0.0.1:1/db?sslmode=verify-full"],
        "sslmode=verify-full needs the CA that signed the server's certificate: add sslrootcert=PATH",
    ),
    (&["prepare", "http://127.0.0.1:1/x"], "cannot prepare"),
    (
        &["prepare", "postgres://127.0.0.1:1/db", "--rows", "0"],
        "--rows",
    ),
    (&["serve", "--addr", "nowhere"], "--addr"),
    (&["merge", "/no/such/file.json"], "file.json"),
];

#[test]
fn bad_inputs_get_one_clear_line_and_exit_2() {
    for (args, needle) in BAD_INPUTS {
        let mut all: Vec<&str> = args.to_vec();
        if all[0] == "run" {
            all.extend_from_slice(&["-o", "-", "-q"]);
        }
        let out = run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected '{needle}' in: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{args:?}: {stderr}"
        );
        // clap adds a usage hint after its error line; our own errors are exactly one line
        let first = stderr.lines().next().unwrap_or("");
        assert!(
            first.contains("error") || first.starts_with("loadgen:"),
            "{args:?}: {stderr}"
        );
        if first.starts_with("loadgen:") {
            assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        }
    }
}

/// The "cannot prepare" line lists exactly what prepare loads, and prepare --help names each.
#[test]
fn prepare_names_what_it_loads() {
    let out = run(&["prepare", "hs://127.0.0.1:1/db/usr"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let list = stderr
        .split_once("use one of ")
        .and_then(|(_, rest)| rest.split(" (").next())
        .unwrap_or_else(|| panic!("no list in: {stderr}"))
        .trim();
    let schemes: Vec<&str> = list.split(", ").collect();
    assert_eq!(
        schemes,
        [
            "postgres://",
            "postgresql://",
            "mysql://",
            "mariadb://",
            "memcache://",
            "memcached://",
            "redis://",
            "rediss://",
            "redis+unix://",
            "unix://"
        ],
        "{stderr}"
    );
    let help = run(&["prepare", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for s in &schemes {
        assert!(
            help.contains(s),
            "prepare --help does not name {s}:\n{help}"
        );
    }
}

#[test]
fn passwords_never_appear_in_any_output_or_file() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    const SECRET: &str = "S3cretProbe42x";
    // Idempotent: a run cut short earlier leaves the role with its grant, which DROP ROLE refuses.
    pg_role_with_password(&url, "redact_probe", SECRET);
    let with_pw = url.replacen(
        "postgres://loadgen@",
        &format!("postgres://redact_probe:{SECRET}@"),
        1,
    );
    let dir = std::env::temp_dir().join(format!("loadgen-redact-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let log = dir.join("r.hlog");
    let out = Command::new(bin())
        .args([
            "run",
            &with_pw,
            "-n",
            "2000",
            "-c",
            "2",
            "-o",
            json.to_str().unwrap(),
            "--hdr-log",
            log.to_str().unwrap(),
        ])
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("redact_probe:***@"),
        "the URL is shown redacted: {stdout}"
    );
    // wrong password, too
    let bad = with_pw.replace(SECRET, &format!("{SECRET}WRONG"));
    let out2 = Command::new(bin())
        .args(["run", &bad, "-n", "10", "-o", "-"])
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    let mut everything = format!(
        "{stdout}{stderr}{}{}",
        String::from_utf8_lossy(&out2.stdout),
        String::from_utf8_lossy(&out2.stderr)
    );
    for f in std::fs::read_dir(&dir).unwrap() {
        everything.push_str(&String::from_utf8_lossy(
            &std::fs::read(f.unwrap().path()).unwrap(),
        ));
    }
    assert!(!everything.contains(SECRET), "password leaked");
    psql(&url, "DROP OWNED BY redact_probe; DROP ROLE redact_probe");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server of our own that answers every request with bytes that are not the protocol.
fn garbage_server(reply: &'static [u8]) -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            match listener.accept() {
                Ok((mut s, _)) => {
                    std::thread::spawn(move || {
                        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut buf = [0u8; 4096];
                        while let Ok(n) = s.read(&mut buf) {
                            if n == 0 || s.write_all(reply).is_err() {
                                break;
                            }
                        }
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (port, h)
}

#[test]
fn protocol_garbage_is_counted_never_a_panic_or_a_hang() {
    let cases: [(&str, &'static [u8]); 3] = [
        (
            "memcache://127.0.0.1:{port}",
            b"VALUE usr:1 0 notanumber\r\nEND\r\n",
        ),
        (
            "http://127.0.0.1:{port}/usr/{key}",
            b"HTTP/1.1 200 OK\r\nContent-Length: zzz\r\n\r\n",
        ),
        (
            "memcache://127.0.0.1:{port}",
            b"\x00\x01\x02\xff garbage without end",
        ),
    ];
    for (template, reply) in cases {
        let (port, h) = garbage_server(reply);
        let url = template.replace("{port}", &port.to_string());
        let started = Instant::now();
        let (code, doc, err) = run_json(&[
            &url,
            "-d",
            "2s",
            "--warmup",
            "0s",
            "-c",
            "2",
            "--timeout",
            "500ms",
            "--reconnect-backoff",
            "10ms,100ms",
        ]);
        assert_eq!(code, 1, "{url}: {err}");
        assert!(started.elapsed() < Duration::from_secs(6), "{url}: no hang");
        assert!(!err.contains("panicked"), "{err}");
        let r = &doc["runs"][0];
        assert!(
            u(r, "errors.protocol") + u(r, "errors.timeout") > 0,
            "{url}: {r}"
        );
        assert_eq!(u(r, "hits"), 0);
        assert_eq!(error_kinds_sum(r), u(r, "error_total"), "{url}: {r}");
        h.join().unwrap();
    }
}

/// The "unknown target scheme" line lists every scheme run accepts, aliases included, and each
/// one it lists is accepted (the run gets as far as connecting to a closed port).
#[test]
fn run_names_every_scheme_it_accepts() {
    let out = run(&["run", "nosuch://127.0.0.1:1", "-n", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let list = stderr
        .split_once("use one of ")
        .map(|(_, rest)| rest.trim())
        .unwrap_or_else(|| panic!("no list in: {stderr}"));
    let schemes: Vec<&str> = list.split(", ").collect();
    for alias in [
        "handlersocket://",
        "memcached://",
        "postgresql://",
        "mariadb://",
        "redis://",
    ] {
        assert!(schemes.contains(&alias), "{alias} missing: {stderr}");
    }
    for s in schemes.iter().filter(|s| s.ends_with("://")) {
        let url = format!("{s}u@127.0.0.1:1/db/usr");
        let out = run(&["run", &url, "-n", "1", "--timeout", "1s"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("unknown target scheme"), "{url}: {err}");
    }
}

/// A listener whose accept queue is full drops new SYNs, so a TCP connect to it never completes.
/// Returns it and the connections that fill its queue (all kept open by the caller).
fn full_backlog() -> (std::net::TcpListener, Vec<std::net::TcpStream>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(async {
        let s = tokio::net::TcpSocket::new_v4().unwrap();
        s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        s.listen(0).unwrap().into_std().unwrap()
    });
    let addr = listener.local_addr().unwrap();
    let mut fill = Vec::new();
    // Never accepted: the queue holds a connection or two, then the kernel drops SYNs.
    for _ in 0..16 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(c) => fill.push(c),
            Err(_) => return (listener, fill),
        }
    }
    panic!("the accept queue of {addr} never filled");
}

/// HTTP, memcached and HandlerSocket connect within --timeout, as the SQL targets do: a server
/// that never completes the TCP handshake is a setup error (exit 2) naming the address and
/// --timeout, after about --timeout, not the preflight's backstop (2 x --timeout + 1 s).
#[test]
fn a_server_that_never_accepts_is_a_clear_error_within_the_timeout() {
    let (listener, _fill) = full_backlog();
    let addr = listener.local_addr().unwrap();
    for url in [
        format!("memcache://{addr}"),
        format!("http://{addr}/usr/{{key}}"),
        format!("hs://{addr}/loadgen/usr"),
    ] {
        let t0 = Instant::now();
        let out = run(&["run", &url, "-n", "10", "--timeout", "1s"]);
        let took = t0.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(
            stderr.contains(&format!("no connection to {addr} within --timeout")),
            "{url}: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{url}: {stderr}");
        assert!(!stderr.contains("panicked"), "{url}: {stderr}");
        assert!(took < Duration::from_millis(2500), "{url}: took {took:?}");
    }
}

/// A short run against a fake: (exit code, the run's JSON, stderr).
fn run_fake(url: &str, extra: &[&str]) -> (i32, Value, String) {
    run_fake_for(url, "1s", extra)
}

/// [`run_fake`] for `duration`.
fn run_fake_for(url: &str, duration: &str, extra: &[&str]) -> (i32, Value, String) {
    let (code, doc, err) = run_json(&fake_args(url, duration, extra));
    (code, doc["runs"][0].clone(), err)
}

/// The text report (stdout and stderr) of a short run against a fake.
fn text_fake(url: &str, duration: &str, extra: &[&str]) -> String {
    let mut args = vec!["run"];
    args.extend(fake_args(url, duration, extra));
    let out = common::run(&args);
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// One connection on one thread, short timeouts and back-off, then `extra`.
fn fake_args<'a>(url: &'a str, duration: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![url, "-d", duration, "--warmup", "0s", "-c", "1", "-t", "1"];
    args.extend(["--timeout", "300ms", "--reconnect-backoff", "10ms,50ms"]);
    args.extend_from_slice(extra);
    args
}

/// Two replies that each look like a miss for every request: the second arrives before its
/// request was sent. That is a protocol error, never a miss, on every protocol, pipelined or
/// not (it once gave "2,000 misses" at 0.1 µs, exit 0).
#[test]
fn replies_out_of_step_are_protocol_errors_on_every_protocol() {
    for proto in Proto::ALL {
        for depth in ["1", "4"] {
            let fake = fakes::start(proto, Behaviour::OutOfStep);
            let (code, r, err) = run_fake(&fake.url, &["-p", depth]);
            let context = format!("{proto:?} -p {depth}: {err} {r}");
            assert_eq!(code, 1, "{context}");
            assert!(u(&r, "errors.protocol") > 0, "{context}");
            assert!(u(&r, "reconnects") > 0, "{context}");
            // Only the replies before the stream went out of step count as misses: a few per
            // connection, not one per reply.
            assert!(
                u(&r, "misses") <= (u(&r, "reconnects") + 1) * 4,
                "{context}"
            );
            assert!(!err.contains("panicked"), "{context}");
        }
    }
}

/// An extra reply that arrives after the next request went out (each reply then answers the
/// request before the one it is taken for) is a protocol error on every protocol: at the end,
/// when a reply comes after the last one was answered, and in a paced run as soon as the next
/// request is due, since it waited on the socket before that request was sent. It once read
/// as a run of misses, exit 0.
#[test]
fn late_extra_replies_are_protocol_errors_on_every_protocol() {
    for proto in Proto::ALL {
        for extra in [&["-p", "1"][..], &["-p", "4"], &["--rate", "200"]] {
            let fake = fakes::start(proto, Behaviour::LateExtra);
            let (code, r, err) = run_fake(&fake.url, extra);
            let context = format!("{proto:?} {extra:?}: {err} {r}");
            assert_eq!(code, 1, "{context}");
            assert!(u(&r, "errors.protocol") > 0, "{context}");
            let samples = r["error_samples"].to_string();
            assert!(samples.contains("more replies than requests"), "{context}");
            if extra[0] == "--rate" {
                // Caught on each connection's second request, not only once at the end.
                assert!(u(&r, "errors.protocol") >= 2, "{context}");
                assert!(u(&r, "reconnects") >= 1, "{context}");
            }
            assert!(!err.contains("panicked"), "{context}");
        }
    }
}

/// A server's bytes 0x00-0xFF reach no report raw: escaped (`\x1b`) and cut, in the JSON's
/// samples, the text report and stderr; PostgreSQL and MySQL on both drivers too.
#[test]
fn server_garbage_is_escaped_and_cut_everywhere_it_is_shown() {
    let mut all: Vec<(String, fakes::Fake)> = Proto::ALL
        .iter()
        .map(|&p| (format!("{p:?}"), fakes::start(p, Behaviour::Garbage)))
        .collect();
    all.extend(
        sql_fakes(Behaviour::Garbage)
            .into_iter()
            .map(|(name, f)| (name.to_string(), f)),
    );
    for (proto, fake) in all {
        let (_, r, err) = run_fake(&fake.url, &[]);
        let samples = r["error_samples"].as_array().expect("error_samples");
        assert!(!samples.is_empty(), "{proto:?}: {r}");
        for s in samples {
            let s = s.as_str().unwrap();
            assert!(!s.chars().any(char::is_control), "{proto:?}: {s:?}");
            assert!(s.chars().count() < 500, "{proto:?}: {s:?}");
        }
        let text = text_fake(&fake.url, "1s", &[]);
        assert!(text.contains("error"), "{proto:?}: {text}");
        for line in text.lines() {
            assert!(
                !line.chars().any(|c| c.is_control() && c != '\t'),
                "{proto:?}: {line:?}"
            );
        }
        assert!(
            !err.contains('\0') && !err.contains('\x1b'),
            "{proto:?}: {err:?}"
        );
    }
}

/// The fake PostgreSQL and MySQL of `how`, on the wire driver and the default one: (name, fake).
fn sql_fakes(how: Behaviour) -> Vec<(&'static str, fakes::Fake)> {
    vec![
        ("postgres wire", fake_pg::start(how, "wire")),
        ("postgres", fake_pg::start(how, "")),
        ("mysql wire", fake_mysql::start(how, "wire")),
        ("mysql", fake_mysql::start(how, "")),
    ]
}

/// PostgreSQL and MySQL that answer every lookup twice: a protocol error on both drivers,
/// never a run of misses.
#[test]
fn sql_replies_out_of_step_are_protocol_errors() {
    for (name, fake) in sql_fakes(Behaviour::OutOfStep) {
        let depths: &[&str] = if name.ends_with("wire") {
            &["1", "4"]
        } else {
            &["1"]
        };
        for depth in depths {
            let (code, r, err) = run_fake(&fake.url, &["-p", depth]);
            let context = format!("{name} -p {depth}: {err} {r}");
            assert_eq!(code, 1, "{context}");
            assert!(u(&r, "errors.protocol") > 0, "{context}");
            // Pipelined, a duplicate batch that comes after the next one went out looks in
            // step until the two arrive together: caught then, or at the end, not at once.
            if *depth == "1" {
                assert!(
                    u(&r, "misses") <= (u(&r, "reconnects") + 1) * 4,
                    "{context}"
                );
            }
            assert!(!err.contains("panicked"), "{context}");
        }
    }
}

/// A failed connect sent no request: it is a run-level `connect` error, charged to no op (it
/// was once charged to `read`, an op not in `--mix update=100`). The server goes down 700 ms
/// after it started and stays down.
#[test]
fn failed_connects_are_charged_to_no_op() {
    let lifetime = Duration::from_millis(700);
    let fake = fakes::start_for(Proto::Memcached, Behaviour::Misses, lifetime);
    let (code, r, err) = run_fake_for(&fake.url, "1500ms", &["--mix", "update=100"]);
    assert_eq!(code, 1, "{err}");
    assert!(u(&r, "errors.connect") > 0, "{r}");
    assert!(u(&r, "ops.update.misses") > 0, "{err} {r}");
    assert!(
        r["ops"]["read"].is_null(),
        "read is not in the mix: {}",
        r["ops"]
    );
    let ops: u64 = r["ops"]
        .as_object()
        .map_or(0, |o| o.values().map(|o| u(o, "requests")).sum());
    assert_eq!(ops + u(&r, "errors.connect"), u(&r, "requests"), "{r}");
    let fake = fakes::start_for(Proto::Memcached, Behaviour::Misses, lifetime);
    let text = text_fake(&fake.url, "1500ms", &["--mix", "update=100"]);
    assert!(!text.contains("  read "), "{text}");
    assert!(text.contains("connect errors"), "{text}");
}

/// Writes whose connection died (or timed out) before the reply may or may not have been
/// applied: counted per op as `unsure`, and said so in the text report.
#[test]
fn writes_lost_with_their_connection_are_unsure() {
    let fake = fakes::start(Proto::Memcached, Behaviour::Silent);
    let (code, r, err) = run_fake(&fake.url, &["--mix", "read=50,update=50", "-p", "8"]);
    assert_eq!(code, 1, "{err}");
    let timeouts = u(&r, "ops.update.errors.timeout");
    assert!(timeouts > 0, "{r}");
    assert_eq!(u(&r, "ops.update.unsure"), timeouts, "{r}");
    assert_eq!(u(&r, "ops.read.unsure"), 0, "{r}");
    assert_eq!(u(&r, "unsure"), timeouts, "{r}");
    let text = text_fake(&fake.url, "1s", &["--mix", "update=100"]);
    assert!(text.contains("writes in doubt"), "{text}");
    assert!(text.contains("unsure "), "{text}");
}
