//! One run against one target, as reported.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::percentiles::Percentiles;
use super::timeline::TimelineRow;
use crate::stats::{Figures, GoalResult};

/// A run's TLS: `TLS 1.3`, `TLS13_AES_256_GCM_SHA384`, and how far the server's certificate
/// was checked: `none`, `ca` (its chain) or `full` (chain and host name).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TlsUsed {
    pub version: String,
    pub cipher: String,
    pub verified: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// The target URL with any password replaced by ***.
    pub target: String,
    pub kind: String,
    /// A name for the run given by whoever assembled the file (`scripts/compare.sh`), shown
    /// by the reports instead of the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What carried the bytes: `tcp` or `unix` (files from before it was recorded: tcp).
    #[serde(default = "tcp")]
    pub transport: String,
    /// The Unix socket path, when `transport` is `unix`.
    #[serde(default)]
    pub socket: Option<String>,
    /// The driver that ran, where the protocol has more than one (`wire`, `tokio`,
    /// `mysql_async`); null for the others and in files from before it was recorded.
    #[serde(default)]
    pub driver: Option<String>,
    /// What TLS negotiated, null for a plain connection (and in files from before TLS).
    #[serde(default)]
    pub tls: Option<TlsUsed>,
    // Fields the schema leaves optional default, so every file it accepts can be read back.
    #[serde(default)]
    pub started_at: String,
    pub interrupted: bool,
    pub stopped_early: Option<String>,
    /// Measured window (after the warm-up), seconds.
    pub duration_s: f64,
    /// Answered lookups (hits + misses) per second over the measured window.
    pub qps: f64,
    /// hits + misses + errors.
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: BTreeMap<String, u64>,
    pub error_total: u64,
    /// Writes in doubt: sent on a connection that broke or timed out before their reply, so
    /// the server may or may not have applied them (each also counted as its error).
    #[serde(default)]
    pub unsure: u64,
    /// Requests sent again after a deadlock or serialization failure (`--retries`).
    #[serde(default)]
    pub retries: u64,
    #[serde(default)]
    pub error_samples: Vec<String>,
    #[serde(default)]
    pub reconnects: u64,
    #[serde(default)]
    pub warmup_requests: u64,
    /// The connect phase, before the clock starts: connections opened and the seconds it took.
    #[serde(default)]
    pub connected: u64,
    #[serde(default)]
    pub connect_s: f64,
    /// Connections that failed in the connect phase (each is retried in the run, where a
    /// failure counts as a `connect` error), and the first failure's message.
    #[serde(default)]
    pub connect_failed: u64,
    #[serde(default)]
    pub connect_error: Option<String>,
    /// Done minus due: with `-R`, corrected for coordinated omission; else equal to service.
    pub latency_us: Percentiles,
    /// Done minus sent.
    pub service_us: Percentiles,
    /// Sent minus due (paced runs).
    pub lag_us: Option<Percentiles>,
    /// How long each connect took (`--reconnect-every`; null otherwise).
    #[serde(default)]
    pub connect_us: Option<Percentiles>,
    pub rate: Option<RateResult>,
    pub client_cpu: ClientCpu,
    /// The server's CPU over the run, when it runs on this machine (else a note says why not).
    #[serde(default)]
    pub server_cpu: Option<ServerCpu>,
    pub server_observed: Option<ServerObserved>,
    /// Per op (`read`, `update`, `insert`, `delete`, `upsert`), only when the mix writes: a
    /// read-only run keeps its shape.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ops: BTreeMap<String, OpResult>,
    /// With writes: the server settings that decide a write's cost, as the server reports them
    /// (PostgreSQL `synchronous_commit`, `fsync`, `wal_sync_method`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub durability: BTreeMap<String, String>,
    /// `--batch`: the keys its multi-gets read, counted apart from its requests; absent for
    /// one key per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<KeysResult>,
    pub timeline: Vec<TimelineRow>,
    /// The 95% CIs of `qps` and of `latency_us`'s percentiles, from the timeline's whole
    /// intervals (docs/statistics.md); absent in files from before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Figures>,
    /// `--ci`: the goal, whether the run reached it (and when), the widths it ended with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_goal: Option<GoalResult>,
    /// The run's latency histogram, HdrHistogram V2 compressed, base64: merge results exactly.
    pub histogram: String,
    /// Whether the numbers can be trusted (files from before it was recorded: valid).
    #[serde(default)]
    pub verdict: super::verdict::Verdict,
    /// What else used this machine's CPU over the run (None: not read, or not Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_load: Option<super::verdict::MachineLoad>,
}

