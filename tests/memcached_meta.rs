//! memcached's meta protocol (`?protocol=meta`: `mg`/`ms`/`md`), for real: every op counted by
//! memcached's own `stats` exactly as loadgen counted it, read-your-writes `--verify` at depth 1
//! and 16, and a multi-get of quiet `mg`s counted per key. The keys are this process's own
//! (`common::kv::McKeys`), removed after.

mod common;
use common::kv::*;
use common::*;

/// The same keys in the meta protocol.
fn meta(keys: &McKeys) -> String {
    format!("{}&protocol=meta", keys.url)
}

#[test]
fn meta_commands_are_counted_by_memcached_per_op() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "m");
    prepare(&keys.url, ROWS);
    let url = meta(&keys);
    let keys_arg = format!("1-{ROWS}");
    let own = OwnKv::before(&url);
    let (code, doc, err) = run_json(&[
        &url, "-n", "20000", "--mix", MIX, "--keys", &keys_arg, "-c", "4", "-p", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 20000);
    assert_conserved(r, &own, &["read", "delete"], &["update", "insert"], "meta");
    // Upserts are `ms ... MS`: with no other storage op in the mix, cmd_set is theirs.
    let own = OwnKv::before(&url);
    let (code, doc, err) = run_json(&[
        &url,
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
    assert_conserved(
        &doc["runs"][0],
        &own,
        &["read", "upsert"],
        &[],
        "meta upsert",
    );
}

#[test]
fn meta_reads_its_own_writes_at_depth_1_and_16() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "r");
    let url = meta(&keys);
    let reload = || {
        let p = keys.prefix.clone();
        memcached_noreply(
            &keys.hostport,
            (501..=20_000).map(|id| format!("delete {p}{id}")),
        )
        .expect("memcached deletes");
        prepare(&keys.url, 500);
    };
    assert_reads_own_writes(&url, &reload, "meta");
}

/// `--batch 10` over twice the loaded keys: quiet `mg`s leave the misses out, and loadgen's
/// key hits and misses are memcached's own get_hits and get_misses, read by the test.
#[test]
fn a_meta_multi_get_is_counted_per_key_by_memcached() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let keys = McKeys::new(&base, "b");
    prepare(&keys.url, 1000);
    let url = meta(&keys);
    let stat = |name| memcached_stat(&base, name);
    let (hits0, misses0) = (stat("get_hits"), stat("get_misses"));
    let (code, doc, err) = run_json(&[
        &url, "-n", "2000", "--batch", "10", "--keys", "1-2000", "--verify", "-c", "2", "-p", "4",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let (hits, misses) = (stat("get_hits") - hits0, stat("get_misses") - misses0);
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(u(r, "keys.keys"), 20_000, "{r}");
    assert_eq!(
        u(r, "keys.hits"),
        hits,
        "memcached's get_hits moved by {hits}"
    );
    assert_eq!(
        u(r, "keys.misses"),
        misses,
        "memcached's get_misses moved by {misses}"
    );
    assert!(hits > 5000 && misses > 5000, "hits {hits} misses {misses}");
    let so = &r["server_observed"];
    assert_eq!(
        (u(so, "delta"), so["matches"].as_bool()),
        (20_000, Some(true)),
        "{so}"
    );
    assert_schema_valid(&doc);
}

#[test]
fn an_unknown_memcached_protocol_is_one_line_exit_2() {
    let out = run(&["run", "memcache://127.0.0.1:1/?protocol=binary", "-n", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("?protocol=binary: memcached speaks protocol=text (get/set, the default) or protocol=meta"),
        "{err}"
    );
}
