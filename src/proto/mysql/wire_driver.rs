//! MySQL / MariaDB without a client library on the hot path (`?driver=wire`, the default): the
//! request loop owns the socket (`StreamConn<MyCodec>`), so a lookup is a 26-byte
//! COM_STMT_EXECUTE copied into the write buffer and a binary result set parsed in place, with
//! no connection task, boxed future or row allocation in between (the measured cost against
//! mysql_async is in docs/benchmarks.md).
//! The handshake here: Handshake v10, HandshakeResponse41 with the database,
//! mysql_native_password (also after an AuthSwitchRequest; for a user of another plugin,
//! dispatch hands the run to mysql_async: `unspoken_plugin`), then COM_STMT_PREPARE of the lookup. TCP, or the Unix
//! socket that `?socket=` names. Prepared mode only: `--mode simple` goes to mysql_async.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::plan::{Mode, Plan};
use crate::proto::caps::{Caps, Counted, Sets, ALL_WRITES};
use crate::proto::mysql::async_driver::{
    count_names, count_of, explain_server, lookup_sql, mysql_opts, status_values, MyOpts,
};
use crate::proto::mysql::codec::{
    column_type, MyCodec, Packets, ServerError, Shape, CLIENT_SSL, COM_STMT_PREPARE,
};
use crate::proto::mysql::handshake::{
    auth_step, client_capabilities, handshake_response, native_password, parse_greeting,
    parse_prepare_ok, ssl_request, AuthStep, Prepared,
};
use crate::proto::mysql::plugins::{not_wire, NATIVE_PASSWORD};
use crate::proto::mysql::ssl::ask_tls;
use crate::proto::mysql::writes;
use crate::proto::pipelined::StreamConn;
use crate::proto::sniff::{not_the_protocol, Hello, Kind};
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::timeouts::Timeouts;
use crate::transport::{no_connection, Endpoint, Stream, TlsClient, TlsInfo};
use crate::url::TargetUrl;

/// No Debug: `password` is the password.
pub struct MyWireTarget {
    endpoint: Endpoint,
    user: String,
    password: Option<String>,
    db: Option<String>,
    sql: String,
    verify: bool,
    timeouts: Timeouts,
    cache_metadata: bool,
    /// For the server-side count only (a separate mysql_async connection, off the hot path);
    /// its `tls` is this driver's TLS too (None: plain).
    opts: MyOpts,
    /// The statement of each write op of the mix, prepared on every connection.
    writes: Vec<(Op, String)>,
    /// `--txn`: writes per transaction.
    txn: usize,
    /// `--batch`: keys per request, each a placeholder of `sql` (`multi_get.rs`).
    batch: usize,
    /// `mget:N` in the mix: N, its multi-get prepared as a statement of its own (0: none).
    mget: usize,
    /// One-key reads in the mix, next to `mget:N`: Com_stmt_execute cannot tell them apart.
    reads: bool,
}

