//! Sharded SQL against the real PostgreSQL: two databases of the test server (our own, created
//! here) are two shards, `?keys=1-5000` and `?keys=5001-10000`. Each shard's own count is read
//! by the test in its own database (pg_stat_statements filtered by database), never through
//! loadgen. Needs `eval "$(scripts/servers.sh env)"`; without LOADGEN_PG_URL every test prints
//! a note and passes, except under LOADGEN_REQUIRE_SERVERS=1.

mod common;

use std::time::Duration;

use common::{one_error_line, psql, run, run_json, server, u, TempDir};
use serde_json::Value;

const LOOKUP: &str = "SELECT user_name, user_email, created FROM usr WHERE user_id = $1";
const MULTI_GET: &str =
    "SELECT user_id, user_name, user_email, created FROM usr WHERE user_id = ANY($1)";

/// The two shard databases, created (with pg_stat_statements) and loaded by `loadgen prepare`
/// with ids 1-10000 split at 5000; the shard URLs with their `?keys=`, and without.
fn shards(url: &str) -> ([String; 2], [String; 2]) {
    let (base, _) = url.rsplit_once('/').expect("url names a database");
    let dbs = ["lg_shard_t1", "lg_shard_t2"].map(|db| {
        let exists = format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'");
        if psql(url, &exists) == "0" {
            psql(url, &format!("CREATE DATABASE {db}"));
        }
        let plain = format!("{base}/{db}");
        psql(&plain, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
        plain
    });
    let keyed = [
        format!("{}?keys=1-5000", dbs[0]),
        format!("{}?keys=5001-10000", dbs[1]),
    ];
    let out = run(&["prepare", &keyed[0], &keyed[1], "--rows", "10000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Each shard holds its range and nothing else.
    let held = |db: &str| {
        psql(
            db,
            "SELECT min(user_id) || '-' || max(user_id) || ' ' || count(*) FROM usr",
        )
    };
    assert_eq!(held(&dbs[0]), "1-5000 5000");
    assert_eq!(held(&dbs[1]), "5001-10000 5000");
    (keyed, dbs)
}

/// A statement's calls in the database of `db` alone, read by the test.
fn calls(db: &str, query: &str) -> u64 {
    let sql = format!(
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query = '{query}' \
         AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
    );
    psql(db, &sql).parse().unwrap()
}

fn members(r: &Value) -> &Vec<Value> {
    r["server_observed"]["members"].as_array().expect("members")
}

#[test]
fn each_lookup_goes_to_the_shard_that_holds_its_id() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (keyed, dbs) = shards(&url);
    let before = dbs.each_ref().map(|d| calls(d, LOOKUP));
    let (code, doc, err) = run_json(&[
        &keyed[0], &keyed[1], "-n", "20000", "-c", "8", "--keys", "1-10000", "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(
        (u(r, "requests"), u(r, "hits"), u(r, "error_total")),
        (20000, 20000, 0)
    );
    let own: Vec<u64> = (0..2).map(|i| calls(&dbs[i], LOOKUP) - before[i]).collect();
    // Warm-up included: the server saw what loadgen sent, in total and shard by shard.
    let so = &r["server_observed"];
    assert_eq!(so["matches"], true, "{so}");
    assert_eq!(u(so, "delta"), own[0] + own[1], "{so}");
    for (i, m) in members(r).iter().enumerate() {
        assert_eq!(u(m, "delta"), own[i], "shard {i}: {m}");
        assert_eq!(u(m, "expected"), own[i], "shard {i}: {m}");
        assert_eq!(m["matches"], true, "{m}");
        // Uniform keys split evenly over two equal ranges.
        let share = m["share"].as_f64().unwrap();
        assert!((0.4..0.6).contains(&share), "shard {i}: {m}");
        assert!(m["latency"]["p50"].as_f64().unwrap() > 0.0, "{m}");
        let want = ["lg_shard_t1?keys=1-5000", "lg_shard_t2?keys=5001-10000"][i];
        assert!(m["server"].as_str().unwrap().ends_with(want), "{m}");
    }
    // Both shards are databases of one server: its CPU is read once, as the set's.
    let cpu = &r["server_cpu"];
    assert!(
        cpu["per_request_us"].as_f64().is_some_and(|x| x > 0.0),
        "{cpu}"
    );
}

#[test]
fn a_multi_get_is_one_statement_per_shard_it_reads() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (keyed, dbs) = shards(&url);
    let before = dbs.each_ref().map(|d| calls(d, MULTI_GET));
    let (code, doc, err) = run_json(&[
        &keyed[0], &keyed[1], "-n", "5000", "-c", "4", "--batch", "10", "--keys", "1-10000",
        "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 5000);
    assert_eq!(u(r, "keys.keys"), 50000, "{}", r["keys"]);
    assert_eq!(u(r, "keys.hits"), 50000, "{}", r["keys"]);
    let own: Vec<u64> = (0..2)
        .map(|i| calls(&dbs[i], MULTI_GET) - before[i])
        .collect();
    let so = &r["server_observed"];
    assert_eq!(so["matches"], true, "{so}");
    // Ten uniform keys over two shards nearly always read both: about two statements each.
    let statements = own[0] + own[1];
    assert_eq!(
        (u(so, "delta"), u(so, "expected")),
        (statements, statements),
        "{so}"
    );
    assert!(statements > 9000, "{so}");
    for (i, m) in members(r).iter().enumerate() {
        assert_eq!((u(m, "delta"), u(m, "expected")), (own[i], own[i]), "{m}");
    }
}

#[test]
fn a_shard_that_goes_away_fails_only_its_keys_and_comes_back() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (keyed, dbs) = shards(&url);
    let before = dbs.each_ref().map(|d| calls(d, LOOKUP));
    let args: Vec<String> = [
        &keyed[0],
        &keyed[1],
        "-d",
        "5s",
        "--warmup",
        "0s",
        "-c",
        "4",
        "--keys",
        "1-10000",
        "--timeout",
        "2s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let runner = std::thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run_json(&a)
    });
    std::thread::sleep(Duration::from_millis(1500));
    // The second shard's database refuses connections and drops loadgen's: its keys fail.
    psql(&url, "ALTER DATABASE lg_shard_t2 ALLOW_CONNECTIONS false");
    psql(
        &url,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = 'lg_shard_t2' AND application_name = 'loadgen'",
    );
    std::thread::sleep(Duration::from_millis(1500));
    psql(&url, "ALTER DATABASE lg_shard_t2 ALLOW_CONNECTIONS true");
    let back = calls(&dbs[1], LOOKUP);
    let (code, doc, err) = runner.join().unwrap();
    let after = calls(&dbs[1], LOOKUP);
    let r = &doc["runs"][0];
    assert_eq!(code, 1, "errors were seen: {err}");
    assert!(u(r, "error_total") > 0, "{r}");
    // The first shard never noticed: everything routed to it was served.
    let m = members(r);
    let first = calls(&dbs[0], LOOKUP) - before[0];
    assert_eq!(
        (u(&m[0], "delta"), u(&m[0], "expected")),
        (first, first),
        "{}",
        m[0]
    );
    assert!(first > 1000, "{}", m[0]);
    // The second shard's connections came back once it let them in again.
    assert!(
        after > back + 100,
        "shard 2 served {} lookups after it came back",
        after - back
    );
}

#[test]
fn a_repeat_runs_the_same_shards() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (keyed, _) = shards(&url);
    let dir = TempDir::new("loadgen-shards");
    let first = dir.join("first.json");
    let first = first.to_str().unwrap();
    let out = run(&[
        "run", &keyed[0], &keyed[1], "-n", "1000", "--keys", "1-10000", "-q", "-o", first,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, doc, err) = run_json(&["--repeat", first, "-n", "500"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 500);
    assert_eq!(r["server_observed"]["matches"], true, "{r}");
    assert_eq!(members(r).len(), 2, "{r}");
}

#[test]
fn bad_shard_sets_get_one_line_and_exit_2() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (base, _) = url.rsplit_once('/').unwrap();
    let a = format!("{base}/lg_shard_t1?keys=1-5000");
    let cases: [(Vec<String>, &str); 4] = [
        (
            vec![a.clone(), format!("{base}/lg_shard_t2?keys=5002-10000")],
            "should start at 5001",
        ),
        (
            vec![
                a.clone(),
                format!("{base}/lg_shard_t2?keys=5001-10000"),
                "--txn".into(),
                "2".into(),
                "--mix".into(),
                "read=50,update=50".into(),
            ],
            "would span shards",
        ),
        (
            vec![a.clone(), "memcache://127.0.0.1:1?keys=5001-10000".into()],
            "one protocol",
        ),
        (
            vec!["memcache://127.0.0.1:1?keys=1-10".into()],
            "memcached pools and Redis Cluster place keys themselves",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["run"];
        all.extend(args.iter().map(String::as_str));
        all.extend(["-n", "10"]);
        let out = run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(one_error_line(&stderr).contains(want), "{all:?}: {stderr}");
    }
}

#[test]
fn mariadb_shards_must_be_servers_of_their_own() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let (a, b) = (format!("{url}?keys=1-10"), format!("{url}?keys=11-20"));
    let out = run(&["run", &a, &b, "-n", "10"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        one_error_line(&stderr).contains("give each shard a server of its own"),
        "{stderr}"
    );
}
