//! PostgreSQL through tokio-postgres, connections from a deadpool-postgres pool. Each connection
//! prepares the lookup once and is held for the whole run (returning it to the pool after every
//! lookup would add pool bookkeeping to the hot path and measure deadpool, not PostgreSQL).
//! Pipelining: tokio-postgres sends concurrent queries on one connection back to back, so
//! `--pipeline D` keeps D executions in flight per connection.
//! Writes (`--mix`) run the wire driver's statements (`writes`) with the same text parameters;
//! each `execute` is its own Sync, so with autocommit every write is its own transaction.
//! `--txn N`: prepared BEGIN before a transaction's first write and COMMIT after its Nth, sent in
//! the same poll as the write so they pipeline in order with it (tokio-postgres sends a request
//! when its future is first polled, and the in-flight queue polls new futures in order). After
//! an error the requests already sent in the transaction are refused (25P02); the next request
//! sends ROLLBACK and the next write a fresh BEGIN. A transaction short of N writes when the
//! run ends is committed (`commit`).

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use deadpool_postgres::{
    ClientWrapper, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime,
};
use futures_util::future::LocalBoxFuture;
use futures_util::stream::{FuturesOrdered, StreamExt};
use tokio_postgres::types::{to_sql_checked, Format, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{NoTls, Row, SimpleQueryMessage, SimpleQueryRow, Statement};

use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::plan::{Mode, Plan};
use crate::proto::caps::{Caps, ALL_WRITES};
use crate::proto::codec::{outcome, Cell, NoCells, Reply, Request};
use crate::proto::postgres::count::PgCounter;
use crate::proto::postgres::error::{explain, explain_connect};
use crate::proto::postgres::tls::PgTls;
use crate::proto::postgres::writes;
use crate::proto::sniff::Hello;
use crate::proto::target::{Conn, ServerCount, SetupError, Target};
use crate::transport::{Endpoint, TlsInfo};
use crate::url::TargetUrl;

pub const DEFAULT_QUERY: &str = "SELECT user_name, user_email, created FROM usr WHERE user_id = $1";

pub struct PgTarget {
    pool: Pool,
    endpoint: Endpoint,
    config: tokio_postgres::Config,
    sql: Arc<str>,
    simple: Arc<(String, String)>,
    mode: Mode,
    verify: bool,
    url: String,
    counter: PgCounter,
    tls: PgTls,
    /// The statement of each write op of the mix, prepared on every connection.
    writes: Arc<Vec<(Op, String)>>,
    /// Writes per transaction (`--txn`).
    txn: usize,
}

/// tokio-postgres settings from a `postgres://` URL and where it connects (`super::endpoint`),
/// with PGUSER/PGPASSWORD/PGDATABASE as the usual fallbacks. The password never leaves this
/// struct.
pub fn pg_config(url: &TargetUrl, ep: &Endpoint, timeout: Duration) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::new();
    match ep {
        Endpoint::Tcp { host, port } => c.host(host).port(*port),
        // tokio-postgres takes libpq's directory and port, and opens <dir>/.s.PGSQL.<port>.
        Endpoint::Unix(_) => c
            .host_path(super::socket_dir(ep).expect("a socket file is in a directory"))
            .port(super::port(url).expect("checked by endpoint")),
    };
    let user = url
        .user
        .clone()
        .or_else(|| std::env::var("PGUSER").ok())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "postgres".into());
    c.user(&user);
    if let Some(p) = url
        .password
        .clone()
        .or_else(|| std::env::var("PGPASSWORD").ok())
    {
        c.password(p);
    }
    let db = Some(url.path.trim_matches('/').to_string())
        .filter(|d| !d.is_empty())
        .or_else(|| std::env::var("PGDATABASE").ok())
        .unwrap_or(user);
    c.dbname(&db);
    c.application_name("loadgen");
    // libpq's `options`: server settings for every session, e.g. `-c synchronous_commit=off`.
    if let Some(o) = url.param("options") {
        c.options(o);
    }
    c.connect_timeout(timeout);
    c
}

