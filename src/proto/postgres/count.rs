//! PostgreSQL's own count of lookups, for both drivers: pg_stat_statements' calls of the lookup
//! when the extension is there, else `idx_scan` of the one index the lookup's plan reads (exact
//! for a point lookup: every execution starts one scan of it, hit or miss). Which source is
//! used is decided once per target, on the first read, and named in the result.

use crate::error::SetupError;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::proto::postgres::error::explain;
use crate::proto::postgres::tls::PgTls;
use crate::proto::target::ServerCount;

pub const CALLS: &str = "pg_stat_statements.calls";

/// The counter a target reads, found on its first read and kept.
pub struct PgCounter {
    /// Simple mode: its literal keys are normalized to a query with its own identifier, whose
    /// text is the `$1` form, so pg_stat_statements is matched by text.
    by_text: bool,
    found: tokio::sync::OnceCell<Source>,
}

enum Source {
    /// pg_stat_statements, by query identifier (None: by text).
    Calls(Option<i64>),
    /// pg_stat_user_indexes.idx_scan of this index (oid, name).
    IndexScans(u32, String),
    /// Why neither can be read.
    Unavailable(String),
}

/// What one probe of the lookup's plan shows.
struct Probe {
    query_id: Option<i64>,
    /// (index name, schema when the plan names it) of every node that scans an index.
    indexes: Vec<(String, Option<String>)>,
}

impl PgCounter {
    pub fn new(by_text: bool) -> PgCounter {
        PgCounter {
            by_text,
            found: tokio::sync::OnceCell::new(),
        }
    }

    /// The counter now, over a connection of its own. `label` is the redacted URL.
    pub async fn read(
        &self,
        config: &tokio_postgres::Config,
        tls: &PgTls,
        sql: &str,
        label: &str,
    ) -> Result<Option<ServerCount>, SetupError> {
        let (client, task) = tls
            .connect(config)
            .await
            .map_err(|e| explain(&e, "counter query"))?;
        let r = match self.found.get_or_try_init(|| self.find(&client, sql)).await {
            Ok(Source::Calls(id)) => calls(&client, sql, *id).await,
            Ok(Source::IndexScans(oid, name)) => settled_scans(&client, *oid)
                .await
                .map(|v| ServerCount {
                    epoch: None,
                    ops: Vec::new(),
                    value: v,
                    source: format!("pg_stat_user_indexes.idx_scan ({name})"),
                    members: Vec::new(),
                    per_request: 1,
                    redirects: None,
                    parts: None,
                })
                .map_err(|e| explain(&e, "counter query").into()),
            Ok(Source::Unavailable(why)) => Err(SetupError(format!("{label}: {why}"))),
            Err(e) => Err(e),
        };
        let calls = matches!(self.found.get(), Some(Source::Calls(_)));
        let r = match r {
            Ok(mut count) => {
                count.epoch = epoch(&client, calls).await;
                Ok(count)
            }
            Err(e) => Err(e),
        };
        drop(client);
        let _ = task.await;
        r.map(Some)
    }

    async fn find(&self, client: &Client, sql: &str) -> Result<Source, SetupError> {
        // The probe's EXPLAIN counts as one call of the statement in pg_stat_statements: it runs
        // once, before the first count.
        let probe = probe(client, sql).await;
        let id = if self.by_text {
            None
        } else {
            probe.as_ref().and_then(|p| p.query_id)
        };
        let why_not = match client
            .simple_query("SELECT 1 FROM pg_stat_statements LIMIT 1")
            .await
        {
            Ok(_) => return Ok(Source::Calls(id)),
            Err(e) => match e.as_db_error() {
                Some(d) if d.code() == &tokio_postgres::error::SqlState::UNDEFINED_TABLE => {
                    "pg_stat_statements is not created in this database".to_string()
                }
                Some(d) => format!("pg_stat_statements: {}", d.message()),
                None => return Err(explain(&e, "counter query").into()),
            },
        };
        let Some(probe) = probe else {
            return Ok(Source::Unavailable(format!(
                "counter unavailable: {why_not}, and the lookup's plan could not be read to find its index"
            )));
        };
        let [(name, schema)] = &probe.indexes[..] else {
            let what = if probe.indexes.is_empty() {
                "scans no index".to_string()
            } else {
                format!("scans {} indexes", probe.indexes.len())
            };
            return Ok(Source::Unavailable(format!(
                "counter unavailable: {why_not}, and the lookup's plan {what} (idx_scan counts a lookup only when it reads exactly one index)"
            )));
        };
        let row = client
            .query_one(
                "SELECT to_regclass(CASE WHEN $2::text IS NULL THEN quote_ident($1) \
                 ELSE quote_ident($2) || '.' || quote_ident($1) END)::oid",
                &[name, schema],
            )
            .await
            .map_err(|e| explain(&e, "counter query"))?;
        match row.get::<_, Option<u32>>(0) {
            Some(oid) => Ok(Source::IndexScans(oid, name.clone())),
            None => Ok(Source::Unavailable(format!(
                "counter unavailable: {why_not}, and the plan's index {name} was not found"
            ))),
        }
    }
}

