//! MariaDB SQL and HandlerSocket on the same InnoDB table, for real (scripts/servers.sh starts
//! MariaDB with the handlersocket.so plugin).

mod common;
use common::*;

fn hs_url() -> Option<String> {
    let hs = server("LOADGEN_HS_URL")?;
    let my = server("LOADGEN_MY_URL")?;
    Some(format!("{hs}?mysql={my}"))
}

#[test]
fn mysql_conservation_against_com_stmt_execute() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 20000);
    assert_eq!(
        r["server_observed"]["source"],
        "global status Com_stmt_execute"
    );
    assert_eq!(
        u(&r["server_observed"], "delta"),
        20000,
        "{}",
        r["server_observed"]
    );
    assert_schema_valid(&doc);
}

#[test]
fn hs_conservation_against_handler_read_key() {
    let Some(url) = hs_url() else { return };
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "2", "-p", "16"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 20000);
    assert_eq!(
        r["server_observed"]["source"],
        "global status Handler_read_key"
    );
    assert_eq!(
        u(&r["server_observed"], "delta"),
        20000,
        "{}",
        r["server_observed"]
    );
}

#[test]
fn verify_full_range_on_both() {
    let Some(my) = server("LOADGEN_MY_URL") else {
        return;
    };
    let Some(hs) = hs_url() else { return };
    for (url, extra) in [
        (&hs, ["-c", "4", "-p", "32"]),
        (&my, ["-c", "32", "-p", "1"]),
    ] {
        let mut args = vec![url.as_str(), "-n", "1000000", "--dist", "seq", "--verify"];
        args.extend_from_slice(&extra);
        let (code, doc, err) = run_json(&args);
        assert_eq!(code, 0, "{url}: {err}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 1_000_000, "{url}");
        assert_eq!(u(r, "error_total"), 0, "{url}: {}", r["error_samples"]);
    }
}

#[test]
fn misses_are_misses_on_both() {
    let Some(my) = server("LOADGEN_MY_URL") else {
        return;
    };
    let Some(hs) = hs_url() else { return };
    for url in [&my, &hs] {
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
            "HandlerSocket port",
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

#[test]
fn mysql_wrong_password_exits_2_without_the_password() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let bad = url.replacen("mysql://loadgen@", "mysql://loadgen:Wr0ngPassw0rd@", 1);
    let out = run(&["run", &bad, "-n", "10", "-o", "-"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Access denied"), "{stderr}");
    assert!(!stderr.contains("Wr0ngPassw0rd"), "{stderr}");
}

#[test]
fn mysql_cannot_pipeline_and_says_so() {
    let Some(url) = server("LOADGEN_MY_URL") else {
        return;
    };
    let out = run(&["run", &url, "-n", "10", "-p", "4", "-o", "-"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot pipeline"), "{stderr}");
}
