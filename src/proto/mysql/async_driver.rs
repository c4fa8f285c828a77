//! MariaDB / MySQL through mysql_async. Each connection prepares the lookup once and is held for
//! the whole run. Settings that would distort the measurement are off by default:
//! - no pool: each lane opens its own connection (a pooled one would come back on
//!   `--reconnect-every` instead of a new login);
//! - `prefer_socket` is off (mysql_async would silently switch 127.0.0.1 to the Unix socket,
//!   and a TCP target must stay TCP to compare with the other targets); `?socket=` is the way
//!   to the socket.
//!
//! mysql_async cannot pipeline: one request in flight per connection (`?driver=wire` can).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use mysql_async::prelude::Queryable;
use mysql_async::{ClientIdentity, DriverError, Opts, OptsBuilder, Row, SslOpts, Statement, Value};

use crate::dataset;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::plan::{Mode, Plan};
use crate::proto::caps::{Caps, ALL_WRITES};
use crate::proto::codec::{outcome, Cell, NoCells, Reply, Request};
use crate::proto::mysql::codec::time_cell;
use crate::proto::mysql::plugins::unspoken;
use crate::proto::mysql::ssl::{no_tls_on_server, server_said, tls_options};
use crate::proto::mysql::writes::{self, Param};
use crate::proto::sniff::{Hello, Kind};
use crate::proto::target::{Conn, ServerCount, SetupError, Target};
use crate::transport::{self, Endpoint, Roots, TlsClient, TlsInfo, TlsMode, TlsOptions};
use crate::url::TargetUrl;

pub const DEFAULT_QUERY: &str = "SELECT user_name, user_email, created FROM usr WHERE user_id = ?";

pub struct MysqlTarget {
    /// PREFERRED: the server offered no TLS, so connections are plain from now on.
    plain: AtomicBool,
    /// What the first TLS connection negotiated.
    tls: OnceLock<TlsInfo>,
    endpoint: Endpoint,
    opts: MyOpts,
    sql: String,
    simple: Option<(String, String)>,
    verify: bool,
    /// The statement of each write op of the mix, prepared on every connection.
    writes: Vec<(Op, String)>,
    /// `--txn`: writes per transaction.
    txn: usize,
}

/// mysql_async options for a URL, with its TLS. mysql_async has no PREFERRED (given TLS
/// options it insists on TLS), so under PREFERRED `plain` holds the same options without TLS,
/// taken for a server that offers none, as the mysql client does.
#[derive(Clone)]
pub struct MyOpts {
    pub opts: Opts,
    pub plain: Option<Opts>,
    /// The same TLS settings as a transport client: file checks up front, and the one-line
    /// causes of a failed handshake.
    pub tls: Option<TlsClient>,
}

impl MyOpts {
    /// One connection, plain if PREFERRED met a server without TLS.
    pub async fn conn(&self) -> Result<mysql_async::Conn, SetupError> {
        let r = match (login(&self.opts).await, &self.plain) {
            (Err(e), Some(plain)) if no_tls_offered(&e) => login(plain).await,
            (r, _) => r,
        };
        r.map_err(|e| self.explain(&e).into())
    }

    /// The server's count of a run whose writes are `writes` (none: a read-only run): every
    /// execute (Com_stmt_execute), or in `--mode simple` (`simple`) the text lookups
    /// (Com_select) beside the executes of the writes; per op as `writes::server_count` says.
    pub async fn server_count(
        &self,
        simple: bool,
        writes: &[(Op, String)],
    ) -> Result<ServerCount, SetupError> {
        let names = count_names(simple, writes);
        let values = global_statuses(self, &names).await?;
        Ok(count_of(simple, writes, &names, values))
    }

    /// Where inserts start (`writes::next_id_sql`), over a connection of its own.
    pub async fn insert_from(&self, writes: &[(Op, String)]) -> Result<Option<u64>, SetupError> {
        let Some(sql) = writes::next_id_sql(writes) else {
            return Ok(None);
        };
        let mut c = self.conn().await?;
        let next: Option<u64> = c.query_first(sql).await.map_err(|e| self.explain(&e))?;
        let _ = c.disconnect().await;
        next.map(Some)
            .ok_or_else(|| "the max(user_id) query returned no row".into())
    }

