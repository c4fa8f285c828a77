//! MariaDB SQL and HandlerSocket on the same InnoDB table, for real (scripts/servers.sh starts
//! MariaDB with the handlersocket.so plugin).

mod common;
use common::*;

/// The nested `?mysql=` URL logs in with a password of its own, so every run through this URL
/// also checks that the password is redacted (`assert_no_password`).
const NESTED_PW: &str = "Nx6hsMyS3cretRt";

fn hs_url() -> Option<String> {
    let hs = server("LOADGEN_HS_URL")?;
    let _ = server("LOADGEN_MY_URL")?;
    my_user_with_password("lg_hs_status", NESTED_PW);
    let port = std::env::var("LOADGEN_MY_PORT").unwrap_or_else(|_| "53306".into());
    Some(format!(
        "{hs}?mysql=mysql://lg_hs_status:{NESTED_PW}@127.0.0.1:{port}/loadgen"
    ))
}

/// The run's stdout (the JSON document) and stderr never hold the nested URL's password.
fn assert_no_password(url: &str, doc: &serde_json::Value, stderr: &str) {
    if url.contains(NESTED_PW) {
        let all = format!("{doc}{stderr}");
        assert!(!all.contains(NESTED_PW), "password leaked: {all}");
        assert!(all.contains("lg_hs_status:***@127.0.0.1"), "{all}");
    }
}

/// Both MySQL drivers: loadgen's own wire driver (the default) and mysql_async.
fn mysql_urls() -> Option<[String; 2]> {
    let url = server("LOADGEN_MY_URL")?;
    Some([
        format!("{url}?driver=wire"),
        format!("{url}?driver=mysql_async"),
    ])
}

#[test]
fn mysql_conservation_against_com_stmt_execute() {
    let Some(urls) = mysql_urls() else {
        return;
    };
    // The wire driver also pipelined: the server must still count every execute once.
    for (url, depth) in [(&urls[0], "1"), (&urls[0], "8"), (&urls[1], "1")] {
        let seen = OwnCount::before("global status Com_stmt_execute", url);
        let (code, doc, err) = run_json(&[url, "-n", "20000", "-c", "16", "-p", depth]);
        assert_eq!(code, 0, "{url}: {err}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 20000, "{url}");
        seen.assert_saw(r, 20000, &format!("{url} -p {depth}"));
        assert_schema_valid(&doc);
    }
}

#[test]
fn hs_conservation_against_handler_read_key() {
    let Some(url) = hs_url() else { return };
    let seen = OwnCount::before("global status Handler_read_key", &url);
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "2", "-p", "16"]);
    assert_eq!(code, 0, "{err}");
    assert_no_password(&url, &doc, &err);
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 20000);
    seen.assert_saw(r, 20000, "");
}

#[test]
fn verify_full_range_on_both() {
    let Some([wire, mysql_async]) = mysql_urls() else {
        return;
    };
    let Some(hs) = hs_url() else { return };
    for (url, extra) in [
        (&hs, ["-c", "4", "-p", "32"]),
        (&wire, ["-c", "4", "-p", "32"]),
        // The reply shape of servers without MariaDB's metadata cache (MySQL): column
        // definitions with every reply.
        (&format!("{wire}&cache_metadata=0"), ["-c", "4", "-p", "8"]),
        (&mysql_async, ["-c", "32", "-p", "1"]),
    ] {
        let mut args = vec![url.as_str(), "-n", "1000000", "--dist", "seq", "--verify"];
        args.extend_from_slice(&extra);
        let (code, doc, err) = run_json(&args);
        assert_eq!(code, 0, "{url}: {err}");
        assert_no_password(url, &doc, &err);
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 1_000_000, "{url}");
        assert_eq!(u(r, "error_total"), 0, "{url}: {}", r["error_samples"]);
    }
}

#[test]
fn misses_are_misses_on_both() {
    let Some([wire, mysql_async]) = mysql_urls() else {
        return;
    };
    let Some(hs) = hs_url() else { return };
    for url in [&wire, &mysql_async, &hs] {
        let (code, doc, err) = run_json(&[
            url,
            "-n",
            "3000",
            "--keys",
            "2000001-2100000",
            "--verify",
            "-c",
            "4",
        ]);
        assert_eq!(code, 0, "{url}: {err}");
        assert_no_password(url, &doc, &err);
        assert_eq!(u(&doc["runs"][0], "misses"), 3000, "{url}");
    }
}

