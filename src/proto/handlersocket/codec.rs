//! HandlerSocket (the MySQL / MariaDB plugin) text protocol: request encoders, a response
//! line parser and the `find`-by-primary-key [`Codec`].
//!
//! Wire format (docs-en/protocol.en.txt of DeNA/HandlerSocket-Plugin-for-MySQL, checked against
//! the plugin's `hstcpsvr_worker.cpp` and `database.cpp`):
//!
//! * One request is one line, one response is one line, ending with `\n`. The plugin itself
//!   accepts an optional `\r` before the `\n` of a request line; we accept one before the `\n`
//!   of a response line too (the plugin never sends it).
//! * Tokens are separated by `\t`. A token is NULL (exactly one `0x00` byte) or an encoded string:
//!   bytes `0x10..=0xff` are sent as they are, a byte `0x00..=0x0f` is sent as `0x01` followed by
//!   the byte plus `0x40`. An empty string is an empty token (`\t\t`, or `\t\n` at line end).
//! * Requests used here:
//!   - auth: `A\t1\t<secret>\n` (the plugin unescapes the secret, so it is escaped here);
//!   - open_index: `P\t<id>\t<db>\t<table>\t<index>\t<col1,col2,...>\n` (db, table, index and
//!     column names are *not* unescaped by the plugin, so they are checked, not escaped; an empty
//!     index name means `PRIMARY`, an index name starting with a digit is an index number);
//!   - find: `<id>\t=\t1\t<key>\n`. Limit and offset are omitted: the plugin then uses limit 1
//!     (it even treats an explicit limit 0 as 1) and offset 0.
//! * Response: `<errorcode>\t<numcolumns>[\t<r1>...\t<rn>]\n`. Code `0` is success and the value
//!   count is a multiple of `numcolumns` (`N * numcolumns` for N rows found, so a miss is the
//!   bare `0\t<numcolumns>`). Successful `A` and `P` replies are `0\t1` (one column, no values).
//!   On error `numcolumns` is 1 and the one token is a human-readable message, sent raw (not
//!   escaped), sometimes absent.
//!
//! Error codes the plugin really emits (there are only three):
//!
//! * `1` — the storage engine / table layer failed: `open_table` (the table could not be
//!   opened: unknown database or table), `lock_tables` (the table could not be locked), or a
//!   decimal handler error number (`1\t1\t121`: a `HA_ERR_*` value of `my_base.h`, see `perror N`;
//!   also sent when a row read fails half-way through a `find`, whose rows are then dropped).
//! * `2` — the request is wrong: `cmd` (unknown command), `stmtnum` (index id not opened on this
//!   connection), `idxnum` (no such index; also sent by `P`), `fld` (unknown column in `P`),
//!   `op` (unknown operator), `klen` (no key values), `kpnum` (more key values than index
//!   columns), `tblnum`, `readonly` (a write on the read-only port), `modop`, `filtertype`,
//!   `filterfld`, `filterblob`, `syntax`, `notimpl`.
//! * `3` — authentication: `unauth` (wrong secret for `A`, or any `P`/find on a listener that
//!   requires auth before `A` succeeded), `authtype` (the auth type is not `1`).
//!
//! (The plugin also shuts the whole listener down when an unprocessed request buffer starts
//! with `Q`, and closes the connection when it starts with `/`; nothing encoded here starts
//! with either.)

use std::fmt;

use crate::dataset;
use crate::decimal;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{
    Codec, Decoded, DecodedBatch, NoCells, Reply, Request, RowView, MAX_FRAME,
};

/// The byte that introduces an escaped `0x00..=0x0f` byte.
pub const ESCAPE_PREFIX: u8 = 0x01;
/// Added to an escaped byte after [`ESCAPE_PREFIX`].
pub const ESCAPE_SHIFT: u8 = 0x40;
/// A NULL value: a token consisting of a single `0x00` byte.
pub const NULL_TOKEN: &[u8] = &[0x00];

/// Appends `src` encoded as one HandlerSocket token (bytes `0x00..=0x0f` become `0x01, b + 0x40`).
/// The result never contains `\t`, `\n` or a lone `0x00`, so it cannot be mistaken for NULL.
pub fn escape_into(src: &[u8], out: &mut Vec<u8>) {
    let mut run = 0;
    for (i, &b) in src.iter().enumerate() {
        if b < 0x10 {
            out.extend_from_slice(&src[run..i]);
            out.push(ESCAPE_PREFIX);
            out.push(b + ESCAPE_SHIFT);
            run = i + 1;
        }
    }
    out.extend_from_slice(&src[run..]);
}

