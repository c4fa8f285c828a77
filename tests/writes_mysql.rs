//! Writes (`--mix`) on the real MariaDB: SQL on both drivers (wire and mysql_async) and
//! HandlerSocket's write port. Each op counted by the server exactly as loadgen counted it
//! (Com_update/insert/delete; HandlerSocket: Handler_write, Handler_read_key), read-your-writes
//! `--verify` at depth 1 and 16, duplicates and deadlocks counted by kind, the durability
//! settings in the result, and HandlerSocket's read port refused in preflight.
//! The rows written are this file's own, loaded here and deleted after: HandlerSocket's above
//! 70000000, SQL's above 80000000. The shared ids 1..1000000 are never touched.

mod common;
use common::*;

const FIRST: u64 = 70_000_001;
const ROWS: u64 = 10_000;

/// Runs `sql` as root in database `loadgen`; its output.
fn mariadb_loadgen(sql: &str) -> String {
    mariadb_root(&format!("USE loadgen; {sql}"))
}

/// This file's rows, deleted when dropped.
struct OwnRows;

impl Drop for OwnRows {
    fn drop(&mut self) {
        mariadb_loadgen(HS_ROWS);
    }
}

const HS_ROWS: &str = "DELETE FROM usr WHERE user_id > 70000000 AND user_id <= 80000000";

/// The write port's URL, with the MariaDB URL that reads the server's counters.
fn hs_write_url() -> Option<String> {
    let hs = server("LOADGEN_HSW_URL")?;
    let my = server("LOADGEN_MY_URL")?;
    Some(format!("{hs}?mysql={}", urlencode(&my)))
}

