//! Writes (`--mix`) on memcached and Redis, on the real servers: each op counted by the server
//! exactly as loadgen counted it, and read-your-writes `--verify` at depth 1 and 16. The rows
//! these tests write are their own (a key prefix of this process on memcached, database 11 on
//! Redis), loaded here and removed after: the shared `usr:1..1000000` keys are never touched.

mod common;
use common::kv::*;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

/// Redis database of these tests (tests/redis.rs uses 1 and 2).
const REDIS_DB: &str = "11";

#[test]
fn memcached_conserves_every_op() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "c");
    prepare(&keys.url, ROWS);
    let keys_arg = format!("1-{ROWS}");
    let own = OwnKv::before(&keys.url);
    let (code, doc, err) = run_json(&[
        &keys.url, "-n", "20000", "--mix", MIX, "--keys", &keys_arg, "-c", "4", "-p", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 20000);
    // update (replace) and insert (add) both count in cmd_set: their sum is the total's rest.
    let ops = ["update", "insert"];
    assert_conserved(r, &own, &["read", "delete"], &ops, "memcached");
    // With one storage command in the mix, cmd_set is its own count.
    let own = OwnKv::before(&keys.url);
    let (code, doc, err) = run_json(&[
        &keys.url,
        "-n",
        "5000",
        "--mix",
        "read=50,upsert=50",
        "--keys",
        &keys_arg,
        "-p",
        "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_conserved(r, &own, &["read", "upsert"], &[], "memcached upsert");
}

/// The text report's op lines say that the server's figure holds the warm-up, and its
/// figure is the JSON's (the same run, written both ways).
#[test]
fn memcached_op_lines_say_the_server_count_holds_the_warm_up() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "w");
    prepare(&keys.url, ROWS);
    let dir = TempDir::new("lg-oplines");
    let json = dir.join("r.json");
    let keys_arg = format!("1-{ROWS}");
    let out = Command::new(bin())
        .args([
            "run",
            &keys.url,
            "-d",
            "1s",
            "--warmup",
            "500ms",
            "--mix",
            "read=90,upsert=10",
        ])
        .args(["--keys", &keys_arg, "-c", "2", "-q", "-o"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let r = &doc["runs"][0];
    assert!(u(r, "warmup_requests") > 0, "{r}");
    let so = &r["ops"]["read"]["server_observed"];
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("read "))
        .unwrap_or_else(|| panic!("no read line in {text}"));
    let n = loadgen::report::text::thousands;
    let want = format!(
        "server {} (sent {}, warm-up included), matches",
        n(u(so, "delta")),
        n(u(so, "expected"))
    );
    assert!(line.ends_with(&want), "{line} / {want}");
}

#[test]
fn memcached_reads_its_own_writes_at_depth_1_and_16() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "v");
    // Each run starts from the loaded rows: no key deleted or inserted by the one before.
    let reload = || {
        let p = keys.prefix.clone();
        memcached_noreply(
            &keys.hostport,
            (501..=20_000).map(|id| format!("delete {p}{id}")),
        )
        .expect("memcached deletes");
        prepare(&keys.url, 500);
    };
    assert_reads_own_writes(&keys.url, &reload, "memcached");
}

/// Redis database [`REDIS_DB`], emptied when dropped.
struct RedisDb(String);

impl RedisDb {
    fn new(base: &str) -> RedisDb {
        redis_cli(&["-n", REDIS_DB, "FLUSHDB"]);
        RedisDb(format!("{base}/{REDIS_DB}"))
    }
}

impl Drop for RedisDb {
    fn drop(&mut self) {
        redis_cli(&["-n", REDIS_DB, "FLUSHDB"]);
    }
}

