//! One lane's connection to a target that is one server or a set of servers: a memcached pool
//! (`memcache://h1:p1,h2:p2`, keys placed by ketama as libmemcached's clients place them) or a
//! Redis Cluster (`redis://h:p?cluster=1`, keys placed by hash slot). Every request goes to the
//! server its key's [`Router`] names; replies are taken in the order the requests went out:
//! the servers each request went to are kept in that order.
//!
//! In a set, a server whose connection breaks is dropped alone: its keys fail at once (as
//! connect errors, never sent) while the other servers' keys go on, and it is opened again at
//! most every [`RETRY`] until it answers, as a libmemcached client treats a dead server.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::key_format::KeyFormat;
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::proto::codec::{Codec, Request, Tally};
use crate::proto::pipelined::StreamConn;
use crate::proto::target::Conn;

/// Which server of a set owns a key (its index in the set's order).
pub trait Router: Send + Sync {
    fn owner(&self, key: &[u8]) -> usize;

    /// Where a server's error reply that is a redirect (a Redis Cluster's `MOVED slot
    /// host:port` or `ASK slot host:port`) sends its request: the server, and whether only
    /// this request goes there (ASK) rather than the key's slot from now on (MOVED).
    fn redirect(&self, _message: &str) -> Option<(usize, bool)> {
        None
    }

    /// What to send before a request redirected for itself alone (Redis's `ASKING`), and the
    /// start of the reply it gets.
    fn asking(&self) -> (&'static [u8], &'static [u8]) {
        (b"", b"")
    }
}

/// A set's router and the run's count of requests routed to each server.
pub type Route = (Arc<dyn Router>, Arc<[AtomicU64]>);

/// Opens the connection to server `i` of a set again.
pub type Reopen<C> =
    Box<dyn Fn(usize) -> Pin<Box<dyn Future<Output = Result<StreamConn<C>, LookupError>>>>>;

/// How often a lane tries a server of its set that is down.
pub const RETRY: Duration = Duration::from_millis(500);

pub struct Routed<C: Codec> {
    /// One connection per server, in the set's order; None while that server is down.
    conns: Vec<Option<StreamConn<C>>>,
    /// None: one server.
    pool: Option<Route>,
    keys: KeyFormat,
    /// The server of each request in flight, oldest first.
    sent: VecDeque<usize>,
    /// A set's way to open one server again, and when each down server may be tried next.
    reopen: Option<(Reopen<C>, Vec<Instant>)>,
    /// Each server's address, for messages.
    names: Vec<String>,
}

impl<C: Codec + 'static> Routed<C> {
    pub fn new(conns: Vec<StreamConn<C>>, pool: Option<Route>, keys: KeyFormat) -> Self {
        Routed {
            conns: conns.into_iter().map(Some).collect(),
            pool,
            keys,
            sent: VecDeque::with_capacity(16),
            reopen: None,
            names: Vec::new(),
        }
    }

    /// A set that opens a server again after its connection broke (see the module); `names`
    /// are the servers' addresses, in the set's order.
    pub fn reopening(mut self, reopen: Reopen<C>, names: Vec<String>) -> Self {
        let now = Instant::now();
        self.reopen = Some((reopen, vec![now; self.conns.len()]));
        self.names = names;
        self
    }

    /// The server of `key`, counted as routed there.
    #[inline]
    fn owner(&self, key: &[u8]) -> usize {
        match &self.pool {
            None => 0,
            Some((ring, routed)) => {
                let i = ring.owner(key);
                routed[i].fetch_add(1, Ordering::Relaxed);
                i
            }
        }
    }

    #[inline]
    fn owner_of(&self, id: u64) -> usize {
        match &self.pool {
            None => 0,
            Some(_) => {
                let (key, n) = self.keys.on_stack(id);
                self.owner(&key[..n])
            }
        }
    }

    /// Sends `req`, which server `from` redirected, to server `to` (after `asking` for a
    /// redirect of this request alone) and takes its reply: the request counts as `to`'s.
    async fn follow(
        &mut self,
        from: usize,
        to: usize,
        ask: bool,
        req: &Request,
    ) -> Result<Outcome, LookupError> {
        let Some((router, routed)) = &self.pool else {
            return Err(LookupError::protocol("a redirect outside a set of servers"));
        };
        routed[from].fetch_sub(1, Ordering::Relaxed);
        routed[to].fetch_add(1, Ordering::Relaxed);
        let (asking, ok) = router.asking();
        let Some(c) = &mut self.conns[to] else {
            return Err(self.down(to, "not connected").await);
        };
        if ask {
            // One reply line; it must start with `ok`.
            let line = |b: &[u8]| {
                Ok(b.iter()
                    .position(|&x| x == b'\n')
                    .map(|n| (n + 1, b.starts_with(ok))))
            };
            if !c.round_trip(asking, line).await? {
                return Err(LookupError::protocol(
                    "the redirect's server did not accept ASKING",
                ));
            }
        }
        c.send(req);
        c.recv(req).await
    }

    /// Server `i` is down: the request that found it so fails, and the server is tried again
    /// once [`RETRY`] has passed since the last try.
    async fn down(&mut self, i: usize, why: &str) -> LookupError {
        if let Some((reopen, next)) = &mut self.reopen {
            if Instant::now() >= next[i] {
                next[i] = Instant::now() + RETRY;
                if let Ok(c) = reopen(i).await {
                    self.conns[i] = Some(c);
                }
            }
        }
        LookupError::new(
            ErrorKind::Connect,
            false,
            format!(
                "{} is down ({why}): its keys fail until it is back",
                self.names
                    .get(i)
                    .map_or("a server of the set", String::as_str)
            ),
        )
    }
}

