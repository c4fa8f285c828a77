use super::*;
use crate::dataset;
use crate::outcome::{ErrorKind, Outcome};
use crate::proto::codec::Tally;
use crate::proto::testkit::{self, dec, dec_err, Seen};
use proptest::prelude::*;

fn value_reply(key: &[u8], data: &[u8], cas: Option<u64>) -> Vec<u8> {
    let mut v = b"VALUE ".to_vec();
    v.extend_from_slice(key);
    v.extend_from_slice(b" 0 ");
    decimal::push(&mut v, data.len() as u64);
    if let Some(c) = cas {
        v.push(b' ');
        decimal::push(&mut v, c);
    }
    v.extend_from_slice(b"\r\n");
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\nEND\r\n");
    v
}

fn hit(id: u64) -> Vec<u8> {
    let mut data = Vec::new();
    dataset::write_tsv(&mut data, id);
    let mut key = Vec::new();
    McCodec::default().key_into(id, &mut key);
    value_reply(&key, &data, None)
}

fn feed(stream: &[u8], cuts: &[usize], keys: &[u64]) -> Vec<Seen> {
    testkit::feed(McCodec::default(), stream, cuts, keys, |_, seen| seen)
}

#[test]
fn writes_encode_and_decode() {
    let mut c = McCodec::default();
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
        &b"replace usr:42 0 0 47\r\nuser42v3\tuser42@example.com\t2010-02-03 11:23:15\r\n"[..]
    );
    for (op, head) in [
        (Op::Insert, &b"add usr:42 0 0 47\r\n"[..]),
        (Op::Upsert, b"set usr:42 0 0 47\r\n"),
    ] {
        out.clear();
        c.encode(&req(op, 1), &mut out);
        assert!(out.starts_with(head), "{op:?}");
    }
    out.clear();
    c.encode(&req(Op::Delete, 1), &mut out);
    assert_eq!(out, b"delete usr:42\r\n");
    for (reply, written) in [
        (&b"STORED\r\n"[..], 1),
        (b"NOT_STORED\r\n", 0),
        (b"DELETED\r\n", 1),
        (b"NOT_FOUND\r\n", 0),
    ] {
        let mut stream = reply.to_vec();
        stream.extend_from_slice(b"END\r\n");
        let (n, got) = c.decode(&stream, 42).unwrap().unwrap();
        assert_eq!(n, reply.len());
        assert!(matches!(got, Reply::Written(w) if w == written));
        for cut in 1..reply.len() {
            assert!(c.decode(&reply[..cut], 42).unwrap().is_none(), "{cut}");
        }
    }
    // A SERVER_ERROR still parses after the write replies' shared first bytes.
    let (_, got) = c
        .decode(b"SERVER_ERROR out of memory\r\n", 42)
        .unwrap()
        .unwrap();
    assert!(matches!(got, Reply::Server(..)));
}

#[test]
fn encoders() {
    let mut c = McCodec::default();
    let mut out = Vec::new();
    c.encode(&Request::read(42), &mut out);
    assert_eq!(out, b"get usr:42\r\n");
    out.clear();
    c.encode(&Request::read(u64::MAX), &mut out);
    assert_eq!(out, b"get usr:18446744073709551615\r\n");
    let mut out = Vec::with_capacity(64);
    let p = out.as_ptr();
    c.encode(&Request::read(u64::MAX), &mut out);
    assert_eq!(
        out.as_ptr(),
        p,
        "encode must not reallocate a buffer with room"
    );
    out.clear();
    encode_set_noreply(b"usr:7", b"a\r\nEND\r\nb", &mut out);
    assert_eq!(out, b"set usr:7 0 0 9 noreply\r\na\r\nEND\r\nb\r\n");
    out.clear();
    encode_set_noreply(b"k", b"", &mut out);
    assert_eq!(out, b"set k 0 0 0 noreply\r\n\r\n");
    out.clear();
    encode_stats(&mut out);
    assert_eq!(out, b"stats\r\n");
    let mut c = McCodec::new("").unwrap();
    out.clear();
    c.encode(&Request::read(5), &mut out);
    assert_eq!(out, b"get 5\r\n");
}