fn tcp() -> String {
    "tcp".into()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A server's count of `delta` against `expected` sends of which `unknown` may not have been
/// counted: exact when none are unknown, else anywhere in the range.
pub fn count_matches(delta: u64, expected: u64, unknown: u64) -> bool {
    delta <= expected && delta + unknown >= expected
}

/// What loadgen sent, as a report says it: `N`, or `N (U of unknown fate: L-N)`.
pub fn sent_text(expected: u64, unknown: u64, thousands: impl Fn(u64) -> String) -> String {
    match unknown.min(expected) {
        0 => thousands(expected),
        u => format!(
            "{}, {} of unknown fate: {}-{}",
            thousands(expected),
            thousands(u),
            thousands(expected - u),
            thousands(expected)
        ),
    }
}

/// One op of a mix: its own counts, rate and latency, and the server's count of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpResult {
    /// hits + misses + errors.
    pub requests: u64,
    /// Answered requests (hits + misses) per second over the measured window.
    pub qps: f64,
    /// A write that changed a row is a hit; one that found none (or a row already there) a miss.
    pub hits: u64,
    pub misses: u64,
    pub errors: BTreeMap<String, u64>,
    pub error_total: u64,
    /// This op's writes in doubt, as the run's `unsure`.
    #[serde(default)]
    pub unsure: u64,
    /// This op's requests sent again, as the run's `retries`.
    #[serde(default)]
    pub retries: u64,
    pub latency_us: Percentiles,
    /// The server's own count of this op, as `server_observed` (None: it has no such counter).
    #[serde(default)]
    pub server_observed: Option<ServerObserved>,
    /// This op's latency histogram, as the run's `histogram`: merge combines ops exactly.
    /// Empty in files from before it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub histogram: String,
    /// This op's CIs, as the run's `precision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Figures>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateResult {
    pub asked: f64,
    pub achieved: f64,
    /// Requests sent more than 1 ms after their due time.
    pub late: u64,
    pub kept: bool,
    /// Requests due before the window closed but never sent (the schedule's unpaid debt).
    #[serde(default)]
    pub backlog: u64,
    /// Requests due in the warm-up but not sent by its end: dropped, so the measured window
    /// does not start with the warm-up's queue.
    #[serde(default)]
    pub warmup_dropped: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientCpu {
    /// CPU time of the worker threads (the generator itself), seconds.
    pub worker_s: f64,
    /// CPU time of the whole process (includes an embedded server), seconds.
    pub process_s: f64,
    /// Worker CPU per request, microseconds.
    pub per_request_us: f64,
    /// Worker CPU / (wall time x worker threads): near 1 means the generator is saturated.
    pub utilization: f64,
    /// The busiest worker thread's share of the run it was busy (its event loop not waiting
    /// for I/O or a timer): one thread near 1 holds its connections back, whatever the others.
    #[serde(default)]
    pub busiest: f64,
    pub saturated: bool,
    /// Worker threads (`-t`); 0 in files from before it was recorded.
    #[serde(default)]
    pub threads: usize,
    /// Share of the worker threads' CPU spent in the kernel (system time), 0 to 1.
    #[serde(default)]
    pub kernel_share: Option<f64>,
}

/// A busy share (the workers' mean CPU utilization, or the busiest worker thread's busy time)
/// at or above this is a saturated client: the rest is room for the wake-ups any loop has.
pub const SATURATED_SHARE: f64 = 0.9;

impl ClientCpu {
    /// Whether a busy share (0 to 1) is a saturated client's.
    pub fn saturates(share: f64) -> bool {
        share >= SATURATED_SHARE
    }

    pub fn new(
        worker_ns: u64,
        process_ns: u64,
        wall_ns: u64,
        threads: usize,
        requests: u64,
    ) -> ClientCpu {
        let util = if wall_ns > 0 {
            worker_ns as f64 / (wall_ns as f64 * threads as f64)
        } else {
            0.0
        };
        ClientCpu {
            worker_s: (worker_ns as f64 / 1e6).round() / 1e3,
            process_s: (process_ns as f64 / 1e6).round() / 1e3,
            per_request_us: if requests > 0 {
                (worker_ns as f64 / requests as f64).round() / 1e3
            } else {
                0.0
            },
            utilization: (util * 1000.0).round() / 1000.0,
            busiest: 0.0,
            saturated: Self::saturates(util),
            threads,
            kernel_share: None,
        }
    }

    /// With the busiest worker thread's busy share (its runtime not parked): saturated also
    /// when that one thread alone is busy [`SATURATED_SHARE`] of the time or more.
    pub fn with_busiest(mut self, busy: Option<f64>) -> ClientCpu {
        if let Some(busy) = busy {
            self.busiest = (busy * 1000.0).round() / 1000.0;
            self.saturated |= Self::saturates(busy);
        }
        self
    }
}

/// The server process's CPU time over the run (all its processes: PostgreSQL's backends too).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ServerCpu {
    pub pid: Option<u32>,
    /// The process name (`postgres`, `mariadbd`, `memcached`, `redis-server`, `loadgen`).
    pub process: Option<String>,
    pub cpu_s: Option<f64>,
    /// Server CPU per request (warm-up included, as the client's), microseconds.
    pub per_request_us: Option<f64>,
    /// cores / (client + server CPU per request): the rate at which client and server together
    /// would keep every core of this machine busy.
    pub cpu_bound_qps: Option<f64>,
    /// Why there is no number (a remote server, a process loadgen may not read).
    pub note: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerObserved {
    /// What was read: e.g. `pg_stat_statements.calls`, `memcached get_hits+get_misses`.
    pub source: String,
    /// The counter's change over the run (None when it could not be read).
    pub delta: Option<u64>,
    /// What loadgen sent that the server should have counted: requests + warm-up requests +
    /// the sends again of `--retries`, less the requests that never got a connection.
    pub expected: u64,
    /// Of `expected`, the sends whose fate is unknown (timed out, lost with their connection,
    /// answered with an error, or failed before a retry): the server may or may not have
    /// counted them, so it `matches` anywhere in `expected - unknown ..= expected`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: u64,
    pub matches: bool,
    pub note: Option<String>,
    /// The counter's reads around the run: `merge` takes the span of concurrent runs' reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// One of several generators on this server (`--instance`): the count holds the others'
    /// requests too, so `matches` only says the server saw at least this one's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// The server restarted or reset its counters between the two reads: `delta` is not a
    /// count of this run, and `note` says what changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_comparable: bool,
    /// A pool's servers, each its own count against what loadgen sent it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberObserved>,
    /// A Redis Cluster: the redirects loadgen followed over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirects: Option<Redirects>,
}

/// The redirects a Redis Cluster answered and loadgen followed (warm-up included): a request
/// redirected counts once, as the server that answered it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redirects {
    /// The key's slot had moved: it is the named master's from then on.
    pub moved: u64,
    /// The slot was being migrated: that one request went to the named master.
    pub ask: u64,
    /// A multi-get's keys were split by a migration: sent again after a pause.
    pub tryagain: u64,
    /// The cluster was failing over (`CLUSTERDOWN`): sent again after a growing pause.
    #[serde(default)]
    pub clusterdown: u64,
    /// The slot map read again (after a lost master, a `CLUSTERDOWN`), at most a few times a
    /// second.
    #[serde(default)]
    pub map_reads: u64,
}

