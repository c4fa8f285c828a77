//! PostgreSQL without a client library on the hot path (`?driver=wire`): the request loop owns
//! the socket (`StreamConn<PgCodec>`), so a lookup costs one memcpy to encode and an in-place
//! parse of the reply, with no connection task, channel hop or wakeup in between.
//! The handshake here (startup, trust/cleartext/MD5/SCRAM-SHA-256 auth, Parse + Describe of the
//! statement) uses postgres-protocol's encoders and parser; settings and error messages are the
//! tokio-postgres driver's (`tokio_driver`). Prepared mode only: `--mode simple` is refused.

use std::time::Duration;

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::backend::{Header, Message};
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::error::SqlState;
use tokio_postgres::fallible_iterator::FallibleIterator;
use tokio_postgres::types::Type;

use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError};
use crate::plan::{Mode, Plan};
use crate::proto::caps::{Caps, Counted, Sets, ALL_WRITES};
use crate::proto::codec::MAX_FRAME;
use crate::proto::pipelined::StreamConn;
use crate::proto::postgres::codec::multi_get::{element, sql, Form};
use crate::proto::postgres::codec::{KeyType, PgCodec, ServerError, STATEMENT};
use crate::proto::postgres::count::PgCounter;
use crate::proto::postgres::error::explain_db;
use crate::proto::postgres::tls::PgTls;
use crate::proto::postgres::tokio_driver::{lookup_sql, pg_config, PgTarget};
use crate::proto::postgres::writes;
use crate::proto::sniff::{not_the_protocol, Hello, Kind};
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::transport::{no_connection, Endpoint, Stream, TlsInfo, TlsMode};
use crate::url::TargetUrl;

/// No Debug: `config` holds the password.
pub struct PgWireTarget {
    endpoint: Endpoint,
    /// User, password and database as the tokio-postgres driver resolves them (URL, PG* env).
    config: tokio_postgres::Config,
    sql: String,
    verify: bool,
    timeout: Duration,
    label: String,
    counter: PgCounter,
    tls: PgTls,
    /// The statement of each write op of the mix, prepared on every connection.
    writes: Vec<(Op, String)>,
    /// Writes per transaction (`--txn`).
    txn: usize,
    /// Keys per request (`--batch`): the statement is `multi_get::SQL`.
    batch: bool,
    /// `mget:N` in the mix: its statement, prepared next to the lookup's.
    mget: Option<String>,
    /// How multi-gets bind their keys (`?multi=any`, the default, or `?multi=in`).
    form: Form,
}

/// The multi-get's statement next to the lookup's (`mget:N` in a mix).
const MGET_STATEMENT: &str = "lg_mget";

