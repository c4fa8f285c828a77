//! libpq's TLS settings for both drivers: `sslmode`, `sslrootcert`, `sslcert`, `sslkey` from the
//! URL, else PGSSLMODE/PGSSLROOTCERT/PGSSLCERT/PGSSLKEY, else libpq's defaults (prefer, and
//! ~/.postgresql/root.crt when it exists). A Unix socket never uses TLS, as with libpq.

use crate::error::SetupError;
use bytes::BytesMut;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::config::SslMode;

use super::tokio_tls::MakeRustls;
use crate::outcome::{ErrorKind, LookupError};
use crate::transport::{
    Endpoint, OptionNames, Roots, Stream, TlsClient, TlsInfo, TlsMode, TlsOptions,
};
use crate::url::TargetUrl;

/// The URL options, as libpq names them.
pub const OPTIONS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];

const NAMES: OptionNames = OptionNames {
    mode: "sslmode",
    roots: "sslrootcert",
    cert: "sslcert",
    key: "sslkey",
};

/// What a target does about TLS, built once: the mode, and the client when it may use TLS.
#[derive(Clone, Debug)]
pub struct PgTls {
    pub mode: TlsMode,
    client: Option<TlsClient>,
    /// The name the certificate must carry (verify-full): the URL's host.
    host: String,
}

impl PgTls {
    pub fn new(url: &TargetUrl, ep: &Endpoint) -> Result<PgTls, SetupError> {
        let label = url.redacted();
        let setting = |name: &str, env: &str| {
            url.param(name)
                .map(str::to_string)
                .or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
        };
        let mode = match setting("sslmode", "PGSSLMODE") {
            None => TlsMode::Prefer,
            Some(m) => TlsMode::libpq(&m).ok_or_else(|| {
                format!(
                    "sslmode={m} in {label}: use one of {}",
                    TlsMode::LIBPQ.join(", ")
                )
            })?,
        };
        let Endpoint::Tcp { host, .. } = ep else {
            return Ok(PgTls {
                mode: TlsMode::Disable,
                client: None,
                host: String::new(),
            });
        };
        let home = |file: &str| {
            let p = std::path::Path::new(&std::env::var("HOME").ok()?)
                .join(".postgresql")
                .join(file);
            p.exists().then_some(p)
        };
        let roots = match setting("sslrootcert", "PGSSLROOTCERT") {
            Some(s) if s == "system" => Roots::System,
            Some(path) => Roots::File(path.into()),
            None => home("root.crt").map_or(Roots::Absent, Roots::File),
        };
        let (cert, key) = match (
            setting("sslcert", "PGSSLCERT"),
            setting("sslkey", "PGSSLKEY"),
        ) {
            (None, None) => match (home("postgresql.crt"), home("postgresql.key")) {
                (Some(c), Some(k)) => (Some(c), Some(k)),
                _ => (None, None),
            },
            (c, k) => (c.map(Into::into), k.map(Into::into)),
        };
        let opts = TlsOptions {
            mode,
            roots,
            cert,
            key,
            names: NAMES,
        };
        let client = TlsClient::new(&opts).map_err(|e| format!("{label}: {e}"))?;
        Ok(PgTls {
            mode,
            client,
            host: host.clone(),
        })
    }

    /// What the run's connections negotiated (None: plain).
    pub fn negotiated(&self) -> Option<TlsInfo> {
        self.client.as_ref().and_then(TlsClient::negotiated)
    }

    /// The wire driver's start: SSLRequest, then the handshake if the server answers 'S'. With
    /// `ask` false (disable, or allow's first try) the stream stays plain.
    pub async fn start(&self, mut sock: Stream, ask: bool) -> Result<Stream, LookupError> {
        let Some(client) = self.client.as_ref().filter(|_| ask) else {
            return Ok(sock);
        };
        let fail = |m: String| LookupError::new(ErrorKind::Connect, true, m);
        let mut buf = BytesMut::with_capacity(8);
        frontend::ssl_request(&mut buf);
        sock.write_all(&buf)
            .await
            .map_err(|e| fail(format!("cannot send the SSLRequest: {e}")))?;
        let answer = sock.read_u8().await.map_err(|e| {
            fail(format!(
                "the server closed the connection when asked for TLS: {e}"
            ))
        })?;
        match answer {
            b'S' => client.upgrade(sock, &self.host).await,
            // 'N', or an error from a server too old to know SSLRequest.
            _ if self.mode.requires_tls() => Err(fail(format!(
                "the server does not accept TLS, and sslmode={} requires it: use sslmode=prefer or disable",
                TlsMode::LIBPQ[self.mode as usize]
            ))),
            b'N' => Ok(sock),
            _ => Err(fail(
                "the server's answer to SSLRequest is not PostgreSQL protocol (is this a PostgreSQL port?)".into(),
            )),
        }
    }

    /// tokio-postgres knows disable, prefer and require; the verification is the rustls
    /// configuration's. Allow is plain there (its retry over TLS is the wire driver's).
    pub fn ssl_mode(&self) -> SslMode {
        match (self.mode, &self.client) {
            (_, None) | (TlsMode::Disable | TlsMode::Allow, _) => SslMode::Disable,
            (TlsMode::Prefer, _) => SslMode::Prefer,
            _ => SslMode::Require,
        }
    }

    /// The connector for tokio-postgres, when TLS may be used.
    pub fn connector(&self) -> Option<MakeRustls> {
        self.client.clone().map(MakeRustls::new)
    }

    /// One tokio-postgres connection (the server counter, `prepare`), its driving task spawned.
    pub async fn connect(
        &self,
        config: &tokio_postgres::Config,
    ) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
        let mut config = config.clone();
        config.ssl_mode(self.ssl_mode());
        Ok(match self.connector() {
            Some(tls) => {
                let (client, conn) = config.connect(tls).await?;
                (client, tokio::spawn(async move { drop(conn.await) }))
            }
            None => {
                let (client, conn) = config.connect(tokio_postgres::NoTls).await?;
                (client, tokio::spawn(async move { drop(conn.await) }))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(url: &str) -> Result<PgTls, SetupError> {
        let url = TargetUrl::parse(url).unwrap();
        PgTls::new(&url, &super::super::endpoint(&url).unwrap())
    }

    #[test]
    fn libpq_defaults_and_names() {
        // The tests run without PGSSLMODE; prefer is libpq's default.
        let t = tls("postgres://u@h/db").unwrap();
        assert_eq!((t.mode, t.ssl_mode()), (TlsMode::Prefer, SslMode::Prefer));
        let t = tls("postgres://u@h/db?sslmode=verify-ca&sslrootcert=/nope/ca.pem");
        let e = t.unwrap_err();
        assert!(e.contains("/nope/ca.pem (sslrootcert)"), "{e}");
        let e = tls("postgres://u@h/db?sslmode=on").unwrap_err();
        assert!(e.contains("sslmode=on") && e.contains("verify-full"), "{e}");
        let t = tls("postgres://u@h/db?sslmode=disable").unwrap();
        assert_eq!(t.ssl_mode(), SslMode::Disable);
        assert_eq!(
            tls("postgres://u@h/db?sslmode=require").unwrap().ssl_mode(),
            SslMode::Require
        );
        // A Unix socket: never TLS, whatever the mode.
        let t = tls("postgres://u@/db?host=/run/pg&sslmode=require").unwrap();
        assert_eq!((t.mode, t.ssl_mode()), (TlsMode::Disable, SslMode::Disable));
    }
}