#[test]
fn keys_and_prefixes() {
    assert!(McCodec::new("a b").is_err());
    assert!(McCodec::new(vec![b'x'; 231]).is_err());
    assert!(McCodec::new(vec![b'x'; 230]).is_ok());
    assert!(McCodec::new("p\r").is_err());
    assert_eq!(
        McCodec::default().keys,
        crate::key_format::KeyFormat::default()
    );
    let c = McCodec::default();
    assert!(c.key_matches(b"usr:0", 0));
    assert!(!c.key_matches(b"usr:01", 1));
    assert!(!c.key_matches(b"usr:1", 10));
    assert!(!c.key_matches(b"usx:1", 1));
}

#[test]
fn hit_miss_verify() {
    let mut c = McCodec::default();
    let h = hit(42);
    assert_eq!(
        dec(&mut c, &h, 42, false).unwrap(),
        Some((h.len(), Outcome::Hit))
    );
    assert_eq!(
        dec(&mut c, &h, 42, true).unwrap(),
        Some((h.len(), Outcome::Hit))
    );
    // A value for another key than the one asked for: out of step, with or without verify.
    for verify in [false, true] {
        let e = dec(&mut c, &h, 43, verify).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true));
        assert!(e.message.contains("`usr:42`") && e.message.contains("get usr:43"));
    }
    // Another row under the key asked for: a verify error, only with verify.
    let mut data = Vec::new();
    dataset::write_tsv(&mut data, 43);
    let wrong_row = value_reply(b"usr:42", &data, None);
    testkit::assert_wrong_row(&mut c, &wrong_row, 42);
    let mut data = Vec::new();
    dataset::write_tsv(&mut data, 42);
    // Wrong data; trailing newline is not the row.
    let wrong_data = value_reply(b"usr:42", b"user42", None);
    assert_eq!(
        dec(&mut c, &wrong_data, 42, true).unwrap_err().kind,
        ErrorKind::Verify
    );
    let mut nl = data.clone();
    nl.push(b'\n');
    assert_eq!(
        dec(&mut c, &value_reply(b"usr:42", &nl, None), 42, true)
            .unwrap_err()
            .kind,
        ErrorKind::Verify
    );
    // With a cas token and nonzero flags.
    let with_cas = value_reply(b"usr:42", &data, Some(123456789));
    assert_eq!(
        dec(&mut c, &with_cas, 42, true).unwrap(),
        Some((with_cas.len(), Outcome::Hit))
    );
    let flags = b"VALUE usr:1 4294967295 3\r\nabc\r\nEND\r\n";
    assert_eq!(
        dec(&mut c, flags, 1, false).unwrap(),
        Some((flags.len(), Outcome::Hit))
    );
    match parse_get_reply(&with_cas).unwrap().unwrap().1 {
        GetReply::Hit {
            key,
            flags,
            cas,
            data: d,
        } => {
            assert_eq!(
                (key, flags, cas, d),
                (&b"usr:42"[..], 0, Some(123456789), &data[..])
            );
        }
        other => panic!("expected a hit, got {other:?}"),
    }
    // Empty value.
    testkit::assert_wrong_row(&mut c, b"VALUE usr:1 0 0\r\n\r\nEND\r\n", 1);
    // Miss.
    assert_eq!(
        dec(&mut c, b"END\r\n", 1, true).unwrap(),
        Some((5, Outcome::Miss))
    );
    assert_eq!(
        dec(&mut c, b"END\r\nEND\r\n", 1, true).unwrap(),
        Some((5, Outcome::Miss))
    );
}

#[test]
fn value_containing_end_marker() {
    let data = b"x\r\nEND\r\nVALUE usr:1 0 1\r\ny\r\nEND\r\n";
    let reply = value_reply(b"usr:1", data, None);
    let mut stream = reply.clone();
    stream.extend_from_slice(b"END\r\n");
    match parse_get_reply(&stream).unwrap().unwrap() {
        (n, GetReply::Hit { data: d, .. }) => {
            assert_eq!(n, reply.len());
            assert_eq!(d, data);
        }
        other => panic!("{other:?}"),
    }
    for len in 0..reply.len() {
        assert_eq!(
            parse_get_reply(&stream[..len]).unwrap(),
            None,
            "prefix {len}"
        );
    }
    assert_eq!(
        feed(&stream, &[], &[1, 2]),
        vec![Err((ErrorKind::Verify, false)), Ok(Outcome::Miss)]
    );
}

