//! One lane's connection to a target that is one server or a set of servers: a memcached pool
//! (`memcache://h1:p1,h2:p2`, keys placed by ketama as libmemcached's clients place them) or a
//! Redis Cluster (`redis://h:p?cluster=1`, keys placed by hash slot). Every request goes to the
//! server its key's [`Router`] names; replies are taken in the order the requests went out:
//! the servers each request went to are kept in that order.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::key_format::KeyFormat;
use crate::outcome::{LookupError, Outcome};
use crate::proto::codec::{Codec, Request, Tally};
use crate::proto::pipelined::StreamConn;
use crate::proto::target::Conn;

/// Which server of a set owns a key (its index in the set's order).
pub trait Router: Send + Sync {
    fn owner(&self, key: &[u8]) -> usize;
}

/// A set's router and the run's count of requests routed to each server.
pub type Route = (Arc<dyn Router>, Arc<[AtomicU64]>);

pub struct Routed<C: Codec> {
    /// One connection per server, in the set's order.
    conns: Vec<StreamConn<C>>,
    /// None: one server.
    pool: Option<Route>,
    keys: KeyFormat,
    /// The server of each request in flight, oldest first.
    sent: VecDeque<usize>,
}

impl<C: Codec> Routed<C> {
    pub fn new(conns: Vec<StreamConn<C>>, pool: Option<Route>, keys: KeyFormat) -> Self {
        Routed {
            conns,
            pool,
            keys,
            sent: VecDeque::with_capacity(16),
        }
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
}

impl<C: Codec + 'static> Conn for Routed<C> {
    #[inline]
    fn send(&mut self, req: &Request) {
        let i = self.owner_of(req.key);
        self.sent.push_back(i);
        self.conns[i].send(req);
    }

    fn send_named(&mut self, req: &Request, key: &[u8]) {
        let i = self.owner(key);
        self.sent.push_back(i);
        self.conns[i].send_named(req, key);
    }

    /// Cancel-safe as the server's own connection is: the request's server is dropped from
    /// `sent` only once its reply is taken.
    #[inline]
    async fn recv(&mut self, req: &Request) -> Result<Outcome, LookupError> {
        let i = self.sent.front().copied().unwrap_or(0);
        let r = self.conns[i].recv(req).await;
        self.sent.pop_front();
        r
    }

    /// Multi-gets go to one server (`Target::batch` refuses them on a set).
    fn send_batch(&mut self, keys: &[u64]) {
        self.sent.push_back(0);
        self.conns[0].send_batch(keys);
    }

    async fn recv_batch(&mut self, keys: &[u64]) -> Result<(Outcome, Tally), LookupError> {
        let r = self.conns[0].recv_batch(keys).await;
        self.sent.pop_front();
        r
    }

    async fn settle(&mut self, grace: Duration) -> Result<(), LookupError> {
        for c in &mut self.conns {
            c.settle(grace).await?;
        }
        Ok(())
    }
}
