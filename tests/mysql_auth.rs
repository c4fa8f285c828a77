//! MySQL auth plugins the wire driver does not speak, against the real MariaDB of
//! scripts/servers.sh: an ed25519 user (the wire driver hands the run to mysql_async and says
//! so once) and a pam user (its 'dialog' plugin: no driver speaks it, one line, exit 2).

mod common;
use common::*;

const FALLBACK: &str =
    "the server asks for auth plugin 'client_ed25519', which the wire driver does not speak; using driver mysql_async";

fn ed25519_url() -> Option<String> {
    server("LOADGEN_MY_ED25519_URL")
}

/// The run's stderr says the fallback exactly once, and the result names the driver that ran.
fn assert_fell_back(url: &str, doc: &serde_json::Value, stderr: &str) {
    let line = format!("loadgen: {url}: {FALLBACK}");
    assert_eq!(stderr.matches(FALLBACK).count(), 1, "{stderr}");
    assert!(stderr.lines().any(|l| l == line), "{stderr}");
    assert_eq!(doc["runs"][0]["driver"], "mysql_async", "{url}");
}

#[test]
fn ed25519_user_falls_back_to_mysql_async_and_conserves() {
    let Some(url) = ed25519_url() else { return };
    // The default driver and the wire driver named: both hand over.
    for url in [url.clone(), format!("{url}?driver=wire")] {
        let seen = OwnCount::before("global status Com_stmt_execute", &url);
        let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16"]);
        assert_eq!(code, 0, "{url}: {err}");
        assert_fell_back(&url, &doc, &err);
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 20000, "{url}");
        assert_eq!(u(r, "error_total"), 0, "{url}: {}", r["error_samples"]);
        seen.assert_saw(r, 20000, &url);
        assert_schema_valid(&doc);
    }
}

/// 1,200 ed25519 logins, each on a new server connection (`--reconnect-every 5`): each one's
/// nonce ends in a zero byte with odds 1 in 256, which mysql_common drops before signing, so
/// without loadgen's second try about 5 of them are refused although the password is right.
#[test]
fn ed25519_user_reconnects_1200_times_without_a_refusal() {
    let Some(url) = ed25519_url() else { return };
    for url in [url.clone(), format!("{url}?driver=mysql_async")] {
        let before = mariadb_status("Connections");
        let (code, doc, err) = run_json(&[&url, "-n", "6000", "-c", "4", "--reconnect-every", "5"]);
        let opened = mariadb_status("Connections") - before;
        assert_eq!(code, 0, "{url}: {err}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 6000, "{url}");
        assert_eq!(u(r, "error_total"), 0, "{url}: {}", r["error_samples"]);
        // A pooled connection handed back would be no new login: the server saw each one.
        assert!(
            (1200..1300).contains(&opened),
            "{url}: {opened} server connections"
        );
    }
}

#[test]
fn ed25519_user_verifies_every_row() {
    let Some(url) = ed25519_url() else { return };
    let (code, doc, err) = run_json(&[
        &url, "-n", "100000", "--keys", "1-100000", "--dist", "seq", "--verify", "-c", "16",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_fell_back(&url, &doc, &err);
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 100_000);
    assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
}

/// A native user stays on the wire driver, without a word about plugins.
#[test]
fn native_user_stays_on_the_wire_driver() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[&url, "-n", "2000", "-c", "4", "-p", "8"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["runs"][0]["driver"], "wire");
    assert!(!err.contains("auth plugin"), "{err}");
    let (code, doc, err) = run_json(&[&format!("{url}?driver=mysql_async"), "-n", "200"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["runs"][0]["driver"], "mysql_async");
}

/// mysql_async cannot pipeline, so a pipelined run of an ed25519 user is refused in one line.
#[test]
fn ed25519_user_with_pipelining_is_one_line_exit_2() {
    let Some(url) = ed25519_url() else { return };
    let out = run(&["run", &url, "-n", "100", "-p", "8", "-o", "-", "-q"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "loadgen: {url}: the server asks for auth plugin 'client_ed25519', which only driver mysql_async speaks, and mysql_async cannot pipeline (-p 8): use -p 1 with more connections (-c), or a user IDENTIFIED WITH mysql_native_password for the wire driver"
        )
    );
    assert!(out.stdout.is_empty());
}

/// No driver speaks 'dialog' (pam): the same one line from either driver, exit 2.
#[test]
fn plugin_no_driver_speaks_is_one_line_exit_2() {
    let Some(url) = server("LOADGEN_MY_PAM_URL") else {
        return;
    };
    for url in [url.clone(), format!("{url}?driver=mysql_async")] {
        let out = run(&["run", &url, "-n", "100", "-o", "-", "-q"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert_eq!(
            stderr.trim(),
            format!(
                "loadgen: {url}: the server asks for auth plugin 'dialog', which neither MySQL driver of loadgen speaks (wire: mysql_native_password; mysql_async: also caching_sha2_password, client_ed25519, parsec): log in as a user IDENTIFIED WITH mysql_native_password (or caching_sha2_password, client_ed25519)"
            )
        );
    }
}
