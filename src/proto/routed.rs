//! One lane's connection to a target that is one server or a set of servers: a memcached pool
//! (`memcache://h1:p1,h2:p2`, keys placed by ketama as libmemcached's clients place them) or a
//! Redis Cluster (`redis://h:p?cluster=1`, keys placed by hash slot). Every request goes to the
//! server its key's [`Router`] names; replies are taken in the order the requests went out:
//! the servers each request went to are kept in that order.
//!
//! A multi-get (`--batch N`) on a set is split by owner: one `get k1 .. kn` (memcached) per
//! server, one `MGET` per hash slot (Redis Cluster: an MGET's keys must share a slot), sent
//! together and their replies taken in turn, so a request costs each server one request.
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
use crate::proto::server_latency::{LocalLatency, ServerLatency};
use crate::proto::target::Conn;

mod multi_get;
mod parts;
use parts::MultiGet;

/// Which server of a set owns a key (its index in the set's order).
pub trait Router: Send + Sync {
    fn owner(&self, key: &[u8]) -> usize;

    /// The owner of row `id` where the set places rows by id (SQL shards' key ranges); None:
    /// by the key's name ([`Self::owner`]).
    fn owner_id(&self, _id: u64) -> Option<usize> {
        None
    }

    /// What a multi-get part of `keys` keys adds to its server's routed count: its keys where
    /// the server counts keys (memcached, Redis), 1 where it counts statements (SQL shards).
    fn weight(&self, keys: usize) -> u64 {
        keys as u64
    }

    /// The key's owner, and the group of keys one multi-get may read together there: the
    /// owner itself, or on a Redis Cluster the key's hash slot.
    fn place(&self, key: &[u8]) -> (usize, usize) {
        let owner = self.owner(key);
        (owner, owner)
    }

    /// What a server's error reply asks for when it is a redirect (a Redis Cluster's `MOVED`,
    /// `ASK` or `TRYAGAIN`); None for any other error.
    fn redirect(&self, _message: &str) -> Option<Redirect> {
        None
    }

    /// What to send before a request redirected for itself alone (Redis's `ASKING`), and the
    /// start of the reply it gets.
    fn asking(&self) -> (&'static [u8], &'static [u8]) {
        (b"", b"")
    }

    /// Reads the set's placement again, when it is the set's to tell (a Redis Cluster's slot
    /// map), after server `at` was lost or refused; None where placement is fixed.
    fn reread(&self, _at: usize) -> Option<Pin<Box<dyn Future<Output = ()> + '_>>> {
        None
    }
}

/// Where a redirected request goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// To this server, as its key's slot does from now on.
    Moved(usize),
    /// To this server, this request alone, after `asking` (a slot being migrated).
    Ask(usize),
    /// To the same server again after [`TRYAGAIN_PAUSE`]: a multi-key request whose keys a
    /// migration has split.
    TryAgain,
    /// To the same server again, with a growing pause, within the request's timeout: the set
    /// is failing over (Redis's `CLUSTERDOWN`).
    Down,
}

/// Where a request redirected by `r` from server `at` goes, and whether it must ask first.
fn hop(at: usize, r: Redirect) -> (usize, bool) {
    match r {
        Redirect::Moved(to) => (to, false),
        Redirect::Ask(to) => (to, true),
        Redirect::TryAgain | Redirect::Down => (at, false),
    }
}

/// The pause before the `n`th try of a request the set answered [`Redirect::Down`].
fn down_pause(n: u32) -> Duration {
    (TRYAGAIN_PAUSE * 2u32.saturating_pow(n)).min(Duration::from_millis(200))
}

/// How long a request answered `TRYAGAIN` waits before it is sent again.
pub const TRYAGAIN_PAUSE: Duration = Duration::from_millis(10);

/// How many redirects one request follows before its last error stands.
const MAX_HOPS: usize = 8;

/// A set's router and the run's count of requests routed to each server.
pub type Route = (Arc<dyn Router>, Arc<[AtomicU64]>);

/// Opens the connection to server `i` of a set again.
pub type Reopen<C> =
    Box<dyn Fn(usize) -> Pin<Box<dyn Future<Output = Result<StreamConn<C>, LookupError>>>>>;

