//! memcached, the NoSQL baseline: `get usr:<id>` (and with `--mix`, `replace`/`add`/`set`/
//! `delete`) over the text protocol, pipelined.
//!
//! Why not the `memcache` crate: it is blocking (one OS thread per connection would be needed),
//! and its pool checks each connection with an extra round trip per get; on this machine that
//! measured several times slower than a pipelined async client, so the baseline would be the
//! client, not memcached. The text protocol is small, so the codec is ours (`codec.rs`),
//! driven by the same pipelined connection as HandlerSocket and HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::key_format::{key_format, KeyFormat, KEY_FORMAT};
use crate::mix::{Mix, Op};
use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::caps::{Caps, Counted, Sets, ALL_WRITES};
use crate::proto::memcached::codec::{encode_stats, parse_stats, McCodec, DEFAULT_PREFIX};
use crate::proto::memcached::ketama::Ring;
use crate::proto::pipelined::StreamConn;
use crate::proto::routed::{open_each, Reopen, Route, Routed};
use crate::proto::server_latency::{ServerLatency, SetMembers};
use crate::proto::sniff::{Hello, Kind};
use crate::proto::target::{MemberCount, ServerCount, SetupError, Target};
use crate::transport::Endpoint;
use crate::url::TargetUrl;

pub struct McTarget {
    /// The first server (a pool's first member), for messages and its process's CPU.
    endpoint: Endpoint,
    /// Every server, in the pool's order (one without a pool).
    members: Vec<Endpoint>,
    /// Where the server count is read: the members, or with `?behind=` the servers behind a
    /// proxy (twemproxy answers no `stats`; the servers it fronts count what reached them).
    counted: Vec<Endpoint>,
    /// `?behind=` was given: the count is the fronted servers'.
    proxied: bool,
    /// A pool's ketama ring.
    ring: Option<Arc<Ring>>,
    /// Requests routed to each server of a pool (empty without one), for its own count.
    routed: Arc<[AtomicU64]>,
    /// The latencies each server of a pool answered with.
    latency: Arc<ServerLatency>,
    mix: Mix,
    keys: KeyFormat,
    verify: bool,
    connect_timeout: Duration,
    /// Keys per multi-get (`--batch`, `mget:N`).
    batch: usize,
    /// `?protocol=meta`: the meta commands (`mg`/`ms`/`md`) instead of the text ones.
    meta: bool,
}

