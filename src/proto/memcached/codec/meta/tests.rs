use super::super::McCodec;
use crate::dataset;
use crate::decimal;
use crate::mix::Op;
use crate::outcome::{ErrorKind, Outcome};
use crate::proto::codec::{Codec, Reply, Request, Tally};
use crate::proto::testkit::{self, dec, Seen};
use proptest::prelude::*;

fn meta() -> McCodec {
    McCodec::default().meta()
}

/// `VA <len> k<key>\r\n<data>\r\n`, as memcached answers `mg <key> v k`.
fn va(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut v = b"VA ".to_vec();
    decimal::push(&mut v, data.len() as u64);
    v.extend_from_slice(b" k");
    v.extend_from_slice(key);
    v.extend_from_slice(b"\r\n");
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n");
    v
}

fn hit(id: u64) -> Vec<u8> {
    let mut data = Vec::new();
    dataset::write_tsv(&mut data, id);
    va(format!("usr:{id}").as_bytes(), &data)
}

fn req(op: Op, ttl: u32) -> Request {
    Request {
        op,
        key: 42,
        version: 3,
        ttl,
        size: 0,
    }
}

#[test]
fn each_op_is_its_meta_command() {
    let mut c = meta();
    let mut out = Vec::new();
    c.encode(&Request::read(42), &mut out);
    assert_eq!(out, b"mg usr:42 v k\r\n");
    let row = b"user42v3\tuser42@example.com\t2010-02-03 11:23:15";
    for (op, ttl, head) in [
        (Op::Update, 0, &b"ms usr:42 47 MR\r\n"[..]),
        (Op::Insert, 0, b"ms usr:42 47 ME\r\n"),
        (Op::Upsert, 0, b"ms usr:42 47 MS\r\n"),
        (Op::Upsert, 60, b"ms usr:42 47 MS T60\r\n"),
    ] {
        out.clear();
        c.encode(&req(op, ttl), &mut out);
        assert_eq!(out, [head, &row[..], b"\r\n"].concat(), "{op:?}");
    }
    out.clear();
    c.encode(&req(Op::Delete, 0), &mut out);
    assert_eq!(out, b"md usr:42\r\n");
    out.clear();
    c.encode_batch(&[7, 8], &mut out);
    assert_eq!(out, b"mg usr:7 v k q\r\nmg usr:8 v k q\r\nmn\r\n");
    // A trace's key goes out as written.
    out.clear();
    c.encode_named(&Request::read(0), b"k:abc", &mut out);
    assert_eq!(out, b"mg k:abc v k\r\n");
}

#[test]
fn replies_are_hits_misses_and_writes() {
    let mut c = meta();
    let h = hit(42);
    assert_eq!(
        dec(&mut c, &h, 42, true).unwrap(),
        Some((h.len(), Outcome::Hit))
    );
    for cut in 0..h.len() {
        assert_eq!(dec(&mut c, &h[..cut], 42, true).unwrap(), None, "{cut}");
    }
    // memcached 1.6 echoes the flags on a miss too.
    for miss in [&b"EN\r\n"[..], b"EN kusr:42\r\n"] {
        assert_eq!(
            dec(&mut c, miss, 42, false).unwrap(),
            Some((miss.len(), Outcome::Miss))
        );
    }
    for (reply, written) in [
        (&b"HD\r\n"[..], 1),
        (b"NS\r\n", 0),
        (b"NF\r\n", 0),
        (b"EX\r\n", 0),
    ] {
        let (n, got) = c.decode(reply, 42).unwrap().unwrap();
        assert_eq!(n, reply.len());
        assert!(
            matches!(got, Reply::Written(w) if w == written),
            "{reply:?}"
        );
    }
    let (_, got) = c
        .decode(b"SERVER_ERROR out of memory\r\n", 42)
        .unwrap()
        .unwrap();
    assert!(matches!(got, Reply::Server(ErrorKind::Server, _)));
    // Another key's value, an unknown command's ERROR, a bad chunk's CLIENT_ERROR, a VA
    // without its key, garbage: the stream is out of step.
    for bad in [
        hit(43),
        b"ERROR\r\n".to_vec(),
        b"CLIENT_ERROR bad data chunk\r\n".to_vec(),
        b"VA 2\r\nab\r\n".to_vec(),
        b"VA 2 kusr:42\r\nabc\r\n".to_vec(),
        b"HTTP/1.1 400 Bad Request\r\n".to_vec(),
    ] {
        assert!(
            c.decode(&bad, 42).unwrap_err().fatal,
            "{}",
            String::from_utf8_lossy(&bad)
        );
    }
}