impl PgTarget {
    /// The options this target reads from its URL's query (`driver` is read by dispatch;
    /// the TLS ones are libpq's, `tls::OPTIONS`).
    pub const OPTIONS: &'static [&'static str] = &[
        "driver",
        "host",
        "port",
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "options",
        "multi",
    ];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<PgTarget, SetupError> {
        let endpoint = super::endpoint(url)?;
        let tls = PgTls::new(url, &endpoint)?;
        let mut config = pg_config(url, &endpoint, plan.timeouts().connect);
        config.ssl_mode(tls.ssl_mode());
        let manager = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let mgr = match tls.connector() {
            Some(make) => Manager::from_config(config.clone(), make, manager),
            None => Manager::from_config(config.clone(), NoTls, manager),
        };
        let pool = Pool::builder(mgr)
            .max_size(plan.connections + 1)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(plan.timeouts().connect))
            .build()
            .map_err(|e| SetupError(format!("{}: {e}", url.redacted())))?;
        let sql = lookup_sql(plan)?;
        let (a, b) = sql.split_once("$1").expect("checked");
        Ok(PgTarget {
            pool,
            endpoint,
            config,
            simple: Arc::new((a.to_string(), b.to_string())),
            sql: Arc::from(sql.as_str()),
            mode: plan.mode,
            verify: plan.verify,
            url: url.redacted(),
            counter: PgCounter::new(plan.mode == Mode::Simple),
            tls,
            writes: Arc::new(writes::statements(plan)?),
            txn: plan.txn,
        })
    }
}

/// The lookup's SQL: `--query` or the default, with its key parameter `$1`.
pub fn lookup_sql(plan: &Plan) -> Result<String, SetupError> {
    let sql = plan
        .query
        .clone()
        .unwrap_or_else(|| DEFAULT_QUERY.to_string());
    if !sql.contains("$1") {
        return Err(SetupError(
            "--query must have one parameter $1 for the key, like ... WHERE id = $1".into(),
        ));
    }
    Ok(sql)
}

fn pool_error(e: deadpool_postgres::PoolError, ep: &Endpoint) -> LookupError {
    use deadpool_postgres::PoolError;
    let msg = match &e {
        PoolError::Backend(pe) => explain_connect(pe, ep, "lookup"),
        PoolError::Timeout(_) => {
            "no connection within --timeout (is the server up and accepting connections?)".into()
        }
        other => other.to_string(),
    };
    LookupError::new(ErrorKind::Connect, true, msg)
}

#[derive(Clone, Copy)]
enum KeyType {
    I16,
    I32,
    I64,
    Text,
}

enum Answer {
    Prepared(Option<Row>),
    Simple(Option<SimpleQueryRow>),
    /// Rows a write changed.
    Written(u64),
}

/// A write's parameter, sent as text whatever its column's type: the server parses it, as it
/// parses the wire driver's (`writes::encode`), so a user's statement may bind any types.
#[derive(Debug)]
struct TextParam(Vec<u8>);