/// True for the NULL token (a single `0x00` byte).
pub fn is_null(token: &[u8]) -> bool {
    token == NULL_TOKEN
}

/// Position of the first malformed byte of an encoded token: `0x01` followed by a byte outside
/// `0x40..=0x4f` or by nothing, or any other raw byte `0x00..=0x0f`, which the plugin never
/// sends inside a token. The NULL token is well formed.
fn check_token(token: &[u8]) -> Result<(), usize> {
    if is_null(token) {
        return Ok(());
    }
    let mut i = 0;
    while let Some(&b) = token.get(i) {
        if b >= 0x10 {
            i += 1;
        } else if b == ESCAPE_PREFIX
            && matches!(token.get(i + 1), Some(e) if (0x40..=0x4f).contains(e))
        {
            i += 2;
        } else {
            return Err(i);
        }
    }
    Ok(())
}

/// A name that cannot be sent in an `open_index` request (the plugin does not unescape names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidName {
    /// Which argument: `db`, `table`, `index` or `column`.
    pub what: &'static str,
    pub reason: &'static str,
}

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "handlersocket open_index: invalid {} name: {}",
            self.what, self.reason
        )
    }
}

impl std::error::Error for InvalidName {}

fn check_name(what: &'static str, name: &str, may_be_empty: bool) -> Result<(), InvalidName> {
    if name.is_empty() && !may_be_empty {
        return Err(InvalidName {
            what,
            reason: "empty",
        });
    }
    if name.bytes().any(|b| b < 0x10) {
        return Err(InvalidName {
            what,
            reason: "contains a tab, newline or other byte below 0x10",
        });
    }
    Ok(())
}

/// Appends `A\t1\t<secret>\n` (auth type 1, the only one the plugin knows). The plugin unescapes
/// the secret, so it is escaped here. Reply: `0\t1`, or `3\t1\tunauth` for a wrong secret.
pub fn encode_auth(secret: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"A\t1\t");
    escape_into(secret, out);
    out.push(b'\n');
}

/// Appends `P\t<id>\t<db>\t<table>\t<index>\t<col1,col2,...>\n`. Use `PRIMARY` (or `""`) as
/// `index` for the primary key. Names are sent raw (the plugin does not unescape them), so a name
/// with a byte below `0x10` is refused, as is an empty db/table/column name, a column name with a
/// `,`, and an empty column list (a find could not tell a hit from a miss). On error `out` is
/// unchanged. Reply: `0\t1`, or e.g. `1\t1\topen_table`, `2\t1\tidxnum`, `2\t1\tfld`.
pub fn encode_open_index(
    id: u32,
    db: &str,
    table: &str,
    index: &str,
    columns: &[&str],
    out: &mut Vec<u8>,
) -> Result<(), InvalidName> {
    check_name("db", db, false)?;
    check_name("table", table, false)?;
    check_name("index", index, true)?;
    if columns.is_empty() {
        return Err(InvalidName {
            what: "column",
            reason: "no columns given",
        });
    }
    for c in columns {
        check_name("column", c, false)?;
        if c.contains(',') {
            return Err(InvalidName {
                what: "column",
                reason: "contains a comma",
            });
        }
    }
    out.extend_from_slice(b"P\t");
    decimal::push(out, u64::from(id));
    for part in [db, table, index] {
        out.push(b'\t');
        out.extend_from_slice(part.as_bytes());
    }
    out.push(b'\t');
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(c.as_bytes());
    }
    out.push(b'\n');
    Ok(())
}

/// Appends `<id>\t=\t1\t<key>\n`: find the row whose (single-column) index value is `key`.
/// Limit and offset are omitted, so at most one row comes back.
pub fn encode_find(id: u32, key: u64, out: &mut Vec<u8>) {
    decimal::push(out, u64::from(id));
    out.extend_from_slice(b"\t=\t1\t");
    decimal::push(out, key);
    out.push(b'\n');
}

/// One response line, borrowed from the read buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response<'a> {
    /// First token: 0 is success.
    pub code: u32,
    /// Second token: columns per row (always 1 on error).
    pub num_cols: u32,
    /// Everything after `<code>\t<numcols>\t`, without the line end; `None` when the line has no
    /// third token at all (a miss, or an `A`/`P` success, or an error without message).
    rest: Option<&'a [u8]>,
    /// Number of value tokens after the two header tokens (on error: 1 with a message, else 0).
    value_count: usize,
}

impl<'a> Response<'a> {
    pub fn is_ok(&self) -> bool {
        self.code == 0
    }

