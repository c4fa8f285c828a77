//! Key ranges far beyond memory: the embedded server derives each row from its id, so a range
//! of ten billion keys or a billion rows costs no memory per row.

mod common;
use common::*;

use std::io::{Read, Write};
use std::time::Duration;

#[test]
fn embedded_run_over_ten_billion_keys_verifies_its_rows() {
    let (code, doc, err) = run_json(&["--keys", "1-10000000000", "-n", "1000", "--verify"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(r["kind"], "embedded");
    assert_eq!(u(r, "hits"), 1000, "every key of the range is a row");
    assert_eq!(u(r, "error_total"), 0, "{}", r["errors"]);
    assert_eq!(u(&r["server_observed"], "delta"), 1000);
    assert_eq!(r["server_observed"]["matches"], true);
}

/// One HTTP/1.1 GET on a fresh connection; returns the whole response.
fn get(url_base: &str, path: &str) -> String {
    let addr = url_base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn serve_a_billion_rows_in_little_memory() {
    let served = Served::start(1_000_000_000);
    let reply = get(&served.url, "/usr/999999999");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        reply.ends_with("user999999999\tuser999999999@example.com\t2041-10-12 13:09:12"),
        "{reply}"
    );
    assert!(get(&served.url, "/usr/1000000001").starts_with("HTTP/1.1 404"));
    let stats = get(&served.url, "/stats");
    assert!(stats.contains("rows 1000000000\n"), "{stats}");
    assert!(stats.contains("hits 1\nmisses 1\n"), "{stats}");
    let rss = vm_rss_kib(served.child.id());
    assert!(rss < 64 * 1024, "VmRSS {rss} KiB with a billion rows");
}
