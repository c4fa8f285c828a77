//! A fake MySQL for hostile behaviour: just enough of the client/server protocol for both
//! drivers (handshake v10, mysql_native_password with no password, mysql_async's settings
//! query, the lookup's COM_STMT_PREPARE and COM_STMT_EXECUTE) and for the count read before
//! the run (SHOW GLOBAL STATUS fails: no counter), then it misbehaves as told.

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::fakes::{listen_sql, read_n, Behaviour, Fake};

/// CLIENT_DEPRECATE_EOF: result sets end with an OK packet, no EOF after the columns.
const DEPRECATE_EOF: u32 = 0x0100_0000;

/// Starts a fake MySQL that behaves as `how`; its URL takes `driver` (`wire`, or empty for
/// the default driver).
pub fn start(how: Behaviour, driver: &str) -> Fake {
    listen_sql(
        "mysql://bench@127.0.0.1:{port}/loadgen?ssl-mode=DISABLED",
        driver,
        how,
        serve,
    )
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(payload);
    p
}

fn lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(s.len() as u8);
    out.extend_from_slice(s);
}

/// A column definition (protocol 41) of `name` of MySQL type `ty`.
fn column(name: &str, ty: u8) -> Vec<u8> {
    let mut c = Vec::new();
    for part in ["def", "loadgen", "usr", "usr", name, name] {
        lenenc_str(&mut c, part.as_bytes());
    }
    c.push(0x0c);
    c.extend_from_slice(&63u16.to_le_bytes()); // binary
    c.extend_from_slice(&20u32.to_le_bytes());
    c.push(ty);
    c.extend_from_slice(&[0, 0, 0, 0, 0]); // flags, decimals, filler
    c
}

const OK: [u8; 7] = [0x00, 0, 0, 0x02, 0, 0, 0];
const EOF: [u8; 5] = [0xFE, 0, 0, 0x02, 0];
/// The OK that ends a result set under CLIENT_DEPRECATE_EOF.
const END: [u8; 7] = [0xFE, 0, 0, 0x02, 0, 0, 0];

/// A result set of `columns` (name, type) and `rows` of text values (None: NULL), in
/// packets from sequence id 1.
fn result_set(columns: &[(&str, u8)], rows: &[Vec<Option<&str>>], eof: bool) -> Vec<u8> {
    let mut seq = 0u8;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut out = packet(next(), &[columns.len() as u8]);
    for (name, ty) in columns {
        out.extend(packet(next(), &column(name, *ty)));
    }
    if eof {
        out.extend(packet(next(), &EOF));
    }
    for row in rows {
        let mut r = Vec::new();
        for v in row {
            match v {
                Some(v) => lenenc_str(&mut r, v.as_bytes()),
                None => r.push(0xFB),
            }
        }
        out.extend(packet(next(), &r));
    }
    out.extend(packet(next(), if eof { &EOF[..] } else { &END[..] }));
    out
}

fn error(seq: u8) -> Vec<u8> {
    let mut e = vec![0xFF];
    e.extend_from_slice(&1146u16.to_le_bytes());
    e.extend_from_slice(b"#42S02no such table (a fake server)");
    packet(seq, &e)
}

/// Reads one packet's payload; None when the client is gone or the fake stops.
fn read_packet(s: &mut TcpStream, stop: &AtomicBool) -> Option<Vec<u8>> {
    let head = read_n(s, 4, stop)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], 0]) as usize;
    read_n(s, len, stop)
}

fn greeting() -> Vec<u8> {
    // LONG_PASSWORD (a MySQL, not a MariaDB), FOUND_ROWS, LONG_FLAG, CONNECT_WITH_DB,
    // PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION, MULTI_RESULTS, PS_MULTI_RESULTS,
    // PLUGIN_AUTH, PLUGIN_AUTH_LENENC_CLIENT_DATA, DEPRECATE_EOF; no SSL.
    let caps: u32 = 0x1 | 0x2 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x2_0000 | 0x4_0000;
    let caps = caps | 0x8_0000 | 0x20_0000 | DEPRECATE_EOF;
    let mut g = vec![10];
    g.extend_from_slice(b"8.0.0-fake\0");
    g.extend_from_slice(&7u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(45); // utf8mb4
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0");
    g.extend_from_slice(b"mysql_native_password\0");
    packet(0, &g)
}

fn serve(mut s: TcpStream, how: Behaviour, stop: &AtomicBool) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
    if s.write_all(&greeting()).is_err() {
        return;
    }
    let Some(login) = read_packet(&mut s, stop) else {
        return;
    };
    let client_caps = login
        .get(..4)
        .map_or(0, |c| u32::from_le_bytes(c.try_into().unwrap()));
    let eof = client_caps & DEPRECATE_EOF == 0;
    if s.write_all(&packet(2, &OK)).is_err() {
        return;
    }
    let garbage: Vec<u8> = (0..=255u8).collect();
    let mut hung = false;
    while let Some(p) = read_packet(&mut s, stop) {
        if hung {
            continue; // reads on, never answers
        }
        let text = String::from_utf8_lossy(p.get(1..).unwrap_or_default()).to_string();
        let reply = match p.first() {
            Some(0x01) => return, // COM_QUIT
            // COM_QUERY: mysql_async's settings, the count, anything else fails.
            Some(0x03) if text.starts_with("SELECT @@") => {
                let names: Vec<&str> = text["SELECT ".len()..].split(',').collect();
                let columns: Vec<(&str, u8)> = names.iter().map(|n| (n.trim(), 0xFD)).collect();
                let row = names
                    .iter()
                    .map(|n| match n.trim() {
                        "@@max_allowed_packet" => Some("16777216"),
                        "@@wait_timeout" => Some("28800"),
                        _ => None,
                    })
                    .collect();
                result_set(&columns, &[row], eof)
            }
            Some(0x03) if how == Behaviour::HangOnCount && text.contains("GLOBAL STATUS") => {
                hung = true;
                continue;
            }
            Some(0x03) => error(1),
            Some(0x0e) => packet(1, &OK), // COM_PING
            Some(0x16) => {
                // COM_STMT_PREPARE: statement 1, one BIGINT column, one BIGINT per `?`
                let params = text.matches('?').count() as u16;
                let mut ok = vec![0x00];
                ok.extend_from_slice(&1u32.to_le_bytes());
                ok.extend_from_slice(&1u16.to_le_bytes());
                ok.extend_from_slice(&params.to_le_bytes());
                ok.extend_from_slice(&[0, 0, 0]);
                let mut seq = 1;
                let mut out = packet(seq, &ok);
                for _ in 0..params {
                    seq += 1;
                    out.extend(packet(seq, &column("?", 0x08)));
                }
                if params > 0 && eof {
                    seq += 1;
                    out.extend(packet(seq, &EOF));
                }
                seq += 1;
                out.extend(packet(seq, &column("user_id", 0x08)));
                if eof {
                    out.extend(packet(seq + 1, &EOF));
                }
                out
            }
            // COM_STMT_EXECUTE: no row, as a server without the key answers
            Some(0x17) => match how {
                Behaviour::Garbage => garbage.clone(),
                Behaviour::OutOfStep => {
                    let miss = result_set(&[("user_id", 0x08)], &[], eof);
                    [miss.clone(), miss].concat()
                }
                _ => result_set(&[("user_id", 0x08)], &[], eof),
            },
            Some(0x19) => continue, // COM_STMT_CLOSE: no reply
            _ => error(1),
        };
        if s.write_all(&reply).is_err() {
            return;
        }
    }
}
