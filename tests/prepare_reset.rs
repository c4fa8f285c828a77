//! `loadgen prepare` after a write run puts the data set back: ids 1..N hold their derived rows
//! again (updated values and deleted rows restored, checked by a `--verify` read of every id) and
//! no row a write run inserted above N is left, so an insert run starts without a collision. On
//! the real servers, each in data of its own: a database created here on PostgreSQL and MariaDB,
//! a key prefix of this process on memcached, database 12 on Redis (tests/writes_kv.rs uses 11).
//! The shared `usr` rows 1..1000000 are never touched.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

const ROWS: u64 = 1000;
/// Keys above ROWS checked for inserted rows (inserts start at ROWS + 1).
const ABOVE: u64 = 5000;
const REDIS_DB: &str = "12";

/// `loadgen prepare URL --rows ROWS`: succeeds and says how to reset.
fn prepare(url: &str, context: &str) {
    let out = run(&["prepare", url, "--rows", &ROWS.to_string()]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{context}: {stderr}");
    assert!(
        stdout.contains(&format!("ids 1..{ROWS} hold the data set's rows"))
            && stdout.contains("to reset after one, prepare again"),
        "{context}: {stdout}"
    );
}

/// A `--verify` read of ids 1..ROWS: (misses, errors).
fn verify_read(url: &str, context: &str) -> (u64, u64) {
    let (code, doc, err) = run_json(&[
        url,
        "--verify",
        "-n",
        "20000",
        "--keys",
        &format!("1-{ROWS}"),
        "-c",
        "2",
    ]);
    let r = &doc["runs"][0];
    assert_exit_fits(code, r, &format!("{context}: {err}"));
    (u(r, "misses"), u(r, "error_total"))
}

/// prepare; a write run; prepare again: back to the data set. `above` counts the rows with ids
/// ROWS+1..=ABOVE; `write` changes the data as a write run does (a `--mix` run where loadgen
/// writes to the target).
fn prepare_resets(url: &str, context: &str, above: &dyn Fn() -> u64, write: &dyn Fn()) {
    prepare(url, context);
    assert_eq!(verify_read(url, context), (0, 0), "{context}: fresh");
    write();
    let (misses, errors) = verify_read(url, context);
    assert!(misses > 0, "{context}: the write run deleted rows");
    assert!(
        misses + errors > 0,
        "{context}: the write run changed rows ({misses} misses, {errors} errors)"
    );
    assert!(
        above() > 0,
        "{context}: the write run inserted rows above {ROWS}"
    );

    prepare(url, context);
    assert_eq!(
        verify_read(url, context),
        (0, 0),
        "{context}: every id back, as derived"
    );
    assert_eq!(above(), 0, "{context}: nothing left above {ROWS}");
}

/// A write run by loadgen: updates and deletes of 1..ROWS, inserts above.
fn loadgen_writes(url: &str) -> impl Fn() + '_ {
    move || {
        let (code, doc, err) = run_json(&[
            url,
            "-n",
            "3000",
            "--mix",
            "update=40,insert=30,delete=30",
            "--keys",
            &format!("1-{ROWS}"),
            "-c",
            "2",
        ]);
        assert_eq!(code, 0, "{err}");
        let ops = &doc["runs"][0]["ops"];
        assert!(
            u(&ops["insert"], "hits") > 0 && u(&ops["delete"], "hits") > 0,
            "{ops}"
        );
    }
}

/// An insert run right after prepare: every insert takes a key no row holds.
fn inserts_start_clean(url: &str, context: &str) {
    let (code, doc, err) = run_json(&[
        url,
        "-n",
        "500",
        "--mix",
        "insert=100",
        "--keys",
        &format!("1-{ROWS}"),
    ]);
    assert_eq!(code, 0, "{context}: {err}");
    let o = &doc["runs"][0]["ops"]["insert"];
    assert_eq!(u(o, "misses"), 0, "{context}: an insert collided: {o}");
}

/// A database of this process on the test PostgreSQL, dropped afterwards.
struct PgDb {
    admin: String,
    name: String,
    url: String,
}

