use super::*;
use crate::outcome::{ErrorKind, Outcome};
use crate::proto::codec::Cell;
use crate::proto::mysql::cells;
use crate::proto::testkit::{self, codec_contract, dec, dec_err, decode_split};
use proptest::prelude::*;

/// The usr table's column types: VAR_STRING, VAR_STRING, DATETIME.
const USR: &[u8] = &[0xfd, 0xfd, 0x0c];

const ALL_SHAPES: [Shape; 4] = [
    Shape {
        deprecate_eof: true,
        cache_metadata: true,
    },
    Shape {
        deprecate_eof: true,
        cache_metadata: false,
    },
    Shape {
        deprecate_eof: false,
        cache_metadata: true,
    },
    Shape {
        deprecate_eof: false,
        cache_metadata: false,
    },
];
/// What MariaDB 10.11 agrees to with this driver.
const LEAN: Shape = ALL_SHAPES[0];

/// A reply being built: packets with sequence ids from 1.
struct Stream(Vec<u8>, u8);

impl Stream {
    fn new() -> Stream {
        Stream(Vec::new(), 1)
    }
    fn packet(mut self, payload: &[u8]) -> Stream {
        self.0
            .extend_from_slice(&(payload.len() as u32).to_le_bytes()[..3]);
        self.0.push(self.1);
        self.0.extend_from_slice(payload);
        self.1 = self.1.wrapping_add(1);
        self
    }
    /// Column count, definitions and the EOF after them, as `shape` has them.
    fn header(mut self, shape: Shape, columns: u8) -> Stream {
        let mut count = vec![columns];
        if shape.cache_metadata {
            count.push(0);
        }
        self = self.packet(&count);
        if !shape.cache_metadata {
            for i in 0..columns {
                let mut def = Vec::new();
                for s in ["def", "loadgen", "usr", "usr", "c", "c"] {
                    def.push(s.len() as u8);
                    def.extend_from_slice(s.as_bytes());
                }
                def.extend_from_slice(&[0x0c, 45, 0, 0, 1, 0, 0, 253, 0, 0, i, 0, 0]);
                self = self.packet(&def);
            }
        }
        if !shape.deprecate_eof {
            self = self.packet(&[0xFE, 0, 0, 2, 0]);
        }
        self
    }
    fn end(self, shape: Shape, status: u16) -> Stream {
        let s = status.to_le_bytes();
        if shape.deprecate_eof {
            self.packet(&[0xFE, 0, 0, s[0], s[1], 0, 0])
        } else {
            self.packet(&[0xFE, 0, 0, s[0], s[1]])
        }
    }
    fn rows(shape: Shape, rows: &[Vec<u8>]) -> Vec<u8> {
        let mut r = Stream::new().header(shape, 3);
        for row in rows {
            r = r.packet(row);
        }
        r.end(shape, 2).0
    }
}

fn lenstr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(s.len() as u8);
    out.extend_from_slice(s);
}

fn datetime(unix: i64) -> Vec<u8> {
    let (y, mo, d, h, mi, s) = crate::date::civil(unix);
    let mut v = vec![7];
    v.extend_from_slice(&(y as u16).to_le_bytes());
    v.extend_from_slice(&[mo as u8, d as u8, h as u8, mi as u8, s as u8]);
    v
}

fn row_of(name: &str, email: &str, created: &[u8]) -> Vec<u8> {
    let mut r = vec![0x00, 0x00];
    lenstr(&mut r, name.as_bytes());
    lenstr(&mut r, email.as_bytes());
    r.extend_from_slice(created);
    r
}

fn usr_row(key: u64) -> Vec<u8> {
    let created = datetime(crate::dataset::created_unix(key));
    row_of(
        &format!("user{key}"),
        &format!("user{key}@example.com"),
        &created,
    )
}

fn hit(shape: Shape, key: u64) -> Vec<u8> {
    Stream::rows(shape, &[usr_row(key)])
}

fn miss(shape: Shape) -> Vec<u8> {
    Stream::rows(shape, &[])
}

