//! The server side, for `loadgen serve`: a TCP or Unix listener that hands out `Stream`s.

use std::io;
use std::path::Path;

use tokio::net::{TcpListener, UnixListener};

use super::stream::Stream;

pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    /// Binds a Unix socket at `path` (std: callable before a runtime exists). A socket file
    /// left behind by a server that is gone is replaced; any other file is left alone.
    pub fn bind_unix(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("a server is already listening on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let l = std::os::unix::net::UnixListener::bind(path)?;
        l.set_nonblocking(true)?;
        Ok(l)
    }

    pub async fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, _)| Stream::tcp(s)),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Stream::Unix(s)),
        }
    }
}
