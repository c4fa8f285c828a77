//! Key ranges far beyond memory: the embedded server derives each row from its id, so a range
//! of ten billion keys or a billion rows costs no memory per row.

mod common;
use common::*;

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
    let addr = host_port(&served.url);
    let reply = http_get(&addr, "/usr/999999999");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .body
            .ends_with("user999999999\tuser999999999@example.com\t2041-10-12 13:09:12"),
        "{}",
        reply.body
    );
    assert_eq!(http_get(&addr, "/usr/1000000001").status, 404);
    let stats = http_get(&addr, "/stats").body;
    assert!(stats.contains("rows 1000000000\n"), "{stats}");
    assert!(stats.contains("hits 1\nmisses 1\n"), "{stats}");
    let rss = vm_rss_kib(served.child.id());
    assert!(rss < 64 * 1024, "VmRSS {rss} KiB with a billion rows");
}
