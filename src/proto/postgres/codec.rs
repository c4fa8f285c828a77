//! PostgreSQL extended query protocol, for one prepared lookup: Bind + Execute per key and one
//! Sync per batch of lookups written together, replies parsed in place.
//!
//! Why one Sync per batch and not per lookup: every Sync ends an implicit transaction and makes
//! the server send ReadyForQuery and flush its output, which is most of the server's per-message
//! overhead for a point read. pgbench's `\startpipeline` scripts sync once per pipeline for the
//! same reason. Without pipelining (`-p 1`) every batch is one lookup, so nothing changes there.
//! The cost: a server error aborts the rest of its batch (the server skips to the Sync), so the
//! codec remembers the size of each batch in flight and answers the skipped lookups with a
//! server error of their own, keeping the stream in step.
//!
//! Writes are not batched that way: a Sync is also the commit of the implicit transaction, so
//! one Sync for 8 pipelined writes would be one commit (one WAL flush) for what the user asked
//! to be 8 autocommitted writes. With `--txn 1` every write is a batch of its own with its own
//! Sync, as pgbench -M prepared sends every statement of its script (libpq's
//! PQsendQueryPrepared is Bind, Execute, Sync): each write outside BEGIN is one transaction.
//! `--txn N` keeps the implicit transaction open over N writes instead of sending BEGIN and
//! COMMIT: no extra statements on the wire or in pg_stat_statements, and after an error the
//! server has already rolled it back, so the codec only counts the requests the server skips
//! and sends the Sync before the next request. Its writes go out with a Flush, so each is
//! answered at once; the Sync goes with the Nth. A connection's last transaction, short of N
//! writes when the run ends, gets its Sync then (`commit`).
//! The handshake (startup, auth, Parse/Describe) lives in `wire_driver`.

use std::collections::VecDeque;

use crate::decimal;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{Cell, Codec, Decoded, Reply, Request, RowView, MAX_FRAME};

/// Name of the prepared statement `wire_driver` parses on each connection.
pub const STATEMENT: &str = "lg";

/// Microseconds from the Unix epoch to the PostgreSQL epoch (2000-01-01 00:00:00).
const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

/// How the key is sent, from the statement's parameter type (ParameterDescription).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    Int2,
    Int4,
    Int8,
    Text,
}

impl KeyType {
    /// int2, int4, int8, text, varchar; None for any other type.
    pub fn from_oid(oid: u32) -> Option<KeyType> {
        match oid {
            21 => Some(KeyType::Int2),
            23 => Some(KeyType::Int4),
            20 => Some(KeyType::Int8),
            25 | 1043 => Some(KeyType::Text),
            _ => None,
        }
    }

    /// Bytes of the binary value; 0 for text (variable).
    fn width(self) -> usize {
        match self {
            KeyType::Int2 => 2,
            KeyType::Int4 => 4,
            KeyType::Int8 => 8,
            KeyType::Text => 0,
        }
    }
}

/// How a result column's binary value reads as a [`Cell`], from its type in the statement's
/// RowDescription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// text, varchar, bpchar, name: the UTF-8 bytes.
    Text,
    /// timestamp, timestamptz: i64 microseconds since the PostgreSQL epoch.
    Timestamp,
    Other,
}

impl ColumnKind {
    pub fn from_oid(oid: u32) -> ColumnKind {
        match oid {
            25 | 1043 | 1042 | 19 => ColumnKind::Text,
            1114 | 1184 => ColumnKind::Timestamp,
            _ => ColumnKind::Other,
        }
    }
}

/// Encodes lookups of `lg` and decodes their replies; a hit is its first DataRow, whose cells
/// are read by the column types of the statement.
pub struct PgCodec {
    key_type: KeyType,
    columns: Vec<ColumnKind>,
    /// Bind + Execute with a zeroed key value (empty for text keys).
    template: Vec<u8>,
    /// Offset in `template` of the key value, right after its i32 length.
    value_at: usize,
    /// Writes per transaction (`--txn`); 1: autocommit, a Sync right after every write.
    txn: u32,
    /// Requests encoded since the last Sync: the open batch.
    open: u32,
    /// Writes of the open batch's transaction (0: no transaction open).
    group: u32,
    /// Something was encoded since the last Sync or Flush.
    unflushed: bool,
    /// A request of the open batch failed: the server discards the rest of it, so a Sync goes
    /// out before the next request (a fresh transaction).
    resync: bool,
    /// Sizes of the batches written with their Sync and not yet fully answered, oldest first.
    batches: VecDeque<u32>,
    /// Requests answered of the oldest batch (the open one when `batches` is empty).
    done: u32,
    /// A request of the oldest batch failed: the server skips the rest of it up to the Sync.
    aborted: bool,
}

