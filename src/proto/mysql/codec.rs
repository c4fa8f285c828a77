//! MySQL / MariaDB binary protocol for one prepared lookup: a COM_STMT_EXECUTE per key, the
//! binary result set parsed in place, with no allocation unless a reply is an error.
//! The handshake and COM_STMT_PREPARE live in `target::mysqlwire`.
//!
//! The server reads commands off the socket one after the other and answers each in order, so
//! lookups pipeline; every execute carries its own parameter types, so each stands alone.
//! Sequence ids are checked: every reply starts at 1 and counts up, so a stream that fell out
//! of step is a protocol error at once instead of rows credited to the wrong key.

use crate::outcome::{LookupError, Outcome};
use crate::proto::codec::{decimal, Codec, Decoded, MAX_FRAME};

// Capability flags (the low 32 bits are MySQL's; MariaDB's own are the high 32).
pub const CLIENT_LONG_PASSWORD: u64 = 1; // MariaDB: CLIENT_MYSQL, "not a MariaDB server/client"
pub const CLIENT_CONNECT_WITH_DB: u64 = 1 << 3;
pub const CLIENT_PROTOCOL_41: u64 = 1 << 9;
pub const CLIENT_TRANSACTIONS: u64 = 1 << 13;
pub const CLIENT_SECURE_CONNECTION: u64 = 1 << 15;
pub const CLIENT_MULTI_RESULTS: u64 = 1 << 17;
pub const CLIENT_PS_MULTI_RESULTS: u64 = 1 << 18;
pub const CLIENT_PLUGIN_AUTH: u64 = 1 << 19;
pub const CLIENT_DEPRECATE_EOF: u64 = 1 << 24;
pub const MARIADB_CLIENT_CACHE_METADATA: u64 = 1 << 36;

pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;

/// Status flag: another result follows this one (a CALL in a prepared statement).
const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
const MYSQL_TYPE_LONGLONG: u8 = 0x08;
const UNSIGNED: u8 = 0x80;
/// MySQL's limit on columns in a table; more in a reply is garbage.
const MAX_COLUMNS: u64 = 4096;

/// COM_STMT_EXECUTE of one parameter: 4 bytes header + 22 bytes payload, the key last.
const EXECUTE_LEN: usize = 26;

/// What the handshake agreed on that changes the shape of a result set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// CLIENT_DEPRECATE_EOF: no EOF after the column definitions, an OK (0xFE) at the end.
    pub deprecate_eof: bool,
    /// MARIADB_CLIENT_CACHE_METADATA: the column count carries a "metadata follows" byte and
    /// the column definitions are sent only when they changed since the prepare.
    pub cache_metadata: bool,
}

impl Shape {
    pub fn of(capabilities: u64) -> Shape {
        Shape {
            deprecate_eof: capabilities & CLIENT_DEPRECATE_EOF != 0,
            cache_metadata: capabilities & MARIADB_CLIENT_CACHE_METADATA != 0,
        }
    }
}

/// Encodes executes of one prepared statement and decodes their binary result sets.
/// `verify` checks the `usr` row (`row_matches`), like the other drivers.
pub struct MyCodec {
    template: [u8; EXECUTE_LEN],
    shape: Shape,
}

impl MyCodec {
    pub fn new(statement_id: u32, shape: Shape) -> MyCodec {
        let mut t = [0u8; EXECUTE_LEN];
        t[0] = (EXECUTE_LEN - 4) as u8; // payload length (3 bytes LE), sequence id 0
        t[4] = COM_STMT_EXECUTE;
        t[5..9].copy_from_slice(&statement_id.to_le_bytes());
        t[9] = 0; // no cursor
        t[10] = 1; // iteration count (4 bytes LE): always 1
        t[14] = 0; // NULL bitmap of the one parameter: not NULL
                   // New params bound, every time: the server then needs nothing from an earlier execute.
        t[15] = 1;
        // The key is a u64, sent as an unsigned LONGLONG: every key arrives as it was generated,
        // and the server converts it for the column it is compared with.
        t[16] = MYSQL_TYPE_LONGLONG;
        t[17] = UNSIGNED;
        MyCodec { template: t, shape }
    }

