//! memcached's meta protocol (`mg`/`ms`/`md`, memcached 1.6 and later): the `?protocol=meta`
//! dialect of `McCodec`. The same ops land on the same server counters as the text protocol
//! (`mg` counts in `cmd_get` and `get_hits`/`get_misses`, `ms` in `cmd_set`, `md` in
//! `delete_hits`/`delete_misses`), so the run's conservation check is unchanged.
//!
//! * A read is `mg <key> v k`: `VA <bytes> k<key>\r\n<data>\r\n` is a hit, `EN[ <flags>]` a
//!   miss. The `k` flag echoes the key, so a reply for another key means the stream is out of
//!   step, as the text protocol's `VALUE` line does.
//! * An update is `ms <key> <bytes> MR`, an insert `ms ... ME`, an upsert `ms ... MS` (with
//!   `T<ttl>` under `--ttl`): `HD` stored, `NS` not stored. A delete is `md <key>`: `HD`
//!   deleted, `NF` not found.
//! * A multi-get of N keys is N pipelined `mg <key> v k q` and one `mn`: `q` leaves the misses
//!   out, so the reply is a `VA` block per key found, in the order asked, then `MN`.
//! * `SERVER_ERROR` is a non-fatal `Server` error; `CLIENT_ERROR`, `ERROR` and anything else
//!   are fatal (the stream is out of step), as in the text protocol.

use super::text::{could_start, error_line, line_at, protocol, shown, MultiGet, VALUE_MAX};
use crate::dataset;
use crate::decimal;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{Decoded, DecodedBatch, NoCells, Reply, Request, RowView, MAX_FRAME};

/// What a meta reply can start with.
const STARTS: [&[u8]; 10] = [
    b"VA ",
    b"EN",
    b"HD",
    b"NS",
    b"NF",
    b"EX",
    b"MN\r\n",
    b"ERROR",
    b"CLIENT_ERROR",
    b"SERVER_ERROR",
];

/// Appends `req` as a meta command on `key`.
pub(super) fn encode_op(req: &Request, key: &[u8], out: &mut Vec<u8>) {
    let mode: &[u8] = match req.op {
        Op::Read | Op::Mget => {
            out.extend_from_slice(b"mg ");
            out.extend_from_slice(key);
            out.extend_from_slice(b" v k\r\n");
            return;
        }
        Op::Delete => {
            out.extend_from_slice(b"md ");
            out.extend_from_slice(key);
            out.extend_from_slice(b"\r\n");
            return;
        }
        Op::Update => b" MR",
        Op::Insert => b" ME",
        Op::Upsert => b" MS",
    };
    out.extend_from_slice(b"ms ");
    out.extend_from_slice(key);
    let size = req.size.min(VALUE_MAX);
    dataset::write_value(req.key, req.version, size, out, |len, out| {
        out.push(b' ');
        decimal::push(out, len as u64);
        out.extend_from_slice(mode);
        if req.ttl > 0 {
            out.extend_from_slice(b" T");
            decimal::push(out, u64::from(req.ttl));
        }
        out.extend_from_slice(b"\r\n");
    });
    out.extend_from_slice(b"\r\n");
}

/// Appends the multi-get of `keys`, each named by `key_into`: one quiet `mg` each, then `mn`
/// to mark the end.
pub(super) fn encode_batch(keys: &[u64], key_into: impl Fn(u64, &mut Vec<u8>), out: &mut Vec<u8>) {
    for &key in keys {
        out.extend_from_slice(b"mg ");
        key_into(key, out);
        out.extend_from_slice(b" v k q\r\n");
    }
    out.extend_from_slice(b"mn\r\n");
}

/// A `VA` block's length, its key and its data.
type Block<'b> = (usize, &'b [u8], &'b [u8]);

