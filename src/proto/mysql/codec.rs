//! MySQL / MariaDB binary protocol for one prepared lookup: a COM_STMT_EXECUTE per key, the
//! binary result set parsed in place, with no allocation unless a reply is an error. Writes
//! execute their own prepared statements (`writes`) and are answered with an OK packet whose
//! affected rows are the rows changed.
//! The handshake and COM_STMT_PREPARE live in `wire_driver`.
//!
//! The server reads commands off the socket one after the other and answers each in order, so
//! lookups pipeline; every execute carries its own parameter types, so each stands alone.
//! Sequence ids are checked: every reply starts at 1 and counts up, so a stream that fell out
//! of step is a protocol error at once instead of rows credited to the wrong key.

use crate::dataset;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{
    max_frame_text, Codec, Decoded, DecodedBatch, Reply, Request, RowView, MAX_FRAME,
};
use crate::proto::key_rows::KeyRows;
pub use crate::proto::mysql::cells::{column_type, lenenc, time_cell, MyCells};
use crate::proto::mysql::txn::{self, Groups};

// Capability flags (the low 32 bits are MySQL's; MariaDB's own are the high 32).
pub const CLIENT_LONG_PASSWORD: u64 = 1; // MariaDB: CLIENT_MYSQL, "not a MariaDB server/client"
/// An UPDATE's affected rows are the rows it found, not only those whose values changed.
pub const CLIENT_FOUND_ROWS: u64 = 1 << 1;
pub const CLIENT_CONNECT_WITH_DB: u64 = 1 << 3;
pub const CLIENT_PROTOCOL_41: u64 = 1 << 9;
pub const CLIENT_SSL: u64 = 1 << 11;
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

/// Encodes executes of one prepared statement and decodes their binary result sets; a hit is
/// the first binary row, whose cells are read by the statement's column types.
pub struct MyCodec {
    template: [u8; EXECUTE_LEN],
    shape: Shape,
    /// The type byte of each result column, from the prepare's column definitions.
    types: Vec<u8>,
    /// The prepared statement of each write op (`Op::index`), where the mix has it.
    writes: [u32; Op::COUNT],
    /// `--txn N` above 1: the writes' transaction groups.
    groups: Option<Groups>,
    /// A multi-get's keys, sorted ([`KeyRows`]).
    sorted: Vec<u64>,
    /// `mget:N` in a mix: the multi-get's own prepared statement and its column types; None
    /// when the one statement is the multi-get (`--batch`) or there is none.
    multi: Option<(u32, Vec<u8>)>,
}

impl MyCodec {
    pub fn new(statement_id: u32, shape: Shape, types: &[u8]) -> MyCodec {
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
        MyCodec {
            template: t,
            shape,
            types: types.to_vec(),
            writes: [0; Op::COUNT],
            groups: None,
            sorted: Vec::new(),
            multi: None,
        }
    }

    /// Multi-gets go to their own prepared statement `id`, whose result columns have `types`
    /// (`mget:N` in a mix, next to one-key lookups).
    pub fn with_multi_get(mut self, id: u32, types: &[u8]) -> MyCodec {
        self.multi = Some((id, types.to_vec()));
        self
    }

    /// The codec, grouping writes `n` per transaction (`txn`).
    pub fn with_txn(mut self, n: usize) -> MyCodec {
        self.groups = Groups::new(n);
        self
    }

    /// The codec, with the statement id each write op of the mix was prepared as.
    pub fn with_writes(mut self, ids: &[(Op, u32)]) -> MyCodec {
        for &(op, id) in ids {
            self.writes[op.index()] = id;
        }
        self
    }

