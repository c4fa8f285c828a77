//! PostgreSQL, for real: conservation against pg_stat_statements, --verify, misses, bad password.

mod common;
use common::*;

#[test]
fn exact_request_count_is_what_postgres_executed() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let seen = OwnCount::before("pg_stat_statements.calls", &url);
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "requests"), 20000);
    assert_eq!(u(r, "hits"), 20000);
    assert_eq!(u(r, "error_total"), 0);
    // PostgreSQL's own count of executions of the lookup over the run, read by psql here and
    // by loadgen in server_observed.
    seen.assert_saw(r, 20000, &url);
    let so = &r["server_observed"];
    assert_eq!(so["source"], "pg_stat_statements.calls", "{so}");
    assert_eq!(u(so, "delta"), 20000, "{so}");
    assert_eq!(so["matches"], true);
    assert_schema_valid(&doc);
}

#[test]
fn verify_over_the_full_key_range_finds_every_row_correct() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    // seq with -n equal to the range: every key once, checked column by column.
    let (code, doc, err) = run_json(&[
        &url, "-n", "1000000", "--dist", "seq", "--verify", "-c", "32", "-p", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 1_000_000);
    assert_eq!(u(r, "errors.verify"), 0);
    assert_eq!(u(r, "error_total"), 0);
}

#[test]
fn simple_mode_verifies_too() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[
        &url, "-n", "2000", "--mode", "simple", "--verify", "-c", "4",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 2000);
}

#[test]
fn keys_outside_the_loaded_range_are_misses_not_errors() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[&url, "-n", "5000", "--keys", "2000001-3000000", "-c", "8"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "misses"), 5000);
    assert_eq!(u(r, "hits"), 0);
    assert_eq!(u(r, "error_total"), 0);
}

/// libpq's `options` reach the session on both drivers: the lookup finds its rows only when the
/// setting the URL names is the session's (the server's own default is off).
#[test]
fn url_options_set_the_sessions_settings_on_both_drivers() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let query = "SELECT user_name, user_email, created FROM usr WHERE user_id = $1 \
                 AND current_setting('synchronous_commit') = 'on'";
    for driver in ["wire", "tokio"] {
        for (options, hits) in [("&options=-c%20synchronous_commit%3Don", 500), ("", 0)] {
            let target = with(&url, &format!("driver={driver}{options}"));
            let (code, doc, err) = run_json(&[&target, "-n", "500", "-c", "2", "--query", query]);
            assert_eq!(code, 0, "{driver}{options}: {err}");
            let r = &doc["runs"][0];
            assert_eq!(u(r, "hits"), hits, "{driver}{options}: {r}");
            assert_eq!(u(r, "misses"), 500 - hits, "{driver}{options}: {r}");
            assert_eq!(u(r, "error_total"), 0, "{driver}{options}: {r}");
        }
    }
}

#[test]
fn wrong_password_exits_2_naming_the_cause_without_the_password() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let bad = url.replacen(
        "postgres://loadgen@",
        "postgres://loadgen:Wr0ngPassw0rd@",
        1,
    );
    let out = run(&["run", &bad, "-n", "10", "-o", "-"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Wr0ngPassw0rd") && !stdout.contains("Wr0ngPassw0rd"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}

#[test]
fn missing_table_says_to_run_prepare() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let out = run(&[
        "run",
        &url,
        "-n",
        "10",
        "-o",
        "-",
        "--query",
        "SELECT 1 FROM no_such_table WHERE id = $1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("loadgen prepare"), "{stderr}");
}

#[test]
fn tokio_postgres_driver_counts_and_verifies_too() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let url = format!("{url}?driver=tokio");
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16", "--verify"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 20000);
    assert_eq!(u(&r["server_observed"], "delta"), 20000);
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "4", "-p", "16"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0]["server_observed"], "delta"), 20000);
}

#[test]
fn pipelined_run_counts_exactly() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[&url, "-n", "30000", "-c", "4", "-p", "16"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 30000);
    assert_eq!(u(&r["server_observed"], "delta"), 30000);
}