#[test]
fn server_and_client_errors() {
    let mut c = McCodec::default();
    let (n, e) = dec_err(&mut c, b"SERVER_ERROR out of memory\r\nEND\r\n", 1, true);
    assert_eq!((n, e.kind, e.fatal), (28, ErrorKind::Server, false));
    assert!(e.message.contains("out of memory"));
    for fatal in [
        &b"ERROR\r\n"[..],
        b"ERROR unknown command\r\n",
        b"CLIENT_ERROR bad command line format\r\n",
        b"CLIENT_ERROR\r\n",
    ] {
        let e = dec(&mut c, fatal, 1, false).unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{fatal:?}");
    }
    // SERVER_ERROR is its own line: what follows is the next reply.
    assert_eq!(
        parse_get_reply(b"SERVER_ERROR busy\r\nEND\r\n").unwrap(),
        Some((19, GetReply::ServerError(b"SERVER_ERROR busy")))
    );
    // Incomplete error lines wait.
    assert_eq!(dec(&mut c, b"SERVER_ERR", 1, false).unwrap(), None);
    assert_eq!(dec(&mut c, b"SERVER_ERROR out of", 1, false).unwrap(), None);
}

#[test]
fn garbage() {
    let mut c = McCodec::default();
    for bad in [
        &b"HTTP/1.1 200 OK\r\n"[..],
        b"0\t1\n",
        b"X",
        b"VALUEX",
        b"END\n",
        b"END \r\n",
        b"ENDX",
        b"STOREDX",
        b"VALUE\r\n",
        b"VALUE usr:1\r\n",
        b"VALUE usr:1 0\r\n",
        b"VALUE usr:1 0 x\r\n",
        b"VALUE usr:1 0 -1\r\n",
        b"VALUE usr:1 x 1\r\n",
        b"VALUE usr:1 4294967296 1\r\n",
        b"VALUE usr:1 0 1 c\r\n",
        b"VALUE usr:1 0 1 1 1\r\n",
        b"VALUE  0 1\r\n",
        b"VALUE usr:1  0 1\r\n",
        b"VALUE usr:1 0 1 \r\n",
        b"VALUE usr:1 0 99999999999999999999999\r\n",
        b"VALUE usr:1 0 3\r\nabcX",
        b"VALUE usr:1 0 3\r\nabc\r\nEN\n",
        b"VALUE usr:1 0 3\r\nabc\r\nVALUE usr:2 0 1\r\nd\r\nEND\r\n",
        b"VALUE usr:1 0 3\r\nabcd\r\nEND\r\n",
        b"VALUE usr:1 0 3\r\nab\r\nEND\r\n",
    ] {
        let e = dec(&mut c, bad, 1, false).unwrap_err();
        assert_eq!(
            (e.kind, e.fatal),
            (ErrorKind::Protocol, true),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    // A write's reply to a get is an error, never a hit.
    assert!(dec(&mut c, b"STORED\r\n", 1, false).is_err());
    // A complete VALUE line alone is incomplete, not garbage.
    assert_eq!(dec(&mut c, b"VALUE usr:1 0 1\r\n", 1, false).unwrap(), None);
    // A line that never ends is cut off at MAX_LINE.
    let mut long = b"SERVER_ERROR ".to_vec();
    long.resize(MAX_LINE - 1, b'x');
    assert_eq!(dec(&mut c, &long, 1, false).unwrap(), None);
    long.push(b'x');
    assert_eq!(
        dec(&mut c, &long, 1, false).unwrap_err().kind,
        ErrorKind::Protocol
    );
}

#[test]
fn oversized_declared_length() {
    let mut c = McCodec::default();
    let line = format!("VALUE usr:1 0 {}\r\n", MAX_FRAME + 1);
    let e = dec(&mut c, line.as_bytes(), 1, false).unwrap_err();
    assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true));
    let line = format!("VALUE usr:1 0 {}\r\n", usize::MAX);
    assert!(dec(&mut c, line.as_bytes(), 1, false).is_err());
    // The largest value that fits: header + data + "\r\nEND\r\n" == MAX_FRAME.
    let header = b"VALUE usr:1 0 1048546\r\n";
    let data_len = MAX_FRAME - header.len() - 7;
    assert_eq!(format!("VALUE usr:1 0 {data_len}\r\n").as_bytes(), header);
    let mut reply = header.to_vec();
    assert_eq!(dec(&mut c, &reply, 1, false).unwrap(), None);
    reply.resize(header.len() + data_len, b'v');
    reply.extend_from_slice(b"\r\nEND\r\n");
    assert_eq!(
        dec(&mut c, &reply, 1, false).unwrap(),
        Some((MAX_FRAME, Outcome::Hit))
    );
    let line = format!("VALUE usr:1 0 {}\r\n", data_len + 1);
    assert!(dec(&mut c, line.as_bytes(), 1, false).is_err());
}

