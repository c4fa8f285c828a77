use super::*;

#[test]
fn twitter_line_parses_every_field() {
    let l = parse(b"1.5,usr:42,6,300,7,set,60").unwrap().unwrap();
    assert_eq!(
        l,
        TraceLine {
            time_us: Some(1_500_000),
            key: b"usr:42",
            value_size: 300,
            client_id: 7,
            op: TraceOp::Set,
            ttl: 60
        }
    );
    let l = parse(b"17,k,1,0,1,get,0\r").unwrap().unwrap();
    assert_eq!(
        (l.time_us, l.key, l.op),
        (Some(17_000_000), &b"k"[..], TraceOp::Get)
    );
}

#[test]
fn a_key_holding_commas_is_what_lies_between() {
    let l = parse(b"3,a,b,c,5,10,2,delete,0").unwrap().unwrap();
    assert_eq!(
        (l.key, l.op, l.value_size),
        (&b"a,b,c"[..], TraceOp::Delete, 10)
    );
}

#[test]
fn plain_lists_have_no_time() {
    let l = parse(b"12345").unwrap().unwrap();
    assert_eq!(
        (l.time_us, l.key, l.op),
        (None, &b"12345"[..], TraceOp::Get)
    );
    let l = parse(b"abc,update").unwrap().unwrap();
    assert_eq!((l.key, l.op), (&b"abc"[..], TraceOp::Replace));
    assert_eq!(parse(b"").unwrap(), None);
    assert_eq!(parse(b"# comment").unwrap(), None);
}

#[test]
fn ops_map_to_loadgen_ops() {
    let want = [
        ("get", Op::Read),
        ("gets", Op::Read),
        ("set", Op::Upsert),
        ("add", Op::Insert),
        ("replace", Op::Update),
        ("cas", Op::Update),
        ("delete", Op::Delete),
        ("incr", Op::Update),
        ("decr", Op::Update),
        ("append", Op::Update),
        ("prepend", Op::Update),
    ];
    for (name, op) in want {
        let t = TraceOp::parse(name.as_bytes()).unwrap();
        assert_eq!((t.name(), t.op()), (name, op));
    }
}

#[test]
fn bad_lines_say_what_is_wrong() {
    let e = parse(b"1,k,1,2,3,fly,0").unwrap_err().0;
    assert!(e.contains("unknown op \"fly\""), "{e}");
    let e = parse(b"x,k,1,2,3,get,0").unwrap_err().0;
    assert!(e.contains("timestamp \"x\""), "{e}");
    let e = parse(b"1,k,1,-2,3,get,0").unwrap_err().0;
    assert!(e.contains("value_size"), "{e}");
    let e = parse(b"1,k,get").unwrap_err().0;
    assert!(e.contains("3 fields; expected timestamp,key"), "{e}");
    assert!(parse(b"1,,1,2,3,get,0")
        .unwrap_err()
        .0
        .contains("empty key"));
    assert!(parse(b"1.1234567,k,1,2,3,get,0").is_err());
}
