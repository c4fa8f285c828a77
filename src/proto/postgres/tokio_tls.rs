//! tokio-postgres's TLS hook over loadgen's rustls client (`transport::TlsClient`), so both
//! drivers verify, and explain a failure, the same way.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};
use tokio_postgres::Socket;

use crate::transport::TlsClient;

#[derive(Clone)]
pub struct MakeRustls(TlsClient);

impl MakeRustls {
    pub fn new(client: TlsClient) -> MakeRustls {
        MakeRustls(client)
    }
}

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> io::Result<RustlsConnect> {
        Ok(RustlsConnect(self.0.clone(), host.to_string()))
    }
}

pub struct RustlsConnect(TlsClient, String);

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = BoxFuture<'static, io::Result<RustlsStream>>;

    fn connect(self, sock: Socket) -> Self::Future {
        Box::pin(async move {
            let RustlsConnect(client, host) = self;
            match client.handshake(sock, &host).await {
                Ok(s) => Ok(RustlsStream(Box::new(s))),
                Err(line) => Err(io::Error::other(line)),
            }
        })
    }
}

pub struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl tokio_postgres::tls::TlsStream for RustlsStream {
    /// No channel binding: SCRAM runs as without TLS, which every server accepts.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}