impl<C: Codec + 'static> Conn for Routed<C> {
    #[inline]
    fn send(&mut self, req: &Request) {
        // One server: its own connection, with no queue of servers to keep.
        if let (None, Some(c)) = (&self.pool, &mut self.conns[0]) {
            return c.send(req);
        }
        let i = self.owner_of(req.key);
        self.sent.push_back(i);
        if let Some(c) = &mut self.conns[i] {
            c.send(req);
        }
    }

    fn send_named(&mut self, req: &Request, key: &[u8]) {
        if let (None, Some(c)) = (&self.pool, &mut self.conns[0]) {
            return c.send_named(req, key);
        }
        let i = self.owner(key);
        self.sent.push_back(i);
        if let Some(c) = &mut self.conns[i] {
            c.send_named(req, key);
        }
    }

    /// Cancel-safe as the server's own connection is: the request's server is dropped from
    /// `sent` only once its reply is taken.
    #[inline]
    async fn recv(&mut self, req: &Request) -> Result<Outcome, LookupError> {
        if let (None, Some(c)) = (&self.pool, &mut self.conns[0]) {
            return c.recv(req).await;
        }
        let i = self.sent.front().copied().unwrap_or(0);
        let Some(c) = &mut self.conns[i] else {
            self.sent.pop_front();
            return Err(self.down(i, "not connected").await);
        };
        let r = c.recv(req).await;
        self.sent.pop_front();
        match r {
            // In a set only this server's connection is lost; the lane goes on with the others.
            Err(e) if e.fatal && self.reopen.is_some() => {
                self.conns[i] = None;
                Err(self.down(i, &e.message).await)
            }
            Err(e) => match self.pool.as_ref().and_then(|(r, _)| r.redirect(&e.message)) {
                Some((to, ask)) => self.follow(i, to, ask, req).await,
                None => Err(e),
            },
            r => r,
        }
    }

    /// Multi-gets go to one server: `Target::batch` refuses them on a set, whose connections
    /// are the only ones that can be down.
    fn send_batch(&mut self, keys: &[u64]) {
        if let Some(c) = &mut self.conns[0] {
            c.send_batch(keys);
        }
    }

    async fn recv_batch(&mut self, keys: &[u64]) -> Result<(Outcome, Tally), LookupError> {
        match &mut self.conns[0] {
            Some(c) => c.recv_batch(keys).await,
            None => Err(LookupError::io("not connected")),
        }
    }

    async fn settle(&mut self, grace: Duration) -> Result<(), LookupError> {
        for c in self.conns.iter_mut().flatten() {
            c.settle(grace).await?;
        }
        Ok(())
    }
}
