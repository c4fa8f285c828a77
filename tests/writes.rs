//! Writes and read/write mixes (`--mix`), on real servers: each op counted by the server exactly
//! as loadgen counted it, read-your-writes `--verify`, and concurrent insert sequences that never
//! collide. Writes touch only keys these tests own (their own server, or a range no other test
//! reads), never the shared 1..1000000 rows.

mod common;
#[path = "writes/txn.rs"]
mod txn;
use common::*;
use serde_json::Value;

const MIX: &str = "read=50,update=30,insert=10,delete=10";

#[test]
fn embedded_conserves_every_op() {
    let (code, doc, err) = run_json(&[
        "-n", "20000", "--mix", MIX, "--keys", "1-100000", "-c", "8", "-p", "4",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 20000);
    assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
    assert_ops_conserved(r, &["read", "update", "insert", "delete"], None, "embedded");
    // Every insert took a new key: none found a row there already.
    assert_eq!(u(&r["ops"]["insert"], "misses"), 0);
    assert_eq!(
        u(&r["ops"]["insert"], "hits"),
        u(&r["ops"]["insert"], "requests")
    );
    // Updates and deletes of loaded rows mostly hit (a few keys were deleted first).
    assert!(u(&r["ops"]["update"], "hits") * 10 > u(&r["ops"]["update"], "requests") * 9);
    assert_eq!(doc["settings"]["mix"], MIX);
    assert_schema_valid(&doc);
}

#[test]
fn read_only_results_keep_their_shape() {
    let (code, doc, err) = run_json(&["-n", "2000", "--keys", "1-1000"]);
    assert_eq!(code, 0, "{err}");
    assert!(doc["runs"][0].get("ops").is_none(), "{}", doc["runs"][0]);
    assert!(doc["settings"].get("mix").is_none());
    // An explicit read-only mix is the default.
    let (code, doc, err) = run_json(&["-n", "2000", "--keys", "1-1000", "--mix", "read=7"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 2000);
    assert!(doc["runs"][0].get("ops").is_none());
}

/// Read-your-writes with every op at `-c 1 -p 1`, `-c 1 -p 16` and `-c C -p 16` over 500 keys
/// from `first`: no verify error, and most reads come after a write or a delete of their key
/// (rows written and misses of deleted rows were both checked).
fn assert_reads_own_writes(target: &[&str], first: u64, n: &str, many: &str) {
    let keys = format!("{first}-{}", first + 499);
    for (c, p) in [("1", "1"), ("1", "16"), (many, "16")] {
        let mut args = target.to_vec();
        args.extend_from_slice(&[
            "-n",
            n,
            "--keys",
            &keys,
            "--mix",
            "read=50,update=20,insert=10,delete=10,upsert=10",
            "--verify",
            "-c",
            c,
            "-p",
            p,
        ]);
        let own = OwnOps::before(target.first().unwrap_or(&"embedded"));
        let (code, doc, err) = run_json(&args);
        let r = &doc["runs"][0];
        let context = format!("{target:?} -c {c} -p {p}");
        assert_eq!(code, 0, "{context}: {err} {}", r["error_samples"]);
        assert_eq!(u(r, "error_total"), 0, "{context}");
        let reads = u(&r["ops"]["read"], "requests");
        assert!(
            u(&r["ops"]["read"], "misses") * 10 > reads,
            "{}",
            r["ops"]["read"]
        );
        assert!(
            u(&r["ops"]["read"], "hits") * 10 > reads,
            "{}",
            r["ops"]["read"]
        );
        assert_ops_conserved(r, &OPS, own.as_ref(), &context);
    }
}

#[test]
fn embedded_reads_its_own_writes_at_depth_1_and_16() {
    assert_reads_own_writes(&[], 1, "20000", "8");
}

#[test]
fn written_rows_are_what_verify_checks() {
    let served = Served::start(100);
    let rw = |seed: &str| {
        run_json(&[
            &served.url,
            "-n",
            "2000",
            "--keys",
            "1-100",
            "--mix",
            "read=50,update=50",
            "--verify",
            "-c",
            "1",
            "--seed",
            seed,
        ])
    };
    let (code, doc, err) = rw("1");
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "error_total"), 0);
    // Another run reads rows the first one wrote (any version passes for a key it has not
    // written itself), then its own versions.
    let (code, doc, err) = rw("2");
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "error_total"), 0);
    // A read-only --verify run expects the loaded rows: the written ones are verify errors,
    // so the written values really are checked, and really were stored.
    let (code, doc, _) = run_json(&[
        &served.url,
        "-n",
        "500",
        "--keys",
        "1-100",
        "--verify",
        "-c",
        "1",
    ]);
    assert_eq!(code, 1);
    assert!(
        u(&doc["runs"][0], "errors.verify") > 400,
        "{}",
        doc["runs"][0]
    );
}