impl PgCodec {
    /// `columns`: the type OIDs of the statement's result columns (RowDescription).
    pub fn new(key_type: KeyType, columns: &[u32]) -> PgCodec {
        let width = key_type.width();
        let mut bind = vec![0u8]; // unnamed portal
        bind.extend_from_slice(STATEMENT.as_bytes());
        bind.push(0);
        bind.extend_from_slice(&[0, 1, 0, 1]); // one parameter format: binary
        bind.extend_from_slice(&[0, 1]); // one parameter
        bind.extend_from_slice(&(width as i32).to_be_bytes());
        let value_at = 5 + bind.len();
        bind.resize(bind.len() + width, 0);
        bind.extend_from_slice(&[0, 1, 0, 1]); // one result format for all columns: binary

        let mut template = vec![b'B'];
        template.extend_from_slice(&(4 + bind.len() as i32).to_be_bytes());
        template.extend_from_slice(&bind);
        // Execute the unnamed portal, all rows. The Sync comes once per batch (`end_batch`).
        template.extend_from_slice(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
        PgCodec {
            key_type,
            columns: columns
                .iter()
                .map(|&oid| ColumnKind::from_oid(oid))
                .collect(),
            template,
            value_at,
            txn: 1,
            open: 0,
            group: 0,
            unflushed: false,
            resync: false,
            batches: VecDeque::with_capacity(64),
            done: 0,
            aborted: false,
        }
    }

    /// Groups writes `txn` at a time into one transaction (`--txn`).
    pub fn with_txn(mut self, txn: usize) -> PgCodec {
        self.txn = txn.clamp(1, u32::MAX as usize) as u32;
        self
    }

    /// Ends the open batch with a Sync: its implicit transaction commits (or, after an error,
    /// is over), and the server answers ReadyForQuery.
    fn sync(&mut self, out: &mut Vec<u8>) {
        if self.open > 0 {
            out.extend_from_slice(&SYNC);
            self.batches.push_back(self.open);
            self.open = 0;
        }
        self.group = 0;
        self.resync = false;
        self.unflushed = false;
    }

    /// A lookup's reply from its first DataRow, if any; a write's from its CommandComplete
    /// `tag` (the rows it changed).
    fn reply<'b>(&'b self, row: Option<&'b [u8]>, tag: &[u8]) -> Reply<'b, PgCells<'b>> {
        match row {
            None => super::writes::written(tag).map_or(Reply::Miss, Reply::Written),
            Some(body) => Reply::Row(RowView::Cells(PgCells::new(body, &self.columns))),
        }
    }

    /// Where the next reply stands: whether a batch already answered still owes its
    /// ReadyForQuery (`stray`), whether the reply's request is the last of its batch, and
    /// whether an earlier request of its batch failed.
    fn position(&self) -> (bool, bool, bool) {
        // All of a batch answered before its Sync went out (an error in an open transaction):
        // its ReadyForQuery comes first.
        let stray = self.batches.front() == Some(&self.done);
        let (size, done, aborted) = match stray {
            true => (self.batches.get(1), 0, false),
            false => (self.batches.front(), self.done, self.aborted),
        };
        let last = match size {
            Some(&n) => done + 1 == n,
            // In the open batch its Sync is still to come; with nothing encoded (unit tests)
            // every request is its own batch.
            None => self.open == 0,
        };
        (stray, last, aborted)
    }

    /// A reply is complete: the request it answered leaves its batch, and a stray batch before
    /// it is gone. An error in the open batch asks for a Sync before the next request.
    fn answered(&mut self, stray: bool, last: bool, fails: bool) {
        if stray {
            self.batches.pop_front();
            (self.done, self.aborted) = (0, false);
        }
        self.done += 1;
        self.aborted |= fails;
        if last {
            self.batches.pop_front();
            (self.done, self.aborted) = (0, false);
        } else if fails && self.batches.is_empty() {
            self.resync = true;
        }
    }
}

const SYNC: [u8; 5] = [b'S', 0, 0, 0, 4];
/// Asks the server to send what it has, without ending the transaction.
const FLUSH: [u8; 5] = [b'H', 0, 0, 0, 4];
/// Close of the unnamed portal; its CloseComplete ('3') is skipped wherever it comes.
const CLOSE_PORTAL: [u8; 7] = [b'C', 0, 0, 0, 6, b'P', 0];

fn skipped<'b>() -> Reply<'b, PgCells<'b>> {
    Reply::Server(
        ErrorKind::Server,
        "skipped by the server: an earlier request in the same pipelined batch or transaction failed"
            .into(),
    )
}