#[test]
fn pipelined_prefixes_and_splits() {
    let keys = [1u64, 2, 3, 4, 5];
    let mut stream = hit(1);
    let first = stream.len();
    stream.extend_from_slice(b"END\r\n");
    let mut row99 = Vec::new();
    dataset::write_tsv(&mut row99, 99);
    stream.extend_from_slice(&value_reply(b"usr:3", &row99, None)); // wrong row for key 3
    stream.extend_from_slice(b"SERVER_ERROR busy\r\n");
    stream.extend_from_slice(&value_reply(b"usr:5", b"\r\nEND\r\n", Some(1)));
    let mut c = McCodec::default();
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
            Ok(Outcome::Hit),
            Ok(Outcome::Miss),
            Err((ErrorKind::Verify, false)),
            Err((ErrorKind::Server, false)),
            Err((ErrorKind::Verify, false)),
        ]
    );
    for s in 0..=stream.len() {
        assert_eq!(feed(&stream, &[s], &keys), whole, "split at {s}");
        for t in (s..=stream.len()).step_by(11) {
            assert_eq!(feed(&stream, &[s, t], &keys), whole, "split at {s},{t}");
        }
    }
    let bytewise: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(feed(&stream, &bytewise, &keys), whole);
    // A fatal error stops the stream.
    let mut bad = b"END\r\nERROR\r\n".to_vec();
    bad.extend_from_slice(&hit(3));
    assert_eq!(
        feed(&bad, &[], &[1, 2, 3]),
        vec![Ok(Outcome::Miss), Err((ErrorKind::Protocol, true))]
    );
    // So does a value for the wrong key, wherever the stream is cut.
    let mut skew = hit(1);
    skew.extend_from_slice(&hit(3));
    for cut in 0..=skew.len() {
        assert_eq!(
            feed(&skew, &[cut], &[1, 2, 3]),
            vec![Ok(Outcome::Hit), Err((ErrorKind::Protocol, true))]
        );
    }
}

#[test]
fn hits_and_misses_allocate_nothing() {
    let mut c = McCodec::default();
    testkit::assert_no_alloc(&mut c, &hit(42), 42);
    testkit::assert_no_alloc(&mut c, b"END\r\n", 42);
}

#[test]
fn stats() {
    let reply = b"STAT pid 1234\r\nSTAT version 1.6.21\r\nSTAT libevent 2.1.12-stable\r\nSTAT odd a b c\r\nSTAT curr_items 0\r\nEND\r\nget";
    let full = reply.len() - 3;
    let (n, s) = parse_stats(reply).unwrap().unwrap();
    assert_eq!(n, full);
    assert_eq!(s.len(), 5);
    assert_eq!(s[0], ("pid".to_owned(), "1234".to_owned()));
    assert_eq!(s[3], ("odd".to_owned(), "a b c".to_owned()));
    assert_eq!(s[4], ("curr_items".to_owned(), "0".to_owned()));
    for len in 0..full {
        assert_eq!(parse_stats(&reply[..len]).unwrap(), None, "prefix {len}");
    }
    assert_eq!(parse_stats(b"END\r\n").unwrap(), Some((5, vec![])));
    assert_eq!(
        parse_stats(b"STAT x\r\nEND\r\n").unwrap().unwrap().1,
        vec![("x".into(), "".into())]
    );
    for bad in [
        &b"STAT \r\nEND\r\n"[..],
        b"VALUE x 0 1\r\n",
        b"STAT a 1\r\nSTORED\r\n",
        b"STAT a 1\nEND\r\n",
        b"ERROR\r\n",
        b"garbage",
    ] {
        let e = parse_stats(bad).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Protocol, "{bad:?}");
    }
    assert_eq!(
        parse_stats(b"SERVER_ERROR no\r\n").unwrap_err().kind,
        ErrorKind::Server
    );
    // Bounded by MAX_FRAME.
    let mut big = Vec::new();
    while big.len() < MAX_FRAME {
        big.extend_from_slice(b"STAT name value\r\n");
    }
    assert!(parse_stats(&big).is_err());
}

