//! What a connection sends before its first `GET`: `AUTH` (password, or ACL user and password)
//! and `SELECT db`, read from `redis://[user:pass@]host:port[/db]` or
//! `redis+unix:///path?db=N&user=U&pass=P`. It never sends a `GET`, so the server's
//! `cmdstat_get` counts the run's lookups only.

use std::time::Duration;

use crate::key_format::{KeyFormat, KEY_FORMAT};
use crate::outcome::{ErrorKind, LookupError};
use crate::proto::codec::Codec;
use crate::proto::pipelined::StreamConn;
use crate::proto::redis::codec::{encode_command, parse_reply, shown, RedisCodec, Resp};
use crate::proto::target::SetupError;
use crate::transport::{Endpoint, TlsClient};
use crate::url::TargetUrl;

/// The credentials and database of a URL. No `Debug`: it holds the password.
#[derive(Clone)]
pub struct Login {
    pub endpoint: Endpoint,
    /// The endpoint as messages name it.
    pub addr: String,
    /// Where the URL puts the database (the path, or `db=` in the socket form), for messages.
    db_in: &'static str,
    user: Option<String>,
    password: Option<String>,
    pub db: u32,
    /// Bound on each handshake step: a port that is not Redis may never answer.
    step: Duration,
    /// `rediss://`: TLS from the first byte.
    pub tls: Option<TlsClient>,
    /// How keys name ids (`usr:%d`; the URL's `?key-format=`, or `--key-format`).
    pub keys: KeyFormat,
}

/// A reply, owned, for the handshake and the stats readers (not the hot path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Null,
}

impl Login {
    pub fn new(url: &TargetUrl, step: Duration) -> Result<Login, SetupError> {
        let endpoint = super::endpoint(url)?;
        let socket = super::is_socket_url(url);
        let bad_db = || {
            SetupError(format!(
                "bad Redis target {}: {}",
                url.redacted(),
                if socket {
                    "db= is the database number, e.g. redis+unix:///run/redis.sock?db=1"
                } else {
                    "the path is the database number, e.g. redis://127.0.0.1:6379/1 (or none for database 0)"
                }
            ))
        };
        let (db, user, password) = if socket {
            // redis-rs's socket form: everything in the query, the userinfo as a fallback.
            let param = |k: &str| url.param(k).map(str::to_string);
            let db = url.param("db").map_or(Ok(0), |d| d.parse::<u32>());
            (
                db.map_err(|_| bad_db())?,
                param("user").or_else(|| url.user.clone()),
                param("pass").or_else(|| url.password.clone()),
            )
        } else {
            if let Some(k) = ["db", "user", "pass"]
                .into_iter()
                .find(|k| url.param(k).is_some())
            {
                return Err(SetupError(format!(
                    "{}: {k}= is for redis+unix:// URLs; redis:// takes redis://[user:pass@]host:port[/db]",
                    url.redacted()
                )));
            }
            if url.scheme == "redis" {
                if let Some(k) = crate::transport::DIRECT_OPTIONS
                    .iter()
                    .find(|k| url.param(k).is_some())
                {
                    return Err(SetupError(format!(
                        "{}: {k}= is for TLS: use rediss://",
                        url.redacted()
                    )));
                }
            }
            let db = match url.path.trim_end_matches('/') {
                "" => 0,
                p => p.parse::<u32>().map_err(|_| bad_db())?,
            };
            (db, url.user.clone(), url.password.clone())
        };
        // redis-cli's variable: a URL without a password (a `--repeat` of a result, whose
        // labels never hold one) takes it from the environment, as libpq takes PGPASSWORD.
        let password = password.or_else(|| {
            std::env::var("REDISCLI_AUTH")
                .ok()
                .filter(|p| !p.is_empty())
        });
        if let (Some(user), None) = (&user, &password) {
            let fix = if socket {
                format!("?user={user}&pass=PASSWORD")
            } else {
                format!("redis://{user}:PASSWORD@host:port")
            };
            return Err(SetupError(format!(
                "{}: the URL names user {user} but no password: use {fix} (or set REDISCLI_AUTH)",
                url.redacted()
            )));
        }
        let keys = match url.param(KEY_FORMAT) {
            Some(f) => KeyFormat::parse(f)?,
            None => KeyFormat::default(),
        };
        Ok(Login {
            keys,
            addr: endpoint.to_string(),
            endpoint,
            db_in: if socket {
                "db= in the URL"
            } else {
                "the path of the URL"
            },
            user,
            password,
            db,
            step,
            tls: match url.scheme.as_str() {
                "rediss" => Some(crate::transport::direct(url)?),
                _ => None,
            },
        })
    }

