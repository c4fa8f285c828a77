//! PostgreSQL: the lean `wire` driver (loadgen's own extended-protocol codec, pipelined) and the
//! `tokio` driver (tokio-postgres via deadpool-postgres), plus the server's lookup counter.

pub mod codec;
pub mod count;
pub mod error;
pub mod prepare;
pub mod tls;
pub mod tokio_driver;
mod tokio_tls;
pub mod wire_driver;
pub mod writes;

use crate::error::ConnectError;
use crate::proto::sniff::{startup_probe, Hello, Kind};
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 5432;

/// A Unix socket, as libpq writes it: `host` is the directory of the socket file.
pub const SOCKET_URL: &str = "postgres://user@/db?host=/var/run/postgresql";

/// Both drivers' first words: a startup message of the target's user and database (a server
/// of another kind answers it too, or gets the preflight's other probes).
pub fn hello(config: &tokio_postgres::Config) -> Hello {
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    Hello::new(Kind::Postgres, startup_probe(user, db))
}

/// The port: the URL's, or libpq's `?port=` (written beside `?host=`), or 5432.
pub fn port(url: &TargetUrl) -> Result<u16, ConnectError> {
    match (url.param("port"), url.port) {
        (None, p) => Ok(p.unwrap_or(DEFAULT_PORT)),
        (Some(p), u) => match p.parse::<u16>() {
            Ok(n) if n > 0 && (u.is_none() || u == Some(n)) => Ok(n),
            Ok(n) if n > 0 => Err(ConnectError(format!(
                "{}: two ports ({} and port={n}): give one",
                url.redacted(),
                u.unwrap_or_default()
            ))),
            _ => Err(ConnectError(format!(
                "{}: port={p} is not a port number from 1 to 65535",
                url.redacted()
            ))),
        },
    }
}

/// libpq's rules: a host that is a directory (`?host=/var/run/postgresql`, or the URL's host
/// percent-encoded, `postgres://%2Fvar%2Frun%2Fpostgresql/db`) is the Unix socket
/// `<dir>/.s.PGSQL.<port>` in it; `?host=` overrides the URL's host; any other host is TCP.
pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    let port = port(url)?;
    let host = match url.param("host") {
        Some(h) => h.to_string(),
        None => crate::url::decode(&url.host)?,
    };
    if host.starts_with('/') {
        let socket = format!("{}/.s.PGSQL.{port}", host.trim_end_matches('/'));
        return Endpoint::unix(&socket, &url.redacted());
    }
    Endpoint::tcp(&host, port, &url.redacted(), Some(SOCKET_URL))
}

/// The directory a libpq-style socket is in (tokio-postgres takes the directory and the port).
pub fn socket_dir(ep: &Endpoint) -> Option<&std::path::Path> {
    ep.socket().and_then(|p| p.parent())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> Result<String, ConnectError> {
        endpoint(&TargetUrl::parse(s).unwrap()).map(|e| e.to_string())
    }

    #[test]
    fn libpq_socket_forms() {
        let want = "/run/pg/.s.PGSQL.5432";
        assert_eq!(ep("postgres://u@/db?host=/run/pg").unwrap(), want);
        assert_eq!(ep("postgres://u@/db?host=/run/pg/").unwrap(), want);
        assert_eq!(ep("postgres://u@%2Frun%2Fpg/db").unwrap(), want);
        assert_eq!(
            ep("postgres://u@:5433/db?host=/run/pg").unwrap(),
            "/run/pg/.s.PGSQL.5433"
        );
        assert_eq!(
            ep("postgres:///db?host=/run/pg&port=5433").unwrap(),
            "/run/pg/.s.PGSQL.5433"
        );
        assert_eq!(ep("postgres://u@h:5433/db").unwrap(), "h:5433");
        assert_eq!(
            ep("postgres://u@h/db?host=127.0.0.1").unwrap(),
            "127.0.0.1:5432"
        );
        assert!(ep("postgres://u@/db").unwrap_err().contains("no host"));
        assert!(ep("postgres://u@h:1/db?port=2")
            .unwrap_err()
            .contains("two ports"));
        assert!(ep("postgres://u@/db?host=run/pg")
            .unwrap_err()
            .contains("is a path"));
    }
}
