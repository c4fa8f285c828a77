//! Faults: servers killed, restarted and paused mid-run; Ctrl-C; bad input; password redaction.

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Requests of the runs below: a fixed rate makes them last a known time (`-n` at `-R`).
const KILL_N: u64 = 24_000;
const KILL_RATE: &str = "2000";

/// Kills `name` 3 s into a 12 s run of exactly `KILL_N` requests, restarts it, and checks the
/// run kept counting and lost no request: each one is a hit, a miss or an error.
fn kill_and_restart(name: &str, url: &str, after_restart: impl FnOnce()) {
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
    assert_eq!(u(r, "hits") + u(r, "misses") + u(r, "error_total"), KILL_N);
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
}

#[test]
fn postgres_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    kill_and_restart("postgres", &url, || {});
}

#[test]
fn memcached_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let reload = url.clone();
    kill_and_restart("memcached", &url, move || {
        // memcached keeps nothing across a restart: load the rows again so hits come back
        let out = run(&["prepare", &reload, "--rows", "1000000"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

#[test]
fn redis_killed_and_restarted_mid_run() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let reload = url.clone();
    kill_and_restart("redis", &url, move || {
        // servers.sh runs Redis without persistence: load the rows again so hits come back
        let out = run(&["prepare", &reload, "--rows", "1000000"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
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
        assert_eq!(
            u(r, "hits") + u(r, "misses") + u(r, "error_total"),
            u(r, "requests")
        );
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
