//! `mget:N` as an op of `--mix`: multi-gets of N keys next to one-key reads (and writes) on
//! every target with a multi-get. Each test reads the server's own counters itself, with the
//! server's own client or protocol, and checks them against loadgen's per-op counts: a
//! one-key read adds one, a multi-get one call or N keys, as the server counts.

mod common;

use common::*;
use serde_json::Value;

const MIX: &[&str] = &[
    "--mix",
    "read=50,mget:10=50",
    "-n",
    "2000",
    "-c",
    "4",
    "-p",
    "4",
    "--warmup",
    "0s",
    "--verify",
];

/// A run of `MIX` (plus `extra`) against `url` (None: the embedded target): clean, every read
/// and every key of every multi-get a verified hit, and loadgen's server count matching where
/// it has one; returns (reads, multi-gets, run).
fn mixed(url: Option<&str>, extra: &[&str]) -> (u64, u64, Value) {
    let mut args: Vec<&str> = url.into_iter().collect();
    args.extend_from_slice(MIX);
    args.extend_from_slice(extra);
    let (code, doc, err) = run_json(&args);
    assert_eq!(code, 0, "{err}");
    let r = doc["runs"][0].clone();
    assert_eq!(u(&r, "error_total"), 0, "{}", r["errors"]);
    let (reads, mgets) = (u(&r, "ops.read.requests"), u(&r, "ops.mget.requests"));
    assert_eq!(reads + mgets, 2000, "{}", r["ops"]);
    assert!(reads > 800 && mgets > 800, "{}", r["ops"]);
    assert_eq!(u(&r, "ops.read.hits"), reads);
    assert_eq!(u(&r, "ops.mget.hits"), mgets);
    // The keys line counts the multi-gets' keys only: ten each, all found and verified.
    assert_eq!(u(&r, "keys.batch"), 10);
    assert_eq!((u(&r, "keys.hits"), u(&r, "keys.misses")), (mgets * 10, 0));
    if !r["server_observed"].is_null() {
        assert_eq!(
            r["server_observed"]["matches"], true,
            "{}",
            r["server_observed"]
        );
    }
    assert_eq!(doc["settings"]["mix"], "read=50,mget:10=50");
    assert_schema_valid(&doc);
    (reads, mgets, r)
}

#[test]
fn memcached_counts_each_key_of_a_multi_get() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let gets = || memcached_stat(&url, "get_hits") + memcached_stat(&url, "get_misses");
    let before = gets();
    let (reads, mgets, r) = mixed(Some(&url), &[]);
    let keys = reads + 10 * mgets;
    assert_eq!(gets() - before, keys, "memcached's own get_hits+get_misses");
    assert_eq!(u(&r, "server_observed.delta"), keys);
    assert_eq!(u(&r, "server_observed.expected"), keys);
}

#[test]
fn redis_counts_gets_and_mgets_apart() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (get, mget) = (redis_calls("get"), redis_calls("mget"));
    let (reads, mgets, r) = mixed(Some(&url), &[]);
    assert_eq!(redis_calls("get") - get, reads, "Redis' own cmdstat_get");
    assert_eq!(redis_calls("mget") - mget, mgets, "Redis' own cmdstat_mget");
    assert_eq!(u(&r, "ops.read.server_observed.delta"), reads);
    assert_eq!(u(&r, "ops.mget.server_observed.delta"), mgets);
    assert_eq!(r["ops"]["mget"]["server_observed"]["matches"], true);
}

#[test]
fn postgres_prepares_the_multi_get_as_a_statement_of_its_own() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let lookup = "SELECT user_name, user_email, created FROM usr WHERE user_id = $1";
    let multi = "SELECT user_id, user_name, user_email, created FROM usr WHERE user_id = ANY($1)";
    let (one, many) = (pg_statement_calls(lookup), pg_statement_calls(multi));
    let (reads, mgets, r) = mixed(Some(&url), &[]);
    assert_eq!(
        pg_statement_calls(lookup) - one,
        reads,
        "the lookup's calls"
    );
    assert_eq!(
        pg_statement_calls(multi) - many,
        mgets,
        "the multi-get's calls"
    );
    assert_eq!(u(&r, "ops.mget.server_observed.delta"), mgets);
    assert_eq!(u(&r, "server_observed.delta"), reads + mgets);
}