#[test]
fn a_quiet_multi_get_counts_the_left_out_keys_as_misses() {
    let mut c = meta();
    // 7 and 9 found; 8 and 10 left out by `q`.
    let reply = [hit(7), hit(9), b"MN\r\n".to_vec()].concat();
    let keys = [7, 8, 9, 10];
    for cut in 0..reply.len() {
        assert!(
            c.decode_batch(&reply[..cut], &keys, true)
                .unwrap()
                .is_none(),
            "{cut}"
        );
    }
    let (n, tally) = c.decode_batch(&reply, &keys, true).unwrap().unwrap();
    assert_eq!(n, reply.len());
    assert_eq!(tally.unwrap(), Tally { hits: 2, misses: 2 });
    let (_, tally) = c.decode_batch(b"MN\r\n", &keys, true).unwrap().unwrap();
    assert_eq!(tally.unwrap(), Tally { hits: 0, misses: 4 });
    // A SERVER_ERROR for one mg: the request is a Server error, taken up to its MN.
    let failed = [hit(7), b"SERVER_ERROR out of memory\r\nMN\r\n".to_vec()].concat();
    let (n, tally) = c.decode_batch(&failed, &keys, false).unwrap().unwrap();
    assert_eq!(n, failed.len());
    assert_eq!(tally.unwrap_err().kind, ErrorKind::Server);
    // Out of order, or a key not asked for: out of step.
    let swapped = [hit(9), hit(7), b"MN\r\n".to_vec()].concat();
    assert!(c.decode_batch(&swapped, &keys, false).unwrap_err().fatal);
    assert!(
        c.decode_batch(b"EN\r\nMN\r\n", &keys, false)
            .unwrap_err()
            .fatal
    );
}

#[test]
fn pipelined_replies_in_any_pieces_come_out_in_order() {
    let stream = [
        hit(1),
        b"EN\r\n".to_vec(),
        b"EN kusr:3\r\n".to_vec(),
        hit(4),
    ]
    .concat();
    for cut in 0..stream.len() {
        let seen: Vec<Seen> = testkit::feed(meta(), &stream, &[cut], &[1, 2, 3, 4], |_, s| s);
        assert_eq!(
            seen,
            [
                Ok(Outcome::Hit),
                Ok(Outcome::Miss),
                Ok(Outcome::Miss),
                Ok(Outcome::Hit)
            ],
            "{cut}"
        );
    }
}

#[test]
fn decoding_a_hit_allocates_nothing() {
    let mut c = meta();
    testkit::assert_no_alloc(&mut c, &hit(42), 42);
    testkit::assert_no_alloc(&mut c, b"EN\r\n", 42);
}

const SOUP: &[&[u8]] = &[
    b"VA ",
    b"47",
    b" kusr:42",
    b" ",
    b"\r\n",
    b"\n",
    b"EN",
    b"HD\r\n",
    b"MN\r\n",
    b"SERVER_ERROR ",
    b"user42\tuser42@example.com\t2010-02-03 11:23:15",
];

proptest! {
    #[test]
    fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..300), key in 0u64..100, verify: bool) {
        testkit::codec_contract(&mut meta(), &buf, key, verify);
        let _ = meta().decode_batch(&buf, &[41, 42, 43], verify);
    }

    #[test]
    fn token_soup_never_panics(buf in testkit::soup(SOUP, 30), key in 40u64..45, verify: bool) {
        testkit::codec_contract(&mut meta(), &buf, key, verify);
        if let Ok(Some((n, _))) = meta().decode_batch(&buf, &[41, 42, 43], verify) {
            prop_assert!(n > 0 && n <= buf.len());
        }
    }

    #[test]
    fn any_value_is_taken_whole(data in prop::collection::vec(any::<u8>(), 0..200), id in any::<u64>()) {
        let reply = va(format!("usr:{id}").as_bytes(), &data);
        let mut c = meta();
        let (n, got) = c.decode(&reply, id).unwrap().unwrap();
        prop_assert_eq!(n, reply.len());
        prop_assert!(matches!(got, Reply::Row(_)));
    }
}
