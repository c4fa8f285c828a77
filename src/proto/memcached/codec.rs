//! memcached text (ASCII) protocol: `get` lookups and `replace`/`add`/`set`/`delete` writes
//! as a [`Codec`], plus the `set ... noreply`
//! encoder and `stats` parser used by `loadgen prepare`. With `?protocol=meta` the same codec
//! speaks the meta commands instead (`codec/meta.rs`).
//!
//! Replies to `get <key>\r\n` (one key per request, so replies pipeline one-to-one):
//!
//! * `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\nEND\r\n` — a hit. `<data>` is exactly
//!   `<bytes>` bytes and may contain anything, `\r\nEND\r\n` included: it is skipped by length.
//! * `END\r\n` — a miss.
//! * `SERVER_ERROR <msg>\r\n` — the server failed (e.g. out of memory): a non-fatal `Server` error.
//! * A `VALUE` block for another key than the one asked for — the replies no longer line up
//!   with the requests: a fatal `Protocol` error.
//! * `ERROR\r\n`, `CLIENT_ERROR <msg>\r\n` — a fatal `Protocol` error. memcached sends `ERROR`
//!   for a command line it does not know and `CLIENT_ERROR` for input it cannot parse (bad data
//!   chunk, line too long, bad key). After a bad data chunk it reads the rest of the data as
//!   further command lines (each answered with another `ERROR`), after an over-long line it
//!   swallows input: either way the replies no longer line up one-to-one with the requests in
//!   flight, so the connection must be replaced.
//! * Anything else is a fatal `Protocol` error, detected from the first bytes where possible
//!   (e.g. an HTTP or HandlerSocket server on the port).
//!
//! Lines must end with `\r\n` (memcached never sends a bare `\n`).

use std::fmt;

use crate::dataset;
use crate::decimal;
use crate::key_format::KeyFormat;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{
    Codec, Decoded, DecodedBatch, NoCells, Reply, Request, RowView, MAX_FRAME,
};
use text::{could_start, error_line, line_at, protocol, shown, MultiGet};
pub use text::{MAX_LINE, VALUE_MAX};

/// Key prefix of the `usr` rows: key `usr:<id>`.
pub const DEFAULT_PREFIX: &[u8] = b"usr:";
/// memcached's limit on key length.
pub const MAX_KEY_LEN: usize = 250;

/// A key prefix that cannot be used: with the longest id (20 digits) it would not be a valid key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidKey(pub &'static str);

impl fmt::Display for InvalidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "memcached: invalid key prefix: {}", self.0)
    }
}

impl std::error::Error for InvalidKey {}

/// Appends `set <key> 0 0 <len> noreply\r\n<value>\r\n` (flags 0, no expiry, no reply: errors
/// other than `CLIENT_ERROR`s are not reported, so check the load with `stats` afterwards).
/// `key` must be a valid key (1 to 250 bytes, no spaces or control bytes); `value` may hold
/// any bytes.
pub fn encode_set_noreply(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"set ");
    out.extend_from_slice(key);
    out.extend_from_slice(b" 0 0 ");
    decimal::push(out, value.len() as u64);
    out.extend_from_slice(b" noreply\r\n");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `stats\r\n`; parse the reply with [`parse_stats`].
pub fn encode_stats(out: &mut Vec<u8>) {
    out.extend_from_slice(b"stats\r\n");
}

/// The reply to a one-key `get`, borrowed from the read buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetReply<'a> {
    Hit {
        key: &'a [u8],
        flags: u32,
        cas: Option<u64>,
        data: &'a [u8],
    },
    Miss,
    /// `SERVER_ERROR <msg>`: the whole line.
    ServerError(&'a [u8]),
}

const GET_STARTS: [&[u8]; 5] = [
    b"VALUE ",
    b"END\r\n",
    b"ERROR",
    b"CLIENT_ERROR",
    b"SERVER_ERROR",
];

/// The fields of a `VALUE` line after `VALUE `: key, flags, bytes and the optional cas.
#[allow(clippy::type_complexity)]
fn value_fields<'a>(
    fields: &'a [u8],
    line: &[u8],
) -> Result<(&'a [u8], u32, usize, Option<u64>), LookupError> {
    let mut parts = fields.split(|&b| b == b' ');
    let key = parts.next().unwrap_or_default();
    let flags = parts.next().and_then(decimal::parse::<u32>);
    let bytes = parts.next().and_then(decimal::parse::<usize>);
    let cas = match parts.next() {
        None => Some(None),
        Some(c) => decimal::parse::<u64>(c).map(Some),
    };
    match (flags, bytes, cas, parts.next(), key.is_empty()) {
        (Some(flags), Some(bytes), Some(cas), None, false) => Ok((key, flags, bytes, cas)),
        _ => Err(protocol(&format!("malformed VALUE line `{}`", shown(line)))),
    }
}

