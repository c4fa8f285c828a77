use std::future::Future;
use std::time::Duration;

pub use crate::error::SetupError;
use crate::outcome::{LookupError, Outcome};
use crate::plan::Plan;
use crate::proto::caps::Caps;
use crate::proto::codec::{Request, Tally};
use crate::proto::sniff::{greet, Hello};
use crate::transport::{Endpoint, TlsInfo};

/// The server's own count of lookups, read before and after a run (server-side truth).
#[derive(Clone, Debug)]
pub struct ServerCount {
    pub value: u64,
    /// What was read, e.g. `pg_stat_statements.calls`.
    pub source: String,
    /// The server's count per op (`Op::index` order), where it counts writes; empty otherwise.
    pub ops: Vec<u64>,
    /// Who counted: changes when the server restarts or its counters are reset (memcached's
    /// pid and start time, Redis's run_id); None where it is not read. Two reads with
    /// different epochs cannot be subtracted.
    pub epoch: Option<String>,
    /// Each server of a pool: its own count, and the requests loadgen sent it so far.
    pub members: Vec<MemberCount>,
    /// What one multi-get request (`--batch N`, `mget:N`) adds to `value` and to its op's
    /// count: 1, or N where the server counts the keys it read (memcached's
    /// get_hits+get_misses, Handler_read_key). Every other request adds 1.
    pub per_request: u64,
    /// A Redis Cluster: the redirects loadgen followed so far (MOVED, ASK, TRYAGAIN,
    /// CLUSTERDOWN) and its re-reads of the slot map.
    pub redirects: Option<[u64; 5]>,
    /// SQL shards under `--batch`: a split multi-get is one statement per shard, and each is
    /// counted. The parts loadgen sent so far, which the count is checked against instead of
    /// requests × `per_request`.
    pub parts: Option<u64>,
}

/// One server of a pool as `ServerCount` reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberCount {
    pub server: String,
    pub value: u64,
    /// Requests loadgen routed to this server, from the target's start (warm-up included).
    pub sent: u64,
    /// The latencies of the requests this server answered so far, as the connections handed
    /// them in ([`crate::proto::server_latency`]).
    pub latency: Option<hdrhistogram::Histogram<u64>>,
    /// Of `sent`, those whose fate is unknown (no reply, or an error reply), in what the
    /// server counts.
    pub unsure: u64,
    /// This server's own epoch (its run id or start), to tell a restart of this one alone.
    pub epoch: Option<String>,
    /// Why this server's counter could not be read (it is down): `value` means nothing.
    pub missing: Option<String>,
    /// Times a connection to it was opened again so far (after it was lost or hung).
    pub reconnects: u64,
}

impl MemberCount {
    /// Server `server`, whose counter reads `value`, with what loadgen routed to it so far.
    pub fn new(
        server: String,
        value: u64,
        (sent, latency): (u64, &crate::proto::server_latency::ServerLatency),
        i: usize,
    ) -> MemberCount {
        MemberCount {
            server,
            value,
            sent,
            latency: Some(latency.of(i)),
            unsure: latency.unsure(i),
            epoch: None,
            missing: None,
            reconnects: latency.reopened(i),
        }
    }
}

impl ServerCount {
    /// In `ops`: the server counts this op only together with another op of the mix (memcached's
    /// `cmd_set` is every `set`, `add` and `replace`): no count of its own to compare.
    pub const UNCOUNTED: u64 = u64::MAX;

    /// The epoch of a server known only by its uptime (MariaDB's `Uptime`): its start time,
    /// now minus the uptime, in seconds since 1970, which two reads may see a second or two
    /// apart ([`same_epoch`]).
    pub fn started_epoch(start_s: u64) -> String {
        format!("started ~{start_s} s after 1970 (now - Uptime)")
    }

    /// A count of lookups only.
    pub fn reads(value: u64, source: impl Into<String>) -> ServerCount {
        ServerCount {
            value,
            source: source.into(),
            ops: Vec::new(),
            epoch: None,
            members: Vec::new(),
            per_request: 1,
            redirects: None,
            parts: None,
        }
    }
}

/// Whether two [`ServerCount::epoch`]s name one server lifetime: equal, or start times from
/// uptimes ([`ServerCount::started_epoch`]) within a couple of seconds of each other (whole
/// seconds of uptime, and the clock read a moment apart from the server's).
pub fn same_epoch(a: &str, b: &str) -> bool {
    let start = |e: &str| {
        e.strip_prefix("started ~")?
            .split(' ')
            .next()?
            .parse::<u64>()
            .ok()
    };
    match (start(a), start(b)) {
        (Some(x), Some(y)) => x.abs_diff(y) <= 2,
        _ => a == b,
    }
}

/// [`greet`] with `target`'s own first words ([`Target::hello`]) at its endpoint; Ok when it
/// has none.
pub async fn greet_target<T: Target>(target: &T, timeout: Duration) -> Result<(), String> {
    match target.hello() {
        Some(hello) => greet(target.endpoint(), &hello, timeout).await,
        None => Ok(()),
    }
}

