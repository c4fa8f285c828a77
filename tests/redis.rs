//! Redis, for real (the servers.sh redis-server, 1,000,000 rows loaded by scripts/test.sh):
//! conservation against INFO commandstats, --verify, hits and misses, AUTH with the ACL user and
//! the default user, SELECT db, and the setup failures a wrong login gives. Kill and pause are
//! in faults.rs, with memcached's.

mod common;
use common::*;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SOURCE: &str = "INFO commandstats cmdstat_get.calls";

/// The servers.sh Redis URL with another userinfo: `redis://{userinfo}127.0.0.1:PORT{path}`.
fn url_as(userinfo: &str, path: &str) -> String {
    let port = std::env::var("LOADGEN_REDIS_PORT").expect("LOADGEN_REDIS_PORT");
    format!("redis://{userinfo}127.0.0.1:{port}{path}")
}

#[test]
fn conservation_against_cmdstat_get() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    for p in ["1", "16"] {
        let seen = OwnCount::before(SOURCE, &url);
        let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16", "-p", p]);
        assert_eq!(code, 0, "{err}");
        let r = &doc["runs"][0];
        assert_eq!(r["kind"], "redis");
        assert_eq!(u(r, "hits"), 20000, "-p {p}: {r}");
        seen.assert_saw(r, 20000, &format!("-p {p}"));
        assert_eq!(r["server_observed"]["matches"], true);
        assert_schema_valid(&doc);
    }
}

#[test]
fn verify_100k_keys_at_depth_1_and_16() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    for p in ["1", "16"] {
        let seen = OwnCount::before(SOURCE, &url);
        let (code, doc, err) = run_json(&[
            &url, "-n", "100000", "--keys", "1-100000", "--dist", "seq", "--verify", "-c", "8",
            "-p", p,
        ]);
        assert_eq!(code, 0, "{err}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "hits"), 100_000, "-p {p}: {r}");
        assert_eq!(u(r, "error_total"), 0, "-p {p}: {r}");
        seen.assert_saw(r, 100_000, &format!("-p {p}"));
    }
}