    /// The server's `writes::DURABILITY` settings; a setting that cannot be read says why.
    pub async fn durability(&self) -> Vec<(String, String)> {
        let read = async {
            let mut c = self.conn().await.map_err(|e| e.0)?;
            let rows: Vec<(String, String)> = c
                .query(format!(
                    "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('{}')",
                    writes::DURABILITY.join("', '")
                ))
                .await
                .map_err(|e| self.explain(&e))?;
            let _ = c.disconnect().await;
            Ok::<_, String>(rows)
        };
        match read.await {
            Ok(rows) => writes::DURABILITY
                .iter()
                .map(|name| {
                    let v = rows.iter().find(|(n, _)| n.eq_ignore_ascii_case(name));
                    let v = v.map_or_else(
                        || "unknown (the server does not show it)".into(),
                        |(_, v)| v.clone(),
                    );
                    (name.to_string(), v)
                })
                .collect(),
            Err(e) => vec![("unknown".into(), e)],
        }
    }

    /// One line for a mysql_async error, TLS handshake failures in the transport's words.
    pub fn explain(&self, e: &mysql_async::Error) -> String {
        let ep = endpoint_of(&self.opts);
        if let (mysql_async::Error::Io(mysql_async::IoError::Io(io)), Some(tls)) = (e, &self.tls) {
            if io.get_ref().is_some_and(|i| i.is::<rustls::Error>()) {
                let why = tls.explain(self.opts.ip_or_hostname(), io);
                // mysql_async's skip_domain_validation misses rustls's current name error.
                let name = why.contains("does not match the host name");
                if tls.mode == TlsMode::VerifyCa && name {
                    return format!("{ep}: {why}; under ssl-mode=VERIFY_CA the mysql_async driver checks the host name all the same: use driver=wire (which does not), or connect by one of those names");
                }
                return format!("{ep}: {why}");
            }
        }
        if no_tls_offered(e) {
            return format!("{ep}: {}", no_tls_on_server());
        }
        explain(e, &ep, self.tls.is_none())
    }
}

/// The server's greeting has no CLIENT_SSL.
pub fn no_tls_offered(e: &mysql_async::Error) -> bool {
    matches!(
        e,
        mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer)
    )
}

/// One connection. A login refused as access denied is tried twice more: mysql_common drops a
/// trailing zero byte of an auth switch's nonce, so one client_ed25519 login in 256 signs the
/// wrong bytes and is refused although the password is right.
pub async fn login(opts: &Opts) -> Result<mysql_async::Conn, mysql_async::Error> {
    let mut tries = 1;
    loop {
        match mysql_async::Conn::new(opts.clone()).await {
            Err(mysql_async::Error::Server(s)) if s.code == 1045 && tries < 3 => tries += 1,
            r => return r,
        }
    }
}

/// mysql_async options from a `mysql://` URL (TCP, or the socket of `?socket=`; TLS as its
/// ssl-mode says); MYSQL_PWD is the password fallback.
pub fn mysql_opts(url: &TargetUrl, timeout: Duration) -> Result<MyOpts, SetupError> {
    let endpoint = super::endpoint(url)?;
    let tls_options = tls_options(url, &endpoint)?;
    let tls = match &tls_options {
        Some(o) => TlsClient::new(o)?,
        None => None,
    };
    let user = url
        .user
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "root".into());
    let pass = url
        .password
        .clone()
        .or_else(|| std::env::var("MYSQL_PWD").ok());
    let db = Some(url.path.trim_matches('/').to_string()).filter(|d| !d.is_empty());
    let builder = match endpoint {
        Endpoint::Tcp { host, port } => OptsBuilder::default().ip_or_hostname(host).tcp_port(port),
        Endpoint::Unix(path) => OptsBuilder::default().socket(Some(path.to_string_lossy())),
    };
    let plain = builder
        .user(Some(user))
        .pass(pass)
        .db_name(db)
        .prefer_socket(false)
        .stmt_cache_size(16)
        // An update that finds its row is a hit even when it writes the value the row has.
        .client_found_rows(true)
        .tcp_nodelay(true)
        .conn_ttl(None)
        .wait_timeout(Some(timeout.as_secs().max(60) as usize * 10));
    Ok(match tls_options {
        None => MyOpts {
            opts: plain.into(),
            plain: None,
            tls,
        },
        Some(o) => MyOpts {
            opts: plain.clone().ssl_opts(ssl_opts(&o)).into(),
            plain: (o.mode == TlsMode::Prefer).then(|| plain.into()),
            tls,
        },
    })
}