impl PgWireTarget {
    /// The options this target reads from its URL's query: the tokio driver's.
    pub const OPTIONS: &'static [&'static str] = PgTarget::OPTIONS;

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<PgWireTarget, SetupError> {
        if plan.mode == Mode::Simple {
            return Err(SetupError(
                "the wire driver only runs prepared lookups; use ?driver=tokio for --mode simple"
                    .into(),
            ));
        }
        let endpoint = super::endpoint(url)?;
        let tls = PgTls::new(url, &endpoint)?;
        let batch = plan.batch > 1;
        let form = match url.param("multi") {
            None | Some("any") => Form::Any,
            Some("in") => Form::In,
            Some(other) => {
                return Err(SetupError(format!(
                    "multi={other} in the URL: use multi=any (user_id = ANY($1), the default) or multi=in (IN ($1, ..., $N))"
                )))
            }
        };
        let mget = plan
            .mix
            .has(Op::Mget)
            .then(|| sql(form, plan.mix.mget_keys()));
        if (batch || mget.is_some()) && plan.query.is_some() {
            return Err(SetupError(
                "--batch and mget:N on PostgreSQL read the usr table by `user_id = ANY($1)`; leave --query out"
                    .into(),
            ));
        }
        Ok(PgWireTarget {
            config: pg_config(url, &endpoint, plan.timeouts().connect),
            endpoint,
            sql: match batch {
                true => sql(form, plan.batch),
                false => lookup_sql(plan)?,
            },
            verify: plan.verify,
            timeout: plan.timeouts().connect,
            label: url.redacted(),
            counter: PgCounter::new(false),
            tls,
            writes: writes::statements(plan)?,
            txn: plan.txn,
            batch,
            mget,
            form,
        })
    }

    /// One connection; `ask_tls` sends SSLRequest first (every mode but disable, and allow's
    /// second try).
    async fn open(&self, ask_tls: bool) -> Result<StreamConn<PgCodec>, LookupError> {
        let sock = crate::transport::connect(&self.endpoint, self.timeout).await?;
        let sock = self.tls.start(sock, ask_tls).await?;
        let mut s = Session {
            sock,
            rbuf: BytesMut::with_capacity(4096),
            wbuf: BytesMut::with_capacity(512),
        };
        let user = self.config.get_user().unwrap_or_default();
        let db = self.config.get_dbname().unwrap_or(user);
        let mut params = vec![
            ("user", user),
            ("database", db),
            ("application_name", "loadgen"),
            ("client_encoding", "UTF8"),
        ];
        // libpq's `options`: server settings for the session, e.g. `-c synchronous_commit=off`.
        if let Some(o) = self.config.get_options() {
            params.push(("options", o));
        }
        frontend::startup_message(params, &mut s.wbuf)
            .map_err(|e| fail(format!("bad user or database name: {e}")))?;
        s.send().await?;
        self.authenticate(&mut s, user).await?;
        // ParameterStatus and BackendKeyData (skipped by recv), then ReadyForQuery.
        while !matches!(s.recv().await?, Message::ReadyForQuery(_)) {}

        frontend::parse(STATEMENT, &self.sql, [], &mut s.wbuf)
            .map_err(|e| fail(format!("bad --query: {e}")))?;
        frontend::describe(b'S', STATEMENT, &mut s.wbuf).expect("no NUL in the name");
        for (op, sql) in &self.writes {
            frontend::parse(writes::statement(*op), sql, [], &mut s.wbuf)
                .map_err(|e| fail(format!("bad --query-{}: {e}", op.name())))?;
        }
        if let Some(sql) = &self.mget {
            frontend::parse(MGET_STATEMENT, sql, [], &mut s.wbuf).map_err(protocol)?;
            frontend::describe(b'S', MGET_STATEMENT, &mut s.wbuf).expect("no NUL in the name");
        }
        frontend::sync(&mut s.wbuf);
        s.send().await?;
        let mut key_type = Err(fail("the server did not describe the statement"));
        // The lookup's columns, then the multi-get's when it has a statement of its own.
        let mut columns = Vec::new();
        let mut mget_columns = Vec::new();
        let mut described = 0;
        loop {
            match s.recv().await? {
                Message::ParameterDescription(body) => {
                    let types: Vec<u32> = body.parameters().collect().map_err(protocol)?;
                    let multi = self.batch || described > 0;
                    let typed = match multi {
                        true => multi_key_type(self.form, &types),
                        false => key_type_of(&types),
                    };
                    match described {
                        0 => key_type = typed,
                        _ => {
                            typed?;
                        }
                    }
                }
                // The result columns' types: how the codec reads a row's cells.
                Message::RowDescription(body) => {
                    let oids = body
                        .fields()
                        .map(|f| Ok(f.type_oid()))
                        .collect()
                        .map_err(protocol)?;
                    match described {
                        0 => columns = oids,
                        _ => mget_columns = oids,
                    }
                    described += 1;
                }
                Message::ReadyForQuery(_) => break,
                // ParseComplete, or NoData (a --query that returns no rows)
                Message::NoData => described += 1,
                _ => {}
            }
        }
        let mut codec = PgCodec::new(key_type?, &columns).with_txn(self.txn);
        if self.batch {
            codec = codec.with_multi_get((STATEMENT, &columns, self.form));
        }
        if self.mget.is_some() {
            codec = codec.with_multi_get((MGET_STATEMENT, &mget_columns, self.form));
        }
        Ok(StreamConn::new(s.sock, codec, self.verify))
    }

    async fn authenticate(&self, s: &mut Session, user: &str) -> Result<(), LookupError> {
        let password = || {
            self.config.get_password().ok_or_else(|| {
                fail(format!("the server asks for a password for user \"{user}\": set it in the URL or PGPASSWORD"))
            })
        };
        loop {
            match s.recv().await? {
                Message::AuthenticationOk => return Ok(()),
                Message::AuthenticationCleartextPassword => {
                    frontend::password_message(password()?, &mut s.wbuf).map_err(protocol)?;
                }
                Message::AuthenticationMd5Password(body) => {
                    let hash = md5_hash(user.as_bytes(), password()?, body.salt());
                    frontend::password_message(hash.as_bytes(), &mut s.wbuf).map_err(protocol)?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut offered = body.mechanisms();
                    if !offered.any(|m| Ok(m == SCRAM_SHA_256)).map_err(protocol)? {
                        return Err(fail("the server offers no SASL mechanism loadgen supports (SCRAM-SHA-256 without channel binding)"));
                    }
                    scram(s, password()?).await?;
                    continue; // the server's next message is AuthenticationOk or an error
                }
                _ => {
                    return Err(fail(
                        "the server asks for an authentication method loadgen does not support (trust, password, md5 and scram-sha-256 are)",
                    ))
                }
            }
            s.send().await?;
        }
    }
}