/// Opens server `0..n` of a set with `open`. One that cannot be reached is down, as one lost
/// mid-run (its keys fail until it answers, or a failover gives them to another): Err only
/// when none can be reached, or for another error (a login refused).
pub async fn open_each<C: Codec, F, Fut>(
    n: usize,
    open: F,
) -> Result<Vec<Option<StreamConn<C>>>, LookupError>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<StreamConn<C>, LookupError>>,
{
    let mut conns = Vec::with_capacity(n);
    let mut first_error = None;
    for i in 0..n {
        match open(i).await {
            Ok(c) => conns.push(Some(c)),
            Err(e) if e.kind == ErrorKind::Connect || e.fatal => {
                first_error.get_or_insert(e);
                conns.push(None);
            }
            Err(e) => return Err(e),
        }
    }
    match first_error {
        Some(e) if conns.iter().all(Option::is_none) => Err(e),
        _ => Ok(conns),
    }
}

/// How often a lane tries a server of its set that is down.
pub const RETRY: Duration = Duration::from_millis(500);

pub struct Routed<C: Codec> {
    /// One connection per server, in the set's order; None while that server is down.
    conns: Vec<Option<StreamConn<C>>>,
    /// None: one server.
    pool: Option<Route>,
    keys: KeyFormat,
    /// The server of each request in flight, when it was sent, and whether it went out
    /// (counted as routed there: its server was up), oldest first.
    sent: VecDeque<(usize, Instant, bool)>,
    /// A set's way to open one server again, and when each down server may be tried next.
    reopen: Option<(Reopen<C>, Vec<Instant>)>,
    /// Each down server's opening under way: polled when its keys come, never waited for.
    opening: Vec<Option<Opening<C>>>,
    /// Each server's address, for messages.
    names: Vec<String>,
    /// The multi-get in flight on a set.
    multi: MultiGet,
    /// Each server's latencies, when the set's are kept ([`Self::timed`]).
    latency: Option<LocalLatency>,
    /// How long a request may be tried again while the set fails over: within its timeout.
    patience: Duration,
    /// How long a set's server may take to answer before it is taken for hung: its
    /// connection is dropped alone, before the request's own timeout drops every server's.
    hang_after: Duration,
}

/// A server of a set being opened again.
type Opening<C> = Pin<Box<dyn Future<Output = Result<StreamConn<C>, LookupError>>>>;

