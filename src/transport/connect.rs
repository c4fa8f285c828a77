//! Opening a stream to an endpoint, and the one line that names why it failed.

use std::io;
use std::path::Path;
use std::time::Duration;

use tokio::net::{TcpStream, UnixStream};

use super::endpoint::Endpoint;
use super::stream::Stream;
use super::tls::TlsClient;
use super::turns::Ticket;
use crate::outcome::{ErrorKind, LookupError};

/// Connects within `timeout` (`Timeouts::connect`): a server whose listen backlog is full never
/// answers the SYN, and that must be a clear error, not a hang. In the connect phase the first
/// connect of a target connection waits for its turn (`Ticket`).
pub async fn connect(ep: &Endpoint, timeout: Duration) -> Result<Stream, LookupError> {
    match Ticket::take() {
        Some(ticket) => ticket.connect(open(ep, timeout)).await,
        None => open(ep, timeout).await,
    }
}

async fn open(ep: &Endpoint, timeout: Duration) -> Result<Stream, LookupError> {
    let sock = async {
        match ep {
            Endpoint::Tcp { host, port } => TcpStream::connect((host.as_str(), *port))
                .await
                .map(Stream::tcp),
            Endpoint::Unix(path) => UnixStream::connect(path).await.map(Stream::Unix),
        }
    };
    tokio::time::timeout(timeout, sock)
        .await
        .map_err(|_| no_connection(ep))?
        .map_err(|e| connect_error(ep, &e))
}

/// `connect`, then the TLS handshake when `tls` is given (TLS from the first byte: `rediss://`,
/// `https://`), as the host the endpoint names. The handshake gets its own `timeout`: a server
/// that does not speak TLS may wait for more bytes forever.
pub async fn connect_tls(
    ep: &Endpoint,
    timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<Stream, LookupError> {
    let sock = connect(ep, timeout).await?;
    let (Some(tls), Endpoint::Tcp { host, .. }) = (tls, ep) else {
        return Ok(sock);
    };
    tokio::time::timeout(timeout, tls.upgrade(sock, host))
        .await
        .unwrap_or_else(|_| {
            Err(LookupError::new(
                ErrorKind::Connect,
                true,
                format!(
                    "no TLS handshake from {ep} within --timeout (does it speak TLS on this port?)"
                ),
            ))
        })
}

/// The connect did not complete within --timeout.
pub fn no_connection(ep: &Endpoint) -> LookupError {
    let what = match ep {
        Endpoint::Tcp { .. } => ep.to_string(),
        Endpoint::Unix(_) => format!("socket {ep}"),
    };
    LookupError::new(
        ErrorKind::Connect,
        true,
        format!("no connection to {what} within --timeout (is the server up and accepting connections?)"),
    )
}

pub fn connect_error(ep: &Endpoint, e: &io::Error) -> LookupError {
    LookupError::new(ErrorKind::Connect, true, explain(ep, e))
}

/// Why a connect to `ep` failed, in one line that says what to check. Also for the client
/// libraries' connect errors (tokio-postgres, mysql_async), so every driver says the same.
pub fn explain(ep: &Endpoint, e: &io::Error) -> String {
    match ep {
        Endpoint::Tcp { .. } => {
            let hint = match e.kind() {
                io::ErrorKind::ConnectionRefused => " (is the server running on that port?)",
                _ => "",
            };
            format!("cannot connect to {ep}: {e}{hint}")
        }
        Endpoint::Unix(path) => unix_cause(path, e),
    }
}

fn unix_cause(path: &Path, e: &io::Error) -> String {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    match e.kind() {
        io::ErrorKind::NotFound => format!(
            "socket {shown} does not exist (is the server running, and is this the socket it listens on?)"
        ),
        io::ErrorKind::PermissionDenied => format!(
            "permission denied on socket {shown}: loadgen's user needs write permission on it and search (x) permission on every directory above it"
        ),
        _ => match std::fs::metadata(path) {
            Ok(m) if !m.file_type().is_socket() => {
                let what = if m.is_dir() {
                    "a directory"
                } else if m.is_file() {
                    "a regular file"
                } else {
                    "not a socket file"
                };
                format!("{shown} is not a socket ({what}): name the socket file the server listens on")
            }
            _ if e.kind() == io::ErrorKind::ConnectionRefused => format!(
                "nothing is listening on socket {shown} (a socket file left behind: is the server running?)"
            ),
            _ => format!("cannot connect to socket {shown}: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TempDir;

    fn fails(ep: &Endpoint) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        match rt.block_on(connect(ep, Duration::from_secs(5))) {
            Ok(_) => panic!("{ep} connected"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn each_unix_failure_names_its_cause() {
        let dir = TempDir::new("loadgen-transport");
        let at = |name: &str| Endpoint::unix(dir.join(name).to_str().unwrap(), "t").unwrap();

        assert!(fails(&at("missing.sock")).contains("does not exist"));
        std::fs::write(dir.join("file"), b"x").unwrap();
        let m = fails(&at("file"));
        assert!(m.contains("is not a socket (a regular file)"), "{m}");
        std::fs::create_dir_all(dir.join("d")).unwrap();
        assert!(fails(&at("d")).contains("is not a socket (a directory)"));
        // A socket file nobody listens on: bound, then the listener closed.
        drop(std::os::unix::net::UnixListener::bind(dir.join("stale.sock")).unwrap());
        let m = fails(&at("stale.sock"));
        assert!(m.contains("nothing is listening"), "{m}");
        let m = fails(&Endpoint::tcp("127.0.0.1", 1, "t", None).unwrap());
        assert!(
            m.contains("cannot connect to 127.0.0.1:1") && m.contains("running on that port"),
            "{m}"
        );
    }
}
