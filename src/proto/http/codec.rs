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
use crate::proto::codec::{Codec, Decoded, NoCells, Reply, Request, RowView, MAX_FRAME};

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
        HttpCodec {
            host: host_bytes,
            prefix,
            suffix,
            must_close: false,
            scratch: Vec::new(),
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
            Op::Read => b"GET ",
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
            Op::Read | Op::Delete => {}
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

    /// After a reply came back complete (`Ok(Some)`): the server said it closes the connection
    /// after this reply (`Connection: close`, HTTP/1.0 without keep-alive, or both
    /// Content-Length and chunked). The reply itself is valid; reconnect before sending more
    /// (replies to requests already pipelined behind it will not come).
    fn must_close(&self) -> bool {
        self.must_close
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset;
    use crate::outcome::{ErrorKind, Outcome};
    use crate::proto::testkit::{self, dec, dec_err};
    use proptest::prelude::*;

    /// An outcome and whether the codec said to close the connection after it.
    type Simple = Result<(Outcome, bool), (ErrorKind, bool)>;

    fn codec() -> HttpCodec {
        HttpCodec::new("127.0.0.1:8080", "/usr/", "")
    }

    fn tsv(key: u64) -> Vec<u8> {
        let mut v = Vec::new();
        dataset::write_tsv(&mut v, key);
        v
    }

    fn with_length(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
        let mut v = format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        v.extend_from_slice(body);
        v
    }

    fn chunked(status: &str, chunks: &[&[u8]]) -> Vec<u8> {
        let mut v = format!("HTTP/1.1 {status}\r\nTransfer-Encoding: chunked\r\n\r\n").into_bytes();
        for c in chunks {
            v.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            v.extend_from_slice(c);
            v.extend_from_slice(b"\r\n");
        }
        v.extend_from_slice(b"0\r\n\r\n");
        v
    }

    fn hit(key: u64) -> Vec<u8> {
        with_length("200 OK", "Content-Type: text/plain\r\n", &tsv(key))
    }

    fn feed(stream: &[u8], cuts: &[usize], keys: &[u64]) -> Vec<Simple> {
        testkit::feed(codec(), stream, cuts, keys, |c, seen| {
            seen.map(|o| (o, c.must_close()))
        })
    }

    #[test]
    fn encode_writes() {
        let mut c = codec();
        let mut out = Vec::new();
        let req = |op, version| Request {
            op,
            key: 42,
            version,
        };
        c.encode(&req(Op::Update, 3), &mut out);
        assert_eq!(
            out,
            &b"PUT /usr/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nIf-Match: *\r\nContent-Length: 47\r\n\r\nuser42v3\tuser42@example.com\t2010-02-03 11:23:15"[..]
        );
        out.clear();
        c.encode(&req(Op::Insert, 1), &mut out);
        assert!(out.starts_with(b"PUT /usr/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nIf-None-Match: *\r\nContent-Length: 47\r\n"));
        out.clear();
        c.encode(&req(Op::Upsert, 1), &mut out);
        assert!(out.starts_with(
            b"PUT /usr/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 47\r\n"
        ));
        out.clear();
        c.encode(&req(Op::Delete, 1), &mut out);
        assert_eq!(
            out,
            b"DELETE /usr/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
        for (status, written) in [
            ("204 No Content", 1),
            ("201 Created", 1),
            ("412 Precondition Failed", 0),
        ] {
            let r = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
            let (n, got) = c.decode(r.as_bytes(), 42).unwrap().unwrap();
            assert_eq!(n, r.len());
            assert!(matches!(got, Reply::Written(w) if w == written), "{status}");
        }
    }

    #[test]
    fn encode_request() {
        let mut c = codec();
        let mut out = Vec::new();
        c.encode(&Request::read(42), &mut out);
        assert_eq!(out, b"GET /usr/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n");
        let mut c = HttpCodec::new("example.com", "kv?id=", "&fmt=tsv");
        out.clear();
        c.encode(&Request::read(u64::MAX), &mut out);
        assert_eq!(
            out,
            b"GET /kv?id=18446744073709551615&fmt=tsv HTTP/1.1\r\nHost: example.com\r\n\r\n"
        );
        let mut out = Vec::with_capacity(256);
        let p = out.as_ptr();
        c.encode(&Request::read(7), &mut out);
        assert_eq!(
            out.as_ptr(),
            p,
            "encode must not reallocate a buffer with room"
        );
        // Bytes that would break the request line are percent-encoded; `%` is kept.
        let mut c = HttpCodec::new("h\r\nX: y", "/a b/\u{e9}/%41=", "?q=a b\r\n");
        let mut out = Vec::new();
        c.encode(&Request::read(1), &mut out);
        assert_eq!(
            out,
            b"GET /a%20b/%C3%A9/%41=1?q=a%20b%0D%0A HTTP/1.1\r\nHost: h%0D%0AX:%20y\r\n\r\n"
        );
        assert!(!c.must_close());
    }

    #[test]
    fn content_length_hit_miss_verify() {
        let mut c = codec();
        let h = hit(42);
        assert_eq!(
            dec(&mut c, &h, 42, false).unwrap(),
            Some((h.len(), Outcome::Hit))
        );
        assert_eq!(
            dec(&mut c, &h, 42, true).unwrap(),
            Some((h.len(), Outcome::Hit))
        );
        assert!(!c.must_close());
        testkit::assert_wrong_row(&mut c, &h, 43);
        // One trailing newline is fine, two are not.
        let mut body = tsv(42);
        body.push(b'\n');
        let r = with_length("200 OK", "", &body);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        body.push(b'\n');
        testkit::assert_wrong_row(&mut c, &with_length("200 OK", "", &body), 42);
        // Header names are case-insensitive; no reason phrase; bare LF line ends.
        let mut r = b"HTTP/1.1 200\ncontent-LENGTH:   45  \n\n".to_vec();
        r.extend_from_slice(&tsv(42));
        assert_eq!(tsv(42).len(), 45);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        // Repeated identical Content-Length is accepted.
        let r = with_length("200 OK", "Content-Length: 45\r\n", &tsv(42));
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        // 404 with a body, and without.
        let r = with_length("404 Not Found", "", b"no such key\n");
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Miss))
        );
        let r = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            dec(&mut c, r, 42, true).unwrap(),
            Some((r.len(), Outcome::Miss))
        );
        // Only the first reply is taken.
        let mut two = hit(1);
        two.extend_from_slice(&hit(2));
        assert_eq!(
            dec(&mut c, &two, 1, true).unwrap(),
            Some((hit(1).len(), Outcome::Hit))
        );
    }

    #[test]
    fn chunked_bodies() {
        let mut c = codec();
        let row = tsv(42);
        let r = chunked("200 OK", &[&row[..10], &row[10..11], &row[11..]]);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        assert_eq!(
            dec(&mut c, &r, 42, false).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        assert_eq!(
            dec(&mut c, &r, 41, true).unwrap_err().kind,
            ErrorKind::Verify
        );
        let r = chunked("200 OK", &[&row, b"\n"]);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        let r = chunked("200 OK", &[]);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap_err().kind,
            ErrorKind::Verify
        );
        // Upper-case hex, chunk extensions, trailers, bare LF.
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n".to_vec();
        r.extend_from_slice(b"0A ; name=value\r\n");
        r.extend_from_slice(&row[..10]);
        r.extend_from_slice(b"\r\n");
        r.extend_from_slice(format!("{:X}\n", row.len() - 10).as_bytes());
        r.extend_from_slice(&row[10..]);
        r.extend_from_slice(b"\n0\r\nX-Trailer: yes\r\n\r\n");
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        for len in 0..r.len() {
            assert_eq!(
                dec(&mut c, &r[..len], 42, true).unwrap(),
                None,
                "prefix {len}"
            );
        }
        // A chunked 404 and 503.
        let r = chunked("404 Not Found", &[b"missing"]);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Miss))
        );
        let r = chunked("503 Service Unavailable", &[b"busy"]);
        let (n, e) = dec_err(&mut c, &r, 42, true);
        assert_eq!((n, e.kind, e.fatal), (r.len(), ErrorKind::Server, false));
        // Both Content-Length and chunked: chunked wins, and the connection must be closed.
        let mut r =
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        r.extend_from_slice(&chunked("200 OK", &[&row])[47..]);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        assert!(c.must_close());
    }

    #[test]
    fn chunked_malformed() {
        let mut c = codec();
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        for bad in [
            "x\r\n",
            "\r\n",
            "-1\r\n",
            "5 x\r\n",
            "3\r\nabcX",
            "3\r\nabc\rX",
            "3\r\nabc\r\n0\r\nbad trailer\r\n\r\n",
            "3\r\nabc\r\n0\r\n folded: x\r\n\r\n",
            "fffffffffffffffffffff\r\n",
            "100001\r\n",
        ] {
            let r = format!("{head}{bad}");
            let e = dec(&mut c, r.as_bytes(), 1, false).unwrap_err();
            assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{bad:?}");
        }
        // A chunk that just fits is merely incomplete.
        let r = format!("{head}{:x}\r\n", MAX_FRAME - head.len() - 12);
        assert_eq!(dec(&mut c, r.as_bytes(), 1, false).unwrap(), None);
        // A chunk-size line that never ends.
        let mut r = format!("{head}5;").into_bytes();
        r.resize(head.len() + MAX_CHUNK_LINE - 1, b'x');
        assert_eq!(dec(&mut c, &r, 1, false).unwrap(), None);
        r.push(b'x');
        assert_eq!(
            dec(&mut c, &r, 1, false).unwrap_err().kind,
            ErrorKind::Protocol
        );
        // Endless small chunks stop at MAX_FRAME.
        let mut r = head.as_bytes().to_vec();
        while r.len() < MAX_FRAME + 10 {
            r.extend_from_slice(b"1\r\na\r\n");
        }
        assert_eq!(
            dec(&mut c, &r, 1, false).unwrap_err().kind,
            ErrorKind::Protocol
        );
        assert_eq!(dec(&mut c, &r[..MAX_FRAME / 2], 1, false).unwrap(), None);
        // Known not to fit before MAX_FRAME bytes arrive: the chunk ending past it is an error.
        assert_eq!(
            dec(&mut c, &r[..MAX_FRAME - 1], 1, false).unwrap_err().kind,
            ErrorKind::Protocol
        );
    }

    #[test]
    fn statuses() {
        let mut c = codec();
        for (status, fatal) in [
            ("500 Internal Server Error", false),
            ("400 Bad Request", false),
            ("302 Found", false),
            ("201 Created", false),
        ] {
            let r = with_length(status, "", b"oops");
            let (n, e) = dec_err(&mut c, &r, 1, true);
            assert_eq!(
                (n, e.kind, e.fatal),
                (r.len(), ErrorKind::Server, fatal),
                "{status}"
            );
            // A write's status (201) to a GET says so rather than its number.
            assert!(
                e.message.contains(&status[..3]) || e.message.contains("the reply to a write"),
                "{}",
                e.message
            );
        }
        // 204 and 304 have no body even with a Content-Length.
        let r = b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\nHTTP/1.1";
        let (n, e) = dec_err(&mut c, r, 1, true);
        assert_eq!((n, e.kind), (r.len() - 8, ErrorKind::Server));
        // Interim 100 Continue / 103 responses are skipped.
        let mut r =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n".to_vec();
        r.extend_from_slice(&hit(5));
        assert_eq!(
            dec(&mut c, &r, 5, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        for len in 0..r.len() {
            assert_eq!(
                dec(&mut c, &r[..len], 5, true).unwrap(),
                None,
                "prefix {len}"
            );
        }
        let e = dec(&mut c, b"HTTP/1.1 101 Switching Protocols\r\n\r\n", 1, true).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true));
    }

    #[test]
    fn connection_close_flag() {
        let mut c = codec();
        let r = with_length("200 OK", "Connection: close\r\n", &tsv(3));
        assert_eq!(
            dec(&mut c, &r, 3, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        assert!(c.must_close());
        // Incomplete data does not change the flag of the last completed reply.
        assert_eq!(dec(&mut c, &r[..10], 3, true).unwrap(), None);
        assert!(c.must_close());
        let r = with_length("200 OK", "Connection: Keep-Alive\r\n", &tsv(3));
        dec(&mut c, &r, 3, true).unwrap();
        assert!(!c.must_close());
        let r = with_length("404 Not Found", "connection: upgrade, CLOSE\r\n", b"");
        assert_eq!(
            dec(&mut c, &r, 3, true).unwrap(),
            Some((r.len(), Outcome::Miss))
        );
        assert!(c.must_close());
        // A non-fatal error reply can carry it too.
        let r = with_length("500 Oops", "Connection: close\r\n", b"");
        dec_err(&mut c, &r, 3, true);
        assert!(c.must_close());
        // HTTP/1.0: close unless keep-alive.
        assert_eq!(tsv(3).len(), 43);
        let mut r = b"HTTP/1.0 200 OK\r\nContent-Length: 43\r\n\r\n".to_vec();
        r.extend_from_slice(&tsv(3));
        dec(&mut c, &r, 3, true).unwrap();
        assert!(c.must_close());
        let mut r =
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 43\r\n\r\n".to_vec();
        r.extend_from_slice(&tsv(3));
        dec(&mut c, &r, 3, true).unwrap();
        assert!(!c.must_close());
    }

    #[test]
    fn garbage() {
        let mut c = codec();
        for bad in [
            &b"X"[..],
            b"HTTP/2 200\r\n\r\n",
            b"http/1.1 200 OK\r\n",
            b"HTTP/1.2 200 OK\r\n\r\n",
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 200OK\r\n\r\n",
            b"HTTP/1.1  200 OK\r\n\r\n",
            b"HTTP/1.1 200 O\x01K\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\n: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n folded\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\nbody until close",
            b"HTTP/1.1 500 Oops\r\n\r\n",
            b"VALUE usr:1 0 3\r\n",
            b"0\t3\n",
        ] {
            let e = dec(&mut c, bad, 1, false).unwrap_err();
            assert_eq!(
                (e.kind, e.fatal),
                (ErrorKind::Protocol, true),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(dec(&mut c, b"", 1, false).unwrap(), None);
        assert_eq!(dec(&mut c, b"HTTP/1", 1, false).unwrap(), None);
    }

    #[test]
    fn header_too_large() {
        let mut c = codec();
        let mut r = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
        r.resize(MAX_HEADER - 1, b'a');
        assert_eq!(dec(&mut c, &r, 1, false).unwrap(), None);
        r.push(b'a');
        let e = dec(&mut c, &r, 1, false).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true));
        // Many small header lines, too.
        let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
        while r.len() < MAX_HEADER {
            r.extend_from_slice(b"X-A: b\r\n");
        }
        assert_eq!(
            dec(&mut c, &r, 1, false).unwrap_err().kind,
            ErrorKind::Protocol
        );
        // At most MAX_HEADERS fields, however short.
        let mut r = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n".to_vec();
        for _ in 1..MAX_HEADERS {
            r.extend_from_slice(b"X-A: b\r\n");
        }
        r.extend_from_slice(b"\r\n");
        assert_eq!(
            dec(&mut c, &r, 1, false).unwrap(),
            Some((r.len(), Outcome::Miss))
        );
        r.truncate(r.len() - 2);
        r.extend_from_slice(b"X-A: b\r\n\r\n");
        let e = dec(&mut c, &r, 1, false).unwrap_err();
        assert!(e.message.contains("header fields"), "{}", e.message);
        // A header section just under the limit is fine.
        let mut r = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nX-Big: ".to_vec();
        r.resize(MAX_HEADER - 4, b'a');
        r.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            dec(&mut c, &r, 1, false).unwrap(),
            Some((MAX_HEADER, Outcome::Miss))
        );
    }

    #[test]
    fn oversized_content_length() {
        let mut c = codec();
        let r = format!("HTTP/1.1 200 OK\r\nContent-Length: {MAX_FRAME}\r\n\r\n");
        assert_eq!(
            dec(&mut c, r.as_bytes(), 1, false).unwrap_err().kind,
            ErrorKind::Protocol
        );
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1048532\r\n\r\n";
        assert_eq!(head.len() + 1_048_532, MAX_FRAME);
        let mut r = head.as_bytes().to_vec();
        assert_eq!(dec(&mut c, &r, 1, false).unwrap(), None);
        r.resize(MAX_FRAME, b'x');
        assert_eq!(
            dec(&mut c, &r, 1, false).unwrap(),
            Some((MAX_FRAME, Outcome::Hit))
        );
    }

    #[test]
    fn hits_and_misses_allocate_nothing() {
        let mut c = codec();
        testkit::assert_no_alloc(&mut c, &hit(42), 42);
        let row = tsv(42);
        testkit::assert_no_alloc(&mut c, &chunked("200 OK", &[&row[..9], &row[9..]]), 42);
        testkit::assert_no_alloc(&mut c, &with_length("404 Not Found", "", b"no"), 42);
    }

    #[test]
    fn pipelined_prefixes_and_splits() {
        let keys = [1u64, 2, 3, 4, 5, 6, 7];
        let mut stream = hit(1);
        let first = stream.len();
        stream.extend_from_slice(&with_length("404 Not Found", "", b"nope"));
        stream.extend_from_slice(&chunked("200 OK", &[&tsv(3)[..5], &tsv(3)[5..]]));
        stream.extend_from_slice(&with_length("500 Internal Server Error", "", b"boom"));
        stream.extend_from_slice(&hit(99)); // wrong row for key 5
        stream.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        stream.extend_from_slice(&chunked("503 Busy", &[b"later"]));
        stream.extend_from_slice(&with_length("200 OK", "Connection: close\r\n", &tsv(7)));
        let mut c = codec();
        for len in 0..stream.len() {
            let r = dec(&mut c, &stream[..len], 1, true).unwrap();
            assert_eq!(
                r,
                if len < first {
                    None
                } else {
                    Some((first, Outcome::Hit))
                },
                "prefix {len}"
            );
        }
        let whole = feed(&stream, &[], &keys);
        assert_eq!(
            whole,
            vec![
                Ok((Outcome::Hit, false)),
                Ok((Outcome::Miss, false)),
                Ok((Outcome::Hit, false)),
                Err((ErrorKind::Server, false)),
                Err((ErrorKind::Verify, false)),
                Err((ErrorKind::Server, false)),
                Ok((Outcome::Hit, true)),
            ]
        );
        for s in 0..=stream.len() {
            assert_eq!(feed(&stream, &[s], &keys), whole, "split at {s}");
        }
        for s in (0..=stream.len()).step_by(3) {
            for t in (s..=stream.len()).step_by(13) {
                assert_eq!(feed(&stream, &[s, t], &keys), whole, "split at {s},{t}");
            }
        }
        let bytewise: Vec<usize> = (1..stream.len()).collect();
        assert_eq!(feed(&stream, &bytewise, &keys), whole);
    }

    fn check_invariants(buf: &[u8], key: u64, verify: bool) {
        let mut c = codec();
        crate::proto::testkit::codec_contract(&mut c, buf, key, verify);
    }

    const SOUP: &[&[u8]] = &[
        b"HTTP/1.1 ",
        b"HTTP/1.0 ",
        b"200 OK",
        b"404",
        b"100 Continue",
        b"\r\n",
        b"\n",
        b"Content-Length: ",
        b"Transfer-Encoding: chunked",
        b"Connection: close",
        b"0",
        b"5",
        b"2f",
        b"47",
        b";ext",
        b"user42\tuser42@example.com\t2010-02-03 11:23:15",
    ];

    proptest! {
        #[test]
        fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300), key in 0u64..100, verify: bool) {
            check_invariants(&buf, key, verify);
        }

        #[test]
        fn token_soup_never_panics(buf in testkit::soup(SOUP, 40), key in 40u64..45, verify: bool) {
            check_invariants(&buf, key, verify);
            let mut with_head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            with_head.extend_from_slice(&buf);
            check_invariants(&with_head, key, verify);
        }

        #[test]
        fn any_chunking_decodes(cuts in prop::collection::vec(0usize..48, 0..6), key in 0u64..1000) {
            let row = tsv(key);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(row.len())).collect();
            cuts.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut last = 0;
            for c in cuts.into_iter().chain(std::iter::once(row.len())) {
                if c > last {
                    chunks.push(&row[last..c]);
                    last = c;
                }
            }
            let r = chunked("200 OK", &chunks);
            prop_assert_eq!(dec(&mut codec(), &r, key, true).unwrap(), Some((r.len(), Outcome::Hit)));
        }
    }
}
