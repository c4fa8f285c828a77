//! RESP (REdis Serialization Protocol) for `GET usr:<id>`: requests are RESP2 arrays of bulk
//! strings; one reply parser serves the lookups, the handshake, `INFO` and `DBSIZE`.
//!
//! Replies (each ends with `\r\n`):
//!
//! * `$<n>\r\n<n bytes>\r\n` — a bulk string: a hit. The bytes may hold anything, `\r\n`
//!   included: they are skipped by length.
//! * `$-1\r\n` (RESP2) or `_\r\n` (RESP3) — a null: a miss.
//! * `-<message>\r\n` — a server error (`-ERR`, `-WRONGTYPE`, `-NOAUTH`, `-LOADING`...): the
//!   server answered this one request and the stream stays in step, so it is non-fatal.
//! * `+<status>`, `:<integer>` — well-formed, but not an answer to `GET`: the stream is out of
//!   step, a fatal `Protocol` error (as is anything else, and any array).

use crate::dataset;
use crate::decimal;
use crate::key_format::KeyFormat;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{
    Codec, Decoded, DecodedBatch, NoCells, Reply, Request, RowView, Tally, MAX_FRAME,
};

/// Keys are `usr:<id>`, as memcached stores them.
pub const PREFIX: &[u8] = b"usr:";

/// Longest status, error or length line accepted: a garbage stream must not be scanned forever.
pub const MAX_LINE: usize = 8192;

/// One RESP value, borrowed from the read buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resp<'a> {
    /// `+OK`
    Status(&'a [u8]),
    /// `-ERR ...`: the whole message, code included.
    Error(&'a [u8]),
    /// `:42`
    Integer(i64),
    /// `$n` with its bytes.
    Bulk(&'a [u8]),
    /// `$-1` or `_`.
    Null,
}

fn protocol(what: &str) -> LookupError {
    LookupError::protocol(format!("redis: {what}"))
}

/// The kind an error reply is counted as: a replica refuses writes with `-READONLY`.
fn error_kind(msg: &[u8]) -> ErrorKind {
    match msg.starts_with(b"READONLY") {
        true => ErrorKind::Readonly,
        false => ErrorKind::Server,
    }
}

/// `bytes` for a message: escaped and cut (`crate::shown`).
pub fn shown(bytes: &[u8]) -> String {
    crate::shown::shown(bytes)
}

/// The line after the type byte, without its `\r\n`, and the offset after it. `Ok(None)`: not
/// complete yet. A bare `\n` or a line longer than [`MAX_LINE`] is an error.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, LookupError> {
    let rest = buf.get(1..).unwrap_or_default();
    let window = rest.get(..MAX_LINE).unwrap_or(rest);
    match window.iter().position(|&b| b == b'\n') {
        Some(p) => match rest.get(..p).and_then(|l| l.strip_suffix(b"\r")) {
            Some(l) => Ok(Some((l, p + 2))),
            None => Err(protocol("reply line ends with a bare \\n")),
        },
        None if rest.len() >= MAX_LINE => Err(protocol("reply line longer than 8 KiB")),
        None => Ok(None),
    }
}

/// A RESP integer: optional `-`, then digits.
fn integer(text: &[u8]) -> Option<i64> {
    match text.strip_prefix(b"-") {
        Some(digits) => decimal::parse::<i64>(digits).map(|v| -v),
        None => decimal::parse::<i64>(text),
    }
}

/// Parses the reply at the front of `buf`. `Ok(None)`: incomplete. `Err`: malformed (fatal),
/// including arrays and bulk strings that would not fit in [`MAX_FRAME`]. No allocation on
/// success.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(usize, Resp<'_>)>, LookupError> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    if !matches!(kind, b'$' | b'-' | b'+' | b':' | b'_') {
        return Err(protocol(&format!(
            "unexpected reply `{}`: is this a Redis port?",
            shown(buf.get(..40).unwrap_or(buf))
        )));
    }
    let Some((text, after)) = line(buf)? else {
        return Ok(None);
    };
    match kind {
        b'+' => Ok(Some((after, Resp::Status(text)))),
        b'-' => Ok(Some((after, Resp::Error(text)))),
        b':' => match integer(text) {
            Some(n) => Ok(Some((after, Resp::Integer(n)))),
            None => Err(protocol(&format!("malformed integer `:{}`", shown(text)))),
        },
        b'_' if text.is_empty() => Ok(Some((after, Resp::Null))),
        b'$' => match integer(text) {
            Some(-1) => Ok(Some((after, Resp::Null))),
            Some(n) if n >= 0 => {
                let n = n as usize;
                let Some(total) = after
                    .checked_add(n)
                    .and_then(|t| t.checked_add(2))
                    .filter(|&t| t <= MAX_FRAME)
                else {
                    return Err(protocol(&format!("bulk length {n} exceeds MAX_FRAME")));
                };
                let tail = buf.get(after + n..).unwrap_or_default();
                let end = tail.len().min(2);
                if tail.get(..end) != b"\r\n".get(..end) {
                    return Err(protocol("bulk string not followed by \\r\\n"));
                }
                if buf.len() < total {
                    return Ok(None);
                }
                Ok(Some((
                    total,
                    Resp::Bulk(buf.get(after..after + n).unwrap_or_default()),
                )))
            }
            _ => Err(protocol(&format!(
                "malformed bulk length `${}`",
                shown(text)
            ))),
        },
        _ => Err(protocol(&format!(
            "unexpected reply `{}`",
            shown(buf.get(..after).unwrap_or(buf))
        ))),
    }
}

