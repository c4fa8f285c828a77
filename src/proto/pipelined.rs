//! One pipelined connection (TCP or Unix socket, `transport::Stream`) over any
//! `proto::codec::Codec` (every wire driver).
//! `send` only encodes into the write buffer; `recv` flushes it and parses one reply, so D
//! requests in flight cost one write and (usually) one read syscall per batch, not per request.

use std::time::Duration;

use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::outcome::{LookupError, Outcome};
use crate::proto::codec::{max_frame_text, outcome, Codec, Request, Tally, MAX_FRAME};
use crate::proto::target::Conn;
use crate::transport::{Endpoint, Stream, TlsClient};

pub struct StreamConn<C> {
    sock: Stream,
    codec: C,
    verify: bool,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    rpos: usize,
    closing: bool,
    /// Requests encoded but not yet flushed, and flushed but not yet answered: a reply when
    /// none is out is a server out of step (two replies to one request), never a result.
    queued: u32,
    out: u32,
}

impl<C: Codec> StreamConn<C> {
    pub fn new(sock: Stream, codec: C, verify: bool) -> Self {
        StreamConn {
            sock,
            codec,
            verify,
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            rbuf: Vec::with_capacity(16 * 1024),
            rpos: 0,
            closing: false,
            queued: 0,
            out: 0,
        }
    }

    /// Connects to `ep` within `timeout` (`Timeouts::connect`), TLS from the first byte when
    /// `tls` is given, with a one-line error that names the cause (`transport::connect_tls`).
    pub async fn connect(
        ep: &Endpoint,
        timeout: Duration,
        tls: Option<&TlsClient>,
        codec: C,
        verify: bool,
    ) -> Result<Self, LookupError> {
        let sock = crate::transport::connect_tls(ep, timeout, tls).await?;
        Ok(Self::new(sock, codec, verify))
    }

    /// Writes `request` and reads until `parse` finds a whole reply (handshakes: HandlerSocket
    /// auth and open_index, memcached `stats`). Not for the hot path.
    pub async fn round_trip<T>(
        &mut self,
        request: &[u8],
        mut parse: impl FnMut(&[u8]) -> Result<Option<(usize, T)>, LookupError>,
    ) -> Result<T, LookupError> {
        self.sock
            .write_all(request)
            .await
            .map_err(|e| LookupError::io(e.to_string()))?;
        self.sock
            .flush()
            .await
            .map_err(|e| LookupError::io(e.to_string()))?;
        loop {
            if let Some((n, v)) = parse(&self.rbuf[self.rpos..])? {
                self.rpos += n;
                return Ok(v);
            }
            if self.rbuf.len() - self.rpos > MAX_FRAME {
                return Err(LookupError::protocol(format!(
                    "reply longer than {}",
                    max_frame_text()
                )));
            }
            self.rbuf.reserve(4096);
            self.read().await?;
        }
    }

    /// Reads what the socket has into the read buffer; the server closing is an error.
    async fn read(&mut self) -> Result<(), LookupError> {
        let n = self
            .sock
            .read_buf(&mut self.rbuf)
            .await
            .map_err(|e| LookupError::io(e.to_string()))?;
        match n {
            0 => Err(LookupError::io("the server closed the connection")),
            _ => Ok(()),
        }
    }

    /// `round_trip` for one '\n'-terminated line, returned without its '\n'.
    pub async fn round_trip_line(&mut self, request: &[u8]) -> Result<Vec<u8>, LookupError> {
        self.round_trip(request, |b| {
            Ok(b.iter()
                .position(|&c| c == b'\n')
                .map(|i| (i + 1, b[..i].to_vec())))
        })
        .await
    }

    async fn flush(&mut self) -> Result<(), LookupError> {
        self.codec.end_batch(&mut self.wbuf);
        // write() (not write_all) with our own offset keeps this cancel-safe.
        while self.wpos < self.wbuf.len() {
            let n = self
                .sock
                .write(&self.wbuf[self.wpos..])
                .await
                .map_err(|e| LookupError::io(e.to_string()))?;
            if n == 0 {
                return Err(LookupError::io("the server closed the connection"));
            }
            self.wpos += n;
        }
        // TLS may hold the last records back when the socket is full (plain: a no-op).
        self.sock
            .flush()
            .await
            .map_err(|e| LookupError::io(e.to_string()))?;
        self.wbuf.clear();
        self.wpos = 0;
        self.out += std::mem::take(&mut self.queued);
        Ok(())
    }
}

impl<C> StreamConn<C> {
    /// A reply of `n` bytes was decoded: it answers the oldest request on the wire. One with
    /// none on the wire arrived before its request was sent: the server answers out of step
    /// (e.g. two replies per request that each look like a miss), and the stream is lost.
    /// `n == 0` is a request the codec answered itself (the server skipped it).
    #[inline]
    fn answered(&mut self, n: usize) -> Result<(), LookupError> {
        if self.out > 0 {
            self.out -= 1;
        } else if n == 0 && self.queued > 0 {
            self.queued -= 1;
        } else {
            return Err(LookupError::protocol(
                "the server answered out of step: a reply came before its request was sent (more replies than requests)",
            ));
        }
        Ok(())
    }
}

