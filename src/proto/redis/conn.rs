//! The Redis target: one pipelined connection per task, logged in by [`Login`] at connect; on a
//! Redis Cluster (`?cluster=1`) one per master, each request sent to its key's slot's master.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::mix::{Mix, Op};
use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::caps::{Caps, Counted, Sets, ALL_WRITES};
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::count::{calls, is_master};
use crate::proto::redis::login::Login;
use crate::proto::redis::not_cluster::cluster_refusal;
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
    /// Which command an insert is: SETNX, or `SET NX EX` when it carries an expiry
    /// (`--ttl`, or a trace's `add` lines with a TTL): counted as `set`.
    inserts: Inserts,
    /// `?cluster=1`: the cluster, read from the URL's node at the first connect.
    cluster: Option<Arc<OnceCell<Cluster>>>,
    /// `--timeout`: how long a request may wait out a cluster's failover.
    request_timeout: std::time::Duration,
    /// One server: whether it was found to be a cluster's node (the refusal), once.
    checked: OnceCell<Option<String>>,
    /// A cluster's seed list (`redis://h1:p1,h2:p2?cluster=1`): the nodes tried in turn for
    /// the slot map, as cluster clients do; empty for one node.
    seeds: Vec<(String, u16)>,
}

/// The URL with its seed list's first node as its host, and the seed list (empty for one
/// node).
pub fn seeded(url: &TargetUrl) -> Result<(TargetUrl, Vec<(String, u16)>), SetupError> {
    let mut seeds = seed_list(url)?;
    // The first that takes a connection leads (the preflight greets it): a seed down at the
    // start is passed over, as cluster clients pass it.
    let up = |(host, port): &(String, u16)| {
        use std::net::ToSocketAddrs;
        (host.as_str(), *port).to_socket_addrs().is_ok_and(|mut a| {
            a.any(|a| std::net::TcpStream::connect_timeout(&a, SEED_CONNECT).is_ok())
        })
    };
    if let Some(i) = seeds.iter().position(up) {
        seeds.rotate_left(i);
    }
    let mut first = url.clone();
    if let Some((host, port)) = seeds.first() {
        (first.host, first.port) = (host.clone(), Some(*port));
    }
    Ok((first, seeds))
}

/// How long a seed may take to accept a connection before the next is tried first.
const SEED_CONNECT: std::time::Duration = std::time::Duration::from_millis(500);

/// The nodes of a seed list `h1:p1,h2:p2` in the URL's host (the parser leaves the last port
/// apart): each with its port, Redis's default where none is given. Only on a cluster.
fn seed_list(url: &TargetUrl) -> Result<Vec<(String, u16)>, SetupError> {
    if !url.host.contains(',') {
        return Ok(Vec::new());
    }
    if url.param("cluster") != Some("1") {
        return Err(SetupError(format!(
            "{}: several servers in a redis:// URL are a Redis Cluster's seed list: add ?cluster=1 (a Redis pool is not supported)",
            url.redacted()
        )));
    }
    let all = match url.port {
        Some(p) => format!("{}:{p}", url.host),
        None => url.host.clone(),
    };
    all.split(',')
        .map(|node| {
            let (host, port) = match node.rsplit_once(':') {
                Some((h, p)) => (h, p.parse::<u16>().ok()),
                None => (node, Some(super::DEFAULT_PORT)),
            };
            match (host.is_empty(), port) {
                (false, Some(port)) => Ok((host.to_string(), port)),
                _ => Err(SetupError(format!(
                    "{}: `{node}` in the seed list is not host:port",
                    url.redacted()
                ))),
            }
        })
        .collect()
}

/// The command the run's inserts are, as the server counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inserts {
    Setnx,
    Set,
    /// Some each (a trace with and without TTLs): neither count is the inserts' alone.
    Both,
}

impl Inserts {
    fn of(plan: &Plan) -> Inserts {
        let survey = plan.trace.as_ref().map(|t| &t.survey);
        match survey.map(|s| (s.ttl_inserts, s.ops[Op::Insert.index()])) {
            _ if plan.ttl > 0 => Inserts::Set,
            Some((0, _)) | None => Inserts::Setnx,
            Some((with, all)) if with == all => Inserts::Set,
            Some(_) => Inserts::Both,
        }
    }
}

