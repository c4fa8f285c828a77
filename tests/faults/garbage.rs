//! Fake servers that answer garbage, out of step, or never accept.

use super::*;

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
        // Nothing was answered: every request failed, and only as what garbage can be.
        assert_eq!((u(r, "hits"), u(r, "misses")), (0, 0), "{url}: {r}");
        let kinds = ["protocol", "timeout", "io", "connect"];
        let seen: u64 = kinds.iter().map(|k| u(&r["errors"], k)).sum();
        assert_eq!(seen, u(r, "error_total"), "{url}: {}", r["errors"]);
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
            // A duplicate that lands after the next request went out reads as that request's
            // miss until one lands before: on a busy machine that takes a few more rounds.
            if *depth == "1" {
                assert!(
                    u(&r, "misses") <= (u(&r, "reconnects") + 1) * 8,
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