/// Connections open before the clock: a short run at many connections measures lookups only,
/// and says how many connections it opened and how long that took.
#[test]
fn connections_open_before_the_clock_starts() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    for driver in ["wire", "tokio"] {
        let target = format!("{url}?driver={driver}");
        let (code, doc, err) = run_json(&[&target, "-c", "64", "-n", "6400"]);
        assert_eq!(code, 0, "{err}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "connected"), 64, "{driver}");
        assert!(f(r, "connect_s") > 0.0, "{driver}: {}", r["connect_s"]);
        // Nothing connected inside the run: no reconnects, no connect errors.
        assert_eq!(u(r, "reconnects"), 0, "{driver}");
        assert_eq!(u(r, "errors.connect"), 0, "{driver}");
        assert_eq!(u(r, "hits"), 6400, "{driver}");
        assert_schema_valid(&doc);
    }
}

/// Connections the server refuses in the connect phase are reported, not hidden: a role limited
/// to 3 connections gets 8 asked of it; the run goes on with those it got and says how many
/// failed and why (the others are retried during the run and counted as connect errors).
#[test]
fn connect_phase_failures_are_reported() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    // Superusers are not held to a role's connection limit: a plain role is made for this test.
    let role = format!("lg_limited_{}", std::process::id());
    let secret = "limited-Pw-42";
    psql(&url, &format!("CREATE ROLE {role} LOGIN PASSWORD '{secret}' CONNECTION LIMIT 3; GRANT SELECT ON usr TO {role}"));
    let hostpart = url.rsplit('@').next().expect("url has a host part");
    let limited = format!("postgres://{role}:{secret}@{hostpart}");
    let (code, doc, err) = run_json(&[&limited, "-c", "8", "-t", "1", "-d", "1s", "--warmup", "0"]);
    // Text report too: the warning line names the failure. The result goes to a temp dir
    // (never a path under /dev), which also takes the report written beside it.
    let dir = TempDir::new("loadgen-connect");
    let json = dir.join("r.json");
    let text = run(&[
        "run",
        &limited,
        "-c",
        "8",
        "-t",
        "1",
        "-d",
        "1s",
        "--warmup",
        "0",
        "-q",
        "-o",
        json.to_str().unwrap(),
    ]);
    psql(
        &url,
        &format!("REVOKE ALL ON usr FROM {role}; DROP ROLE {role}"),
    );
    // Exit 1: the in-run retries of the refused connections are connect errors.
    assert_eq!(code, 1, "{err}");
    let r = &doc["runs"][0];
    assert!(u(r, "errors.connect") > 0, "{r}");
    let (ok, failed) = (u(r, "connected"), u(r, "connect_failed"));
    assert_eq!(ok + failed, 8, "{r}");
    // The preflight connection may still be closing when the workers connect: 2 or 3 get in.
    assert!((2..=3).contains(&ok), "connected {ok}");
    let msg = r["connect_error"].as_str().unwrap_or_default();
    assert!(msg.contains("too many connections for role"), "{msg}");
    assert!(
        u(r, "hits") > 0,
        "the run goes on with the connections it got"
    );
    assert_schema_valid(&doc);
    let stdout = String::from_utf8_lossy(&text.stdout);
    let stderr = String::from_utf8_lossy(&text.stderr);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("connect "))
        .unwrap_or_default();
    assert!(
        line.contains("of 8 connections") && line.contains("WARNING"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "password printed"
    );
    assert!(!doc.to_string().contains(secret), "password written");
}

