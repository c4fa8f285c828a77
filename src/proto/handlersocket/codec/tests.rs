use super::*;
use crate::dataset;
use crate::outcome::Outcome;
use crate::proto::testkit::{self, dec, Seen};
use proptest::prelude::*;

/// The bytes of a well-formed, non-NULL token (the tests' own decoder: loadgen compares
/// tokens as they came and never decodes them).
fn unescape(token: &[u8]) -> Vec<u8> {
    assert!(check_token(token).is_ok() && !is_null(token), "{token:?}");
    let mut out = Vec::new();
    let mut bytes = token.iter();
    while let Some(&b) = bytes.next() {
        out.push(match b {
            ESCAPE_PREFIX => bytes.next().unwrap() - ESCAPE_SHIFT,
            b => b,
        });
    }
    out
}

fn tsv(key: u64) -> Vec<u8> {
    let mut v = Vec::new();
    dataset::write_tsv(&mut v, key);
    v
}

fn hit_line(key: u64) -> Vec<u8> {
    let mut v = b"0\t3\t".to_vec();
    // The row values contain no bytes below 0x10, so the tsv is already the escaped form.
    v.extend_from_slice(&tsv(key));
    v.push(b'\n');
    v
}

/// The raw value tokens of a response, as the plugin sent them.
fn values<'a>(r: &Response<'a>) -> Tokens<'a> {
    Tokens { rest: r.rest }
}

fn feed(stream: &[u8], cuts: &[usize], keys: &[u64]) -> Vec<Seen> {
    testkit::feed(HsCodec::new(1), stream, cuts, keys, |_, seen| seen)
}

#[test]
fn escape_every_byte_singly() {
    for b in 0u8..=255 {
        let mut enc = Vec::new();
        escape_into(&[b], &mut enc);
        if b < 0x10 {
            assert_eq!(enc, [0x01, b + 0x40]);
        } else {
            assert_eq!(enc, [b]);
        }
        assert_eq!(unescape(&enc), [b]);
    }
}

#[test]
fn escape_all_bytes_as_one_token() {
    let all: Vec<u8> = (0u8..=255).collect();
    let mut enc = b"prefix".to_vec();
    escape_into(&all, &mut enc);
    let enc = &enc[6..];
    assert_eq!(enc.len(), 256 + 16);
    assert!(!enc.contains(&b'\t') && !enc.contains(&b'\n') && !enc.contains(&0));
    assert_eq!(unescape(enc), all);
    // Twice over, in a response line, as the plugin would send it.
    let mut line = b"0\t2\t".to_vec();
    escape_into(&all, &mut line);
    line.push(b'\t');
    escape_into(&all, &mut line);
    line.push(b'\n');
    let (n, resp) = parse_response(&line).unwrap().unwrap();
    assert_eq!(n, line.len());
    assert_eq!(resp.value_count, 2);
    for tok in values(&resp) {
        assert_eq!(unescape(tok), all);
    }
}

#[test]
fn escape_empty_and_plain() {
    let mut enc = Vec::new();
    escape_into(b"", &mut enc);
    assert!(enc.is_empty());
    escape_into(b"a\tb\nc\0", &mut enc);
    assert_eq!(enc, b"a\x01\x49b\x01\x4ac\x01\x40");
}

#[test]
fn malformed_escapes() {
    for (bad, at) in [
        (&b"\x01"[..], 0),
        (b"ab\x01", 2),
        (b"\x01\x3f", 0),
        (b"\x01\x50", 0),
        (b"\x01\x01", 0),
        (b"\x02", 0),
        (b"a\x00b", 1),
        (b"\x00\x00", 0),
        (b"x\ty", 1),
    ] {
        assert_eq!(check_token(bad), Err(at), "{bad:?}");
    }
    for ok in [&b"\x01\x40"[..], b"\x01\x4f", b"", b"\xff\x10", NULL_TOKEN] {
        assert_eq!(check_token(ok), Ok(()), "{ok:?}");
    }
}