impl Codec for PgCodec {
    type Cells<'b> = PgCells<'b>;

    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        let key = req.key;
        // A write that opens a transaction does not join the lookups before it: one failing
        // would make the server skip the write.
        if self.resync || (req.op.writes() && self.group == 0 && self.open > 0) {
            self.sync(out);
        }
        self.open += 1;
        self.unflushed = true;
        if req.op.writes() {
            super::writes::encode(req.op, key, req.version, out);
            self.group += 1;
            if self.group >= self.txn {
                self.sync(out);
            }
            return;
        }
        let start = out.len();
        let at = start + self.value_at;
        // Keys are cast like the tokio-postgres driver casts them (`key as i32`).
        match self.key_type {
            KeyType::Int2 => {
                out.extend_from_slice(&self.template);
                out[at..at + 2].copy_from_slice(&(key as i16).to_be_bytes());
            }
            KeyType::Int4 => {
                out.extend_from_slice(&self.template);
                out[at..at + 4].copy_from_slice(&(key as i32).to_be_bytes());
            }
            KeyType::Int8 => {
                out.extend_from_slice(&self.template);
                out[at..at + 8].copy_from_slice(&(key as i64).to_be_bytes());
            }
            KeyType::Text => {
                // Binary text is the UTF-8 bytes: the decimal key, spliced in with its lengths.
                let mut tmp = [0u8; 20];
                let digits = decimal::digits(key, &mut tmp);
                let n = digits.len();
                out.extend_from_slice(&self.template[..self.value_at]);
                out.extend_from_slice(digits);
                out.extend_from_slice(&self.template[self.value_at..]);
                let bind_len = i32::from_be_bytes(self.template[1..5].try_into().unwrap());
                out[start + 1..start + 5].copy_from_slice(&(bind_len + n as i32).to_be_bytes());
                out[at - 4..at].copy_from_slice(&(n as i32).to_be_bytes());
            }
        }
        if self.group > 0 {
            // Inside a transaction the unnamed portal lives until the next Bind or the commit,
            // and its executor ends (pg_stat_statements counts the lookup) only then: a
            // connection's last lookup in its rolled-back last transaction would go uncounted.
            out.extend_from_slice(&CLOSE_PORTAL);
        }
    }

    fn end_batch(&mut self, out: &mut Vec<u8>) {
        if !self.unflushed {
            return;
        }
        if self.group > 0 {
            // A transaction is open: its replies come now, its Sync with its last write.
            out.extend_from_slice(&FLUSH);
            self.unflushed = false;
        } else {
            self.sync(out);
        }
    }

    /// The open transaction's Sync: its writes were all answered (over a Flush).
    fn commit(&mut self, out: &mut Vec<u8>) -> bool {
        if self.group == 0 || self.resync {
            return false;
        }
        self.sync(out);
        true
    }

    /// The Sync's ReadyForQuery, after an ErrorResponse when the commit failed.
    fn decode_commit(
        &mut self,
        buf: &[u8],
    ) -> Result<Option<(usize, Option<LookupError>)>, LookupError> {
        let mut pos = 0;
        let mut error = None;
        loop {
            let Some(head) = buf.get(pos..pos + 5) else {
                return Ok(None);
            };
            let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
            if !(4..=MAX_FRAME as i32).contains(&len) {
                return Err(LookupError::protocol(
                    "bad PostgreSQL message length in a commit",
                ));
            }
            let end = pos + 1 + len as usize;
            let Some(body) = buf.get(pos + 5..end) else {
                return Ok(None);
            };
            match head[0] {
                b'E' => {
                    let e = ServerError::parse(body);
                    let kind = super::error::kind(&e.code);
                    error = Some(LookupError::new(kind, false, e.to_string()));
                }
                b'Z' => {
                    self.batches.pop_front();
                    (self.done, self.aborted) = (0, false);
                    return Ok(Some((end, error)));
                }
                b'N' | b'S' | b'A' | b'3' => {}
                t => {
                    return Err(LookupError::protocol(format!(
                        "unexpected PostgreSQL message 0x{t:02x} in a commit reply"
                    )))
                }
            }
            pos = end;
        }
    }

    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        _key: u64,
    ) -> Result<Decoded<'b, PgCells<'b>>, LookupError> {
        // The last request of a batch owns the batch's ReadyForQuery; the others end at their
        // CommandComplete (or ErrorResponse).
        let (stray, last, skipped_here) = self.position();
        if skipped_here && !last {
            // No bytes belong to a skipped request; only the batch's last one reads the 'Z'.
            self.answered(stray, last, false);
            return Ok(Some((0, skipped())));
        }
        let mut stray_z = stray;
        let mut pos = 0;
        let mut bound = false;
        let mut done = false;
        let mut row: Option<&[u8]> = None;
        let mut tag: &[u8] = &[];
        let mut error: Option<ServerError> = None;
        // Stateless until a reply is complete: a partial reply is parsed again from its start
        // on the next call. Replies are ~100 bytes, so that is cheaper than carrying state.
        loop {
            let Some(head) = buf.get(pos..pos + 5) else {
                return Ok(None);
            };
            let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
            if !(4..=MAX_FRAME as i32).contains(&len) {
                return Err(LookupError::protocol(format!(
                    "bad PostgreSQL message length {len} (type byte 0x{:02x})",
                    head[0]
                )));
            }
            let end = pos + 1 + len as usize;
            let Some(body) = buf.get(pos + 5..end) else {
                return Ok(None);
            };
            let open = !skipped_here && error.is_none();
            // After an ErrorResponse the server discards up to our Sync: expect only 'Z'.
            match head[0] {
                b'Z' if stray_z => stray_z = false,
                b'2' | b'D' | b'C' | b'E' | b'Z' if stray_z => {
                    return Err(LookupError::protocol(
                        "PostgreSQL reply out of step: no ReadyForQuery after a failed transaction",
                    ))
                }
                b'2' if open && !bound => bound = true,
                b'D' if open && bound && !done => {
                    // A --query may return several rows: a hit, and the first one is verified.
                    row = row.or(Some(body));
                }
                b'C' if open && bound && !done => {
                    done = true;
                    tag = body;
                    if !last {
                        self.answered(stray, last, false);
                        return Ok(Some((end, self.reply(row, tag))));
                    }
                }
                b'E' if open => {
                    let e = ServerError::parse(body);
                    if e.ends_session() {
                        // Say why now: the next read would only see the socket close.
                        return Err(LookupError::io(format!(
                            "the server ended the session: {e}"
                        )));
                    }
                    if !last {
                        self.answered(stray, last, true);
                        return Ok(Some((
                            end,
                            Reply::Server(super::error::kind(&e.code), e.to_string()),
                        )));
                    }
                    error = Some(e);
                }
                b'Z' if last => {
                    if !skipped_here && error.is_none() && !done {
                        return Err(LookupError::protocol(
                            "PostgreSQL reply out of step: ReadyForQuery before CommandComplete",
                        ));
                    }
                    self.answered(stray, last, false);
                    let reply = if skipped_here {
                        skipped()
                    } else if let Some(e) = error {
                        Reply::Server(super::error::kind(&e.code), e.to_string())
                    } else {
                        self.reply(row, tag)
                    };
                    return Ok(Some((end, reply)));
                }
                b'Z' => {
                    return Err(LookupError::protocol(
                        "PostgreSQL reply out of step: ReadyForQuery inside a pipelined batch",
                    ))
                }
                // Asynchronous messages may arrive at any time.
                b'N' | b'S' | b'A' | b'3' => {}
                t => {
                    return Err(LookupError::protocol(format!(
                        "unexpected PostgreSQL message '{}' (0x{t:02x}) in a lookup reply",
                        t.escape_ascii()
                    )))
                }
            }
            pos = end;
        }
    }
}

