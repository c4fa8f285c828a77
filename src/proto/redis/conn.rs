//! The Redis target: one pipelined connection per task, logged in by [`Login`] at connect; on a
//! Redis Cluster (`?cluster=1`) one per master, each request sent to its key's slot's master.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::mix::{Mix, Op};
use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::count::{calls, lookups};
use crate::proto::redis::login::Login;
use crate::proto::redis::slots::SlotMap;
use crate::proto::routed::{Reopen, Route, Routed};
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
}

/// A Redis Cluster as a run sees it: its slot map, a login per master, and the requests
/// routed to each.
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

    /// Each server's calls of `commands` (INFO commandstats), and its run id.
    async fn calls_each(
        &self,
        commands: &[&str],
    ) -> Result<Vec<(Vec<u64>, Option<String>)>, SetupError> {
        let cluster = self.cluster().await.map_err(|e| e.message)?;
        let logins = cluster.map_or(std::slice::from_ref(&self.login), |c| &c.logins[..]);
        let mut each = Vec::with_capacity(logins.len());
        for l in logins {
            each.push(calls(l, commands).await.map_err(|e| e.message)?);
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
        let mut conns = Vec::with_capacity(c.logins.len());
        for l in &c.logins {
            conns.push(l.open(self.verify).await?);
        }
        let route: Route = (c.map.clone(), c.routed.clone());
        let (logins, verify) = (c.logins.clone(), self.verify);
        let reopen: Reopen<RedisCodec> = Box::new(move |i| {
            let login = logins[i].clone();
            Box::pin(async move { login.open(verify).await })
        });
        let names = c.logins.iter().map(|l| l.addr.clone()).collect();
        Ok(Routed::new(conns, Some(route), keys)
            .reopening(reopen, names)
            .timed(c.latency.clone()))
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
        let each = self
            .calls_each(&["get", "set", "setnx", "del", "mget"])
            .await?;
        // On a cluster a multi-get is one MGET per slot of its keys: reads are counted in keys
        // (keyspace_hits+misses, which writes do not touch), not calls.
        let mut keys = Vec::new();
        if let (Some(c), true) = (cluster, self.batch > 0) {
            for l in &c.logins {
                keys.push(lookups(l).await.map_err(|e| e.message)?.0);
            }
        }
        let keyed = !keys.is_empty();
        let reads_of = |i: usize, c: &[u64]| match keyed {
            true => keys[i],
            false => c[0] + c[4],
        };
        let sum = |i: usize| each.iter().map(|(c, _)| c[i]).sum::<u64>();
        let (get, set, setnx, del, mget) = (sum(0), sum(1), sum(2), sum(3), sum(4));
        let key_reads: u64 = keys.iter().sum();
        let epochs: Option<Vec<String>> = each.iter().map(|(_, e)| e.clone()).collect();
        let epoch = epochs.map(|e| e.join(","));
        // A cluster's masters one by one: each one's requests against what was routed to it.
        let members = match cluster {
            None => Vec::new(),
            Some(c) => (c.routed.iter().zip(&each).zip(&c.map.nodes))
                .enumerate()
                .map(|(i, ((sent, (n, _)), (host, port)))| MemberCount {
                    server: format!("{host}:{port}"),
                    value: reads_of(i, n) + n[1] + n[2] + n[3],
                    sent: sent.load(Ordering::Relaxed),
                    latency: Some(c.latency.of(i)),
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