    /// The COM_STMT_EXECUTE of a write: its statement, then its parameters (`writes::bind`).
    fn encode_write(&self, req: &Request, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0, 0, 0, 0, COM_STMT_EXECUTE]); // length patched below
        out.extend_from_slice(&self.writes[req.op.index()].to_le_bytes());
        out.extend_from_slice(&[0, 1, 0, 0, 0]); // no cursor; iteration count 1
        super::writes::bind(req.op, req.key, req.version, out);
        let len = (out.len() - start - 4) as u32;
        out[start..start + 3].copy_from_slice(&len.to_le_bytes()[..3]);
    }

    fn parse<'b>(&'b self, buf: &'b [u8]) -> Result<Decoded<'b, MyCells<'b>>, LookupError> {
        let mut first_row: Option<(&[u8], u64)> = None;
        let Some((pos, ended)) = self.walk(buf, |row, columns| {
            first_row = first_row.or(Some((row, columns)));
        })?
        else {
            return Ok(None);
        };
        let reply = match (ended, first_row) {
            (Ended::Failed(kind, e), _) => Reply::Server(kind, e),
            // CLIENT_FOUND_ROWS: an update counts the rows it found, changed or not.
            (Ended::Done(affected), None) if affected > 0 => Reply::Written(affected),
            (Ended::Done(_), None) => Reply::Miss,
            (Ended::Done(_), Some((row, columns))) => {
                Reply::Row(RowView::Cells(MyCells::new(row, columns, &self.types)))
            }
        };
        Ok(Some((pos, reply)))
    }

    /// Reads the reply at the front of `buf`, giving each binary row (and the column count)
    /// to `on_row`; None while it is incomplete (`on_row` may have seen rows: start over).
    fn walk<'b>(
        &self,
        buf: &'b [u8],
        mut on_row: impl FnMut(&'b [u8], u64),
    ) -> Result<Option<(usize, Ended)>, LookupError> {
        let mut r = Packets {
            buf,
            pos: 0,
            seq: 1,
        };
        // Rows an OK without a result set says the statement changed (a write's reply).
        let mut affected = 0;
        // Stateless: a partial reply is parsed again from its start on the next call; a hit is
        // ~70 bytes with cached metadata, so that is cheaper than carrying state across reads.
        // One pass of this loop per result; more than one only after SERVER_MORE_RESULTS_EXISTS.
        loop {
            let Some(p) = r.next_packet()? else {
                return Ok(None);
            };
            let status = match p[0] {
                0xFF => {
                    return server_error(p).map(|(kind, e)| Some((r.pos, Ended::Failed(kind, e))))
                }
                // No result set: a write, or a --query that is not a SELECT (no row).
                0x00 => {
                    affected = lenenc(&p[1..]).map_or(0, |(n, _)| n);
                    ok_status(p)?
                }
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
                            0x00 => on_row(p, columns),
                            // Binary rows start with 0x00, so 0xFE can only be the end.
                            0xFE if self.shape.deprecate_eof => break ok_status(p)?,
                            0xFE => break eof_status(p)?,
                            0xFF => {
                                return server_error(p)
                                    .map(|(kind, e)| Some((r.pos, Ended::Failed(kind, e))))
                            }
                            _ => return Err(bad("a binary row", p)),
                        }
                    }
                }
            };
            if status & SERVER_MORE_RESULTS_EXISTS == 0 {
                return Ok(Some((r.pos, Ended::Done(affected))));
            }
        }
    }
}

/// How a reply ended: with the server's error, or done, with the rows a write changed.
enum Ended {
    Failed(ErrorKind, String),
    Done(u64),
}

impl Codec for MyCodec {
    type Cells<'b> = MyCells<'b>;

    #[inline]
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        if let Some(mut g) = self.groups.take() {
            g.encode(req.op.writes(), out, |out| self.encode_one(req, out));
            self.groups = Some(g);
            return;
        }
        self.encode_one(req, out);
    }

    fn commit(&mut self, out: &mut Vec<u8>) -> bool {
        self.groups.as_mut().is_some_and(|g| g.commit(out))
    }

    fn encode_batch(&mut self, keys: &[u64], out: &mut Vec<u8>) {
        let id = match &self.multi {
            Some((id, _)) => *id,
            None => u32::from_le_bytes(self.template[5..9].try_into().unwrap()),
        };
        encode_in(id, keys, out);
    }

    fn decode_batch(
        &mut self,
        buf: &[u8],
        keys: &[u64],
        verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        let mut sorted = std::mem::take(&mut self.sorted);
        let mut rows = KeyRows::new(keys, &mut sorted);
        let types = self.multi.as_ref().map_or(&self.types, |m| &m.1);
        let walked = self.walk(buf, |row, columns| {
            let cells = MyCells::new(row, columns, types);
            rows.add(cells.first_int(), |key| {
                let mut rest = cells.clone();
                rest.next(); // the key
                !verify || dataset::matches(key, RowView::Cells(rest))
            })
        });
        let tally = rows.end();
        self.sorted = sorted;
        let Some((n, ended)) = walked? else {
            if buf.len() >= MAX_FRAME {
                return Err(LookupError::protocol(format!(
                    "MySQL multi-get reply larger than {}",
                    max_frame_text()
                )));
            }
            return Ok(None);
        };
        Ok(Some((
            n,
            match ended {
                Ended::Failed(kind, e) => Err(LookupError::new(kind, false, e)),
                Ended::Done(_) => tally,
            },
        )))
    }

    fn decode_commit(
        &mut self,
        buf: &[u8],
    ) -> Result<Option<(usize, Option<LookupError>)>, LookupError> {
        Ok(control_reply(buf)?.map(|(n, failed)| {
            let failed = failed.map(|(kind, message)| LookupError::new(kind, false, message));
            (n, failed)
        }))
    }

    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        _key: u64,
    ) -> Result<Decoded<'b, MyCells<'b>>, LookupError> {
        let Some(g) = &self.groups else {
            return self.decode_one(buf);
        };
        // The request's reply with its commands' replies around it, all or nothing.
        let (flags, _) = g.front();
        let mut pos = 0;
        let mut failed = None;
        for _ in 0..txn::replies_before(flags) {
            let Some((n, e)) = control_reply(&buf[pos..])? else {
                return Ok(None);
            };
            pos += n;
            failed = failed.or(e);
        }
        let (n, own) = match self.decode_one(&buf[pos..])? {
            None => return Ok(None),
            Some((n, Reply::Server(kind, _))) => (n, Some(kind)),
            Some((n, _)) => (n, None),
        };
        let mut end = pos + n;
        if flags & txn::COMMIT != 0 {
            let Some((n, e)) = control_reply(&buf[end..])? else {
                return Ok(None);
            };
            end += n;
            failed = failed.or(e);
        }
        let kind = own.or(failed.as_ref().map(|(k, _)| *k));
        if let Some(g) = self.groups.as_mut() {
            g.answered(kind);
        }
        // Parsed again to be borrowed from here on; it was complete above.
        let reply = match (self.decode_one(&buf[pos..])?, failed) {
            (Some((_, r @ Reply::Server(..))), _) => r,
            (_, Some((kind, message))) => Reply::Server(kind, message),
            (Some((_, r)), None) => r,
            (None, None) => return Err(LookupError::protocol("MySQL reply lost in a transaction")),
        };
        Ok(Some((end, reply)))
    }
}