/// The fields of an ErrorResponse that loadgen shows: built on the error path only.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ServerError {
    /// Non-localized severity (`V`, else `S`): ERROR, FATAL, PANIC.
    pub severity: String,
    /// SQLSTATE (`C`), e.g. 28P01.
    pub code: String,
    /// Primary message (`M`).
    pub message: String,
}

impl ServerError {
    /// Fields are (type byte, C string)*, then a 0 byte; malformed tails are ignored.
    pub fn parse(body: &[u8]) -> ServerError {
        let mut e = ServerError::default();
        let mut rest = body;
        while let [t, tail @ ..] = rest {
            if *t == 0 {
                break;
            }
            let Some(nul) = tail.iter().position(|&b| b == 0) else {
                break;
            };
            let value = || String::from_utf8_lossy(&tail[..nul]).into_owned();
            match t {
                b'V' => e.severity = value(),
                b'S' if e.severity.is_empty() => e.severity = value(),
                b'C' => e.code = value(),
                b'M' => e.message = value(),
                _ => {}
            }
            rest = &tail[nul + 1..];
        }
        e
    }

    /// FATAL and PANIC end the session: no ReadyForQuery follows, the socket closes.
    pub fn ends_session(&self) -> bool {
        self.severity == "FATAL" || self.severity == "PANIC"
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (SQLSTATE {})", self.message, self.code)
    }
}

/// The cells of a binary DataRow (a column count, then per column an i32 length, -1 for NULL,
/// and the value), read as they are iterated. Bytes that do not frame read as one
/// [`Cell::Other`], and so do bytes left after the last column.
#[derive(Clone, Debug)]
pub struct PgCells<'b> {
    rest: &'b [u8],
    left: usize,
    kinds: std::slice::Iter<'b, ColumnKind>,
}

impl<'b> PgCells<'b> {
    fn new(body: &'b [u8], kinds: &'b [ColumnKind]) -> PgCells<'b> {
        let (left, rest) = match body {
            [hi, lo, rest @ ..] => (i16::from_be_bytes([*hi, *lo]).max(0) as usize, rest),
            _ => (0, body),
        };
        PgCells {
            rest,
            left,
            kinds: kinds.iter(),
        }
    }
}

impl<'b> Iterator for PgCells<'b> {
    type Item = Cell<'b>;