impl<C: Codec + 'static> Routed<C> {
    pub fn new(conns: Vec<StreamConn<C>>, pool: Option<Route>, keys: KeyFormat) -> Self {
        Self::with_down(conns.into_iter().map(Some).collect(), pool, keys)
    }

    /// A set some of whose servers could not be opened (None): their keys fail until they are.
    pub fn with_down(
        conns: Vec<Option<StreamConn<C>>>,
        pool: Option<Route>,
        keys: KeyFormat,
    ) -> Self {
        Routed {
            opening: conns.iter().map(|_| None).collect(),
            conns,
            pool,
            keys,
            sent: VecDeque::with_capacity(16),
            reopen: None,
            names: Vec::new(),
            multi: MultiGet::default(),
            latency: None,
            patience: Duration::from_secs(1),
            hang_after: Duration::MAX,
        }
    }

    /// Tries a request again while the set fails over for at most most of `timeout`, so its
    /// last error stands before the request's own timeout ends the connection.
    pub fn patient(mut self, timeout: Duration) -> Self {
        self.patience = timeout * 3 / 4;
        self.hang_after = timeout * 9 / 10;
        self
    }

    /// A set that opens a server again after its connection broke (see the module); `names`
    /// are the servers' addresses, in the set's order.
    pub fn reopening(mut self, reopen: Reopen<C>, names: Vec<String>) -> Self {
        let now = Instant::now();
        self.reopen = Some((reopen, vec![now; self.conns.len()]));
        self.names = names;
        self
    }

    /// Records each server's latencies into `shared` (a set's report lines).
    pub fn timed(mut self, shared: Arc<ServerLatency>) -> Self {
        self.latency = Some(LocalLatency::new(shared));
        self
    }

    /// `n` of what server `i` counts (requests, or keys) went out to it, and their fate is
    /// unknown: no reply, or an error reply.
    fn unsure(&self, i: usize, n: u64) {
        if let Some(l) = &self.latency {
            l.unsure(i, n);
        }
    }

    /// A reply from server `i` to a request sent at `since`.
    #[inline]
    fn took(&mut self, i: usize, since: Instant) {
        if let Some(l) = &mut self.latency {
            l.record(i, since.elapsed().as_nanos() as u64);
        }
    }

    /// The server of `key`.
    #[inline]
    fn owner(&self, key: &[u8]) -> usize {
        self.pool.as_ref().map_or(0, |(ring, _)| ring.owner(key))
    }

    /// A request for server `i` goes out: counted as routed there when its connection is up
    /// (a request for a server that is down is never sent, and fails as a connect error).
    #[inline]
    fn route(&mut self, i: usize) -> Option<&mut StreamConn<C>> {
        self.sent
            .push_back((i, Instant::now(), self.conns[i].is_some()));
        let c = self.conns[i].as_mut()?;
        if let Some((_, routed)) = &self.pool {
            routed[i].fetch_add(1, Ordering::Relaxed);
        }
        Some(c)
    }

    #[inline]
    fn owner_of(&self, id: u64) -> usize {
        match &self.pool {
            None => 0,
            Some((router, _)) => router.owner_id(id).unwrap_or_else(|| {
                let (key, n) = self.keys.on_stack(id);
                self.owner(&key[..n])
            }),
        }
    }

    /// Moves a redirected request (`n`: what the servers count of it) from server `from` to
    /// `to` in the routed counts,
    /// and on `to` sends `asking` first when the redirect is for this request alone.
    async fn redirected(
        &mut self,
        from: usize,
        to: usize,
        ask: bool,
        n: u64,
    ) -> Result<(), LookupError> {
        let Some((router, routed)) = &self.pool else {
            return Err(LookupError::protocol("a redirect outside a set of servers"));
        };
        // The server that redirected counted no read; the one it names counts it, if it is up.
        routed[from].fetch_sub(n, Ordering::Relaxed);
        let (asking, ok) = router.asking();
        let Some(c) = &mut self.conns[to] else {
            return Err(self.down(to, "not connected").await);
        };
        routed[to].fetch_add(n, Ordering::Relaxed);
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
        Ok(())
    }

    /// The redirect `e` asks for (counted once here); None when it is none.
    fn redirect_of(&self, e: &LookupError) -> Option<Redirect> {
        let (router, _) = self.pool.as_ref()?;
        router.redirect(&e.message)
    }

    /// Takes the reply to `req` from server `i`, following redirects: the request counts as
    /// the server that answered it.
    async fn recv_at(
        &mut self,
        mut i: usize,
        since: Instant,
        req: &Request,
    ) -> Result<Outcome, LookupError> {
        let Some(c) = &mut self.conns[i] else {
            return Err(self.down(i, "not connected").await);
        };
        let deadline = since.checked_add(self.hang_after);
        let mut r = match deadline {
            Some(d) => match tokio::time::timeout_at(d.into(), c.recv(req)).await {
                Ok(r) => r,
                Err(_) => return Err(self.hung(i)),
            },
            None => c.recv(req).await,
        };
        let (mut hops, mut waits) = (0, 0);
        loop {
            let e = match r {
                Err(e) => e,
                Ok(o) => {
                    self.took(i, since);
                    return Ok(o);
                }
            };
            // In a set only this server's connection is lost; the lane goes on with the others.
            if e.fatal && self.reopen.is_some() {
                self.conns[i] = None;
                return Err(self.down(i, &e.message).await);
            }
            let Some(redirect) = self.redirect_of(&e) else {
                return Err(e);
            };
            if redirect == Redirect::Down {
                // Failing over: the map may name new masters; the same server is tried again.
                let pause = down_pause(waits);
                if since.elapsed() + pause > self.patience {
                    return Err(e);
                }
                waits += 1;
                self.reread(i).await;
                tokio::time::sleep(pause).await;
            } else {
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(e);
                }
                if redirect == Redirect::TryAgain {
                    tokio::time::sleep(TRYAGAIN_PAUSE).await;
                }
            }
            let (to, ask) = hop(i, redirect);
            let moved = self.redirected(i, to, ask, 1).await;
            i = to;
            // A `recv` dropped and called again takes the reply from where it was sent last;
            // a redirect to a server that is down never went out.
            if let Some(front) = self.sent.front_mut() {
                (front.0, front.2) = (to, self.conns[to].is_some());
            }
            moved?;
            let Some(c) = &mut self.conns[i] else {
                return Err(self.down(i, "not connected").await);
            };
            c.send(req);
            r = c.recv(req).await;
        }
    }

    /// Reads the set's placement again after server `i` was lost or refused (at most a few
    /// times a second for the whole run: see the router).
    async fn reread(&self, i: usize) {
        if let Some(f) = self.pool.as_ref().and_then(|(router, _)| router.reread(i)) {
            f.await;
        }
    }

    /// Server `i` is down: the request that found it so fails, and the server is tried again
    /// once [`RETRY`] has passed since the last try.
    async fn down(&mut self, i: usize, why: &str) -> LookupError {
        // A lost master may have been failed over: its slots then have another.
        self.reread(i).await;
        self.try_open(i);
        LookupError::new(
            ErrorKind::Connect,
            false,
            format!(
                "{} is down ({why}): its keys fail until it is back",
                self.name(i)
            ),
        )
    }

    /// Server `i` did not answer in time: its connection alone is dropped (a late reply
    /// would be out of step), and its keys fail until it answers a new one.
    fn hung(&mut self, i: usize) -> LookupError {
        self.conns[i] = None;
        if let Some((_, next)) = &mut self.reopen {
            next[i] = Instant::now();
        }
        self.try_open(i);
        LookupError::new(
            ErrorKind::Timeout,
            false,
            format!(
                "{} did not answer within {:?}: its keys fail until it answers",
                self.name(i),
                self.hang_after
            ),
        )
    }

    fn name(&self, i: usize) -> &str {
        self.names
            .get(i)
            .map_or("a server of the set", String::as_str)
    }

    /// Opens server `i` again, once [`RETRY`] has passed since the last try: started here
    /// and polled each time its keys come, never waited for, so a server that accepts but
    /// never answers holds up no request of another.
    fn try_open(&mut self, i: usize) {
        use futures_util::FutureExt;
        let Some((reopen, next)) = &mut self.reopen else {
            return;
        };
        if self.opening[i].is_none() {
            if Instant::now() < next[i] {
                return;
            }
            next[i] = Instant::now() + RETRY;
            self.opening[i] = Some(reopen(i));
        }
        let Some(f) = self.opening[i].as_mut() else {
            return;
        };
        match f.as_mut().now_or_never() {
            None => {}
            Some(r) => {
                self.opening[i] = None;
                if let Ok(c) = r {
                    self.conns[i] = Some(c);
                    if let Some(l) = &self.latency {
                        l.reopened(i);
                    }
                }
            }
        }
    }
}