/// SCRAM-SHA-256 (RFC 5802/7677) without channel binding: there is no TLS to bind to yet.
async fn scram(s: &mut Session, password: &[u8]) -> Result<(), LookupError> {
    let mut scram = ScramSha256::new(password, ChannelBinding::unsupported());
    frontend::sasl_initial_response(SCRAM_SHA_256, scram.message(), &mut s.wbuf)
        .map_err(protocol)?;
    s.send().await?;
    let Message::AuthenticationSaslContinue(body) = s.recv().await? else {
        return Err(fail("unexpected reply in the SCRAM exchange"));
    };
    scram.update(body.data()).map_err(protocol)?;
    frontend::sasl_response(scram.message(), &mut s.wbuf).map_err(protocol)?;
    s.send().await?;
    // A wrong password is an ErrorResponse here (28P01), turned into a message by recv.
    let Message::AuthenticationSaslFinal(body) = s.recv().await? else {
        return Err(fail("unexpected reply in the SCRAM exchange"));
    };
    scram
        .finish(body.data())
        .map_err(|e| fail(format!("the server failed SCRAM verification: {e}")))
}

/// The key's encoding from the statement's parameter types; errors say what to change.
/// The key type of a multi-get's parameters: an integer array's elements (`= ANY($1)`), or
/// N integers of one type (`IN ($1, ..., $N)`).
fn multi_key_type(form: Form, types: &[u32]) -> Result<KeyType, LookupError> {
    let int = match (form, types) {
        (Form::Any, [oid]) => element(*oid),
        (Form::In, [first, ..]) if types.iter().all(|t| t == first) => Some(*first),
        _ => None,
    };
    int.filter(|oid| matches!(oid, 20 | 21 | 23))
        .and_then(KeyType::from_oid)
        .ok_or_else(|| {
            fail("--batch, mget:N: user_id must be an integer column (smallint, integer, bigint)")
        })
}

fn key_type_of(types: &[u32]) -> Result<KeyType, LookupError> {
    match types {
        [] => Err(fail("--query has no parameter $1")),
        [oid] => KeyType::from_oid(*oid).ok_or_else(|| {
            let name = Type::from_oid(*oid).map_or_else(|| format!("oid {oid}"), |t| t.to_string());
            fail(format!(
                "the key parameter $1 has type {name}; use an integer or text key column"
            ))
        }),
        more => Err(fail(format!(
            "--query has {} parameters; it must have exactly one, $1",
            more.len()
        ))),
    }
}

/// The socket during the handshake, before it becomes a `StreamConn`.
struct Session {
    sock: Stream,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

impl Session {
    async fn send(&mut self) -> Result<(), LookupError> {
        self.sock
            .write_all(&self.wbuf)
            .await
            .map_err(|e| fail(format!("cannot send the startup: {e}")))?;
        // TLS may hold records back until flushed (plain: a no-op).
        self.sock
            .flush()
            .await
            .map_err(|e| fail(format!("cannot send the startup: {e}")))?;
        self.wbuf.clear();
        Ok(())
    }