#[test]
fn keys_past_the_loaded_range_are_misses() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let seen = OwnCount::before(SOURCE, &url);
    let (code, doc, err) = run_json(&[
        &url,
        "-n",
        "2000",
        "--keys",
        "999001-1001000",
        "--dist",
        "seq",
        "--verify",
        "-c",
        "4",
        "-p",
        "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!((u(r, "hits"), u(r, "misses")), (1000, 1000), "{r}");
    assert_eq!(u(r, "error_total"), 0, "{r}");
    seen.assert_saw(r, 2000, "misses count as GETs");
}

/// The default user with requirepass's password, and an ACL user of our own.
#[test]
fn auth_as_default_user_and_as_acl_user() {
    let Some(_) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let default_pw = std::env::var("LOADGEN_REDIS_PASSWORD").expect("LOADGEN_REDIS_PASSWORD");
    redis_user_with_password("lg_acl_probe", "AclPr0beSecret");
    for url in [
        url_as(&format!(":{default_pw}@"), ""),
        url_as("lg_acl_probe:AclPr0beSecret@", ""),
    ] {
        let (code, doc, err) = run_json(&[&url, "-n", "1000", "-c", "2", "--verify"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(u(&doc["runs"][0], "hits"), 1000);
        assert_eq!(doc["runs"][0]["server_observed"]["matches"], true);
    }
    redis_cli(&["ACL", "DELUSER", "lg_acl_probe"]);
}

/// `/1` selects database 1: rows prepared there are hits, keys only in database 0 are misses,
/// a wrong row there is a verify error; a database that does not exist is a setup error.
#[test]
fn select_db_reads_that_database() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db1 = format!("{url}/1");
    let out = run(&["prepare", &db1, "--rows", "100"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    redis_cli(&["-n", "1", "SET", "usr:7", "not the row"]);
    let seen = OwnCount::before(SOURCE, &url);
    let (code, doc, err) = run_json(&[
        &db1, "-n", "200", "--keys", "1-200", "--dist", "seq", "--verify", "-c", "2",
    ]);
    assert_eq!(code, 1, "a verify error exits 1: {err}");
    let r = &doc["runs"][0];
    assert_eq!(
        (u(r, "hits"), u(r, "misses"), u(r, "errors.verify")),
        (99, 100, 1),
        "{r}"
    );
    // Every GET reached the server, the one that failed --verify too.
    assert_eq!(seen.delta(), 200, "db 1: the server's own count");
    assert_server_saw(r, SOURCE, 200, "db 1");
    redis_cli(&["-n", "1", "FLUSHDB"]);

    let out = run(&["run", &format!("{url}/99"), "-n", "10"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SELECT 99 failed"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// Every wrong login is a setup failure: exit 2, one line naming the cause, no password in any
/// output (stdout, stderr, the JSON).
#[test]
fn wrong_logins_exit_2_naming_the_cause_never_the_password() {
    let Some(_) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    const WRONG: &str = "Wr0ngRedisPw93";
    for (url, cause) in [
        (
            url_as(&format!("loadgen:{WRONG}@"), ""),
            "refused the password for user loadgen",
        ),
        (
            url_as(&format!(":{WRONG}@"), ""),
            "refused the password for user default",
        ),
        (
            url_as(&format!("nobody_here:{WRONG}@"), "/1"),
            "refused the password for user nobody_here",
        ),
        (url_as("", ""), "wants a password (NOAUTH)"),
        (url_as("", "/1"), "wants a password (NOAUTH)"),
        (url_as("loadgen@", ""), "no password"),
        (url_as("", "/x"), "database number"),
        (url_as("", "?prefix=k:"), "unknown option 'prefix'"),
        (
            url_as(&format!("loadgen:{WRONG}@"), "").replacen("redis://", "rediss://", 1),
            "TLS",
        ),
    ] {
        let out = run(&["run", &url, "-n", "10", "--format", "json", "-o", "-"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {stderr}");
        assert!(stderr.contains(cause), "{cause} not in: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(
            !stdout.contains(WRONG) && !stderr.contains(WRONG),
            "password leaked: {stdout}{stderr}"
        );
        if cause.contains("NOAUTH") {
            // the hint survives the secret mask whole, its parenthesis closed
            assert!(stderr.contains("&pass=<password>)"), "{stderr}");
        }
    }
}

/// A redis-server of our own without a password: a URL that gives one is refused (exit 2,
/// the password not shown); one without works (PING at connect, then GETs that miss).
#[test]
fn a_server_without_a_password() {
    let Some(_) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let own = OwnRedis::start();
    const PW: &str = "Unn33dedPassw0rd";
    let out = run(&["run", &format!("redis://:{PW}@{}", own.addr), "-n", "10"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("the URL gives a password but the server has none set for user default"),
        "{text}"
    );
    assert!(!text.contains(PW), "{text}");
    let (code, doc, err) = run_json(&[&format!("redis://{}", own.addr), "-n", "100", "-c", "1"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "misses"), 100, "{r}");
    assert_server_saw(r, SOURCE, 100, "own server");
}

/// `prepare` loads every row it is asked for, with the row as its value.
#[test]
fn prepare_loads_rows_into_a_database() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let db2 = format!("{url}/2");
    let out = run(&["prepare", &db2, "--rows", "50000"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("50,000 rows"), "{stdout}");
    assert_eq!(redis_cli(&["-n", "2", "DBSIZE"]), "50000");
    assert_eq!(
        redis_cli(&["-n", "2", "GET", "usr:1"]),
        "user1\tuser1@example.com\t2010-02-03 11:22:34"
    );
    redis_cli(&["-n", "2", "FLUSHDB"]);
}

/// redis-server on a free port, no password, no persistence, state in a temp dir; killed by pid.
struct OwnRedis {
    child: Child,
    addr: String,
    /// Held for its Drop, which runs after `drop` below has stopped the server.
    _dir: TempDir,
}

impl OwnRedis {
    fn start() -> OwnRedis {
        let port = free_port();
        let dir = TempDir::new("loadgen-redis");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        OwnRedis {
            child,
            addr: format!("127.0.0.1:{port}"),
            _dir: dir,
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ACL user whose password holds `@`, `%` and `/`, percent-encoded in the URL, logs in
/// (decoded once) and never shows, encoded or not.
#[test]
fn a_percent_encoded_password_logs_in() {
    let Some(_) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    const PW: &str = "r@dis%2F/pw";
    redis_user_with_password("loadgen_pct", PW);
    let url = url_as(&format!("loadgen_pct:{}@", urlencode(PW)), "");
    assert!(url.contains("%40") && url.contains("%25") && url.contains("%2F"));
    assert_500_hits_never_showing(&url, PW);
}

/// `--batch 10`: one `MGET` of 10 keys per request over a key range half past the data set.
/// Redis's own counts, read here: cmdstat_mget moved by the requests, keyspace_hits and
/// keyspace_misses by exactly the keys loadgen found and did not find; and loadgen's own
/// cross-check names cmdstat_mget.
#[test]
fn multi_get_counts_keys_apart() {
    let Some(url) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let stat = |name: &str| -> u64 {
        let info = redis_cli(&["INFO", "stats"]);
        let head = format!("{name}:");
        info.lines()
            .find_map(|l| l.trim().strip_prefix(head.as_str()))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in INFO stats"))
    };
    let (mget0, hits0, misses0) = (
        redis_calls("mget"),
        stat("keyspace_hits"),
        stat("keyspace_misses"),
    );
    let (code, doc, err) = multi_get_run(&url, "3000", "8");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let hits = stat("keyspace_hits") - hits0;
    let misses = stat("keyspace_misses") - misses0;
    assert_eq!(redis_calls("mget") - mget0, 3000);
    assert_eq!(u(r, "requests"), 3000, "{r}");
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(u(r, "keys.keys"), 30_000, "{r}");
    assert_eq!(
        u(r, "keys.hits"),
        hits,
        "keyspace_hits moved by {hits}: {r}"
    );
    assert_eq!(
        u(r, "keys.misses"),
        misses,
        "keyspace_misses moved by {misses}"
    );
    assert!(hits > 5000 && misses > 5000, "hits {hits} misses {misses}");
    assert_eq!(
        r["server_observed"]["source"],
        "INFO commandstats cmdstat_mget.calls"
    );
    assert_eq!(r["server_observed"]["matches"], true, "{r}");
    assert_schema_valid(&doc);
}