fn err_packet(code: u16, msg: &str) -> Vec<u8> {
    let mut p = vec![0xFF];
    p.extend_from_slice(&code.to_le_bytes());
    p.extend_from_slice(b"#42S02");
    p.extend_from_slice(msg.as_bytes());
    p
}

fn error(code: u16, msg: &str) -> Vec<u8> {
    Stream::new().packet(&err_packet(code, msg)).0
}

#[test]
fn encode_is_one_execute_with_the_key_as_unsigned_longlong() {
    let mut c = MyCodec::new(0x0403_0201, LEAN, USR);
    let mut out = b"prefix".to_vec();
    c.encode(&Request::read(0x1122_3344_5566_7788), &mut out);
    c.encode(&Request::read(u64::MAX), &mut out); // appends, patching only its own bytes
    let one = |key: u64| {
        let mut p = vec![
            22, 0, 0, 0, 0x17, 1, 2, 3, 4, 0, 1, 0, 0, 0, 0, 1, 0x08, 0x80,
        ];
        p.extend_from_slice(&key.to_le_bytes());
        p
    };
    assert_eq!(
        out,
        [&b"prefix"[..], &one(0x1122_3344_5566_7788), &one(u64::MAX)].concat()
    );
}

#[test]
fn hit_miss_and_verify_in_every_shape() {
    for shape in ALL_SHAPES {
        let mut c = MyCodec::new(1, shape, USR);
        let r = hit(shape, 42);
        assert_eq!(
            dec(&mut c, &r, 42, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        let (n, e) = dec_err(&mut c, &r, 43, true);
        assert_eq!((n, e.kind), (r.len(), ErrorKind::Verify), "{shape:?}");
        // Without verify any row is a hit.
        assert_eq!(
            dec(&mut c, &r, 43, false).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        let r = miss(shape);
        assert_eq!(
            dec(&mut c, &r, 7, true).unwrap(),
            Some((r.len(), Outcome::Miss))
        );
    }
}

#[test]
fn several_rows_are_one_hit_and_all_consumed() {
    let r = Stream::rows(LEAN, &[usr_row(5), usr_row(6), usr_row(7)]);
    let mut buf = r.clone();
    buf.extend(miss(LEAN));
    let got = dec(&mut MyCodec::new(1, LEAN, USR), &buf, 5, true).unwrap();
    assert_eq!(got, Some((r.len(), Outcome::Hit)));
}

#[test]
fn verify_rejects_other_rows() {
    let key = 5;
    let good = datetime(crate::dataset::created_unix(key));
    let mut null_name = usr_row(key);
    null_name[1] = 0b100;
    let mut extra = usr_row(key);
    extra.push(0);
    let mut short_date = vec![4];
    short_date.extend_from_slice(&good[1..5]);
    let mut us_date = good.clone();
    us_date[0] = 11;
    us_date.extend_from_slice(&1u32.to_le_bytes());
    for row in [
        row_of("user55", "user5@example.com", &good),
        row_of("user5", "user5@example.org", &good),
        row_of("user5", "user55@example.com", &good),
        row_of(
            "user5",
            "user5@example.com",
            &datetime(crate::dataset::created_unix(6)),
        ),
        row_of("user5", "user5@example.com", &short_date),
        row_of("user5", "user5@example.com", &us_date),
        row_of("user5", "user5@example.com", &[]),
        null_name,
        extra,
        vec![0x00, 0x00, 200, b'u'], // string longer than the row
    ] {
        let r = Stream::rows(LEAN, &[row]);
        let (n, e) = dec_err(&mut MyCodec::new(1, LEAN, USR), &r, key, true);
        assert_eq!((n, e.kind), (r.len(), ErrorKind::Verify));
    }
    // Four columns, the first three right: not the usr row.
    let mut four = Stream::new().header(LEAN, 4).packet(&usr_row(key));
    four = four.end(LEAN, 2);
    let (_, e) = dec_err(&mut MyCodec::new(1, LEAN, USR), &four.0, key, true);
    assert_eq!(e.kind, ErrorKind::Verify);
}

#[test]
fn short_datetime_forms_mean_zeros() {
    // 2010-02-03 00:00:00 is sent as 4 bytes, and may come as 7 or 11.
    let us = crate::date::unix_of(2010, 2, 3, 0, 0, 0) * 1_000_000;
    assert_eq!(cells::datetime(&[0xDA, 7, 2, 3]), Cell::Time(us));
    assert_eq!(cells::datetime(&[0xDA, 7, 2, 3, 0, 0, 0]), Cell::Time(us));
    assert_eq!(
        cells::datetime(&[0xDA, 7, 2, 3, 0, 0, 1, 5, 0, 0, 0]),
        Cell::Time(us + 1_000_005)
    );
    // The zero date, and lengths the server never sends.
    for other in [&[][..], &[0, 0, 0, 0], &[0xDA, 7, 2], &[0xDA, 7, 2, 3, 0]] {
        assert_eq!(cells::datetime(other), Cell::Other, "{other:?}");
    }
}

#[test]
fn cells_follow_the_column_types() {
    // TINY, LONGLONG, NULL (by type), DATE, TIME, a NULL by bitmap, BLOB.
    let types = [0x01, 0x08, 0x06, 0x0a, 0x0b, 0xfd, 0xfc];
    // 7 columns: 2 bitmap bytes, bits from offset 2, so column 5 is bit 7 of the first.
    let mut row = vec![0x00, 0b1000_0000, 0];
    row.push(7);
    row.extend_from_slice(&9u64.to_le_bytes());
    row.extend_from_slice(&[4, 0xDA, 7, 2, 3]);
    row.extend_from_slice(&[8, 0, 0, 0, 0, 0, 1, 2, 3]);
    row.extend_from_slice(&[2, b'h', b'i']);
    let r = Stream::new().header(LEAN, 7).packet(&row).end(LEAN, 2).0;
    let mut c = MyCodec::new(1, LEAN, &types);
    let Some((n, Reply::Row(RowView::Cells(cells)))) = c.decode(&r, 1).unwrap() else {
        panic!("a row");
    };
    assert_eq!(n, r.len());
    let date = crate::date::unix_of(2010, 2, 3, 0, 0, 0) * 1_000_000;
    let want = [
        Cell::Other,
        Cell::Other,
        Cell::Null,
        Cell::Time(date),
        Cell::Other,
        Cell::Null,
        Cell::Text(b"hi"),
    ];
    assert_eq!(cells.collect::<Vec<_>>(), want);
    // More columns than the prepare described: the rest cannot be framed.
    let mut c = MyCodec::new(1, LEAN, &types[..2]);
    let Some((_, Reply::Row(RowView::Cells(cells)))) = c.decode(&r, 1).unwrap() else {
        panic!("a row");
    };
    assert_eq!(
        cells.collect::<Vec<_>>(),
        [Cell::Other, Cell::Other, Cell::Other]
    );
}

#[test]
fn column_types_from_definitions() {
    let mut def = Vec::new();
    for s in ["def", "loadgen", "usr", "usr", "created", "created"] {
        lenstr(&mut def, s.as_bytes());
    }
    def.extend_from_slice(&[0x0c, 63, 0, 19, 0, 0, 0, 0x0c, 0x81, 0x10, 0, 0, 0]);
    assert_eq!(column_type(&def), Some(0x0c));
    assert_eq!(column_type(&def[..def.len() - 7]), None);
    assert_eq!(column_type(b""), None);
}

#[test]
fn hits_and_misses_allocate_nothing() {
    for shape in ALL_SHAPES {
        let mut c = MyCodec::new(1, shape, USR);
        testkit::assert_no_alloc(&mut c, &hit(shape, 42), 42);
        testkit::assert_no_alloc(&mut c, &miss(shape), 42);
    }
}

#[test]
fn error_reply_is_a_server_error_and_the_stream_stays_in_step() {
    for shape in ALL_SHAPES {
        let mut buf = error(1146, "Table 'loadgen.nope' doesn't exist");
        let first = buf.len();
        buf.extend(hit(shape, 9));
        let mut c = MyCodec::new(1, shape, USR);
        let (n, e) = dec_err(&mut c, &buf, 8, true);
        assert_eq!(n, first);
        assert_eq!(e.kind, ErrorKind::Server);
        assert_eq!(e.message, "Table 'loadgen.nope' doesn't exist (error 1146)");
        let got = dec(&mut c, &buf[n..], 9, true).unwrap();
        assert_eq!(got, Some((buf.len() - n, Outcome::Hit)));
    }
}

#[test]
fn errors_are_counted_by_the_kind_their_code_says() {
    for (code, kind) in [(1062, ErrorKind::Duplicate), (1213, ErrorKind::Deadlock)] {
        let (_, e) = dec_err(&mut MyCodec::new(1, LEAN, USR), &error(code, "x"), 1, false);
        assert_eq!(e.kind, kind);
        assert_eq!(e.message, format!("x (error {code})"));
    }
}

#[test]
fn error_after_rows_is_a_server_error() {
    let r = Stream::new()
        .header(LEAN, 3)
        .packet(&usr_row(3))
        .packet(&err_packet(1365, "Division by 0"));
    let (n, e) = dec_err(&mut MyCodec::new(1, LEAN, USR), &r.0, 3, true);
    assert_eq!((n, e.kind), (r.0.len(), ErrorKind::Server));
}

#[test]
fn shutdown_and_kill_end_the_connection_at_once() {
    for code in [1053u16, 1927] {
        let e = dec(
            &mut MyCodec::new(1, LEAN, USR),
            &error(code, "bye"),
            1,
            false,
        )
        .unwrap_err();
        assert_eq!((e.kind, e.fatal), (ErrorKind::Io, true));
        assert!(e.message.contains(&code.to_string()), "{}", e.message);
    }
}

#[test]
fn no_result_set_is_a_miss_and_more_results_are_followed() {
    let ok = Stream::new().packet(&[0x00, 0, 0, 2, 0, 0, 0]).0;
    let got = dec(&mut MyCodec::new(1, LEAN, USR), &ok, 1, true).unwrap();
    assert_eq!(got, Some((ok.len(), Outcome::Miss)));
    // A CALL: the result set says more follows, then the CALL's own OK.
    for shape in ALL_SHAPES {
        let more = SERVER_MORE_RESULTS_EXISTS | 2;
        let r = Stream::new()
            .header(shape, 3)
            .packet(&usr_row(4))
            .end(shape, more);
        let r = r.packet(&[0x00, 0, 0, 2, 0, 0, 0]).0;
        let mut c = MyCodec::new(1, shape, USR);
        assert_eq!(
            dec(&mut c, &r, 4, true).unwrap(),
            Some((r.len(), Outcome::Hit))
        );
        assert_eq!(dec(&mut c, &r[..r.len() - 1], 4, true).unwrap(), None);
    }
}

#[test]
fn writes_execute_their_statement_and_ok_says_the_rows_changed() {
    let mut c = MyCodec::new(1, LEAN, USR).with_writes(&[(Op::Delete, 7)]);
    let mut out = Vec::new();
    let del = Request {
        op: Op::Delete,
        key: 9,
        version: 1,
        ttl: 0,
        size: 0,
    };
    c.encode(&del, &mut out);
    assert_eq!(&out[4..9], &[COM_STMT_EXECUTE, 7, 0, 0, 0]);
    // OK: affected rows 1, last insert id 0, status, warnings.
    let one = Stream::new().packet(&[0x00, 1, 0, 2, 0, 0, 0]).0;
    let got = c.decode(&one, 9).unwrap();
    assert!(matches!(got, Some((n, Reply::Written(1))) if n == one.len()));
    assert_eq!(
        dec(&mut c, &one, 9, false).unwrap_err().kind,
        ErrorKind::Server
    );
    let none = Stream::new().packet(&[0x00, 0, 0, 2, 0, 0, 0]).0;
    let got = c.decode(&none, 9).unwrap();
    assert!(matches!(got, Some((n, Reply::Miss)) if n == none.len()));
    // An upsert that updated: 2 rows (MySQL's count for ON DUPLICATE KEY UPDATE).
    let two = Stream::new().packet(&[0x00, 2, 0, 2, 0, 0, 0]).0;
    let got = c.decode(&two, 9).unwrap();
    assert!(matches!(got, Some((n, Reply::Written(2))) if n == two.len()));
}

#[test]
fn txn_groups_take_their_commands_replies_with_the_writes() {
    let mut c = MyCodec::new(1, LEAN, USR)
        .with_writes(&[(Op::Update, 2)])
        .with_txn(2);
    let upd = |key| Request {
        op: Op::Update,
        key,
        version: 1,
        ttl: 0,
        size: 0,
    };
    let mut out = Vec::new();
    for key in [5, 6, 7] {
        c.encode(&upd(key), &mut out);
    }
    let ok = |rows: u8| Stream::new().packet(&[0x00, rows, 0, 2, 0, 0, 0]).0;
    // BEGIN + update 5; update 6 + COMMIT; BEGIN + update 7 (a deadlock).
    let first = [ok(0), ok(1)].concat();
    let second = [ok(1), ok(0)].concat();
    let third = [ok(0), error(1213, "Deadlock found")].concat();
    let all = [&first[..], &second, &third].concat();
    let got = c.decode(&all[..first.len() - 1], 5).unwrap();
    assert!(got.is_none(), "a group's reply is whole or nothing");
    let got = c.decode(&all, 5).unwrap();
    assert!(matches!(got, Some((n, Reply::Written(1))) if n == first.len()));
    let rest = &all[first.len()..];
    let got = c.decode(rest, 6).unwrap();
    assert!(matches!(got, Some((n, Reply::Written(1))) if n == second.len()));
    let got = c.decode(&rest[second.len()..], 7).unwrap();
    assert!(matches!(
        got,
        Some((_, Reply::Server(ErrorKind::Deadlock, _)))
    ));
    // The deadlock ended the open group: the next write rolls back and begins afresh.
    out.clear();
    c.encode(&upd(8), &mut out);
    assert!(out.starts_with(b"\x09\0\0\0\x03ROLLBACK\x06\0\0\0\x03BEGIN"));
}

#[test]
fn pipelined_replies_split_at_every_byte() {
    for shape in ALL_SHAPES {
        let keys = [1u64, 2_000_000, 3, 4];
        let whole = [
            hit(shape, 1),
            miss(shape),
            error(1317, "interrupted"),
            hit(shape, 4),
        ]
        .concat();
        for cut in 0..=whole.len() {
            // Bytes arrive in two reads, split at `cut`; parsed replies are dropped.
            let got = decode_split(MyCodec::new(1, shape, USR), &whole, cut, &keys);
            let want = [
                Ok(Outcome::Hit),
                Ok(Outcome::Miss),
                Err(ErrorKind::Server),
                Ok(Outcome::Hit),
            ];
            assert_eq!(got, want, "{shape:?} cut at {cut}");
        }
    }
}

#[test]
fn garbage_is_a_protocol_error() {
    let mut wrong_seq = hit(LEAN, 1);
    wrong_seq[3] = 0;
    let mut big = vec![1, 0, 0x10, 1]; // 1 MiB + 1
    big.push(0);
    let huge = vec![0xFF, 0xFF, 0xFF, 1, 3]; // 16 MiB - 1: a multi-packet payload
    let empty = vec![0, 0, 0, 1];
    for (shape, bad) in [
        (LEAN, b"HTTP/1.1 200 OK\r\n\r\n".to_vec()),
        (LEAN, wrong_seq),
        (LEAN, big),
        (LEAN, huge),
        (LEAN, empty),
        (LEAN, Stream::new().packet(&[0xFB, b'f']).0), // LOCAL INFILE request
        (LEAN, Stream::new().packet(&[3]).0),          // no metadata flag
        (LEAN, Stream::new().packet(&[3, 2]).0),       // bad metadata flag
        (LEAN, Stream::new().packet(&[0xFC, 1, 0x10, 0]).0), // 4097 columns
        (LEAN, Stream::new().packet(&[0xFD, 1, 0, 1, 0]).0), // too many columns
        (LEAN, Stream::new().packet(&[0]).0),          // OK packet cut short
        (LEAN, Stream::new().packet(&[0xFF, 1]).0),    // ERR packet cut short
        (LEAN, Stream::new().header(LEAN, 3).packet(&[1, 2]).0), // not a binary row
        (
            ALL_SHAPES[2],
            Stream::new().packet(&[3, 0]).packet(&[0x00]).0,
        ), // no EOF
        (
            ALL_SHAPES[2],
            Stream::new().header(ALL_SHAPES[2], 1).packet(&[0xFE, 0]).0,
        ),
    ] {
        let e =
            dec(&mut MyCodec::new(1, shape, USR), &bad, 1, true).expect_err(&format!("{bad:?}"));
        assert_eq!((e.kind, e.fatal), (ErrorKind::Protocol, true), "{bad:?}");
    }
    // Incomplete is not an error.
    let mut c = MyCodec::new(1, LEAN, USR);
    assert_eq!(dec(&mut c, &hit(LEAN, 1)[..7], 1, true).unwrap(), None);
    assert_eq!(dec(&mut c, b"", 1, true).unwrap(), None);
}

#[test]
fn a_reply_of_many_packets_is_bounded() {
    // Rows keep coming, each packet small, no end: refused at MAX_FRAME, not buffered on.
    let mut r = Stream::new().header(LEAN, 3);
    while r.0.len() < MAX_FRAME {
        r = r.packet(&usr_row(1));
    }
    let e = dec(&mut MyCodec::new(1, LEAN, USR), &r.0, 1, false).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol);
    assert!(e.message.contains("1 MiB"), "{}", e.message);
}

#[test]
fn server_error_fields() {
    let e = ServerError::parse(&err_packet(1045, "Access denied")).unwrap();
    assert_eq!((e.code, e.message.as_str()), (1045, "Access denied"));
    // Before the handshake is agreed there is no SQLSTATE.
    let e = ServerError::parse(b"\xff\x10\x04Too many connections").unwrap();
    assert_eq!((e.code, e.message.as_str()), (1040, "Too many connections"));
    assert_eq!(ServerError::parse(b"\xff\x10"), None);
}

#[test]
fn lenenc_widths() {
    assert_eq!(lenenc(&[0xFA, 9]), Some((250, &[9][..])));
    assert_eq!(lenenc(&[0xFC, 0x34, 0x12]), Some((0x1234, &[][..])));
    assert_eq!(lenenc(&[0xFD, 1, 2, 3]), Some((0x030201, &[][..])));
    assert_eq!(
        lenenc(&[0xFE, 1, 0, 0, 0, 0, 0, 0, 0x80]),
        Some((1 | 1 << 63, &[][..]))
    );
    assert_eq!(lenenc(&[0xFE, 1]), None);
    assert_eq!(lenenc(&[0xFB]), None);
    assert_eq!(lenenc(&[]), None);
}

/// Well-framed packets with plausible payloads, in sequence, so the parser gets deep.
fn packet_soup() -> impl Strategy<Value = Vec<u8>> {
    let payload = prop_oneof![
        Just(vec![3, 0]),
        Just(vec![3, 1]),
        Just(vec![3]),
        Just(usr_row(42)),
        Just(vec![0xFE, 0, 0, 2, 0, 0, 0]),
        Just(vec![0xFE, 0, 0, 8, 0, 0, 0]),
        Just(vec![0xFE, 0, 0, 2, 0]),
        Just(vec![0x00, 0, 0, 2, 0, 0, 0]),
        Just(err_packet(1146, "x")),
        prop::collection::vec(any::<u8>(), 1..30),
    ];
    prop::collection::vec(payload, 0..10).prop_map(|ps| {
        let mut r = Stream::new();
        for p in ps {
            r = r.packet(&p);
        }
        r.0
    })
}

proptest! {
    #[test]
    fn random_bytes_obey_the_contract(buf in prop::collection::vec(any::<u8>(), 0..300),
                                      key in 0u64..3_000_000, verify: bool) {
        for shape in ALL_SHAPES {
            codec_contract(&mut MyCodec::new(1, shape, USR), &buf, key, verify);
        }
    }

    #[test]
    fn random_packets_obey_the_contract(buf in packet_soup(), key in 40u64..45, verify: bool) {
        for shape in ALL_SHAPES {
            codec_contract(&mut MyCodec::new(1, shape, USR), &buf, key, verify);
        }
    }
}
