//! A fake PostgreSQL for hostile behaviour: just enough of the v3 protocol for both drivers
//! (trust login, the lookup's Parse/Describe, Bind/Execute/Sync) and for the count read
//! before the run (every simple query fails: no counter), then it misbehaves as told.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::fakes::{listen_sql, read_n, Behaviour, Fake};

/// Starts a fake PostgreSQL that behaves as `how`; its URL takes `driver` (`wire`, or empty
/// for the default driver).
pub fn start(how: Behaviour, driver: &str) -> Fake {
    listen_sql(
        "postgres://bench@127.0.0.1:{port}/loadgen?sslmode=disable",
        driver,
        how,
        serve,
    )
}

/// One message: tag, length, body.
fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

fn param(name: &str, value: &str) -> Vec<u8> {
    msg(b'S', format!("{name}\0{value}\0").as_bytes())
}

fn serve(mut s: TcpStream, how: Behaviour, stop: &AtomicBool) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    // Startup, after an SSLRequest refused with 'N'.
    loop {
        let Some(len) = read_n(&mut s, 4, stop) else {
            return;
        };
        let len = i32::from_be_bytes(len.try_into().unwrap()) as usize;
        let Some(body) = read_n(&mut s, len.saturating_sub(4), stop) else {
            return;
        };
        match body.get(..4) {
            Some([0x04, 0xd2, 0x16, 0x2f]) => {
                if s.write_all(b"N").is_err() {
                    return;
                }
            }
            _ => break,
        }
    }
    let mut hello = msg(b'R', &0i32.to_be_bytes());
    for (k, v) in [
        ("server_version", "16.0"),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO, MDY"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
    ] {
        hello.extend(param(k, v));
    }
    hello.extend(msg(b'K', &[0, 0, 0, 7, 0, 0, 0, 9]));
    hello.extend(msg(b'Z', b"I"));
    if s.write_all(&hello).is_err() {
        return;
    }
    let garbage: Vec<u8> = (0..=255u8).collect();
    let mut out = Vec::new();
    let mut executes = 0;
    let mut hung = false;
    loop {
        let Some(head) = read_n(&mut s, 5, stop) else {
            return;
        };
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
        let Some(body) = read_n(&mut s, len.saturating_sub(4), stop) else {
            return;
        };
        if hung {
            continue; // reads on, never answers
        }
        match head[0] {
            b'P' => out.extend(msg(b'1', b"")),
            b'D' => {
                if body.first() == Some(&b'S') {
                    // one int8 parameter
                    out.extend(msg(b't', &[0, 1, 0, 0, 0, 20]));
                }
                // one int8 column, user_id
                let mut f = vec![0, 1];
                f.extend_from_slice(b"user_id\0");
                f.extend_from_slice(&[
                    0, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 8, 255, 255, 255, 255, 0, 0,
                ]);
                out.extend(msg(b'T', &f));
            }
            b'B' => out.extend(msg(b'2', b"")),
            b'E' => {
                executes += 1;
                match how {
                    Behaviour::Garbage => out.extend_from_slice(&garbage),
                    _ => out.extend(msg(b'C', b"SELECT 0\0")),
                }
            }
            b'C' => out.extend(msg(b'3', b"")),
            b'S' | b'H' => {
                if head[0] == b'S' {
                    out.extend(msg(b'Z', b"I"));
                }
                let twice = how == Behaviour::OutOfStep && executes > 0;
                let copies = if twice { 2 } else { 1 };
                for _ in 0..copies {
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
                out.clear();
                executes = 0;
            }
            // The count's queries (the only simple queries): no counter, or no answer ever.
            b'Q' if how == Behaviour::HangOnCount => hung = true,
            b'Q' => {
                let error = b"SERROR\0VERROR\0C42P01\0Mrelation \"pg_stat_statements\" does not exist (a fake server)\0\0";
                out.extend(msg(b'E', error));
                out.extend(msg(b'Z', b"I"));
                if s.write_all(&out).is_err() {
                    return;
                }
                out.clear();
            }
            b'X' => return,
            _ => {}
        }
    }
}