    fn next(&mut self) -> Option<Cell<'b>> {
        if self.left == 0 {
            return (!std::mem::take(&mut self.rest).is_empty()).then_some(Cell::Other);
        }
        self.left -= 1;
        let kind = self.kinds.next().copied().unwrap_or(ColumnKind::Other);
        let len = self
            .rest
            .get(..4)
            .map(|l| i32::from_be_bytes([l[0], l[1], l[2], l[3]]));
        let value = match len {
            Some(-1) => {
                self.rest = &self.rest[4..];
                return Some(Cell::Null);
            }
            Some(n) => usize::try_from(n)
                .ok()
                .and_then(|n| self.rest.get(4..4 + n)),
            None => None,
        };
        let Some(value) = value else {
            self.left = 0;
            self.rest = &[];
            return Some(Cell::Other);
        };
        self.rest = &self.rest[4 + value.len()..];
        Some(match kind {
            ColumnKind::Text => Cell::Text(value),
            ColumnKind::Timestamp => <[u8; 8]>::try_from(value)
                .ok()
                .and_then(|us| i64::from_be_bytes(us).checked_add(PG_EPOCH_UNIX_MICROS))
                .map_or(Cell::Other, Cell::Time),
            ColumnKind::Other => Cell::Other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{ErrorKind, Outcome};
    use crate::proto::codec::outcome;
    use crate::proto::testkit::{self, dec, decode_split};
    use bytes::{BufMut, BytesMut};
    use postgres_protocol::message::frontend;
    use postgres_protocol::IsNull;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn data_row(cols: &[&[u8]]) -> Vec<u8> {
        let mut b = (cols.len() as i16).to_be_bytes().to_vec();
        for c in cols {
            b.extend_from_slice(&(c.len() as i32).to_be_bytes());
            b.extend_from_slice(c);
        }
        msg(b'D', &b)
    }

    /// The usr table's column types: text, text, timestamp.
    const USR: &[u32] = &[25, 25, 1114];

    fn pg_micros(key: u64) -> i64 {
        crate::dataset::created_unix(key) * 1_000_000 - PG_EPOCH_UNIX_MICROS
    }

    fn usr_row(key: u64) -> Vec<u8> {
        let us = pg_micros(key);
        data_row(&[
            format!("user{key}").as_bytes(),
            format!("user{key}@example.com").as_bytes(),
            &us.to_be_bytes(),
        ])
    }

    fn reply(row: Option<Vec<u8>>) -> Vec<u8> {
        let tag: &[u8] = if row.is_some() {
            b"SELECT 1\0"
        } else {
            b"SELECT 0\0"
        };
        let mut r = msg(b'2', b"");
        r.extend(row.unwrap_or_default());
        r.extend(msg(b'C', tag));
        r.extend(msg(b'Z', b"I"));
        r
    }

    fn hit(key: u64) -> Vec<u8> {
        reply(Some(usr_row(key)))
    }

    fn error_reply(severity: &str, code: &str, text: &str) -> Vec<u8> {
        let body = format!("S{severity}\0V{severity}\0C{code}\0M{text}\0\0");
        let mut r = msg(b'E', body.as_bytes());
        r.extend(msg(b'Z', b"I"));
        r
    }

    fn notice() -> Vec<u8> {
        msg(b'N', b"SNOTICE\0VNOTICE\0C00000\0Mhello\0\0")
    }

    fn decode_all(buf: &[u8], key: u64) -> (usize, Result<Outcome, LookupError>) {
        let mut c = PgCodec::new(KeyType::Int4, USR);
        let (n, reply) = c.decode(buf, key).unwrap().expect("complete");
        (n, outcome(reply, &Request::read(key), true))
    }

    /// What postgres-protocol itself encodes for the same lookup.
    fn reference(key_bytes: &[u8]) -> Vec<u8> {
        let mut b = BytesMut::new();
        frontend::bind(
            "",
            STATEMENT,
            [1],
            [key_bytes],
            |v, buf: &mut BytesMut| {
                buf.put_slice(v);
                Ok(IsNull::No)
            },
            [1],
            &mut b,
        )
        .map_err(|_| "bind")
        .unwrap();
        frontend::execute("", 0, &mut b).unwrap();
        b.to_vec()
    }

    #[test]
    fn encode_matches_postgres_protocol_for_every_key_type() {
        let key = 123_456u64;
        for (kt, bytes) in [
            (KeyType::Int2, (key as i16).to_be_bytes().to_vec()),
            (KeyType::Int4, (key as i32).to_be_bytes().to_vec()),
            (KeyType::Int8, (key as i64).to_be_bytes().to_vec()),
            (KeyType::Text, b"123456".to_vec()),
        ] {
            let mut c = PgCodec::new(kt, USR);
            let mut out = b"prefix".to_vec();
            c.encode(&Request::read(key), &mut out);
            c.encode(&Request::read(key), &mut out); // appends, patching only its own bytes
            c.end_batch(&mut out);
            c.end_batch(&mut out); // nothing new: no second Sync
            let one = reference(&bytes);
            assert_eq!(out, [&b"prefix"[..], &one, &one, &SYNC].concat(), "{kt:?}");
        }
        let mut out = Vec::new();
        PgCodec::new(KeyType::Text, USR).encode(&Request::read(0), &mut out);
        assert_eq!(out, reference(b"0"));
        let mut out = Vec::new();
        PgCodec::new(KeyType::Text, USR).encode(&Request::read(u64::MAX), &mut out);
        assert_eq!(out, reference(u64::MAX.to_string().as_bytes()));
    }

    #[test]
    fn hit_miss_and_verify() {
        let r = hit(42);
        let (n, out) = decode_all(&r, 42);
        assert_eq!((n, out.unwrap()), (r.len(), Outcome::Hit));
        let (_, out) = decode_all(&r, 43);
        assert_eq!(out.unwrap_err().kind, ErrorKind::Verify);
        // Without verify any row is a hit.
        let mut c = PgCodec::new(KeyType::Int4, USR);
        assert_eq!(
            dec(&mut c, &r, 43, false).unwrap(),
            Some((r.len(), Outcome::Hit))
        );

        let r = reply(None);
        let (n, out) = decode_all(&r, 7);
        assert_eq!((n, out.unwrap()), (r.len(), Outcome::Miss));
    }

    #[test]
    fn cells_follow_the_column_types() {
        let mut c = PgCodec::new(KeyType::Int4, &[25, 1114, 23, 1184]);
        let row = data_row(&[
            b"a",
            &0i64.to_be_bytes(),
            &7i32.to_be_bytes(),
            &(-1i64).to_be_bytes(),
        ]);
        let r = reply(Some(row));
        let Some((_, Reply::Row(RowView::Cells(cells)))) = c.decode(&r, 1).unwrap() else {
            panic!("a row");
        };
        let want = [
            Cell::Text(b"a"),
            Cell::Time(PG_EPOCH_UNIX_MICROS),
            Cell::Other,
            Cell::Time(PG_EPOCH_UNIX_MICROS - 1),
        ];
        assert_eq!(cells.collect::<Vec<_>>(), want);
        // NULL, a timestamp of the wrong width, a column the description did not have, and
        // a value cut short.
        let mut b = 4i16.to_be_bytes().to_vec();
        b.extend_from_slice(&(-1i32).to_be_bytes());
        for v in [&[1u8, 2, 3][..], b"x"] {
            b.extend_from_slice(&(v.len() as i32).to_be_bytes());
            b.extend_from_slice(v);
        }
        b.extend_from_slice(&9i32.to_be_bytes());
        let mut c = PgCodec::new(KeyType::Int4, &[25, 1114]);
        let r = reply(Some(msg(b'D', &b)));
        let Some((_, Reply::Row(RowView::Cells(cells)))) = c.decode(&r, 1).unwrap() else {
            panic!("a row");
        };
        let want = [Cell::Null, Cell::Other, Cell::Other, Cell::Other];
        assert_eq!(cells.collect::<Vec<_>>(), want);
    }

    #[test]
    fn verify_rejects_other_shapes() {
        let us = pg_micros(5);
        for row in [
            data_row(&[b"user5", b"user5@example.com"]),
            data_row(&[b"user5", b"user5@example.org", &us.to_be_bytes()]),
            data_row(&[b"user5", b"user5@example.com", &(us + 1).to_be_bytes()]),
            data_row(&[b"user5", b"user5@example.com", &us.to_be_bytes(), b""]),
            data_row(&[b"user55", b"user5@example.com", &us.to_be_bytes()]),
        ] {
            let (_, out) = decode_all(&reply(Some(row)), 5);
            assert_eq!(out.unwrap_err().kind, ErrorKind::Verify);
        }
        // NULL column (length -1).
        let mut b = 3i16.to_be_bytes().to_vec();
        b.extend_from_slice(&(-1i32).to_be_bytes());
        let (_, out) = decode_all(&reply(Some(msg(b'D', &b))), 5);
        assert_eq!(out.unwrap_err().kind, ErrorKind::Verify);
    }

    #[test]
    fn error_mid_pipeline_then_a_hit() {
        let mut buf = error_reply("ERROR", "22003", "integer out of range");
        let first = buf.len();
        buf.extend(hit(9));
        let mut c = PgCodec::new(KeyType::Int4, USR);
        let (n, e) = testkit::dec_err(&mut c, &buf, 8, true);
        assert_eq!(n, first);
        assert_eq!((e.kind, e.fatal), (ErrorKind::Server, false));
        assert_eq!(e.message, "integer out of range (SQLSTATE 22003)");
        let got = dec(&mut c, &buf[n..], 9, true).unwrap();
        assert_eq!(got, Some((buf.len() - n, Outcome::Hit)));
    }

    #[test]
    fn error_after_rows_is_a_server_error() {
        let mut r = msg(b'2', b"");
        r.extend(usr_row(3));
        r.extend(error_reply("ERROR", "22012", "division by zero"));
        let (n, out) = decode_all(&r, 3);
        assert_eq!(n, r.len());
        assert_eq!(out.unwrap_err().kind, ErrorKind::Server);
    }

    #[test]
    fn fatal_error_ends_the_connection_at_once() {
        let body =
            b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0";
        let e = dec(
            &mut PgCodec::new(KeyType::Int4, USR),
            &msg(b'E', body),
            1,
            false,
        )
        .unwrap_err();
        assert!(e.fatal);
        assert!(e.message.contains("57P01"), "{}", e.message);
    }

    #[test]
    fn async_messages_are_ignored_anywhere() {
        let status = msg(b'S', b"TimeZone\0UTC\0");
        let notify = msg(b'A', b"\0\0\0\x01chan\0payload\0");
        let parts = [
            msg(b'2', b""),
            usr_row(11),
            msg(b'C', b"SELECT 1\0"),
            msg(b'Z', b"I"),
        ];
        let mut buf = notice();
        for p in &parts {
            buf.extend(p);
            buf.extend(notice());
            buf.extend(&status);
            buf.extend(&notify);
        }
        // Trailing async messages belong to the next reply; this one ends at its 'Z'.
        let (n, out) = decode_all(&buf, 11);
        assert_eq!(out.unwrap(), Outcome::Hit);
        assert_eq!(&buf[n..], [notice(), status, notify].concat());
    }

    #[test]
    fn three_pipelined_replies_split_at_every_byte() {
        let keys = [1u64, 2_000_000, 3];
        let whole = [hit(1), reply(None), notice(), hit(3)].concat();
        let want = [Outcome::Hit, Outcome::Miss, Outcome::Hit];
        for cut in 0..=whole.len() {
            // Without end_batch every lookup is its own batch, ending at its own 'Z'.
            let got = decode_split(PgCodec::new(KeyType::Int4, USR), &whole, cut, &keys);
            assert_eq!(got, want.map(Ok), "cut at {cut}");
        }
    }

    /// Replies to one batch: each lookup's 2 D* C without its own 'Z', one 'Z' at the end.
    fn batch_reply(replies: &[Vec<u8>]) -> Vec<u8> {
        let z = msg(b'Z', b"I");
        let mut out: Vec<u8> = replies
            .iter()
            .flat_map(|r| r[..r.len() - z.len()].to_vec())
            .collect();
        out.extend(z);
        out
    }

    /// A codec with batches of these sizes written (encoded and synced).
    fn batched(sizes: &[u32]) -> PgCodec {
        let mut c = PgCodec::new(KeyType::Int4, USR);
        let mut out = Vec::new();
        for &n in sizes {
            for k in 0..n {
                c.encode(&Request::read(k as u64), &mut out);
            }
            c.end_batch(&mut out);
        }
        assert_eq!(out.iter().filter(|&&b| b == b'S').count(), sizes.len());
        c
    }

    /// Decodes `keys` in order from `whole`, delivered in two reads split at `cut`; parsed
    /// replies are dropped from the front, as the connection does.
    #[test]
    fn one_sync_per_batch_split_at_every_byte() {
        // Batches of 3 and 1: hit, miss, hit | hit.
        let whole = [
            batch_reply(&[hit(1), reply(None), hit(3)]),
            notice(),
            batch_reply(&[hit(4)]),
        ]
        .concat();
        for cut in 0..=whole.len() {
            let got = decode_split(batched(&[3, 1]), &whole, cut, &[1, 2_000_000, 3, 4]);
            let want = [Outcome::Hit, Outcome::Miss, Outcome::Hit, Outcome::Hit];
            assert_eq!(got, want.map(Ok), "cut at {cut}");
        }
    }

    #[test]
    fn an_error_skips_the_rest_of_its_batch_only() {
        // Batch of 4: hit, error, (skipped), (skipped) | batch of 2: hit, miss.
        let mut first = [msg(b'2', b""), usr_row(1), msg(b'C', b"SELECT 1\0")].concat();
        first.extend(msg(
            b'E',
            b"SERROR\0VERROR\0C57014\0Mcanceling statement\0\0",
        ));
        first.extend(msg(b'Z', b"E"));
        let whole = [first, batch_reply(&[hit(5), reply(None)])].concat();
        let keys = [1, 2, 3, 4, 5, 2_000_000];
        for cut in 0..=whole.len() {
            let got = decode_split(batched(&[4, 2]), &whole, cut, &keys);
            use ErrorKind::Server;
            let want = [Ok(Outcome::Hit), Err(Server), Err(Server), Err(Server)];
            assert_eq!(got[..4], want, "cut at {cut}");
            assert_eq!(
                got[4..],
                [Ok(Outcome::Hit), Ok(Outcome::Miss)],
                "cut at {cut}"
            );
        }
        // The failed lookup keeps the server's message; the skipped ones say why they failed.
        let mut c = batched(&[2]);
        let buf = [
            msg(b'E', b"SERROR\0VERROR\0C22003\0Mout of range\0\0"),
            msg(b'Z', b"E"),
        ]
        .concat();
        let (n, e) = testkit::dec_err(&mut c, &buf, 1, true);
        assert!(e.message.contains("22003"), "{}", e.message);
        let (m, e) = testkit::dec_err(&mut c, &buf[n..], 2, true);
        assert_eq!(n + m, buf.len());
        assert!(e.message.contains("skipped"), "{}", e.message);
    }

    fn write(key: u64) -> Request {
        Request {
            op: crate::mix::Op::Update,
            key,
            version: 1,
        }
    }

    /// The message types of `out`, in order.
    fn types(out: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        let mut pos = 0;
        while pos < out.len() {
            t.push(out[pos]);
            pos += 1 + i32::from_be_bytes(out[pos + 1..pos + 5].try_into().unwrap()) as usize;
        }
        t
    }

    /// A write's reply up to its CommandComplete (`UPDATE 1`), without ReadyForQuery.
    fn updated() -> Vec<u8> {
        [msg(b'2', b""), msg(b'C', b"UPDATE 1\0")].concat()
    }

    /// Decodes one reply that must be `want` (a write's Written(1) or a server error), taking `n`
    /// bytes.
    fn expect(c: &mut PgCodec, buf: &[u8], want: &str) -> usize {
        let (n, reply) = c.decode(buf, 1).unwrap().expect("complete");
        match (reply, want) {
            (Reply::Written(1), "written") => {}
            (Reply::Server(ErrorKind::Server, m), "skipped") if m.contains("skipped") => {}
            (Reply::Server(ErrorKind::Deadlock, m), "failed") if m.contains("40P01") => {}
            (r, _) => panic!("want {want}, got {r:?}"),
        }
        n
    }

    #[test]
    fn autocommit_writes_each_get_their_own_sync() {
        let mut c = PgCodec::new(KeyType::Int4, USR);
        let mut out = Vec::new();
        for r in [
            Request::read(1),
            write(2),
            Request::read(3),
            Request::read(4),
            write(5),
        ] {
            c.encode(&r, &mut out);
        }
        c.end_batch(&mut out);
        // read | write | read read | write: a Sync after every write, and before one when
        // lookups wait unsynced.
        assert_eq!(types(&out), b"BESBESBEBESBES");
        assert_eq!(c.batches, [1, 1, 2, 1]);
        c.end_batch(&mut out);
        assert_eq!(types(&out), b"BESBESBEBESBES", "nothing new, nothing added");
    }

    #[test]
    fn a_transaction_of_three_flushes_and_syncs_with_its_third_write() {
        let mut c = PgCodec::new(KeyType::Int4, USR).with_txn(3);
        let z = msg(b'Z', b"I");
        let mut out = Vec::new();
        for k in 1..=2 {
            c.encode(&write(k), &mut out);
            c.end_batch(&mut out);
            c.end_batch(&mut out);
            let r = updated();
            assert_eq!(expect(&mut c, &r, "written"), r.len(), "ends at its 'C'");
        }
        // A lookup rides along in the open transaction.
        c.encode(&Request::read(7), &mut out);
        c.end_batch(&mut out);
        let r = [reply(None), msg(b'3', b"")].concat();
        assert_eq!(
            dec(&mut c, &r, 7, true).unwrap(),
            Some((r.len() - z.len() - 5, Outcome::Miss))
        );
        c.encode(&write(3), &mut out);
        c.end_batch(&mut out);
        assert_eq!(types(&out), b"BEHBEHBECHBES");
        // The lookup's CloseComplete leads the next reply.
        let r = [msg(b'3', b""), updated(), z].concat();
        assert_eq!(
            expect(&mut c, &r, "written"),
            r.len(),
            "the third reads the 'Z'"
        );
        assert!(c.batches.is_empty() && c.open == 0 && c.group == 0);
    }

    #[test]
    fn a_failed_transaction_skips_its_rest_and_syncs_before_the_next_request() {
        let deadlock = msg(b'E', b"SERROR\0VERROR\0C40P01\0Mdeadlock detected\0\0");
        let z = msg(b'Z', b"I");
        // -p 1: the second write of three fails; the next request starts a fresh transaction.
        let mut c = PgCodec::new(KeyType::Int4, USR).with_txn(3);
        let mut out = Vec::new();
        c.encode(&write(1), &mut out);
        c.end_batch(&mut out);
        let n = expect(&mut c, &updated(), "written");
        assert_eq!(n, updated().len());
        c.encode(&write(2), &mut out);
        c.end_batch(&mut out);
        assert_eq!(expect(&mut c, &deadlock, "failed"), deadlock.len());
        out.clear();
        c.encode(&write(3), &mut out);
        c.end_batch(&mut out);
        assert_eq!(
            types(&out),
            b"SBEH",
            "the failed one's Sync, then a new transaction"
        );
        let whole = [z.clone(), updated()].concat();
        for cut in 0..whole.len() {
            let mut c2 = PgCodec::new(KeyType::Int4, USR);
            c2.txn = c.txn;
            (c2.batches, c2.open, c2.group, c2.done) = (c.batches.clone(), c.open, c.group, c.done);
            (c2.aborted, c2.resync) = (c.aborted, c.resync);
            assert!(
                c2.decode(&whole[..cut], 1).unwrap().is_none(),
                "cut at {cut}"
            );
        }
        assert_eq!(expect(&mut c, &whole, "written"), whole.len());

        // -p 4: writes 2 and 3 were sent after the one that failed; the server skips them.
        let mut c = PgCodec::new(KeyType::Int4, USR).with_txn(5);
        let mut out = Vec::new();
        for k in 1..=4 {
            c.encode(&write(k), &mut out);
        }
        c.end_batch(&mut out);
        let buf = deadlock.clone();
        assert_eq!(expect(&mut c, &buf, "failed"), buf.len());
        for _ in 2..=4 {
            assert_eq!(expect(&mut c, b"", "skipped"), 0);
        }
        out.clear();
        c.encode(&write(5), &mut out);
        c.encode(&write(6), &mut out);
        c.end_batch(&mut out);
        assert_eq!(types(&out), b"SBEBEH");
        let buf = [z.clone(), updated(), updated()].concat();
        let n = expect(&mut c, &buf, "written");
        assert_eq!(n, z.len() + updated().len());
        assert_eq!(expect(&mut c, &buf[n..], "written"), updated().len());

        // The failure is the last write of its transaction: the Sync was sent with it.
        let mut c = PgCodec::new(KeyType::Int4, USR).with_txn(2);
        let mut out = Vec::new();
        c.encode(&write(1), &mut out);
        c.encode(&write(2), &mut out);
        c.encode(&write(3), &mut out);
        c.end_batch(&mut out);
        assert_eq!(types(&out), b"BEBESBEH");
        let buf = [updated(), deadlock, z, updated()].concat();
        let n = expect(&mut c, &buf, "written");
        let m = expect(&mut c, &buf[n..], "failed");
        assert_eq!(expect(&mut c, &buf[n + m..], "written"), updated().len());
        assert!(!c.resync);
    }

    #[test]
    fn ready_for_query_inside_a_batch_is_out_of_step() {
        let mut c = batched(&[2]);
        let h = hit(1);
        let z = msg(b'Z', b"I").len();
        // Ends at 'C': the 'Z' belongs to the batch's last lookup.
        assert_eq!(
            dec(&mut c, &h, 1, true).unwrap(),
            Some((h.len() - z, Outcome::Hit))
        );
        let mut c = batched(&[2]);
        let buf = [msg(b'Z', b"I"), hit(1)].concat();
        let e = dec(&mut c, &buf, 1, true).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true));
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let mut c = PgCodec::new(KeyType::Int4, USR);
        for bad in [
            b"HTTP/1.1 200 OK\r\n".to_vec(),
            msg(b'T', b"\0\0"),          // RowDescription: not asked for
            [b'2', 0, 0, 0, 3].to_vec(), // length below 4
            [b'D', 0x7f, 0xff, 0xff, 0xff].to_vec(), // length above MAX_FRAME
            [msg(b'C', b"SELECT 0\0"), msg(b'Z', b"I")].concat(), // no BindComplete
            msg(b'Z', b"I"),             // out of step
            [msg(b'2', b""), msg(b'Z', b"I")].concat(), // no CommandComplete
            [msg(b'2', b""), msg(b'2', b"")].concat(), // BindComplete twice
        ] {
            let e = dec(&mut c, &bad, 1, true).unwrap_err();
            assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{bad:?}");
        }
        // Incomplete is not an error.
        assert!(dec(&mut c, &hit(1)[..7], 1, true).unwrap().is_none());
        assert!(dec(&mut c, b"", 1, true).unwrap().is_none());
    }

