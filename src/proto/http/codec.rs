//! A minimal HTTP/1.1 client codec for a key-value endpoint such as
//! `http://127.0.0.1:8080/usr/{key}`: `GET` requests pipelined on a keep-alive connection.
//!
//! Request: `GET <prefix><key><suffix> HTTP/1.1\r\nHost: <host>\r\n\r\n` (keep-alive is the
//! HTTP/1.1 default). Response: status line, header fields, empty line, body.
//!
//! * The body length comes from `Content-Length` (header names are case-insensitive) or from
//!   `Transfer-Encoding: chunked`; a response with neither (a body delimited by closing the
//!   connection) cannot be pipelined and is a fatal `Protocol` error, except for 1xx, 204 and
//!   304, which never have a body. With both, chunked wins and the connection must be closed
//!   (RFC 9112 §6.3). Any transfer coding other than exactly `chunked` is refused.
//! * Interim 1xx responses (other than 101) are skipped: their bytes count toward the reply.
//! * `200` → a row: the body, without one trailing `\n` if it has one (de-chunked into the
//!   codec's buffer when chunked); `404` → a miss; any other status → a `Server` reply naming
//!   the status.
//! * `Connection: close` (or an HTTP/1.0 response without `Connection: keep-alive`) does not
//!   make the reply an error, but the server will close the connection after it:
//!   `Codec::must_close` says so after each completed reply.
//! * The status line and header fields are parsed by `httparse` into a stack array (at most
//!   100 fields); loadgen reads the framing headers from it and walks chunked bodies itself.
//! * The header section is limited to 64 KiB, the whole reply to [`MAX_FRAME`]. Lines end with
//!   `\r\n`; a bare `\n` is accepted as well (RFC 9112 §2.2). Obsolete line folding, malformed
//!   header lines and malformed chunk framing are fatal `Protocol` errors.

use std::mem::MaybeUninit;

use crate::dataset;
use crate::decimal;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::{
    Codec, Decoded, DecodedBatch, NoCells, Reply, Request, RowView, MAX_FRAME,
};

/// Largest header section (status line and header fields, up to the empty line) accepted.
pub const MAX_HEADER: usize = 64 * 1024;
/// Longest chunk-size line (with chunk extensions) or trailer line accepted.
const MAX_CHUNK_LINE: usize = 4096;

/// Appends `s`, percent-encoding the bytes that cannot appear in a request-target or `Host`
/// value as they are (space, control bytes, DEL, non-ASCII). `%` itself is kept, so parts that
/// are already percent-encoded stay as they are.
fn push_encoded(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        if b <= b' ' || b >= 0x7f {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]]);
        } else {
            out.push(b);
        }
    }
}

fn protocol(what: &str) -> LookupError {
    LookupError::protocol(format!("http: {what}"))
}

/// `Ok(None)` for an incomplete reply, unless `MAX_FRAME` bytes are buffered already.
fn incomplete<T>(buf: &[u8]) -> Result<Option<T>, LookupError> {
    if buf.len() >= MAX_FRAME {
        Err(protocol("reply larger than MAX_FRAME"))
    } else {
        Ok(None)
    }
}

/// The line starting at `from` (without `\r\n` or `\n`) and the offset after it, if it ends
/// before `limit` (an absolute offset).
fn line_at(buf: &[u8], from: usize, limit: usize) -> Option<(&[u8], usize)> {
    let window = buf.get(from..limit.min(buf.len()))?;
    let p = window.iter().position(|&b| b == b'\n')?;
    let line = window.get(..p)?;
    Some((line.strip_suffix(b"\r").unwrap_or(line), from + p + 1))
}

/// Field values and reason phrases: visible ASCII, SP, HT and obs-text (0x80..).
fn is_field_text(s: &[u8]) -> bool {
    s.iter().all(|&b| b == b'\t' || (b >= b' ' && b != 0x7f))
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// True when the comma-separated list `value` holds `token` (case-insensitive).
fn list_has(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim_ows(t).eq_ignore_ascii_case(token))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    Empty,
    Length(usize),
    Chunked,
}

/// A parsed status line and header section.
#[derive(Clone, Copy, Debug)]
struct Head<'a> {
    status: u16,
    reason: &'a [u8],
    /// Bytes of the status line and header section, empty line included.
    len: usize,
    body: Body,
    close: bool,
}

