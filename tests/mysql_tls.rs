//! MySQL TLS against the real MariaDB of scripts/servers.sh (a throwaway CA signs its
//! certificate for localhost, 127.0.0.1 and ::1; the user loadgen_tls is created REQUIRE SSL),
//! on both drivers: the server's refusal of a plain login, ssl-mode REQUIRED / PREFERRED /
//! VERIFY_IDENTITY, a host name the certificate does not carry, a CA that did not sign it,
//! conservation and `--verify` over TLS, and no byte of the server's key in any output.

mod common;
use common::*;

use serde_json::Value;

const DRIVERS: [&str; 2] = ["wire", "mysql_async"];

/// The REQUIRE SSL user by address, no TLS options: PREFERRED, the mysql client's default.
fn tls_user(host: &str, port: &str) -> String {
    format!("mysql://loadgen_tls@{host}:{port}/loadgen")
}

/// A setup failure: exit 2 and one line of stderr holding every `want`; that line.
fn refused(url: &str, want: &[&str]) -> String {
    let out = run(&["run", url, "-n", "100", "-o", "-", "-q"]);
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{url}: not one line: {stderr}");
    for w in want {
        assert!(stderr.contains(w), "{url}: '{w}' not in: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_no_key(&stderr);
    stderr
}

/// The base64 body of the server's key never appears.
fn assert_no_key(output: &str) {
    let pem = std::fs::read_to_string(env("LOADGEN_TLS_SERVER_KEY")).expect("server key");
    for line in pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 16)
    {
        assert!(!output.contains(line), "key material in the output");
    }
}

/// A run over TLS: exit 0, TLS 1.3, the verification asked for, the driver asked for.
fn tls_run(url: &str, verified: &str, args: &[&str]) -> Value {
    let mut all = vec![url];
    all.extend_from_slice(args);
    let (code, doc, err) = run_json(&all);
    assert_eq!(code, 0, "{url}: {err}");
    assert_no_key(&format!("{doc}{err}"));
    let r = &doc["runs"][0];
    assert_eq!(r["tls"]["version"], "TLS 1.3", "{url}: {r}");
    assert!(
        r["tls"]["cipher"].as_str().unwrap().starts_with("TLS13_"),
        "{url}: {r}"
    );
    assert_eq!(r["tls"]["verified"], verified, "{url}");
    assert!(url.contains(&format!("driver={}", r["driver"].as_str().unwrap())));
    assert_schema_valid(&doc);
    doc
}

#[test]
fn plain_login_of_a_require_ssl_user_is_the_servers_refusal() {
    let Some(_) = server("LOADGEN_MY_TLS_URL") else {
        return;
    };
    let base = tls_user("127.0.0.1", &env("LOADGEN_MY_PORT"));
    for d in DRIVERS {
        refused(
            &with(&base, &format!("ssl-mode=DISABLED&driver={d}")),
            &[
                "Access denied for user 'loadgen_tls'@'127.0.0.1'",
                "REQUIRE SSL",
                "this login was plain",
            ],
        );
    }
}

#[test]
fn required_and_the_default_preferred_encrypt_without_checking() {
    let Some(_) = server("LOADGEN_MY_TLS_URL") else {
        return;
    };
    let base = tls_user("127.0.0.1", &env("LOADGEN_MY_PORT"));
    for d in DRIVERS {
        for mode in ["ssl-mode=REQUIRED&", ""] {
            let url = with(&base, &format!("{mode}driver={d}"));
            let doc = tls_run(&url, "none", &["-n", "500", "-c", "2"]);
            assert_eq!(u(&doc["runs"][0], "hits"), 500, "{url}");
        }
        // A CA given checks the chain (as the mysql client, and libpq).
        let ca = env("LOADGEN_TLS_CA");
        let url = with(&base, &format!("ssl-mode=VERIFY_CA&ssl-ca={ca}&driver={d}"));
        tls_run(&url, "ca", &["-n", "500", "-c", "2"]);
    }
}

#[test]
fn verify_identity_checks_the_ca_and_the_host_name() {
    let Some(url) = server("LOADGEN_MY_TLS_URL") else {
        return;
    };
    let port = env("LOADGEN_MY_PORT");
    let wrong_ca = env("LOADGEN_TLS_WRONG_CA");
    let relay = relay_on_127_0_0_2(format!("127.0.0.1:{port}"));
    let elsewhere = url.replace(&format!("localhost:{port}"), &format!("127.0.0.2:{relay}"));
    assert_ne!(elsewhere, url);
    let wrong = url.replace(&env("LOADGEN_TLS_CA"), &wrong_ca);
    for d in DRIVERS {
        let ok = with(&url, &format!("driver={d}"));
        tls_run(&ok, "full", &["-n", "500", "-c", "2"]);
        refused(
            &with(&elsewhere, &format!("driver={d}")),
            &[
                "does not match the host name 127.0.0.2",
                "localhost, 127.0.0.1",
            ],
        );
        refused(
            &with(&wrong, &format!("driver={d}")),
            &["unknown issuer", &wrong_ca],
        );
        refused(
            &with(&url, &format!("driver={d}&ssl-ca=/nonexistent/ca.pem")),
            &["/nonexistent/ca.pem (ssl-ca)", "No such file"],
        );
    }
}

#[test]
fn conservation_over_tls_on_both_drivers() {
    let Some(url) = server("LOADGEN_MY_TLS_URL") else {
        return;
    };
    for (d, depth) in [("wire", "1"), ("wire", "8"), ("mysql_async", "1")] {
        let url = with(&url, &format!("driver={d}"));
        let seen = OwnCount::before("global status Com_stmt_execute", &url);
        let doc = tls_run(&url, "full", &["-n", "20000", "-c", "16", "-p", depth]);
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 20000, "{url}");
        seen.assert_saw(r, 20000, &format!("{url} -p {depth}"));
    }
}

