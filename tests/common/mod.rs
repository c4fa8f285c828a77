//! Helpers for the integration tests: run the real binary, read its JSON, reach the servers that
//! scripts/servers.sh started (their URLs come from `scripts/servers.sh env`).
#![allow(dead_code)]

pub mod cluster;
pub mod fake_mysql;
pub mod fake_pg;
pub mod fakes;
pub mod kv;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
pub mod fake_setup;

mod own_counts;
pub use own_counts::*;

#[path = "../../src/test_dir.rs"]
mod temp_dir;
#[allow(unused_imports)] // not every test binary makes a temp dir
pub(crate) use temp_dir::TempDir;

/// The two `--metrics` ports scripts/servers.sh's Prometheus scrapes (LOADGEN_PROM_SCRAPE_A/B).
pub fn scrape_ports() -> [u16; 2] {
    let port = |var: &str, default: u16| {
        std::env::var(var)
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(default)
    };
    [
        port("LOADGEN_PROM_SCRAPE_A", 59464),
        port("LOADGEN_PROM_SCRAPE_B", 59465),
    ]
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_loadgen")
}

/// The URL of a server from the environment. Under scripts/test.sh (LOADGEN_REQUIRE_SERVERS=1)
/// a missing server fails the test; a bare `cargo test` skips it with a note.
pub fn server(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            if servers_required() {
                panic!("{var} is not set: run the tests through scripts/test.sh, which starts the servers");
            }
            eprintln!("skipped: {var} is not set (scripts/test.sh starts the servers and sets it)");
            None
        }
    }
}

/// Whether LOADGEN_REQUIRE_SERVERS asks for every server (and test tool): set, and neither
/// empty nor `0`.
pub fn servers_required() -> bool {
    std::env::var("LOADGEN_REQUIRE_SERVERS").is_ok_and(|v| !v.is_empty() && v != "0")
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("loadgen runs")
}

/// `loadgen run ARGS --format json -o - -q`, returning (exit code, document, stderr).
pub fn run_json(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json", "-o", "-", "-q"]);
    let out = run(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}); stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

pub fn u(v: &Value, path: &str) -> u64 {
    let mut cur = v;
    for p in path.split('.') {
        cur = match p.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[p],
        };
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{path} is not an integer: {cur}"))
}

pub fn f(v: &Value, path: &str) -> f64 {
    let mut cur = v;
    for p in path.split('.') {
        cur = match p.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[p],
        };
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number: {cur}"))
}

/// Runs psql against the test PostgreSQL and returns its trimmed output.
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-XAtqc", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Validates a result document against schemas/result.schema.json.
pub fn assert_schema_valid(doc: &Value) {
    let schema: Value = serde_json::from_str(include_str!("../../schemas/result.schema.json"))
        .expect("schema parses");
    let v = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = v
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "result does not match the schema: {errors:?}"
    );
}

/// A `loadgen serve` process of our own: a real server we may pause and kill by pid.
pub struct Served {
    pub child: Child,
    pub url: String,
}

impl Served {
    pub fn start(rows: u64) -> Served {
        Served::start_with(rows, &[])
    }

