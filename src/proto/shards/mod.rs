//! Sharded SQL: one target made of several servers (or databases), each holding a range of
//! ids (`ranges`). Every lookup goes to the shard that owns its id, over a connection per
//! shard ([`Routed`]); a multi-get is split into one statement per shard. Each shard keeps
//! its own server count, share and latency, and the target's count is their sum.

pub mod ranges;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::key_format::KeyFormat;
use crate::mix::Op;
use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::caps::Caps;
use crate::proto::codec::Codec;
use crate::proto::pipelined::StreamConn;
use crate::proto::routed::{Reopen, Route, Routed};
use crate::proto::server_latency::{ServerLatency, SetMembers};
use crate::proto::target::{MemberCount, ServerCount, SetupError, Target};
use crate::transport::{Endpoint, TlsInfo};
use ranges::{Ranges, Shard};

pub struct Shards<T> {
    shards: Arc<Vec<T>>,
    /// Each shard's redacted URL, for its report line and messages.
    labels: Vec<String>,
    /// Each shard's address and database (`host:port/db`), a metric label: never a URL.
    names: Vec<String>,
    router: Arc<Ranges>,
    /// What was routed to each shard: requests, or multi-get parts (`Ranges::weight`).
    routed: Arc<[AtomicU64]>,
    latency: Arc<ServerLatency>,
    /// A shard counts one per statement while a request is `--batch` keys.
    parts: bool,
}

impl<T: Target> Shards<T> {
    /// `targets`: one per shard, in `shards` order. `parts`: the shards count a multi-get as
    /// one statement (SQL under `--batch`), not as its keys (HandlerSocket).
    pub fn new(shards: &[Shard], targets: Vec<T>, parts: bool) -> Shards<T> {
        Shards {
            labels: shards.iter().map(|s| s.label.clone()).collect(),
            names: shards
                .iter()
                .zip(&targets)
                .map(|(s, t)| format!("{}/{}", t.endpoint(), s.url.path))
                .collect(),
            router: Arc::new(Ranges::new(shards, parts)),
            routed: (0..shards.len()).map(|_| AtomicU64::new(0)).collect(),
            latency: ServerLatency::new(shards.len()),
            shards: Arc::new(targets),
            parts,
        }
    }

    fn first(&self) -> &T {
        &self.shards[0]
    }
}

/// A and B counted together: counts per op add up, and one that a server does not count
/// alone stays uncounted.
fn add(a: ServerCount, b: ServerCount) -> ServerCount {
    let ops = match (a.ops.len(), b.ops.len()) {
        (x, y) if x == y => a
            .ops
            .iter()
            .zip(&b.ops)
            .map(
                |(&x, &y)| match x == ServerCount::UNCOUNTED || y == ServerCount::UNCOUNTED {
                    true => ServerCount::UNCOUNTED,
                    false => x + y,
                },
            )
            .collect(),
        _ => Vec::new(),
    };
    let epoch = match (a.epoch, b.epoch) {
        (Some(x), Some(y)) => Some(format!("{x}; {y}")),
        (x, y) => x.or(y),
    };
    ServerCount {
        value: a.value + b.value,
        ops,
        epoch,
        ..a
    }
}

impl<T, C> Target for Shards<T>
where
    T: Target<Conn = StreamConn<C>>,
    C: Codec + 'static,
{
    type Conn = Routed<C>;

    fn kind(&self) -> &'static str {
        self.first().kind()
    }

    fn endpoint(&self) -> &Endpoint {
        self.first().endpoint()
    }

    fn driver(&self) -> Option<&'static str> {
        self.first().driver()
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.first().tls()
    }

    fn is_set(&self) -> bool {
        true
    }

    async fn endpoints(&self) -> Vec<Endpoint> {
        self.shards.iter().map(|s| s.endpoint().clone()).collect()
    }

    fn members(&self) -> Option<SetMembers> {
        Some(SetMembers {
            names: self.names.clone(),
            routed: self.routed.clone(),
            latency: self.latency.clone(),
        })
    }

    /// A connection to every shard; a shard whose connection breaks is opened again alone.
    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        let mut conns = Vec::with_capacity(self.shards.len());
        for (s, label) in self.shards.iter().zip(&self.labels) {
            let c = s.connect().await.map_err(|mut e| {
                e.message = format!("{label}: {}", e.message);
                e
            })?;
            conns.push(c);
        }
        let route: Route = (self.router.clone(), self.routed.clone());
        let shards = self.shards.clone();
        let reopen: Reopen<C> = Box::new(move |i| {
            let shards = shards.clone();
            Box::pin(async move { shards[i].connect().await })
        });
        Ok(Routed::new(conns, Some(route), KeyFormat::prefix(b""))
            .reopening(reopen, self.labels.clone())
            .timed(self.latency.clone()))
    }

    /// The shards' driver's, with no transaction (one would span shards) and one request in
    /// flight per connection (replies from several servers, taken in order).
    const CAPS: Caps = Caps {
        txn: false,
        ..T::CAPS.in_set()
    };

    fn refuse(&self, plan: &Plan) -> Result<(), SetupError> {
        if plan.txn > 1 {
            return Err(SetupError(format!(
                "--txn {}: a transaction on a sharded target would span shards; leave --txn out (every write is its own)",
                plan.txn
            )));
        }
        self.first().refuse(plan)
    }

    /// Above the highest id any shard holds: inserts go to the last shard, whose range is open.
    async fn insert_from(&self) -> Result<Option<u64>, SetupError> {
        let mut next = None;
        for s in self.shards.iter() {
            next = next.max(s.insert_from().await?);
        }
        Ok(next)
    }

    async fn durability(&self) -> Vec<(String, String)> {
        self.first().durability().await
    }

    /// Every shard's own count, read one after another; the target's count is their sum.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let mut sum: Option<ServerCount> = None;
        let mut members = Vec::with_capacity(self.shards.len());
        for (i, (s, label)) in self.shards.iter().zip(&self.labels).enumerate() {
            let Some(c) = s
                .server_count()
                .await
                .map_err(|e| SetupError(format!("{label}: {}", e.0)))?
            else {
                return Ok(None);
            };
            let at = (self.routed[i].load(Ordering::Relaxed), &*self.latency);
            let mut m = MemberCount::new(label.clone(), c.value, at, i);
            m.epoch = c.epoch.clone();
            members.push(m);
            sum = Some(match sum {
                None => c,
                Some(s) => add(s, c),
            });
        }
        Ok(sum.map(|mut c| {
            c.members = members;
            if self.parts {
                c.parts = Some(self.routed.iter().map(|r| r.load(Ordering::Relaxed)).sum());
                // The shards count a multi-get's parts, not the multi-gets.
                if let Some(m) = c.ops.get_mut(Op::Mget.index()) {
                    *m = ServerCount::UNCOUNTED;
                }
            }
            c
        }))
    }
}