/// Header fields accepted in one response head; more is a `Protocol` error (hyper's limit too).
const MAX_HEADERS: usize = 100;

/// Parses the head of the response at the front of `buf`. `Ok(None)`: incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Head<'_>>, LookupError> {
    // httparse skips empty lines before a status line; a reply must start with it.
    let n = buf.len().min(7);
    if buf.get(..n) != b"HTTP/1.".get(..n) {
        return Err(protocol("reply does not start with HTTP/1."));
    }
    // Left uninitialised: httparse writes only the fields it parses, and the array would
    // otherwise be zeroed on every decode call.
    let mut fields = [MaybeUninit::<httparse::Header<'_>>::uninit(); MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut res,
        buf,
        &mut fields,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEADER => len,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEADER => return Ok(None),
        Ok(_) => return Err(protocol("header section larger than 64 KiB")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(protocol("more than 100 header fields"))
        }
        Err(httparse::Error::Version | httparse::Error::Status) => {
            return Err(protocol("malformed status line"))
        }
        Err(httparse::Error::HeaderName) => return Err(protocol("malformed header name")),
        Err(httparse::Error::HeaderValue) => {
            return Err(protocol("control byte in a header value"))
        }
        Err(_) => return Err(protocol("malformed header section")),
    };
    let (Some(minor), Some(status)) = (res.version, res.code) else {
        return Err(protocol("malformed status line"));
    };
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut close = minor == 0;
    for field in res.headers.iter() {
        let (name, value) = (field.name.as_bytes(), trim_ows(field.value));
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = decimal::parse::<usize>(value)
                .ok_or_else(|| protocol("malformed Content-Length"))?;
            if content_length.is_some_and(|c| c != n) {
                return Err(protocol("conflicting Content-Length headers"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if chunked || !value.eq_ignore_ascii_case(b"chunked") {
                return Err(protocol(
                    "unsupported Transfer-Encoding (only a single `chunked`)",
                ));
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            if list_has(value, b"close") {
                close = true;
            } else if minor == 0 && list_has(value, b"keep-alive") {
                close = false;
            }
        }
    }
    let body = if status < 200 || status == 204 || status == 304 {
        Body::Empty
    } else if chunked {
        if content_length.is_some() {
            close = true;
        }
        Body::Chunked
    } else if let Some(n) = content_length {
        Body::Length(n)
    } else {
        return Err(protocol(
            "response has neither Content-Length nor chunked encoding",
        ));
    };
    Ok(Some(Head {
        status,
        reason: res.reason.unwrap_or_default().as_bytes(),
        len,
        body,
        close,
    }))
}

/// Walks the chunked body starting at `pos`, appending the data to `sink` if given. Returns the
/// offset after the last-chunk and trailer section, or `Ok(None)` if incomplete.
fn walk_chunks(
    buf: &[u8],
    mut pos: usize,
    mut sink: Option<&mut Vec<u8>>,
) -> Result<Option<usize>, LookupError> {
    let line_limit = |from: usize| from.saturating_add(MAX_CHUNK_LINE).min(MAX_FRAME);
    let line_missing = |from: usize| -> Result<Option<usize>, LookupError> {
        if buf.len() >= line_limit(from) {
            Err(protocol("chunk-size or trailer line too long"))
        } else {
            incomplete(buf)
        }
    };
    loop {
        let Some((line, next)) = line_at(buf, pos, line_limit(pos)) else {
            return line_missing(pos);
        };
        let hex_len = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        let (hex, ext) = line.split_at(hex_len);
        let ext = trim_ows(ext);
        if hex.is_empty() || !(ext.is_empty() || ext.first() == Some(&b';')) || !is_field_text(ext)
        {
            return Err(protocol("malformed chunk-size line"));
        }
        let mut size: usize = 0;
        for &h in hex {
            let d = match h {
                b'0'..=b'9' => h - b'0',
                b'a'..=b'f' => h - b'a' + 10,
                _ => h.wrapping_sub(b'A').wrapping_add(10),
            };
            size = size
                .checked_mul(16)
                .and_then(|s| s.checked_add(usize::from(d)))
                .filter(|&s| s <= MAX_FRAME)
                .ok_or_else(|| protocol("chunk larger than MAX_FRAME"))?;
        }
        pos = next;
        if size == 0 {
            // Trailer section: header-like lines up to an empty line.
            loop {
                let Some((line, next)) = line_at(buf, pos, line_limit(pos)) else {
                    return line_missing(pos);
                };
                pos = next;
                if line.is_empty() {
                    return Ok(Some(pos));
                }
                if !line.contains(&b':')
                    || !is_field_text(line)
                    || matches!(line.first(), Some(b' ' | b'\t'))
                {
                    return Err(protocol("malformed trailer line"));
                }
            }
        }
        let end = pos + size;
        if end + 2 > MAX_FRAME {
            return Err(protocol("chunked body larger than MAX_FRAME"));
        }
        let Some(data) = buf.get(pos..end) else {
            return incomplete(buf);
        };
        pos = match buf.get(end..).unwrap_or_default() {
            [b'\r', b'\n', ..] => end + 2,
            [b'\n', ..] => end + 1,
            [] | [b'\r'] => return incomplete(buf),
            _ => return Err(protocol("chunk data not followed by CRLF")),
        };
        if let Some(s) = sink.as_deref_mut() {
            s.extend_from_slice(data);
        }
    }
}

/// `GET <prefix><key><suffix>` lookups on one keep-alive connection.
#[derive(Clone, Debug)]
pub struct HttpCodec {
    host: Vec<u8>,
    prefix: Vec<u8>,
    suffix: Vec<u8>,
    must_close: bool,
    /// The de-chunked body of the last chunked 200 reply.
    scratch: Vec<u8>,
    /// `--batch`: the request target before the keys, `/usr?ids=` for the prefix `/usr/`.
    bulk: Vec<u8>,
}

impl HttpCodec {
    /// `host`: the `Host` header value (`127.0.0.1:8080`); `path_prefix` / `path_suffix`: the
    /// request target before and after the key (`/usr/`, `""`). A prefix not starting with `/`
    /// gets one. Spaces, control bytes and non-ASCII bytes are percent-encoded so the request
    /// line stays well formed; everything else (including `%`, `?`, `&`) is sent as given.
    pub fn new(host: &str, path_prefix: &str, path_suffix: &str) -> HttpCodec {
        let mut prefix = Vec::with_capacity(path_prefix.len() + 1);
        if !path_prefix.starts_with('/') {
            prefix.push(b'/');
        }
        push_encoded(&mut prefix, path_prefix);
        let mut suffix = Vec::with_capacity(path_suffix.len());
        push_encoded(&mut suffix, path_suffix);
        let mut host_bytes = Vec::with_capacity(host.len());
        push_encoded(&mut host_bytes, host);
        let mut bulk = prefix.strip_suffix(b"/").unwrap_or(&prefix).to_vec();
        bulk.extend_from_slice(b"?ids=");
        HttpCodec {
            host: host_bytes,
            prefix,
            suffix,
            must_close: false,
            scratch: Vec::new(),
            bulk,
        }
    }
}

impl Codec for HttpCodec {
    type Cells<'b> = NoCells<'b>;

    /// A read is a GET; a write of the row of (key, version) a PUT, conditional as HTTP says
    /// (`If-Match: *` updates only a present row, `If-None-Match: *` inserts only a new one,
    /// none upserts); a delete a DELETE.
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>) {
        let method: &[u8] = match req.op {
            Op::Read | Op::Mget => b"GET ",
            Op::Delete => b"DELETE ",
            Op::Update | Op::Insert | Op::Upsert => b"PUT ",
        };
        out.extend_from_slice(method);
        out.extend_from_slice(&self.prefix);
        decimal::push(out, req.key);
        out.extend_from_slice(&self.suffix);
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(&self.host);
        match req.op {
            Op::Read | Op::Mget | Op::Delete => {}
            op => {
                // The row goes in a stack buffer first: its length leads it.
                let mut body = [0u8; 160];
                let mut w = &mut body[..];
                dataset::write_tsv_version(&mut w, req.key, req.version);
                let n = 160 - w.len();
                out.extend_from_slice(match op {
                    Op::Update => b"\r\nIf-Match: *",
                    Op::Insert => b"\r\nIf-None-Match: *",
                    _ => b"",
                });
                out.extend_from_slice(b"\r\nContent-Length: ");
                decimal::push(out, n as u64);
                out.extend_from_slice(b"\r\n\r\n");
                out.extend_from_slice(&body[..n]);
                return;
            }
        }
        out.extend_from_slice(b"\r\n\r\n");
    }

    /// Statuses other than 200 and 404 are `Server` replies; malformed or oversized replies are
    /// a fatal `Err`.
    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        _key: u64,
    ) -> Result<Decoded<'b, NoCells<'b>>, LookupError> {
        let mut start = 0;
        let head = loop {
            let rest = buf.get(start..).unwrap_or_default();
            let Some(head) = parse_head(rest)? else {
                return incomplete(buf);
            };
            if head.status == 101 {
                return Err(protocol("unexpected 101 Switching Protocols"));
            }
            if head.status >= 200 {
                break head;
            }
            start += head.len;
            if start >= MAX_FRAME {
                return Err(protocol("reply larger than MAX_FRAME"));
            }
        };
        let body_start = start + head.len;
        let row = head.status == 200;
        let end = match head.body {
            Body::Empty => body_start,
            Body::Length(n) => {
                let end = body_start.checked_add(n).filter(|&e| e <= MAX_FRAME);
                let Some(end) = end else {
                    return Err(protocol("Content-Length exceeds MAX_FRAME"));
                };
                if buf.len() < end {
                    return incomplete(buf);
                }
                end
            }
            Body::Chunked => {
                self.scratch.clear();
                let sink = if row { Some(&mut self.scratch) } else { None };
                let Some(end) = walk_chunks(buf, body_start, sink)? else {
                    return incomplete(buf);
                };
                end
            }
        };
        self.must_close = head.close;
        let reply = match head.status {
            200 => {
                let body = match head.body {
                    Body::Chunked => &self.scratch[..],
                    _ => buf.get(body_start..end).unwrap_or_default(),
                };
                Reply::Row(RowView::Tsv(body.strip_suffix(b"\n").unwrap_or(body)))
            }
            404 => Reply::Miss,
            // A write: done (201 Created, 204 No Content), or its condition failed (412: the
            // row to update is not there, or the row to insert is).
            201 | 204 => Reply::Written(1),
            412 => Reply::Written(0),
            s => Reply::Server(
                ErrorKind::Server,
                format!(
                    "http status {s} {}",
                    String::from_utf8_lossy(head.reason.get(..100).unwrap_or(head.reason))
                ),
            ),
        };
        Ok(Some((end, reply)))
    }

    /// `GET /usr?ids=k1,k2,...,kN` (the URL's path without its last `/`).
    fn encode_batch(&mut self, keys: &[u64], out: &mut Vec<u8>) {
        out.extend_from_slice(b"GET ");
        out.extend_from_slice(&self.bulk);
        for (i, &k) in keys.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            decimal::push(out, k);
        }
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(&self.host);
        out.extend_from_slice(b"\r\n\r\n");
    }

    /// A 200 whose body has a line `<id>\t<row>` per key found, in the order asked.
    fn decode_batch(
        &mut self,
        buf: &[u8],
        keys: &[u64],
        verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        let Some((n, reply)) = self.decode(buf, 0)? else {
            return Ok(None);
        };
        let tally = match reply {
            Reply::Row(RowView::Tsv(body)) => bulk::tally(body, keys, verify),
            Reply::Server(kind, e) => Err(LookupError::new(kind, false, e)),
            _ => Err(LookupError::new(
                ErrorKind::Server,
                false,
                "http: a multi-get answered without a 200",
            )),
        };
        Ok(Some((n, tally)))
    }

    /// After a reply came back complete (`Ok(Some)`): the server said it closes the connection
    /// after this reply (`Connection: close`, HTTP/1.0 without keep-alive, or both
    /// Content-Length and chunked). The reply itself is valid; reconnect before sending more
    /// (replies to requests already pipelined behind it will not come).
    fn must_close(&self) -> bool {
        self.must_close
    }
}

mod bulk;
#[cfg(test)]
mod tests;
