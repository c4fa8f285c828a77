//! The wire PostgreSQL driver against a real server: `eval "$(scripts/servers.sh env)"` first
//! (LOADGEN_PG_URL and PGPASSWORD, table `usr` loaded by `loadgen prepare`). Without
//! LOADGEN_PG_URL every test prints a note and passes, except under LOADGEN_REQUIRE_SERVERS=1
//! (scripts/test.sh), where it fails.

mod common;

use loadgen::outcome::{ErrorKind, Outcome};
use loadgen::plan::{Mode, Plan};
use loadgen::proto::codec::Request;
use loadgen::proto::postgres::wire_driver::PgWireTarget;
use loadgen::proto::{Conn, Target, TargetUrl};

/// The shared helper: skips with a note, but fails under LOADGEN_REQUIRE_SERVERS=1.
fn server_url() -> Option<String> {
    common::server("LOADGEN_PG_URL")
}

fn target(url: &str, query: Option<&str>) -> PgWireTarget {
    let plan = Plan {
        verify: true,
        query: query.map(str::to_string),
        ..Plan::default()
    };
    PgWireTarget::new(&TargetUrl::parse(url).unwrap(), &plan).unwrap()
}

/// Sends every key before reading any reply (one pipelined batch), then reads them in order.
async fn lookups(
    t: &PgWireTarget,
    keys: impl Iterator<Item = u64> + Clone,
) -> Vec<Result<Outcome, loadgen::outcome::LookupError>> {
    let mut conn = t.connect().await.expect("connect");
    keys.clone().for_each(|k| conn.send(&Request::read(k)));
    let mut out = Vec::new();
    for k in keys {
        out.push(conn.recv(&Request::read(k)).await);
    }
    out
}

#[tokio::test]
async fn pipelined_hits_verify_and_misses() {
    let Some(url) = server_url() else { return };
    let t = target(&url, None);
    assert_eq!(t.kind(), "postgres");
    let before = t.server_count().await;
    let hits = lookups(&t, 1..=1000).await;
    assert_eq!(
        hits.iter()
            .filter(|r| matches!(r, Ok(Outcome::Hit)))
            .count(),
        1000
    );
    let misses = lookups(&t, 2_000_000..2_000_100).await;
    assert!(misses.iter().all(|r| matches!(r, Ok(Outcome::Miss))));
    // Server-side truth, when pg_stat_statements is installed (others may run it too: >=).
    if let (Ok(Some(a)), Ok(Some(b))) = (before, t.server_count().await) {
        assert!(b.value - a.value >= 1100, "{} -> {}", a.value, b.value);
    }
}

#[tokio::test]
async fn every_key_type_binds() {
    let Some(url) = server_url() else { return };
    for cast in ["$1::int2", "$1::int4", "$1::int8"] {
        let q = format!("SELECT user_name, user_email, created FROM usr WHERE user_id = {cast}");
        let r = lookups(&target(&url, Some(&q)), [7u64, 30_000].into_iter()).await;
        assert!(
            r.iter().all(|r| matches!(r, Ok(Outcome::Hit))),
            "{cast}: {r:?}"
        );
    }
    let q = "SELECT user_name, user_email, created FROM usr WHERE user_id::text = $1";
    let r = lookups(&target(&url, Some(q)), [42u64, 999_999].into_iter()).await;
    assert!(
        r.iter().all(|r| matches!(r, Ok(Outcome::Hit))),
        "text: {r:?}"
    );
}

#[tokio::test]
async fn server_error_mid_pipeline_keeps_the_connection_in_step() {
    let Some(url) = server_url() else { return };
    // Key 5 divides by zero at execution. Lookups written together share one Sync, so the
    // server skips 6..=10; they must fail as skipped, and the next batch on the same
    // connection must get its own rows.
    let q = "SELECT user_name, user_email, created FROM usr \
             WHERE user_id = $1::int4 AND 1 / ($1::int4 - 5) IS NOT NULL";
    let t = target(&url, Some(q));
    let mut conn = t.connect().await.expect("connect");
    for batch in [1..=10u64, 11..=20] {
        batch.clone().for_each(|k| conn.send(&Request::read(k)));
        for k in batch {
            match conn.recv(&Request::read(k)).await {
                Err(e) if k == 5 => {
                    assert_eq!((e.kind, e.fatal), (ErrorKind::Server, false));
                    assert!(e.message.contains("22012"), "{}", e.message);
                }
                Err(e) if (6..=10).contains(&k) => {
                    assert_eq!((e.kind, e.fatal), (ErrorKind::Server, false));
                    assert!(e.message.contains("skipped"), "{}", e.message);
                }
                Ok(Outcome::Hit) if !(5..=10).contains(&k) => {}
                other => panic!("key {k}: {other:?}"),
            }
        }
    }
}

#[tokio::test]
async fn wrong_password_is_one_line_without_the_password() {
    let Some(url) = server_url() else { return };
    let mut u = TargetUrl::parse(&url).unwrap();
    u.password = Some("not-the-Secret-42".into());
    let t = PgWireTarget::new(&u, &Plan::default()).unwrap();
    let e = t.connect().await.err().expect("must fail");
    assert_eq!(e.kind, ErrorKind::Connect);
    let user = u.user.as_deref().unwrap_or("loadgen");
    assert_eq!(
        e.message,
        format!("password authentication failed for user \"{user}\": check the user and password (in the URL or PGPASSWORD)")
    );
    assert!(!e.message.contains("not-the-Secret-42"));
}

#[tokio::test]
async fn setup_errors_say_what_to_do() {
    let Some(url) = server_url() else { return };
    let q = "SELECT 1 FROM no_such_table_lg WHERE id = $1";
    let e = target(&url, Some(q)).connect().await.err().unwrap();
    assert!(e.message.contains("loadgen prepare"), "{}", e.message);

    let mut u = TargetUrl::parse(&url).unwrap();
    u.path = "no_such_db_lg".into();
    let e = PgWireTarget::new(&u, &Plan::default())
        .unwrap()
        .connect()
        .await
        .err()
        .unwrap();
    assert!(
        e.message.contains("no_such_db_lg") && e.message.contains("URL path"),
        "{}",
        e.message
    );

    u.port = Some(1); // nothing listens there
    let e = PgWireTarget::new(&u, &Plan::default())
        .unwrap()
        .connect()
        .await
        .err()
        .unwrap();
    assert!(e.message.starts_with("cannot connect to"), "{}", e.message);

    let simple = Plan {
        mode: Mode::Simple,
        ..Plan::default()
    };
    let e = PgWireTarget::new(&u, &simple).err().unwrap();
    assert!(e.0.contains("driver=tokio"), "{e}");
}
