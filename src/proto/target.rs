use std::future::Future;

use crate::mix::Mix;
use crate::outcome::{LookupError, Outcome};
use crate::proto::codec::{Request, Tally};
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
}

impl ServerCount {
    /// In `ops`: the server counts this op only together with another op of the mix (memcached's
    /// `cmd_set` is every `set`, `add` and `replace`): no count of its own to compare.
    pub const UNCOUNTED: u64 = u64::MAX;

    /// A count of lookups only.
    pub fn reads(value: u64, source: impl Into<String>) -> ServerCount {
        ServerCount {
            value,
            source: source.into(),
            ops: Vec::new(),
            epoch: None,
        }
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

    /// The driver that runs it, where the protocol has a choice (`?driver=`): the result
    /// names the one that ran, which is not always the one asked for (MySQL's auth fallback).
    fn driver(&self) -> Option<&'static str> {
        None
    }

    /// Requests one connection can have in flight (1 where the protocol cannot pipeline).
    fn max_pipeline(&self) -> usize;

    /// Ok when this target can run every op of `mix`; Err is the one line saying why not
    /// (checked in preflight, exit 2). Targets that write override it.
    fn writes(&self, mix: &Mix) -> Result<(), String> {
        match mix.ops().find(|o| o.writes()) {
            None => Ok(()),
            Some(op) => Err(format!(
                "--mix {}: this {} target cannot {} yet; use --mix read=100 (the default) here",
                mix.name(),
                self.kind(),
                op.name()
            )),
        }
    }

    /// Ok when this target can read `n` keys per request (`--batch`); Err is the one line
    /// saying why not (preflight, exit 2). Targets with a multi-get override it.
    fn batch(&self, n: usize) -> Result<(), String> {
        match n {
            1 => Ok(()),
            _ => Err(format!(
                "--batch {n}: this {} target has no multi-get in loadgen yet; leave --batch out (memcached and Redis have one)",
                self.kind()
            )),
        }
    }

    /// Ok when this target can group `n` writes per transaction (`--txn`); Err is the one
    /// line saying why not (preflight, exit 2). SQL targets that group writes override it.
    fn txn(&self, n: usize) -> Result<(), String> {
        match n {
            1 => Ok(()),
            _ => Err(format!(
                "--txn {n}: this {} target does not group writes into transactions; leave --txn out (every write is its own)",
                self.kind()
            )),
        }
    }

    /// Where inserts start when `--insert-from` is not given: above the keys the server holds
    /// (SQL: max(id) + 1), so a re-run continues; None: above `--keys`.
    fn insert_from(&self) -> impl Future<Output = Result<Option<u64>, String>> {
        async { Ok(None) }
    }

    /// The server's settings that decide what a write costs (PostgreSQL `synchronous_commit`,
    /// `fsync`, `wal_sync_method`), read once before a run that writes; none where there are none.
    fn durability(&self) -> impl Future<Output = Vec<(String, String)>> {
        async { Vec::new() }
    }

    /// The server's own lookup counter, where the server has one. Err: the counter could not
    /// be read (said in the report, never fatal).
    fn server_count(&self) -> impl Future<Output = Result<Option<ServerCount>, String>> {
        async { Ok(None) }
    }
}

pub trait Conn: 'static {
    /// Queues `req`. It reaches the wire no later than the next `recv`.
    fn send(&mut self, req: &Request);

    /// The reply to the oldest queued request, `req`. Must be cancel-safe: the request loop
    /// may drop it (timeout, next due time) and call it again.
    fn recv(&mut self, req: &Request) -> impl Future<Output = Result<Outcome, LookupError>>;

    /// Queues one multi-get of `keys` (`--batch`). Only called where `Target::batch` said yes.
    fn send_batch(&mut self, _keys: &[u64]) {
        unreachable!("Target::batch refuses --batch for this driver in preflight")
    }

    /// The reply to the oldest queued multi-get, of `keys`: the request's outcome and its tally
    /// per key. Cancel-safe, as `recv`.
    fn recv_batch(
        &mut self,
        _keys: &[u64],
    ) -> impl Future<Output = Result<(Outcome, Tally), LookupError>> {
        async { unreachable!("Target::batch refuses --batch for this driver in preflight") }
    }
}

/// Setup failures: bad input or an unusable target. The message is the one line the user sees.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupError(pub String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

impl From<String> for SetupError {
    fn from(s: String) -> Self {
        SetupError(s)
    }
}