/// One node's command calls (get, set, setnx, del, mget) and run id, or why they could not
/// be read.
type NodeCount = Result<(Vec<u64>, Option<String>), String>;

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
        let (first, seeds) = seeded(url)?;
        let mut login = Login::new(&first, plan.timeouts().connect)?;
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
            inserts: Inserts::of(plan),
            cluster,
            request_timeout: plan.timeouts().request,
            checked: OnceCell::new(),
            seeds,
        })
    }

    /// The cluster, read once (`CLUSTER NODES` of the URL's node); None: one server.
    async fn cluster(&self) -> Result<Option<&Cluster>, LookupError> {
        let Some(cell) = &self.cluster else {
            return Ok(None);
        };
        let c = cell
            .get_or_try_init(|| async {
                let map = SlotMap::discover_any(&self.login, &self.seeds).await?;
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

    /// Each server's calls of `commands` (INFO commandstats) and its run id. One server's
    /// failure fails the count; a cluster's node that cannot be read is named (its counter
    /// missing), unless none can.
    async fn calls_each(&self, commands: &[&str]) -> Result<Vec<NodeCount>, SetupError> {
        let cluster = self.cluster().await.map_err(|e| e.message)?;
        let Some(c) = cluster else {
            let (n, epoch) = calls(&self.login, commands).await.map_err(|e| e.message)?;
            return Ok(vec![Ok((n, epoch))]);
        };
        let mut each = Vec::with_capacity(c.logins.len());
        for l in &c.logins {
            let one = async {
                let (mut n, epoch) = calls(l, commands).await?;
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
                Ok::<_, LookupError>((n, epoch))
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
            // Once per run: a cluster's node given as one server is refused.
            let checked = self
                .checked
                .get_or_init(|| cluster_refusal(&self.login))
                .await;
            if let Some(why) = checked {
                return Err(LookupError::server(why.clone()));
            }
            let conn = self.login.open(self.verify).await?;
            return Ok(Routed::new(vec![conn], None, keys));
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
    /// in flight per connection, so none waits behind another server's reply; a multi-get is
    /// one MGET per hash slot of its keys ([`Routed`]), each a command counted.
    fn caps(&self) -> Caps {
        match self.cluster {
            Some(_) => Caps {
                multi_get: Some(Counted::Commands),
                ..Self::CAPS.in_set()
            },
            None => Self::CAPS,
        }
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.login.tls.as_ref().and_then(TlsClient::negotiated)
    }

    /// Every write op; a multi-get is one MGET, counted once.
    const CAPS: Caps = Caps {
        ttl: true,
        named_keys: true,
        multi_get: Some(Counted::Requests),
        pipeline: usize::MAX,
        writes: ALL_WRITES,
        sets: Sets::Cluster,
        ..Caps::READS
    };

    /// Reads are `cmdstat_get`, multi-gets `cmdstat_mget` (on a cluster, reads of both kinds
    /// are the keys they read); with a writing mix, inserts `cmdstat_setnx`, deletes
    /// `cmdstat_del`, and updates and upserts `cmdstat_set` (inserts too when they carry an
    /// expiry: `--ttl`, or a trace's TTLs; when only some do, inserts are not counted): the
    /// count of whichever of them is in the mix, of none when several are.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let cluster = self.cluster().await.map_err(|e| e.message)?;
        let redirects = cluster.map(|c| c.map.followed());
        // On a cluster a multi-get is one MGET per slot of its keys, each counted as a call
        // and routed as one: the commands' own counts, which a migration's reads (MIGRATE's
        // keyspace lookups) do not move.
        let parts = cluster.is_some() && self.batch > 0;
        let each = self
            .calls_each(&["get", "set", "setnx", "del", "mget"])
            .await?;
        let read = |n: &(Vec<u64>, Option<String>)| n.0[0] + n.0[4];
        let ok = || each.iter().filter_map(|n| n.as_ref().ok());
        let sum = |i: usize| ok().map(|(c, _)| c[i]).sum::<u64>();
        let (get, set, setnx, del, mget) = (sum(0), sum(1), sum(2), sum(3), sum(4));
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
                    let writes = |n: &(Vec<u64>, _)| match !self.mix.writes() {
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
        if self.mix.read_only() {
            let mut count = match (parts, self.batch > 0) {
                (true, _) => ServerCount::reads(
                    get + mget,
                    "INFO commandstats cmdstat_mget.calls (one MGET per slot of a multi-get's keys)",
                ),
                // One MGET per request, whatever its keys.
                (false, true) => ServerCount::reads(mget, "INFO commandstats cmdstat_mget.calls"),
                (false, false) => ServerCount::reads(get, "INFO commandstats cmdstat_get.calls"),
            };
            (count.epoch, count.members, count.redirects) = (epoch, members, redirects);
            return Ok(Some(count));
        }
        // An insert with an expiry is a SET too (SETNX takes none): counted with the others.
        let on_set: &[Op] = match self.inserts {
            Inserts::Setnx => &[Op::Update, Op::Upsert],
            _ => &[Op::Update, Op::Upsert, Op::Insert],
        };
        let mixed = self.inserts == Inserts::Both && self.mix.has(Op::Insert);
        let sets = match mixed || on_set.iter().filter(|o| self.mix.has(**o)).count() > 1 {
            true => ServerCount::UNCOUNTED,
            false => set,
        };
        let mut ops = vec![sets; Op::COUNT];
        // A cluster's MGETs are one per slot of a multi-get: the set's count, not the op's.
        (ops[Op::Read.index()], ops[Op::Mget.index()]) = match parts {
            true => (get, ServerCount::UNCOUNTED),
            false => (get, mget),
        };
        match self.inserts {
            Inserts::Setnx => ops[Op::Insert.index()] = setnx,
            Inserts::Both => ops[Op::Insert.index()] = ServerCount::UNCOUNTED,
            Inserts::Set => {}
        }
        ops[Op::Delete.index()] = del;
        let (reads, source) = (
            get + mget,
            "INFO commandstats calls of get, mget, set, setnx, del",
        );
        Ok(Some(ServerCount {
            epoch,
            value: reads + set + setnx + del,
            source: source.into(),
            ops,
            members,
            per_request: 1,
            redirects,
            parts: None,
        }))
    }
}