impl MyWireTarget {
    /// The options this target reads from its URL's query (`driver` is read by dispatch).
    pub const OPTIONS: &'static [&'static str] = &[
        "driver",
        "cache_metadata",
        "socket",
        "ssl-mode",
        "ssl-ca",
        "ssl-cert",
        "ssl-key",
    ];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<MyWireTarget, SetupError> {
        if plan.mode == Mode::Simple {
            return Err(SetupError(
                "the wire driver only runs prepared lookups; use ?driver=mysql_async for --mode simple"
                    .into(),
            ));
        }
        // User, password and database exactly as the mysql_async driver resolves them
        // (URL, then $USER / MYSQL_PWD).
        let opts = mysql_opts(url, plan.timeouts().connect)?;
        if plan.multi_get() > 0 && plan.query.is_some() {
            return Err(SetupError(
                "--batch and mget:N on MariaDB read the usr table by `user_id IN (?, ..., ?)`; leave --query out"
                    .into(),
            ));
        }
        Ok(MyWireTarget {
            endpoint: super::endpoint(url)?,
            user: opts.opts.user().unwrap_or_default().to_string(),
            password: opts.opts.pass().map(str::to_string),
            db: opts.opts.db_name().map(str::to_string),
            sql: match plan.batch {
                n if n > 1 => super::multi_get::sql(n),
                _ => lookup_sql(plan)?,
            },
            verify: plan.verify,
            timeouts: plan.timeouts(),
            cache_metadata: match url.param("cache_metadata") {
                None | Some("1") => true,
                Some("0") => false,
                Some(other) => {
                    return Err(SetupError(format!(
                        "cache_metadata={other} in the URL: use 1 (MariaDB sends column definitions once, the default) or 0 (with every reply)"
                    )))
                }
            },
            opts,
            writes: writes::statements(plan)?,
            txn: plan.txn,
            batch: plan.batch.max(1),
            mget: plan.mix.mget_keys(),
            reads: plan.mix.has(Op::Read),
        })
    }

    /// Connect, greeting, login: a session ready for commands (its capabilities), or the
    /// name of the user's auth plugin when the wire driver does not speak it.
    async fn login(&self) -> Result<Login, LookupError> {
        let sock = crate::transport::connect(&self.endpoint, self.timeouts.connect).await?;
        let mut s = Session {
            sock,
            rbuf: Vec::with_capacity(4096),
            seq: 0,
            plain: true,
        };
        // A MySQL server speaks first; a port that stays silent (HandlerSocket, PostgreSQL)
        // is another server, not a slow one.
        let hello = tokio::time::timeout(self.timeouts.connect, s.recv())
            .await
            .map_err(|_| {
                fail(format!(
                    "{} accepted the connection but sent no MySQL greeting within --timeout: is this a MySQL/MariaDB port?",
                    self.endpoint
                ))
            })??;
        let greeting = parse_greeting(&hello).map_err(fail)?;
        let mut caps = client_capabilities(
            greeting.capabilities,
            self.db.is_some(),
            self.cache_metadata,
        )
        .map_err(fail)?;
        if let (Some(tls), Endpoint::Tcp { host, .. }) = (&self.opts.tls, &self.endpoint) {
            if ask_tls(tls.mode, greeting.capabilities & CLIENT_SSL != 0).map_err(fail)? {
                // SSLRequest, the TLS handshake, then the rest of the login over TLS.
                s.send(&ssl_request(caps)).await?;
                caps |= CLIENT_SSL;
                let Session {
                    sock, rbuf, seq, ..
                } = s;
                let sock = tls.upgrade(sock, host).await?;
                s = Session {
                    sock,
                    rbuf,
                    seq,
                    plain: false,
                };
            }
        }
        let password = self.password.as_deref().unwrap_or_default().as_bytes();
        // Always mysql_native_password, whatever the server's default plugin: a user of
        // another plugin makes the server ask for it (`auth_step`).
        let auth = native_password(password, &greeting.scramble);
        let response =
            handshake_response(caps, &self.user, &auth, self.db.as_deref(), NATIVE_PASSWORD)
                .map_err(fail)?;
        s.send(&response).await?;
        let mut switched = false;
        loop {
            let p = s.recv().await?;
            match auth_step(&p, password, switched, &greeting.plugin).map_err(fail)? {
                AuthStep::Done => return Ok(Login::Ready(s, caps)),
                AuthStep::Answer(bytes) => {
                    switched = true;
                    s.send(&bytes).await?;
                }
                AuthStep::Unspoken(plugin) => return Ok(Login::Unspoken(plugin)),
            }
        }
    }

    /// The auth plugin the server asks this user for, when the wire driver does not speak
    /// it: one login before the run, so dispatch can hand the run to mysql_async. A login
    /// that fails is the run's setup error, as the preflight connection's would be.
    pub async fn unspoken_plugin(&self) -> Result<Option<String>, LookupError> {
        match tokio::time::timeout(self.timeouts.setup, self.login()).await {
            Ok(Ok(Login::Unspoken(plugin))) => Ok(Some(plugin)),
            Ok(Ok(Login::Ready(..))) => Ok(None),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(no_connection(&self.endpoint)),
        }
    }

    async fn open(&self) -> Result<StreamConn<MyCodec>, LookupError> {
        let (mut s, caps) = match self.login().await? {
            Login::Ready(s, caps) => (s, caps),
            Login::Unspoken(plugin) => return Err(fail(not_wire(&plugin))),
        };
        let shape = Shape::of(caps);
        let (p, types) = s.prepare(&self.sql, shape).await?;
        if self.batch > 1 && p.params as usize != self.batch {
            return Err(fail(format!(
                "the multi-get has {} parameters, not the {} keys of --batch",
                p.params, self.batch
            )));
        }
        if self.batch == 1 && p.params != 1 {
            return Err(fail(format!(
                "--query has {} parameters; it must have exactly one ? for the key",
                p.params
            )));
        }
        let mut ids = Vec::with_capacity(self.writes.len());
        for (op, sql) in &self.writes {
            let what = format!("--query-{}", op.name());
            let (w, _) = s
                .prepare(sql, shape)
                .await
                .map_err(|e| fail(format!("{what}: {}", e.message)))?;
            let want = writes::params(*op).len();
            if w.params as usize != want {
                return Err(fail(format!(
                    "{what} has {} parameters; it must have {want}: {}",
                    w.params,
                    writes::describe(*op)
                )));
            }
            ids.push((*op, w.statement_id));
        }
        let mut codec = MyCodec::new(p.statement_id, shape, &types);
        if self.mget > 0 {
            let sql = super::multi_get::sql(self.mget);
            let (m, types) = s.prepare(&sql, shape).await?;
            codec = codec.with_multi_get(m.statement_id, &types);
        }
        if !s.rbuf.is_empty() {
            return Err(fail("unexpected bytes from the server after the prepare"));
        }
        Ok(StreamConn::new(
            s.sock,
            codec.with_writes(&ids).with_txn(self.txn),
            self.verify,
        ))
    }
}