fn push_bulk(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'$');
    decimal::push(out, arg.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

/// Appends a command as a RESP array of bulk strings (handshake, `INFO`, `SET`, `DBSIZE`).
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    out.push(b'*');
    decimal::push(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        push_bulk(a, out);
    }
}

/// Appends the key of `id` in `keys` as a bulk string: `$<len>\r\nusr:<id>\r\n`.
#[inline]
fn push_key(keys: &KeyFormat, id: u64, out: &mut Vec<u8>) {
    let (key, n) = keys.on_stack(id);
    push_bulk(&key[..n], out);
}

/// A write's value as a bulk string: its row in `req.size` bytes (`dataset::write_value`).
fn push_value(req: &Request, out: &mut Vec<u8>) {
    dataset::write_value(req.key, req.version, req.size, out, |len, out| {
        out.push(b'$');
        decimal::push(out, len as u64);
        out.extend_from_slice(b"\r\n");
    });
    out.extend_from_slice(b"\r\n");
}

/// A write with a time to live: `SET k v [XX|NX] EX ttl` (SETNX takes no expiry).
fn encode_ttl(req: &Request, key: &[u8], out: &mut Vec<u8>) {
    let cond: &[u8] = match req.op {
        Op::Update => b"$2\r\nXX\r\n",
        Op::Insert => b"$2\r\nNX\r\n",
        _ => b"",
    };
    out.extend_from_slice(if cond.is_empty() {
        b"*5\r\n"
    } else {
        b"*6\r\n"
    });
    out.extend_from_slice(b"$3\r\nSET\r\n");
    push_bulk(key, out);
    push_value(req, out);
    out.extend_from_slice(cond);
    out.extend_from_slice(b"$2\r\nEX\r\n");
    let mut buf = [0u8; 20];
    push_bulk(decimal::digits(u64::from(req.ttl), &mut buf), out);
}

/// A read is `GET`; an update `SET k v XX`, an insert `SETNX k v` (its own command, so the
/// server counts inserts apart from updates), an upsert `SET k v`; a delete `DEL k`.
fn encode_op(req: &Request, key: &[u8], out: &mut Vec<u8>) {
    if req.ttl > 0 && req.op.writes() && req.op != Op::Delete {
        return encode_ttl(req, key, out);
    }
    let (head, args): (&[u8], _) = match req.op {
        Op::Read | Op::Mget => (b"*2\r\n$3\r\nGET\r\n", 0),
        Op::Update => (b"*4\r\n$3\r\nSET\r\n", 2),
        Op::Insert => (b"*3\r\n$5\r\nSETNX\r\n", 1),
        Op::Upsert => (b"*3\r\n$3\r\nSET\r\n", 1),
        Op::Delete => (b"*2\r\n$3\r\nDEL\r\n", 0),
    };
    out.extend_from_slice(head);
    push_bulk(key, out);
    if args > 0 {
        push_value(req, out);
    }
    if args > 1 {
        out.extend_from_slice(b"$2\r\nXX\r\n");
    }
}

