//! One connected byte stream, whatever carries it. An enum rather than a generic parameter: a
//! driver, a handshake and a server counter stay one type each, and the match per read or write
//! costs nothing measurable next to the syscall it wraps (docs/benchmarks.md).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;

use super::endpoint::Transport;

pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// A connected stream after the protocol's TLS negotiation (`TlsClient::upgrade`). Boxed:
    /// the TLS state is large and the plain variants stay small.
    Tls(Box<TlsStream<Stream>>),
}

impl Stream {
    /// A TCP stream with Nagle off: requests go out when written, not after an ACK.
    pub fn tcp(sock: TcpStream) -> Stream {
        let _ = sock.set_nodelay(true);
        Stream::Tcp(sock)
    }

    pub fn transport(&self) -> Transport {
        match self {
            Stream::Tcp(_) => Transport::Tcp,
            Stream::Unix(_) => Transport::Unix,
            Stream::Tls(s) => s.get_ref().0.transport(),
        }
    }
}

impl From<TcpStream> for Stream {
    fn from(sock: TcpStream) -> Stream {
        Stream::tcp(sock)
    }
}

impl From<UnixStream> for Stream {
    fn from(sock: UnixStream) -> Stream {
        Stream::Unix(sock)
    }
}

/// Calls the same method on whichever stream this is (all are `Unpin`).
macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Tcp($s) => $e,
            Stream::Unix($s) => $e,
            Stream::Tls($s) => $e,
        }
    };
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Tcp(s) => s.is_write_vectored(),
            Stream::Unix(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}