    #[test]
    fn hits_and_misses_allocate_nothing() {
        let mut c = PgCodec::new(KeyType::Int4, USR);
        testkit::assert_no_alloc(&mut c, &hit(42), 42);
        testkit::assert_no_alloc(&mut c, &reply(None), 42);
    }

    #[test]
    fn server_error_fields() {
        let e = ServerError::parse(
            b"SERREUR\0VERROR\0C28P01\0Mpassword authentication failed for user \"x\"\0\0",
        );
        assert_eq!(e.severity, "ERROR");
        assert_eq!(e.code, "28P01");
        assert!(!e.ends_session());
        assert_eq!(ServerError::parse(b"Cxx"), ServerError::default());
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
                                    key in 0u64..3_000_000, verify in proptest::bool::ANY) {
            let mut c = PgCodec::new(KeyType::Int8, USR);
            if let Ok(Some((n, _))) = dec(&mut c, &bytes, key, verify) {
                proptest::prop_assert!(n <= bytes.len());
            }
            // Also behind a valid prefix, so the parser gets past the first message.
            let mut buf = msg(b'2', b"");
            buf.extend(&bytes);
            let _ = dec(&mut c, &buf, key, verify);
            let _ = ServerError::parse(&bytes);
        }

        #[test]
        fn random_well_framed_messages_never_panic(
            msgs in proptest::collection::vec(
                (proptest::sample::select(b"2DCEZNSAT1".to_vec()),
                 proptest::collection::vec(proptest::num::u8::ANY, 0..40)),
                0..8),
            key in 0u64..3_000_000) {
            let buf: Vec<u8> = msgs.iter().flat_map(|(t, b)| msg(*t, b)).collect();
            if let Ok(Some((n, _))) = dec(&mut PgCodec::new(KeyType::Int4, USR), &buf, key, true) {
                proptest::prop_assert!(n <= buf.len());
            }
        }
    }
}
