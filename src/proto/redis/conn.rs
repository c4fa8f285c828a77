//! The Redis target: one pipelined connection per task, logged in by [`Login`] at connect; on a
//! Redis Cluster (`?cluster=1`) one per master, each request sent to its key's slot's master.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::mix::{Mix, Op};
use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::count::{calls, is_master, lookups};
use crate::proto::redis::login::Login;
use crate::proto::redis::slots::SlotMap;
use crate::proto::routed::{open_each, Reopen, Route, Routed};
use crate::proto::server_latency::{ServerLatency, SetMembers};
use crate::proto::sniff::{Hello, Kind, PING};
use crate::proto::target::{MemberCount, ServerCount, SetupError, Target};
use crate::transport::{Endpoint, TlsClient, TlsInfo};
use crate::url::TargetUrl;

pub struct RedisTarget {
    login: Login,
    mix: Mix,
    verify: bool,
    /// Keys per multi-get (`--batch`, `mget:N`; 0 without).
    batch: usize,
    /// `--ttl`: writes carry an expiry, so an insert is `SET NX EX`, not SETNX.
    ttl: u32,
    /// `?cluster=1`: the cluster, read from the URL's node at the first connect.
    cluster: Option<Arc<OnceCell<Cluster>>>,
    /// `--timeout`: how long a request may wait out a cluster's failover.
    request_timeout: std::time::Duration,
}

/// One node's command calls (get, set, setnx, del, mget), run id and keyspace lookups, or
/// why they could not be read.
type NodeCount = Result<(Vec<u64>, Option<String>, u64), String>;

/// A Redis Cluster as a run sees it: its slot map, a login per node (masters and replicas: a
/// failover may promote one), and the requests routed to each.
pub struct Cluster {
    map: Arc<SlotMap>,
    logins: Vec<Login>,
    routed: Arc<[AtomicU64]>,
    /// The latencies each master answered with.
    latency: Arc<ServerLatency>,
}

impl RedisTarget {
    /// The options this target reads from its URL's query (dispatch refuses any other): the
    /// socket form's (`redis+unix:///path?db=N&user=U&pass=P`), which `redis://` refuses, and
    /// `rediss://`'s TLS files (`cacert`, `cert`, `key`: redis-cli's names).
    pub const OPTIONS: &'static [&'static str] = &[
        "db",
        "user",
        "pass",
        "cacert",
        "cert",
        "key",
        "cluster",
        crate::key_format::KEY_FORMAT,
    ];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<RedisTarget, SetupError> {
        let mut login = Login::new(url, plan.timeouts().connect)?;
        if let Some(f) = &plan.key_format {
            login.keys = f.clone();
        }
        let cluster = match url.param("cluster") {
            None | Some("0") => None,
            Some("1") if url.scheme == "redis" => Some(Arc::new(OnceCell::new())),
            Some("1") => {
                return Err(SetupError(format!(
                    "{}: ?cluster=1 runs over plain TCP (redis://) only in this version",
                    url.redacted()
                )))
            }
            Some(other) => {
                return Err(SetupError(format!(
                    "cluster={other} in the URL: use cluster=1 (a Redis Cluster) or leave it out"
                )))
            }
        };
        Ok(RedisTarget {
            login,
            mix: plan.mix.clone(),
            verify: plan.verify,
            batch: plan.multi_get(),
            ttl: plan.ttl,
            cluster,
            request_timeout: plan.timeouts().request,
        })
    }

    /// The cluster, read once (`CLUSTER NODES` of the URL's node); None: one server.
    async fn cluster(&self) -> Result<Option<&Cluster>, LookupError> {
        let Some(cell) = &self.cluster else {
            return Ok(None);
        };
        let c = cell
            .get_or_try_init(|| async {
                let map = SlotMap::discover(&self.login).await?;
                let logins = map
                    .nodes
                    .iter()
                    .map(|(h, p)| self.login.at(h, *p))
                    .collect();
                Ok::<_, LookupError>(Cluster {
                    routed: map.nodes.iter().map(|_| AtomicU64::new(0)).collect(),
                    latency: ServerLatency::new(map.nodes.len()),
                    map: Arc::new(map),
                    logins,
                })
            })
            .await?;
        Ok(Some(c))
    }

    /// Each server's calls of `commands` (INFO commandstats) and its run id; on a cluster,
    /// with `keys` its keyspace lookups too. One server's failure fails the count; a
    /// cluster's node that cannot be read is named (its counter missing), unless none can.
    async fn calls_each(
        &self,
        commands: &[&str],
        keys: bool,
    ) -> Result<Vec<NodeCount>, SetupError> {
        let cluster = self.cluster().await.map_err(|e| e.message)?;
        let Some(c) = cluster else {
            let (n, epoch) = calls(&self.login, commands).await.map_err(|e| e.message)?;
            return Ok(vec![Ok((n, epoch, 0))]);
        };
        let mut each = Vec::with_capacity(c.logins.len());
        for l in &c.logins {
            let one = async {
                let (mut n, epoch) = calls(l, commands).await?;
                let k = match keys {
                    true => lookups(l).await?.0,
                    false => 0,
                };
                // A replica's write calls are its master's writes, replicated: not loadgen's
                // sends to it. Its role is part of its epoch: a node failed over mid-run has
                // no write count to compare.
                let master = is_master(l).await?;
                if !master {
                    n.iter_mut().skip(1).take(3).for_each(|w| *w = 0);
                }
                let epoch = epoch.map(|e| match (!self.mix.writes(), master) {
                    (true, _) => e,
                    (false, true) => format!("{e} (master)"),
                    (false, false) => format!("{e} (replica)"),
                });
                Ok::<_, LookupError>((n, epoch, k))
            };
            each.push(one.await.map_err(|e| e.message));
        }
        if let Some(Err(e)) = each.iter().find(|_| each.iter().all(Result::is_err)) {
            return Err(SetupError(e.clone()));
        }
        Ok(each)
    }

    pub fn login(&self) -> &Login {
        &self.login
    }
}