/// Parses the reply at the front of `buf` to a `get` of one key. `Ok(None)`: incomplete.
/// Everything that is not a `VALUE` block, `END` or `SERVER_ERROR` is a fatal `Protocol` error, as is a declared length that would make the reply larger
/// than [`MAX_FRAME`] and a second `VALUE` block. No allocation on success.
pub fn parse_get_reply(buf: &[u8]) -> Result<Option<(usize, GetReply<'_>)>, LookupError> {
    if !could_start(buf, &GET_STARTS) {
        return Err(protocol(&format!(
            "unexpected reply `{}`",
            shown(buf.get(..40).unwrap_or(buf))
        )));
    }
    let Some((line, data_start)) = line_at(buf, 0)? else {
        return Ok(None);
    };
    if line == b"END" {
        return Ok(Some((data_start, GetReply::Miss)));
    }
    if line.starts_with(b"SERVER_ERROR") {
        return Ok(Some((data_start, GetReply::ServerError(line))));
    }
    let Some(fields) = line.strip_prefix(b"VALUE ") else {
        return Err(error_line(line)
            .unwrap_or_else(|| protocol(&format!("unexpected reply `{}`", shown(line)))));
    };
    let (key, flags, bytes, cas) = value_fields(fields, line)?;
    // VALUE line + data + "\r\n" + "END\r\n" must fit in MAX_FRAME.
    let total = data_start.checked_add(bytes).and_then(|t| t.checked_add(7));
    let Some(total) = total.filter(|&t| t <= MAX_FRAME) else {
        return Err(protocol(&format!(
            "declared value length {bytes} exceeds MAX_FRAME"
        )));
    };
    let data_end = data_start + bytes;
    let tail = buf.get(data_end..).unwrap_or_default();
    if !could_start(tail, &[b"\r\nEND\r\n"]) {
        return Err(protocol(if tail.starts_with(b"\r\nVALUE ") {
            "more than one VALUE block for one key"
        } else {
            "value block not followed by \\r\\nEND\\r\\n"
        }));
    }
    if buf.len() < total {
        return Ok(None);
    }
    let data = buf.get(data_start..data_end).unwrap_or_default();
    Ok(Some((
        total,
        GetReply::Hit {
            key,
            flags,
            cas,
            data,
        },
    )))
}

/// Parses a complete `stats` reply (`STAT <name> <value>\r\n` lines, then `END\r\n`) at the front
/// of `buf`. `Ok(None)`: incomplete. The value is the rest of the line after the name (it may
/// contain spaces). Not for the hot path: it allocates, and re-parses from the start each call.
#[allow(clippy::type_complexity)]
pub fn parse_stats(buf: &[u8]) -> Result<Option<(usize, Vec<(String, String)>)>, LookupError> {
    let mut stats = Vec::new();
    let mut pos = 0;
    loop {
        let rest = buf.get(pos..).unwrap_or_default();
        if !could_start(
            rest,
            &[
                b"STAT ",
                b"END\r\n",
                b"ERROR",
                b"CLIENT_ERROR",
                b"SERVER_ERROR",
            ],
        ) {
            return Err(protocol(&format!(
                "unexpected stats line `{}`",
                shown(rest.get(..40).unwrap_or(rest))
            )));
        }
        let Some((line, next)) = line_at(buf, pos)? else {
            return if buf.len() >= MAX_FRAME {
                Err(protocol("stats reply larger than MAX_FRAME"))
            } else {
                Ok(None)
            };
        };
        if next > MAX_FRAME {
            return Err(protocol("stats reply larger than MAX_FRAME"));
        }
        pos = next;
        if line == b"END" {
            return Ok(Some((pos, stats)));
        }
        let Some(stat) = line.strip_prefix(b"STAT ") else {
            return Err(error_line(line)
                .unwrap_or_else(|| protocol(&format!("unexpected stats line `{}`", shown(line)))));
        };
        let (name, value) = match stat.iter().position(|&b| b == b' ') {
            Some(p) => (
                stat.get(..p).unwrap_or_default(),
                stat.get(p + 1..).unwrap_or_default(),
            ),
            None => (stat, &b""[..]),
        };
        if name.is_empty() {
            return Err(protocol("STAT line without a name"));
        }
        stats.push((
            String::from_utf8_lossy(name).into_owned(),
            String::from_utf8_lossy(value).into_owned(),
        ));
    }
}

