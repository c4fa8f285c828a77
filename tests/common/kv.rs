//! memcached and Redis write runs' shared parts: the server's own counts per op group, read by
//! the test itself, the conservation and read-your-writes checks, and a key namespace of this
//! process on memcached (tests/writes_kv.rs, tests/memcached_meta.rs).

use super::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;

pub const MIX: &str = "read=50,update=30,insert=10,delete=10";
pub const VERIFY_MIX: &str = "read=50,update=20,insert=10,delete=10,upsert=10";
pub const ROWS: u64 = 10_000;

pub fn prepare(url: &str, rows: u64) {
    let out = run(&["prepare", url, "--rows", &rows.to_string()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The server's own counts of each group of ops, read by the test itself (memcached `stats`
/// over its socket, Redis `INFO commandstats` by redis-cli), never through loadgen.
pub struct OwnKv {
    pub url: String,
    pub before: Vec<u64>,
}

impl OwnKv {
    pub fn before(url: &str) -> OwnKv {
        OwnKv {
            url: url.to_string(),
            before: OwnKv::groups(url).iter().map(|g| g.1).collect(),
        }
    }

    /// (ops, the server's count of them): memcached counts every storage command in cmd_set;
    /// Redis runs an insert as SETNX, updates and upserts as SET.
    pub fn groups(url: &str) -> Vec<(&'static [&'static str], u64)> {
        if url.starts_with("memcache") {
            let stat = |name| memcached_stat(url, name);
            return vec![
                (&["read"], stat("get_hits") + stat("get_misses")),
                (&["update", "insert", "upsert"], stat("cmd_set")),
                (&["delete"], stat("delete_hits") + stat("delete_misses")),
            ];
        }
        vec![
            (&["read"], redis_calls("get")),
            (&["update", "upsert"], redis_calls("set")),
            (&["insert"], redis_calls("setnx")),
            (&["delete"], redis_calls("del")),
        ]
    }

    /// Each group's count moved by exactly the requests loadgen made of its ops.
    pub fn assert_saw(&self, r: &Value, context: &str) {
        let requests = |op: &str| r["ops"][op]["requests"].as_u64().unwrap_or(0);
        for ((ops, now), before) in OwnKv::groups(&self.url).into_iter().zip(&self.before) {
            let want: u64 = ops.iter().map(|op| requests(op)).sum();
            assert_eq!(
                now - before,
                want,
                "{context} {ops:?}: the server's own count"
            );
        }
    }
}

/// The server's own counts, read by the test, moved by exactly loadgen's per op; where loadgen
/// counts the op apart, its server_observed says the same; and the run's total moved by
/// exactly the run's requests.
pub fn assert_conserved(
    r: &Value,
    own: &OwnKv,
    counted_apart: &[&str],
    shared: &[&str],
    context: &str,
) {
    own.assert_saw(r, context);
    assert_eq!(u(r, "error_total"), 0, "{context}: {}", r["error_samples"]);
    let so = &r["server_observed"];
    assert_eq!(u(so, "delta"), u(r, "requests"), "{context}: {so}");
    assert_eq!(so["matches"], true, "{context}: {so}");
    let mut sum = 0;
    for op in counted_apart.iter().chain(shared) {
        let o = &r["ops"][op];
        let n = u(o, "requests");
        assert!(n > 0, "{context}: no {op}: {}", r["ops"]);
        sum += n;
        let so = &o["server_observed"];
        if counted_apart.contains(op) {
            assert_eq!(u(so, "delta"), n, "{context} {op}: {so}");
            assert_eq!(so["matches"], true, "{context} {op}: {so}");
        } else {
            assert!(
                so.is_null(),
                "{context} {op}: the server counts it with others: {so}"
            );
        }
    }
    assert_eq!(sum, u(r, "requests"), "{context}");
    // Most updates and deletes find a row; every insert takes a new key.
    for op in ["update", "delete"] {
        let o = &r["ops"][op];
        if !o.is_null() {
            assert!(
                u(o, "hits") * 10 > u(o, "requests") * 7,
                "{context} {op}: {o}"
            );
        }
    }
    let ins = &r["ops"]["insert"];
    if !ins.is_null() {
        assert_eq!(u(ins, "hits"), u(ins, "requests"), "{context}: {ins}");
    }
}

/// A read-your-writes run over 500 keys, where most reads follow a write of the same key by the
/// same connection: 0 errors, and both rows written and misses of deleted rows were read.
pub fn assert_reads_own_writes(url: &str, reload: &dyn Fn(), context: &str) {
    for p in ["1", "16"] {
        reload();
        let (code, doc, err) = run_json(&[
            url, "-n", "20000", "--keys", "1-500", "--mix", VERIFY_MIX, "--verify", "-c", "4",
            "-p", p,
        ]);
        let r = &doc["runs"][0];
        assert_eq!(code, 0, "{context} -p {p}: {err} {}", r["error_samples"]);
        assert_eq!(u(r, "error_total"), 0, "{context} -p {p}");
        let read = &r["ops"]["read"];
        assert!(
            u(read, "hits") > 1000 && u(read, "misses") > 1000,
            "{context}: {read}"
        );
        assert_eq!(u(&r["ops"]["insert"], "misses"), 0, "{context}");
    }
    // The rows written are really stored, and really checked: a read-only --verify run expects
    // the loaded rows and finds the written ones.
    let (code, doc, _) = run_json(&[url, "-n", "2000", "--keys", "1-500", "--verify"]);
    assert_eq!(code, 1, "{context}");
    assert!(u(&doc["runs"][0], "errors.verify") > 200, "{context}");
}

/// memcached text commands on a fresh connection, each `noreply`, then `version` to know they
/// were all done.
pub fn memcached_noreply(
    hostport: &str,
    commands: impl Iterator<Item = String>,
) -> std::io::Result<()> {
    let mut s = TcpStream::connect(hostport)?;
    let mut buf = String::new();
    for c in commands {
        buf.push_str(&c);
        buf.push_str(" noreply\r\n");
    }
    buf.push_str("version\r\n");
    s.write_all(buf.as_bytes())?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 256];
    while !got.ends_with(b"\r\n") {
        match s.read(&mut chunk)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got.extend_from_slice(&chunk[..n]),
        }
    }
    match got.starts_with(b"VERSION") {
        true => Ok(()),
        false => Err(std::io::Error::other(
            String::from_utf8_lossy(&got).into_owned(),
        )),
    }
}

/// This process's memcached key namespace; its keys are deleted when dropped.
pub struct McKeys {
    pub url: String,
    pub hostport: String,
    pub prefix: String,
}

impl McKeys {
    pub fn new(base: &str, name: &str) -> McKeys {
        let prefix = format!("w17{name}{}:", std::process::id());
        McKeys {
            url: format!("{base}/?prefix={prefix}"),
            hostport: base
                .trim_start_matches("memcache://")
                .trim_end_matches('/')
                .to_string(),
            prefix,
        }
    }
}

impl Drop for McKeys {
    fn drop(&mut self) {
        // The loaded rows and the inserted ones above them (inserts start at ROWS + 1).
        let p = self.prefix.clone();
        let done = memcached_noreply(
            &self.hostport,
            (1..=ROWS + 50_000).map(|id| format!("delete {p}{id}")),
        );
        if let Err(e) = done {
            eprintln!("could not delete the test's keys {p}*: {e}");
        }
    }
}
