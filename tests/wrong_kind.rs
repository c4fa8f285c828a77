//! A URL pointed at another kind of server (issue 45 items 11-13): one line naming what
//! answered, exit 2, against the REAL servers of scripts/servers.sh. --timeout is 20 s, so a
//! run that waited for an answer would end with the timeout's line, not the name.

mod common;
use common::*;

/// `host:port` of a server URL from the environment (`scheme://[user@]host:port[/...]`).
fn addr(var: &str) -> Option<String> {
    let url = server(var)?;
    let rest = url.split_once("://").expect("a URL").1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// `loadgen run URL`: its exit code and stderr.
fn run_at(url: &str) -> (i32, String) {
    let out = run(&["run", url, "--timeout", "20s", "-d", "2s", "-q", "-o", "-"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap_or(-1), err)
}

/// Exit 2, one line, no panic, naming `what` (and not the timeout's words).
fn named(url: &str, what: &str) {
    let (code, err) = run_at(url);
    assert_eq!(code, 2, "{url}: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{url}: not one line: {err}");
    assert!(!err.contains("panicked"), "{url}: {err}");
    assert!(!err.contains("within --timeout"), "{url}: waited: {err}");
    assert!(
        err.contains(&format!("this looks like {what} server")),
        "{url}: does not name {what}: {err}"
    );
}

#[test]
fn postgres_at_memcached_redis_mysql_and_handlersocket() {
    let servers = [
        ("LOADGEN_MC_URL", "a memcached"),
        ("LOADGEN_REDIS_URL", "a Redis"),
        ("LOADGEN_MY_URL", "a MySQL/MariaDB"),
        ("LOADGEN_HS_URL", "a HandlerSocket"),
    ];
    for (var, what) in servers {
        let Some(at) = addr(var) else { return };
        for driver in ["wire", "tokio"] {
            named(
                &format!("postgres://loadgen@{at}/loadgen?driver={driver}"),
                what,
            );
        }
    }
}

#[test]
fn mysql_at_postgres_redis_and_memcached() {
    let servers = [
        ("LOADGEN_PG_URL", "a PostgreSQL"),
        ("LOADGEN_REDIS_URL", "a Redis"),
        ("LOADGEN_MC_URL", "a memcached"),
    ];
    for (var, what) in servers {
        let Some(at) = addr(var) else { return };
        for driver in ["wire", "mysql_async"] {
            named(
                &format!("mysql://loadgen@{at}/loadgen?driver={driver}"),
                what,
            );
        }
    }
}

#[test]
fn memcached_at_redis_postgres_and_mysql() {
    let servers = [
        ("LOADGEN_REDIS_URL", "a Redis"),
        ("LOADGEN_PG_URL", "a PostgreSQL"),
        ("LOADGEN_MY_URL", "a MySQL/MariaDB"),
    ];
    for (var, what) in servers {
        let Some(at) = addr(var) else { return };
        named(&format!("memcache://{at}"), what);
    }
}

#[test]
fn redis_at_memcached_postgres_and_handlersocket() {
    let servers = [
        ("LOADGEN_MC_URL", "a memcached"),
        ("LOADGEN_PG_URL", "a PostgreSQL"),
        ("LOADGEN_HS_URL", "a HandlerSocket"),
    ];
    for (var, what) in servers {
        let Some(at) = addr(var) else { return };
        named(&format!("redis://{at}"), what);
    }
}

#[test]
fn http_at_postgres_memcached_and_redis() {
    let servers = [
        ("LOADGEN_PG_URL", "a PostgreSQL"),
        ("LOADGEN_MC_URL", "a memcached"),
        ("LOADGEN_REDIS_URL", "a Redis"),
    ];
    for (var, what) in servers {
        let Some(at) = addr(var) else { return };
        named(&format!("http://{at}/usr/{{key}}"), what);
    }
}

#[test]
fn handlersocket_at_postgres_mysql_and_memcached() {
    let servers = [
        ("LOADGEN_PG_URL", "a PostgreSQL"),
        ("LOADGEN_MY_URL", "a MySQL/MariaDB"),
        ("LOADGEN_MC_URL", "a memcached"),
    ];
    for (var, what) in servers {
        let Some(at) = addr(var) else { return };
        named(&format!("hs://{at}/loadgen/usr"), what);
    }
}

/// Prometheus is the HTTP server scripts/servers.sh starts: the SQL and key-value targets
/// pointed at it name it.
#[test]
fn every_other_target_at_an_http_server() {
    let Some(at) = addr("LOADGEN_PROM_URL") else {
        return;
    };
    for url in [
        format!("postgres://loadgen@{at}/loadgen?driver=wire"),
        format!("mysql://loadgen@{at}/loadgen"),
        format!("memcache://{at}"),
        format!("redis://{at}"),
        format!("hs://{at}/loadgen/usr"),
    ] {
        named(&url, "an HTTP");
    }
}

/// The right server still runs: the preflight's first words are answered as its own.
#[test]
fn each_target_at_its_own_server_runs() {
    for var in [
        "LOADGEN_PG_URL",
        "LOADGEN_MY_URL",
        "LOADGEN_HS_URL",
        "LOADGEN_MC_URL",
        "LOADGEN_REDIS_URL",
    ] {
        let Some(url) = server(var) else { return };
        let (code, doc, err) = run_json(&[&url, "-d", "1s", "--warmup", "0s", "-c", "2"]);
        assert_exit_fits(code, &doc["runs"][0], &format!("{var}: {err}"));
        assert!(!err.contains("this looks like"), "{var}: {err}");
    }
}