pub trait Target: Send + Sync + 'static {
    type Conn: Conn;

    /// Short name of the target kind: `postgres`, `mysql`, `hs`, `memcache`, `redis`, `http`.
    fn kind(&self) -> &'static str;

    /// Where its connections go (TCP or a Unix socket), as the result reports it.
    fn endpoint(&self) -> &Endpoint;

    /// Opens one connection and does the per-connection setup (prepare, open index).
    fn connect(&self) -> impl Future<Output = Result<Self::Conn, LookupError>>;

    /// What its TLS connections negotiated, for the report (None: plain).
    fn tls(&self) -> Option<TlsInfo> {
        None
    }

    /// What the preflight sends first to name the server at the endpoint when it is not this
    /// protocol's ([`crate::proto::sniff::greet`]). None: the handshake's own replies tell
    /// (HandlerSocket), or TLS from the first byte.
    fn hello(&self) -> Option<Hello> {
        None
    }

    /// A set of servers (a memcached pool, a Redis Cluster, SQL shards): its servers'
    /// processes are read together ([`Self::endpoints`]).
    fn is_set(&self) -> bool {
        false
    }

    /// A set's servers, for live views (the metrics endpoint); None for one server.
    fn members(&self) -> Option<crate::proto::server_latency::SetMembers> {
        None
    }

    /// Where each server of a set listens, for their processes' CPU; the one endpoint else.
    fn endpoints(&self) -> impl Future<Output = Vec<Endpoint>> {
        async { vec![self.endpoint().clone()] }
    }

    /// The key of row `id` as this target names it on the wire (`--record-trace`): the id's
    /// digits, or the store's key (`usr:<id>`).
    fn key_name(&self, id: u64, out: &mut Vec<u8>) {
        crate::decimal::push(out, id)
    }

    /// The driver that runs it, where the protocol has a choice (`?driver=`): the result
    /// names the one that ran, which is not always the one asked for (MySQL's auth fallback).
    fn driver(&self) -> Option<&'static str> {
        None
    }

    /// What its driver can do: its protocol table row's capabilities (`caps.rs`), read by
    /// the one preflight that refuses what it cannot do.
    const CAPS: Caps;

    /// [`Self::CAPS`] as this target runs them: a set of servers takes one request in flight
    /// per connection.
    fn caps(&self) -> Caps {
        Self::CAPS
    }

    /// Ok when this target can run `plan` beyond what its capabilities say (a URL's shape, a
    /// mode); Err is the one line saying why not (preflight, exit 2).
    fn refuse(&self, _plan: &Plan) -> Result<(), SetupError> {
        Ok(())
    }

    /// Where inserts start when `--insert-from` is not given: above the keys the server holds
    /// (SQL: max(id) + 1), so a re-run continues; None: above `--keys`.
    fn insert_from(&self) -> impl Future<Output = Result<Option<u64>, SetupError>> {
        async { Ok(None) }
    }

    /// The server's settings that decide what a write costs (PostgreSQL `synchronous_commit`,
    /// `fsync`, `wal_sync_method`), read once before a run that writes; none where there are none.
    fn durability(&self) -> impl Future<Output = Vec<(String, String)>> {
        async { Vec::new() }
    }

    /// The server's own lookup counter, where the server has one. Err: the counter could not
    /// be read (said in the report, never fatal).
    fn server_count(&self) -> impl Future<Output = Result<Option<ServerCount>, SetupError>> {
        async { Ok(None) }
    }
}

pub trait Conn: 'static {
    /// Queues `req`. It reaches the wire no later than the next `recv`.
    fn send(&mut self, req: &Request);

    /// The reply to the oldest queued request, `req`. Must be cancel-safe: the request loop
    /// may drop it (timeout, next due time) and call it again.
    fn recv(&mut self, req: &Request) -> impl Future<Output = Result<Outcome, LookupError>>;

    /// Queues `req` with its key as a trace wrote it (`Target::named_keys`).
    fn send_named(&mut self, req: &Request, _key: &[u8]) {
        self.send(req)
    }

    /// Queues one multi-get of `keys` (`--batch`). Only called where its `Caps` have a multi-get.
    fn send_batch(&mut self, _keys: &[u64]) {
        unreachable!("the preflight refuses --batch where Caps have no multi-get")
    }

    /// The reply to the oldest queued multi-get, of `keys`: the request's outcome and its tally
    /// per key. Cancel-safe, as `recv`.
    fn recv_batch(
        &mut self,
        _keys: &[u64],
    ) -> impl Future<Output = Result<(Outcome, Tally), LookupError>> {
        async { unreachable!("the preflight refuses --batch where Caps have no multi-get") }
    }

    /// `--txn`: commits the connection's open transaction, short of its N writes when the run
    /// ends (nothing in flight). Ok(false): none was open.
    fn commit(&mut self) -> impl Future<Output = Result<bool, LookupError>> {
        async { Ok(false) }
    }

    /// Called once every request is answered, at the end of the run: Err when the server
    /// sends a reply within `grace` all the same, answering no request (out of step: its
    /// earlier replies were taken for the wrong requests). Library drivers check their own.
    fn settle(&mut self, _grace: Duration) -> impl Future<Output = Result<(), LookupError>> {
        async { Ok(()) }
    }

    /// The server the oldest request in flight waits on, where the connection spans several
    /// (a set's member); None: the target's one server.
    fn awaiting(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uptime_epochs_are_one_server_within_two_seconds() {
        let at = ServerCount::started_epoch;
        assert!(same_epoch(&at(1000), &at(1002)));
        assert!(same_epoch(&at(1002), &at(1000)));
        assert!(!same_epoch(&at(1000), &at(1003)));
        assert!(same_epoch("run_id 1", "run_id 1"));
        assert!(!same_epoch("run_id 1", "run_id 2"));
        assert!(!same_epoch(&at(1000), "run_id 1000"));
    }
}