#[test]
fn bad_handlersocket_inputs_exit_2_with_one_line() {
    let Some(hs) = server("LOADGEN_HS_URL") else {
        return;
    };
    let my_port = std::env::var("LOADGEN_MY_PORT").unwrap_or_else(|_| "53306".into());
    let hs_port = std::env::var("LOADGEN_HS_PORT").unwrap_or_else(|_| "59998".into());
    let cases = [
        (
            format!("hs://127.0.0.1:{my_port}/loadgen/usr"),
            "this looks like a MySQL/MariaDB server, not HandlerSocket",
        ),
        (hs.replace("/usr", "/no_such_table"), "open"),
        (format!("{hs}?index=no_such_index"), "index"),
        (format!("{hs}?secret=wrong-secret"), "secret"),
        (
            format!("hs://127.0.0.1:{hs_port}/loadgen"),
            "DATABASE/TABLE",
        ),
    ];
    for (url, needle) in cases {
        let out = run(&["run", &url, "-n", "10", "-o", "-", "-q"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(stderr.contains(needle), "{url}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{url}: {stderr}");
        assert!(!stderr.contains("wrong-secret"), "secret leaked: {stderr}");
    }
}

/// `columns=` picks what a find returns; a run reads those columns, but `--verify` only knows
/// the usr row, so the two together are refused before any connection.
#[test]
fn hs_columns_of_ones_own_run_but_refuse_verify() {
    let Some(hs) = server("LOADGEN_HS_URL") else {
        return;
    };
    let url = format!("{hs}?columns=user_email");
    let (code, doc, err) = run_json(&[&url, "-n", "2000", "-c", "2", "-p", "8"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 2000);
    let out = run(&["run", &url, "--verify", "-n", "10", "-o", "-", "-q"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--verify") && stderr.contains("columns=user_email"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // The usr row's own list, written out, is the default and verifies.
    let url = format!("{hs}?columns=user_name,user_email,created");
    let (code, doc, err) = run_json(&[&url, "-n", "2000", "-c", "2", "-p", "8", "--verify"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 2000);
}

#[test]
fn mysql_wrong_password_exits_2_without_the_password() {
    let Some(urls) = mysql_urls() else {
        return;
    };
    for url in &urls {
        let bad = url.replacen("mysql://loadgen@", "mysql://loadgen:Wr0ngPassw0rd@", 1);
        let out = run(&["run", &bad, "-n", "10", "-o", "-"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(stderr.contains("Access denied"), "{url}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{url}: {stderr}");
        assert!(!stderr.contains("Wr0ngPassw0rd"), "{stderr}");
    }
}

#[test]
fn mysql_bad_inputs_exit_2_with_one_line() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let hs_port = std::env::var("LOADGEN_HS_PORT").unwrap_or_else(|_| "59998".into());
    let pg_port = std::env::var("LOADGEN_PG_PORT").unwrap_or_else(|_| "55432".into());
    let cases = [
        // mysql_async cannot pipeline; the wire driver can.
        (
            format!("{url}?driver=mysql_async"),
            "-p",
            "4",
            "cannot pipeline",
        ),
        (
            format!("{url}?driver=odbc"),
            "-p",
            "1",
            "unknown MySQL driver",
        ),
        (
            format!("{url}?driver=wire"),
            "--mode",
            "simple",
            "driver=mysql_async",
        ),
        // URL options: a typo, an option of the other driver, a bad value.
        (
            format!("{url}?drvier=wire"),
            "-p",
            "1",
            "unknown option 'drvier'",
        ),
        (
            format!("{url}?driver=mysql_async&cache_metadata=0"),
            "-p",
            "1",
            "unknown option 'cache_metadata'",
        ),
        (
            format!("{url}?cache_metadata=2"),
            "-p",
            "1",
            "cache_metadata=2",
        ),
        (
            format!("{}/no_such_db", url.rsplit_once('/').unwrap().0),
            "-p",
            "1",
            "no_such_db",
        ),
        (
            url.clone(),
            "--query",
            "SELECT 1 FROM usr WHERE user_id = ? AND ? = 1",
            "exactly one ?",
        ),
        // A port that is not MySQL: HandlerSocket's, and PostgreSQL's.
        (
            format!("mysql://loadgen@127.0.0.1:{hs_port}/loadgen"),
            "-p",
            "1",
            "MySQL",
        ),
        (
            format!("mysql://loadgen@127.0.0.1:{pg_port}/loadgen"),
            "-p",
            "1",
            "MySQL",
        ),
    ];
    for (url, flag, value, needle) in cases {
        let out = run(&[
            "run",
            &url,
            flag,
            value,
            "-n",
            "10",
            "--timeout",
            "2s",
            "-o",
            "-",
            "-q",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url} {flag} {value}: {stderr}");
        assert!(stderr.contains(needle), "{url} {flag} {value}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{url}: {stderr}");
    }
}

#[test]
fn mysql_simple_mode_goes_to_mysql_async() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[
        &url, "--mode", "simple", "-n", "2000", "-c", "4", "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 2000);
    assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
}

/// Without `?mysql=` there is no counter to read: the report says so in its server line (and
/// the JSON's server_observed carries the same note) instead of leaving the line out.
#[test]
fn hs_without_mysql_says_why_there_is_no_server_count() {
    let Some(hs) = server("LOADGEN_HS_URL") else {
        return;
    };
    let out = run(&["run", &hs, "-n", "1000", "-c", "2", "-o", "/dev/null"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("server "))
        .unwrap_or_else(|| panic!("no server line in {stdout}"));
    assert!(
        line.contains("no counter source: add ?mysql=URL to read Handler_read_key"),
        "{line}"
    );
    let (code, doc, err) = run_json(&[&hs, "-n", "1000", "-c", "2"]);
    assert_eq!(code, 0, "{err}");
    let so = &doc["runs"][0]["server_observed"];
    assert!(so["delta"].is_null(), "{so}");
    assert!(so["note"].as_str().unwrap().contains("?mysql=URL"), "{so}");
    assert_schema_valid(&doc);
}

/// `--batch 10` on HandlerSocket: one find with an IN list of 10 keys per request, half of the
/// range past the data set. MariaDB reads the index once per key: its Handler_read_key, read
/// here, moves by the 20,000 keys, and `--verify` checks every row of every reply.
#[test]
fn hs_multi_get_reads_the_index_once_per_key() {
    let Some(url) = hs_url() else { return };
    let seen = OwnCount::before("global status Handler_read_key", &url);
    let (code, doc, err) = multi_get_run(&url, "2000", "4");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 2000, "{r}");
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(u(r, "keys.keys"), 20_000, "{r}");
    let (hits, misses) = (u(r, "keys.hits"), u(r, "keys.misses"));
    assert!(hits > 5000 && misses > 5000, "hits {hits} misses {misses}");
    let d = seen.delta();
    assert_eq!(d, 20_000, "MariaDB's Handler_read_key moved by {d}");
    let so = &r["server_observed"];
    assert_eq!(u(so, "delta"), 20_000, "{so}");
    assert_eq!(u(so, "expected"), 20_000, "{so}");
    assert_eq!(so["matches"], true, "{so}");
    assert_schema_valid(&doc);
}

/// `--batch 10` on MariaDB's SQL path (wire driver): one prepared `user_id IN (?, ..., ?)`
/// per request. With `--dist seq` over 2,000 keys of which the first 1,000 are loaded, exactly
/// half the keys hit and `--verify` checks each row. MariaDB's own counters, read here: one
/// Com_stmt_execute per request and one Handler_read_key per key.
#[test]
fn mysql_multi_get_is_one_execute_per_request_and_one_index_read_per_key() {
    let Some([wire, _]) = mysql_urls() else {
        return;
    };
    let executes = OwnCount::before("global status Com_stmt_execute", &wire);
    let reads = OwnCount::before("global status Handler_read_key", &wire);
    let (code, doc, err) = multi_get_seq_run(&wire, "999001-1001000");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(u(r, "keys.keys"), 20_000, "{r}");
    assert_eq!(
        (u(r, "keys.hits"), u(r, "keys.misses")),
        (10_000, 10_000),
        "{r}"
    );
    executes.assert_saw(r, 2000, "Com_stmt_execute");
    let d = reads.delta();
    assert_eq!(d, 20_000, "MariaDB's Handler_read_key moved by {d}");
    assert_schema_valid(&doc);
}
