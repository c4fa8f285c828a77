//! Writes (`--mix`) through HandlerSocket's write port, on the real MariaDB: inserts and the
//! key reads counted by the server (Handler_write, Handler_read_key) exactly as loadgen counted
//! them, read-your-writes `--verify` at depth 1 and 16, and the read port refused in preflight.
//! The rows written are this file's own (user_id above 70000000, loaded here through
//! HandlerSocket and deleted after): the shared ids 1..1000000 are never touched.

mod common;
use common::*;

const FIRST: u64 = 70_000_001;
const ROWS: u64 = 10_000;

/// This file's rows, deleted when dropped.
struct OwnRows;

impl Drop for OwnRows {
    fn drop(&mut self) {
        mariadb_root("DELETE FROM loadgen.usr WHERE user_id > 70000000");
    }
}

/// The write port's URL, with the MariaDB URL that reads the server's counters.
fn hs_write_url() -> Option<String> {
    let hs = server("LOADGEN_HSW_URL")?;
    let my = server("LOADGEN_MY_URL")?;
    Some(format!("{hs}?mysql={}", urlencode(&my)))
}

/// Deletes this file's rows, then inserts ids FIRST..FIRST+rows-1 through HandlerSocket.
fn load(url: &str, rows: u64) -> OwnRows {
    mariadb_root("DELETE FROM loadgen.usr WHERE user_id > 70000000");
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