impl Target for RedisTarget {
    type Conn = Routed<RedisCodec>;

    fn kind(&self) -> &'static str {
        "redis"
    }

    fn named_keys(&self) -> bool {
        true
    }

    fn is_set(&self) -> bool {
        self.cluster.is_some()
    }

    /// The masters, once the cluster has been read (the run's connections read it first).
    fn members(&self) -> Option<SetMembers> {
        let c = self.cluster.as_ref()?.get()?;
        Some(SetMembers {
            names: c.logins.iter().map(|l| l.addr.clone()).collect(),
            routed: c.routed.clone(),
            latency: c.latency.clone(),
        })
    }

    /// A cluster's masters, as `CLUSTER NODES` named them (none when it cannot be read).
    async fn endpoints(&self) -> Vec<Endpoint> {
        match self.cluster().await {
            Ok(Some(c)) => c.logins.iter().map(|l| l.endpoint.clone()).collect(),
            _ => vec![self.endpoint().clone()],
        }
    }

    fn key_name(&self, id: u64, out: &mut Vec<u8>) {
        self.login.keys.write(id, out)
    }

    fn endpoint(&self) -> &Endpoint {
        &self.login.endpoint
    }

    /// `PING`: `+PONG`, or `-NOAUTH` before the login. Not over TLS (`rediss://`).
    fn hello(&self) -> Option<Hello> {
        let ping = || Hello::new(Kind::Redis, PING);
        self.login.tls.is_none().then(ping)
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        let keys = self.login.keys.clone();
        let Some(c) = self.cluster().await? else {
            return Ok(Routed::new(
                vec![self.login.open(self.verify).await?],
                None,
                keys,
            ));
        };
        let verify = self.verify;
        let conns = open_each(c.logins.len(), |i| c.logins[i].open(verify)).await?;
        let route: Route = (c.map.clone(), c.routed.clone());
        let (logins, verify) = (c.logins.clone(), self.verify);
        // A node opened again answers PING first: one that accepts but never answers (hung)
        // stays down.
        let reopen: Reopen<RedisCodec> = Box::new(move |i| {
            let login = logins[i].clone();
            Box::pin(async move {
                let mut c = login.open(verify).await?;
                match login.ask(&mut c, &[b"PING"], "PING").await? {
                    crate::proto::redis::login::Answer::Status(_) => Ok(c),
                    other => Err(LookupError::protocol(format!(
                        "{}: PING answered {other:?}",
                        login.addr
                    ))),
                }
            })
        });
        let names = c.logins.iter().map(|l| l.addr.clone()).collect();
        Ok(Routed::with_down(conns, Some(route), keys)
            .reopening(reopen, names)
            .timed(c.latency.clone())
            .patient(self.request_timeout))
    }

    /// On a cluster the replies come from several servers and are taken in order: one request
    /// in flight per connection, so none waits behind another server's reply.
    fn max_pipeline(&self) -> usize {
        match self.cluster {
            Some(_) => 1,
            None => Self::MAX_PIPELINE,
        }
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.login.tls.as_ref().and_then(TlsClient::negotiated)
    }

    const MAX_PIPELINE: usize = usize::MAX;

    fn writes(&self, _mix: &Mix) -> Result<(), SetupError> {
        Ok(())
    }

    /// On a cluster a multi-get is one MGET per hash slot of its keys ([`Routed`]).
    fn batch(&self, _n: usize) -> Result<(), SetupError> {
        Ok(())
    }

    /// Reads are `cmdstat_get`, multi-gets `cmdstat_mget` (on a cluster, reads of both kinds
    /// are the keys they read); with a writing mix, inserts `cmdstat_setnx`, deletes
    /// `cmdstat_del`, and updates and upserts `cmdstat_set` (inserts too, with `--ttl`): the
    /// count of whichever of them is in the mix, of none when several are.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let cluster = self.cluster().await.map_err(|e| e.message)?;
        let redirects = cluster.map(|c| c.map.followed());
        // On a cluster a multi-get is one MGET per slot of its keys: reads are counted in keys
        // (keyspace_hits+misses, which writes do not touch), not calls.
        let keyed = cluster.is_some() && self.batch > 0;
        let each = self
            .calls_each(&["get", "set", "setnx", "del", "mget"], keyed)
            .await?;
        let read = |n: &(Vec<u64>, Option<String>, u64)| match keyed {
            true => n.2,
            false => n.0[0] + n.0[4],
        };
        let ok = || each.iter().filter_map(|n| n.as_ref().ok());
        let sum = |i: usize| ok().map(|(c, _, _)| c[i]).sum::<u64>();
        let (get, set, setnx, del, mget) = (sum(0), sum(1), sum(2), sum(3), sum(4));
        let key_reads: u64 = ok().map(|n| n.2).sum();
        // One server's run id; a cluster's are each node's own (a member restarts alone).
        let epoch = match cluster {
            None => ok().next().and_then(|n| n.1.clone()),
            Some(_) => None,
        };
        // A cluster's nodes one by one: each one's requests against what was routed to it.
        let members = match cluster {
            None => Vec::new(),
            Some(c) => (c.routed.iter().zip(&each).zip(&c.map.nodes))
                .enumerate()
                .map(|(i, ((sent, n), (host, port)))| {
                    // A read-only run's count is reads alone: a failover changes which
                    // node's writes (prepare's, replicated) count, not what this run did.
                    let writes = |n: &(Vec<u64>, _, _)| match !self.mix.writes() {
                        true => 0,
                        false => n.0[1] + n.0[2] + n.0[3],
                    };
                    let value = n.as_ref().map_or(0, |n| read(n) + writes(n));
                    let at = (sent.load(Ordering::Relaxed), &*c.latency);
                    let mut m = MemberCount::new(format!("{host}:{port}"), value, at, i);
                    (m.epoch, m.missing) = match n {
                        Ok(n) => (n.1.clone(), None),
                        Err(e) => (None, Some(e.clone())),
                    };
                    m
                })
                .collect(),
        };
        let per_request = if keyed { self.batch as u64 } else { 1 };
        if self.mix.read_only() {
            let mut count = match (keyed, self.batch > 0) {
                (true, _) => {
                    ServerCount::reads(key_reads, "INFO stats keyspace_hits+keyspace_misses")
                }
                // One MGET per request, whatever its keys.
                (false, true) => ServerCount::reads(mget, "INFO commandstats cmdstat_mget.calls"),
                (false, false) => ServerCount::reads(get, "INFO commandstats cmdstat_get.calls"),
            };
            (count.epoch, count.members, count.redirects) = (epoch, members, redirects);
            count.per_request = per_request;
            return Ok(Some(count));
        }
        // With `--ttl` an insert is a SET too (SETNX takes no expiry): counted with the others.
        let on_set: &[Op] = match self.ttl {
            0 => &[Op::Update, Op::Upsert],
            _ => &[Op::Update, Op::Upsert, Op::Insert],
        };
        let sets = match on_set.iter().filter(|o| self.mix.has(**o)).count() > 1 {
            true => ServerCount::UNCOUNTED,
            false => set,
        };
        let mut ops = vec![sets; Op::COUNT];
        (ops[Op::Read.index()], ops[Op::Mget.index()]) = match keyed {
            true if self.mix.has(Op::Read) => (ServerCount::UNCOUNTED, ServerCount::UNCOUNTED),
            true => (key_reads, key_reads),
            false => (get, mget),
        };
        if self.ttl == 0 {
            ops[Op::Insert.index()] = setnx;
        }
        ops[Op::Delete.index()] = del;
        let (reads, source) = match keyed {
            true => (
                key_reads,
                "INFO stats keyspace_hits+keyspace_misses, commandstats calls of set, setnx, del",
            ),
            false => (
                get + mget,
                "INFO commandstats calls of get, mget, set, setnx, del",
            ),
        };
        Ok(Some(ServerCount {
            epoch,
            value: reads + set + setnx + del,
            source: source.into(),
            ops,
            members,
            per_request,
            redirects,
            parts: None,
        }))
    }
}