/// Deletes this file's rows, then inserts ids FIRST..FIRST+rows-1 through HandlerSocket.
fn load(url: &str, rows: u64) -> OwnRows {
    mariadb_loadgen(HS_ROWS);
    let (code, doc, err) = run_json(&[
        url,
        "-n",
        &rows.to_string(),
        "--mix",
        "insert=100",
        "--insert-from",
        &FIRST.to_string(),
        "--keys",
        &format!("{FIRST}-{}", FIRST + rows - 1),
        "-c",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(&r["ops"]["insert"], "hits"), rows, "{}", r["ops"]);
    // Every insert is one Handler_write.
    assert_eq!(u(&r["ops"]["insert"], "server_observed.delta"), rows);
    OwnRows
}

#[test]
fn handlersocket_conserves_every_op() {
    let Some(url) = hs_write_url() else {
        return;
    };
    let _rows = load(&url, ROWS);
    let keys = format!("{FIRST}-{}", FIRST + ROWS - 1);
    let (code, doc, err) = run_json(&[
        &url,
        "-n",
        "20000",
        "--mix",
        "read=50,update=30,insert=10,delete=10",
        "--keys",
        &keys,
        "--insert-from",
        "70100001",
        "-c",
        "4",
        "-p",
        "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
    // Reads, updates and deletes each read one key: together they are Handler_read_key.
    let so = &r["server_observed"];
    assert_eq!(
        (u(so, "delta"), &so["matches"]),
        (20000, &true.into()),
        "{so}"
    );
    let ins = &r["ops"]["insert"];
    assert_eq!(u(ins, "server_observed.delta"), u(ins, "requests"), "{ins}");
    assert_eq!(u(ins, "hits"), u(ins, "requests"), "{ins}");
    for op in ["read", "update", "delete"] {
        let o = &r["ops"][op];
        assert!(u(o, "hits") * 10 > u(o, "requests") * 8, "{op}: {o}");
        assert!(o["server_observed"].is_null(), "{op}: {o}");
    }
}

#[test]
fn handlersocket_reads_its_own_writes_at_depth_1_and_16() {
    let Some(url) = hs_write_url() else {
        return;
    };
    let keys = format!("{FIRST}-{}", FIRST + 499);
    for p in ["1", "16"] {
        let _rows = load(&url, 500);
        let (code, doc, err) = run_json(&[
            &url,
            "-n",
            "20000",
            "--keys",
            &keys,
            "--mix",
            "read=50,update=30,insert=10,delete=10",
            "--insert-from",
            "70100001",
            "--verify",
            "-c",
            "4",
            "-p",
            p,
        ]);
        let r = &doc["runs"][0];
        assert_eq!(code, 0, "-p {p}: {err} {}", r["error_samples"]);
        assert_eq!(u(r, "error_total"), 0, "-p {p}");
        let read = &r["ops"]["read"];
        assert!(u(read, "hits") > 1000 && u(read, "misses") > 1000, "{read}");
    }
}

#[test]
fn the_read_port_and_upserts_are_refused_in_preflight() {
    let (Some(read_port), Some(write_port)) = (server("LOADGEN_HS_URL"), server("LOADGEN_HSW_URL"))
    else {
        return;
    };
    for (url, mix, says) in [
        (
            &read_port,
            "read=90,delete=10",
            "read-only port, which cannot delete",
        ),
        (&write_port, "read=90,upsert=10", "no upsert"),
    ] {
        let out = run(&["run", url, "-n", "10", "--mix", mix]);
        assert_eq!(out.status.code(), Some(2), "{url} {mix}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
}

/// The SQL tests' rows: ids 80000001..80000000+SQL_ROWS as loaded, inserts above them.
const SQL_FIRST: u64 = 80_000_001;
const SQL_ROWS: u64 = 10_000;
const SQL_KEYS: &str = "80000001-80010000";
const SQL_MIX: &str = "read=50,update=30,insert=10,delete=10";

/// The SQL tests' rows, deleted when dropped.
struct SqlRows;

impl SqlRows {
    /// Deletes every row above 80000000, then loads ids 80000001..80010000 as `prepare` would.
    fn load() -> SqlRows {
        mariadb_loadgen(&format!(
            "DELETE FROM usr WHERE user_id > 80000000; \
             INSERT INTO usr SELECT seq, CONCAT('user', seq), CONCAT('user', seq, '@example.com'), \
             TIMESTAMPADD(SECOND, seq, '2010-02-03 11:22:33') FROM seq_{SQL_FIRST}_to_{}",
            SQL_FIRST + SQL_ROWS - 1
        ));
        SqlRows
    }
}

impl Drop for SqlRows {
    fn drop(&mut self) {
        mariadb_loadgen("DELETE FROM usr WHERE user_id > 80000000");
    }
}

fn mariadb_value(sql: &str) -> u64 {
    let text = mariadb_loadgen(sql);
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: {text}"))
}

/// The MariaDB URL with `?driver=`, plain (the counters are the same over TLS: tests/mysql_tls.rs).
fn my_url(driver: &str) -> Option<String> {
    let url = server("LOADGEN_MY_URL")?;
    Some(format!("{url}?driver={driver}&ssl-mode=DISABLED"))
}

#[test]
fn sql_conserves_every_op_on_both_drivers() {
    for (driver, p) in [("wire", "8"), ("mysql_async", "1")] {
        let Some(url) = my_url(driver) else {
            return;
        };
        let _rows = SqlRows::load();
        let own = OwnOps::before(&url);
        let (code, doc, err) = run_json(&[
            &url, "-n", "20000", "--mix", SQL_MIX, "--keys", SQL_KEYS, "-c", "4", "-p", p,
        ]);
        assert_eq!(code, 0, "{driver}: {err}");
        let r = &doc["runs"][0];
        assert_eq!(r["driver"], driver);
        assert_eq!(u(r, "error_total"), 0, "{driver}: {}", r["error_samples"]);
        assert_ops_conserved(
            r,
            &["read", "update", "insert", "delete"],
            own.as_ref(),
            driver,
        );
        let so = &r["server_observed"];
        assert_eq!(
            (u(so, "delta"), &so["matches"]),
            (20000, &true.into()),
            "{so}"
        );
        // Inserts start above the loaded rows (max(user_id) + 1) and each one is a row.
        let ins = &r["ops"]["insert"];
        assert_eq!(u(ins, "hits"), u(ins, "requests"), "{driver}: {ins}");
        let inserted = mariadb_value(&format!(
            "SELECT COUNT(*) FROM usr WHERE user_id > {}",
            SQL_FIRST + SQL_ROWS - 1
        ));
        assert_eq!(inserted, u(ins, "hits"), "{driver}");
        // An update that finds its row is a hit, one that finds none a miss (a deleted key).
        let upd = &r["ops"]["update"];
        assert!(
            u(upd, "hits") * 10 > u(upd, "requests") * 8,
            "{driver}: {upd}"
        );
        let durability = &r["durability"];
        for setting in ["innodb_flush_log_at_trx_commit", "sync_binlog"] {
            let v = durability[setting].as_str().unwrap_or_default();
            assert!(v.parse::<u64>().is_ok(), "{driver} {setting}: {durability}");
        }
    }
}

#[test]
fn sql_reads_its_own_writes() {
    let keys = format!("{SQL_FIRST}-{}", SQL_FIRST + 499);
    for (driver, p) in [("wire", "1"), ("wire", "16"), ("mysql_async", "1")] {
        let Some(url) = my_url(driver) else {
            return;
        };
        let _rows = SqlRows::load();
        let (code, doc, err) = run_json(&[
            &url,
            "-n",
            "10000",
            "--keys",
            &keys,
            "--mix",
            "read=50,update=20,insert=10,delete=10,upsert=10",
            "--verify",
            "-c",
            "4",
            "-p",
            p,
        ]);
        let r = &doc["runs"][0];
        assert_eq!(code, 0, "{driver} -p {p}: {err} {}", r["error_samples"]);
        assert_eq!(u(r, "error_total"), 0, "{driver} -p {p}");
        let read = &r["ops"]["read"];
        assert!(u(read, "hits") > 1000 && u(read, "misses") > 300, "{read}");
        // Insert and upsert are both Com_insert: neither has a count of its own.
        for op in OPS {
            let o = &r["ops"][op];
            let so = &o["server_observed"];
            match op {
                "insert" | "upsert" => assert!(so.is_null(), "{driver} {op}: {o}"),
                _ => assert_eq!(
                    u(so, "delta"),
                    u(o, "requests"),
                    "{driver} -p {p} {op}: {o}"
                ),
            }
        }
    }
}

#[test]
fn sql_user_write_statements_are_checked() {
    let Some(url) = my_url("wire") else {
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
        "UPDATE usr SET user_name = 'x' WHERE user_id = ?",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "--query-update for MySQL needs exactly 2 ?, in this order: user_name, the key"
        ),
        "{err}"
    );
}

#[test]
fn an_insert_over_a_present_row_is_a_duplicate_on_every_path() {
    let (Some(wire), Some(lib), Some(hs)) = (my_url("wire"), my_url("mysql_async"), hs_write_url())
    else {
        return;
    };
    let _rows = SqlRows::load();
    let _hs_rows = load(&hs, 500);
    for (url, from) in [(&wire, SQL_FIRST), (&lib, SQL_FIRST), (&hs, FIRST)] {
        let (code, doc, err) = run_json(&[
            url,
            "-n",
            "200",
            "--mix",
            "insert=100",
            "--insert-from",
            &from.to_string(),
            "-c",
            "2",
        ]);
        let r = &doc["runs"][0];
        assert_eq!(code, 1, "{url}: {err}");
        let ins = &r["ops"]["insert"];
        assert_eq!(u(ins, "errors.duplicate"), 200, "{url}: {ins}");
        assert_eq!(u(ins, "error_total"), 200, "{url}: {ins}");
        let sample = r["error_samples"].to_string();
        assert!(
            sample.contains("121") || sample.contains("1062"),
            "{sample}"
        );
    }
}

#[test]
fn sql_deadlocks_inside_txn_groups_are_counted_and_the_run_goes_on() {
    for driver in ["wire", "mysql_async"] {
        let Some(url) = my_url(driver) else {
            return;
        };
        let _rows = SqlRows::load();
        // Two connections updating the same two keys two per transaction: one takes 1 then 2
        // while the other takes 2 then 1, and InnoDB kills one of them.
        let (code, doc, err) = run_json(&[
            &url,
            "-n",
            "3000",
            "--mix",
            "update=100",
            "--txn",
            "2",
            "--keys",
            "80000001-80000002",
            "-c",
            "2",
        ]);
        let r = &doc["runs"][0];
        assert_eq!(code, 1, "{driver}: {err}");
        assert_eq!(doc["settings"]["txn"], 2);
        let upd = &r["ops"]["update"];
        assert!(u(upd, "errors.deadlock") > 0, "{driver}: {upd}");
        assert_eq!(
            u(upd, "error_total"),
            u(upd, "errors.deadlock"),
            "{driver}: {upd}"
        );
        assert!(
            u(upd, "hits") > u(upd, "errors.deadlock"),
            "{driver}: {upd}"
        );
        assert_eq!(u(upd, "requests"), 3000);
        let so = &upd["server_observed"];
        assert_eq!(u(so, "delta"), 3000, "{driver}: {so}");
    }
}

/// A table of this file's own whose `n` counts the updates the server committed: the test's
/// own checksum of applied writes (Handler_update counts rolled-back updates too).
struct MyCounted;

const MY_COUNTED_UPDATE: &str = "UPDATE lg_retries SET n = n + 1, name = ? WHERE id = ?";

impl MyCounted {
    fn new() -> MyCounted {
        mariadb_loadgen(
            "DROP TABLE IF EXISTS lg_retries; \
             CREATE TABLE lg_retries (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0, name text) ENGINE=InnoDB; \
             INSERT INTO lg_retries (id) SELECT seq FROM seq_1_to_8",
        );
        MyCounted
    }

    /// Updates committed since the last call.
    fn take(&self) -> u64 {
        let n = mariadb_value("SELECT sum(n) FROM lg_retries");
        mariadb_loadgen("UPDATE lg_retries SET n = 0");
        n
    }
}

impl Drop for MyCounted {
    fn drop(&mut self) {
        mariadb_loadgen("DROP TABLE IF EXISTS lg_retries");
    }
}

/// `--retries`: eight connections updating 8 keys four per transaction in random order
/// deadlock for real (1213); sent again, fewer fail. Either way a write counts as done only
/// when its transaction commits: the updates the server applied (the test's own sum) are
/// loadgen's hits, on both drivers.
#[test]
fn sql_retries_deadlocked_transactions_and_counts_only_committed_writes() {
    if my_url("wire").is_none() {
        return;
    }
    let counted = MyCounted::new();
    for driver in ["wire", "mysql_async"] {
        let Some(url) = my_url(driver) else {
            return;
        };
        let mut failed = Vec::new();
        for retries in ["0", "5"] {
            let (code, doc, err) = run_json(&[
                &url,
                "-n",
                "800",
                "--mix",
                "update=100",
                "--txn",
                "4",
                "--keys",
                "1-8",
                "-c",
                "8",
                "--retries",
                retries,
                "--query-update",
                MY_COUNTED_UPDATE,
            ]);
            let context = format!("{driver} --retries {retries}: {err}");
            let r = &doc["runs"][0];
            assert_exit_fits(code, r, &context);
            let upd = &r["ops"]["update"];
            assert_eq!(u(upd, "requests"), 800, "{context}");
            assert_eq!(
                u(upd, "error_total"),
                u(upd, "errors.deadlock"),
                "{context}"
            );
            assert_eq!(counted.take(), u(upd, "hits"), "{context}: {upd}");
            assert_eq!(u(r, "retries"), u(upd, "retries"), "{context}");
            match retries {
                "0" => assert_eq!(u(r, "retries"), 0, "{context}"),
                _ => assert!(u(r, "retries") > 0, "{context}: {upd}"),
            }
            // Com_update counts every execute: each request once, and once more per retry.
            let so = &upd["server_observed"];
            assert_eq!(u(so, "delta"), 800 + u(upd, "retries"), "{context}: {so}");
            assert_eq!(so["matches"], true, "{context}: {so}");
            // What loadgen says it sent holds the sends again; the failed ones' fate is unknown.
            assert_eq!(
                u(so, "expected"),
                800 + u(upd, "retries"),
                "{context}: {so}"
            );
            assert_eq!(
                so["unknown"].as_u64().unwrap_or(0),
                u(upd, "error_total") + u(upd, "retries"),
                "{context}: {so}"
            );
            failed.push(u(upd, "error_total"));
        }
        assert!(failed[0] > 0, "{driver}: no deadlock to retry");
        assert!(failed[1] < failed[0], "{driver}: failures {failed:?}");
    }
}

/// `--txn 1000` in a run of 500 writes: each connection's one short transaction is committed
/// as the run ends, so every counted write is applied (the server's rows say so).
#[test]
fn sql_a_short_last_transaction_is_committed() {
    if my_url("wire").is_none() {
        return;
    }
    let counted = MyCounted::new();
    for driver in ["wire", "mysql_async"] {
        let Some(url) = my_url(driver) else {
            return;
        };
        let (code, doc, err) = run_json(&[
            &url,
            "-n",
            "500",
            "--mix",
            "update=100",
            "--txn",
            "1000",
            "--keys",
            "1-8",
            // One connection: two would wait on each other's locks for the whole run.
            "-c",
            "1",
            "--query-update",
            MY_COUNTED_UPDATE,
        ]);
        assert_eq!(code, 0, "{driver}: {err}");
        let upd = &doc["runs"][0]["ops"]["update"];
        assert_eq!(u(upd, "hits"), 500, "{driver}: {upd}");
        assert_eq!(counted.take(), 500, "{driver}");
    }
}
