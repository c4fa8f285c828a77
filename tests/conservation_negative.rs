//! The count check caught in the act: a second client of our own loads the same server while a
//! run measures it, so the server's own counter (read here by the test itself) moves by more
//! than the run sent. Each target's run must then say its count differs (`matches: false`,
//! the counts in the verdict's reason) and `--strict` must exit 3. Requests and keys
//! (`--batch`) both; a pool's member on its own line too.

mod common;
use common::*;

use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Another loadgen of our own on the same server, paced and bounded in time, killed by its pid
/// when dropped.
struct Disturber(Child);

impl Disturber {
    /// Starts loading `url` and returns once the server's own counter (`seen`) has moved, so
    /// the measured run that follows surely overlaps it.
    fn start(url: &str, seen: &OwnCount) -> Disturber {
        let child = Command::new(bin())
            .args([
                "run", url, "-d", "20s", "-R", "500", "-c", "2", "--keys", "1-1000", "-q",
                "--format", "json", "-o", "-",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadgen runs");
        let d = Disturber(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.delta() == 0 {
            assert!(
                Instant::now() < deadline,
                "{url}: the disturber never reached the server"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        d
    }
}

impl Drop for Disturber {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `url` measured under `--strict` while another client loads it: the run sent `sent`
/// requests (or keys) of its own, the server counted more, and the run says so.
fn differs(url: &str, source: &str, extra: &[&str], sent: u64) -> Value {
    let ready = OwnCount::before(source, url);
    let other = Disturber::start(url, &ready);
    let seen = OwnCount::before(source, url);
    let mut args = vec![url, "--keys", "1-100000", "-c", "4", "--strict"];
    args.extend_from_slice(extra);
    let (code, doc, err) = run_json(&args);
    let moved = seen.delta();
    drop(other);
    let r = &doc["runs"][0];
    let so = &r["server_observed"];
    assert!(
        moved > sent,
        "{url}: the test's own read moved {moved}, not more than {sent}"
    );
    assert_eq!(u(so, "expected"), sent, "{url}: {so}");
    assert!(u(so, "delta") > sent, "{url}: {so}");
    assert_eq!(so["matches"], false, "{url}: {so}");
    assert_eq!(so["source"], source, "{url}: {so}");
    let reasons = r["verdict"]["reasons"].to_string();
    let want = format!(
        "server count differs: {source}: the server counted {}",
        u(so, "delta")
    );
    assert!(reasons.contains(&want), "{url}: {reasons}");
    assert!(
        reasons.contains(&format!("loadgen sent {sent}")),
        "{url}: {reasons}"
    );
    assert_eq!(r["verdict"]["valid"], false, "{url}");
    assert_eq!(code, 3, "{url}: --strict on a differing count: {err}");
    assert_schema_valid(&doc);
    doc
}

#[test]
fn postgres_count_differs_under_another_client() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    differs(&url, "pg_stat_statements.calls", &["-n", "3000"], 3000);
}

#[test]
fn mariadb_count_differs_under_another_client() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    differs(
        &url,
        "global status Com_stmt_execute",
        &["-n", "3000"],
        3000,
    );
}

#[test]
fn handlersocket_count_differs_under_another_client() {
    let Some(url) = server("LOADGEN_HS_URL") else {
        return;
    };
    // HandlerSocket has no counters of its own: MariaDB's, over SQL.
    let url = format!("{url}?mysql={}", env("LOADGEN_MY_URL"));
    differs(
        &url,
        "global status Handler_read_key",
        &["-n", "3000"],
        3000,
    );
}

#[test]
fn memcached_count_differs_under_another_client() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let source = "memcached get_hits+get_misses";
    differs(&url, source, &["-n", "3000"], 3000);
    // In keys: 300 multi-gets of 10 keys each.
    differs(&url, source, &["-n", "300", "--batch", "10"], 3000);
}

#[test]
fn redis_count_differs_under_another_client() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    differs(
        &url,
        "INFO commandstats cmdstat_get.calls",
        &["-n", "3000"],
        3000,
    );
}

/// A pool whose one member is loaded by another client: that member's own line differs, the
/// other two match exactly, and the set's line differs.
#[test]
fn a_pool_member_loaded_by_another_client_differs_alone() {
    let Some(mc) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, addrs, ports) = memcached_pool(&mc, 71, "neg:", "20000");
    let loaded = format!("memcache://{}", addrs[1]);
    let source = "memcached get_hits+get_misses";
    let ready = OwnCount::before(source, &loaded);
    let other = Disturber::start(&loaded, &ready);
    let own: Vec<OwnCount> = addrs
        .iter()
        .map(|a| OwnCount::before(source, &format!("memcache://{a}")))
        .collect();
    let (code, doc, err) = run_json(&[
        &pool, "-n", "6000", "-c", "4", "--keys", "1-20000", "--strict",
    ]);
    let moved: Vec<u64> = own.iter().map(|c| c.delta()).collect();
    drop(other);
    pool_down(&ports);
    let r = &doc["runs"][0];
    let so = &r["server_observed"];
    let members = so["members"].as_array().expect("a member line each");
    assert_eq!(members.len(), 3, "{so}");
    for m in members {
        let name = m["server"].as_str().unwrap();
        let i = addrs
            .iter()
            .position(|a| name.contains(a.as_str()))
            .expect("a member of ours");
        let sent = u(m, "expected");
        if i == 1 {
            assert!(
                moved[i] > sent,
                "member {i}: own read {moved:?}, sent {sent}: {m}"
            );
            assert_eq!(m["matches"], false, "member {i}: {m}");
        } else {
            assert_eq!(moved[i], sent, "member {i}: the test's own read: {m}");
            assert_eq!(u(m, "delta"), sent, "member {i}: {m}");
            assert_eq!(m["matches"], true, "member {i}: {m}");
        }
    }
    assert_eq!(so["matches"], false, "{so}");
    assert_eq!(code, 3, "--strict on a differing count: {err}");
}
