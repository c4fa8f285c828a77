//! Where a target listens: a TCP host and port, or a Unix socket path.

use crate::error::ConnectError;
use std::fmt;
use std::path::{Path, PathBuf};

/// The longest socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// What carries the bytes, as a result records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Unix,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
        }
    }
}

impl Endpoint {
    /// A TCP endpoint. `label` (the redacted URL) and `socket_url` (the protocol's socket form,
    /// if it has one) are for the message when the host is missing or is a path in disguise.
    pub fn tcp(
        host: &str,
        port: u16,
        label: &str,
        socket_url: Option<&str>,
    ) -> Result<Endpoint, ConnectError> {
        let hint = socket_url
            .map(|f| format!(" (a Unix socket is written {f})"))
            .unwrap_or_default();
        if host.is_empty() {
            return Err(ConnectError(format!(
                "{label} has no host: name the server's HOST:PORT{hint}"
            )));
        }
        if crate::url::decode(host).is_ok_and(|h| h.contains('/')) {
            return Err(ConnectError(format!(
                "{label}: the host is a path, not a host name{hint}"
            )));
        }
        Ok(Endpoint::Tcp {
            host: host.to_string(),
            port,
        })
    }

    /// A Unix socket endpoint: the path must be absolute (a relative one would depend on where
    /// loadgen was started) and fit in `sun_path`.
    pub fn unix(path: &str, what: &str) -> Result<Endpoint, ConnectError> {
        if !path.starts_with('/') {
            return Err(ConnectError(format!(
                "{what}: the socket path '{path}' is not absolute: give the full path, starting with /"
            )));
        }
        if path.len() > MAX_SOCKET_PATH {
            return Err(ConnectError(format!(
                "{what}: the socket path is {} bytes long; Unix sockets take at most {MAX_SOCKET_PATH}",
                path.len()
            )));
        }
        Ok(Endpoint::Unix(PathBuf::from(path)))
    }

    pub fn transport(&self) -> Transport {
        match self {
            Endpoint::Tcp { .. } => Transport::Tcp,
            Endpoint::Unix(_) => Transport::Unix,
        }
    }

    /// The socket path, for a Unix endpoint.
    pub fn socket(&self) -> Option<&Path> {
        match self {
            Endpoint::Unix(p) => Some(p),
            Endpoint::Tcp { .. } => None,
        }
    }
}

/// `host:port` (IPv6 hosts in brackets) or the socket path: what messages name.
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_limits() {
        let t = Endpoint::tcp("::1", 5432, "x", None).unwrap();
        assert_eq!(t.to_string(), "[::1]:5432");
        assert_eq!(t.transport().name(), "tcp");
        let e = Endpoint::tcp("", 1, "memcache://", Some("memcache:///a.sock")).unwrap_err();
        assert_eq!(
            e,
            "memcache:// has no host: name the server's HOST:PORT (a Unix socket is written memcache:///a.sock)".into()
        );
        let e = Endpoint::tcp("%2Fa.sock", 1, "m", None).unwrap_err();
        assert!(e.contains("the host is a path"), "{e}");
        let u = Endpoint::unix("/run/a.sock", "x").unwrap();
        assert_eq!(
            (u.to_string(), u.transport().name()),
            ("/run/a.sock".into(), "unix")
        );
        assert!(Endpoint::unix("run/a.sock", "x")
            .unwrap_err()
            .contains("not absolute"));
        let long = format!("/{}", "a".repeat(MAX_SOCKET_PATH));
        assert!(Endpoint::unix(&long, "x")
            .unwrap_err()
            .contains("at most 107"));
    }
}