    /// The next message that matters: notices and parameter statuses are skipped, and an
    /// ErrorResponse becomes the same one-line message the tokio-postgres driver gives.
    async fn recv(&mut self) -> Result<Message, LookupError> {
        loop {
            // Bound the length first: Message::parse would wait for a 2 GB "message" from a
            // server that is not PostgreSQL.
            if let Ok(Some(h)) = Header::parse(&self.rbuf) {
                if h.len() as usize > MAX_FRAME {
                    return Err(fail(not_the_protocol(Kind::Postgres, &self.rbuf)));
                }
                if h.tag() == b'E' && self.rbuf.len() > h.len() as usize {
                    let e = ServerError::parse(&self.rbuf[5..h.len() as usize + 1]);
                    let code = SqlState::from_code(&e.code);
                    return Err(fail(explain_db(&code, &e.message, "lookup")));
                }
            }
            match Message::parse(&mut self.rbuf).map_err(protocol)? {
                Some(Message::NoticeResponse(_))
                | Some(Message::ParameterStatus(_))
                | Some(Message::BackendKeyData(_))
                | Some(Message::NotificationResponse(_)) => continue,
                Some(m) => return Ok(m),
                None => {}
            }
            let n = self.sock.read_buf(&mut self.rbuf).await.map_err(|e| {
                fail(
                    crate::transport::alert_line(&e, "the server")
                        .unwrap_or_else(|| format!("connection lost during startup: {e}")),
                )
            })?;
            if n == 0 {
                return Err(fail("the server closed the connection during startup"));
            }
        }
    }
}

fn fail(msg: impl Into<String>) -> LookupError {
    LookupError::new(ErrorKind::Connect, true, msg)
}

fn protocol(e: std::io::Error) -> LookupError {
    fail(format!("bad PostgreSQL reply during startup: {e}"))
}

impl Target for PgWireTarget {
    type Conn = StreamConn<PgCodec>;

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn driver(&self) -> Option<&'static str> {
        Some("wire")
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn hello(&self) -> Option<Hello> {
        Some(super::hello(&self.config))
    }

    async fn connect(&self) -> Result<StreamConn<PgCodec>, LookupError> {
        // The whole handshake gets --timeout, as the pool's create timeout does for tokio.
        let open = async {
            match self.open(self.tls.mode.asks_first()).await {
                // libpq's allow: plain first, TLS when the plain connection is refused.
                Err(_) if self.tls.mode == TlsMode::Allow => self.open(true).await,
                r => r,
            }
        };
        tokio::time::timeout(self.timeout, open)
            .await
            .unwrap_or_else(|_| Err(no_connection(&self.endpoint)))
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.tls.negotiated()
    }

    /// Lookups pipeline freely (one Sync per batch written, see `codec`); every write op has
    /// its prepared statement (`writes`), grouped in the extended protocol's implicit
    /// transaction; a multi-get is `user_id = ANY($1)` (`multi_get.rs`), one index scan.
    const CAPS: Caps = Caps {
        multi_get: Some(Counted::Requests),
        pipeline: usize::MAX,
        txn: true,
        writes: ALL_WRITES,
        sets: Sets::Shards,
        ..Caps::READS
    };

    async fn insert_from(&self) -> Result<Option<u64>, SetupError> {
        writes::insert_from(&self.config, &self.tls, &self.writes).await
    }

    async fn durability(&self) -> Vec<(String, String)> {
        writes::durability(&self.config, &self.tls).await
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let (config, tls) = (&self.config, &self.tls);
        // The multi-get's statement is counted as a write's is: by its own calls.
        let mut counted = self.writes.clone();
        if let Some(sql) = &self.mget {
            counted.push((Op::Mget, sql.clone()));
        }
        writes::server_count(&self.counter, config, tls, &self.sql, &self.label, &counted).await
    }
}

#[cfg(test)]
mod tests {
    //! The auth methods the local server does not use (trust, cleartext, MD5), against a fake
    //! server that checks what the client sends. SCRAM runs against the real one in tests/pgwire.rs.
    use super::*;
    use crate::outcome::Outcome;
    use crate::proto::target::Conn;
    use tokio::net::{TcpListener, TcpStream};

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    fn auth(code: i32, extra: &[u8]) -> Vec<u8> {
        msg(b'R', &[&code.to_be_bytes()[..], extra].concat())
    }

    async fn read_msg(sock: &mut TcpStream) -> (u8, Vec<u8>) {
        let tag = sock.read_u8().await.unwrap();
        let len = sock.read_i32().await.unwrap() as usize;
        let mut body = vec![0; len - 4];
        sock.read_exact(&mut body).await.unwrap();
        (tag, body)
    }