/// A database of the same server where pg_stat_statements is not created (as on most servers a
/// user points loadgen at), with a small usr table and a second table with an index of its own.
fn database_without_pg_stat_statements(url: &str) -> String {
    let db = "loadgen_noext";
    if psql(
        url,
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'"),
    ) == "0"
    {
        psql(url, &format!("CREATE DATABASE {db}"));
    }
    let (base, _) = url.rsplit_once('/').expect("url names a database");
    let noext = format!("{base}/{db}");
    psql(&noext, "DROP EXTENSION IF EXISTS pg_stat_statements");
    let out = run(&["prepare", &noext, "--rows", "10000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    psql(
        &noext,
        "DROP TABLE IF EXISTS lg_items; \
         CREATE TABLE lg_items (item_id int NOT NULL, label text NOT NULL); \
         INSERT INTO lg_items SELECT g, 'item ' || g FROM generate_series(1, 10000) g; \
         CREATE INDEX lg_items_by_id ON lg_items (item_id); ANALYZE lg_items",
    );
    noext
}

#[test]
fn without_pg_stat_statements_the_lookup_index_counts_exactly() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let noext = database_without_pg_stat_statements(&url);
    // Both drivers, the default lookup: every execution is one scan of usr's primary key.
    for target in [noext.clone(), format!("{noext}?driver=tokio")] {
        let seen = OwnCount::before("pg_stat_user_indexes.idx_scan (usr_pkey)", &target);
        let (code, doc, err) = run_json(&[&target, "-n", "5000", "-c", "8", "--keys", "1-10000"]);
        assert_eq!(code, 0, "{err}");
        let r = &doc["runs"][0];
        assert_eq!(u(r, "requests"), 5000);
        seen.assert_saw(r, 5000, &target);
        assert_eq!(r["server_observed"]["matches"], true);
        assert_schema_valid(&doc);
    }
    // Misses scan the index too, and pipelined lookups are counted as well.
    let seen = OwnCount::before("pg_stat_user_indexes.idx_scan (usr_pkey)", &noext);
    let (code, doc, err) = run_json(&[&noext, "-n", "5000", "-c", "2", "-p", "16"]);
    assert_eq!(code, 0, "{err}");
    assert!(u(&doc["runs"][0], "misses") > 0);
    seen.assert_saw(&doc["runs"][0], 5000, "pipelined");
    // The text report's server line names the source.
    let dir = TempDir::new("loadgen-noext");
    let out = run(&[
        "run",
        &noext,
        "-n",
        "1000",
        "-q",
        "-o",
        dir.join("r.json").to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("server")
            && l.contains("pg_stat_user_indexes.idx_scan (usr_pkey) = 1,000")
            && l.contains("matches")),
        "{stdout}"
    );
}

#[test]
fn without_pg_stat_statements_a_custom_query_counts_on_the_index_its_plan_uses() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let noext = database_without_pg_stat_statements(&url);
    for target in [noext.clone(), format!("{noext}?driver=tokio")] {
        let seen = OwnCount::before("pg_stat_user_indexes.idx_scan (lg_items_by_id)", &target);
        let (code, doc, err) = run_json(&[
            &target,
            "-n",
            "5000",
            "-c",
            "4",
            "--keys",
            "1-10000",
            "--query",
            "SELECT label FROM lg_items WHERE item_id = $1",
        ]);
        assert_eq!(code, 0, "{err}");
        seen.assert_saw(&doc["runs"][0], 5000, &target);
    }
    // A lookup that reads no index has no counter, and the note says why.
    let (code, doc, err) = run_json(&[
        &noext,
        "-n",
        "100",
        "--query",
        "SELECT item_id FROM lg_items WHERE label = $1",
    ]);
    assert_eq!(code, 0, "{err}");
    let so = &doc["runs"][0]["server_observed"];
    assert_eq!(so["source"], "unavailable", "{so}");
    let note = so["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("pg_stat_statements is not created in this database")
            && note.contains("scans no index"),
        "{note}"
    );
}

/// A password holding `@`, `%` and `/`, percent-encoded in the URL, logs in (decoded once) and
/// never shows, encoded or not.
#[test]
fn a_percent_encoded_password_logs_in() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    const PW: &str = "p@ss%2F/w0rd";
    pg_role_with_password(&url, "loadgen_pct", PW);
    let port = env("LOADGEN_PG_PORT");
    let target = format!(
        "postgres://loadgen_pct:{}@127.0.0.1:{port}/loadgen",
        urlencode(PW)
    );
    assert!(target.contains("%40") && target.contains("%25") && target.contains("%2F"));
    for t in [target.clone(), with(&target, "driver=tokio")] {
        assert_500_hits_never_showing(&t, PW);
    }
}

