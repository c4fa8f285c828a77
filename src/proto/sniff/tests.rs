use super::*;

/// First replies as the servers of scripts/servers.sh sent them to a probe.
const MARIADB: &[u8] = b"d\x00\x00\x00\n5.5.5-10.11.14-MariaDB-0+deb12u2\x00\x10\x00\x00\x00k=-iL!\\-\x00\xfe\xff-\x02\x00\xff\x81";
const PG_SCRAM: &[u8] = b"R\x00\x00\x00\x17\x00\x00\x00\nSCRAM-SHA-256\x00\x00";

#[test]
fn each_servers_first_reply_is_named() {
    let pg_error =
        b"E\x00\x00\x00\x64SFATAL\x00VFATAL\x00C28000\x00Mrole \"x\" does not exist\x00\x00";
    let mysql_error = b"\x17\x00\x00\x00\xffj\x04Host 'x' is not allowed";
    for (bytes, want) in [
        (MARIADB, Kind::Mysql),
        (&mysql_error[..], Kind::Mysql),
        (PG_SCRAM, Kind::Postgres),
        (&pg_error[..], Kind::Postgres),
        (b"R\x00\x00\x00\x08\x00\x00\x00\x00", Kind::Postgres),
        (b"ERROR\r\n", Kind::Memcached),
        (b"VERSION 1.6.18\r\n", Kind::Memcached),
        (b"CLIENT_ERROR line too long\r\n", Kind::Memcached),
        (
            b"-ERR unknown command 'version', with args beginning with: \r\n",
            Kind::Redis,
        ),
        (b"-NOAUTH Authentication required.\r\n", Kind::Redis),
        (b"+PONG\r\n", Kind::Redis),
        (b"$-1\r\n", Kind::Redis),
        (b"$5\r\nhello\r\n", Kind::Redis),
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain",
            Kind::Http,
        ),
        (b"HTTP/1.0 200 OK\r\n", Kind::Http),
        (b"2\t1\tcmd\n", Kind::HandlerSocket),
        (b"0\t1\n", Kind::HandlerSocket),
        (b"\x15\x03\x03\x00\x02\x02\x32", Kind::Tls),
    ] {
        assert_eq!(kind_of(bytes), Some(want), "{}", first_bytes(bytes));
    }
}

#[test]
fn garbage_partial_replies_and_lookalikes_are_not_named() {
    for bytes in [
        &b""[..],
        b"\x00\x01\x02\x03\x04\x05\x06\x07",
        b"HTTP",
        b"-ERR no line end yet",
        b"-err lower case\r\n",
        b"$12x\r\n",
        b"2\t1",
        b"2\tx\n",
        b"E\x7f\xff\xff\xffSFATAL",
        b"R\x00\x00\x00\x02",
        b"d\x00\x00\x01\n5.5",
        b"N",
    ] {
        assert_eq!(kind_of(bytes), None, "{}", first_bytes(bytes));
    }
}

#[test]
fn messages_name_what_answered_or_show_its_bytes() {
    let m = not_the_protocol(Kind::Memcached, b"-ERR unknown command 'version'\r\n");
    assert!(
        m.starts_with("this looks like a Redis server, not memcached"),
        "{m}"
    );
    assert!(m.contains("-ERR unknown command"), "{m}");
    let m = not_the_protocol(Kind::Memcached, b"\x00\x01\x02garbage\r\n");
    assert_eq!(
        m,
        "not a memcached reply: \"\\x00\\x01\\x02garbage\\r\\n\" (is this a memcached port?)"
    );
    // A reply of the protocol itself is not "another server".
    assert!(not_the_protocol(Kind::Redis, b"+PONG\r\n").starts_with("not a Redis reply"));
    let long = [b'x'; 500];
    assert!(not_the_protocol(Kind::Http, &long).len() < 150);
    let m = not_the_protocol(Kind::Redis, b"\x15\x03\x03\x00\x02\x02\x32");
    assert!(m.contains("wants TLS from the first byte"), "{m}");
    let m = closed_after(Kind::Http);
    assert!(m.contains("after an HTTP request"), "{m}");
    assert!(m.contains("PostgreSQL server closes"), "{m}");
}

#[test]
fn the_startup_probe_is_a_startup_message_and_ends_a_line() {
    let p = startup_probe("bob", "db");
    assert_eq!(
        u32::from_be_bytes(p[..4].try_into().unwrap()) as usize,
        p.len()
    );
    assert_eq!(&p[4..8], &[0, 3, 0, 0]);
    assert!(p.ends_with(b"\n\0\0"));
    assert!(p.windows(8).any(|w| w == b"user\0bob"));
}
