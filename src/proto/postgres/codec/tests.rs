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
    let body = b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0";
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
        ttl: 0,
        size: 0,
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
        msg(b'T', b"\0\0"),                      // RowDescription: not asked for
        [b'2', 0, 0, 0, 3].to_vec(),             // length below 4
        [b'D', 0x7f, 0xff, 0xff, 0xff].to_vec(), // length above MAX_FRAME
        [msg(b'C', b"SELECT 0\0"), msg(b'Z', b"I")].concat(), // no BindComplete
        msg(b'Z', b"I"),                         // out of step
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