enum Login {
    Ready(Session, u64),
    Unspoken(String),
}

/// The socket during the handshake, before it becomes a `StreamConn`.
struct Session {
    sock: Stream,
    rbuf: Vec<u8>,
    /// The sequence id of the next packet, either way.
    seq: u8,
    /// Not (yet) TLS.
    plain: bool,
}

impl Session {
    /// `SHOW GLOBAL STATUS` of `names` (text protocol: it moves no Com_stmt_execute), as
    /// (name, value) rows.
    async fn global_status(
        &mut self,
        names: &[&str],
        shape: Shape,
    ) -> Result<Vec<(String, String)>, LookupError> {
        self.seq = 0;
        let sql = format!(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('{}')",
            names.join("', '")
        );
        self.send(&[&[COM_QUERY][..], sql.as_bytes()].concat())
            .await?;
        let columns = self.recv().await?;
        for _ in 0..columns.first().copied().unwrap_or(0) {
            self.recv().await?;
        }
        if !shape.deprecate_eof {
            self.recv().await?;
        }
        let mut rows = Vec::new();
        loop {
            let p = self.recv().await?;
            // EOF, or the OK that replaces it (0xFE, shorter than a row could be).
            if p.first() == Some(&0xFE) && p.len() < 9 {
                return Ok(rows);
            }
            let (name, rest) = lenenc_str(&p).ok_or_else(|| fail("bad SHOW GLOBAL STATUS row"))?;
            let (value, _) = lenenc_str(rest).ok_or_else(|| fail("bad SHOW GLOBAL STATUS row"))?;
            rows.push((name, value));
        }
    }

    /// COM_STMT_PREPARE of `sql`: the statement, and the type byte of each result column
    /// (how the codec reads a row's cells).
    async fn prepare(
        &mut self,
        sql: &str,
        shape: Shape,
    ) -> Result<(Prepared, Vec<u8>), LookupError> {
        self.seq = 0;
        let mut prepare = vec![COM_STMT_PREPARE];
        prepare.extend_from_slice(sql.as_bytes());
        self.send(&prepare).await?;
        let reply = self.recv().await?;
        let p = parse_prepare_ok(&reply)
            .ok_or_else(|| fail("bad COM_STMT_PREPARE reply from the server"))?;
        let mut types = Vec::new();
        for (defs, columns) in [(p.params, false), (p.columns, true)] {
            if defs > 0 {
                for _ in 0..defs {
                    let def = self.recv().await?;
                    if columns {
                        types.push(column_type(&def).ok_or_else(|| {
                            fail("bad column definition in the COM_STMT_PREPARE reply")
                        })?);
                    }
                }
                if !shape.deprecate_eof {
                    self.recv().await?;
                }
            }
        }
        Ok((p, types))
    }

    async fn send(&mut self, payload: &[u8]) -> Result<(), LookupError> {
        let mut packet = (payload.len() as u32).to_le_bytes();
        packet[3] = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let mut out = packet.to_vec();
        out.extend_from_slice(payload);
        self.sock
            .write_all(&out)
            .await
            .map_err(|e| fail(format!("cannot send the handshake: {e}")))
    }

