//! Several generators: two real loadgen processes against one real server (memcached from
//! scripts/servers.sh) started together with --start-at, their interval logs, `loadgen merge`
//! (exact percentiles from the merged histograms, QPS semantics, refusals), and the aggregate
//! in Prometheus; runs of the embedded target made back to back or together, merged.

#[path = "merge/back_to_back.rs"]
mod back_to_back;
mod common;
#[path = "merge/files.rs"]
mod files;
#[path = "merge/generators.rs"]
mod generators;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use loadgen::result::encode_histogram;
use loadgen::result::Percentiles;
use serde_json::{json, Value};

fn tmpdir(name: &str) -> TempDir {
    TempDir::new(&format!("loadgen-merge-{name}"))
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn rfc3339(unix: i64) -> String {
    let (y, m, d, h, mi, s) = loadgen::date::civil(unix);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

fn spawn(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen starts")
}

/// Waits for a `loadgen run ... --format json` child: (exit code, stdout document, stderr).
fn finish(c: Child) -> (i32, Value, String) {
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}); stderr: {err}"));
    (out.status.code().unwrap_or(-1), doc, err)
}

fn merge(files: &[&Path]) -> (i32, Option<Value>, String) {
    let mut args = vec!["merge".to_string()];
    args.extend(files.iter().map(|p| p.to_str().unwrap().to_string()));
    args.extend(["--format", "json", "-o", "-"].map(String::from));
    let out = Command::new(bin()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_slice(&out.stdout).ok(),
        err,
    )
}

fn pct(v: &Value) -> Percentiles {
    serde_json::from_value(v.clone()).expect("percentiles")
}

// The references below use the hdrhistogram crate and the raw samples directly, never loadgen's
// own decoding or percentile code (which merge uses), so a fault there cannot hide in both.

/// Standard base64 (RFC 4648, with padding), decoded here rather than by loadgen.
fn base64(s: &str) -> Vec<u8> {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = ABC.iter().position(|&a| a == c).expect("base64 character") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

/// A result's histogram, read with the hdrhistogram crate.
fn raw_hist(r: &Value) -> Histogram<u64> {
    let bytes = base64(r["histogram"].as_str().expect("histogram"));
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .expect("a V2 histogram")
}

/// (name in the result, quantile) of every reported percentile.
const QUANTILES: [(&str, f64); 4] = [("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999)];

/// Asserts that `got` (a result's `latency_us`) reads `h` at every quantile, in microseconds.
fn assert_reads(got: &Value, h: &Histogram<u64>) {
    assert_eq!(u(got, "count"), h.len(), "{got}");
    for (name, q) in QUANTILES {
        let want = h.value_at_quantile(q) as f64 / 1000.0;
        assert!(
            (f(got, name) - want).abs() < 1e-6,
            "{name}: {got} vs {want}µs"
        );
    }
    assert!(
        (f(got, "max") - h.max() as f64 / 1000.0).abs() < 1e-6,
        "{got}"
    );
    assert!(
        (f(got, "min") - h.min() as f64 / 1000.0).abs() < 1e-6,
        "{got}"
    );
}

// ------------------------------------------------------------------ two real generators

struct Pair {
    /// The generators' files (name, bytes): a.json, a.hlog, b.json, b.hlog. A static is never
    /// dropped, so they are kept here and their temp dir removed once read.
    files: Vec<(&'static str, Vec<u8>)>,
    start_at: i64,
    a: Value,
    b: Value,
    elapsed: Duration,
}

impl Pair {
    /// The generators' files in a temp dir of the caller's own, removed when it is dropped.
    fn dir(&self, name: &str) -> TempDir {
        let dir = tmpdir(name);
        for (file, bytes) in &self.files {
            std::fs::write(dir.join(file), bytes).unwrap();
        }
        dir
    }
}

/// Two `loadgen run` processes against the test memcached, both told to start 3 s from now,
/// with different connection counts (so their latency distributions differ), run once and
/// shared by the tests below.
fn pair() -> Option<&'static Pair> {
    static PAIR: OnceLock<Option<Pair>> = OnceLock::new();
    PAIR.get_or_init(|| {
        let url = server("LOADGEN_MC_URL")?;
        let dir = tmpdir("pair");
        let start_at = now_unix().ceil() as i64 + 3;
        let at = rfc3339(start_at);
        let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
        let (a_json, a_log, b_json, b_log) = (
            path("a.json"),
            path("a.hlog"),
            path("b.json"),
            path("b.hlog"),
        );
        let t0 = Instant::now();
        #[rustfmt::skip]
        let a = spawn(&[
            "run", &url, "-n", "20000", "-c", "2", "--warmup", "0", "--seed", "1",
            "--start-at", &at, "--instance", "a", "--hdr-log", &a_log, "-o", &a_json,
            "--format", "json", "-q",
        ]);
        #[rustfmt::skip]
        let b = spawn(&[
            "run", &url, "-n", "40000", "-c", "64", "--warmup", "0", "--seed", "2",
            "--start-at", &at, "--instance", "b", "--hdr-log", &b_log, "-o", &b_json,
            "--format", "json", "-q",
        ]);
        let (ca, a, ea) = finish(a);
        let (cb, b, eb) = finish(b);
        let elapsed = t0.elapsed();
        assert_eq!(ca, 0, "generator a: {ea}");
        assert_eq!(cb, 0, "generator b: {eb}");
        let files = ["a.json", "a.hlog", "b.json", "b.hlog"]
            .map(|n| (n, std::fs::read(dir.join(n)).unwrap()))
            .to_vec();
        Some(Pair {
            files,
            start_at,
            a,
            b,
            elapsed,
        })
    })
    .as_ref()
}

// ------------------------------------------------------------------ merge semantics
// Built from one real result file (the embedded target: no server needed), edited per case.

/// Two generators one after the other on a pool of three memcached: `merge` keeps a line per
/// server, each the sum of what the two routed to it and of what it counted, and the servers'
/// own cmd_get, read here, sum to every get of both.
#[test]
fn merge_keeps_each_pool_servers_line() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, addrs, ports) = memcached_pool(&url, 21, "mergepool:", "600");
    let gets = || -> u64 {
        addrs
            .iter()
            .map(|a| memcached_stat(&format!("memcache://{a}"), "cmd_get"))
            .sum()
    };
    let before = gets();
    let dir = TempDir::new("loadgen-mergepool");
    let files: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("g{i}.json"))).collect();
    for f in &files {
        let out = run(&[
            "run",
            &pool,
            "-n",
            "3000",
            "-c",
            "4",
            "--keys",
            "1-600",
            "-q",
            "--format",
            "json",
            "-o",
            f.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(gets() - before, 6000, "the servers' own cmd_get");
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let (code, doc, err) = merge(&paths);
    assert_eq!(code, 0, "{err}");
    let doc = doc.unwrap();
    let so = &doc["runs"][0]["server_observed"];
    let members = so["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{so}");
    let each: Vec<Value> = paths
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    let mut total = 0;
    for (i, m) in members.iter().enumerate() {
        assert_eq!(m["server"], addrs[i], "{m}");
        let parts: u64 = each
            .iter()
            .map(|d| u(&d["runs"][0]["server_observed"]["members"][i], "delta"))
            .sum();
        assert_eq!((u(m, "delta"), u(m, "expected")), (parts, parts), "{m}");
        assert_eq!(m["matches"], true, "{m}");
        // Its latency is both generators' histograms added: one sample per request it answered.
        assert_eq!(u(m, "latency.count"), parts, "{m}");
        total += parts;
    }
    assert_eq!(total, 6000, "{so}");
    pool_down(&ports);
}