/// The replies to a write and the rows each changed: a `replace` that found no row, an `add`
/// over a row already there (`NOT_STORED`) and a `delete` of no row (`NOT_FOUND`) are misses.
const WRITE_REPLIES: [(&[u8], u64); 4] = [
    (b"STORED\r\n", 1),
    (b"NOT_STORED\r\n", 0),
    (b"DELETED\r\n", 1),
    (b"NOT_FOUND\r\n", 0),
];

/// `get <prefix><id>` lookups; a hit is the value, as one tab-separated row.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct McCodec {
    keys: KeyFormat,
    /// Keys went out as a trace wrote them: a reply's key is not checked against the id.
    named: bool,
    /// Speaks the meta protocol (`mg`/`ms`/`md`, `meta.rs`) instead of `get`/`set`.
    meta: bool,
}

impl McCodec {
    /// A codec for keys `<prefix><id>`. The prefix may be empty; it must not contain spaces or
    /// control bytes and must leave room for a 20-digit id within 250 bytes.
    pub fn new(prefix: impl Into<Vec<u8>>) -> Result<McCodec, InvalidKey> {
        let prefix = prefix.into();
        if prefix.len() + 20 > MAX_KEY_LEN {
            return Err(InvalidKey("longer than 230 bytes"));
        }
        if prefix.iter().any(|&b| b <= b' ' || b == 0x7f) {
            return Err(InvalidKey("contains a space or control byte"));
        }
        Ok(McCodec::with_format(KeyFormat::prefix(&prefix)))
    }

    /// A codec for keys in `keys` (`--key-format`, checked by its parser).
    pub fn with_format(keys: KeyFormat) -> McCodec {
        McCodec {
            keys,
            named: false,
            meta: false,
        }
    }

    /// The same keys in the meta protocol (`?protocol=meta`).
    pub fn meta(self) -> McCodec {
        McCodec { meta: true, ..self }
    }

    /// Appends the key of `id` (also for `loadgen prepare`).
    pub fn key_into(&self, id: u64, out: &mut Vec<u8>) {
        self.keys.write(id, out);
    }

    /// `key` is the key of `id` as `key_into` writes it.
    fn key_matches(&self, key: &[u8], id: u64) -> bool {
        self.keys.id_of(key) == Some(id)
    }
}

/// A read is a `get`; an update `replace`, an insert `add`, an upsert `set` of the row of
/// (key, version) in `req.size` bytes (`dataset::write_value`); a delete `delete`. Each has a
/// reply, so writes pipeline as reads.
fn encode_op(req: &Request, key: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(match req.op {
        Op::Read | Op::Mget => b"get ",
        Op::Update => b"replace ",
        Op::Insert => b"add ",
        Op::Upsert => b"set ",
        Op::Delete => b"delete ",
    });
    out.extend_from_slice(key);
    if matches!(req.op, Op::Update | Op::Insert | Op::Upsert) {
        let size = req.size.min(VALUE_MAX);
        dataset::write_value(req.key, req.version, size, out, |len, out| {
            out.extend_from_slice(b" 0 ");
            decimal::push(out, u64::from(req.ttl));
            out.extend_from_slice(b" ");
            decimal::push(out, len as u64);
            out.extend_from_slice(b"\r\n");
        });
    }
    out.extend_from_slice(b"\r\n");
}

impl Codec for McCodec {
    type Cells<'b> = NoCells<'b>;