/// `GET usr:<id>` lookups and, with `--mix`, writes; a hit is the value, as one tab-separated row.
#[derive(Debug, Default, Clone)]
pub struct RedisCodec {
    /// How keys name ids (`usr:%d`, or `--key-format`).
    pub keys: KeyFormat,
}

impl Codec for RedisCodec {
    type Cells<'b> = NoCells<'b>;

    /// `encode_op` on key `usr:<id>`; each op has a reply, so writes pipeline as reads.
    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        let (key, n) = self.keys.on_stack(req.key);
        encode_op(req, &key[..n], out);
    }

    fn encode_named(&mut self, req: &Request, key: &[u8], out: &mut Vec<u8>) {
        encode_op(req, key, out);
    }

    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        _key: u64,
    ) -> Result<Decoded<'b, NoCells<'b>>, LookupError> {
        let Some((n, resp)) = parse_reply(buf)? else {
            return Ok(None);
        };
        let reply = match resp {
            Resp::Bulk(value) => Reply::Row(RowView::Tsv(value)),
            // GET of no key; SET XX of no key or SET NX of a key there: nothing written.
            Resp::Null => Reply::Miss,
            // SET's reply
            Resp::Status(b"OK") => Reply::Written(1),
            // DEL's and SETNX's: keys deleted or set
            Resp::Integer(n @ 0..) => Reply::Written(n as u64),
            Resp::Error(msg) => Reply::Server(error_kind(msg), format!("redis: {}", shown(msg))),
            Resp::Status(s) => {
                return Err(protocol(&format!(
                    "`+{}` in reply to GET or SET: the stream is out of step",
                    shown(s)
                )))
            }
            Resp::Integer(i) => {
                return Err(protocol(&format!(
                    "`:{i}` in reply to GET, DEL or SETNX: the stream is out of step"
                )))
            }
        };
        Ok(Some((n, reply)))
    }

    fn encode_batch(&mut self, keys: &[u64], out: &mut Vec<u8>) {
        encode_mget(&self.keys, keys, out);
    }

    fn decode_batch(
        &mut self,
        buf: &[u8],
        keys: &[u64],
        verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        decode_mget(buf, keys, verify)
    }
}

// Redis's multi-get, `MGET usr:<id1> ... usr:<idN>` (`--batch N`): the reply is an array
// of N values in the order asked, a null for each key not found.

/// Appends `MGET` of `keys` as one RESP array.
fn encode_mget(format: &KeyFormat, keys: &[u64], out: &mut Vec<u8>) {
    out.push(b'*');
    decimal::push(out, keys.len() as u64 + 1);
    out.extend_from_slice(b"\r\n$4\r\nMGET\r\n");
    for &key in keys {
        push_key(format, key, out);
    }
}