/// mysql_async's spelling of the same checks `TlsClient` makes: a CA file given checks the
/// chain in every mode, VERIFY_IDENTITY the host name too, and no CA checks nothing.
fn ssl_opts(o: &TlsOptions) -> SslOpts {
    // Built-in roots only where none are given: mysql_async's verifier wants some, even when
    // it accepts any certificate.
    let ssl = SslOpts::default().with_disable_built_in_roots(matches!(o.roots, Roots::File(_)));
    let ssl = match &o.roots {
        Roots::File(path) => ssl
            .with_root_certs(vec![path.clone().into()])
            .with_danger_skip_domain_validation(o.mode != TlsMode::VerifyFull),
        _ => ssl.with_danger_accept_invalid_certs(true),
    };
    match (&o.cert, &o.key) {
        (Some(cert), Some(key)) => ssl.with_client_identity(Some(ClientIdentity::new(
            cert.clone().into(),
            key.clone().into(),
        ))),
        _ => ssl,
    }
}

/// Where `opts` connect, for messages.
pub fn endpoint_of(opts: &Opts) -> Endpoint {
    match opts.socket() {
        Some(path) => Endpoint::Unix(path.into()),
        None => Endpoint::Tcp {
            host: opts.ip_or_hostname().to_string(),
            port: opts.tcp_port(),
        },
    }
}

/// The lookup statement: --query or the default, with exactly one `?` for the key.
pub fn lookup_sql(plan: &Plan) -> Result<String, SetupError> {
    let sql = plan
        .query
        .clone()
        .unwrap_or_else(|| DEFAULT_QUERY.to_string());
    if sql.matches('?').count() != 1 {
        return Err(SetupError(
            "--query for MySQL needs exactly one ? for the key, like ... WHERE id = ?".into(),
        ));
    }
    Ok(sql)
}

/// One line for a server error during setup, shared by both drivers: what to do next for the
/// errors a user meets first (wrong password, table not loaded, unknown database). `plain`:
/// the login was not over TLS, which a user created REQUIRE SSL is refused for in the same words.
pub fn explain_server(code: u16, message: &str, plain: bool) -> String {
    match code {
        1045 if plain => format!(
            "{message}: check the user and password (in the URL or MYSQL_PWD); a user created REQUIRE SSL must log in over TLS, and this login was plain (ssl-mode)"
        ),
        1045 | 1698 => format!("{message}: check the user and password (in the URL or MYSQL_PWD)"),
        1146 => format!("{message}: run `loadgen prepare <url>` to create and load the table"),
        1049 => format!("{message}: create it or name another database in the URL path"),
        _ => format!("{message} (error {code})"),
    }
}

/// One line for a mysql_async error; the password is never in mysql_async's messages. A
/// connect that failed is said in the transport's words (which socket, what is wrong with it).
pub fn explain(e: &mysql_async::Error, ep: &Endpoint, plain: bool) -> String {
    use std::io::ErrorKind::{ConnectionRefused, NotFound, PermissionDenied};
    match e {
        mysql_async::Error::Server(s) => explain_server(s.code, &s.message, plain),
        mysql_async::Error::Driver(DriverError::UnknownAuthPlugin { name }) => unspoken(name),
        mysql_async::Error::Driver(DriverError::MysqlOldPasswordDisabled) => {
            unspoken("mysql_old_password")
        }
        mysql_async::Error::Driver(DriverError::CleartextPluginDisabled) => {
            unspoken("mysql_clear_password")
        }
        mysql_async::Error::Io(mysql_async::IoError::Io(io))
            if matches!(io.kind(), ConnectionRefused | NotFound | PermissionDenied) =>
        {
            transport::explain(ep, io)
        }
        other => format!("{ep}: {other}"),
    }
}

impl MysqlTarget {
    /// The options this target reads from its URL's query (`driver` is read by dispatch).
    pub const OPTIONS: &'static [&'static str] = &[
        "driver", "socket", "ssl-mode", "ssl-ca", "ssl-cert", "ssl-key",
    ];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<MysqlTarget, SetupError> {
        let opts = mysql_opts(url, plan.timeouts().connect)?;
        let sql = lookup_sql(plan)?;
        let simple = (plan.mode == Mode::Simple).then(|| {
            let (a, b) = sql.split_once('?').expect("checked");
            (a.to_string(), b.to_string())
        });
        Ok(MysqlTarget {
            plain: AtomicBool::new(false),
            tls: OnceLock::new(),
            endpoint: endpoint_of(&opts.opts),
            opts,
            sql,
            simple,
            verify: plan.verify,
            writes: writes::statements(plan)?,
            txn: plan.txn,
        })
    }
}