    /// Rows in a success response (`value_count / num_cols`); 0 on error.
    pub fn row_count(&self) -> usize {
        if self.code != 0 || self.num_cols == 0 {
            0
        } else {
            self.value_count / self.num_cols as usize
        }
    }

    /// The first row of a success response: its `num_cols` tokens as they came, with the tabs
    /// between them; `None` when no row was found.
    pub fn first_row(&self) -> Option<&'a [u8]> {
        let rest = self.rest.filter(|_| self.row_count() > 0)?;
        if self.value_count == self.num_cols as usize {
            return Some(rest);
        }
        let end = rest
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\t')
            .nth(self.num_cols as usize - 1)
            .map_or(rest.len(), |(i, _)| i);
        rest.get(..end)
    }

    /// The rows of a success response, each its `num_cols` tokens with the tabs between.
    pub fn rows(&self) -> impl Iterator<Item = &'a [u8]> {
        let cols = self.num_cols as usize;
        let mut rest = self.rest.filter(|_| self.row_count() > 0);
        std::iter::from_fn(move || {
            let r = rest?;
            let end = r
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'\t')
                .nth(cols - 1)
                .map(|(i, _)| i);
            match end {
                Some(i) => {
                    rest = r.get(i + 1..);
                    r.get(..i)
                }
                None => {
                    rest = None;
                    Some(r)
                }
            }
        })
    }

    /// The error message of an error response (raw bytes after `<code>\t1\t`, the plugin does not
    /// escape them); `None` for success or when the plugin sent no message.
    pub fn message(&self) -> Option<&'a [u8]> {
        if self.code == 0 {
            None
        } else {
            self.rest
        }
    }
}

/// Iterator over the raw `\t`-separated tokens after a response's header.
#[derive(Clone, Debug)]
pub struct Tokens<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let r = self.rest?;
        match r.iter().position(|&b| b == b'\t') {
            Some(p) => {
                self.rest = r.get(p + 1..);
                r.get(..p)
            }
            None => {
                self.rest = None;
                Some(r)
            }
        }
    }
}

fn malformed(what: &str) -> LookupError {
    LookupError::protocol(format!("handlersocket: malformed response line: {what}"))
}

/// Splits at the first `\t`: (token, rest after the tab or `None` if there is no tab).
fn split_tab(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&b| b == b'\t') {
        Some(p) => (s.get(..p).unwrap_or_default(), s.get(p + 1..)),
        None => (s, None),
    }
}

/// Parses the first response line of `buf` (which may hold several pipelined lines, or part of
/// one). `Ok(None)`: no complete line yet. `Ok(Some((n, resp)))`: the line took `n` bytes,
/// line end included. A line longer than [`MAX_FRAME`] or malformed is a fatal `Protocol` error.
/// A success line is validated fully (numeric header, token escapes, value count a multiple of
/// the column count); an error line only needs the numeric header. No allocation on success.
pub fn parse_response(buf: &[u8]) -> Result<Option<(usize, Response<'_>)>, LookupError> {
    match buf.first() {
        None => return Ok(None),
        Some(b) if !b.is_ascii_digit() => {
            return Err(malformed("does not start with a decimal error code"));
        }
        Some(_) => {}
    }
    let window = buf.get(..MAX_FRAME).unwrap_or(buf);
    let Some(nl) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_FRAME {
            Err(LookupError::protocol(
                "handlersocket: no line end within MAX_FRAME bytes",
            ))
        } else {
            Ok(None)
        };
    };
    let resp = parse_line(buf.get(..nl).unwrap_or_default())?;
    Ok(Some((nl + 1, resp)))
}

/// Parses one response line given without its `\n` (an optional trailing `\r` is dropped), e.g.
/// the line `proto::pipelined::StreamConn::round_trip_line` returns for an `A` or `P` request:
/// `check_ok(&parse_line(&line)?)`. Same validation as [`parse_response`].
pub fn parse_line(line: &[u8]) -> Result<Response<'_>, LookupError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if !line.first().is_some_and(u8::is_ascii_digit) {
        return Err(malformed("does not start with a decimal error code"));
    }
    let (code_tok, after_code) = split_tab(line);
    let code = decimal::parse::<u32>(code_tok).ok_or_else(|| malformed("bad error code"))?;
    let after_code = after_code.ok_or_else(|| malformed("no column count"))?;
    let (cols_tok, rest) = split_tab(after_code);
    let num_cols = decimal::parse::<u32>(cols_tok).ok_or_else(|| malformed("bad column count"))?;
    let mut value_count = 0usize;
    let tokens = Tokens { rest };
    if code == 0 {
        for tok in tokens {
            if check_token(tok).is_err() {
                return Err(malformed("bad escape or raw control byte in a value"));
            }
            value_count += 1;
        }
        let multiple = if num_cols == 0 {
            value_count == 0
        } else {
            value_count % num_cols as usize == 0
        };
        if !multiple {
            return Err(malformed(
                "value count is not a multiple of the column count",
            ));
        }
    } else {
        value_count = tokens.count();
    }
    Ok(Response {
        code,
        num_cols,
        rest,
        value_count,
    })
}