#[test]
fn a_target_that_cannot_write_refuses_the_mix_in_preflight() {
    // HandlerSocket's read port: writes go to its write port.
    let Some(url) = server("LOADGEN_HS_URL") else {
        return;
    };
    let out = run(&["run", &url, "-n", "10", "--mix", "read=90,update=10"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("cannot update"), "{err}");
}

#[test]
fn concurrent_instances_insert_without_collision() {
    let served = Served::start(1000);
    let insert = |instance: &'static str, url: String| {
        std::thread::spawn(move || {
            run_json(&[
                &url,
                "-n",
                "5000",
                "--keys",
                "1-1000",
                "--mix",
                "insert=100",
                "--instance",
                instance,
                "-c",
                "4",
            ])
        })
    };
    let a = insert("a", served.url.clone());
    let b = insert("b", served.url.clone());
    let mut total = 0;
    for (name, h) in [("a", a), ("b", b)] {
        let (code, doc, err) = h.join().unwrap();
        assert_eq!(code, 0, "{name}: {err}");
        let o = &doc["runs"][0]["ops"]["insert"];
        // A collision is an insert over a row already there: a miss.
        assert_eq!(u(o, "misses"), 0, "{name}: {o}");
        assert_eq!(u(o, "hits"), 5000, "{name}: {o}");
        total += u(o, "hits");
    }
    // The server holds every insert: the same runs again (same instances, same start) now
    // collide with the rows the first ones inserted, unless told where to continue.
    let hostport = host_port(&served.url);
    let stats = http_get(&hostport, "/stats");
    assert!(
        stats.body.contains(&format!("inserts {total}\n")),
        "{}",
        stats.body
    );
    let (code, doc, err) = run_json(&[
        &served.url,
        "-n",
        "1000",
        "--keys",
        "1-1000",
        "--mix",
        "insert=100",
        "--instance",
        "a",
        "--insert-from",
        "100000000",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0]["ops"]["insert"], "misses"), 0);
}

#[test]
fn a_bad_mix_is_one_line_and_exit_2() {
    for bad in ["read=90,write=10", "read", "read=0", "update=1,update=2"] {
        let out = run(&["run", "-n", "10", "--mix", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(one_error_line(&err).contains("bad --mix"), "{bad}: {err}");
    }
}

/// Rows 5,000,001..5,100,000 of `usr`, which no other test reads: loaded here, removed after
/// (inserts land above them), so the shared 1..1,000,000 rows are never written.
const PG_KEYS: &str = "5000001-5100000";

struct PgRows(String);

impl PgRows {
    fn load(url: &str) -> PgRows {
        psql(
            url,
            "DELETE FROM usr WHERE user_id > 5000000; \
             INSERT INTO usr SELECT g, 'user' || g, 'user' || g || '@example.com', \
             timestamp '2010-02-03 11:22:33' + g * interval '1 second' \
             FROM generate_series(5000001, 5100000) g",
        );
        PgRows(url.to_string())
    }

    /// None of the test's rows: every key above 5,000,000 is free to insert.
    fn none(url: &str) -> PgRows {
        psql(url, "DELETE FROM usr WHERE user_id > 5000000");
        PgRows(url.to_string())
    }
}

/// Rows above `from`, and the transactions that wrote them: each stamps its rows with its own
/// xmin, so distinct xmins are commits, counted on these rows alone whatever else the server runs.
fn pg_commits(url: &str, from: u64) -> (u64, u64) {
    let got = psql(
        url,
        &format!("SELECT count(*), count(DISTINCT xmin::text) FROM usr WHERE user_id > {from}"),
    );
    let (rows, xids) = got.split_once('|').expect("two columns");
    (rows.parse().unwrap(), xids.parse().unwrap())
}

impl Drop for PgRows {
    fn drop(&mut self) {
        psql(&self.0, "DELETE FROM usr WHERE user_id > 5000000");
    }
}

#[test]
fn postgres_conserves_every_op_and_reads_its_own_writes() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    pg_conserves_every_op(&url, &url);
}

#[test]
fn postgres_tokio_conserves_every_op_and_reads_its_own_writes() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    pg_conserves_every_op(&url, &with(&url, "driver=tokio"));
}