/// Parses the reply at the front of `buf` to the `MGET` of `keys`. An error reply (`-ERR`)
/// is the request's non-fatal error; an array of another length than `keys`, or an element
/// that is not a value or a null, is a fatal error. No allocation unless the reply is an error.
fn decode_mget(buf: &[u8], keys: &[u64], verify: bool) -> Result<DecodedBatch, LookupError> {
    match buf.first() {
        None => return Ok(None),
        Some(b'*') => {}
        Some(b'-') => {
            return Ok(parse_reply(buf)?.map(|(n, resp)| {
                let Resp::Error(msg) = resp else {
                    unreachable!("a reply starting with - is an error")
                };
                let e = LookupError::new(error_kind(msg), false, format!("redis: {}", shown(msg)));
                (n, Err(e))
            }))
        }
        Some(_) => {
            return Err(protocol(&format!(
                "`{}` in reply to MGET: the stream is out of step",
                shown(buf.get(..40).unwrap_or(buf))
            )))
        }
    }
    let Some((text, mut pos)) = line(buf)? else {
        return Ok(None);
    };
    if integer(text) != Some(keys.len() as i64) {
        return Err(protocol(&format!(
            "an array of `{}` values in reply to an MGET of {} keys: the stream is out of step",
            shown(text),
            keys.len()
        )));
    }
    let mut tally = Tally::default();
    let mut bad: Option<LookupError> = None;
    for &key in keys {
        let Some((n, resp)) = parse_reply(&buf[pos..])? else {
            return Ok(None);
        };
        pos += n;
        match resp {
            Resp::Bulk(value) => {
                if let Err(e) = tally.row(key, value, verify) {
                    bad.get_or_insert(e);
                }
            }
            Resp::Null => tally.misses += 1,
            _ => {
                return Err(protocol(
                    "an MGET element that is neither a value nor a null: the stream is out of step",
                ))
            }
        }
    }
    Ok(Some((pos, bad.map_or(Ok(tally), Err))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset;
    use crate::outcome::{ErrorKind, Outcome};
    use crate::proto::testkit::{self, codec_contract, dec, dec_err, decode_split};
    use proptest::prelude::*;

    fn bulk(data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        push_bulk(data, &mut v);
        v
    }

    fn hit(id: u64) -> Vec<u8> {
        let mut row = Vec::new();
        dataset::write_tsv(&mut row, id);
        bulk(&row)
    }

    #[test]
    fn writes_encode_and_decode() {
        let mut c = RedisCodec::default();
        let mut out = Vec::new();
        let req = |op, version| Request {
            op,
            key: 42,
            version,
            ttl: 0,
            size: 0,
        };
        let row = b"$47\r\nuser42v3\tuser42@example.com\t2010-02-03 11:23:15\r\n";
        for (op, head, tail) in [
            (
                Op::Update,
                &b"*4\r\n$3\r\nSET\r\n"[..],
                &b"$2\r\nXX\r\n"[..],
            ),
            (Op::Insert, b"*3\r\n$5\r\nSETNX\r\n", b""),
            (Op::Upsert, b"*3\r\n$3\r\nSET\r\n", b""),
        ] {
            out.clear();
            c.encode(&req(op, 3), &mut out);
            let mut want = head.to_vec();
            want.extend_from_slice(b"$6\r\nusr:42\r\n");
            want.extend_from_slice(row);
            want.extend_from_slice(tail);
            assert_eq!(out, want, "{op:?}");
        }
        out.clear();
        c.encode(&req(Op::Delete, 1), &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nDEL\r\n$6\r\nusr:42\r\n");
        for (reply, want) in [
            (&b"+OK\r\n"[..], Some(1)),
            (b":1\r\n", Some(1)),
            (b":0\r\n", Some(0)),
            (b"$-1\r\n", None),
        ] {
            let (n, got) = c.decode(reply, 42).unwrap().unwrap();
            assert_eq!(n, reply.len());
            match (got, want) {
                (Reply::Written(w), Some(want)) => assert_eq!(w, want),
                (Reply::Miss, None) => {}
                (got, _) => panic!("{got:?}"),
            }
        }
        assert!(c.decode(b"+QUEUED\r\n", 42).is_err());
        assert!(c.decode(b":-1\r\n", 42).is_err());
    }

    #[test]
    fn mget_encodes_one_array_and_tallies_each_key() {
        let mut c = RedisCodec::default();
        let mut out = Vec::new();
        c.encode_batch(&[7, 42], &mut out);
        assert_eq!(out, b"*3\r\n$4\r\nMGET\r\n$5\r\nusr:7\r\n$6\r\nusr:42\r\n");
        let mut reply = b"*3\r\n".to_vec();
        reply.extend(hit(7));
        reply.extend_from_slice(b"$-1\r\n");
        reply.extend(hit(9));
        for cut in 0..reply.len() {
            assert!(c
                .decode_batch(&reply[..cut], &[7, 8, 9], true)
                .unwrap()
                .is_none());
        }
        let (n, tally) = c.decode_batch(&reply, &[7, 8, 9], true).unwrap().unwrap();
        assert_eq!(n, reply.len());
        assert_eq!(tally.unwrap(), Tally { hits: 2, misses: 1 });
        // 9's row under key 10: the reply is taken whole, the request is a Verify error.
        let (n, tally) = c.decode_batch(&reply, &[7, 8, 10], true).unwrap().unwrap();
        assert_eq!(n, reply.len());
        assert_eq!(tally.unwrap_err().kind, ErrorKind::Verify);
        // Another length than the keys asked for, or a non-value element: out of step.
        assert!(c.decode_batch(&reply, &[7, 8], false).unwrap_err().fatal);
        assert!(c.decode_batch(b"*1\r\n:1\r\n", &[7], false).is_err());
        assert!(c.decode_batch(b"$-1\r\n", &[7], false).is_err());
        let (n, e) = c
            .decode_batch(b"-ERR nope\r\n", &[7], false)
            .unwrap()
            .unwrap();
        assert_eq!((n, e.unwrap_err().fatal), (11, false));
    }

    #[test]
    fn encoders() {
        let mut c = RedisCodec::default();
        let mut out = Vec::new();
        c.encode(&Request::read(42), &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$6\r\nusr:42\r\n");
        out.clear();
        c.encode(&Request::read(u64::MAX), &mut out);
        assert_eq!(
            out,
            b"*2\r\n$3\r\nGET\r\n$24\r\nusr:18446744073709551615\r\n"
        );
        let mut out = Vec::with_capacity(64);
        let p = out.as_ptr();
        c.encode(&Request::read(u64::MAX), &mut out);
        assert_eq!(out.as_ptr(), p, "encode must not reallocate");
        out.clear();
        encode_command(&[b"SET", b"usr:7", b"a\r\nb"], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$5\r\nusr:7\r\n$4\r\na\r\nb\r\n");
        out.clear();
        encode_command(&[b"DBSIZE"], &mut out);
        assert_eq!(out, b"*1\r\n$6\r\nDBSIZE\r\n");
        out.clear();
        KeyFormat::default().write(0, &mut out);
        assert_eq!(out, b"usr:0");
    }

    #[test]
    fn hit_miss_error_verify() {
        let mut c = RedisCodec::default();
        let h = hit(42);
        for verify in [false, true] {
            assert_eq!(
                dec(&mut c, &h, 42, verify).unwrap(),
                Some((h.len(), Outcome::Hit))
            );
        }
        // The row of another key, an empty value, the row with a newline: verify errors.
        for wrong in [hit(43), bulk(b""), {
            let mut r = Vec::new();
            dataset::write_tsv(&mut r, 42);
            r.push(b'\n');
            bulk(&r)
        }] {
            testkit::assert_wrong_row(&mut c, &wrong, 42);
        }
        assert_eq!(
            dec(&mut c, b"$-1\r\n", 1, true).unwrap(),
            Some((5, Outcome::Miss))
        );
        assert_eq!(
            dec(&mut c, b"_\r\n$-1\r\n", 1, true).unwrap(),
            Some((3, Outcome::Miss))
        );
        let err = b"-ERR something broke\r\n$-1\r\n";
        let (n, e) = dec_err(&mut c, err, 1, true);
        assert_eq!((n, e.kind, e.fatal), (22, ErrorKind::Server, false));
        assert!(e.message.contains("ERR something broke"), "{}", e.message);
        let (_, e) = dec_err(&mut c, b"-NOAUTH Authentication required.\r\n", 1, false);
        assert_eq!(e.kind, ErrorKind::Server);
        // A value holding CRLF and RESP-looking bytes is skipped by length.
        let tricky = bulk(b"$-1\r\n-ERR\r\n+OK\r\n");
        assert_eq!(
            dec(&mut c, &tricky, 1, false).unwrap(),
            Some((tricky.len(), Outcome::Hit))
        );
    }

    #[test]
    fn hits_and_misses_allocate_nothing() {
        testkit::assert_no_alloc(&mut RedisCodec::default(), &hit(42), 42);
        testkit::assert_no_alloc(&mut RedisCodec::default(), b"$-1\r\n", 42);
    }

    #[test]
    fn handshake_replies() {
        assert_eq!(
            parse_reply(b"+OK\r\n").unwrap(),
            Some((5, Resp::Status(b"OK")))
        );
        assert_eq!(
            parse_reply(b":1000000\r\n").unwrap(),
            Some((10, Resp::Integer(1_000_000)))
        );
        assert_eq!(
            parse_reply(b":-3\r\n").unwrap(),
            Some((5, Resp::Integer(-3)))
        );
        assert_eq!(
            parse_reply(b"-WRONGPASS invalid\r\n").unwrap(),
            Some((20, Resp::Error(b"WRONGPASS invalid")))
        );
        assert_eq!(parse_reply(b"+OK\r").unwrap(), None);
        assert_eq!(parse_reply(b"").unwrap(), None);
    }

    #[test]
    fn garbage_is_fatal() {
        let mut c = RedisCodec::default();
        for bad in [
            &b"HTTP/1.1 200 OK\r\n"[..],
            b"VALUE usr:1 0 1\r\n",
            b"END\r\n",
            b"*1\r\n$1\r\na\r\n",
            b"*-1\r\n",
            b"+QUEUED\r\n",
            b":-1\r\n",
            b":x\r\n",
            b"$\r\n",
            b"$-2\r\n",
            b"$x\r\n",
            b"$3\r\nabcX",
            b"$3\r\nabc\rX",
            b"$3\n",
            b"$99999999999999999999\r\n",
            b"_x\r\n",
            b"-ERR\n",
        ] {
            let e = dec(&mut c, bad, 1, false).unwrap_err();
            assert_eq!(
                (e.kind, e.fatal),
                (ErrorKind::Protocol, true),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // A write's reply to a GET is an error, never a hit.
        for write in [&b"+OK\r\n"[..], b":1\r\n"] {
            assert!(dec(&mut c, write, 1, false).is_err());
        }
        // Long lines wait up to MAX_LINE, then fail.
        let mut long = b"-ERR ".to_vec();
        long.resize(MAX_LINE, b'x');
        assert_eq!(dec(&mut c, &long, 1, false).unwrap(), None);
        long.push(b'x');
        assert_eq!(
            dec(&mut c, &long, 1, false).unwrap_err().kind,
            ErrorKind::Protocol
        );
    }

    #[test]
    fn bulk_length_bounded_by_max_frame() {
        let mut c = RedisCodec::default();
        // "$1048564\r\n" + data + "\r\n" == MAX_FRAME: the largest bulk that fits.
        let header = format!("${}\r\n", MAX_FRAME - 12);
        assert_eq!(header.len(), 10);
        let mut reply = header.into_bytes();
        assert_eq!(dec(&mut c, &reply, 1, false).unwrap(), None);
        reply.resize(MAX_FRAME - 2, b'v');
        reply.extend_from_slice(b"\r\n");
        assert_eq!(
            dec(&mut c, &reply, 1, false).unwrap(),
            Some((MAX_FRAME, Outcome::Hit))
        );
        let over = format!("${}\r\n", MAX_FRAME - 11);
        assert!(dec(&mut c, over.as_bytes(), 1, false).is_err());
    }

    #[test]
    fn pipelined_at_every_split_point() {
        let keys = [1u64, 2, 3, 4, 5, 6];
        let mut stream = hit(1);
        let first = stream.len();
        stream.extend_from_slice(b"$-1\r\n");
        stream.extend_from_slice(&hit(99)); // wrong row for key 3
        stream.extend_from_slice(b"-LOADING Redis is loading the dataset in memory\r\n");
        stream.extend_from_slice(b"_\r\n");
        stream.extend_from_slice(&hit(6));
        let whole = vec![
            Ok(Outcome::Hit),
            Ok(Outcome::Miss),
            Err(ErrorKind::Verify),
            Err(ErrorKind::Server),
            Ok(Outcome::Miss),
            Ok(Outcome::Hit),
        ];
        let mut c = RedisCodec::default();
        for len in 0..first {
            assert_eq!(dec(&mut c, &stream[..len], 1, true).unwrap(), None, "{len}");
        }
        for cut in 0..=stream.len() {
            assert_eq!(
                decode_split(RedisCodec::default(), &stream, cut, &keys),
                whole,
                "cut at {cut}"
            );
        }
    }

    const SOUP: &[&[u8]] = &[
        b"$",
        b"-",
        b"+OK",
        b"_",
        b":",
        b"*",
        b"-1",
        b"47",
        b"3",
        b"\r\n",
        b"\n",
        b"user42\tuser42@example.com\t2010-02-03 11:23:15",
    ];

    proptest! {
        #[test]
        fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300), key in 0u64..100, verify: bool) {
            codec_contract(&mut RedisCodec::default(), &buf, key, verify);
            let _ = parse_reply(&buf);
        }

        #[test]
        fn token_soup_never_panics(buf in testkit::soup(SOUP, 30), key in 40u64..45, verify: bool) {
            codec_contract(&mut RedisCodec::default(), &buf, key, verify);
        }

        #[test]
        fn any_value_round_trips(data in prop::collection::vec(any::<u8>(), 0..200)) {
            let reply = bulk(&data);
            prop_assert_eq!(parse_reply(&reply).unwrap(), Some((reply.len(), Resp::Bulk(&data[..]))));
        }
    }
}
