//! The servers' own counters, read by the tests themselves with each server's own client
//! (psql, mariadb, redis-cli) or protocol (memcached `stats`), never through loadgen: a loadgen
//! that copied its own count into `server_observed` still fails the conservation tests.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{assert_server_saw, env, mariadb_root, psql, redis_cli, u};

/// A server counter that the test reads itself, with the server's own client (psql, mariadb,
/// redis-cli) or protocol (memcached `stats`), never through loadgen: a loadgen that copied its
/// own count into `server_observed` still fails here.
pub struct OwnCount {
    source: String,
    url: String,
    before: u64,
}

impl OwnCount {
    /// Reads the counter that loadgen names `source` (as in `server_observed.source`) on the
    /// server behind `url`, before the run.
    pub fn before(source: &str, url: &str) -> OwnCount {
        let mut c = OwnCount {
            source: source.to_string(),
            url: url.to_string(),
            before: 0,
        };
        c.before = c.read();
        c
    }

    /// How far the counter moved since `before`.
    pub fn delta(&self) -> u64 {
        self.read() - self.before
    }

    /// The server's counter, read now by the test, moved by exactly `n`; and loadgen's own
    /// `server_observed` names the same source and says the same.
    pub fn assert_saw(&self, run: &Value, n: u64, context: &str) {
        let d = self.delta();
        assert_eq!(d, n, "{context}: the server's {} moved by {d}", self.source);
        assert_eq!(u(run, "hits") + u(run, "misses"), n, "{context}: {run}");
        assert_server_saw(run, &self.source, n, context);
    }

    fn read(&self) -> u64 {
        let s = self.source.as_str();
        if s == "memcached get_hits+get_misses" {
            memcached_stat(&self.url, "get_hits") + memcached_stat(&self.url, "get_misses")
        } else if let Some(var) = s.strip_prefix("global status ") {
            mariadb_status(var)
        } else if s == "INFO commandstats cmdstat_get.calls" {
            redis_calls("get")
        } else if s == "pg_stat_statements.calls" {
            pg_lookup_calls()
        } else if let Some(index) = s
            .strip_prefix("pg_stat_user_indexes.idx_scan (")
            .and_then(|r| r.strip_suffix(')'))
        {
            pg_index_scans(&self.url, index)
        } else {
            panic!("no way for the test to read {s} itself")
        }
    }
}

/// One value of memcached's `stats`, over TCP (`memcache://HOST:PORT`) or its Unix socket
/// (`memcache:///PATH`).
pub fn memcached_stat(url: &str, name: &str) -> u64 {
    let rest = url.trim_start_matches("memcache://");
    let rest = rest.split('?').next().unwrap_or(rest);
    let ask = |s: &mut dyn ReadWrite| {
        s.write_all(b"stats\r\nquit\r\n").unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text
    };
    let text = if rest.starts_with('/') {
        ask(&mut std::os::unix::net::UnixStream::connect(rest).expect("memcached socket"))
    } else {
        ask(&mut std::net::TcpStream::connect(rest.trim_end_matches('/')).expect("memcached"))
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in memcached stats: {text}"))
}

trait ReadWrite: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}

/// `SHOW GLOBAL STATUS` of one variable, as MariaDB's root over its socket.
pub fn mariadb_status(var: &str) -> u64 {
    let out = mariadb_root(&format!("SHOW GLOBAL STATUS LIKE '{var}'"));
    out.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("SHOW GLOBAL STATUS LIKE '{var}': {out}"))
}

/// `calls` of `cmdstat_COMMAND` in Redis' `INFO commandstats` (0 before the first call).
pub fn redis_calls(command: &str) -> u64 {
    let info = redis_cli(&["INFO", "commandstats"]);
    let head = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&head))
        .map(|v| v.split(',').next().unwrap().parse().unwrap())
        .unwrap_or(0)
}

/// The default lookup's calls in pg_stat_statements, over every database.
pub fn pg_lookup_calls() -> u64 {
    pg_statement_calls("SELECT user_name, user_email, created FROM usr WHERE user_id = $1")
}

/// The calls of one statement (its normalized text) in pg_stat_statements, over every database.
pub fn pg_statement_calls(query: &str) -> u64 {
    let q = query.replace('\'', "''");
    let sql = format!("SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query = '{q}'");
    psql(&env("LOADGEN_PG_URL"), &sql).parse().unwrap()
}

/// idx_scan of one index in the database of `url`, once it has settled: backends send their
/// statistics a moment after their last transaction, so two reads 700 ms apart must agree.
pub fn pg_index_scans(url: &str, index: &str) -> u64 {
    let base = url.split('?').next().unwrap();
    let sql = format!(
        "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = '{index}'"
    );
    let read = || -> u64 { psql(base, &sql).parse().unwrap() };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = read();
    loop {
        std::thread::sleep(Duration::from_millis(700));
        let now = read();
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// The server's own per-op write counters, read by the test (psql, mariadb) before a run.
pub struct OwnOps {
    mysql: bool,
    before: Vec<(&'static str, u64)>,
}

impl OwnOps {
    /// For a PostgreSQL or MySQL target; None for the embedded server, which lives inside
    /// loadgen's own process where nothing else can ask it.
    pub fn before(target: &str) -> Option<OwnOps> {
        let mysql = target.starts_with("mysql");
        if !(mysql || target.starts_with("postgres")) {
            return None;
        }
        Some(OwnOps {
            mysql,
            before: OwnOps::read(mysql),
        })
    }

    fn read(mysql: bool) -> Vec<(&'static str, u64)> {
        if mysql {
            // Com_<type> moves on every execute of a prepared statement of that type; Com_insert
            // takes upserts (ON DUPLICATE KEY UPDATE) too.
            let com = |op, var| (op, mariadb_status(var));
            return vec![
                com("update", "Com_update"),
                com("insert", "Com_insert"),
                com("delete", "Com_delete"),
            ];
        }
        let pg = |op, sql| (op, pg_statement_calls(sql));
        let insert =
            "INSERT INTO usr (user_id, user_name, user_email, created) VALUES ($1, $2, $3, $4)";
        vec![
            pg("update", "UPDATE usr SET user_name = $2 WHERE user_id = $1"),
            pg("insert", insert),
            pg("delete", "DELETE FROM usr WHERE user_id = $1"),
            pg(
                "upsert",
                &format!(
                    "{insert} ON CONFLICT (user_id) DO UPDATE SET user_name = EXCLUDED.user_name"
                ),
            ),
        ]
    }

    /// Each write op's counter moved by exactly the requests loadgen made of it.
    pub fn assert_saw(&self, r: &Value, context: &str) {
        let requests = |op: &str| r["ops"][op]["requests"].as_u64().unwrap_or(0);
        for ((op, before), (_, now)) in self.before.iter().zip(OwnOps::read(self.mysql)) {
            let mut want = requests(op);
            if self.mysql && *op == "insert" {
                want += requests("upsert");
            }
            assert_eq!(now - before, want, "{context} {op}: the server's own count");
        }
    }
}