    fn parse(&self, buf: &[u8], key: u64, verify: bool) -> Result<Decoded, LookupError> {
        let mut r = Packets {
            buf,
            pos: 0,
            seq: 1,
        };
        let mut first_row: Option<(&[u8], u64)> = None;
        // Stateless: a partial reply is parsed again from its start on the next call; a hit is
        // ~70 bytes with cached metadata, so that is cheaper than carrying state across reads.
        // One pass of this loop per result; more than one only after SERVER_MORE_RESULTS_EXISTS.
        loop {
            let Some(p) = r.next_packet()? else {
                return Ok(None);
            };
            let status = match p[0] {
                0xFF => return Ok(Some((r.pos, Err(server_error(p)?)))),
                // No result set (a --query that is not a SELECT): no row.
                0x00 => ok_status(p)?,
                _ => {
                    let (columns, rest) = lenenc(p)
                        .filter(|&(n, _)| (1..=MAX_COLUMNS).contains(&n))
                        .ok_or_else(|| bad("a column count", p))?;
                    let metadata = match (self.shape.cache_metadata, rest) {
                        (true, [0]) => false,
                        (true, [1]) | (false, []) => true,
                        _ => return Err(bad("a column count", p)),
                    };
                    if metadata {
                        // Column definitions: not needed, each bounded by MAX_FRAME like any packet.
                        for _ in 0..columns {
                            let Some(_) = r.next_packet()? else {
                                return Ok(None);
                            };
                        }
                    }
                    if !self.shape.deprecate_eof {
                        let Some(p) = r.next_packet()? else {
                            return Ok(None);
                        };
                        eof_status(p)?;
                    }
                    loop {
                        let Some(p) = r.next_packet()? else {
                            return Ok(None);
                        };
                        match p[0] {
                            0x00 => {
                                first_row = first_row.or(Some((p, columns)));
                            }
                            // Binary rows start with 0x00, so 0xFE can only be the end.
                            0xFE if self.shape.deprecate_eof => break ok_status(p)?,
                            0xFE => break eof_status(p)?,
                            0xFF => return Ok(Some((r.pos, Err(server_error(p)?)))),
                            _ => return Err(bad("a binary row", p)),
                        }
                    }
                }
            };
            if status & SERVER_MORE_RESULTS_EXISTS == 0 {
                break;
            }
        }
        let result = match first_row {
            None => Ok(Outcome::Miss),
            Some((row, columns)) if verify && !row_matches(row, columns, key) => {
                Err(LookupError::verify(key))
            }
            Some(_) => Ok(Outcome::Hit),
        };
        Ok(Some((r.pos, result)))
    }
}

impl Codec for MyCodec {
    #[inline]
    fn encode(&mut self, key: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.template);
        let end = out.len();
        out[end - 8..].copy_from_slice(&key.to_le_bytes());
    }

    fn decode(&mut self, buf: &[u8], key: u64, verify: bool) -> Result<Decoded, LookupError> {
        match self.parse(buf, key, verify) {
            // Each packet is bounded; a reply of many packets is bounded here.
            Ok(None) if buf.len() >= MAX_FRAME => Err(LookupError::protocol(
                "MySQL reply larger than 1 MiB (a --query that returns too many rows?)",
            )),
            other => other,
        }
    }
}

/// Packets at the front of a buffer, their sequence ids checked.
pub struct Packets<'a> {
    pub buf: &'a [u8],
    /// Bytes of the complete packets taken so far.
    pub pos: usize,
    /// The sequence id the next packet must carry.
    pub seq: u8,
}