fn check_invariants(buf: &[u8], key: u64, verify: bool) {
    let mut c = McCodec::default();
    crate::proto::testkit::codec_contract(&mut c, buf, key, verify);
    match parse_stats(buf) {
        Ok(None) => assert!(buf.len() < MAX_FRAME),
        Ok(Some((n, _))) => assert!(n > 0 && n <= buf.len()),
        Err(_) => {}
    }
}

const SOUP: &[&[u8]] = &[
    b"VALUE ",
    b"usr:42",
    b" ",
    b"0",
    b"5",
    b"47",
    b"\r\n",
    b"\n",
    b"END\r\n",
    b"STAT ",
    b"SERVER_ERROR ",
    b"user42\tuser42@example.com\t2010-02-03 11:23:15",
];

proptest! {
    #[test]
    fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300), key in 0u64..100, verify: bool) {
        check_invariants(&buf, key, verify);
    }

    #[test]
    fn token_soup_never_panics(buf in testkit::soup(SOUP, 30), key in 40u64..45, verify: bool) {
        check_invariants(&buf, key, verify);
    }

    #[test]
    fn any_value_round_trips(data in prop::collection::vec(any::<u8>(), 0..200), id in any::<u64>()) {
        let mut key = Vec::new();
        McCodec::default().key_into(id, &mut key);
        let reply = value_reply(&key, &data, None);
        let (n, r) = parse_get_reply(&reply).unwrap().unwrap();
        prop_assert_eq!(n, reply.len());
        prop_assert_eq!(r, GetReply::Hit { key: &key, flags: 0, cas: None, data: &data });
    }
}

/// The VALUE block of `id` without the END: one element of a multi-get reply.
fn block(id: u64) -> Vec<u8> {
    let mut v = hit(id);
    v.truncate(v.len() - b"END\r\n".len());
    v
}

#[test]
fn multi_get_encodes_one_get_and_tallies_each_key() {
    let mut c = McCodec::default();
    let mut out = Vec::new();
    c.encode_batch(&[7, 8, 9], &mut out);
    assert_eq!(out, b"get usr:7 usr:8 usr:9\r\n");
    // 7 and 9 found, 8 and 10 left out by the server: misses.
    let mut reply = block(7);
    reply.extend(block(9));
    reply.extend_from_slice(b"END\r\n");
    let keys = [7, 8, 9, 10];
    for cut in 0..reply.len() {
        assert!(c
            .decode_batch(&reply[..cut], &keys, true)
            .unwrap()
            .is_none());
    }
    let (n, tally) = c.decode_batch(&reply, &keys, true).unwrap().unwrap();
    assert_eq!(n, reply.len());
    assert_eq!(tally.unwrap(), Tally { hits: 2, misses: 2 });
    // A row that is not the key's: the whole reply is taken, the request is a Verify error.
    let mut row7 = Vec::new();
    dataset::write_tsv(&mut row7, 7);
    let wrong = value_reply(b"usr:8", &row7, None);
    let (n, tally) = c
        .decode_batch(&wrong, &[8], true)
        .unwrap()
        .unwrap_or_else(|| {
            panic!("complete");
        });
    assert_eq!(n, wrong.len());
    let err = tally.unwrap_err();
    assert!(!err.fatal);
    assert_eq!(err.kind, ErrorKind::Verify);
    // Out of order (9 before 7) or a key not asked for: the stream is out of step.
    let mut swapped = block(9);
    swapped.extend(block(7));
    swapped.extend_from_slice(b"END\r\n");
    assert!(c.decode_batch(&swapped, &keys, false).unwrap_err().fatal);
    assert!(c
        .decode_batch(b"SERVER_ERROR out of memory\r\n", &keys, false)
        .unwrap()
        .unwrap()
        .1
        .is_err());
    assert!(c.decode_batch(b"ERROR\r\n", &keys, false).is_err());
}