/// A connection given up (a timeout, a lost server, the end): what it still waited for went
/// out, and is of unknown fate to its server.
impl<C: Codec> Drop for Routed<C> {
    fn drop(&mut self) {
        let Some(l) = &self.latency else {
            return;
        };
        for &(i, _, out) in &self.sent {
            if out {
                l.unsure(i, 1);
            }
        }
        for (server, n) in self.multi.outstanding() {
            l.unsure(
                server,
                self.pool.as_ref().map_or(n, |(r, _)| r.weight(n as usize)),
            );
        }
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
        if let Some(c) = self.route(i) {
            c.send(req);
        }
    }

    fn send_named(&mut self, req: &Request, key: &[u8]) {
        if let (None, Some(c)) = (&self.pool, &mut self.conns[0]) {
            return c.send_named(req, key);
        }
        let i = self.owner(key);
        if let Some(c) = self.route(i) {
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
        let (i, since, _) = self
            .sent
            .front()
            .copied()
            .unwrap_or((0, Instant::now(), false));
        let r = self.recv_at(i, since, req).await;
        if let (Err(_), Some(&(at, _, true))) = (&r, self.sent.front()) {
            self.unsure(at, 1);
        }
        self.sent.pop_front();
        r
    }

    /// On a set, one request per server (per slot on a Redis Cluster) with the keys it owns
    /// (`multi_get`).
    fn send_batch(&mut self, keys: &[u64]) {
        match &self.pool {
            Some(_) => self.send_split(keys),
            None => {
                if let Some(c) = &mut self.conns[0] {
                    c.send_batch(keys);
                }
            }
        }
    }

    async fn recv_batch(&mut self, keys: &[u64]) -> Result<(Outcome, Tally), LookupError> {
        match (&self.pool, &mut self.conns[0]) {
            (Some(_), _) => self.recv_split().await,
            (None, Some(c)) => c.recv_batch(keys).await,
            (None, None) => Err(LookupError::io("not connected")),
        }
    }

    fn awaiting(&self) -> Option<String> {
        self.pool.as_ref()?;
        let (i, _, _) = self.sent.front()?;
        self.names.get(*i).cloned()
    }

    /// Also hands this connection's latencies per server in: a run step ends here.
    async fn settle(&mut self, grace: Duration) -> Result<(), LookupError> {
        if let Some(l) = &mut self.latency {
            l.hand_in();
        }
        for c in self.conns.iter_mut().flatten() {
            c.settle(grace).await?;
        }
        Ok(())
    }
}