impl ToSql for TextParam {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn encode_format(&self, _: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

pub struct PgConn {
    client: Rc<ClientWrapper>,
    stmt: Statement,
    /// The prepared statement of each write op of the mix (`Op::index`).
    writes: [Option<Statement>; Op::COUNT],
    /// Prepared when writes are grouped (`--txn` above 1).
    txn: Option<TxnStatements>,
    /// Writes per transaction, and writes sent of the open one.
    per_txn: usize,
    group: usize,
    /// Transactions begun; per request in flight, the one it was sent in (0: none).
    groups: u64,
    groups_in_flight: VecDeque<u64>,
    /// The open transaction failed: the next request rolls it back and starts afresh, as the
    /// wire driver's next request does.
    rollback: bool,
    key_type: KeyType,
    simple: Option<Arc<(String, String)>>,
    verify: bool,
    in_flight: FuturesOrdered<LocalBoxFuture<'static, Result<Answer, tokio_postgres::Error>>>,
}

impl Target for PgTarget {
    type Conn = PgConn;

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn driver(&self) -> Option<&'static str> {
        Some("tokio")
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn hello(&self) -> Option<Hello> {
        Some(super::hello(&self.config))
    }

    async fn connect(&self) -> Result<PgConn, LookupError> {
        let obj = self
            .pool
            .get()
            .await
            .map_err(|e| pool_error(e, &self.endpoint))?;
        // Detached from the pool: this task owns the connection for the run; when it breaks it
        // is closed and a fresh one is made, never recycled onto another thread.
        let client = Object::take(obj);
        let stmt = client
            .prepare_cached(&self.sql)
            .await
            .map_err(|e| LookupError::new(ErrorKind::Connect, true, explain(&e, "lookup")))?;
        let key_type = match stmt.params().first() {
            Some(&Type::INT2) => KeyType::I16,
            Some(&Type::INT4) => KeyType::I32,
            Some(&Type::INT8) => KeyType::I64,
            Some(&Type::TEXT) | Some(&Type::VARCHAR) => KeyType::Text,
            Some(t) => {
                return Err(LookupError::new(
                    ErrorKind::Connect,
                    true,
                    format!("the key parameter $1 has type {t}; use an integer or text key column"),
                ))
            }
            None => {
                return Err(LookupError::new(
                    ErrorKind::Connect,
                    true,
                    "--query has no parameter $1",
                ))
            }
        };
        let mut prepared: [Option<Statement>; Op::COUNT] = Default::default();
        for (op, sql) in self.writes.iter() {
            let s = client.prepare(sql).await.map_err(|e| {
                let what = format!("--query-{} statement", op.name());
                LookupError::new(ErrorKind::Connect, true, explain(&e, &what))
            })?;
            prepared[op.index()] = Some(s);
        }
        let txn = match self.txn {
            1 => None,
            _ => {
                let prepare = |sql| client.prepare(sql);
                let failed = |e| LookupError::new(ErrorKind::Connect, true, explain(&e, "--txn"));
                Some(TxnStatements {
                    begin: prepare("BEGIN").await.map_err(failed)?,
                    commit: prepare("COMMIT").await.map_err(failed)?,
                    rollback: prepare("ROLLBACK").await.map_err(failed)?,
                })
            }
        };
        Ok(PgConn {
            client: Rc::new(client),
            stmt,
            writes: prepared,
            txn,
            per_txn: self.txn,
            group: 0,
            groups: 0,
            groups_in_flight: VecDeque::new(),
            rollback: false,
            key_type,
            simple: (self.mode == Mode::Simple).then(|| self.simple.clone()),
            verify: self.verify,
            in_flight: FuturesOrdered::new(),
        })
    }

    /// tokio-postgres pipelines; writes are prepared and grouped with BEGIN and COMMIT.
    const CAPS: Caps = Caps {
        pipeline: usize::MAX,
        txn: true,
        writes: ALL_WRITES,
        ..Caps::READS
    };

    fn tls(&self) -> Option<TlsInfo> {
        self.tls.negotiated()
    }

    /// `--mode simple` inlines a lookup's key only: its writes stay prepared.
    fn refuse(&self, plan: &Plan) -> Result<(), SetupError> {
        match plan.mix.ops().find(|o| o.writes()) {
            Some(op) if self.mode == Mode::Simple => Err(SetupError(format!(
                "--mix {}: --mode simple runs lookups only, not {}; drop --mode simple to write",
                plan.mix.name(),
                op.name()
            ))),
            _ => Ok(()),
        }
    }

    async fn insert_from(&self) -> Result<Option<u64>, SetupError> {
        writes::insert_from(&self.config, &self.tls, &self.writes).await
    }

    async fn durability(&self) -> Vec<(String, String)> {
        writes::durability(&self.config, &self.tls).await
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let (config, tls) = (&self.config, &self.tls);
        writes::server_count(
            &self.counter,
            config,
            tls,
            &self.sql,
            &self.url,
            &self.writes,
        )
        .await
    }
}

/// A request's answer, once its future is done.
type Answering = LocalBoxFuture<'static, Result<Answer, tokio_postgres::Error>>;

/// BEGIN, COMMIT and ROLLBACK, prepared on a connection that groups writes.
#[derive(Clone)]
struct TxnStatements {
    begin: Statement,
    commit: Statement,
    rollback: Statement,
}

impl PgConn {
    /// `fut` inside the connection's transactions: a ROLLBACK first after a failed one, a
    /// BEGIN with a transaction's first write, its COMMIT with its Nth. All are sent in the
    /// request's first poll, in that order; the request's answer is the first failure.
    fn grouped(&mut self, writes: bool, t: TxnStatements, fut: Answering) -> Answering {
        let rollback = std::mem::take(&mut self.rollback).then_some(t.rollback);
        let mut begin = None;
        let mut commit = None;
        if writes {
            if self.group == 0 {
                self.groups += 1;
                begin = Some(t.begin);
            }
            self.group += 1;
            if self.group >= self.per_txn {
                self.group = 0;
                commit = Some(t.commit);
            }
        }
        if rollback.is_none() && begin.is_none() && commit.is_none() {
            return fut;
        }
        let client = self.client.clone();
        Box::pin(async move {
            let run = |s: Option<Statement>| {
                let client = &client;
                async move {
                    match s {
                        Some(s) => client.execute(&s, &[]).await.map(|_| ()),
                        None => Ok(()),
                    }
                }
            };
            let (_, b, answer, c) =
                futures_util::join!(run(rollback), run(begin), fut, run(commit));
            b?;
            let answer = answer?;
            c.map(|()| answer)
        })
    }
}

impl Conn for PgConn {
    /// The open transaction's COMMIT (none after a failure: its ROLLBACK is still to come).
    async fn commit(&mut self) -> Result<bool, LookupError> {
        let Some(t) = self
            .txn
            .as_ref()
            .filter(|_| self.group > 0 && !self.rollback)
        else {
            return Ok(false);
        };
        self.group = 0;
        match self.client.execute(&t.commit, &[]).await {
            Ok(_) => Ok(true),
            Err(e) => Err(request_error(&e, self.client.is_closed())),
        }
    }

    fn send(&mut self, req: &Request) {
        let key = req.key;
        let client = self.client.clone();
        let fut: Answering = if let Some(stmt) = self.writes[req.op.index()].clone() {
            let params: Vec<TextParam> = (0..writes::params(req.op))
                .map(|i| {
                    let mut v = Vec::with_capacity(32);
                    writes::value(i, key, req.version, &mut v);
                    TextParam(v)
                })
                .collect();
            Box::pin(async move {
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                client.execute(&stmt, &refs).await.map(Answer::Written)
            })
        } else if let Some(parts) = &self.simple {
            // Simple protocol: the key inlined into the text, parsed and planned every time.
            let sql = format!("{}{key}{}", parts.0, parts.1);
            Box::pin(async move {
                let msgs = client.simple_query(&sql).await?;
                Ok(Answer::Simple(msgs.into_iter().find_map(|m| match m {
                    SimpleQueryMessage::Row(r) => Some(r),
                    _ => None,
                })))
            })
        } else {
            let stmt = self.stmt.clone();
            let kt = self.key_type;
            Box::pin(async move {
                let r = match kt {
                    KeyType::I16 => client.query_opt(&stmt, &[&(key as i16)]).await,
                    KeyType::I32 => client.query_opt(&stmt, &[&(key as i32)]).await,
                    KeyType::I64 => client.query_opt(&stmt, &[&(key as i64)]).await,
                    KeyType::Text => client.query_opt(&stmt, &[&key.to_string()]).await,
                };
                r.map(Answer::Prepared)
            })
        };
        let fut = match &self.txn {
            Some(t) => self.grouped(req.op.writes(), t.clone(), fut),
            None => fut,
        };
        self.in_flight.push_back(fut);
        self.groups_in_flight
            .push_back(self.groups * u64::from(self.group > 0));
    }

    async fn recv(&mut self, req: &Request) -> Result<Outcome, LookupError> {
        let Some(r) = self.in_flight.next().await else {
            return Err(LookupError::protocol("no request in flight"));
        };
        let group = self.groups_in_flight.pop_front().unwrap_or(0);
        if r.is_err() && group == self.groups && self.group > 0 {
            // It failed the open transaction: the rest of it would only be refused (25P02).
            (self.rollback, self.group) = (true, 0);
        }
        match r {
            Ok(Answer::Prepared(row)) => {
                let cells = row.as_ref().map(prepared_cells);
                outcome(Reply::from_cells(cells), req, self.verify)
            }
            Ok(Answer::Simple(row)) => {
                let cells = row.as_ref().map(simple_cells);
                outcome(Reply::from_cells(cells), req, self.verify)
            }
            Ok(Answer::Written(n)) => outcome(Reply::<NoCells>::Written(n), req, self.verify),
            Err(e) => Err(request_error(&e, self.client.is_closed())),
        }
    }
}

/// A request the server failed, counted by its SQLSTATE's kind and said as the wire driver says
/// it; or, when the connection is gone, the loss of it.
fn request_error(e: &tokio_postgres::Error, closed: bool) -> LookupError {
    match e.as_db_error() {
        _ if closed => LookupError::new(ErrorKind::Io, true, explain(e, "lookup")),
        Some(db) => {
            let code = db.code().code();
            let message = format!("{} (SQLSTATE {code})", db.message());
            LookupError::new(super::error::kind(code), false, message)
        }
        None => LookupError::new(ErrorKind::Server, false, explain(e, "lookup")),
    }
}

/// The cells of a simple-protocol row: every value is text.
fn simple_cells(row: &SimpleQueryRow) -> impl Iterator<Item = Cell<'_>> {
    (0..row.len()).map(|i| row.get(i).map_or(Cell::Null, |v| Cell::Text(v.as_bytes())))
}

/// The cells of a prepared-statement row, by each column's type; the type is checked first so
/// a column of another type costs no error value.
fn prepared_cells(row: &Row) -> impl Iterator<Item = Cell<'_>> {
    row.columns().iter().enumerate().map(|(i, column)| {
        let t = column.type_();
        if <&str as FromSql>::accepts(t) {
            match row.try_get::<_, Option<&str>>(i) {
                Ok(Some(v)) => Cell::Text(v.as_bytes()),
                Ok(None) => Cell::Null,
                Err(_) => Cell::Other,
            }
        } else if <SystemTime as FromSql>::accepts(t) {
            match row.try_get::<_, Option<SystemTime>>(i) {
                Ok(Some(v)) => Cell::Time(micros(v)),
                Ok(None) => Cell::Null,
                Err(_) => Cell::Other,
            }
        } else {
            Cell::Other
        }
    })
}

/// Microseconds since 1970-01-01 00:00:00 (negative before).
fn micros(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}
