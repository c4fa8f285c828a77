//! TLS against the real servers (scripts/servers.sh: a throwaway CA signs one certificate for
//! localhost, 127.0.0.1 and ::1; PostgreSQL lets the role loadgen_tls in over TLS only, Redis
//! has a TLS port), and https through a socat TLS terminator in front of `loadgen serve`:
//! the server's reason when plain is refused, each sslmode, a host name the certificate does not
//! carry, a CA that did not sign it, conservation and `--verify` over TLS on every driver, and
//! no byte of a key in any output.

mod common;
use common::*;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const KEYS: &str = "1-100000";

/// The base64 body of a PEM key file: what must never appear in an output.
fn key_body(path: &str) -> String {
    let pem = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    pem.lines().filter(|l| !l.starts_with("-----")).collect()
}

/// Every output of a run: stdout and stderr.
fn outputs(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A run that must fail at setup: exit 2, and one line of stderr that holds every `want`.
fn refused(url: &str, want: &[&str]) -> String {
    let out = run(&["run", url, "-n", "100", "-o", "/dev/null"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{url}: not one line: {stderr}");
    for w in want {
        assert!(lines[0].contains(w), "{url}: '{w}' not in: {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// The run's `tls` object: TLS 1.3 and the verification asked for.
fn assert_tls(r: &Value, verified: &str, context: &str) {
    assert_eq!(r["transport"], "tcp", "{context}");
    assert_eq!(r["tls"]["version"], "TLS 1.3", "{context}: {r}");
    assert!(
        r["tls"]["cipher"].as_str().unwrap().starts_with("TLS13_"),
        "{context}: {r}"
    );
    assert_eq!(r["tls"]["verified"], verified, "{context}");
}

fn conserve(url: &str, source: &str, verified: &str, extra: &[&str]) -> Value {
    conserve_20000(url, source, extra, |r| assert_tls(r, verified, url))
}

fn verify(url: &str, verified: &str, extra: &[&str]) {
    verify_100000(url, extra, |r| assert_tls(r, verified, url))
}

#[test]
fn postgres_tls_only_role_and_each_sslmode() {
    let Some(url) = server("LOADGEN_PG_TLS_URL") else {
        return;
    };
    let port = env("LOADGEN_PG_PORT");
    let ca = env("LOADGEN_TLS_CA");
    let wrong = env("LOADGEN_TLS_WRONG_CA");
    let base = format!("postgres://loadgen_tls@127.0.0.1:{port}/loadgen");
    let relay = relay_on_127_0_0_2(format!("127.0.0.1:{port}"));
    let elsewhere = format!("postgres://loadgen_tls@127.0.0.2:{relay}/loadgen");
    for driver in ["wire", "tokio"] {
        let d = format!("driver={driver}");
        // Plain: the server's own reason (pg_hba.conf), and what to do.
        refused(
            &with(&with(&base, "sslmode=disable"), &d),
            &["pg_hba.conf rejects", "no encryption", "sslmode=require"],
        );
        // require: encrypted, nothing checked; libpq's default (prefer) takes TLS here too.
        for (mode, verified) in [("sslmode=require", "none"), ("sslmode=prefer", "none")] {
            let (code, doc, err) = run_json(&[&with(&with(&base, mode), &d), "-n", "500"]);
            assert_eq!(code, 0, "{mode} {driver}: {err}");
            assert_tls(&doc["runs"][0], verified, mode);
        }
        // verify-ca through 127.0.0.2: the chain is checked, the name is not.
        let ca_only = with(
            &with(&elsewhere, &format!("sslmode=verify-ca&sslrootcert={ca}")),
            &d,
        );
        let (code, doc, err) = run_json(&[&ca_only, "-n", "500"]);
        assert_eq!(code, 0, "verify-ca {driver}: {err}");
        assert_tls(&doc["runs"][0], "ca", "verify-ca");
        // verify-full through 127.0.0.2: the names on both sides.
        let full = with(
            &with(&elsewhere, &format!("sslmode=verify-full&sslrootcert={ca}")),
            &d,
        );
        refused(
            &full,
            &[
                "does not match the host name 127.0.0.2",
                "localhost, 127.0.0.1, ::1",
            ],
        );
        // A CA that did not sign the server's certificate.
        refused(
            &with(&url, &d).replace(&ca, &wrong),
            &["unknown issuer", &wrong, "pass the CA that signed"],
        );
        // A CA file that is not there: named, with the option.
        refused(
            &with(&url, &d).replace(&ca, "/nonexistent/ca.pem"),
            &["/nonexistent/ca.pem (sslrootcert)", "No such file"],
        );
    }
}

#[test]
fn postgres_over_tls_conserves_and_verifies_on_both_drivers() {
    let Some(url) = server("LOADGEN_PG_TLS_URL") else {
        return;
    };
    for driver in ["wire", "tokio"] {
        let url = with(&url, &format!("driver={driver}"));
        conserve(&url, "pg_stat_statements.calls", "full", &["-p", "4"]);
        verify(&url, "full", &["-p", "16"]);
    }
    // The text report's connect line names the version and cipher.
    let out = run(&["run", &url, "-n", "100", "-o", "/dev/null"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("connect "))
        .unwrap_or_else(|| panic!("no connect line: {text}"));
    assert!(
        line.contains("TLS 1.3 TLS13_") && line.contains("host name verified"),
        "{line}"
    );
}

#[test]
fn rediss_conserves_and_verifies() {
    let Some(url) = server("LOADGEN_REDIS_TLS_URL") else {
        return;
    };
    // A restarted Redis holds nothing: load the keys over TLS (prepare speaks rediss:// too).
    let out = run(&["prepare", &url, "--rows", "100000"]);
    assert_eq!(out.status.code(), Some(0), "{}", outputs(&out));
    let doc = conserve(
        &url,
        "INFO commandstats cmdstat_get.calls",
        "full",
        &["-p", "16"],
    );
    assert!(
        !doc.to_string().contains(":loadgen@"),
        "password in the JSON"
    );
    verify(&url, "full", &["-p", "16"]);
    // The plain port: not TLS, said in one line.
    let plain = url.replace(&env("LOADGEN_REDIS_TLS_PORT"), &env("LOADGEN_REDIS_PORT"));
    refused(&plain, &["TLS"]);
    // A CA that did not sign the certificate.
    let bad = url.replace(&env("LOADGEN_TLS_CA"), &env("LOADGEN_TLS_WRONG_CA"));
    refused(&bad, &["unknown issuer"]);
}

/// `loadgen serve` behind a socat TLS terminator (the server certificate of servers.sh);
/// both stopped on drop.
struct Https {
    serve: Child,
    socat: Child,
    serve_port: u16,
    port: u16,
}

impl Https {
    fn start(rows: u64) -> Https {
        let serve_port = free_port();
        let serve = Command::new(bin())
            .args(["serve", "--addr", &format!("127.0.0.1:{serve_port}")])
            .args(["--rows", &rows.to_string(), "-t", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadgen serve starts");
        let port = free_port();
        let dir = std::path::Path::new(&env("LOADGEN_TLS_CA"))
            .parent()
            .unwrap()
            .to_path_buf();
        let listen = format!(
            "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,verify=0,cert={},key={}",
            dir.join("server.crt").display(),
            env("LOADGEN_TLS_SERVER_KEY")
        );
        let socat = Command::new("socat")
            .args([listen, format!("TCP:127.0.0.1:{serve_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("socat (scripts/servers.sh tools installs it)");
        let h = Https {
            serve,
            socat,
            serve_port,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for p in [serve_port, port] {
            while TcpStream::connect(("127.0.0.1", p)).is_err() {
                assert!(Instant::now() < deadline, "port {p} did not listen");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        h
    }

    /// hits + misses from serve's `GET /stats`, plain, behind the terminator.
    fn lookups(&self) -> u64 {
        let s = TcpStream::connect(("127.0.0.1", self.serve_port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        serve_lookups(s)
    }
}

impl Drop for Https {
    fn drop(&mut self) {
        for c in [&mut self.socat, &mut self.serve] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn https_through_a_tls_terminator() {
    if server("LOADGEN_TLS_CA").is_none() {
        return;
    }
    let h = Https::start(100_000);
    let url = format!(
        "https://localhost:{}/usr/{{key}}?cacert={}",
        h.port,
        env("LOADGEN_TLS_CA")
    );
    let before = h.lookups();
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "--keys", KEYS, "-c", "4", "-p", "8"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_tls(r, "full", &url);
    assert_eq!(u(r, "hits"), 20000, "{r}");
    assert_eq!(h.lookups() - before, 20000);
    assert_schema_valid(&doc);
    verify(&url, "full", &["-p", "8"]);
    // Without the CA: the system's CAs do not know this one.
    let system = format!("https://localhost:{}/usr/{{key}}", h.port);
    refused(&system, &["unknown issuer", "the system's trusted CAs"]);
}

#[test]
fn no_key_material_in_any_output() {
    let Some(url) = server("LOADGEN_PG_TLS_URL") else {
        return;
    };
    let key = env("LOADGEN_TLS_SERVER_KEY");
    let body = key_body(&key);
    assert!(body.len() > 40, "{key} is a PEM key");
    let dir = TempDir::new("loadgen-tls-test");
    let json = dir.join("r.json");
    let html = dir.join("r.html");
    let mut seen = String::new();
    // A key where a CA belongs, a key as the client certificate: refused, naming the file.
    for wrong in [
        url.replace(&env("LOADGEN_TLS_CA"), &key),
        with(&url, &format!("sslcert={key}&sslkey={key}")),
    ] {
        let out = run(&["run", &wrong, "-n", "10", "-o", json.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", outputs(&out));
        assert!(outputs(&out).contains(&key), "{}", outputs(&out));
        seen += &outputs(&out);
    }
    // A run that works, and its HTML report.
    let out = run(&["run", &url, "-n", "200", "-o", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", outputs(&out));
    seen += &outputs(&out);
    let out = run(&[
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", outputs(&out));
    seen += &outputs(&out);
    for f in [&json, &html] {
        seen += &std::fs::read_to_string(f).unwrap_or_default();
    }
    for chunk in body.as_bytes().chunks(16) {
        let chunk = std::str::from_utf8(chunk).unwrap();
        assert!(!seen.contains(chunk), "key material '{chunk}' in an output");
    }
}

#[test]
fn postgres_takes_an_x509_v1_client_certificate_on_both_drivers() {
    // `openssl x509 -req` without an extension file makes a v1 certificate; psql sends it, and
    // loadgen refused it ("do not go together: UnsupportedCertVersion") before connecting.
    let Some(url) = server("LOADGEN_PG_TLS_URL") else {
        return;
    };
    let ca = env("LOADGEN_TLS_CA");
    let dir = TempDir::new("loadgen-v1");
    let (crt, key) = client_cert(&dir, "loadgen_tls", &ca);
    let with_cert = with(&url, &format!("sslcert={crt}&sslkey={key}"));
    for driver in ["wire", "tokio"] {
        let (code, doc, err) =
            run_json(&[&with(&with_cert, &format!("driver={driver}")), "-n", "500"]);
        assert_eq!(code, 0, "{driver}: {err}");
        assert_eq!(u(&doc["runs"][0], "hits"), 500, "{driver}");
    }
}

/// A passphrase-protected client key (what `openssl req` writes without -nodes) is refused
/// before any connection, in one line that says it is encrypted and how to decrypt it, on
/// every scheme that takes a client key; neither the key nor its passphrase is shown.
#[test]
fn an_encrypted_client_key_says_how_to_decrypt_it() {
    let dir = TempDir::new("loadgen-enc");
    let (key, crt) = (dir.join("c.key"), dir.join("c.crt"));
    let (key, crt) = (key.to_str().unwrap(), crt.to_str().unwrap());
    let o = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args([
            "-keyout",
            key,
            "-out",
            crt,
            "-subj",
            "/CN=loadgen",
            "-days",
            "1",
        ])
        .args(["-passout", "pass:hunter2-passphrase"])
        .output()
        .unwrap();
    assert!(o.status.success(), "openssl: {}", outputs(&o));
    assert!(std::fs::read_to_string(key).unwrap().contains("ENCRYPTED"));
    // Nothing listens on port 1: the key is judged before connecting.
    let pg = format!(
        "postgres://loadgen@127.0.0.1:1/loadgen?sslmode=require&sslcert={crt}&sslkey={key}"
    );
    for url in [
        pg.clone(),
        format!("{pg}&driver=wire"),
        format!("rediss://127.0.0.1:1?cert={crt}&key={key}"),
    ] {
        let err = refused(&url, &["is encrypted", &format!("openssl pkey -in {key}")]);
        assert!(!err.contains("hunter2"), "{err}");
        for chunk in key_body(key).as_bytes().chunks(16) {
            assert!(!err.contains(std::str::from_utf8(chunk).unwrap()), "{err}");
        }
    }
}

/// A v1 client certificate for `cn` signed by the CA `ca` (its key beside it as *.key), made in
/// `dir`: (certificate, key) paths.
fn client_cert(dir: &std::path::Path, cn: &str, ca: &str) -> (String, String) {
    let p = |x: &str| dir.join(x).to_str().unwrap().to_string();
    let (key, csr, crt) = (
        p(&format!("{cn}.key")),
        p(&format!("{cn}.csr")),
        p(&format!("{cn}.crt")),
    );
    let openssl = |args: &[&str]| {
        let o = std::process::Command::new("openssl")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "openssl {args:?}: {}", outputs(&o));
    };
    let subject = format!("/CN={cn}");
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &csr,
        "-subj",
        &subject,
    ]);
    let ca_key = ca.replace(".crt", ".key");
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        ca,
        "-CAkey",
        &ca_key,
        "-set_serial",
        "7",
        "-out",
        &crt,
        "-days",
        "2",
    ]);
    (crt, key)
}

/// The role loadgen_cert logs in by client certificate alone (pg_hba `cert`): a certificate
/// for it works on both drivers, and each way of getting it wrong is one line that says what
/// to change: no certificate, one whose CN is another user, one signed by a CA the server does
/// not trust.
#[test]
fn postgres_client_certificate_refusals_are_one_line_each() {
    let Some(url) = server("LOADGEN_PG_TLS_URL") else {
        return;
    };
    let url = url.replace("loadgen_tls@", "loadgen_cert@");
    let (ca, wrong) = (env("LOADGEN_TLS_CA"), env("LOADGEN_TLS_WRONG_CA"));
    let dir = TempDir::new("loadgen-cc");
    let (good, good_key) = client_cert(&dir, "loadgen_cert", &ca);
    let (other, other_key) = client_cert(&dir, "someone_else", &ca);
    std::fs::create_dir_all(dir.join("foreign")).unwrap();
    let (foreign, foreign_key) = client_cert(&dir.join("foreign"), "loadgen_cert", &wrong);
    let cert = |c: &str, k: &str| with(&url, &format!("sslcert={c}&sslkey={k}"));
    for driver in ["wire", "tokio"] {
        let d = format!("driver={driver}");
        let (code, doc, err) = run_json(&[&with(&cert(&good, &good_key), &d), "-n", "500"]);
        assert_eq!(code, 0, "{driver}: {err}");
        assert_eq!(u(&doc["runs"][0], "hits"), 500, "{driver}");
        refused(
            &with(&url, &d),
            &[
                "requires a valid client certificate",
                "pass sslcert=",
                "sslkey=",
            ],
        );
        refused(
            &with(&cert(&other, &other_key), &d),
            &[
                "certificate authentication failed",
                "CN must be the user name",
            ],
        );
        refused(
            &with(&cert(&foreign, &foreign_key), &d),
            &[
                "refused the client certificate",
                "not signed by a CA the server trusts",
            ],
        );
    }
}