#[test]
fn null_and_empty_tokens() {
    let (_, resp) = parse_response(b"0\t3\t\0\t\t\x01\x40\n").unwrap().unwrap();
    let toks: Vec<&[u8]> = values(&resp).collect();
    assert_eq!(toks, [&b"\0"[..], b"", b"\x01\x40"]);
    assert!(is_null(toks[0]));
    assert!(!is_null(toks[1]));
    assert!(!is_null(toks[2]));
    assert_eq!(unescape(toks[1]), b"");
    assert_eq!(unescape(toks[2]), [0]);
    // A line of one empty value differs from a line with no values.
    let (_, one_empty) = parse_response(b"0\t1\t\n").unwrap().unwrap();
    assert_eq!(one_empty.value_count, 1);
    assert_eq!(values(&one_empty).collect::<Vec<_>>(), [&b""[..]]);
    let (_, none) = parse_response(b"0\t1\n").unwrap().unwrap();
    assert_eq!(none.value_count, 0);
    assert_eq!(values(&none).count(), 0);
    // NULL counts as a value: a hit, and verify fails on it.
    let mut c = HsCodec::new(0);
    assert_eq!(
        dec(&mut c, b"0\t1\t\0\n", 5, false).unwrap(),
        Some((6, Outcome::Hit))
    );
    assert_eq!(
        dec(&mut c, b"0\t1\t\0\n", 5, true).unwrap_err().kind,
        ErrorKind::Verify
    );
    assert_eq!(
        dec(&mut c, b"0\t3\t\0\t\0\t\0\n", 5, true)
            .unwrap_err()
            .kind,
        ErrorKind::Verify
    );
}

#[test]
fn writes_encode_and_decode() {
    let mut c = HsCodec::writing(0);
    let mut out = Vec::new();
    let req = |op| Request {
        op,
        key: 42,
        version: 3,
        ttl: 0,
        size: 0,
    };
    let row = "user42v3\tuser42@example.com\t2010-02-03 11:23:15";
    for (op, want) in [
        (Op::Read, "0\t=\t1\t42\n".to_string()),
        (Op::Update, format!("0\t=\t1\t42\t1\t0\tU\t{row}\n")),
        (Op::Delete, "0\t=\t1\t42\t1\t0\tD\n".to_string()),
        (Op::Insert, format!("1\t+\t4\t42\t{row}\n")),
    ] {
        out.clear();
        c.encode(&req(op), &mut out);
        assert_eq!(String::from_utf8_lossy(&out), want, "{op:?}");
    }
    for (reply, want) in [(&b"0\t1\n"[..], 1), (b"0\t1\t1\n", 1), (b"0\t1\t0\n", 0)] {
        let (n, got) = c.decode(reply, 42).unwrap().unwrap();
        assert_eq!(n, reply.len());
        assert!(matches!(got, Reply::Written(w) if w == want), "{reply:?}");
    }
    let (_, got) = c.decode(b"1\t1\t121\n", 42).unwrap().unwrap();
    assert!(
        matches!(&got, Reply::Server(ErrorKind::Duplicate, m) if m.contains("121")),
        "{got:?}"
    );
    // Reads still come back as rows and misses; other errors stay errors.
    let (_, got) = c.decode(b"0\t3\n", 42).unwrap().unwrap();
    assert!(matches!(got, Reply::Miss));
    let (_, got) = c.decode(b"2\t1\treadonly\n", 42).unwrap().unwrap();
    assert!(matches!(got, Reply::Server(..)));
}

#[test]
fn encoders() {
    let mut out = Vec::new();
    encode_auth(b"s3cret", &mut out);
    assert_eq!(out, b"A\t1\ts3cret\n");
    out.clear();
    encode_auth(b"a\tb", &mut out);
    assert_eq!(out, b"A\t1\ta\x01\x49b\n");
    out.clear();
    encode_open_index(
        7,
        "test",
        "usr",
        "PRIMARY",
        &["user_name", "user_email", "created"],
        &mut out,
    )
    .unwrap();
    assert_eq!(
        out,
        b"P\t7\ttest\tusr\tPRIMARY\tuser_name,user_email,created\n"
    );
    out.clear();
    encode_open_index(u32::MAX, "d", "t", "", &["c"], &mut out).unwrap();
    assert_eq!(out, b"P\t4294967295\td\tt\t\tc\n");
    out.clear();
    encode_find(1, 42, &mut out);
    assert_eq!(out, b"1\t=\t1\t42\n");
    out.clear();
    encode_find(0, 0, &mut out);
    encode_find(12, u64::MAX, &mut out);
    assert_eq!(out, b"0\t=\t1\t0\n12\t=\t1\t18446744073709551615\n");
    let mut c = HsCodec::new(3);
    out.clear();
    c.encode(&Request::read(1_000_000), &mut out);
    assert_eq!(out, b"3\t=\t1\t1000000\n");
}