/// A `VA` block at the front of `buf`, whose line `line` ends at `next`: the bytes it takes,
/// its key and its data. `Ok(None)`: the data is not all here yet.
fn value_block<'b>(
    buf: &'b [u8],
    line: &'b [u8],
    next: usize,
) -> Result<Option<Block<'b>>, LookupError> {
    let mut parts = line.split(|&b| b == b' ').skip(1);
    let bytes = parts.next().and_then(decimal::parse::<usize>);
    let key = parts.find_map(|f| f.strip_prefix(b"k"));
    let (Some(bytes), Some(key)) = (bytes, key.filter(|k| !k.is_empty())) else {
        return Err(protocol(&format!(
            "malformed VA line `{}` (a length and the k flag's key)",
            shown(line)
        )));
    };
    let Some(end) = next
        .checked_add(bytes)
        .and_then(|e| e.checked_add(2))
        .filter(|&e| e <= MAX_FRAME)
    else {
        return Err(protocol(&format!(
            "declared value length {bytes} exceeds MAX_FRAME"
        )));
    };
    let tail = buf.get(next + bytes..).unwrap_or_default();
    if !could_start(tail, &[b"\r\n"]) {
        return Err(protocol("value block not followed by \\r\\n"));
    }
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((end, key, &buf[next..next + bytes])))
}

/// The first word of a reply line (`HD`, `EN`), without the flags after it.
fn word(line: &[u8]) -> &[u8] {
    line.split(|&b| b == b' ').next().unwrap_or_default()
}

/// Parses the reply at the front of `buf` to a one-key meta command for `key`; `is_key` says
/// whether a value's echoed key is the one asked for.
pub(super) fn decode<'b>(
    buf: &'b [u8],
    key: u64,
    is_key: impl Fn(&[u8]) -> bool,
) -> Result<Decoded<'b, NoCells<'b>>, LookupError> {
    if !could_start(buf, &STARTS) {
        return Err(protocol(&format!(
            "unexpected reply `{}`",
            shown(buf.get(..40).unwrap_or(buf))
        )));
    }
    let Some((line, next)) = line_at(buf, 0)? else {
        return Ok(None);
    };
    let reply = match word(line) {
        b"HD" => Reply::Written(1),
        b"NS" | b"NF" | b"EX" => Reply::Written(0),
        b"EN" => Reply::Miss,
        b"VA" => {
            let Some((n, got, data)) = value_block(buf, line, next)? else {
                return Ok(None);
            };
            if !is_key(got) {
                return Err(protocol(&format!(
                    "a value for `{}` in reply to `mg` of key {key}: the stream is out of step",
                    shown(got)
                )));
            }
            return Ok(Some((n, Reply::Row(RowView::Tsv(data)))));
        }
        _ if line.starts_with(b"SERVER_ERROR") => {
            Reply::Server(ErrorKind::Server, format!("memcached: {}", shown(line)))
        }
        _ => {
            return Err(error_line(line)
                .unwrap_or_else(|| protocol(&format!("unexpected reply `{}`", shown(line)))))
        }
    };
    Ok(Some((next, reply)))
}

/// Parses the reply at the front of `buf` to the multi-get of `keys`: the `VA` blocks of the
/// keys found, in order, then `MN`. A `SERVER_ERROR` for one `mg` makes the request a `Server`
/// error once its `MN` is read; a value for a key not asked for (or out of order) is fatal.
/// `matches`: an echoed key is the key of an id.
pub(super) fn decode_batch(
    buf: &[u8],
    keys: &[u64],
    verify: bool,
    matches: impl Fn(&[u8], u64) -> bool,
) -> Result<DecodedBatch, LookupError> {
    let mut m = MultiGet::default();
    loop {
        let Some((line, next)) = m.line(buf, &STARTS)? else {
            return Ok(None);
        };
        if line == b"MN" {
            return Ok(m.end(keys, next));
        }
        if line.starts_with(b"SERVER_ERROR") {
            m.bad
                .get_or_insert(LookupError::server(format!("memcached: {}", shown(line))));
            m.pos = next;
            continue;
        }
        if word(line) != b"VA" {
            return Err(error_line(line).unwrap_or_else(|| {
                protocol(&format!(
                    "unexpected reply `{}` in a multi-get reply",
                    shown(line)
                ))
            }));
        }
        let Some((end, got, data)) = value_block(buf, line, next)? else {
            return Ok(None);
        };
        m.found((keys, verify), got, data, end, &matches)?;
    }
}

#[cfg(test)]
mod tests;