impl<'a> Packets<'a> {
    /// The next payload, never empty; `Ok(None)` when it is not all here yet.
    pub fn next_packet(&mut self) -> Result<Option<&'a [u8]>, LookupError> {
        let Some(h) = self.buf.get(self.pos..self.pos + 4) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        if len > MAX_FRAME {
            // Also payloads of 16 MiB and more, which continue in further packets.
            return Err(LookupError::protocol(format!(
                "MySQL packet of {len} bytes, more than the 1 MiB loadgen accepts"
            )));
        }
        if len == 0 {
            return Err(LookupError::protocol("empty MySQL packet"));
        }
        if h[3] != self.seq {
            return Err(LookupError::protocol(format!(
                "MySQL reply out of step: packet sequence id {} where {} was due",
                h[3], self.seq
            )));
        }
        let Some(payload) = self.buf.get(self.pos + 4..self.pos + 4 + len) else {
            return Ok(None);
        };
        self.pos += 4 + len;
        self.seq = self.seq.wrapping_add(1);
        Ok(Some(payload))
    }
}

/// An ERR packet: code and message; built on the error path only.
#[derive(Debug, PartialEq, Eq)]
pub struct ServerError {
    pub code: u16,
    pub message: String,
}

impl ServerError {
    /// 0xFF, code (2 bytes LE), then `#` and a 5-byte SQLSTATE (absent in an ERR sent before
    /// the handshake is agreed, e.g. "Too many connections"), then the message.
    pub fn parse(p: &[u8]) -> Option<ServerError> {
        let [0xFF, lo, hi, rest @ ..] = p else {
            return None;
        };
        let message = match rest {
            [b'#', _, _, _, _, _, m @ ..] => m,
            m => m,
        };
        Some(ServerError {
            code: u16::from_le_bytes([*lo, *hi]),
            message: String::from_utf8_lossy(message).into_owned(),
        })
    }

    /// The server closes the connection after these: say why now, the next read sees EOF.
    fn ends_session(&self) -> bool {
        // ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED (MariaDB), ER_NEW_ABORTING_CONNECTION
        matches!(self.code, 1053 | 1927 | 1184)
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error {})", self.message, self.code)
    }
}

/// An ERR reply to a lookup: a non-fatal server error, unless the server is ending the session.
fn server_error(p: &[u8]) -> Result<LookupError, LookupError> {
    let e = ServerError::parse(p).ok_or_else(|| bad("an error packet", p))?;
    if e.ends_session() {
        return Err(LookupError::io(format!(
            "the server ended the session: {e}"
        )));
    }
    Ok(LookupError::server(e.to_string()))
}

/// Status flags of an OK packet (header 0x00, or 0xFE at the end of a result set):
/// affected rows and last insert id (lenenc), then status (2 bytes LE).
fn ok_status(p: &[u8]) -> Result<u16, LookupError> {
    lenenc(&p[1..])
        .and_then(|(_, rest)| lenenc(rest))
        .and_then(|(_, rest)| rest.get(..2))
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| bad("an OK packet", p))
}

/// Status flags of an EOF packet: 0xFE, warnings (2), status (2).
fn eof_status(p: &[u8]) -> Result<u16, LookupError> {
    match p {
        [0xFE, _, _, lo, hi] => Ok(u16::from_le_bytes([*lo, *hi])),
        _ => Err(bad("an EOF packet", p)),
    }
}

fn bad(what: &str, p: &[u8]) -> LookupError {
    LookupError::protocol(format!(
        "malformed MySQL reply: expected {what}, got a {}-byte packet starting 0x{:02x}",
        p.len(),
        p[0]
    ))
}