    /// The same login on another server (a Redis Cluster's master).
    pub fn at(&self, host: &str, port: u16) -> Login {
        let endpoint = Endpoint::Tcp {
            host: host.to_string(),
            port,
        };
        Login {
            addr: endpoint.to_string(),
            endpoint,
            ..self.clone()
        }
    }

    /// A connection to the server and database, logged in.
    pub async fn open(&self, verify: bool) -> Result<StreamConn<RedisCodec>, LookupError> {
        let mut conn = StreamConn::connect(
            &self.endpoint,
            self.step,
            self.tls.as_ref(),
            RedisCodec {
                keys: self.keys.clone(),
            },
            verify,
        )
        .await?;
        self.handshake(&mut conn).await?;
        Ok(conn)
    }

    fn user(&self) -> &str {
        self.user.as_deref().unwrap_or("default")
    }

    fn fail(&self, what: String) -> LookupError {
        LookupError::new(ErrorKind::Connect, true, format!("{}: {what}", self.addr))
    }

    /// Sends `args` and reads one reply, within the step bound.
    pub async fn ask<C: Codec>(
        &self,
        conn: &mut StreamConn<C>,
        args: &[&[u8]],
        name: &str,
    ) -> Result<Answer, LookupError> {
        let mut req = Vec::new();
        encode_command(args, &mut req);
        let reply = conn.round_trip(&req, |b| {
            Ok(parse_reply(b)?.map(|(n, r)| {
                (
                    n,
                    match r {
                        Resp::Status(s) => Answer::Status(shown(s)),
                        Resp::Error(s) => Answer::Error(shown(s)),
                        Resp::Integer(i) => Answer::Integer(i),
                        Resp::Bulk(b) => Answer::Bulk(b.to_vec()),
                        Resp::Null => Answer::Null,
                    },
                )
            }))
        });
        match tokio::time::timeout(self.step, reply).await {
            Err(_) => Err(self.fail(format!(
                "no reply to {name} within {:?}: is this a Redis port?",
                self.step
            ))),
            Ok(Err(e)) => Err(self.fail(format!("{name}: {}", e.message))),
            Ok(Ok(a)) => Ok(a),
        }
    }

    /// `AUTH` when the URL has a password, `SELECT` when the database is not 0, else `PING`, so
    /// a server that wants a password says so here (setup error, exit 2), not on every lookup.
    /// Messages name the user, never the password.
    pub async fn handshake<C: Codec>(&self, conn: &mut StreamConn<C>) -> Result<(), LookupError> {
        if let Some(pw) = &self.password {
            let pw = pw.as_bytes();
            let answer = match &self.user {
                Some(u) => self.ask(conn, &[b"AUTH", u.as_bytes(), pw], "AUTH").await?,
                None => self.ask(conn, &[b"AUTH", pw], "AUTH").await?,
            };
            match answer {
                Answer::Status(_) => {}
                Answer::Error(e) if e.starts_with("WRONGPASS") => {
                    return Err(self.fail(format!(
                        "the server refused the password for user {} (WRONGPASS): check the \
                         user and password in the URL",
                        self.user()
                    )))
                }
                Answer::Error(e) if e.contains("without any password configured") => {
                    return Err(self.fail(format!(
                        "the URL gives a password but the server has none set for user {}: \
                         drop it from the URL",
                        self.user()
                    )))
                }
                // Only the error's code: the rest of an AUTH error is not ours to echo.
                other => return Err(self.fail(self.unexpected("AUTH", &other))),
            }
        }
        if self.db != 0 {
            let db = self.db.to_string();
            match self
                .ask(conn, &[b"SELECT", db.as_bytes()], "SELECT")
                .await?
            {
                Answer::Status(_) => {}
                Answer::Error(e) if e.starts_with("NOAUTH") => return Err(self.noauth()),
                Answer::Error(e) => {
                    return Err(self.fail(format!(
                        "SELECT {db} failed: {e} ({} is the database number)",
                        self.db_in
                    )))
                }
                other => return Err(self.fail(self.unexpected("SELECT", &other))),
            }
        } else if self.password.is_none() {
            match self.ask(conn, &[b"PING"], "PING").await? {
                Answer::Status(_) => {}
                Answer::Error(e) if e.starts_with("NOAUTH") => return Err(self.noauth()),
                other => return Err(self.fail(self.unexpected("PING", &other))),
            }
        }
        Ok(())
    }