#[test]
fn encode_does_not_reallocate_with_capacity() {
    let mut c = HsCodec::new(1);
    let mut out = Vec::with_capacity(64);
    let p = out.as_ptr();
    c.encode(&Request::read(u64::MAX), &mut out);
    assert_eq!(out.as_ptr(), p);
}

#[test]
fn open_index_rejects_bad_names() {
    let cases: [(&str, &str, &str, &[&str], &str); 7] = [
        ("", "t", "PRIMARY", &["c"], "db"),
        ("d", "", "PRIMARY", &["c"], "table"),
        ("d\t", "t", "PRIMARY", &["c"], "db"),
        ("d", "t\n", "PRIMARY", &["c"], "table"),
        ("d", "t", "PRI\0", &["c"], "index"),
        ("d", "t", "PRIMARY", &[], "column"),
        ("d", "t", "PRIMARY", &["a,b"], "column"),
    ];
    for (db, t, i, cols, what) in cases {
        let mut out = b"x".to_vec();
        let e = encode_open_index(1, db, t, i, cols, &mut out).unwrap_err();
        assert_eq!(e.what, what);
        assert!(e.to_string().contains(what));
        assert_eq!(out, b"x");
    }
    let mut out = Vec::new();
    assert!(encode_open_index(1, "d", "t", "PRIMARY", &["a", ""], &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn parse_success_lines() {
    let (n, r) = parse_response(b"0\t1\nrest").unwrap().unwrap();
    assert_eq!((n, r.code, r.num_cols, r.value_count), (4, 0, 1, 0));
    assert!(r.is_ok());
    assert_eq!(r.message(), None);
    assert!(check_ok(&r).is_ok());
    let (n, r) = parse_response(b"0\t1\r\n").unwrap().unwrap();
    assert_eq!((n, r.value_count), (5, 0));
    let (n, r) = parse_response(b"0\t2\ta\tb\tc\td\n0\t1\n")
        .unwrap()
        .unwrap();
    assert_eq!((n, r.num_cols, r.value_count, r.row_count()), (12, 2, 4, 2));
    assert_eq!(r.first_row(), Some(&b"a\tb"[..]));
    let (_, r) = parse_response(b"0\t1\ta\tb\n").unwrap().unwrap();
    assert_eq!(r.first_row(), Some(&b"a"[..]));
    let (_, r) = parse_response(b"0\t3\ta\t\tc\n").unwrap().unwrap();
    assert_eq!(r.first_row(), Some(&b"a\t\tc"[..]));
    for miss in [&b"0\t3\n"[..], b"0\t0\n", b"2\t1\tstmtnum\n"] {
        assert_eq!(parse_response(miss).unwrap().unwrap().1.first_row(), None);
    }
    // find_modify style reply `0\t1\t<numfound>`.
    let (_, r) = parse_response(b"0\t1\t3\n").unwrap().unwrap();
    assert_eq!(values(&r).next(), Some(&b"3"[..]));
    // `\r` inside a value is not a line end, only right before `\n`.
    let (_, r) = parse_response(b"0\t1\tab\r\n").unwrap().unwrap();
    assert_eq!(values(&r).next(), Some(&b"ab"[..]));
}

#[test]
fn parse_error_lines_every_code() {
    let cases: [(&[u8], u32, &str, HsErrorClass); 12] = [
        (b"1\t1\topen_table\n", 1, "open_table", HsErrorClass::Engine),
        (
            b"1\t1\tlock_tables\n",
            1,
            "lock_tables",
            HsErrorClass::Engine,
        ),
        (b"1\t1\t121\n", 1, "121", HsErrorClass::Engine),
        (b"2\t1\tidxnum\n", 2, "idxnum", HsErrorClass::Request),
        (b"2\t1\tstmtnum\n", 2, "stmtnum", HsErrorClass::Request),
        (b"2\t1\tfld\n", 2, "fld", HsErrorClass::Request),
        (b"2\t1\tcmd\n", 2, "cmd", HsErrorClass::Request),
        (b"2\t1\treadonly\r\n", 2, "readonly", HsErrorClass::Request),
        (b"3\t1\tunauth\n", 3, "unauth", HsErrorClass::Auth),
        (b"3\t1\tauthtype\n", 3, "authtype", HsErrorClass::Auth),
        (b"3\t1\n", 3, "unknown_error", HsErrorClass::Auth),
        (
            b"9\t1\tsomething\tmore\n",
            9,
            "something\tmore",
            HsErrorClass::Unknown,
        ),
    ];
    for (line, code, msg, class) in cases {
        let (n, r) = parse_response(line).unwrap().unwrap();
        assert_eq!(n, line.len());
        assert_eq!(r.code, code);
        assert!(!r.is_ok());
        assert_eq!(r.row_count(), 0);
        let e = check_ok(&r).unwrap_err();
        assert_eq!((e.code, e.message.as_str(), e.class()), (code, msg, class));
        assert_eq!(e.is_auth(), class == HsErrorClass::Auth);
        let sentence = e.describe();
        assert!(sentence.starts_with("HandlerSocket: "), "{sentence}");
        assert!(
            sentence.contains(msg) || msg == "unknown_error",
            "{sentence}"
        );
        assert!(e.to_string().contains(msg));

        let mut c = HsCodec::new(1);
        let le = match c.decode(line, 1) {
            Ok(Some((n, Reply::Server(_, m)))) => {
                assert_eq!(n, line.len());
                LookupError::server(m)
            }
            Err(e) => e,
            _ => panic!("expected an error for {line:?}"),
        };
        assert_eq!(dec(&mut c, line, 1, true).unwrap_err().fatal, code == 3);
        assert_eq!(le.kind, ErrorKind::Server, "{line:?}");
        assert_eq!(le.fatal, code == 3, "{line:?}");
        // A tab in the server's text is shown escaped, as every non-printable byte.
        let shown = msg.replace('\t', "\\t");
        assert!(le.message.contains(&shown), "{}", le.message);
    }
    assert!(HsError {
        code: 1,
        message: "open_table".into()
    }
    .describe()
    .contains("database and table"));
    assert!(HsError {
        code: 1,
        message: "121".into()
    }
    .describe()
    .contains("perror 121"));
    assert!(HsError {
        code: 3,
        message: "unauth".into()
    }
    .describe()
    .contains("secret"));
    // An error line with a message that would be malformed as a value is still accepted.
    let (_, r) = parse_response(b"1\t1\tbad\x02msg\n").unwrap().unwrap();
    assert_eq!(r.message(), Some(&b"bad\x02msg"[..]));
}

#[test]
fn handshake_lines_without_newline() {
    // As `StreamConn::round_trip_line` returns them: no `\n`.
    assert!(check_ok(&parse_line(b"0\t1").unwrap()).is_ok());
    assert!(check_ok(&parse_line(b"0\t1\r").unwrap()).is_ok());
    let e = check_ok(&parse_line(b"3\t1\tunauth").unwrap()).unwrap_err();
    assert!(e.is_auth());
    assert!(e.describe().contains("secret"));
    let e = check_ok(&parse_line(b"1\t1\topen_table").unwrap()).unwrap_err();
    assert_eq!((e.code, e.class()), (1, HsErrorClass::Engine));
    let e = check_ok(&parse_line(b"2\t1\tidxnum").unwrap()).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str(), e.class()),
        (2, "idxnum", HsErrorClass::Request)
    );
    for bad in [&b""[..], b"\r", b"A\t1", b"0", b"0\t1\n"] {
        assert_eq!(
            parse_line(bad).unwrap_err().kind,
            ErrorKind::Protocol,
            "{bad:?}"
        );
    }
}

#[test]
fn parse_malformed_lines() {
    for bad in [
        &b"\n"[..],
        b"x\n",
        b"\t1\n",
        b"0\n",
        b"0\r\n",
        b"0\t\n",
        b"0\tx\n",
        b"0 1\n",
        b"-1\t1\n",
        b"4294967296\t1\n",
        b"0\t4294967296\n",
        b"0\t2\ta\n",
        b"0\t0\ta\n",
        b"0\t1\r\r\n",
        b"0\t1\ta\x01\n",
        b"0\t1\ta\x01\x50\n",
        b"0\t1\ta\x05b\n",
        b"0\t2\t\0x\t\0\n",
        b"HTTP/1.1 200 OK\r\n",
        b"END\r\n",
    ] {
        let e = parse_response(bad).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{bad:?}");
        let e = dec(&mut HsCodec::new(1), bad, 1, false).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{bad:?}");
    }
    // Garbage is detected from the first byte, without waiting for a line end.
    assert!(parse_response(b"V").is_err());
    assert_eq!(parse_response(b"").unwrap(), None);
    assert_eq!(parse_response(b"0").unwrap(), None);
}

#[test]
fn max_frame_bound() {
    let mut buf = b"0\t1\t".to_vec();
    buf.resize(MAX_FRAME - 1, b'a');
    assert_eq!(parse_response(&buf).unwrap(), None);
    buf.push(b'a');
    let e = parse_response(&buf).unwrap_err();
    assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true));
    // A line of exactly MAX_FRAME bytes, `\n` included, is fine.
    buf.truncate(MAX_FRAME - 1);
    buf.push(b'\n');
    let (n, r) = parse_response(&buf).unwrap().unwrap();
    assert_eq!((n, r.value_count), (MAX_FRAME, 1));
    buf.extend_from_slice(b"0\t1\n");
    assert_eq!(parse_response(&buf).unwrap().unwrap().0, MAX_FRAME);
}