impl MyCodec {
    /// One request, without the commands of a transaction group.
    #[inline]
    fn encode_one(&self, req: &Request, out: &mut Vec<u8>) {
        if req.op.writes() {
            return self.encode_write(req, out);
        }
        out.extend_from_slice(&self.template);
        let end = out.len();
        out[end - 8..].copy_from_slice(&req.key.to_le_bytes());
    }

    /// One request's reply, without the replies of a transaction group's commands.
    fn decode_one<'b>(&'b self, buf: &'b [u8]) -> Result<Decoded<'b, MyCells<'b>>, LookupError> {
        match self.parse(buf) {
            Ok(None) => incomplete_up_to(buf),
            other => other,
        }
    }
}

/// Not complete yet: each packet is bounded, and a reply of many packets is bounded here.
fn incomplete_up_to<T>(buf: &[u8]) -> Result<Option<T>, LookupError> {
    match buf.len() >= MAX_FRAME {
        true => Err(LookupError::protocol(format!(
            "MySQL reply larger than {} (a --query or --batch that returns too many rows?)",
            max_frame_text()
        ))),
        false => Ok(None),
    }
}

/// `--batch`: the COM_STMT_EXECUTE of `statement` (`multi_get::sql`) with `keys` as its
/// parameters, each an unsigned LONGLONG, as the one-key lookup sends its key.
fn encode_in(statement: u32, keys: &[u64], out: &mut Vec<u8>) {
    let n = keys.len();
    let nulls = n.div_ceil(8);
    let payload = 1 + 4 + 1 + 4 + nulls + 1 + 2 * n + 8 * n;
    out.extend_from_slice(&(payload as u32).to_le_bytes()[..3]);
    out.push(0); // sequence id
    out.push(COM_STMT_EXECUTE);
    out.extend_from_slice(&statement.to_le_bytes());
    out.extend_from_slice(&[0, 1, 0, 0, 0]); // no cursor; iteration count 1
    out.resize(out.len() + nulls, 0); // no parameter is NULL
    out.push(1); // types bound with this execute
    for _ in keys {
        out.extend_from_slice(&[MYSQL_TYPE_LONGLONG, UNSIGNED]);
    }
    for &k in keys {
        out.extend_from_slice(&k.to_le_bytes());
    }
}

/// A server error's kind and message.
type Failed = (ErrorKind, String);

/// The reply to a COM_QUERY of a transaction group (BEGIN, COMMIT, ROLLBACK): its length, and
/// None for an OK or the error.
fn control_reply(buf: &[u8]) -> Result<Option<(usize, Option<Failed>)>, LookupError> {
    let mut r = Packets {
        buf,
        pos: 0,
        seq: 1,
    };
    let Some(p) = r.next_packet()? else {
        return Ok(None);
    };
    match p[0] {
        0x00 => Ok(Some((r.pos, None))),
        0xFF => server_error(p).map(|e| Some((r.pos, Some(e)))),
        _ => Err(bad("an OK packet (BEGIN, COMMIT or ROLLBACK)", p)),
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
                "MySQL packet of {len} bytes, more than the {} loadgen accepts",
                max_frame_text()
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

/// An ERR reply to a request: the kind and message of a non-fatal server error, or a fatal
/// error when the server is ending the session.
fn server_error(p: &[u8]) -> Result<Failed, LookupError> {
    let e = ServerError::parse(p).ok_or_else(|| bad("an error packet", p))?;
    if e.ends_session() {
        return Err(LookupError::io(format!(
            "the server ended the session: {e}"
        )));
    }
    Ok((super::error::kind(e.code), e.to_string()))
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

#[cfg(test)]
mod tests;