impl PgDb {
    fn new(admin: &str) -> PgDb {
        let name = format!("loadgen_reset_{}", std::process::id());
        psql(admin, &format!("DROP DATABASE IF EXISTS {name}"));
        psql(admin, &format!("CREATE DATABASE {name}"));
        let (base, query) = admin.split_once('?').unwrap_or((admin, ""));
        let (server, _) = base.rsplit_once('/').expect("a database in the URL");
        let url = match query {
            "" => format!("{server}/{name}"),
            q => format!("{server}/{name}?{q}"),
        };
        PgDb {
            admin: admin.into(),
            name,
            url,
        }
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                &self.admin,
                "-XAtqc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

#[test]
fn postgres_prepare_resets_a_written_table() {
    let Some(admin) = server("LOADGEN_PG_URL") else {
        return;
    };
    let db = PgDb::new(&admin);
    let above = || -> u64 {
        psql(
            &db.url,
            &format!("SELECT count(*) FROM usr WHERE user_id > {ROWS}"),
        )
        .parse()
        .unwrap()
    };
    prepare_resets(&db.url, "postgres", &above, &loadgen_writes(&db.url));
    assert_eq!(psql(&db.url, "SELECT count(*) FROM usr"), ROWS.to_string());
    inserts_start_clean(&db.url, "postgres");
}

/// A database of this process on the test MariaDB, the test user's, dropped afterwards.
struct MyDb(String);

impl Drop for MyDb {
    fn drop(&mut self) {
        mariadb_root(&format!("DROP DATABASE IF EXISTS {}", self.0));
    }
}

#[test]
fn mariadb_prepare_resets_a_written_table() {
    let Some(base) = server("LOADGEN_MY_URL") else {
        return;
    };
    let db = MyDb(format!("loadgen_reset_{}", std::process::id()));
    mariadb_root(&format!(
        "DROP DATABASE IF EXISTS {0}; CREATE DATABASE {0}; \
         GRANT ALL PRIVILEGES ON {0}.* TO 'loadgen'@'127.0.0.1'",
        db.0
    ));
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    let url = format!("{server}/{}", db.0);
    let above = || -> u64 {
        mariadb_root(&format!(
            "SELECT count(*) FROM {}.usr WHERE user_id > {ROWS}",
            db.0
        ))
        .parse()
        .unwrap()
    };
    // loadgen does not write to MariaDB over SQL yet: the writes a run would make, made here.
    let write = || {
        mariadb_root(&format!(
            "UPDATE {0}.usr SET user_name = 'changed' WHERE user_id BETWEEN 1 AND 100; \
             DELETE FROM {0}.usr WHERE user_id BETWEEN 101 AND 200; \
             INSERT INTO {0}.usr SELECT user_id + {ROWS}, user_name, user_email, created \
             FROM {0}.usr WHERE user_id <= 300",
            db.0
        ));
    };
    prepare_resets(&url, "mariadb", &above, &write);
}

/// How many of `keys` memcached holds (`get` in batches).
fn mc_present(hostport: &str, keys: impl Iterator<Item = String>) -> u64 {
    let keys: Vec<String> = keys.collect();
    let mut sock = TcpStream::connect(hostport).unwrap();
    let mut found = 0;
    for batch in keys.chunks(100) {
        sock.write_all(format!("get {}\r\n", batch.join(" ")).as_bytes())
            .unwrap();
        let mut reply = Vec::new();
        let mut buf = [0u8; 65536];
        while !reply.ends_with(b"END\r\n") {
            let n = sock.read(&mut buf).unwrap();
            assert!(n > 0, "memcached closed the connection");
            reply.extend_from_slice(&buf[..n]);
        }
        found += String::from_utf8_lossy(&reply).matches("VALUE ").count() as u64;
    }
    found
}

#[test]
fn memcached_prepare_removes_inserted_keys_of_its_prefix() {
    let Some(base) = server("LOADGEN_MC_URL") else {
        return;
    };
    let prefix = format!("reset{}_", std::process::id());
    let url = with(&base, &format!("prefix={prefix}"));
    let hostport = format!("127.0.0.1:{}", env("LOADGEN_MC_PORT"));
    let above = || {
        mc_present(
            &hostport,
            (ROWS + 1..=ABOVE).map(|id| format!("{prefix}{id}")),
        )
    };
    // A key of the prefix that is no id of ours, and one of the shared rows: both stay.
    let other = format!("{prefix}notanid");
    let mut sock = TcpStream::connect(&hostport).unwrap();
    sock.write_all(format!("set {other} 0 0 1\r\nx\r\n").as_bytes())
        .unwrap();
    let mut ok = [0u8; 8];
    sock.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"STORED\r\n");
    let shared = mc_present(&hostport, ["usr:1".to_string()].into_iter());

    prepare_resets(&url, "memcached", &above, &loadgen_writes(&url));
    inserts_start_clean(&url, "memcached");
    assert_eq!(mc_present(&hostport, [other.clone()].into_iter()), 1);
    assert_eq!(
        mc_present(&hostport, ["usr:1".to_string()].into_iter()),
        shared
    );

    // Our keys go.
    let mut gone = String::new();
    for id in [other]
        .into_iter()
        .chain((1..=ABOVE).map(|id| format!("{prefix}{id}")))
    {
        gone.push_str(&format!("delete {id} noreply\r\n"));
    }
    sock.write_all(gone.as_bytes()).unwrap();
}

/// Redis database [`REDIS_DB`], emptied before and after.
struct RedisDb;

impl Drop for RedisDb {
    fn drop(&mut self) {
        redis_cli(&["-n", REDIS_DB, "FLUSHDB"]);
    }
}

#[test]
fn redis_prepare_removes_inserted_keys() {
    let Some(base) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    redis_cli(&["-n", REDIS_DB, "FLUSHDB"]);
    let _db = RedisDb;
    let url = format!("{base}/{REDIS_DB}");
    let above = || -> u64 {
        let keys: Vec<String> = (ROWS + 1..=ABOVE).map(|id| format!("usr:{id}")).collect();
        let mut args = vec!["-n", REDIS_DB, "EXISTS"];
        args.extend(keys.iter().map(String::as_str));
        redis_cli(&args).parse().unwrap()
    };
    redis_cli(&["-n", REDIS_DB, "SET", "usr:notanid", "x"]);
    prepare_resets(&url, "redis", &above, &loadgen_writes(&url));
    inserts_start_clean(&url, "redis");
    assert_eq!(redis_cli(&["-n", REDIS_DB, "EXISTS", "usr:notanid"]), "1");
}