#[test]
fn codec_hits_and_misses() {
    let mut c = HsCodec::new(1);
    let hit = hit_line(42);
    assert_eq!(
        dec(&mut c, &hit, 42, false).unwrap(),
        Some((hit.len(), Outcome::Hit))
    );
    assert_eq!(
        dec(&mut c, &hit, 42, true).unwrap(),
        Some((hit.len(), Outcome::Hit))
    );
    // Wrong row: a non-fatal Verify error, only with verify.
    testkit::assert_wrong_row(&mut c, &hit, 43);
    // Misses.
    assert_eq!(
        dec(&mut c, b"0\t3\n", 42, true).unwrap(),
        Some((4, Outcome::Miss))
    );
    assert_eq!(
        dec(&mut c, b"0\t3\r\n", 42, true).unwrap(),
        Some((5, Outcome::Miss))
    );
    assert_eq!(
        dec(&mut c, b"0\t1\n", 42, false).unwrap(),
        Some((4, Outcome::Miss))
    );
    // Other column counts are hits, and not the data set's row (the target refuses
    // --verify with a column list of its own).
    for other in [
        &b"0\t1\tuser42\n"[..],
        b"0\t2\tuser42\tx\n",
        b"0\t1\tuser4\n",
        b"0\t1\t\n",
        b"0\t4\tuser42\tuser42@example.com\t2010-02-03 11:23:15\tx\n",
    ] {
        testkit::assert_wrong_row(&mut c, other, 42);
    }
    // Three columns that are almost right.
    let mut near = hit.clone();
    let last = near.len() - 2;
    near[last] ^= 1;
    assert_eq!(
        dec(&mut c, &near, 42, true).unwrap_err().kind,
        ErrorKind::Verify
    );
    let e = dec(&mut c, b"0\t3\tuser42\tuser42@example.com\n", 42, true).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol, "2 values for 3 columns");
    // An escaped byte is never the row's: the row holds no byte below 0x10.
    let mut esc = b"0\t3\t".to_vec();
    escape_into(b"user42\x01", &mut esc);
    esc.extend_from_slice(b"\tuser42@example.com\t2010-02-03 11:23:15\n");
    assert_eq!(
        dec(&mut c, &esc, 42, true).unwrap_err().kind,
        ErrorKind::Verify
    );
    // Two rows (not sent with limit 1, but well formed): a hit, the first row is verified.
    let mut two = hit_line(7);
    two.pop();
    two.push(b'\t');
    two.extend_from_slice(&tsv(8));
    two.push(b'\n');
    assert_eq!(
        dec(&mut c, &two, 7, true).unwrap(),
        Some((two.len(), Outcome::Hit))
    );
    // Only the first reply is consumed.
    let mut both = hit.clone();
    both.extend_from_slice(b"0\t3\n");
    assert_eq!(
        dec(&mut c, &both, 42, true).unwrap(),
        Some((hit.len(), Outcome::Hit))
    );
}