/// `--reconnect-every 10`: each connection is closed and opened again after ten requests, as
/// pgbench -C does per transaction. The server's own session count (in a database of the
/// test's own, so no other client's sessions are in it) sees one session per ten lookups, and
/// the report times every connect of the run without calling them reconnects.
#[test]
fn reconnect_every_opens_a_session_per_n_requests() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    let db = "loadgen_reconnect";
    if psql(
        &url,
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{db}'"),
    ) == "0"
    {
        psql(&url, &format!("CREATE DATABASE {db}"));
    }
    let db_url = format!("{}/{db}", url.rsplit_once('/').unwrap().0);
    let out = run(&["prepare", &db_url, "--rows", "1000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sessions = || -> u64 {
        psql(
            &url,
            &format!("SELECT sessions FROM pg_stat_database WHERE datname = '{db}'"),
        )
        .parse()
        .unwrap()
    };
    let before = sessions();
    let (code, doc, err) = run_json(&[
        &db_url,
        "-n",
        "2000",
        "-c",
        "4",
        "--keys",
        "1-1000",
        "--reconnect-every",
        "10",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 2000);
    assert_eq!(u(r, "reconnects"), 0, "planned reconnects are not failures");
    // Four connections of 500 requests each: 50 sessions each, the first from the connect phase.
    assert_eq!(u(&r["connect_us"], "count"), 196, "{}", r["connect_us"]);
    assert!(f(&r["connect_us"], "p50") > 0.0);
    // A session is counted when it ends: wait for the last ones. Besides the 200 sessions of
    // lookups, the server's counter logs in once before and once after the run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut delta = sessions() - before;
    while delta < 200 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        delta = sessions() - before;
    }
    eprintln!(
        "sessions the server counted: {delta}; connect_us {}",
        r["connect_us"]
    );
    assert!(
        (200..=206).contains(&delta),
        "the server counted {delta} sessions"
    );
    assert_schema_valid(&doc);
}

/// `--batch 10` on the wire driver: one `user_id = ANY($1)` per request, or with `?multi=in`
/// one `user_id IN ($1, ..., $10)`. PostgreSQL's own pg_stat_statements, read here, counts a
/// call of that statement per request and a row per key found; with `--dist seq` no request
/// asks for a key twice, so its rows are exactly loadgen's key hits.
#[test]
fn multi_get_is_one_any_call_per_request_and_a_row_per_key_hit() {
    let Some(base) = server("LOADGEN_PG_URL") else {
        return;
    };
    let head = "SELECT user_id, user_name, user_email, created FROM usr WHERE user_id";
    let params: Vec<String> = (1..=10).map(|i| format!("${i}")).collect();
    let forms = [
        (base.clone(), format!("{head} = ANY($1)")),
        (
            format!("{base}?multi=in"),
            format!("{head} IN ({})", params.join(", ")),
        ),
    ];
    for (url, query) in &forms {
        multi_get_counted(url, query);
    }
    // The tokio driver and a custom query say in one line that they have no multi-get.
    for args in [
        vec![
            format!("{base}?driver=tokio"),
            "--batch".into(),
            "10".into(),
        ],
        vec![
            base.clone(),
            "--batch".into(),
            "10".into(),
            "--query".into(),
            "SELECT user_name FROM usr WHERE user_id = $1".into(),
        ],
        vec![format!("{base}?multi=some"), "--batch".into(), "10".into()],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&[&["run"], &args[..], &["-n", "10"]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("--batch") || err.contains("multi=any"),
            "{err}"
        );
    }
}

/// One `--batch 10` run against `url`, checked against the calls and rows of `query`.
fn multi_get_counted(url: &str, query: &str) {
    let stats = || -> (u64, u64) {
        let sql = format!(
            "SELECT coalesce(sum(calls), 0) || ' ' || coalesce(sum(rows), 0) FROM pg_stat_statements WHERE query = '{query}'"
        );
        let out = psql(url.split('?').next().unwrap(), &sql);
        let (c, r) = out.split_once(' ').unwrap();
        (c.parse().unwrap(), r.parse().unwrap())
    };
    let (calls0, rows0) = stats();
    let (code, doc, err) = multi_get_seq_run(url, "999001-1001000");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let (calls, rows) = (stats().0 - calls0, stats().1 - rows0);
    assert_eq!(u(r, "requests"), 2000, "{r}");
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(u(r, "keys.keys"), 20_000, "{r}");
    assert_eq!(calls, 2000, "pg_stat_statements calls of {query}");
    assert_eq!(
        u(r, "keys.hits"),
        rows,
        "PostgreSQL returned {rows} rows: {r}"
    );
    assert_eq!(u(r, "keys.misses"), 20_000 - rows, "{r}");
    // Half the range is past the data set's 1,000,000 rows.
    assert!(rows > 5000 && rows < 15000, "rows {rows}");
    let so = &r["server_observed"];
    assert_eq!(so["source"], "pg_stat_statements.calls", "{so}");
    assert_eq!(u(so, "delta"), 2000, "{so}");
    assert_schema_valid(&doc);
}
