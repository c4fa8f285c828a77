//! Getting the server at a target's port to say what it is, before the protocol's own
//! handshake: the preflight sends the target's own harmless first request (memcached
//! `version`, Redis `PING`, HTTP `OPTIONS`, a PostgreSQL startup, a HandlerSocket line;
//! nothing to MySQL, which greets) on a connection of its own and names what answers. Servers
//! that stay silent on it (PostgreSQL waits for a startup message, Redis for a line without a
//! NUL, MySQL's client for a greeting) get the other protocols' first words on fresh
//! connections, one after the other when a connection closes or stays silent for a grace
//! (500 ms at most), all within --timeout.

use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{kind_of, not_the_protocol, startup_probe, Kind};
use crate::transport::{self, Endpoint, Stream};

/// Redis's `PING` as a client library sends it (a RESP array).
pub const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// What a target sends first to learn what answers.
#[derive(Clone, Debug)]
pub struct Hello {
    pub want: Kind,
    /// The target's own first request; empty when its server speaks first.
    pub own: Vec<u8>,
}

impl Hello {
    pub fn new(want: Kind, own: impl Into<Vec<u8>>) -> Hello {
        Hello {
            want,
            own: own.into(),
        }
    }
}

/// The first words that get an answer from a server that ignored the target's own: a
/// PostgreSQL startup (PostgreSQL, memcached, HandlerSocket, HTTP answer it), Redis's `PING`,
/// memcached's `version` (a memcached that closed on an HTTP request answers it).
fn fallbacks() -> [Vec<u8>; 3] {
    [
        startup_probe("loadgen", "loadgen"),
        PING.to_vec(),
        b"version\r\n".to_vec(),
    ]
}

/// Ok when the server at `ep` answers as `hello.want`, or answers nothing loadgen knows (the
/// protocol's own decoding then says what is wrong); the line naming the server when it is
/// another kind, the transport's line when the connect fails, or a line saying nothing
/// answered within `timeout`.
pub async fn greet(ep: &Endpoint, hello: &Hello, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    // The first connect on its own, so that a port that does not accept says so in the
    // transport's words.
    let first = transport::connect(ep, timeout)
        .await
        .map_err(|e| e.message)?;
    let grace = (timeout / 4).min(Duration::from_millis(500));
    let mut probes: Vec<Vec<u8>> = vec![hello.own.clone()];
    probes.extend(fallbacks().into_iter().filter(|p| *p != hello.own));
    let mut running = FuturesUnordered::new();
    running.push(answer(ep, Some(first), probes[0].clone(), 0));
    let (mut next, mut next_at) = (1, Instant::now() + grace);
    loop {
        tokio::select! {
            Some((i, r)) = running.next() => match r? {
                Some(reply) => match kind_of(&reply) {
                    Some(k) if k == hello.want => return Ok(()),
                    Some(_) => return Err(not_the_protocol(hello.want, &reply)),
                    None if i == 0 => return Ok(()),
                    None => {}
                },
                // Closed without a byte: the next words now.
                None => next_at = Instant::now(),
            },
            _ = tokio::time::sleep_until(next_at), if next < probes.len() => {
                running.push(answer(ep, None, probes[next].clone(), next));
                (next, next_at) = (next + 1, Instant::now() + grace);
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Err(format!(
                    "no answer within --timeout ({timeout:?}) from {ep}, to {0} request nor to other protocols' first words: is this {0} port?",
                    hello.want.a()
                ))
            }
        }
        if running.is_empty() && next == probes.len() {
            // Every connection closed unanswered: nothing to name.
            return Ok(());
        }
    }
}

/// One connection (`sock`, or a new one): `words` sent, then the reply's first bytes, None
/// when the server closed without a byte. Err: the connect failed.
async fn answer(
    ep: &Endpoint,
    sock: Option<Stream>,
    words: Vec<u8>,
    i: usize,
) -> (usize, Result<Option<Vec<u8>>, String>) {
    let r = async {
        // The caller's deadline bounds the whole, this connect included.
        let mut s = match sock {
            Some(s) => s,
            None => transport::connect(ep, Duration::from_secs(3600))
                .await
                .map_err(|e| e.message)?,
        };
        if !words.is_empty() && (s.write_all(&words).await.is_err() || s.flush().await.is_err()) {
            return Ok(None);
        }
        // The first read: a server's first reply comes in one write, and a server that sends
        // a few bytes of garbage and then nothing must not look silent.
        let mut buf = Vec::with_capacity(256);
        match s.read_buf(&mut buf).await {
            Ok(0) | Err(_) => Ok(None),
            Ok(_) => Ok(Some(buf)),
        }
    };
    (i, r.await)
}