#[test]
fn hits_and_misses_allocate_nothing() {
    let mut c = HsCodec::new(1);
    testkit::assert_no_alloc(&mut c, &hit_line(42), 42);
    testkit::assert_no_alloc(&mut c, b"0\t3\n", 42);
}

#[test]
fn every_prefix_is_incomplete() {
    let mut stream = hit_line(1);
    let first = stream.len();
    stream.extend_from_slice(b"0\t3\n");
    stream.extend_from_slice(b"2\t1\tstmtnum\n");
    let mut c = HsCodec::new(1);
    for len in 0..stream.len() {
        let r = dec(&mut c, &stream[..len], 1, true).unwrap();
        if len < first {
            assert_eq!(r, None, "prefix {len}");
        } else {
            assert_eq!(r, Some((first, Outcome::Hit)), "prefix {len}");
        }
    }
}

#[test]
fn split_anywhere_same_outcomes() {
    let keys = [1u64, 2, 3, 4, 5, 6];
    let mut stream = hit_line(1);
    stream.extend_from_slice(b"0\t3\n");
    stream.extend_from_slice(b"2\t1\tstmtnum\r\n");
    stream.extend_from_slice(&hit_line(99)); // wrong row for key 4
    stream.extend_from_slice(b"0\t3\t\0\t\t\x01\x40\n");
    stream.extend_from_slice(b"3\t1\tunauth\n");
    let whole = feed(&stream, &[], &keys);
    assert_eq!(
        whole,
        vec![
            Ok(Outcome::Hit),
            Ok(Outcome::Miss),
            Err((ErrorKind::Server, false)),
            Err((ErrorKind::Verify, false)),
            Err((ErrorKind::Verify, false)),
            Err((ErrorKind::Server, true)),
        ]
    );
    for s in 0..=stream.len() {
        assert_eq!(feed(&stream, &[s], &keys), whole, "split at {s}");
    }
    for s in 0..=stream.len() {
        for t in (s..=stream.len()).step_by(7) {
            assert_eq!(feed(&stream, &[s, t], &keys), whole, "split at {s},{t}");
        }
    }
    let bytewise: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(feed(&stream, &bytewise, &keys), whole);
}

