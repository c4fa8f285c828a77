//! `--retries` and `--txn` groups on PostgreSQL: deadlocks sent again, short groups committed,
//! failed groups' writes in doubt.

use super::*;

/// A table of this file's own whose `n` counts the updates the server committed: the test's
/// own checksum of applied writes (pg_stat_user_tables counts rolled-back updates too).
struct PgCounted(String);

const PG_COUNTED_UPDATE: &str = "UPDATE lg_retries SET n = n + 1, name = $2 WHERE id = $1";

impl PgCounted {
    fn new(url: &str) -> PgCounted {
        psql(
            url,
            "DROP TABLE IF EXISTS lg_retries; \
             CREATE TABLE lg_retries (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0, name text); \
             INSERT INTO lg_retries (id) SELECT generate_series(1, 8)",
        );
        PgCounted(url.to_string())
    }

    /// Updates committed since the last call.
    fn take(&self) -> u64 {
        let n = psql(&self.0, "SELECT sum(n) FROM lg_retries");
        psql(&self.0, "UPDATE lg_retries SET n = 0");
        n.parse().unwrap()
    }
}

impl Drop for PgCounted {
    fn drop(&mut self) {
        psql(&self.0, "DROP TABLE IF EXISTS lg_retries");
    }
}

/// `--retries`: eight connections updating 8 keys four per transaction in random order
/// deadlock for real; sent again, fewer fail. Either way a write counts as done only when its
/// transaction commits: the updates the server applied (the test's own sum) are loadgen's hits.
#[test]
fn postgres_retries_deadlocked_transactions_and_counts_only_committed_writes() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let counted = PgCounted::new(&url);
    let fast = with(&url, "options=-c%20deadlock_timeout%3D20ms");
    for target in [fast.clone(), with(&fast, "driver=tokio")] {
        let mut failed = Vec::new();
        for retries in ["0", "5"] {
            let (code, doc, err) = run_json(&[
                &target,
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
                PG_COUNTED_UPDATE,
            ]);
            let context = format!("{target} --retries {retries}: {err}");
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
            if retries == "0" {
                assert_eq!(u(r, "retries"), 0, "{context}");
                assert!(doc["settings"].get("retries").is_none(), "{context}");
            } else {
                assert!(u(r, "retries") > 0, "{context}: {upd}");
                assert_eq!(doc["settings"]["retries"], 5, "{context}");
            }
            failed.push(u(upd, "error_total"));
        }
        assert!(failed[0] > 0, "{target}: no deadlock to retry");
        assert!(failed[1] < failed[0], "{target}: failures {failed:?}");
    }
}

/// `--txn 1000` in a run of 500 writes: no transaction reaches its 1,000th write, and each
/// connection's one short transaction is committed as the run ends: every counted write is
/// applied (the server's rows say so), on both drivers, pipelined or not.
#[test]
fn postgres_a_short_last_transaction_is_committed() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let counted = PgCounted::new(&url);
    for (target, p) in pg_targets(&url) {
        // One connection: two would wait on each other's locks for the whole run.
        let (code, doc, err) = run_json(&[
            &target,
            "-n",
            "500",
            "--mix",
            "update=100",
            "--txn",
            "1000",
            "--keys",
            "1-8",
            "-c",
            "1",
            "-p",
            p,
            "--query-update",
            PG_COUNTED_UPDATE,
        ]);
        let context = format!("{target} -p {p}: {err}");
        assert_eq!(code, 0, "{context}");
        let upd = &doc["runs"][0]["ops"]["update"];
        assert_eq!(u(upd, "hits"), 500, "{context}");
        assert_eq!(counted.take(), 500, "{context}");
    }
}

/// `--verify --txn`: a lookup that fails inside a transaction rolls it back on PostgreSQL, so
/// the writes sent in it are unsure and a later read of their keys must not be held to them.
/// The lookup fails (division by zero) for every fifth key.
#[test]
fn postgres_verify_takes_a_failed_transactions_writes_as_unsure() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let _rows = PgRows::load(&url);
    let query = "SELECT user_name, user_email, created FROM usr \
                 WHERE user_id = $1 AND 1 / (user_id % 5) >= 0";
    for target in [url.clone(), with(&url, "driver=tokio")] {
        let (code, doc, err) = run_json(&[
            &target,
            "-n",
            "3000",
            "--verify",
            "--mix",
            "read=50,update=50",
            "--txn",
            "4",
            "--keys",
            "5000001-5000040",
            "-c",
            "2",
            "--query",
            query,
        ]);
        assert_eq!(code, 1, "{target}: {err}");
        let r = &doc["runs"][0];
        assert!(u(r, "errors.server") > 0, "{target}: {}", r["errors"]);
        assert_eq!(u(r, "errors.verify"), 0, "{target}: {}", r["error_samples"]);
    }
}