/// A lookup's first row, or the rows a write changed.
enum Answered {
    Row(Option<Row>),
    Written(u64),
}

type Answer = Result<Answered, mysql_async::Error>;

/// The connection lives inside the in-flight query future while a query runs, so a dropped
/// `recv` (the request loop's select) never abandons a half-read reply: the next `recv` polls
/// the same future on. mysql_async's own futures are not cancel-safe.
pub struct MysqlConn {
    conn: Option<mysql_async::Conn>,
    stmt: Statement,
    /// The prepared statement of each write op of the mix (`Op::index`).
    writes: [Option<Statement>; Op::COUNT],
    simple: Option<(String, String)>,
    verify: bool,
    /// `--txn`: writes per transaction, and the writes sent in the open one (0: none open).
    txn: usize,
    open: usize,
    /// A failure ended the open group: the next write rolls it back first (a BEGIN alone
    /// would commit it).
    rollback: bool,
    in_flight: Option<(
        Request,
        LocalBoxFuture<'static, (mysql_async::Conn, Answer)>,
    )>,
}

impl Target for MysqlTarget {
    type Conn = MysqlConn;

    fn kind(&self) -> &'static str {
        "mysql"
    }

    fn driver(&self) -> Option<&'static str> {
        Some("mysql_async")
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Nothing: the server greets first.
    fn hello(&self) -> Option<Hello> {
        Some(Hello::new(Kind::Mysql, Vec::new()))
    }

    async fn connect(&self) -> Result<MysqlConn, LookupError> {
        let fail = |e: mysql_async::Error| {
            LookupError::new(ErrorKind::Connect, true, self.opts.explain(&e))
        };
        let conn = match (&self.opts.plain, self.plain.load(Ordering::Relaxed)) {
            (Some(plain), true) => login(plain).await,
            (plain, _) => match (login(&self.opts.opts).await, plain) {
                // PREFERRED, and the server offers no TLS: plain from now on.
                (Err(e), Some(plain)) if no_tls_offered(&e) => {
                    self.plain.store(true, Ordering::Relaxed);
                    login(plain).await
                }
                (r, _) => r,
            },
        };
        let mut conn = conn.map_err(fail)?;
        if self.tls.get().is_none() && !self.plain.load(Ordering::Relaxed) {
            if let Some(tls) = &self.opts.tls {
                if let Some(info) = session_tls(&mut conn, tls).await.map_err(fail)? {
                    let _ = self.tls.set(info);
                }
            }
        }
        let stmt = conn.prep(&self.sql).await.map_err(fail)?;
        let mut writes: [Option<Statement>; Op::COUNT] = Default::default();
        for (op, sql) in &self.writes {
            let what = format!("--query-{}", op.name());
            let w = conn.prep(sql).await.map_err(|e| {
                LookupError::new(
                    ErrorKind::Connect,
                    true,
                    format!("{what}: {}", self.opts.explain(&e)),
                )
            })?;
            let want = writes::params(*op).len();
            if w.num_params() as usize != want {
                return Err(LookupError::new(
                    ErrorKind::Connect,
                    true,
                    format!(
                        "{what} has {} parameters; it must have {want}: {}",
                        w.num_params(),
                        writes::describe(*op)
                    ),
                ));
            }
            writes[op.index()] = Some(w);
        }
        Ok(MysqlConn {
            conn: Some(conn),
            stmt,
            writes,
            simple: self.simple.clone(),
            verify: self.verify,
            txn: self.txn,
            open: 0,
            rollback: false,
            in_flight: None,
        })
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.tls.get().cloned()
    }

    /// Every write op has its prepared statement (`writes`), BEGIN and COMMIT around each
    /// group (`MysqlConn::send`); mysql_async cannot pipeline.
    const CAPS: Caps = Caps {
        txn: true,
        writes: ALL_WRITES,
        ..Caps::READS
    };

    async fn insert_from(&self) -> Result<Option<u64>, SetupError> {
        self.opts.insert_from(&self.writes).await
    }

    async fn durability(&self) -> Vec<(String, String)> {
        self.opts.durability().await
    }

    /// --mode simple reads with text queries (Com_select); writes are always executes.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let simple = self.simple.is_some();
        self.opts.server_count(simple, &self.writes).await.map(Some)
    }
}