#[test]
fn garbage_after_good_reply_is_fatal() {
    let mut stream = b"0\t3\n".to_vec();
    stream.extend_from_slice(b"garbage\n0\t3\n");
    let out = feed(&stream, &[], &[1, 2, 3]);
    assert_eq!(
        out,
        vec![Ok(Outcome::Miss), Err((ErrorKind::Protocol, true))]
    );
}

fn check_invariants(buf: &[u8], key: u64, verify: bool) {
    let mut c = HsCodec::new(1);
    crate::proto::testkit::codec_contract(&mut c, buf, key, verify);
    match parse_response(buf) {
        Ok(None) => assert!(buf.len() < MAX_FRAME),
        Ok(Some((n, r))) => {
            assert!(n > 0 && n <= buf.len());
            assert_eq!(values(&r).count(), r.value_count);
            if let Some(row) = r.first_row() {
                assert_eq!(row.split(|&b| b == b'\t').count(), r.num_cols as usize);
            }
        }
        Err(_) => {}
    }
}

const SOUP: &[&[u8]] = &[
    b"0",
    b"1",
    b"3",
    b"\t",
    b"\n",
    b"\r",
    b"\0",
    b"\x01",
    b"\x01\x40",
    b"user42",
    b"user42@example.com",
    b"2010-02-03 11:22:15",
];

proptest! {
    #[test]
    fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300), key in 0u64..100, verify: bool) {
        check_invariants(&buf, key, verify);
    }

    #[test]
    fn token_soup_never_panics(buf in testkit::soup(SOUP, 40), key in 40u64..45, verify: bool) {
        check_invariants(&buf, key, verify);
        let mut with_header = b"0\t3\t".to_vec();
        with_header.extend_from_slice(&buf);
        check_invariants(&with_header, key, verify);
    }

    #[test]
    fn escape_round_trips(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut enc = Vec::new();
        escape_into(&data, &mut enc);
        prop_assert!(check_token(&enc).is_ok());
        prop_assert!(!enc.contains(&b'\t') && !enc.contains(&b'\n'));
        prop_assert_eq!(unescape(&enc), data);
    }
}
