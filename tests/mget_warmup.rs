//! Multi-gets with a warm-up: the warm-up's keys are sent (the server counts them) but not
//! measured (the report leaves them out). `--batch 10 -d 2s --warmup 1s` and `mget:10` in a
//! mix, with the server's own counter read here by the test: keys measured are exactly 10 per
//! measured request, and the server saw the measured and the warm-up requests' keys together.

mod common;
use common::*;

const BATCH: &[&str] = &[
    "--batch", "10", "-d", "2s", "--warmup", "1s", "-c", "4", "--keys", "1-100000",
];

/// A `--batch 10` run with a warm-up against `url`: returns (measured requests, warm-up
/// requests, keys measured) after checking every measured request carried its 10 keys.
fn batch_run(url: &str) -> (u64, u64, u64) {
    let (code, doc, err) = run_json(&[&[url], BATCH].concat());
    // Without --strict the verdict does not move the exit code: 0 is the only right one.
    assert_eq!(code, 0, "{url}: {err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{url}: {}", r["errors"]);
    let (requests, warm) = (u(r, "requests"), u(r, "warmup_requests"));
    assert!(warm > 0, "{url}: a 1 s warm-up sent nothing: {r}");
    assert_eq!(u(r, "keys.batch"), 10, "{url}");
    assert_eq!(
        u(r, "keys.keys"),
        10 * requests,
        "{url}: keys measured: {}",
        r["keys"]
    );
    assert_eq!(
        r["server_observed"]["matches"], true,
        "{url}: {}",
        r["server_observed"]
    );
    assert_schema_valid(&doc);
    (requests, warm, u(r, "keys.keys"))
}

/// memcached counts keys: 10 per multi-get, warm-up included.
#[test]
fn memcached_batch_with_warmup() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let seen = OwnCount::before("memcached get_hits+get_misses", &url);
    let (requests, warm, _) = batch_run(&url);
    assert_eq!(
        seen.delta(),
        10 * (requests + warm),
        "memcached's own get_hits+get_misses"
    );
}

/// Redis counts commands: one MGET per multi-get, warm-up included.
#[test]
fn redis_batch_with_warmup() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let before = redis_calls("mget");
    let (requests, warm, _) = batch_run(&url);
    assert_eq!(
        redis_calls("mget") - before,
        requests + warm,
        "Redis' own cmdstat_mget"
    );
}

/// HandlerSocket counts index reads: one per key, warm-up included.
#[test]
fn handlersocket_batch_with_warmup() {
    let Some(url) = server("LOADGEN_HS_URL") else {
        return;
    };
    // HandlerSocket has no counters of its own: MariaDB's, over SQL.
    let url = format!("{url}?mysql={}", env("LOADGEN_MY_URL"));
    let seen = OwnCount::before("global status Handler_read_key", &url);
    let (requests, warm, _) = batch_run(&url);
    assert_eq!(
        seen.delta(),
        10 * (requests + warm),
        "MariaDB's own Handler_read_key"
    );
}

/// `mget:10` beside one-key reads, with a warm-up, on Redis, which counts the two apart: each
/// op's server count is the test's own read of its command, warm-up included, and the keys
/// line counts only the measured multi-gets' keys.
#[test]
fn redis_mget_in_a_mix_with_warmup() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (get, mget) = (redis_calls("get"), redis_calls("mget"));
    let (code, doc, err) = run_json(&[
        &url,
        "--mix",
        "read=50,mget:10=50",
        "-d",
        "2s",
        "--warmup",
        "1s",
        "-c",
        "4",
        "--keys",
        "1-100000",
    ]);
    // Without --strict the verdict does not move the exit code: 0 is the only right one.
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{}", r["errors"]);
    assert!(u(r, "warmup_requests") > 0, "{r}");
    let (gets, mgets) = (redis_calls("get") - get, redis_calls("mget") - mget);
    let measured = u(r, "ops.mget.hits") + u(r, "ops.mget.misses");
    assert_eq!(u(r, "keys.keys"), 10 * measured, "{}", r["keys"]);
    assert_eq!(
        u(r, "ops.mget.server_observed.delta"),
        mgets,
        "{}",
        r["ops"]["mget"]
    );
    assert_eq!(
        u(r, "ops.read.server_observed.delta"),
        gets,
        "{}",
        r["ops"]["read"]
    );
    // The warm-up's requests were sent, counted by Redis, and left out of the measured ones.
    let total = u(r, "requests") + u(r, "warmup_requests");
    assert_eq!(gets + mgets, total, "Redis' own get and mget calls");
    assert!(
        mgets > u(r, "ops.mget.requests"),
        "the warm-up sent no mget: {}",
        r["ops"]
    );
    assert!(
        gets > u(r, "ops.read.requests"),
        "the warm-up sent no get: {}",
        r["ops"]
    );
    assert_schema_valid(&doc);
}