/// The lookup prepared and explained with a sample key: its query identifier (shown when
/// compute_query_id is on, as it is whenever pg_stat_statements is loaded) and the indexes its
/// plan scans. None when the statement cannot be explained that way.
async fn probe(client: &Client, sql: &str) -> Option<Probe> {
    client
        .batch_execute(&format!("PREPARE loadgen_probe AS {sql}"))
        .await
        .ok()?;
    let rows = client
        .simple_query("EXPLAIN (VERBOSE, COSTS OFF, FORMAT JSON) EXECUTE loadgen_probe('1')")
        .await
        .ok()?;
    let text = rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
        _ => None,
    })?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let top = doc.get(0)?;
    let mut indexes = Vec::new();
    index_nodes(top.get("Plan")?, &mut indexes);
    Some(Probe {
        query_id: top.get("Query Identifier").and_then(|v| v.as_i64()),
        indexes,
    })
}

fn index_nodes(node: &serde_json::Value, out: &mut Vec<(String, Option<String>)>) {
    let kind = node.get("Node Type").and_then(|v| v.as_str());
    if matches!(
        kind,
        Some("Index Scan" | "Index Only Scan" | "Bitmap Index Scan")
    ) {
        if let Some(name) = node.get("Index Name").and_then(|v| v.as_str()) {
            let schema = node.get("Schema").and_then(|v| v.as_str());
            out.push((name.to_string(), schema.map(str::to_string)));
        }
    }
    for child in node
        .get("Plans")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        index_nodes(child, out);
    }
}

/// When the server last started, and when pg_stat_statements last reset its counts (a crash
/// of any backend resets them without a new postmaster): a count read in another epoch is not
/// comparable. None when it cannot be read: the counter going back still tells.
async fn epoch(client: &Client, calls: bool) -> Option<String> {
    let sql = match calls {
        true => "SELECT 'postmaster started ' || pg_postmaster_start_time()::text || \
                 ', pg_stat_statements reset ' || coalesce((SELECT stats_reset FROM pg_stat_statements_info)::text, '-')",
        false => "SELECT 'postmaster started ' || pg_postmaster_start_time()::text",
    };
    client.query_one(sql, &[]).await.ok().map(|row| row.get(0))
}

/// pg_stat_statements' calls of the lookup in this database (two databases of one server can
/// be two shards of a target, or two targets). Why by identifier and not by text:
/// pg_stat_statements keeps the text of the first statement with that identifier, so the same
/// lookup written differently before (`$1::int4`, other spacing) would count 0.
pub async fn calls(client: &Client, sql: &str, id: Option<i64>) -> Result<ServerCount, SetupError> {
    let r = match id {
        Some(id) => client
            .query_one(
                "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE queryid = $1 AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[&id],
            )
            .await,
        None => {
            client
                .query_one(
                    "SELECT coalesce(sum(calls), 0)::int8 FROM pg_stat_statements WHERE query = $1 AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                    &[&sql],
                )
                .await
        }
    };
    r.map(|row| ServerCount {
        epoch: None,
        ops: Vec::new(),
        value: row.get::<_, i64>(0) as u64,
        source: CALLS.into(),
        members: Vec::new(),
        per_request: 1,
        redirects: None,
        parts: None,
    })
    .map_err(|e| explain(&e, "counter query").into())
}

/// The index's idx_scan once it has stopped moving. Backends send their counts to the shared
/// statistics at transaction end at most once a second, and at exit: so read until no other
/// loadgen session is left in this database (their counts are flushed when they exit) and the
/// value held for a moment, or, while some stay open, until it held for longer than their
/// flush interval. Bounded, so a busy server cannot hold the run.
async fn settled_scans(client: &Client, oid: u32) -> Result<u64, tokio_postgres::Error> {
    const STEP: Duration = Duration::from_millis(100);
    const QUIET: Duration = Duration::from_millis(300);
    const FLUSH: Duration = Duration::from_millis(1500);
    const LIMIT: Duration = Duration::from_secs(5);
    let started = Instant::now();
    let mut last = None;
    let mut since = Instant::now();
    loop {
        // The statistics snapshot is cached per transaction: each read is a transaction of
        // its own, and the snapshot is dropped explicitly in case it is not.
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await?;
        let row = client
            .query_one(
                "SELECT coalesce((SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelid = $1::oid), 0)::int8, \
                 (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                  AND application_name = 'loadgen' AND pid <> pg_backend_pid())",
                &[&oid],
            )
            .await?;
        let (value, others) = (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1));
        if last != Some(value) {
            last = Some(value);
            since = Instant::now();
        }
        let held = since.elapsed();
        if (others == 0 && held >= QUIET) || held >= FLUSH || started.elapsed() >= LIMIT {
            return Ok(value);
        }
        tokio::time::sleep(STEP).await;
    }
}