    /// The next packet's payload; an ERR packet becomes the same one-line message the
    /// mysql_async driver gives.
    async fn recv(&mut self) -> Result<Vec<u8>, LookupError> {
        loop {
            // The codec's packet reader: bounded before the payload arrives (a server that is
            // not MySQL would have us wait for 16 MB), sequence ids checked.
            let mut packets = Packets {
                buf: &self.rbuf,
                pos: 0,
                seq: self.seq,
            };
            let next = packets
                .next_packet()
                .map_err(|_| fail(not_the_protocol(Kind::Mysql, &self.rbuf)))?;
            if let Some(payload) = next {
                let payload = payload.to_vec();
                let (taken, seq) = (packets.pos, packets.seq);
                self.rbuf.drain(..taken);
                self.seq = seq;
                if let Some(e) = ServerError::parse(&payload) {
                    return Err(fail(explain_server(e.code, &e.message, self.plain)));
                }
                return Ok(payload);
            }
            let n = self
                .sock
                .read_buf(&mut self.rbuf)
                .await
                .map_err(|e| fail(format!("connection lost during the handshake: {e}")))?;
            if n == 0 {
                return Err(fail(
                    "the server closed the connection during the handshake",
                ));
            }
        }
    }
}

/// A length-encoded string shorter than 251 bytes (a status name or value) and the rest.
fn lenenc_str(p: &[u8]) -> Option<(String, &[u8])> {
    let (&n, rest) = p.split_first()?;
    let n = usize::from(n).min(250);
    let s = rest.get(..n)?;
    Some((String::from_utf8_lossy(s).into_owned(), &rest[n..]))
}

/// COM_QUERY: a statement in the text protocol.
const COM_QUERY: u8 = 0x03;

fn fail(msg: impl Into<String>) -> LookupError {
    LookupError::new(ErrorKind::Connect, true, msg)
}

impl Target for MyWireTarget {
    type Conn = StreamConn<MyCodec>;

    fn kind(&self) -> &'static str {
        "mysql"
    }

    fn driver(&self) -> Option<&'static str> {
        Some("wire")
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Nothing: the server greets first.
    fn hello(&self) -> Option<Hello> {
        Some(Hello::new(Kind::Mysql, Vec::new()))
    }

    async fn connect(&self) -> Result<StreamConn<MyCodec>, LookupError> {
        // TCP connect and the greeting get --timeout each, so the message says which one hung;
        // the whole handshake is bounded too (`Timeouts::setup` outlasts the steps).
        tokio::time::timeout(self.timeouts.setup, self.open())
            .await
            .unwrap_or_else(|_| Err(no_connection(&self.endpoint)))
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.opts.tls.as_ref().and_then(TlsClient::negotiated)
    }

    /// The server reads commands off the socket in order and answers each in turn, so
    /// executes pipeline (checked with --verify over every key at -p 32: tests/mysql_hs.rs).
    /// Every write op has its prepared statement (`writes`), BEGIN and COMMIT pipelined with
    /// them (`txn`); a multi-get is `user_id IN (?, ..., ?)` (`multi_get.rs`), one execute.
    const CAPS: Caps = Caps {
        multi_get: Some(Counted::Requests),
        pipeline: usize::MAX,
        txn: true,
        writes: ALL_WRITES,
        sets: Sets::Shards,
        ..Caps::READS
    };

    async fn insert_from(&self) -> Result<Option<u64>, SetupError> {
        self.opts.insert_from(&self.writes).await
    }

    async fn durability(&self) -> Vec<(String, String)> {
        self.opts.durability().await
    }

    /// Over a session of this driver, with its TLS decisions (VERIFY_CA checks the chain and
    /// not the host name: mysql_async's skip_domain_validation no longer matches rustls's
    /// error); mysql_async only for a user whose auth plugin this driver does not speak.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let names = count_names(false, &self.writes);
        let rows = match self.login().await.map_err(|e| e.message)? {
            Login::Ready(mut s, caps) => s
                .global_status(&names, Shape::of(caps))
                .await
                .map_err(|e| e.message)?,
            Login::Unspoken(_) => {
                return self.opts.server_count(false, &self.writes).await.map(Some)
            }
        };
        let values = status_values(&rows, &names, &self.endpoint)?;
        let mut count = count_of(false, &self.writes, &names, values);
        // Reads are the executes that are not writes: one-key reads and multi-gets together.
        if let (true, Some(&read)) = (self.mget > 0, count.ops.get(Op::Read.index())) {
            let (r, m) = match self.reads {
                true => (ServerCount::UNCOUNTED, ServerCount::UNCOUNTED),
                false => (ServerCount::UNCOUNTED, read),
            };
            (count.ops[Op::Read.index()], count.ops[Op::Mget.index()]) = (r, m);
        }
        Ok(Some(count))
    }
}