/// What an error code means, per the codes the plugin emits (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HsErrorClass {
    /// Code 1: opening/locking the table or the storage engine failed.
    Engine,
    /// Code 2: the request itself is wrong (unknown index id, index, column, operator...).
    Request,
    /// Code 3: authentication failed or is required.
    Auth,
    /// Any other code (the plugin sends none).
    Unknown,
}

/// A HandlerSocket error reply: code and message (`unknown_error` when the plugin sent none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HsError {
    pub code: u32,
    pub message: String,
}

impl HsError {
    /// The error of a non-success response (message lossily decoded as UTF-8).
    pub fn from_response(resp: &Response<'_>) -> HsError {
        let message = match resp.message() {
            Some(m) if !m.is_empty() => String::from_utf8_lossy(m).into_owned(),
            _ => "unknown_error".to_owned(),
        };
        HsError {
            code: resp.code,
            message,
        }
    }

    pub fn class(&self) -> HsErrorClass {
        match self.code {
            1 => HsErrorClass::Engine,
            2 => HsErrorClass::Request,
            3 => HsErrorClass::Auth,
            _ => HsErrorClass::Unknown,
        }
    }

    pub fn is_auth(&self) -> bool {
        self.class() == HsErrorClass::Auth
    }

    /// A sentence for humans, e.g. for a failed `A` or `P` at connect time.
    pub fn describe(&self) -> String {
        let m = self.message.as_str();
        let what = match (self.code, m) {
            (1, "open_table") => "could not open the table: check the database and table names",
            (1, "lock_tables") => "could not lock the table",
            (1, _) if !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()) => {
                return format!(
                    "HandlerSocket: the storage engine failed with handler error {m} \
                     (see `perror {m}`) (code 1)"
                );
            }
            (1, _) => "the storage engine failed",
            (2, "cmd") => "unknown command",
            (2, "stmtnum") => {
                "the index id was not opened on this connection (send open_index first)"
            }
            (2, "idxnum") => "no such index on the table: use PRIMARY or an existing index name",
            (2, "fld") => "a column in the open_index column list does not exist",
            (2, "op") => "unknown comparison operator",
            (2, "klen") => "the request has no key values",
            (2, "kpnum") => "more key values than the index has columns",
            (2, "tblnum") => "the table of this index id is no longer open",
            (2, "readonly") => "a write request was sent to the read-only port",
            (2, _) => "the server rejected the request",
            (3, "unauth") => {
                "authentication failed or is required: check the secret \
                 (handlersocket_plain_secret)"
            }
            (3, "authtype") => "unsupported authentication type (only 1 is known)",
            (3, _) => "authentication error",
            _ => "unknown error code",
        };
        format!("HandlerSocket: {what} ({} {m})", self.code)
    }
}

impl fmt::Display for HsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handlersocket error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for HsError {}

/// Per-request mapping: auth errors are fatal (every further request on the connection fails
/// with `unauth`), all other codes are non-fatal `Server` errors (the stream is still in step).
impl From<HsError> for LookupError {
    fn from(e: HsError) -> LookupError {
        let fatal = e.is_auth();
        LookupError::new(ErrorKind::Server, fatal, e.to_string())
    }
}

/// `Ok(())` for a success response, else the error code and message. Used at connect time for
/// the replies to `A` and `P`.
pub fn check_ok(resp: &Response<'_>) -> Result<(), HsError> {
    if resp.is_ok() {
        Ok(())
    } else {
        Err(HsError::from_response(resp))
    }
}

/// `find` by a one-column index (normally PRIMARY on `user_id`) opened as `index_id` on the
/// connection. A hit is the first row's tokens as they came, tab-separated
/// ([`RowView::Tsv`]): with the default column list `user_name,user_email,created` that is the
/// data set's row (the target refuses `--verify` with any other list).
#[derive(Clone, Debug)]
pub struct HsCodec {
    index_id: u32,
    /// The connection writes: `index_id + 1` is open with `user_id` before the row's columns
    /// (for `+`), and a one-column reply is a write's (reads have the row's three).
    writes: bool,
}