impl McTarget {
    /// The options this target reads from its URL's query (dispatch refuses any other).
    pub const OPTIONS: &'static [&'static str] = &["prefix", "behind", "protocol", KEY_FORMAT];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<McTarget, SetupError> {
        let keys = match (url.param("prefix"), key_format(url, plan.key_format.as_ref())?) {
            (Some(_), Some(_)) => {
                return Err(SetupError(
                    "?prefix= and --key-format both name the keys: give one (PREFIX is the format PREFIX%d)".into(),
                ))
            }
            (_, Some(f)) => f,
            (prefix, None) => {
                let prefix = prefix.map_or(DEFAULT_PREFIX, str::as_bytes);
                McCodec::new(prefix.to_vec())
                    .map_err(|e| SetupError(format!("bad memcached key prefix: {}", e.0)))?;
                KeyFormat::prefix(prefix)
            }
        };
        let (members, ring) = super::members(url)?;
        let pooled = if ring.is_some() { members.len() } else { 0 };
        let counted = match url.param("behind") {
            None => members.clone(),
            Some(_) if pooled > 0 => {
                return Err(SetupError(format!(
                    "{}: ?behind= names the servers behind one proxy; a pool's servers are read themselves: leave ?behind= out",
                    url.redacted()
                )))
            }
            Some(list) => {
                let behind = TargetUrl::parse(&format!("memcache://{list}")).map_err(|e| {
                    SetupError(format!("?behind={list}: {e}; use ?behind=HOST:PORT,HOST:PORT"))
                })?;
                super::members(&behind)?.0
            }
        };
        let meta = match url.param("protocol") {
            None | Some("text") => false,
            Some("meta") => true,
            Some(other) => {
                return Err(SetupError(format!(
                    "{}: ?protocol={other}: memcached speaks protocol=text (get/set, the default) or protocol=meta (mg/ms/md, memcached 1.6 and later)",
                    url.redacted()
                )))
            }
        };
        Ok(McTarget {
            meta,
            proxied: url.param("behind").is_some(),
            counted,
            routed: (0..pooled).map(|_| AtomicU64::new(0)).collect(),
            latency: ServerLatency::new(pooled),
            endpoint: members[0].clone(),
            members,
            ring: ring.map(Arc::new),
            keys,
            mix: plan.mix.clone(),
            verify: plan.verify,
            connect_timeout: plan.timeouts().connect,
            batch: plan.multi_get(),
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// How keys name ids (`usr:%d`, the URL's `?prefix=`, or `--key-format`).
    pub fn keys(&self) -> &KeyFormat {
        &self.keys
    }

    pub fn codec(&self) -> McCodec {
        let codec = McCodec::with_format(self.keys.clone());
        match self.meta {
            true => codec.meta(),
            false => codec,
        }
    }
}

/// memcached's own counts from `stats` on a fresh connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McCounts {
    /// get_hits + get_misses
    pub gets: u64,
    /// cmd_set: every storage command (`set`, `add`, `replace`), stored or not
    pub sets: u64,
    /// delete_hits + delete_misses
    pub deletes: u64,
    /// The server process and when it started: another after a restart.
    pub epoch: String,
}

pub async fn counts(ep: &Endpoint, connect_timeout: Duration) -> Result<McCounts, LookupError> {
    let mut c = StreamConn::connect(
        ep,
        connect_timeout,
        None,
        McCodec::new(DEFAULT_PREFIX.to_vec()).expect("default prefix"),
        false,
    )
    .await?;
    let mut req = Vec::new();
    encode_stats(&mut req);
    let stats = c.round_trip(&req, parse_stats).await?;
    let get = |name: &str| {
        stats
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .ok_or_else(|| LookupError::protocol(format!("memcached stats has no {name}")))
    };
    Ok(McCounts {
        gets: get("get_hits")? + get("get_misses")?,
        sets: get("cmd_set")?,
        deletes: get("delete_hits")? + get("delete_misses")?,
        epoch: format!(
            "pid {}, up since {}",
            get("pid")?,
            get("time")?.saturating_sub(get("uptime")?)
        ),
    })
}

/// The counts of every server summed (a pool's), each server's process in the epoch; and each
/// server's gets+sets+deletes.
async fn pool_counts(
    members: &[Endpoint],
    timeout: Duration,
) -> Result<(McCounts, Vec<MemberRead>), SetupError> {
    let mut sum: Option<McCounts> = None;
    let mut each = Vec::with_capacity(members.len());
    let mut first_error = None;
    for ep in members {
        let c = match counts(ep, timeout).await {
            Ok(c) => c,
            // One server down: named, the others counted (every one down: the count fails).
            Err(e) => {
                let why = format!("{ep}: {}", e.message);
                first_error.get_or_insert(why.clone());
                each.push(Err(why));
                continue;
            }
        };
        each.push(Ok((c.gets + c.sets + c.deletes, c.epoch.clone())));
        sum = Some(match sum {
            None => c,
            Some(s) => McCounts {
                gets: s.gets + c.gets,
                sets: s.sets + c.sets,
                deletes: s.deletes + c.deletes,
                epoch: format!("{}; {}", s.epoch, c.epoch),
            },
        });
    }
    match (sum, first_error) {
        (Some(sum), _) => Ok((sum, each)),
        (None, e) => Err(SetupError(e.unwrap_or_else(|| "no server to count".into()))),
    }
}

/// One server's count and epoch, or why it could not be read.
type MemberRead = Result<(u64, String), String>;

impl Target for McTarget {
    type Conn = Routed<McCodec>;

    fn kind(&self) -> &'static str {
        "memcache"
    }

    fn key_name(&self, id: u64, out: &mut Vec<u8>) {
        self.keys.write(id, out);
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `version`: memcached and its proxies answer it at once, and count no get.
    fn hello(&self) -> Option<Hello> {
        Some(Hello::new(Kind::Memcached, &b"version\r\n"[..]))
    }

    fn is_set(&self) -> bool {
        self.ring.is_some()
    }

    /// A pool's servers; a proxy and the servers behind it (`?behind=`): their CPU is the run's.
    async fn endpoints(&self) -> Vec<Endpoint> {
        let mut all = self.members.clone();
        if self.proxied {
            all.extend(
                self.counted
                    .iter()
                    .filter(|c| !self.members.contains(c))
                    .cloned(),
            );
        }
        all
    }

    fn members(&self) -> Option<SetMembers> {
        self.ring.as_ref()?;
        Some(SetMembers {
            names: self.members.iter().map(Endpoint::to_string).collect(),
            routed: self.routed.clone(),
            latency: self.latency.clone(),
        })
    }

    /// A connection to each server of a pool.
    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        let open = |i: usize| {
            let ep = &self.members[i];
            StreamConn::connect(ep, self.connect_timeout, None, self.codec(), self.verify)
        };
        let Some(ring) = self.ring.clone() else {
            let mut conns = Vec::with_capacity(self.members.len());
            for i in 0..self.members.len() {
                conns.push(open(i).await?);
            }
            return Ok(Routed::new(conns, None, self.keys.clone()));
        };
        // A pool's server that cannot be reached is down: its keys fail until it answers.
        let conns = open_each(self.members.len(), open).await?;
        let route: Route = (ring, self.routed.clone());
        let (members, timeout, codec, verify) = (
            self.members.clone(),
            self.connect_timeout,
            self.codec(),
            self.verify,
        );
        // A server opened again answers `version` first: one that accepts but never answers
        // (hung) stays down.
        let reopen: Reopen<McCodec> = Box::new(move |i| {
            let (ep, codec) = (members[i].clone(), codec.clone());
            Box::pin(async move {
                let mut c = StreamConn::connect(&ep, timeout, None, codec, verify).await?;
                let probe = c.round_trip_line(b"version\r\n");
                match tokio::time::timeout(timeout, probe).await {
                    Ok(Ok(line)) if line.starts_with(b"VERSION") => Ok(c),
                    _ => Err(LookupError::io(format!("{ep} did not answer `version`"))),
                }
            })
        });
        let names = self.members.iter().map(|m| m.to_string()).collect();
        // --timeout bounds the connect and the request alike (`Timeouts`).
        Ok(Routed::with_down(conns, Some(route), self.keys.clone())
            .reopening(reopen, names)
            .timed(self.latency.clone())
            .patient(self.connect_timeout))
    }

    /// Every write op; a multi-get is one `get` of its keys (on a pool one per server,
    /// [`Routed`]), counted per key.
    const CAPS: Caps = Caps {
        ttl: true,
        named_keys: true,
        max_key: Some(crate::proto::memcached::codec::MAX_KEY_LEN),
        multi_get: Some(Counted::Keys),
        pipeline: usize::MAX,
        writes: ALL_WRITES,
        sets: Sets::Pool,
        ..Caps::READS
    };

    /// On a pool the replies come from several servers and are taken in order: one request in
    /// flight per connection, so none waits behind another server's reply.
    fn caps(&self) -> Caps {
        match self.ring {
            Some(_) => Self::CAPS.in_set(),
            None => Self::CAPS,
        }
    }

    /// Reads are get_hits + get_misses; with a writing mix, deletes are delete_hits +
    /// delete_misses and the storage ops share cmd_set: it is the count of the one of update,
    /// insert and upsert in the mix, or of none of them when the mix has several.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        let (c, each) = pool_counts(&self.counted, self.connect_timeout).await?;
        // Servers behind a proxy are counted as one: all of them, or no count.
        if let (true, Some(Err(why))) = (self.routed.is_empty(), each.iter().find(|r| r.is_err())) {
            return Err(SetupError(why.clone()));
        }
        // A pool's servers one by one: each one's requests against what was routed to it.
        let members: Vec<MemberCount> = self
            .routed
            .iter()
            .zip(each)
            .zip(&self.members)
            .enumerate()
            .map(|(i, ((sent, read), ep))| {
                let at = (sent.load(Ordering::Relaxed), &*self.latency);
                let value = read.as_ref().map_or(0, |r| r.0);
                let mut m = MemberCount::new(ep.to_string(), value, at, i);
                (m.epoch, m.missing) = match read {
                    Ok((_, epoch)) => (Some(epoch), None),
                    Err(why) => (None, Some(why)),
                };
                m
            })
            .collect();
        let behind = if self.proxied {
            " behind the proxy"
        } else {
            ""
        };
        if self.mix.read_only() {
            let source = format!("memcached get_hits+get_misses{behind}");
            let mut r = ServerCount::reads(c.gets, source);
            (r.epoch, r.members) = (Some(c.epoch), members);
            // get_hits+get_misses counts keys: a multi-get adds its N.
            r.per_request = self.batch.max(1) as u64;
            return Ok(Some(r));
        }
        let stores = [Op::Update, Op::Insert, Op::Upsert];
        let sets = match stores.iter().filter(|&&o| self.mix.has(o)).count() {
            1 => c.sets,
            _ => ServerCount::UNCOUNTED,
        };
        let mut ops = vec![sets; Op::COUNT];
        ops[Op::Read.index()] = c.gets;
        ops[Op::Mget.index()] = c.gets;
        if self.mix.has(Op::Read) && self.mix.has(Op::Mget) {
            ops[Op::Read.index()] = ServerCount::UNCOUNTED;
            ops[Op::Mget.index()] = ServerCount::UNCOUNTED;
        }
        ops[Op::Delete.index()] = c.deletes;
        Ok(Some(ServerCount {
            epoch: None,
            value: c.gets + c.sets + c.deletes,
            source: format!(
                "memcached get_hits+get_misses, cmd_set, delete_hits+delete_misses{behind}"
            ),
            ops,
            members,
            per_request: self.batch.max(1) as u64,
            redirects: None,
            parts: None,
        }))
    }
}