/// Conservation per op on `target` (`url` with a driver) over the test's own rows, inserts
/// above them, the durability settings reported, then read-your-writes `--verify`.
fn pg_conserves_every_op(url: &str, target: &str) {
    let _rows = PgRows::load(url);
    let own = OwnOps::before(target);
    let (code, doc, err) = run_json(&[
        target, "-n", "20000", "--mix", MIX, "--keys", PG_KEYS, "-c", "8", "-p", "4",
    ]);
    assert_eq!(code, 0, "{target}: {err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
    assert_ops_conserved(
        r,
        &["read", "update", "insert", "delete"],
        own.as_ref(),
        target,
    );
    assert_eq!(u(&r["ops"]["insert"], "misses"), 0);
    // Inserts started above the loaded rows: max(user_id) + 1.
    let max: u64 = psql(url, "SELECT max(user_id) FROM usr").parse().unwrap();
    assert!(max > 5_100_000, "{max}");
    let inserted: u64 = psql(url, "SELECT count(*) FROM usr WHERE user_id > 5100000")
        .parse()
        .unwrap();
    assert_eq!(inserted, u(&r["ops"]["insert"], "hits"));
    // The settings that decide a write's cost, as the server reports them.
    let sync = psql(url, "SHOW synchronous_commit");
    assert_eq!(
        r["durability"]["synchronous_commit"],
        sync.as_str(),
        "{}",
        r["durability"]
    );
    assert!(r["durability"]["wal_sync_method"].is_string());
    assert_schema_valid(&doc);
    assert_reads_own_writes(&[target], 5_000_001, "10000", "4");
}

#[test]
fn postgres_user_write_statements_are_checked() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let out = run(&[
        "run",
        &url,
        "-n",
        "10",
        "--mix",
        "update=1",
        "--query-update",
        "UPDATE usr SET user_name = 'x' WHERE user_id = $1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--query-update must use $2"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // The tokio driver's simple mode inlines a lookup's key; it does not write.
    let tokio = with(&url, "driver=tokio");
    let out = run(&[
        "run", &tokio, "-n", "10", "--mix", "update=1", "--mode", "simple",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--mode simple runs lookups only"), "{err}");
}

/// Autocommit is one transaction per write, also pipelined: 2,000 inserts at -p 8 are 2,000
/// commits on both drivers (one Sync per batch would make them 250).
#[test]
fn postgres_autocommit_commits_every_write() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    for target in [url.clone(), with(&url, "driver=tokio")] {
        let _rows = PgRows::none(&url);
        let (code, doc, err) = run_json(&[
            &target,
            "-n",
            "2000",
            "--mix",
            "read=20,insert=80",
            "--insert-from",
            "5200001",
            "-c",
            "2",
            "-p",
            "8",
        ]);
        assert_eq!(code, 0, "{target}: {err}");
        let inserts = u(&doc["runs"][0]["ops"]["insert"], "hits");
        assert!(inserts > 1400, "{target}: {inserts}");
        assert_eq!(pg_commits(&url, 5_000_000), (inserts, inserts), "{target}");
    }
}

/// `psql` of rows `from..=to` of the data set (version 0), the test's own.
fn pg_insert_rows(url: &str, from: u64, to: u64) {
    psql(
        url,
        &format!(
            "INSERT INTO usr SELECT g, 'user' || g, 'user' || g || '@example.com', \
             timestamp '2010-02-03 11:22:33' + g * interval '1 second' \
             FROM generate_series({from}, {to}) g"
        ),
    );
}

/// The drivers and depths the error and transaction tests run on.
fn pg_targets(url: &str) -> [(String, &'static str); 3] {
    [
        (url.to_string(), "1"),
        (url.to_string(), "8"),
        (with(url, "driver=tokio"), "8"),
    ]
}

/// A run of `target` with `args` at `-c 2 -p p`: its exit code, its document, and the context
/// for assertions (with stderr).
fn pg_run(target: &str, p: &str, args: &[&str]) -> (i32, Value, String) {
    let mut all = vec![target];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-c", "2", "-p", p]);
    let (code, doc, err) = run_json(&all);
    (code, doc, format!("{target} -p {p} {args:?}: {err}"))
}

/// Inserts over rows already there are `duplicate` errors, one per present key, and the other
/// inserts of the run go on (pipelined too: every autocommitted insert is its own batch).
#[test]
fn postgres_duplicate_inserts_are_counted_and_the_run_goes_on() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    for (target, p) in pg_targets(&url) {
        let _rows = PgRows::none(&url);
        pg_insert_rows(&url, 5_000_001, 5_000_100);
        // Keys 5,000,051..5,000,150: the first 50 are there.
        let args = [
            "-n",
            "100",
            "--mix",
            "insert=100",
            "--insert-from",
            "5000051",
        ];
        let (code, doc, context) = pg_run(&target, p, &args);
        assert_eq!(code, 1, "{context}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "errors.duplicate"), 50, "{context}: {}", r["errors"]);
        assert_eq!(u(r, "error_total"), 50, "{context}: {}", r["errors"]);
        assert_eq!(u(&r["ops"]["insert"], "hits"), 50, "{context}");
        assert!(
            r["error_samples"].to_string().contains("23505"),
            "{context}: {}",
            r["error_samples"]
        );
        assert_eq!(pg_commits(&url, 5_000_100), (50, 50), "{context}");
    }
}

/// A read-only session (libpq's `options` in the URL) fails every write as `readonly`; the
/// lookups beside them still hit.
#[test]
fn postgres_read_only_writes_are_counted_as_readonly() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let _rows = PgRows::none(&url);
    pg_insert_rows(&url, 5_000_001, 5_000_100);
    let ro = with(&url, "options=-c%20default_transaction_read_only%3Don");
    for (target, p) in pg_targets(&ro) {
        let args = [
            "-n",
            "400",
            "--mix",
            "read=50,update=50",
            "--keys",
            "5000001-5000100",
        ];
        let (code, doc, context) = pg_run(&target, p, &args);
        assert_eq!(code, 1, "{context}");
        let r = &doc["runs"][0];
        let updates = u(&r["ops"]["update"], "requests");
        assert!(updates > 100, "{context}: {}", r["ops"]);
        assert_eq!(
            u(r, "errors.readonly"),
            updates,
            "{context}: {}",
            r["errors"]
        );
        assert_eq!(u(r, "error_total"), updates, "{context}");
        assert_eq!(
            u(&r["ops"]["read"], "hits"),
            u(&r["ops"]["read"], "requests"),
            "{context}"
        );
    }
    // Nothing was written.
    assert_eq!(pg_commits(&url, 5_000_000), (100, 1));
}

/// `--txn 5`: each connection commits its writes 5 at a time, counted by the server on the
/// rows themselves; a connection's last transaction short of 5 writes is committed as the run
/// ends (1,003 inserts per connection: 201 transactions, 1,003 rows).
#[test]
fn postgres_txn_5_commits_every_fifth_write() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    for (target, p) in pg_targets(&url) {
        for (n, rows, commits) in [("2000", 2000, 400), ("2006", 2006, 402)] {
            let _rows = PgRows::none(&url);
            let args = [
                "-n",
                n,
                "--mix",
                "insert=100",
                "--txn",
                "5",
                "--insert-from",
                "5200001",
            ];
            let (code, doc, context) = pg_run(&target, p, &args);
            assert_eq!(code, 0, "{context}");
            let r = &doc["runs"][0];
            assert_eq!(doc["settings"]["txn"], 5, "{context}");
            assert_eq!(u(&r["ops"]["insert"], "hits"), n.parse::<u64>().unwrap());
            assert_eq!(pg_commits(&url, 5_000_000), (rows, commits), "{context}");
        }
    }
}

/// Two connections updating two keys in opposite order inside `--txn 2` deadlock; PostgreSQL
/// aborts one, which is counted as `deadlock`, and the run goes on to its end with the other
/// writes done. deadlock_timeout is lowered for these sessions so the detector runs at once.
#[test]
fn postgres_txn_deadlocks_are_counted_and_the_run_goes_on() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let _rows = PgRows::none(&url);
    pg_insert_rows(&url, 5_000_001, 5_000_002);
    let fast = with(&url, "options=-c%20deadlock_timeout%3D20ms");
    for target in [fast.clone(), with(&fast, "driver=tokio")] {
        let (code, doc, err) = run_json(&[
            &target,
            "-n",
            "1000",
            "--mix",
            "update=100",
            "--txn",
            "2",
            "--keys",
            "5000001-5000002",
            "-c",
            "2",
        ]);
        assert_eq!(code, 1, "{target}: {err}");
        let r = &doc["runs"][0];
        let deadlocks = u(r, "errors.deadlock");
        assert!(deadlocks > 0, "{target}: {}", r["errors"]);
        assert_eq!(u(r, "error_total"), deadlocks, "{target}: {}", r["errors"]);
        assert!(
            r["error_samples"].to_string().contains("40P01"),
            "{target}: {}",
            r["error_samples"]
        );
        assert_eq!(u(r, "requests"), 1000, "{target}");
        assert!(u(&r["ops"]["update"], "hits") > 500, "{target}");
    }
}