#[test]
fn verify_100000_keys_over_tls_on_both_drivers() {
    let Some(url) = server("LOADGEN_MY_TLS_URL") else {
        return;
    };
    for (d, extra) in [
        ("wire", ["-c", "4", "-p", "32"]),
        ("mysql_async", ["-c", "16", "-p", "1"]),
    ] {
        let url = with(&url, &format!("driver={d}"));
        let mut args = vec![
            "-n", "100000", "--keys", "1-100000", "--dist", "seq", "--verify",
        ];
        args.extend_from_slice(&extra);
        let doc = tls_run(&url, "full", &args);
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 100_000, "{url}");
        assert_eq!(u(r, "error_total"), 0, "{url}: {}", r["error_samples"]);
    }
}

#[test]
fn a_unix_socket_stays_plain_and_refuses_required() {
    let Some(url) = server("LOADGEN_MY_SOCKET_URL") else {
        return;
    };
    let sock = env("LOADGEN_MY_SOCKET");
    for d in DRIVERS {
        let (code, doc, err) = run_json(&[&with(&url, &format!("driver={d}")), "-n", "200"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(doc["runs"][0]["tls"], Value::Null);
        refused(
            &with(&url, &format!("driver={d}&ssl-mode=REQUIRED")),
            &["ssl-mode=REQUIRED", &sock, "Unix socket"],
        );
    }
}

/// ssl-mode=VERIFY_CA through an address the certificate does not carry (127.0.0.2): the wire
/// driver checks the chain and not the name on its lookups and on the count's connection, so
/// the run reports the server's count (the count's mysql_async connection checked the name and
/// said "does not match" instead); mysql_async itself checks the name and says so in one line;
/// VERIFY_IDENTITY is refused on both.
#[test]
fn verify_ca_skips_the_host_name_on_the_count_too() {
    let Some(url) = server("LOADGEN_MY_TLS_URL") else {
        return;
    };
    let port = env("LOADGEN_MY_PORT");
    let relay = relay_on_127_0_0_2(format!("127.0.0.1:{port}"));
    let elsewhere = url.replace(&format!("localhost:{port}"), &format!("127.0.0.2:{relay}"));
    let ca = elsewhere.replace("VERIFY_IDENTITY", "VERIFY_CA");
    assert_ne!(ca, elsewhere);
    let doc = tls_run(&with(&ca, "driver=wire"), "ca", &["-n", "500"]);
    let so = &doc["runs"][0]["server_observed"];
    assert_eq!(so["source"], "global status Com_stmt_execute", "{so}");
    assert_eq!(so["matches"], true, "{so}");
    refused(
        &with(&ca, "driver=mysql_async"),
        &["does not match the host name 127.0.0.2", "driver=wire"],
    );
    for d in DRIVERS {
        refused(
            &with(&elsewhere, &format!("driver={d}")),
            &["does not match the host name 127.0.0.2"],
        );
    }
}