/// What the connection negotiated, as the server reports it (mysql_async does not show its
/// stream); None if it is plain.
async fn session_tls(
    conn: &mut mysql_async::Conn,
    tls: &TlsClient,
) -> Result<Option<TlsInfo>, mysql_async::Error> {
    let rows: Vec<(String, String)> = conn
        .query("SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')")
        .await?;
    let get = |name: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    Ok(match (get("Ssl_version"), get("Ssl_cipher")) {
        (Some(v), Some(c)) => Some(server_said(v, c, tls.verified)),
        _ => None,
    })
}

/// The `SHOW GLOBAL STATUS` names a count of a run whose writes are `writes` reads (see
/// `MyOpts::server_count`), `Uptime` last: the count's epoch (`uptime_epoch`), read with it.
pub fn count_names(simple: bool, writes: &[(Op, String)]) -> Vec<&str> {
    let reads = simple.then_some("Com_select");
    let mut names = match writes.is_empty() {
        true => vec![reads.unwrap_or("Com_stmt_execute")],
        false => writes::counter_names("Com_stmt_execute", reads, writes),
    };
    names.push("Uptime");
    names
}

/// The count from the `values` of `count_names(simple, writes)`.
pub fn count_of(
    simple: bool,
    writes: &[(Op, String)],
    names: &[&str],
    mut values: Vec<u64>,
) -> ServerCount {
    let uptime = values.pop().unwrap_or(0);
    let names = &names[..names.len() - 1];
    let mut count = match writes.is_empty() {
        true => ServerCount::reads(values[0], format!("global status {}", names[0])),
        false => writes::server_count(names, &values, simple.then_some("Com_select"), writes),
    };
    count.epoch = Some(uptime_epoch(uptime));
    count
}

/// The values of `names` among `SHOW GLOBAL STATUS` rows, in their order.
pub fn status_values(
    rows: &[(String, String)],
    names: &[&str],
    addr: &Endpoint,
) -> Result<Vec<u64>, SetupError> {
    names
        .iter()
        .map(|name| {
            rows.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.parse().ok())
                .ok_or_else(|| SetupError(format!("{addr}: no global status {name}")))
        })
        .collect()
}

/// A count's epoch from the server's `Uptime` (read with the count): its start time, now minus
/// the uptime (`ServerCount::started_epoch`), so a restart mid-run says not comparable even
/// when the new counter has passed the old one.
pub fn uptime_epoch(uptime: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    ServerCount::started_epoch(now.saturating_sub(uptime))
}

/// `SHOW GLOBAL STATUS` values of `names`, in their order, read at one moment over a fresh
/// connection (text protocol, so it does not move Com_stmt_execute or Handler_read_key itself).
pub async fn global_statuses(opts: &MyOpts, names: &[&str]) -> Result<Vec<u64>, SetupError> {
    let addr = endpoint_of(&opts.opts);
    let mut c = opts.conn().await?;
    let rows: Vec<(String, String)> = c
        .query(format!(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('{}')",
            names.join("', '")
        ))
        .await
        .map_err(|e| opts.explain(&e))?;
    let _ = c.disconnect().await;
    status_values(&rows, names, &addr)
}

impl Conn for MysqlConn {
    async fn commit(&mut self) -> Result<bool, LookupError> {
        let open = self.open > 0 && !self.rollback;
        let Some(conn) = self.conn.as_mut().filter(|_| open) else {
            return Ok(false);
        };
        self.open = 0;
        match conn.query_drop("COMMIT").await {
            Ok(()) => Ok(true),
            Err(mysql_async::Error::Server(s)) => Err(LookupError::new(
                super::error::kind(s.code),
                false,
                format!("{} (error {})", s.message, s.code),
            )),
            Err(e) => Err(LookupError::io(e.to_string())),
        }
    }

