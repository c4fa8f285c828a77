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
        ttl: 0,
        size: 0,
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
    assert!(
        out.starts_with(b"PUT /usr/42 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 47\r\n")
    );
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
    let mut r = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 43\r\n\r\n".to_vec();
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