#[test]
fn mariadb_and_handlersocket_count_every_execute_and_every_key() {
    let (Some(my), Some(hs)) = (server("LOADGEN_MY_URL"), server("LOADGEN_HS_URL")) else {
        return;
    };
    let executes = mariadb_status("Com_stmt_execute");
    let (reads, mgets, r) = mixed(Some(&my), &[]);
    assert_eq!(mariadb_status("Com_stmt_execute") - executes, reads + mgets);
    assert_eq!(u(&r, "server_observed.delta"), reads + mgets);

    // HandlerSocket: an IN list reads the index once per key.
    let hs = format!("{hs}?mysql={}", urlencode(&my));
    let read_key = mariadb_status("Handler_read_key");
    let (reads, mgets, r) = mixed(Some(&hs), &[]);
    let keys = reads + 10 * mgets;
    assert_eq!(mariadb_status("Handler_read_key") - read_key, keys);
    assert_eq!(u(&r, "server_observed.delta"), keys);
}

#[test]
fn the_embedded_server_counts_multi_get_keys_apart() {
    // `loadgen serve` in a process of its own, whose /stats the test reads itself.
    let served = Served::start(10_000);
    let stat = |name: &str| -> u64 {
        let body = http_get(&host_port(&served.url), "/stats").body;
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /stats: {body}"))
    };
    let (reads, mgets, _) = mixed(Some(&served.url), &["--keys", "1-10000"]);
    assert_eq!(stat("multi_get_keys"), 10 * mgets);
    assert_eq!(stat("hits"), reads + 10 * mgets);

    // In loadgen's own process: its server count, per op.
    let (reads, mgets, r) = mixed(None, &[]);
    assert_eq!(u(&r, "ops.mget.server_observed.delta"), 10 * mgets);
    assert_eq!(u(&r, "ops.read.server_observed.delta"), reads);
    assert_eq!(u(&r, "server_observed.delta"), reads + 10 * mgets);
}

/// Multi-gets next to writes: each op its own count (memcached: the keys of the multi-gets,
/// and the sets), a Redis MGET per multi-get. The writes go to keys of the test's own (a key
/// prefix of this process on memcached, database 13 on Redis), which expire within a minute:
/// the shared data set, which other tests verify, is never touched.
#[test]
fn multi_gets_mix_with_writes() {
    let (Some(mc), Some(redis)) = (server("LOADGEN_MC_URL"), server("LOADGEN_REDIS_URL")) else {
        return;
    };
    let args = |url: &str| -> Value {
        let (code, doc, err) = run_json(&[
            url,
            "--mix",
            "mget:5=80,upsert=20",
            "-n",
            "2000",
            "-c",
            "4",
            "--warmup",
            "0s",
            "--keys",
            "1-2000",
            "--ttl",
            "60",
        ]);
        assert_eq!(code, 0, "{err}");
        let r = doc["runs"][0].clone();
        assert_eq!(u(&r, "error_total"), 0, "{}", r["errors"]);
        r
    };
    let mc_own = format!("{mc}/?prefix=mgw{}:", std::process::id());
    let (sets, gets) = (
        memcached_stat(&mc, "cmd_set"),
        memcached_stat(&mc, "get_hits") + memcached_stat(&mc, "get_misses"),
    );
    let r = args(&mc_own);
    let (mgets, upserts) = (u(&r, "ops.mget.requests"), u(&r, "ops.upsert.requests"));
    assert_eq!(mgets + upserts, 2000);
    assert!(upserts > 200 && mgets > 1200, "{}", r["ops"]);
    assert_eq!(memcached_stat(&mc, "cmd_set") - sets, upserts);
    let keys = memcached_stat(&mc, "get_hits") + memcached_stat(&mc, "get_misses") - gets;
    assert_eq!(keys, 5 * mgets, "memcached's own get_hits+get_misses");
    assert_eq!(u(&r, "ops.mget.server_observed.delta"), 5 * mgets);
    assert_eq!(
        r["server_observed"]["matches"], true,
        "{}",
        r["server_observed"]
    );

    redis_cli(&["-n", "13", "FLUSHDB"]);
    let mget = redis_calls("mget");
    let r = args(&format!("{redis}/13"));
    assert_eq!(redis_calls("mget") - mget, u(&r, "ops.mget.requests"));
    assert_eq!(
        r["server_observed"]["matches"], true,
        "{}",
        r["server_observed"]
    );
    redis_cli(&["-n", "13", "FLUSHDB"]);
}
