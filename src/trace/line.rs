//! One trace line parsed in place: the key borrows the reader's buffer, nothing is allocated.

use crate::mix::Op;

/// A cache-trace operation as the trace writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceOp {
    Get,
    Gets,
    Set,
    Add,
    Replace,
    Cas,
    Delete,
    Incr,
    Decr,
    Append,
    Prepend,
}

impl TraceOp {
    pub const ALL: [TraceOp; 11] = [
        TraceOp::Get,
        TraceOp::Gets,
        TraceOp::Set,
        TraceOp::Add,
        TraceOp::Replace,
        TraceOp::Cas,
        TraceOp::Delete,
        TraceOp::Incr,
        TraceOp::Decr,
        TraceOp::Append,
        TraceOp::Prepend,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TraceOp::Get => "get",
            TraceOp::Gets => "gets",
            TraceOp::Set => "set",
            TraceOp::Add => "add",
            TraceOp::Replace => "replace",
            TraceOp::Cas => "cas",
            TraceOp::Delete => "delete",
            TraceOp::Incr => "incr",
            TraceOp::Decr => "decr",
            TraceOp::Append => "append",
            TraceOp::Prepend => "prepend",
        }
    }

    /// The trace's op name, or loadgen's own op names (read, update, insert, delete, upsert) for
    /// plain key lists.
    pub fn parse(s: &[u8]) -> Option<TraceOp> {
        Some(match s {
            b"get" | b"read" => TraceOp::Get,
            b"gets" => TraceOp::Gets,
            b"set" | b"upsert" => TraceOp::Set,
            b"add" | b"insert" => TraceOp::Add,
            b"replace" | b"update" => TraceOp::Replace,
            b"cas" => TraceOp::Cas,
            b"delete" => TraceOp::Delete,
            b"incr" => TraceOp::Incr,
            b"decr" => TraceOp::Decr,
            b"append" => TraceOp::Append,
            b"prepend" => TraceOp::Prepend,
            _ => return None,
        })
    }

    /// loadgen's op for it: the server-side counting per op stays as it is for a formula run.
    pub fn op(self) -> Op {
        match self {
            TraceOp::Get | TraceOp::Gets => Op::Read,
            TraceOp::Set => Op::Upsert,
            TraceOp::Add => Op::Insert,
            TraceOp::Delete => Op::Delete,
            TraceOp::Replace
            | TraceOp::Cas
            | TraceOp::Incr
            | TraceOp::Decr
            | TraceOp::Append
            | TraceOp::Prepend => Op::Update,
        }
    }
}

/// One request of a trace. `time_us` is None in a plain key list (the pace then comes from -R).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceLine<'a> {
    pub time_us: Option<u64>,
    pub key: &'a [u8],
    pub value_size: u32,
    pub client_id: u32,
    pub op: TraceOp,
    pub ttl: u32,
}

/// Why a line is not a trace line, in words (the reader adds the file and line number).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadLine(pub String);

const TWITTER: &str = "timestamp,key,key_size,value_size,client_id,op,ttl";

/// Parses one line (without its newline). Ok(None): a blank line or a `#` comment.
pub fn parse(line: &[u8]) -> Result<Option<TraceLine<'_>>, BadLine> {
    if skipped(line) {
        return Ok(None);
    }
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let commas = line.iter().filter(|&&b| b == b',').count();
    match commas {
        0 => Ok(Some(plain(line, TraceOp::Get))),
        1 => {
            let (key, op) = split_last(line);
            let op = TraceOp::parse(op).ok_or_else(|| bad_op(op))?;
            Ok(Some(plain(key, op)))
        }
        // A key holding commas still parses: the timestamp is the first field, the five counted
        // from the end are fixed, the key is what lies between.
        n if n >= 6 => twitter(line).map(Some),
        _ => Err(BadLine(format!(
            "{} fields; expected {TWITTER} (7 fields) or key[,op]",
            commas + 1
        ))),
    }
}

fn plain(key: &[u8], op: TraceOp) -> TraceLine<'_> {
    TraceLine {
        time_us: None,
        key,
        value_size: 0,
        client_id: 0,
        op,
        ttl: 0,
    }
}

fn twitter(line: &[u8]) -> Result<TraceLine<'_>, BadLine> {
    let first = line.iter().position(|&b| b == b',').unwrap_or(0);
    let time = &line[..first];
    let rest = &line[first + 1..];
    let (rest, ttl) = split_last(rest);
    let (rest, op) = split_last(rest);
    let (rest, client) = split_last(rest);
    let (rest, value_size) = split_last(rest);
    let (key, _key_size) = split_last(rest);
    if key.is_empty() {
        return Err(BadLine("empty key".into()));
    }
    Ok(TraceLine {
        time_us: Some(seconds_us(time).ok_or_else(|| field("timestamp", time))?),
        key,
        value_size: number(value_size).ok_or_else(|| field("value_size", value_size))? as u32,
        client_id: number(client).ok_or_else(|| field("client_id", client))? as u32,
        op: TraceOp::parse(op).ok_or_else(|| bad_op(op))?,
        ttl: number(ttl).ok_or_else(|| field("ttl", ttl))? as u32,
    })
}

/// A blank line or a `#` comment (with or without its line end).
pub fn skipped(line: &[u8]) -> bool {
    matches!(line.first(), None | Some(b'#' | b'\n' | b'\r'))
}

/// (everything before the last comma, the field after it).
fn split_last(s: &[u8]) -> (&[u8], &[u8]) {
    match s.iter().rposition(|&b| b == b',') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (&[][..], s),
    }
}

fn field(name: &str, v: &[u8]) -> BadLine {
    BadLine(format!(
        "{name} {:?} is not a whole number",
        String::from_utf8_lossy(v)
    ))
}

fn bad_op(v: &[u8]) -> BadLine {
    let known: Vec<&str> = TraceOp::ALL.iter().map(|o| o.name()).collect();
    BadLine(format!(
        "unknown op {:?}; known: {}",
        String::from_utf8_lossy(v),
        known.join(", ")
    ))
}

/// A decimal number of at most 10 digits (fits u32 after the caller's cast for sizes and TTLs).
pub fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    digits(s).filter(|&n| n <= u64::from(u32::MAX))
}

/// Seconds, whole or with up to 6 decimals, as microseconds.
fn seconds_us(s: &[u8]) -> Option<u64> {
    let (whole, frac) = match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &[][..]),
    };
    if whole.is_empty() || whole.len() > 12 || frac.len() > 6 {
        return None;
    }
    Some(digits(whole)? * 1_000_000 + digits(frac)? * 10u64.pow(6 - frac.len() as u32))
}

/// The value of ASCII digits (0 for none); None if any byte is not a digit. Callers bound the length.
pub(super) fn digits(s: &[u8]) -> Option<u64> {
    s.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests;