#[test]
fn redis_conserves_every_op() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db = RedisDb::new(&base);
    prepare(&db.0, ROWS);
    let keys_arg = format!("1-{ROWS}");
    let own = OwnKv::before(&db.0);
    let (code, doc, err) = run_json(&[
        &db.0, "-n", "20000", "--mix", MIX, "--keys", &keys_arg, "-c", "4", "-p", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 20000);
    let ops = ["read", "update", "insert", "delete"];
    assert_conserved(r, &own, &ops, &[], "redis");
    // Update (SET XX) and upsert (SET) share cmdstat_set.
    let own = OwnKv::before(&db.0);
    let (code, doc, err) = run_json(&[
        &db.0,
        "-n",
        "5000",
        "--mix",
        "update=50,upsert=50",
        "--keys",
        &keys_arg,
        "-p",
        "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_conserved(r, &own, &[], &["update", "upsert"], "redis set");
}

#[test]
fn redis_reads_its_own_writes_at_depth_1_and_16() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db = RedisDb::new(&base);
    let reload = || {
        redis_cli(&["-n", REDIS_DB, "FLUSHDB"]);
        prepare(&db.0, 500);
    };
    assert_reads_own_writes(&db.0, &reload, "redis");
}

/// Whether memcached holds `key`, asked on a fresh connection.
fn memcached_has(hostport: &str, key: &str) -> bool {
    let mut s = TcpStream::connect(hostport).expect("memcached connects");
    s.write_all(format!("get {key}\r\n").as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    while !got.ends_with(b"END\r\n") {
        match s.read(&mut chunk).unwrap() {
            0 => panic!("memcached closed: {}", String::from_utf8_lossy(&got)),
            n => got.extend_from_slice(&chunk[..n]),
        }
    }
    got.starts_with(b"VALUE ")
}

/// `--ttl 1` upserts key 1, no --ttl key 2: two seconds later 1 is gone and 2 is still there.
fn write_key_with_ttl(url: &str, key: &str, ttl: &str) {
    let (code, _, err) = run_json(&[
        url,
        "-n",
        "3",
        "-c",
        "1",
        "--mix",
        "upsert=100",
        "--keys",
        key,
        "--ttl",
        ttl,
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn memcached_ttl_1_is_gone_2_seconds_later() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "t");
    write_key_with_ttl(&keys.url, "1-1", "1");
    write_key_with_ttl(&keys.url, "2-2", "0");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(!memcached_has(&keys.hostport, &format!("{}1", keys.prefix)));
    assert!(memcached_has(&keys.hostport, &format!("{}2", keys.prefix)));
}

#[test]
fn redis_ttl_1_is_gone_2_seconds_later() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db = RedisDb::new(&base);
    write_key_with_ttl(&db.0, "1-1", "1");
    write_key_with_ttl(&db.0, "2-2", "0");
    let left = redis_cli(&["-n", REDIS_DB, "TTL", "usr:1"]);
    assert!(left == "1" || left == "0", "TTL usr:1 is {left}");
    assert_eq!(redis_cli(&["-n", REDIS_DB, "TTL", "usr:2"]), "-1");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(redis_cli(&["-n", REDIS_DB, "EXISTS", "usr:1"]), "0");
    assert_eq!(redis_cli(&["-n", REDIS_DB, "EXISTS", "usr:2"]), "1");
}

#[test]
fn ttl_on_a_target_without_expiry_exits_2_in_one_line() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let out = run(&["run", &url, "-n", "10", "--ttl", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ttl 5") && err.contains("no expiry"),
        "{err}"
    );
}

/// With `--ttl` a Redis insert is `SET NX EX` (SETNX takes no expiry): the server counts it
/// under `set`, read by the test itself, and loadgen's per-op server count says the same.
#[test]
fn redis_inserts_with_a_ttl_are_counted_as_sets() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db = RedisDb::new(&base);
    prepare(&db.0, ROWS);
    let keys_arg = format!("1-{ROWS}");
    let (set, setnx) = (redis_calls("set"), redis_calls("setnx"));
    let (code, doc, err) = run_json(&[
        &db.0,
        "-n",
        "2000",
        "--mix",
        "read=50,insert=50",
        "--keys",
        &keys_arg,
        "--ttl",
        "600",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let inserts = u(&r["ops"]["insert"], "requests");
    assert!(inserts > 0, "{}", r["ops"]);
    assert_eq!(
        redis_calls("set") - set,
        inserts,
        "the server's own set count"
    );
    assert_eq!(redis_calls("setnx") - setnx, 0, "no SETNX with a ttl");
    let so = &r["ops"]["insert"]["server_observed"];
    assert_eq!(u(so, "delta"), inserts, "{so}");
    assert_eq!(so["matches"], true, "{so}");
}

/// The size memcached holds for `key` (None: not there), from its `VALUE` line.
fn memcached_len(hostport: &str, key: &str) -> Option<usize> {
    let mut s = TcpStream::connect(hostport).expect("memcached connects");
    s.write_all(format!("get {key}\r\nquit\r\n").as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    text.lines()
        .next()?
        .strip_prefix("VALUE ")?
        .split(' ')
        .nth(2)?
        .parse()
        .ok()
}

/// `--value-size 300-400` with `--verify`: every read of a written key finds its row inside
/// the padded value (no verify error), and every stored value is 300 to 400 bytes.
#[test]
fn memcached_value_sizes_are_stored_and_still_verify() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "v");
    let (code, doc, err) = run_json(&[
        &keys.url,
        "-n",
        "4000",
        "-c",
        "4",
        "--keys",
        "1-200",
        "--mix",
        "read=50,upsert=50",
        "--value-size",
        "300-400",
        "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
    assert!(u(r, "ops.read.hits") > 500, "{}", r["ops"]["read"]);
    let sizes: Vec<usize> = (1..=200)
        .filter_map(|id| memcached_len(&keys.hostport, &format!("{}{id}", keys.prefix)))
        .collect();
    assert!(sizes.len() > 150, "{} keys written", sizes.len());
    assert!(sizes.iter().all(|n| (300..=400).contains(n)), "{sizes:?}");
    assert!(sizes.iter().min() != sizes.iter().max(), "{sizes:?}");
}

/// Weighted sizes on Redis: each value is 100 or 4000 bytes, about one in five the larger.
#[test]
fn redis_weighted_value_sizes() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db = RedisDb::new(&base);
    let (code, _, err) = run_json(&[
        &db.0,
        "-n",
        "500",
        "-c",
        "2",
        "--keys",
        "1-500",
        "--dist",
        "seq",
        "--mix",
        "upsert=100",
        "--value-size",
        "100:80,4000:20",
    ]);
    assert_eq!(code, 0, "{err}");
    let mut big = 0;
    for id in 1..=500 {
        let n = redis_cli(&["-n", REDIS_DB, "STRLEN", &format!("usr:{id}")]);
        match n.trim() {
            "100" => {}
            "4000" => big += 1,
            other => panic!("usr:{id} holds {other} bytes"),
        }
    }
    assert!((60..=140).contains(&big), "{big} of 500 at 4000 bytes");
}

#[test]
fn value_size_on_a_row_store_exits_2_in_one_line() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let out = run(&[
        "run",
        &url,
        "-n",
        "10",
        "--mix",
        "upsert=100",
        "--value-size",
        "100",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--value-size") && err.contains("stores rows"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// Keys that redis-benchmark wrote (`-r 1000`: `key:000000000000` to `key:000000000999`) read
/// with `--key-format key:%012d`: every lookup a hit.
#[test]
fn redis_reads_keys_redis_benchmark_wrote() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db = RedisDb::new(&base);
    let port = env("LOADGEN_REDIS_PORT");
    let out = std::process::Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "--dbnum",
            REDIS_DB,
            "-t",
            "set",
        ])
        .args(["-r", "1000", "-n", "20000", "-d", "8", "-q"])
        .args(["-a", &env("LOADGEN_REDIS_PASSWORD")])
        .output()
        .expect("redis-benchmark runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(redis_cli(&["-n", REDIS_DB, "DBSIZE"]), "1000");
    let (code, doc, err) = run_json(&[
        &db.0,
        "--key-format",
        "key:%012d",
        "--keys",
        "0-999",
        "--dist",
        "seq",
        "-n",
        "1000",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 1000);
    assert_eq!(doc["settings"]["key_format"], "key:%012d");
}

/// `prepare --key-format` loads keys so named, `run --key-format` verifies them all; the
/// default names find none of them.
#[test]
fn memcached_prepares_and_verifies_keys_of_a_format() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let format = format!("kf{}-%06d.v", std::process::id());
    let out = run(&["prepare", &base, "--rows", "300", "--key-format", &format]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hostport = base.trim_start_matches("memcache://").trim_end_matches('/');
    let key = format.replace("%06d", "000042");
    assert!(memcached_has(hostport, &key), "{key}");
    let (code, doc, err) = run_json(&[
        &base,
        "--key-format",
        &format,
        "--keys",
        "1-300",
        "-n",
        "3000",
        "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 3000);
    let _ = memcached_noreply(
        hostport,
        (1..=300).map(|id| format!("delete {}", format.replace("%06d", &format!("{id:06}")))),
    );
    let out = run(&[
        "prepare",
        "postgres://u@127.0.0.1:1/db",
        "--key-format",
        &format,
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--key-format names memcached and Redis keys"),
        "{err}"
    );
}