impl Redirects {
    /// The redirects between two reads of the followed counts.
    pub fn between(before: [u64; 5], after: [u64; 5]) -> Redirects {
        let d = |i: usize| after[i].saturating_sub(before[i]);
        Redirects {
            moved: d(0),
            ask: d(1),
            tryagain: d(2),
            clusterdown: d(3),
            map_reads: d(4),
        }
    }
}

impl std::ops::Add for Redirects {
    type Output = Redirects;

    fn add(self, o: Redirects) -> Redirects {
        Redirects {
            moved: self.moved + o.moved,
            ask: self.ask + o.ask,
            tryagain: self.tryagain + o.tryagain,
            clusterdown: self.clusterdown + o.clusterdown,
            map_reads: self.map_reads + o.map_reads,
        }
    }
}

/// One server of a pool: the change of its own counter over the run against the requests
/// loadgen routed to it (warm-up included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberObserved {
    pub server: String,
    pub delta: u64,
    pub expected: u64,
    /// Of `expected`, the sends whose fate is unknown, as the run's `unknown`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: u64,
    pub matches: bool,
    /// Its counter could not be compared (not readable, or the server restarted): `note`
    /// says why, and the set's count leaves it out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_comparable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Connections to it opened again during the run (after it was lost or hung), warm-up
    /// included; the run's `reconnects` holds them too.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reconnects: u64,
    /// This server's part of what loadgen routed to the set (0 to 1).
    #[serde(default)]
    pub share: f64,
    /// The latency of the requests this server answered (a multi-get's part: from the
    /// request's send to this server's reply), warm-up included, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Percentiles>,
    /// The same as an HdrHistogram (V2 compressed, base64): merge combines servers exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

impl MemberObserved {
    /// `part` of `total` (a server's share of what was routed to its set), to 0.001.
    pub fn share_of(part: u64, total: u64) -> f64 {
        match total {
            0 => 0.0,
            _ => (part as f64 / total as f64 * 1000.0).round() / 1000.0,
        }
    }
}

/// The keys of a run's multi-gets (`--batch N`, or `mget:N` in a mix, whose other requests'
/// keys are not in it): each multi-get reads N keys, found or not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeysResult {
    /// Keys per request.
    pub batch: usize,
    /// Keys of the answered requests: hits + misses.
    pub keys: u64,
    pub hits: u64,
    pub misses: u64,
    /// Keys per second over the measured window.
    pub keys_per_s: f64,
}

impl KeysResult {
    pub fn new(batch: usize, hits: u64, misses: u64, window_s: f64) -> KeysResult {
        let keys = hits + misses;
        KeysResult {
            batch,
            keys,
            hits,
            misses,
            keys_per_s: match window_s > 0.0 {
                true => (keys as f64 / window_s * 10.0).round() / 10.0,
                false => 0.0,
            },
        }
    }

    /// Several generators' keys over their common window (`loadgen merge`); None when none
    /// of them batched.
    pub fn sum<'a>(
        runs: impl Iterator<Item = Option<&'a KeysResult>>,
        window_s: f64,
    ) -> Option<KeysResult> {
        runs.flatten()
            .map(|k| (k.batch, k.hits, k.misses))
            .reduce(|a, b| (a.0.max(b.0), a.1 + b.1, a.2 + b.2))
            .map(|(batch, hits, misses)| KeysResult::new(batch, hits, misses, window_s))
    }
}