impl HsCodec {
    pub fn new(index_id: u32) -> HsCodec {
        HsCodec {
            index_id,
            writes: false,
        }
    }

    /// A codec for the write port (see `writes`).
    pub fn writing(index_id: u32) -> HsCodec {
        HsCodec {
            index_id,
            writes: true,
        }
    }
}

impl Codec for HsCodec {
    type Cells<'b> = NoCells<'b>;

    /// A read is a find; an update a find-modify `U` of the row of (key, version), a delete a
    /// find-modify `D`, an insert `+` of (key, row). Upserts are refused in preflight.
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        match req.op {
            Op::Read | Op::Mget => encode_find(self.index_id, req.key, out),
            Op::Update | Op::Delete | Op::Upsert => {
                encode_find(self.index_id, req.key, out);
                out.pop();
                out.extend_from_slice(b"\t1\t0\t");
                if req.op == Op::Delete {
                    out.extend_from_slice(b"D\n");
                } else {
                    out.extend_from_slice(b"U\t");
                    out.extend_from_slice(dataset::TsvRow::new(req.key, req.version).as_bytes());
                    out.push(b'\n');
                }
            }
            Op::Insert => {
                decimal::push(out, u64::from(self.index_id) + 1);
                out.extend_from_slice(b"\t+\t4\t");
                decimal::push(out, req.key);
                out.push(b'\t');
                out.extend_from_slice(dataset::TsvRow::new(req.key, req.version).as_bytes());
                out.push(b'\n');
            }
        }
    }

    fn encode_batch(&mut self, keys: &[u64], out: &mut Vec<u8>) {
        multi_get::encode(self.index_id, keys, out);
    }

    fn decode_batch(
        &mut self,
        buf: &[u8],
        keys: &[u64],
        verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        let Some((n, resp)) = parse_response(buf)? else {
            return Ok(None);
        };
        if resp.code != 0 {
            let e = HsError::from_response(&resp);
            if e.is_auth() {
                return Err(e.into());
            }
            let e = LookupError::new(ErrorKind::Server, false, e.to_string());
            return Ok(Some((n, Err(e))));
        }
        let found = resp.row_count();
        if found > keys.len() {
            return Err(LookupError::protocol(format!(
                "handlersocket: {found} rows for a multi-get of {} keys",
                keys.len()
            )));
        }
        Ok(Some((
            n,
            multi_get::tally(resp.rows(), found, keys, verify),
        )))
    }

    /// Error replies are `Server` replies, except auth errors (code 3), which are returned as a
    /// fatal `Err`: every further request on the connection would fail.
    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        _key: u64,
    ) -> Result<Decoded<'b, NoCells<'b>>, LookupError> {
        let Some((n, resp)) = parse_response(buf)? else {
            return Ok(None);
        };
        if self.writes {
            // A find-modify answers `0\t1\t<rows changed>`, an insert `0\t1`; an insert over a
            // row already there fails with handler error 121 (HA_ERR_FOUND_DUPP_KEY, and only
            // that): a `duplicate`, as MariaDB's own 1062 is over SQL.
            match (resp.code, resp.num_cols, resp.first_row()) {
                (0, 1, None) => return Ok(Some((n, Reply::Written(1)))),
                (0, 1, Some(rows)) => {
                    return match decimal::parse::<u64>(rows) {
                        Some(r) => Ok(Some((n, Reply::Written(r)))),
                        None => Err(LookupError::protocol(format!(
                            "handlersocket: a write's reply has `{}` for its rows",
                            String::from_utf8_lossy(rows.get(..40).unwrap_or(rows))
                        ))),
                    }
                }
                (1, _, _) if resp.message() == Some(b"121") => {
                    let e = HsError::from_response(&resp).to_string();
                    return Ok(Some((n, Reply::Server(ErrorKind::Duplicate, e))));
                }
                _ => {}
            }
        }
        if resp.code != 0 {
            let e = HsError::from_response(&resp);
            return if e.is_auth() {
                Err(e.into())
            } else {
                Ok(Some((n, Reply::Server(ErrorKind::Server, e.to_string()))))
            };
        }
        Ok(Some((
            n,
            resp.first_row()
                .map_or(Reply::Miss, |row| Reply::Row(RowView::Tsv(row))),
        )))
    }
}

mod multi_get;
#[cfg(test)]
mod tests;