    fn noauth(&self) -> LookupError {
        self.fail(
            // <password>: a bare `pass=PASSWORD)` would read as a secret and lose its `)` to the mask.
            "the server wants a password (NOAUTH) and the URL has none: use \
             redis://[USER]:<password>@host:port (over a socket: ?user=USER&pass=<password>), \
             or set REDISCLI_AUTH"
                .into(),
        )
    }

    fn unexpected(&self, name: &str, a: &Answer) -> String {
        match a {
            Answer::Error(e) => {
                format!("{name} failed: {}", e.split(' ').next().unwrap_or_default())
            }
            other => format!("unexpected reply to {name}: {other:?}: is this a Redis port?"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(s: &str) -> Result<Login, SetupError> {
        Login::new(&TargetUrl::parse(s).unwrap(), Duration::from_secs(1))
    }

    #[test]
    fn urls() {
        let l = login("redis://127.0.0.1").unwrap();
        assert_eq!(
            (l.addr.as_str(), l.db, l.user()),
            ("127.0.0.1:6379", 0, "default")
        );
        let l = login("redis://lg:pw@127.0.0.1:7000/3").unwrap();
        assert_eq!(
            (l.addr.as_str(), l.db, l.user()),
            ("127.0.0.1:7000", 3, "lg")
        );
        assert_eq!(
            login("redis://:pw@h/").unwrap().password.as_deref(),
            Some("pw")
        );
        for bad in ["redis://h/x", "redis://h/1/2", "redis://h/-1"] {
            let e = login(bad).err().unwrap().0;
            assert!(e.contains("database number"), "{bad}: {e}");
        }
        let e = login("redis://lg@h").err().unwrap().0;
        assert!(e.contains("no password"), "{e}");
    }

    #[test]
    fn socket_urls() {
        for s in [
            "redis+unix:///run/r.sock?db=2&user=lg&pass=pw",
            "unix:///run/r.sock?db=2&user=lg&pass=pw",
            "redis+unix://lg:pw@/run/r.sock?db=2",
        ] {
            let l = login(s).unwrap();
            assert_eq!(
                (l.addr.as_str(), l.db, l.user(), l.password.as_deref()),
                ("/run/r.sock", 2, "lg", Some("pw")),
                "{s}"
            );
        }
        assert_eq!(login("redis+unix:///r.sock").unwrap().db, 0);
        let e = login("redis+unix:///r.sock?db=x").err().unwrap().0;
        assert!(e.contains("db= is the database number"), "{e}");
        let e = login("redis+unix://h/r.sock").err().unwrap().0;
        assert!(e.contains("after an empty host"), "{e}");
        let e = login("redis://h?db=1").err().unwrap().0;
        assert!(e.contains("db= is for redis+unix://"), "{e}");
        let e = login("redis+unix:///r.sock?user=lg").err().unwrap().0;
        assert!(e.contains("?user=lg&pass=PASSWORD"), "{e}");
    }
}