    /// A read is a `get`; an update `replace`, an insert `add`, an upsert `set` of the row of
    /// (key, version); a delete `delete`. Each has a reply, so writes pipeline as reads.
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        let (key, n) = self.keys.on_stack(req.key);
        match self.meta {
            true => meta::encode_op(req, &key[..n], out),
            false => encode_op(req, &key[..n], out),
        }
    }

    /// A trace's key as written: a reply then carries that key, not `<prefix><id>`.
    fn encode_named(&mut self, req: &Request, key: &[u8], out: &mut Vec<u8>) {
        self.named = true;
        match self.meta {
            true => meta::encode_op(req, key, out),
            false => encode_op(req, key, out),
        }
    }

    /// `SERVER_ERROR` is a `Server` reply; `ERROR`, `CLIENT_ERROR`, garbage and a value for
    /// another key than `key` are a fatal `Err` (see the module docs).
    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        key: u64,
    ) -> Result<Decoded<'b, NoCells<'b>>, LookupError> {
        if self.meta {
            let named = self.named;
            let keys = &self.keys;
            return meta::decode(buf, key, |got| named || keys.id_of(got) == Some(key));
        }
        for (line, written) in WRITE_REPLIES {
            if buf.starts_with(line) {
                return Ok(Some((line.len(), Reply::Written(written))));
            }
            if buf.len() < line.len() && line.starts_with(buf) {
                return Ok(None);
            }
        }
        let Some((n, reply)) = parse_get_reply(buf)? else {
            return Ok(None);
        };
        let reply = match reply {
            GetReply::Miss => Reply::Miss,
            GetReply::Hit { key: got, data, .. } if self.named || self.key_matches(got, key) => {
                Reply::Row(RowView::Tsv(data))
            }
            GetReply::Hit { key: got, .. } => {
                return Err(protocol(&format!(
                    "a value for `{}` in reply to `get {}`: the stream is out of step",
                    shown(got),
                    shown(&{
                        let mut want = Vec::new();
                        self.keys.write(key, &mut want);
                        want
                    })
                )))
            }
            GetReply::ServerError(line) => {
                Reply::Server(ErrorKind::Server, format!("memcached: {}", shown(line)))
            }
        };
        Ok(Some((n, reply)))
    }

    /// `get <key1> ... <keyN>`: memcached's own multi-get.
    fn encode_batch(&mut self, keys: &[u64], out: &mut Vec<u8>) {
        if self.meta {
            return meta::encode_batch(keys, |id, out| self.key_into(id, out), out);
        }
        out.extend_from_slice(b"get");
        for &key in keys {
            out.push(b' ');
            self.key_into(key, out);
        }
        out.extend_from_slice(b"\r\n");
    }

    fn decode_batch(
        &mut self,
        buf: &[u8],
        keys: &[u64],
        verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        match self.meta {
            true => meta::decode_batch(buf, keys, verify, |got, id| self.key_matches(got, id)),
            false => decode_multi(self, buf, keys, verify),
        }
    }
}

// The reply to memcached's multi-get, `get <key1> ... <keyN>` (`--batch N`): a `VALUE`
// block per key found, in the order asked, the keys not found left out, then `END`.

/// Parses the reply at the front of `buf` to the multi-get of `keys`. A value for a key not
/// asked for (or out of order) means the stream is out of step: a fatal error, as are
/// `ERROR`, `CLIENT_ERROR` and garbage. `SERVER_ERROR` as the first line is the request's
/// non-fatal `Server` error. No allocation unless the reply is an error.
fn decode_multi(
    codec: &McCodec,
    buf: &[u8],
    keys: &[u64],
    verify: bool,
) -> Result<DecodedBatch, LookupError> {
    let mut m = MultiGet::default();
    loop {
        let Some((line, data_start)) = m.line(buf, &GET_STARTS)? else {
            return Ok(None);
        };
        if line == b"END" {
            return Ok(m.end(keys, data_start));
        }
        let Some(fields) = line.strip_prefix(b"VALUE ") else {
            return match (m.pos, error_line(line)) {
                (0, Some(e)) if !e.fatal => Ok(Some((data_start, Err(e)))),
                (_, e) => {
                    Err(e.unwrap_or_else(|| {
                        protocol(&format!("unexpected reply `{}`", shown(line)))
                    }))
                }
            };
        };
        let (got, _, bytes, _) = value_fields(fields, line)?;
        let end = data_start.saturating_add(bytes).saturating_add(2);
        if end > MAX_FRAME {
            return Err(protocol("multi-get reply larger than MAX_FRAME"));
        }
        if buf.len() < end {
            return Ok(None);
        }
        if buf.get(end - 2..end) != Some(b"\r\n") {
            return Err(protocol("value block not followed by \\r\\n"));
        }
        let data = &buf[data_start..end - 2];
        m.found((keys, verify), got, data, end, |got, k| {
            codec.key_matches(got, k)
        })?;
    }
}

mod meta;
#[cfg(test)]
mod tests;
mod text;
