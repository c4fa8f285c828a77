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
//! writes when the run ends, gets its Sync then (`commit`). The handshake: `wire_driver`.

use std::collections::VecDeque;

use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{Cell, Codec, Decoded, DecodedBatch, Reply, Request, RowView, MAX_FRAME};
use crate::proto::{key_rows::KeyRows, postgres::codec::multi_get::Form};
use crate::{dataset, decimal};

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
    /// A multi-get's keys, sorted ([`KeyRows`]).
    sorted: Vec<u64>,
    /// The multi-get's statement, result columns and form (`multi_get.rs`), when it has one.
    multi: Option<(&'static str, Vec<ColumnKind>, Form)>,
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
            sorted: Vec::new(),
            multi: None,
        }
    }

    /// Multi-gets go to `statement` (its own with `mget:N`), result column OIDs `columns`.
    pub fn with_multi_get(mut self, m: (&'static str, &[u32], Form)) -> PgCodec {
        let kinds = m.1.iter().map(|&o| ColumnKind::from_oid(o));
        self.multi = Some((m.0, kinds.collect(), m.2));
        self
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

const SKIPPED: &str =
    "skipped by the server: an earlier request in the same pipelined batch or transaction failed";

fn skipped<'b>() -> Reply<'b, PgCells<'b>> {
    Reply::Server(ErrorKind::Server, SKIPPED.into())
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
        let mut first = None;
        let Some((n, ended)) = self.walk(buf, |row| {
            // A --query may return several rows: a hit, and the first one is verified.
            first = first.or(Some(row));
        })?
        else {
            return Ok(None);
        };
        let reply = match ended {
            Ended::Skipped => skipped(),
            Ended::Failed(e) => Reply::Server(super::error::kind(&e.code), e.to_string()),
            Ended::Complete(tag) => self.reply(first, tag),
        };
        Ok(Some((n, reply)))
    }

    fn encode_batch(&mut self, keys: &[u64], out: &mut Vec<u8>) {
        self.resync_if_needed(out);
        self.open += 1;
        self.unflushed = true;
        let m = self.multi.as_ref();
        let (name, form) = m.map_or((STATEMENT, Form::Any), |m| (m.0, m.2));
        multi_get::encode_form(form, name, self.key_type.width(), keys, out);
    }

    fn decode_batch(
        &mut self,
        buf: &[u8],
        keys: &[u64],
        verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        // The rows are read with the column types while `walk` holds the codec.
        let columns = std::mem::take(self.multi.as_mut().map_or(&mut self.columns, |m| &mut m.1));
        let mut sorted = std::mem::take(&mut self.sorted);
        let mut rows = KeyRows::new(keys, &mut sorted);
        let walked = self.walk(buf, |row| {
            let first = multi_get::first_cell(row);
            rows.add(first.map(|f| f.0), |key| {
                let rest = first.map_or(0, |f| f.1);
                let cells = PgCells::after_first(row, rest, &columns);
                !verify || dataset::matches(key, RowView::Cells(cells))
            })
        });
        let tally = rows.end();
        self.sorted = sorted;
        *self.multi.as_mut().map_or(&mut self.columns, |m| &mut m.1) = columns;
        let Some((n, ended)) = walked? else {
            return Ok(None);
        };
        Ok(Some((
            n,
            match ended {
                Ended::Skipped => Err(LookupError::new(ErrorKind::Server, false, SKIPPED)),
                Ended::Failed(e) => Err(LookupError::new(
                    super::error::kind(&e.code),
                    false,
                    e.to_string(),
                )),
                Ended::Complete(_) => tally,
            },
        )))
    }
}

/// How a reply ended: skipped by the server (an earlier request of its batch failed), with
/// its CommandComplete tag, or with the server's error.
enum Ended<'b> {
    Skipped,
    Complete(&'b [u8]),
    Failed(ServerError),
}

impl PgCodec {
    /// A Sync before the next request when the open batch failed.
    fn resync_if_needed(&mut self, out: &mut Vec<u8>) {
        if self.resync {
            self.sync(out);
        }
    }

    /// Reads the reply at the front of `buf` up to its end, giving each DataRow to `on_row`;
    /// None while it is incomplete (then `on_row` may have seen some rows: callers start over).
    fn walk<'b>(
        &mut self,
        buf: &'b [u8],
        mut on_row: impl FnMut(&'b [u8]),
    ) -> Result<Option<(usize, Ended<'b>)>, LookupError> {
        // The last request of a batch owns the batch's ReadyForQuery; the others end at their
        // CommandComplete (or ErrorResponse).
        let (stray, last, skipped_here) = self.position();
        if skipped_here && !last {
            // No bytes belong to a skipped request; only the batch's last one reads the 'Z'.
            self.answered(stray, last, false);
            return Ok(Some((0, Ended::Skipped)));
        }
        let mut stray_z = stray;
        let mut pos = 0;
        let mut bound = false;
        let mut done = false;
        let mut tag: &[u8] = &[];
        let mut error: Option<ServerError> = None;
        // Stateless until a reply is complete: a partial reply is parsed again from its start
        // on the next call. Replies are ~100 bytes, so that is cheaper than carrying state.
        loop {
            let Some((kind, body, end)) = frame(buf, pos)? else {
                return Ok(None);
            };
            let open = !skipped_here && error.is_none();
            // After an ErrorResponse the server discards up to our Sync: expect only 'Z'.
            match kind {
                b'Z' if stray_z => stray_z = false,
                b'2' | b'D' | b'C' | b'E' | b'Z' if stray_z => {
                    return Err(LookupError::protocol(
                        "PostgreSQL reply out of step: no ReadyForQuery after a failed transaction",
                    ))
                }
                b'2' if open && !bound => bound = true,
                b'D' if open && bound && !done => on_row(body),
                b'C' if open && bound && !done => {
                    done = true;
                    tag = body;
                    if !last {
                        self.answered(stray, last, false);
                        return Ok(Some((end, Ended::Complete(tag))));
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
                        return Ok(Some((end, Ended::Failed(e))));
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
                    let ended = if skipped_here {
                        Ended::Skipped
                    } else if let Some(e) = error {
                        Ended::Failed(e)
                    } else {
                        Ended::Complete(tag)
                    };
                    return Ok(Some((end, ended)));
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

/// A message: its type byte, its body, and the offset just past it.
type Frame<'b> = (u8, &'b [u8], usize);

/// The message at `pos`, or None while it is incomplete.
fn frame(buf: &[u8], pos: usize) -> Result<Option<Frame<'_>>, LookupError> {
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
    Ok(Some((head[0], body, end)))
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

impl<'b> PgCells<'b> {
    /// The cells of a DataRow `body` after its first, which ends at `rest`; `kinds` are all
    /// the row's columns, the first included.
    pub(super) fn after_first(body: &'b [u8], rest: usize, kinds: &'b [ColumnKind]) -> Self {
        let all = PgCells::new(body, kinds);
        PgCells {
            rest: body.get(rest..).unwrap_or_default(),
            left: all.left.saturating_sub(1),
            kinds: kinds.get(1..).unwrap_or_default().iter(),
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

pub mod multi_get;
#[cfg(test)]
mod tests;