    fn send(&mut self, req: &Request) {
        let key = req.key;
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let stmt = match req.op.writes() {
            true => self.writes[req.op.index()].clone(),
            false => Some(self.stmt.clone()),
        };
        let Some(stmt) = stmt else {
            // Never: every write op of the mix is prepared on connect.
            self.conn = Some(conn);
            return;
        };
        let write = req.op.writes().then(|| write_params(req));
        let sql = self.simple.as_ref().map(|(a, b)| format!("{a}{key}{b}"));
        // --txn: mysql_async's Transaction borrows the connection for its life, which this
        // connection's in-flight future cannot hold across requests; BEGIN and COMMIT as
        // statements are the same transaction to the server.
        let grouped = self.txn > 1 && write.is_some();
        let rollback = grouped && std::mem::take(&mut self.rollback);
        let begin = grouped && self.open == 0;
        if grouped {
            self.open = (self.open + 1) % self.txn;
        }
        let commit = grouped && self.open == 0;
        let fut: LocalBoxFuture<'static, (mysql_async::Conn, Answer)> = Box::pin(async move {
            let r = match (write, sql) {
                (Some(params), _) => {
                    let mut r = match rollback {
                        true => conn.query_drop("ROLLBACK").await,
                        false => Ok(()),
                    };
                    if r.is_ok() && begin {
                        r = conn.query_drop("BEGIN").await;
                    }
                    if r.is_ok() {
                        r = conn.exec_drop(&stmt, params).await;
                    }
                    let n = conn.affected_rows();
                    if r.is_ok() && commit {
                        r = conn.query_drop("COMMIT").await;
                    }
                    if grouped && r.is_err() {
                        // The group is over, as on PostgreSQL (InnoDB rolled a deadlock's
                        // transaction back, other errors only the statement).
                        let _ = conn.query_drop("ROLLBACK").await;
                    }
                    r.map(|()| Answered::Written(n))
                }
                (None, Some(sql)) => conn.query_first(sql).await.map(Answered::Row),
                (None, None) => conn.exec_first(&stmt, (key,)).await.map(Answered::Row),
            };
            (conn, r)
        });
        self.in_flight = Some((*req, fut));
    }

    async fn recv(&mut self, _req: &Request) -> Result<Outcome, LookupError> {
        let Some((req, fut)) = self.in_flight.as_mut() else {
            return Err(LookupError::io(
                "no request in flight (the connection was lost)",
            ));
        };
        let req = *req;
        let (conn, r) = fut.await;
        self.in_flight = None;
        self.conn = Some(conn);
        if r.is_err() && self.open > 0 {
            // Any failure ends the open group, as on PostgreSQL (InnoDB rolled a deadlock's
            // transaction back, other errors only the statement): the next write rolls it back.
            (self.open, self.rollback) = (0, true);
        }
        match r {
            Ok(Answered::Row(row)) => {
                let cells = row.as_ref().map(cells);
                outcome(Reply::from_cells(cells), &req, self.verify)
            }
            Ok(Answered::Written(n)) => outcome(Reply::<NoCells>::Written(n), &req, self.verify),
            Err(mysql_async::Error::Server(s)) => Err(LookupError::new(
                super::error::kind(s.code),
                false,
                format!("{} (error {})", s.message, s.code),
            )),
            Err(e) => Err(LookupError::io(e.to_string())),
        }
    }
}

/// The parameters of a write, in the order of its statement's `?`s (`writes::params`).
fn write_params(req: &Request) -> Vec<Value> {
    let text = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = Vec::with_capacity(32);
        f(&mut v);
        Value::Bytes(v)
    };
    writes::params(req.op)
        .iter()
        .map(|p| match p {
            Param::Key => Value::UInt(req.key),
            Param::Name => text(&|o| dataset::write_name(o, req.key, req.version)),
            Param::Email => text(&|o| dataset::write_email(o, req.key)),
            Param::Created => text(&|o| dataset::write_created(o, req.key)),
        })
        .collect()
}

/// The cells of a row: text (the simple protocol, or strings in a binary row), dates, NULLs.
fn cells(row: &Row) -> impl Iterator<Item = Cell<'_>> {
    (0..row.len()).map(|i| match row.as_ref(i) {
        Some(Value::NULL) => Cell::Null,
        Some(Value::Bytes(b)) => Cell::Text(b),
        Some(&Value::Date(y, m, d, h, mi, s, us)) => time_cell(y, m, d, h, mi, s, us),
        _ => Cell::Other,
    })
}