impl<C: Codec> StreamConn<C> {
    /// A reply of `n` bytes at the front of the read buffer was decoded: drop it.
    fn consumed(&mut self, n: usize) -> Result<(), LookupError> {
        self.answered(n)?;
        self.rpos += n;
        if self.rpos == self.rbuf.len() {
            self.rbuf.clear();
            self.rpos = 0;
        }
        self.closing = self.codec.must_close();
        Ok(())
    }

    /// No whole reply is buffered: sends what is queued and reads more.
    async fn read_more(&mut self) -> Result<(), LookupError> {
        if self.rbuf.len() - self.rpos > MAX_FRAME {
            return Err(LookupError::protocol(format!(
                "reply larger than {}",
                max_frame_text()
            )));
        }
        self.flush().await?;
        if self.rpos > 0 {
            // keep the partial reply, drop what was parsed
            self.rbuf.drain(..self.rpos);
            self.rpos = 0;
        }
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        self.read().await
    }

    fn closed(&self) -> Result<(), LookupError> {
        match self.closing {
            true => Err(LookupError::io(
                "the server closed the connection (Connection: close)",
            )),
            false => Ok(()),
        }
    }

    /// Nothing on the wire and nothing buffered: bytes already waiting on the socket came
    /// before the queued requests went out, so they answer none of them (a late extra reply to
    /// an earlier request). One poll, no wait: tokio knows from its cached readiness whether
    /// there is anything to read. True when it read some.
    fn early_bytes(&mut self) -> Result<bool, LookupError> {
        if self.out > 0 || self.rpos < self.rbuf.len() {
            return Ok(false);
        }
        match self.sock.read_buf(&mut self.rbuf).now_or_never() {
            None => Ok(false),
            Some(r) => match r.map_err(|e| LookupError::io(e.to_string()))? {
                0 => Err(LookupError::io("the server closed the connection")),
                _ => Ok(true),
            },
        }
    }
}

/// The error of a reply that came after the connection's last request was answered.
fn late_reply() -> LookupError {
    LookupError::protocol(
        "the server answered out of step: a reply came after every request was answered (more replies than requests)",
    )
}

impl<C: Codec + 'static> Conn for StreamConn<C> {
    #[inline]
    fn send(&mut self, req: &Request) {
        self.codec.encode(req, &mut self.wbuf);
        self.queued += 1;
    }

    fn send_named(&mut self, req: &Request, key: &[u8]) {
        self.codec.encode_named(req, key, &mut self.wbuf);
        self.queued += 1;
    }

    async fn commit(&mut self) -> Result<bool, LookupError> {
        if self.closing || !self.codec.commit(&mut self.wbuf) {
            return Ok(false);
        }
        self.flush().await?;
        loop {
            if let Some((n, failed)) = self.codec.decode_commit(&self.rbuf[self.rpos..])? {
                self.rpos += n;
                return failed.map_or(Ok(true), Err);
            }
            self.rbuf.reserve(4096);
            self.read().await?;
        }
    }

    async fn recv(&mut self, req: &Request) -> Result<Outcome, LookupError> {
        self.closed()?;
        loop {
            if self.early_bytes()? {
                continue;
            }
            // A reply already read is answered without touching the socket; requests queued
            // meanwhile go out together once the buffered replies run dry. With D in flight that
            // is one write and one read per batch instead of a write per request.
            if self.rpos < self.rbuf.len() {
                // The reply borrows the buffer and the codec: take it to its outcome first.
                let done = match self.codec.decode(&self.rbuf[self.rpos..], req.key)? {
                    Some((n, reply)) => Some((n, outcome(reply, req, self.verify))),
                    None => None,
                };
                if let Some((n, result)) = done {
                    self.consumed(n)?;
                    return result;
                }
            }
            self.read_more().await?;
        }
    }

    #[inline]
    fn send_batch(&mut self, keys: &[u64]) {
        self.codec.encode_batch(keys, &mut self.wbuf);
        self.queued += 1;
    }

    async fn recv_batch(&mut self, keys: &[u64]) -> Result<(Outcome, Tally), LookupError> {
        self.closed()?;
        loop {
            if self.early_bytes()? {
                continue;
            }
            if self.rpos < self.rbuf.len() {
                let buf = &self.rbuf[self.rpos..];
                if let Some((n, result)) = self.codec.decode_batch(buf, keys, self.verify)? {
                    self.consumed(n)?;
                    return result.map(|t| (t.outcome(), t));
                }
            }
            self.read_more().await?;
        }
    }

    async fn settle(&mut self, grace: Duration) -> Result<(), LookupError> {
        if self.out > 0 || self.queued > 0 || self.closing {
            return Ok(());
        }
        if self.rpos == self.rbuf.len() {
            self.rbuf.clear();
            self.rpos = 0;
            match tokio::time::timeout(grace, self.sock.read_buf(&mut self.rbuf)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return Ok(()), // quiet, closed or failed: no reply too many
            }
        }
        // What a server may send unasked (PostgreSQL's notices) decodes to no reply.
        match self.codec.decode(&self.rbuf[self.rpos..], 0) {
            Ok(None) => Ok(()),
            _ => Err(late_reply()),
        }
    }
}
