//! What an HTTP target puts on the wire: loadgen's own options stay out of the request, the
//! server's query params go in as written, and `-p` pipelines. The server is a small real
//! HTTP/1.1 keep-alive server of our own that records every request line (no HTTP server of
//! the test set records them).

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Seen {
    lines: Vec<String>,
    /// The most requests found complete in one read before answering any: above 1 only
    /// when the client pipelines.
    max_batch: usize,
}

/// Listens on 127.0.0.1:0 and answers every request `404` with an empty body (a miss), in
/// order, after reading whatever the client has sent. The accept loop ends with the test
/// process.
fn recording_server() -> (u16, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let seen = s2.clone();
            std::thread::spawn(move || serve(conn, &seen));
        }
    });
    (port, seen)
}

fn serve(mut s: TcpStream, seen: &Mutex<Seen>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut reply = Vec::new();
        let mut batch = 0;
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = buf.drain(..end + 4).collect();
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            batch += 1;
            seen.lock().unwrap().lines.push(line);
            reply.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
        {
            let mut g = seen.lock().unwrap();
            g.max_batch = g.max_batch.max(batch);
        }
        if s.write_all(&reply).is_err() {
            return;
        }
    }
}

/// Runs `url` for exactly 200 lookups of key 123 on one connection at depth `depth`;
/// returns what the server saw.
fn drive(url: &str, depth: &str) -> Seen {
    let (port, seen) = recording_server();
    let url = url.replace("PORT", &port.to_string());
    let (code, doc, err) = run_json(&[
        &url, "-n", "200", "-c", "1", "-t", "1", "-p", depth, "--keys", "123-123",
    ]);
    assert_eq!(code, 0, "{url} -p {depth}: {err}");
    assert_eq!(u(&doc["runs"][0], "misses"), 200, "{url} -p {depth}");
    let mut taken = std::mem::take(&mut *seen.lock().unwrap());
    // The preflight's first words, on a connection of their own, are not the run's requests.
    let before = taken.lines.len();
    taken.lines.retain(|l| l != "OPTIONS * HTTP/1.0");
    assert_eq!(before - taken.lines.len(), 1, "{url}: one OPTIONS first");
    taken
}

#[test]
fn loadgen_options_leave_the_request_and_server_params_stay() {
    for (url, depth, line) in [
        (
            "http://127.0.0.1:PORT/usr/{key}?pipeline=1&format=raw",
            "1",
            "GET /usr/123?format=raw HTTP/1.1",
        ),
        (
            "http://127.0.0.1:PORT/usr/{key}?pipeline=1&format=raw",
            "4",
            "GET /usr/123?format=raw HTTP/1.1",
        ),
        // -p alone pipelines HTTP, as on the embedded target.
        (
            "http://127.0.0.1:PORT/usr/{key}?format=raw",
            "4",
            "GET /usr/123?format=raw HTTP/1.1",
        ),
        (
            "http://127.0.0.1:PORT/usr/{key}?pipeline=1",
            "4",
            "GET /usr/123 HTTP/1.1",
        ),
        // The key in the query; an escape kept as written.
        (
            "http://127.0.0.1:PORT/kv?id={key}&pipeline=1&q=a%26b",
            "1",
            "GET /kv?id=123&q=a%26b HTTP/1.1",
        ),
    ] {
        let seen = drive(url, depth);
        assert_eq!(seen.lines.len(), 200, "{url} -p {depth}");
        for l in &seen.lines {
            assert_eq!(l, line, "{url} -p {depth}");
        }
        if depth == "1" {
            assert_eq!(seen.max_batch, 1, "{url}: -p 1 must not pipeline");
        } else {
            assert!(seen.max_batch > 1, "{url} -p {depth}: never pipelined");
        }
    }
}

#[test]
fn pipeline_zero_with_p_above_1_is_refused() {
    let out = run(&[
        "run",
        "http://127.0.0.1:1/usr/{key}?pipeline=0",
        "-p",
        "4",
        "-o",
        "-",
        "-q",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("pipeline=0") && stderr.contains("-p 4"),
        "{stderr}"
    );
}
