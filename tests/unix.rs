//! Every protocol over its Unix socket, against the real servers (scripts/servers.sh exposes
//! each one's socket; memcached's is a second instance, memcached_unix): conservation (loadgen's
//! count equals the server's own, read over the same socket) and `--verify` over 100,000 keys
//! on every driver, `prepare` over a socket, HTTP against `loadgen serve --unix`, and the
//! one-line errors (exit 2) for a path that does not exist, a regular file and a dead socket.

mod common;
use common::*;

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const KEYS: &str = "1-100000";

/// The run went over the socket `socket` and says so in the JSON.
fn assert_unix(r: &Value, socket: &str, context: &str) {
    assert_eq!(r["transport"], "unix", "{context}: {r}");
    assert_eq!(r["socket"], socket, "{context}");
}

fn conserve(url: &str, source: &str, socket: &str, extra: &[&str]) -> Value {
    conserve_20000(url, source, extra, |r| assert_unix(r, socket, url))
}

fn verify(url: &str, socket: &str, extra: &[&str]) {
    verify_100000(url, extra, |r| assert_unix(r, socket, url))
}

/// `loadgen prepare URL` for the keys these tests read (memcached_unix starts empty, and a
/// restarted Redis holds nothing).
fn prepare(url: &str) {
    let out = run(&["prepare", url, "--rows", "100000"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "prepare {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn postgres_over_its_socket_on_both_drivers() {
    let Some(url) = server("LOADGEN_PG_SOCKET_URL") else {
        return;
    };
    let dir = std::env::var("LOADGEN_PG_SOCKET_DIR").expect("LOADGEN_PG_SOCKET_DIR");
    let port = std::env::var("LOADGEN_PG_PORT").expect("LOADGEN_PG_PORT");
    let socket = format!("{dir}/.s.PGSQL.{port}");
    for driver in ["wire", "tokio"] {
        let url = with(&url, &format!("driver={driver}"));
        conserve(&url, "pg_stat_statements.calls", &socket, &["-p", "4"]);
        verify(&url, &socket, &["-p", "16"]);
    }
}

#[test]
fn mysql_over_its_socket_on_both_drivers() {
    let Some(url) = server("LOADGEN_MY_SOCKET_URL") else {
        return;
    };
    let socket = std::env::var("LOADGEN_MY_SOCKET").expect("LOADGEN_MY_SOCKET");
    let source = "global status Com_stmt_execute";
    let wire = with(&url, "driver=wire");
    conserve(&wire, source, &socket, &["-p", "4"]);
    verify(&wire, &socket, &["-p", "16"]);
    let lib = with(&url, "driver=mysql_async");
    conserve(&lib, source, &socket, &[]);
    verify(&lib, &socket, &[]);
}

#[test]
fn memcached_over_its_socket_prepared_there() {
    let Some(url) = server("LOADGEN_MC_SOCKET_URL") else {
        return;
    };
    let socket = std::env::var("LOADGEN_MC_SOCKET").expect("LOADGEN_MC_SOCKET");
    prepare(&url);
    conserve(
        &url,
        "memcached get_hits+get_misses",
        &socket,
        &["-p", "16"],
    );
    verify(&url, &socket, &["-p", "16"]);
}

#[test]
fn redis_over_its_socket_prepared_there() {
    let Some(url) = server("LOADGEN_REDIS_SOCKET_URL") else {
        return;
    };
    let socket = std::env::var("LOADGEN_REDIS_SOCKET").expect("LOADGEN_REDIS_SOCKET");
    prepare(&url);
    let source = "INFO commandstats cmdstat_get.calls";
    let doc = conserve(&url, source, &socket, &["-p", "16"]);
    // The password in the query is a secret like any other.
    let target = doc["runs"][0]["target"].as_str().unwrap();
    assert!(target.contains("pass=***") && !doc.to_string().contains("pass=loadgen"));
    verify(&url, &socket, &["-p", "16"]);
    // redis-rs's other spelling reaches the same server.
    let plain = url.replacen("redis+unix://", "unix://", 1);
    conserve(&plain, source, &socket, &[]);
}

/// `loadgen serve --unix PATH`, stopped on drop.
struct ServedUnix(Child);

impl ServedUnix {
    fn start(path: &Path, rows: u64) -> ServedUnix {
        let child = Command::new(bin())
            .args(["serve", "--rows", &rows.to_string(), "-t", "1", "--unix"])
            .arg(path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadgen serve starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(path).is_err() {
            assert!(
                Instant::now() < deadline,
                "loadgen serve --unix did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        ServedUnix(child)
    }
}

impl Drop for ServedUnix {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// hits + misses from the server's `GET /stats`, over its socket.
fn served_lookups(path: &Path) -> u64 {
    let s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    serve_lookups(s)
}

#[test]
fn http_over_the_socket_of_loadgen_serve() {
    let dir = TempDir::new("loadgen-unix-http");
    let path = dir.join("app.sock");
    let _served = ServedUnix::start(&path, 100_000);
    let url = format!(
        "http+unix://{}/usr/{{key}}",
        urlencode(path.to_str().unwrap())
    );
    let socket = path.to_str().unwrap();
    for p in ["1", "16"] {
        let before = served_lookups(&path);
        let (code, doc, err) = run_json(&[&url, "-n", "20000", "--keys", KEYS, "-c", "8", "-p", p]);
        assert_eq!(code, 0, "{err}");
        let r = &doc["runs"][0];
        assert_unix(r, socket, &url);
        assert_eq!(u(r, "hits"), 20000, "-p {p}: {r}");
        assert_eq!(served_lookups(&path) - before, 20000, "-p {p}");
        assert_schema_valid(&doc);
    }
    verify(&url, socket, &["-p", "16"]);
    // The text report's connect line names the socket.
    let out = run(&["run", &url, "-n", "100", "--keys", KEYS, "-o", "/dev/null"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("connect "))
        .unwrap_or_else(|| panic!("no connect line: {text}"));
    assert!(line.contains(&format!("over unix {socket}")), "{line}");
}

/// Every socket URL form, pointed at `path`.
fn forms(path: &str) -> Vec<String> {
    let dir = Path::new(path)
        .parent()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let name = Path::new(path).file_name().unwrap().to_str().unwrap();
    let mut v = vec![
        format!("mysql://u@localhost/db?socket={path}"),
        format!("mysql://u@localhost/db?socket={path}&driver=mysql_async"),
        format!("memcache://{path}"),
        format!("redis+unix://{path}"),
        format!("http+unix://{}/usr/{{key}}", urlencode(path)),
    ];
    // libpq names the directory; the socket file in it is .s.PGSQL.<port>.
    if let Some(port) = name.strip_prefix(".s.PGSQL.") {
        for driver in ["wire", "tokio"] {
            v.push(format!(
                "postgres://u@/db?host={dir}&port={port}&driver={driver}"
            ));
        }
    }
    v
}

/// Exit 2 and exactly one line naming `cause`, for `run` of every form and for `prepare`.
fn refused(path: &str, cause: &str) {
    for url in forms(path) {
        let out = run(&[
            "run",
            &url,
            "-n",
            "10",
            "--timeout",
            "2s",
            "-o",
            "/dev/null",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        let lines: Vec<&str> = stderr.trim().lines().collect();
        assert_eq!(lines.len(), 1, "{url}: not one line: {stderr}");
        assert!(
            lines[0].contains(cause),
            "{url}: '{cause}' not in: {stderr}"
        );
        assert!(
            lines[0].contains(path),
            "{url}: the line names no path: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = run(&["prepare", &format!("memcache://{path}"), "--rows", "10"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(cause), "{stderr}");
}

#[test]
fn a_missing_socket_is_named() {
    let dir = TempDir::new("loadgen-unix-missing");
    let path = dir.join(".s.PGSQL.5432");
    refused(path.to_str().unwrap(), "does not exist");
}

#[test]
fn a_regular_file_is_not_a_socket() {
    let dir = TempDir::new("loadgen-unix-file");
    let path = dir.join(".s.PGSQL.5432");
    std::fs::write(&path, b"not a socket").unwrap();
    refused(path.to_str().unwrap(), "is not a socket (a regular file)");
}

#[test]
fn a_socket_nobody_listens_on_is_named() {
    let dir = TempDir::new("loadgen-unix-stale");
    let path = dir.join(".s.PGSQL.5432");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    refused(path.to_str().unwrap(), "nothing is listening");
}

#[test]
fn a_socket_loadgen_may_not_open_is_named() {
    // Root opens any socket: loadgen runs as nobody (setpriv), which takes root to start.
    let uid = Command::new("id").arg("-u").output().unwrap().stdout;
    if String::from_utf8_lossy(&uid).trim() != "0" {
        eprintln!("skipped: needs root, to run loadgen as nobody");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("loadgen-unix-perm");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.join("mc.sock");
    let _listening = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let url = format!("memcache://{}", path.display());
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", bin()])
        .args(["run", &url, "-n", "10", "-o", "/dev/null"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let cause = format!("permission denied on socket {}", path.display());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&cause), "{stderr}");
}

#[test]
fn socket_urls_that_say_two_things_are_refused() {
    for (url, cause) in [
        (
            "mysql://u@127.0.0.1:3306/db?socket=/run/mysqld/mysqld.sock",
            "so the URL names no TCP address",
        ),
        ("memcache://%2Frun%2Fmc.sock", "the host is a path"),
        ("memcache://:11211/run/mc.sock", "a socket has no port"),
        ("redis+unix://h/run/r.sock", "after an empty host"),
        ("redis://127.0.0.1:1?db=2", "db= is for redis+unix://"),
        ("http+unix://run%2Fapp.sock/usr/{key}", "percent-encoded"),
        ("postgres://u@/db", "no host"),
        ("postgres://u@/db?host=run/pg", "is a path"),
        (
            "postgres://u@/db?host=/run/pg&sock=1",
            "unknown option 'sock'",
        ),
    ] {
        let out = run(&["run", url, "-n", "10", "-o", "/dev/null"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{url}: {stderr}");
        assert!(stderr.contains(cause), "{url}: '{cause}' not in: {stderr}");
    }
}

#[test]
fn a_tcp_run_says_tcp() {
    let (code, doc, err) = run_json(&["-n", "100", "--keys", "1-100"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(
        (&r["transport"], &r["socket"]),
        (&"tcp".into(), &Value::Null)
    );
}