    /// A server that answers the startup with `challenge`, expects `password` (None: no
    /// password message), then prepares an int4 statement and answers one lookup with a row.
    async fn fake_server(challenge: Vec<u8>, password: Option<Vec<u8>>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut len = sock.read_i32().await.unwrap() as usize;
            // SSLRequest (every sslmode but disable): this server has no TLS.
            if len == 8 {
                assert_eq!(sock.read_i32().await.unwrap(), 80877103);
                sock.write_all(b"N").await.unwrap();
                let Ok(n) = sock.read_i32().await else {
                    return; // the client wanted TLS and left
                };
                len = n as usize;
            }
            let mut startup = vec![0; len - 4];
            sock.read_exact(&mut startup).await.unwrap();
            assert!(startup.windows(8).any(|w| w == b"user\0bob"));
            sock.write_all(&challenge).await.unwrap();
            if let Some(want) = password {
                let (tag, body) = read_msg(&mut sock).await;
                assert_eq!((tag, body), (b'p', [&want[..], b"\0"].concat()));
            }
            let mut out = auth(0, b"");
            out.extend(msg(b'S', b"server_version\x0016\0"));
            out.extend(msg(b'K', &[0; 8]));
            out.extend(msg(b'Z', b"I"));
            sock.write_all(&out).await.unwrap();
            for want in [b'P', b'D', b'S'] {
                assert_eq!(read_msg(&mut sock).await.0, want);
            }
            let mut out = msg(b'1', b"");
            out.extend(msg(b't', &[0, 1, 0, 0, 0, 23])); // one parameter: int4
            out.extend(msg(b'n', b""));
            out.extend(msg(b'Z', b"I"));
            sock.write_all(&out).await.unwrap();
            for want in [b'B', b'E', b'S'] {
                assert_eq!(read_msg(&mut sock).await.0, want);
            }
            let mut out = msg(b'2', b"");
            out.extend(msg(b'D', &[0, 1, 0, 0, 0, 1, b'x']));
            out.extend(msg(b'C', b"SELECT 1\0"));
            out.extend(msg(b'Z', b"I"));
            sock.write_all(&out).await.unwrap();
        });
        format!("postgres://bob:pw@{addr}/db")
    }

    async fn one_lookup(url: &str) -> Result<Outcome, LookupError> {
        let t = PgWireTarget::new(&TargetUrl::parse(url).unwrap(), &Plan::default()).unwrap();
        let mut conn = t.connect().await?;
        conn.send(&crate::proto::codec::Request::read(1));
        conn.recv(&crate::proto::codec::Request::read(1)).await
    }

    #[tokio::test]
    async fn a_server_without_tls_is_plain_under_prefer_and_refused_under_require() {
        let url = fake_server(auth(0, b""), None).await;
        assert_eq!(one_lookup(&url).await.unwrap(), Outcome::Hit);
        let url = fake_server(auth(0, b""), None).await;
        let e = one_lookup(&format!("{url}?sslmode=require"))
            .await
            .unwrap_err();
        assert!(
            e.message
                .contains("does not accept TLS, and sslmode=require requires it"),
            "{}",
            e.message
        );
        let url = fake_server(auth(0, b""), None).await;
        assert_eq!(
            one_lookup(&format!("{url}?sslmode=disable")).await.unwrap(),
            Outcome::Hit
        );
    }

    #[tokio::test]
    async fn trust_cleartext_and_md5() {
        let url = fake_server(auth(0, b""), None).await;
        assert_eq!(one_lookup(&url).await.unwrap(), Outcome::Hit);
        let url = fake_server(auth(3, b""), Some(b"pw".to_vec())).await;
        assert_eq!(one_lookup(&url).await.unwrap(), Outcome::Hit);
        let salt = [1, 2, 3, 4];
        let want = md5_hash(b"bob", b"pw", salt).into_bytes();
        let url = fake_server(auth(5, &salt), Some(want)).await;
        assert_eq!(one_lookup(&url).await.unwrap(), Outcome::Hit);
    }

    #[tokio::test]
    async fn unsupported_auth_and_non_postgres_servers_fail_cleanly() {
        let url = fake_server(auth(7, b""), None).await; // GSSAPI
        let e = one_lookup(&url).await.unwrap_err();
        assert!(e.message.contains("does not support"), "{}", e.message);
        let url = fake_server(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), None).await;
        let e = one_lookup(&url).await.unwrap_err();
        assert!(e.message.contains("not PostgreSQL"), "{}", e.message);
        assert!(!e.message.contains("pw"));
    }
}