    /// `start` with more `serve` flags, e.g. `["--delay", "10ms"]`.
    pub fn start_with(rows: u64, extra: &[&str]) -> Served {
        let port = free_port();
        let child = Command::new(bin())
            .args([
                "serve",
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--rows",
                &rows.to_string(),
                "-t",
                "1",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loadgen serve starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "loadgen serve did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Served {
            child,
            url: format!("http://127.0.0.1:{port}/usr/{{key}}"),
        }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The server's own counter saw exactly `n` lookups, read from `source`.
pub fn assert_server_saw(run: &Value, source: &str, n: u64, context: &str) {
    let o = &run["server_observed"];
    assert_eq!(o["source"], source, "{context}: {o}");
    assert_eq!(u(o, "delta"), n, "{context}: {o}");
}

/// `-n 20000` over keys 1-100000 against `url`: every request answered, and the server's own
/// counter saw exactly 20,000; `check` asserts how the run connected. Returns the document.
pub fn conserve_20000(url: &str, source: &str, extra: &[&str], check: impl Fn(&Value)) -> Value {
    let mut args = vec![url, "-n", "20000", "--keys", "1-100000", "-c", "8"];
    args.extend_from_slice(extra);
    let seen = OwnCount::before(source, url);
    let (code, doc, err) = run_json(&args);
    assert_eq!(code, 0, "{url}: {err}");
    let r = &doc["runs"][0];
    check(r);
    assert_eq!(u(r, "hits"), 20000, "{url}: {r}");
    seen.assert_saw(r, 20000, url);
    assert_eq!(r["server_observed"]["matches"], true, "{url}");
    assert_schema_valid(&doc);
    doc
}

/// `--verify` over all keys 1-100000, in order: every row checked, no error; `check` asserts how
/// the run connected.
pub fn verify_100000(url: &str, extra: &[&str], check: impl Fn(&Value)) {
    let mut args = vec![
        url, "-n", "100000", "--keys", "1-100000", "--dist", "seq", "--verify", "-c", "8",
    ];
    args.extend_from_slice(extra);
    let (code, doc, err) = run_json(&args);
    assert_eq!(code, 0, "{url}: {err}");
    let r = &doc["runs"][0];
    check(r);
    assert_eq!(u(r, "hits"), 100_000, "{url}: {r}");
    assert_eq!(u(r, "error_total"), 0, "{url}: {r}");
}

/// hits + misses from `loadgen serve`'s `GET /stats`, over a connected stream (TCP or Unix).
pub fn serve_lookups(mut s: impl std::io::Read + std::io::Write) -> u64 {
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    let n = |name: &str| -> u64 {
        reply
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /stats: {reply}"))
    };
    n("hits ") + n("misses ")
}

/// A PostgreSQL login role with a password of our own and SELECT on usr (created once, its
/// password set on every call, so reruns work). `admin_url`: the servers.sh superuser URL.
pub fn pg_role_with_password(admin_url: &str, role: &str, password: &str) {
    psql(
        admin_url,
        &format!(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') \
             THEN CREATE ROLE {role}; END IF; END $$; \
             ALTER ROLE {role} LOGIN PASSWORD '{password}'; GRANT SELECT ON usr TO {role}"
        ),
    );
}

/// `-n 500` on `url` answers 500 hits, and neither `secret` nor its percent-encoding shows on
/// stdout (the JSON) or stderr (the report).
pub fn assert_500_hits_never_showing(url: &str, secret: &str) {
    let out = run(&[
        "run", url, "-n", "500", "-c", "2", "--format", "json", "-o", "-",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(u(&doc["runs"][0], "hits"), 500, "{stderr}");
    for shown in [&stdout, &stderr] {
        assert!(
            !shown.contains(secret) && !shown.contains(&urlencode(secret)),
            "{shown}"
        );
    }
}

/// A MariaDB user on 127.0.0.1 with a password of our own and SELECT on loadgen.*, made as
/// root over the servers.sh socket (created once, its password set on every call).
pub fn my_user_with_password(user: &str, password: &str) {
    let sock = std::env::var("LOADGEN_MY_SOCKET").expect("LOADGEN_MY_SOCKET (servers.sh env)");
    let sql = format!(
        "CREATE USER IF NOT EXISTS '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'; \
         ALTER USER '{user}'@'127.0.0.1' IDENTIFIED BY '{password}'; \
         GRANT SELECT ON loadgen.* TO '{user}'@'127.0.0.1';"
    );
    let out = Command::new("mariadb")
        .args(["--no-defaults", "-S", &sock, "-u", "root", "-e", &sql])
        .env_remove("MYSQL_PWD")
        .output()
        .expect("mariadb client runs");
    assert!(
        out.status.success(),
        "creating MariaDB user {user} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SQL as MariaDB's root over the servers.sh socket (no default database), its output without
/// column names; fails the test if the SQL fails.
pub fn mariadb_root(sql: &str) -> String {
    let out = Command::new("mariadb")
        .args(["--no-defaults", "-N", "-B", "-S", &env("LOADGEN_MY_SOCKET")])
        .args(["-u", "root", "-e", sql])
        .env_remove("MYSQL_PWD")
        .output()
        .expect("mariadb client runs");
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `scripts/servers.sh ARGS` (up, pid, ...), its trimmed stdout; fails the test if it fails.
pub fn servers(args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/servers.sh"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "servers.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `kill SIG PID` (a server of servers.sh, or a process of our own).
pub fn kill(sig: &str, pid: &str) {
    assert!(Command::new("kill")
        .args([sig, pid])
        .status()
        .unwrap()
        .success());
}

/// redis-cli against the servers.sh Redis as its default user (the password from the
/// environment, never on the command line), its trimmed output.
pub fn redis_cli(args: &[&str]) -> String {
    let port = std::env::var("LOADGEN_REDIS_PORT").expect("LOADGEN_REDIS_PORT (servers.sh env)");
    let pw = std::env::var("LOADGEN_REDIS_PASSWORD").expect("LOADGEN_REDIS_PASSWORD");
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port])
        .args(args)
        .env("REDISCLI_AUTH", pw)
        .output()
        .expect("redis-cli runs");
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !text.starts_with("ERR"),
        "redis-cli {args:?}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A Redis ACL user with a password of our own (set on every call, so reruns work).
pub fn redis_user_with_password(user: &str, password: &str) {
    let pw = format!(">{password}");
    redis_cli(&["ACL", "SETUSER", user, "reset", "on", &pw, "~*", "+@all"]);
}

/// An HTTP response as the tests read it.
pub struct Reply {
    pub status: u16,
    /// The status line and headers, lower-cased.
    pub headers: String,
    /// The body, de-chunked when it came chunked.
    pub body: String,
}

/// `127.0.0.1:9090` from `http://127.0.0.1:9090/any/path`.
pub fn host_port(url: &str) -> String {
    let rest = url.trim_start_matches("http://");
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// One HTTP/1.1 request on a fresh connection to `hostport`; `headers` are extra lines, each
/// ending in CRLF. None when nothing answers or the reply is not HTTP.
pub fn http_request(hostport: &str, method: &str, path: &str, headers: &str) -> Option<Reply> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(hostport).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n{headers}\r\n"
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let headers = head.to_ascii_lowercase();
    let body = if headers.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// A GET that must be answered.
pub fn http_get(hostport: &str, path: &str) -> Reply {
    http_request(hostport, "GET", path, "")
        .unwrap_or_else(|| panic!("no HTTP answer from {hostport} to GET {path}"))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest.get(n + 2..).unwrap_or("");
    }
    out
}

/// Percent-encoding for a query parameter.
pub fn urlencode(s: &str) -> String {
    loadgen::url::encode(s)
}

/// A byte-for-byte TCP relay from 127.0.0.2 (loopback, but a name the certificate does not
/// carry) to `to`; its threads end with the test process.
pub fn relay_on_127_0_0_2(to: String) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.2:0").expect("127.0.0.2 is loopback");
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let Ok(s) = std::net::TcpStream::connect(&to) else {
                continue;
            };
            for (mut a, mut b) in [(c.try_clone().unwrap(), s.try_clone().unwrap()), (s, c)] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut a, &mut b);
                    let _ = b.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    port
}

/// A variable of `scripts/servers.sh env` that the test needs.
pub fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} (scripts/servers.sh env)"))
}

/// `base` with more query options (`a=1` or `a=1&b=2`).
pub fn with(base: &str, options: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{options}")
}

/// The one line of a bad-input error on stderr: exactly one, besides the "For more
/// information, try '--help'." hint clap adds to the errors of the flags it parses.
pub fn one_error_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information, try '--help'"))
        .collect();
    assert_eq!(lines.len(), 1, "not one line: {stderr}");
    lines[0]
}

/// The counts of every error kind of a run (its `errors` object), added up.
/// A run's exit code is what its result says, exactly: 1 when it had errors or stopped early,
/// else 0 (no `--strict`: the verdict does not move it).
pub fn assert_exit_fits(code: i32, r: &Value, context: &str) {
    let failed = u(r, "error_total") > 0 || !r["stopped_early"].is_null();
    assert_eq!(
        code,
        i32::from(failed),
        "{context}: exit {code}, errors {}",
        r["errors"]
    );
}

/// The one-key ops of `--mix`, as the result JSON names them (`mget` is the multi-get).
pub const OPS: [&str; 5] = ["read", "update", "insert", "delete", "upsert"];

/// Every op of the run: the server's count of it moved by exactly loadgen's count, read by the
/// test itself (`own`, where there is a server to ask) and by loadgen; no op had an error, and
/// the ops add up to the run's requests.
pub fn assert_ops_conserved(r: &Value, ops: &[&str], own: Option<&OwnOps>, context: &str) {
    if let Some(own) = own {
        own.assert_saw(r, context);
    }
    let mut sum = 0;
    for op in ops {
        let o = &r["ops"][op];
        let n = u(o, "requests");
        assert!(n > 0, "{context}: no {op}: {}", r["ops"]);
        // A conserved op had no error: each of its requests is in the server's count.
        assert_eq!(u(o, "error_total"), 0, "{context} {op}: {}", o["errors"]);
        let so = &o["server_observed"];
        assert_eq!(u(so, "delta"), n, "{context} {op}: {so}");
        assert_eq!(so["matches"], true, "{context} {op}: {so}");
        sum += n;
    }
    for op in OPS.iter().chain(&["mget"]).filter(|o| !ops.contains(o)) {
        assert!(r["ops"][op].is_null(), "{context}: {op} not in the mix");
    }
    assert_eq!(sum, u(r, "requests"), "{context}");
}

/// A verdict whose every reason is the machine being busy with other work: what a test
/// cannot control on a shared machine, so a clean run may say it and still be clean.
pub fn only_disturbed(verdict: &Value) -> bool {
    let reasons = verdict["reasons"].as_array().unwrap();
    // Other work starting or stopping on a shared machine makes a run drift, too.
    !reasons.is_empty()
        && reasons.iter().all(|r| {
            let r = r.as_str().unwrap();
            r.starts_with("machine disturbed") || r.starts_with("drifting:")
        })
}

/// `--batch 10`, 2,000 requests on 4 connections with `--verify`, over `keys` in order
/// (`--dist seq`): no request asks for a key twice, and which keys hit is known.
pub fn multi_get_seq_run(url: &str, keys: &str) -> (i32, Value, String) {
    run_json(&[
        url, "--batch", "10", "-n", "2000", "-c", "4", "--warmup", "0s", "--keys", keys, "--dist",
        "seq", "--verify",
    ])
}

/// `mget:10` next to one-key reads (`--mix read=50,mget:10=50`), 2,000 requests on 4
/// connections with `--verify`, over `keys`.
pub fn mget_mix_run(url: &str, keys: &str) -> (i32, Value, String) {
    run_json(&[
        url,
        "-n",
        "2000",
        "-c",
        "4",
        "--mix",
        "read=50,mget:10=50",
        "--keys",
        keys,
        "--verify",
        "--warmup",
        "0s",
    ])
}

/// `--batch 10` run of `n` requests, depth `p`, with `--verify`, over keys 999001-1001000: about
/// half of them past the data set, so the multi-gets find some keys and miss others.
pub fn multi_get_run(url: &str, n: &str, p: &str) -> (i32, Value, String) {
    run_json(&[
        url,
        "--batch",
        "10",
        "-n",
        n,
        "-c",
        "4",
        "-p",
        p,
        "--warmup",
        "0s",
        "--keys",
        "999001-1001000",
        "--verify",
    ])
}

/// Three memcached of our own (servers.sh `memcached_PORT`, ports `offset`.. above 20,000 +
/// servers.sh's memcached port % 10,000: below the kernel's ephemeral range, so no client
/// connection of an earlier test can hold one) as a pool URL with keys `PREFIX<id>`, prepared with `rows` rows:
/// (the pool's URL, its members' `host:port`, their ports). Stop them with [`pool_down`].
pub fn memcached_pool(
    mc_url: &str,
    offset: u16,
    prefix: &str,
    rows: &str,
) -> (String, Vec<String>, Vec<u16>) {
    let first: u16 = mc_url.rsplit_once(':').unwrap().1.parse().unwrap();
    let ports: Vec<u16> = (offset..offset + 3)
        .map(|i| 20_000 + first % 10_000 + i)
        .collect();
    for p in &ports {
        servers(&["up", &format!("memcached_{p}")]);
    }
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let pool = format!("memcache://{}?prefix={prefix}", addrs.join(","));
    let out = run(&["prepare", &pool, "--rows", rows]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (pool, addrs, ports)
}

/// Stops the memcached of [`memcached_pool`].
pub fn pool_down(ports: &[u16]) {
    for p in ports {
        servers(&["down", &format!("memcached_{p}")]);
    }
}