/// A length-encoded integer at the front of `b`, and the bytes after it.
pub fn lenenc(b: &[u8]) -> Option<(u64, &[u8])> {
    let (&first, rest) = b.split_first()?;
    let width = match first {
        0..=0xFA => return Some((first as u64, rest)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => return None, // 0xFB is NULL in text rows, 0xFF an error: not integers
    };
    let bytes = rest.get(..width)?;
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(bytes);
    Some((u64::from_le_bytes(v), &rest[width..]))
}

/// A length-encoded string at the front of `b`, and the bytes after it.
fn lenenc_str(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (n, rest) = lenenc(b)?;
    let n = usize::try_from(n).ok().filter(|&n| n <= rest.len())?;
    Some(rest.split_at(n))
}

/// The binary row of the default query is the `usr` row for `key`: 3 columns, none NULL,
/// `user<key>`, `user<key>@example.com`, and `created` as a binary DATETIME.
/// No allocation: the digits go to a stack buffer.
fn row_matches(row: &[u8], columns: u64, key: u64) -> bool {
    let mut tmp = [0u8; 20];
    let digits = decimal(key, &mut tmp);
    // 0x00, then the NULL bitmap: (3 + 7 + 2) / 8 = 1 byte, bits from offset 2.
    let [0x00, 0x00, rest @ ..] = row else {
        return false;
    };
    let Some((name, rest)) = lenenc_str(rest) else {
        return false;
    };
    let Some((email, rest)) = lenenc_str(rest) else {
        return false;
    };
    columns == 3
        && name.strip_prefix(b"user") == Some(digits)
        && email
            .strip_prefix(b"user")
            .and_then(|e| e.strip_prefix(digits))
            == Some(b"@example.com")
        && datetime_matches(rest, crate::dataset::created_unix(key))
}

/// A binary DATETIME/TIMESTAMP, the whole rest of the row: a length byte (0, 4, 7 or 11: the
/// server drops trailing zero parts), year (2 LE), month, day, hour, minute, second, µs (4 LE).
fn datetime_matches(b: &[u8], unix: i64) -> bool {
    let (y, mo, d, h, mi, s) = crate::dataset::civil(unix);
    let Some((&len, f)) = b.split_first() else {
        return false;
    };
    if !matches!(len, 0 | 4 | 7 | 11) || f.len() != len as usize {
        return false;
    }
    let mut want = [0u8; 11];
    want[..2].copy_from_slice(&(y as u16).to_le_bytes());
    want[2..7].copy_from_slice(&[mo as u8, d as u8, h as u8, mi as u8, s as u8]);
    // Shorter forms mean zeros: compare the fields sent and require the rest to be zero.
    f == &want[..f.len()] && want[f.len()..].iter().all(|&z| z == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorKind;
    use crate::proto::testkit::{codec_contract, dec, dec_err, decode_split};
    use proptest::prelude::*;

    const ALL_SHAPES: [Shape; 4] = [
        Shape {
            deprecate_eof: true,
            cache_metadata: true,
        },
        Shape {
            deprecate_eof: true,
            cache_metadata: false,
        },
        Shape {
            deprecate_eof: false,
            cache_metadata: true,
        },
        Shape {
            deprecate_eof: false,
            cache_metadata: false,
        },
    ];
    /// What MariaDB 10.11 agrees to with this driver.
    const LEAN: Shape = ALL_SHAPES[0];

    /// A reply being built: packets with sequence ids from 1.
    struct Reply(Vec<u8>, u8);

    impl Reply {
        fn new() -> Reply {
            Reply(Vec::new(), 1)
        }
        fn packet(mut self, payload: &[u8]) -> Reply {
            self.0
                .extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
            self.0.push(self.1);
            self.0.extend_from_slice(payload);
            self.1 = self.1.wrapping_add(1);
            self
        }
        /// Column count, definitions and the EOF after them, as `shape` has them.
        fn header(mut self, shape: Shape, columns: u8) -> Reply {
            let mut count = vec![columns];
            if shape.cache_metadata {
                count.push(0);
            }
            self = self.packet(&count);
            if !shape.cache_metadata {
                for i in 0..columns {
                    let mut def = Vec::new();
                    for s in ["def", "loadgen", "usr", "usr", "c", "c"] {
                        def.push(s.len() as u8);
                        def.extend_from_slice(s.as_bytes());
                    }
                    def.extend_from_slice(&[0x0c, 45, 0, 0, 1, 0, 0, 253, 0, 0, i, 0, 0]);
                    self = self.packet(&def);
                }
            }
            if !shape.deprecate_eof {
                self = self.packet(&[0xFE, 0, 0, 2, 0]);
            }
            self
        }
        fn end(self, shape: Shape, status: u16) -> Reply {
            let s = status.to_le_bytes();
            if shape.deprecate_eof {
                self.packet(&[0xFE, 0, 0, s[0], s[1], 0, 0])
            } else {
                self.packet(&[0xFE, 0, 0, s[0], s[1]])
            }
        }
        fn rows(shape: Shape, rows: &[Vec<u8>]) -> Vec<u8> {
            let mut r = Reply::new().header(shape, 3);
            for row in rows {
                r = r.packet(row);
            }
            r.end(shape, 2).0
        }
    }

    fn lenstr(out: &mut Vec<u8>, s: &[u8]) {
        out.push(s.len() as u8);
        out.extend_from_slice(s);
    }

    fn datetime(unix: i64) -> Vec<u8> {
        let (y, mo, d, h, mi, s) = crate::dataset::civil(unix);
        let mut v = vec![7];
        v.extend_from_slice(&(y as u16).to_le_bytes());
        v.extend_from_slice(&[mo as u8, d as u8, h as u8, mi as u8, s as u8]);
        v
    }

    fn row_of(name: &str, email: &str, created: &[u8]) -> Vec<u8> {
        let mut r = vec![0x00, 0x00];
        lenstr(&mut r, name.as_bytes());
        lenstr(&mut r, email.as_bytes());
        r.extend_from_slice(created);
        r
    }

    fn usr_row(key: u64) -> Vec<u8> {
        let created = datetime(crate::dataset::created_unix(key));
        row_of(
            &format!("user{key}"),
            &format!("user{key}@example.com"),
            &created,
        )
    }

    fn hit(shape: Shape, key: u64) -> Vec<u8> {
        Reply::rows(shape, &[usr_row(key)])
    }

    fn miss(shape: Shape) -> Vec<u8> {
        Reply::rows(shape, &[])
    }

    fn err_packet(code: u16, msg: &str) -> Vec<u8> {
        let mut p = vec![0xFF];
        p.extend_from_slice(&code.to_le_bytes());
        p.extend_from_slice(b"#42S02");
        p.extend_from_slice(msg.as_bytes());
        p
    }

    fn error(code: u16, msg: &str) -> Vec<u8> {
        Reply::new().packet(&err_packet(code, msg)).0
    }

    #[test]
    fn encode_is_one_execute_with_the_key_as_unsigned_longlong() {
        let mut c = MyCodec::new(0x0403_0201, LEAN);
        let mut out = b"prefix".to_vec();
        c.encode(0x1122_3344_5566_7788, &mut out);
        c.encode(u64::MAX, &mut out); // appends, patching only its own bytes
        let one = |key: u64| {
            let mut p = vec![
                22, 0, 0, 0, 0x17, 1, 2, 3, 4, 0, 1, 0, 0, 0, 0, 1, 0x08, 0x80,
            ];
            p.extend_from_slice(&key.to_le_bytes());
            p
        };
        assert_eq!(
            out,
            [&b"prefix"[..], &one(0x1122_3344_5566_7788), &one(u64::MAX)].concat()
        );
    }

    #[test]
    fn hit_miss_and_verify_in_every_shape() {
        for shape in ALL_SHAPES {
            let mut c = MyCodec::new(1, shape);
            let r = hit(shape, 42);
            assert_eq!(
                dec(&mut c, &r, 42, true).unwrap(),
                Some((r.len(), Outcome::Hit))
            );
            let (n, e) = dec_err(&mut c, &r, 43, true);
            assert_eq!((n, e.kind), (r.len(), ErrorKind::Verify), "{shape:?}");
            // Without verify any row is a hit.
            assert_eq!(
                dec(&mut c, &r, 43, false).unwrap(),
                Some((r.len(), Outcome::Hit))
            );
            let r = miss(shape);
            assert_eq!(
                dec(&mut c, &r, 7, true).unwrap(),
                Some((r.len(), Outcome::Miss))
            );
        }
    }

    #[test]
    fn several_rows_are_one_hit_and_all_consumed() {
        let r = Reply::rows(LEAN, &[usr_row(5), usr_row(6), usr_row(7)]);
        let mut buf = r.clone();
        buf.extend(miss(LEAN));
        let got = dec(&mut MyCodec::new(1, LEAN), &buf, 5, true).unwrap();
        assert_eq!(got, Some((r.len(), Outcome::Hit)));
    }

    #[test]
    fn verify_rejects_other_rows() {
        let key = 5;
        let good = datetime(crate::dataset::created_unix(key));
        let mut null_name = usr_row(key);
        null_name[1] = 0b100;
        let mut extra = usr_row(key);
        extra.push(0);
        let mut short_date = vec![4];
        short_date.extend_from_slice(&good[1..5]);
        let mut us_date = good.clone();
        us_date[0] = 11;
        us_date.extend_from_slice(&1u32.to_le_bytes());
        for row in [
            row_of("user55", "user5@example.com", &good),
            row_of("user5", "user5@example.org", &good),
            row_of("user5", "user55@example.com", &good),
            row_of(
                "user5",
                "user5@example.com",
                &datetime(crate::dataset::created_unix(6)),
            ),
            row_of("user5", "user5@example.com", &short_date),
            row_of("user5", "user5@example.com", &us_date),
            row_of("user5", "user5@example.com", &[]),
            null_name,
            extra,
            vec![0x00, 0x00, 200, b'u'], // string longer than the row
        ] {
            let r = Reply::rows(LEAN, &[row]);
            let (n, e) = dec_err(&mut MyCodec::new(1, LEAN), &r, key, true);
            assert_eq!((n, e.kind), (r.len(), ErrorKind::Verify));
        }
        // Four columns, the first three right: not the usr row.
        let mut four = Reply::new().header(LEAN, 4).packet(&usr_row(key));
        four = four.end(LEAN, 2);
        let (_, e) = dec_err(&mut MyCodec::new(1, LEAN), &four.0, key, true);
        assert_eq!(e.kind, ErrorKind::Verify);
    }

    #[test]
    fn short_datetime_forms_mean_zeros() {
        // 2010-02-03 00:00:00 is sent as 4 bytes; midnight keys verify too.
        let unix = crate::dataset::unix_of(2010, 2, 3, 0, 0, 0);
        let mut four = vec![4];
        four.extend_from_slice(&2010u16.to_le_bytes());
        four.extend_from_slice(&[2, 3]);
        assert!(datetime_matches(&four, unix));
        assert!(datetime_matches(
            &[11, 0xDA, 7, 2, 3, 0, 0, 0, 0, 0, 0, 0],
            unix
        ));
        assert!(!datetime_matches(&four, unix + 1));
        assert!(!datetime_matches(&[0], unix));
    }

    #[test]
    fn error_reply_is_a_server_error_and_the_stream_stays_in_step() {
        for shape in ALL_SHAPES {
            let mut buf = error(1146, "Table 'loadgen.nope' doesn't exist");
            let first = buf.len();
            buf.extend(hit(shape, 9));
            let mut c = MyCodec::new(1, shape);
            let (n, e) = dec_err(&mut c, &buf, 8, true);
            assert_eq!(n, first);
            assert_eq!(e.kind, ErrorKind::Server);
            assert_eq!(e.message, "Table 'loadgen.nope' doesn't exist (error 1146)");
            let got = dec(&mut c, &buf[n..], 9, true).unwrap();
            assert_eq!(got, Some((buf.len() - n, Outcome::Hit)));
        }
    }

    #[test]
    fn error_after_rows_is_a_server_error() {
        let r = Reply::new()
            .header(LEAN, 3)
            .packet(&usr_row(3))
            .packet(&err_packet(1365, "Division by 0"));
        let (n, e) = dec_err(&mut MyCodec::new(1, LEAN), &r.0, 3, true);
        assert_eq!((n, e.kind), (r.0.len(), ErrorKind::Server));
    }

    #[test]
    fn shutdown_and_kill_end_the_connection_at_once() {
        for code in [1053u16, 1927] {
            let e = MyCodec::new(1, LEAN)
                .decode(&error(code, "bye"), 1, false)
                .unwrap_err();
            assert_eq!((e.kind, e.fatal), (ErrorKind::Io, true));
            assert!(e.message.contains(&code.to_string()), "{}", e.message);
        }
    }

    #[test]
    fn no_result_set_is_a_miss_and_more_results_are_followed() {
        let ok = Reply::new().packet(&[0x00, 0, 0, 2, 0, 0, 0]).0;
        let got = dec(&mut MyCodec::new(1, LEAN), &ok, 1, true).unwrap();
        assert_eq!(got, Some((ok.len(), Outcome::Miss)));
        // A CALL: the result set says more follows, then the CALL's own OK.
        for shape in ALL_SHAPES {
            let more = SERVER_MORE_RESULTS_EXISTS | 2;
            let r = Reply::new()
                .header(shape, 3)
                .packet(&usr_row(4))
                .end(shape, more);
            let r = r.packet(&[0x00, 0, 0, 2, 0, 0, 0]).0;
            let mut c = MyCodec::new(1, shape);
            assert_eq!(
                dec(&mut c, &r, 4, true).unwrap(),
                Some((r.len(), Outcome::Hit))
            );
            assert_eq!(dec(&mut c, &r[..r.len() - 1], 4, true).unwrap(), None);
        }
    }

    #[test]
    fn pipelined_replies_split_at_every_byte() {
        for shape in ALL_SHAPES {
            let keys = [1u64, 2_000_000, 3, 4];
            let whole = [
                hit(shape, 1),
                miss(shape),
                error(1317, "interrupted"),
                hit(shape, 4),
            ]
            .concat();
            for cut in 0..=whole.len() {
                // Bytes arrive in two reads, split at `cut`; parsed replies are dropped.
                let got = decode_split(MyCodec::new(1, shape), &whole, cut, &keys);
                let want = [
                    Ok(Outcome::Hit),
                    Ok(Outcome::Miss),
                    Err(ErrorKind::Server),
                    Ok(Outcome::Hit),
                ];
                assert_eq!(got, want, "{shape:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let mut wrong_seq = hit(LEAN, 1);
        wrong_seq[3] = 0;
        let mut big = vec![1, 0, 0x10, 1]; // 1 MiB + 1
        big.push(0);
        let huge = vec![0xFF, 0xFF, 0xFF, 1, 3]; // 16 MiB - 1: a multi-packet payload
        let empty = vec![0, 0, 0, 1];
        for (shape, bad) in [
            (LEAN, b"HTTP/1.1 200 OK\r\n\r\n".to_vec()),
            (LEAN, wrong_seq),
            (LEAN, big),
            (LEAN, huge),
            (LEAN, empty),
            (LEAN, Reply::new().packet(&[0xFB, b'f']).0), // LOCAL INFILE request
            (LEAN, Reply::new().packet(&[3]).0),          // no metadata flag
            (LEAN, Reply::new().packet(&[3, 2]).0),       // bad metadata flag
            (LEAN, Reply::new().packet(&[0xFC, 1, 0x10, 0]).0), // 4097 columns
            (LEAN, Reply::new().packet(&[0xFD, 1, 0, 1, 0]).0), // too many columns
            (LEAN, Reply::new().packet(&[0]).0),          // OK packet cut short
            (LEAN, Reply::new().packet(&[0xFF, 1]).0),    // ERR packet cut short
            (LEAN, Reply::new().header(LEAN, 3).packet(&[1, 2]).0), // not a binary row
            (
                ALL_SHAPES[2],
                Reply::new().packet(&[3, 0]).packet(&[0x00]).0,
            ), // no EOF
            (
                ALL_SHAPES[2],
                Reply::new().header(ALL_SHAPES[2], 1).packet(&[0xFE, 0]).0,
            ),
        ] {
            let e = MyCodec::new(1, shape)
                .decode(&bad, 1, true)
                .expect_err(&format!("{bad:?}"));
            assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{bad:?}");
        }
        // Incomplete is not an error.
        let mut c = MyCodec::new(1, LEAN);
        assert_eq!(dec(&mut c, &hit(LEAN, 1)[..7], 1, true).unwrap(), None);
        assert_eq!(dec(&mut c, b"", 1, true).unwrap(), None);
    }

    #[test]
    fn a_reply_of_many_packets_is_bounded() {
        // Rows keep coming, each packet small, no end: refused at MAX_FRAME, not buffered on.
        let mut r = Reply::new().header(LEAN, 3);
        while r.0.len() < MAX_FRAME {
            r = r.packet(&usr_row(1));
        }
        let e = MyCodec::new(1, LEAN).decode(&r.0, 1, false).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Protocol);
        assert!(e.message.contains("1 MiB"), "{}", e.message);
    }

    #[test]
    fn server_error_fields() {
        let e = ServerError::parse(&err_packet(1045, "Access denied")).unwrap();
        assert_eq!((e.code, e.message.as_str()), (1045, "Access denied"));
        // Before the handshake is agreed there is no SQLSTATE.
        let e = ServerError::parse(b"\xff\x10\x04Too many connections").unwrap();
        assert_eq!((e.code, e.message.as_str()), (1040, "Too many connections"));
        assert_eq!(ServerError::parse(b"\xff\x10"), None);
    }

    #[test]
    fn lenenc_widths() {
        assert_eq!(lenenc(&[0xFA, 9]), Some((250, &[9][..])));
        assert_eq!(lenenc(&[0xFC, 0x34, 0x12]), Some((0x1234, &[][..])));
        assert_eq!(lenenc(&[0xFD, 1, 2, 3]), Some((0x030201, &[][..])));
        assert_eq!(
            lenenc(&[0xFE, 1, 0, 0, 0, 0, 0, 0, 0x80]),
            Some((1 | 1 << 63, &[][..]))
        );
        assert_eq!(lenenc(&[0xFE, 1]), None);
        assert_eq!(lenenc(&[0xFB]), None);
        assert_eq!(lenenc(&[]), None);
    }

    /// Well-framed packets with plausible payloads, in sequence, so the parser gets deep.
    fn packet_soup() -> impl Strategy<Value = Vec<u8>> {
        let payload = prop_oneof![
            Just(vec![3, 0]),
            Just(vec![3, 1]),
            Just(vec![3]),
            Just(usr_row(42)),
            Just(vec![0xFE, 0, 0, 2, 0, 0, 0]),
            Just(vec![0xFE, 0, 0, 8, 0, 0, 0]),
            Just(vec![0xFE, 0, 0, 2, 0]),
            Just(vec![0x00, 0, 0, 2, 0, 0, 0]),
            Just(err_packet(1146, "x")),
            prop::collection::vec(any::<u8>(), 1..30),
        ];
        prop::collection::vec(payload, 0..10).prop_map(|ps| {
            let mut r = Reply::new();
            for p in ps {
                r = r.packet(&p);
            }
            r.0
        })
    }

    proptest! {
        #[test]
        fn random_bytes_obey_the_contract(buf in prop::collection::vec(any::<u8>(), 0..300),
                                          key in 0u64..3_000_000, verify: bool) {
            for shape in ALL_SHAPES {
                codec_contract(&mut MyCodec::new(1, shape), &buf, key, verify);
            }
        }

        #[test]
        fn random_packets_obey_the_contract(buf in packet_soup(), key in 40u64..45, verify: bool) {
            for shape in ALL_SHAPES {
                codec_contract(&mut MyCodec::new(1, shape), &buf, key, verify);
            }
        }
    }
}
