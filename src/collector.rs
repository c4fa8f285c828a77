//! The collector: the one place the workers' snapshots meet. It merges each snapshot into the
//! run's totals and into its interval, closes an interval once every worker has handed it over
//! (progress line, hooks, timeline row), decides when errors stop the run, and builds the
//! `RunResult`. All of it runs once per interval per thread, off the request path.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crate::cells::Cells;
use crate::control::{Control, IntervalView};
use crate::cpu::Server;
use crate::mix::Op;
use crate::outcome::ErrorKind;
use crate::plan::{Plan, Stop};
use crate::proto::target::ServerCount;
use crate::recorder::{Counts, Snapshot};
use crate::result::{
    encode_histogram, ClientCpu, OpResult, Percentiles, RateResult, RunResult, ServerCpu,
    ServerObserved, TimelineRow,
};
use crate::totals::Totals;
use crate::transport::Endpoint;

/// A final interval shorter than this is not printed (see `close_interval`).
const SLIVER_NS: u64 = 10_000_000;

/// The connect phase, before the clock starts.
#[derive(Debug, Default)]
pub struct ConnectPhase {
    pub started_at: String,
    pub connected: u64,
    pub failed: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    pub seconds: f64,
}

/// The server's own count before and after the run (see `Target::server_count`).
pub type ServerCounts = (
    Result<Option<ServerCount>, String>,
    Result<Option<ServerCount>, String>,
);

/// One interval's merge while threads still hand it over.
#[derive(Default)]
struct Interval {
    totals: Totals,
    in_flight: u64,
    connections: u64,
}

/// What the collector knows of one worker thread.
#[derive(Clone, Copy, Default)]
struct Thread {
    /// The latest interval it handed over.
    sent_upto: u64,
    /// It sent its final snapshot.
    done: bool,
    /// Its CPU time so far.
    cpu_ns: u64,
    /// (user, system) ticks at its end.
    ticks: Option<(u64, u64)>,
    /// Its paced requests never sent: due in the window, and dropped at the warm-up's end.
    backlog: u64,
    warm_dropped: u64,
    /// (busy, elapsed) ns since the clock started, as of its latest snapshot.
    busy: (u64, u64),
    in_flight: u64,
    connections: u64,
}

pub struct Collector<'a> {
    label: &'a str,
    kind: &'a str,
    endpoint: &'a Endpoint,
    plan: &'a Plan,
    control: &'a Control,
    start: Instant,
    run_start_unix: f64,
    interval_ns: u64,
    warm_ns: u64,
    end_ns: Option<u64>,
    totals: Totals,
    pending: BTreeMap<u64, Interval>,
    threads: Vec<Thread>,
    timeline: Vec<TimelineRow>,
    interrupted: bool,
    stopped_at: Option<u64>,
    stopped_early: Option<String>,
    /// The workers' live counters, handed to the hooks.
    cells: Option<Arc<Cells>>,
}

impl<'a> Collector<'a> {
    /// A collector for `threads` workers whose clock started at `start`.
    pub fn new(
        label: &'a str,
        kind: &'a str,
        endpoint: &'a Endpoint,
        plan: &'a Plan,
        control: &'a Control,
        threads: usize,
        start: Instant,
    ) -> Collector<'a> {
        let warm_ns = plan.warmup.as_nanos() as u64;
        Collector {
            label,
            kind,
            endpoint,
            plan,
            control,
            start,
            run_start_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            interval_ns: plan.interval.as_nanos() as u64,
            warm_ns,
            end_ns: match plan.stop {
                Stop::Duration(d) => Some(warm_ns + d.as_nanos() as u64),
                Stop::Requests(_) => None,
            },
            totals: Totals::default(),
            pending: BTreeMap::new(),
            threads: vec![Thread::default(); threads],
            timeline: Vec::new(),
            interrupted: false,
            stopped_at: None,
            stopped_early: None,
            cells: None,
        }
    }

    /// The workers' live counters, which the hooks get with every interval.
    pub fn live(&mut self, cells: Arc<Cells>) {
        self.cells = Some(cells);
    }

    /// The end of the warm-up, ns since the start.
    pub fn warm_end_ns(&self) -> u64 {
        self.warm_ns
    }

    /// The end of a timed run, ns since the start.
    pub fn end_ns(&self) -> Option<u64> {
        self.end_ns
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Adds one thread's snapshot to the totals and to its interval.
    pub fn merge(&mut self, snap: &Snapshot) {
        self.totals += snap;
        let t = &mut self.threads[snap.thread];
        t.cpu_ns = snap.cpu_ns;
        t.ticks = snap.ticks.or(t.ticks);
        (t.backlog, t.warm_dropped, t.busy) = (snap.backlog, snap.warm_dropped, snap.busy);
        t.in_flight = snap.in_flight;
        t.connections = snap.connections;
        t.sent_upto = snap.index;
        t.done |= snap.last;
        let iv = self.pending.entry(snap.index).or_default();
        iv.totals += snap;
        iv.in_flight += snap.in_flight;
        iv.connections += snap.connections;
    }

    /// Every worker has sent its final snapshot: they may now close their connections.
    pub fn all_done(&self) -> bool {
        self.threads.iter().all(|t| t.done)
    }

    /// Closes every interval that is complete, oldest first.
    pub fn close_intervals(&mut self) {
        while let Some(k) = self.complete_interval() {
            self.close_interval(k);
        }
    }

    /// The oldest pending interval, when every thread has sent it or has finished. The interval
    /// that reaches the end of a timed run also takes the replies that come after the end (to
    /// requests sent before it): it waits for every worker to finish, so no progress line
    /// follows the end and none repeats its time.
    fn complete_interval(&self) -> Option<u64> {
        let (&k, _) = self.pending.iter().next()?;
        if !self.threads.iter().all(|t| t.done || t.sent_upto >= k) {
            return None;
        }
        if self.reaches_end(k) && !self.all_done() {
            return None;
        }
        Some(k)
    }

    fn reaches_end(&self, k: u64) -> bool {
        self.end_ns.is_some_and(|e| k * self.interval_ns >= e)
    }

    /// Prints interval `k`'s progress line, calls the hooks and appends its timeline row.
    fn close_interval(&mut self, k: u64) {
        let Interval {
            totals: mut iv,
            mut in_flight,
            connections: mut conns,
        } = self.pending.remove(&k).expect("present");
        if self.reaches_end(k) {
            for (_, tail) in std::mem::take(&mut self.pending) {
                iv += &tail.totals;
            }
            in_flight = self.threads.iter().map(|t| t.in_flight).sum();
            conns = self.threads.iter().map(|t| t.connections).sum();
        }
        let last = self.pending.is_empty() && self.all_done();
        let t_start = (k - 1) * self.interval_ns;
        let t_end = if last {
            // The final interval ends where the measured window ends.
            (k * self.interval_ns).min(self.measured_end())
        } else {
            (k * self.interval_ns).min(self.now_ns())
        };
        let t_end = t_end.max(t_start);
        let len_s = (t_end - t_start) as f64 / 1e9;
        let warm = t_start < self.warm_ns;
        let row = timeline_row(&iv, t_end, self.warm_ns, len_s, warm, in_flight, conns);
        // A final sliver (the last replies of a `-n` run just after a whole interval) stays in
        // the totals (and in the timeline if it holds any) but gets no line: it would read as
        // the same second twice.
        let sliver = last && k > 1 && t_end < t_start + SLIVER_NS;
        let empty_sliver = sliver && iv.counts.requests() + iv.warm.requests() == 0;
        if self.control.progress && !sliver {
            let errors = iv.counts.error_total() + iv.warm.error_total();
            let reconnects = iv.counts.reconnects + iv.warm.reconnects;
            eprintln!(
                "{}{}",
                crate::report::text::progress_line(&row, errors, reconnects, len_s),
                op_rates(&iv, len_s)
            );
        }
        let view = IntervalView {
            target: self.label,
            kind: self.kind,
            target_index: self.control.target_index,
            start_s: t_start as f64 / 1e9,
            end_s: t_end as f64 / 1e9,
            warm,
            last,
            run_start_unix: self.run_start_unix,
            totals: &self.totals,
            interval: &iv,
            interval_s: len_s,
            in_flight,
            connections: conns,
            rate: self.plan.rate,
            row: (!warm && !empty_sliver).then_some(&row),
            cells: self.cells.as_ref(),
        };
        for f in &self.control.hooks {
            f(&view);
        }
        if !warm && !empty_sliver {
            self.timeline.push(row);
        }
    }

    /// Ctrl-C or SIGTERM: the run stops now, with what it measured.
    pub fn interrupt(&mut self) {
        self.interrupted = true;
        self.stopped_at = Some(self.now_ns());
    }

    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// True once, when the errors reach `--max-errors`: the run must stop.
    pub fn too_many_errors(&mut self) -> bool {
        let Some(max) = self.plan.max_errors else {
            return false;
        };
        let errors = self.totals.counts.error_total();
        if self.stopped_early.is_some() || errors < max {
            return false;
        }
        self.stopped_early = Some(format!(
            "stopped early: {errors} errors reached --max-errors {max}"
        ));
        self.stopped_at = Some(self.now_ns());
        true
    }

    /// The end of the measured window, ns since the start: the last reply, but never before the
    /// time we were asked to run (a stalled server must not inflate QPS) or the stop.
    fn measured_end(&self) -> u64 {
        let (end_ns, stopped_at) = (self.end_ns, self.stopped_at);
        let mut end = self.totals.last_done_ns;
        if let Some(e) = end_ns {
            end = end.max(e.min(stopped_at.unwrap_or(e)));
        }
        if let Some(s) = stopped_at {
            end = end.max(s.min(end_ns.unwrap_or(s)));
        }
        end
    }

    /// Nanoseconds since the clock started.
    pub fn elapsed_ns(&self) -> u64 {
        self.now_ns()
    }

    /// The run's result, once every worker has stopped: `wall_ns` is when they had,
    /// `process_cpu_ns` the whole process's CPU time over the run and `server_cpu_ns` that of
    /// the server process it names. The result is redacted.
    pub fn finish(
        self,
        connect: ConnectPhase,
        server: ServerCounts,
        wall_ns: u64,
        process_cpu_ns: u64,
        (server_proc, server_cpu_ns): (&Server, Option<u64>),
    ) -> RunResult {
        let end = self.measured_end();
        let totals = &self.totals;
        let window_s = end.saturating_sub(self.warm_ns) as f64 / 1e9;
        let answered = totals.counts.hits + totals.counts.misses;
        let all_requests = totals.counts.requests() + totals.warm.requests();
        let worker_ns: u64 = self.threads.iter().map(|t| t.cpu_ns).sum();
        let errors = by_kind(&totals.counts);
        let mut result = RunResult {
            target: self.label.to_string(),
            kind: self.kind.to_string(),
            label: None,
            transport: self.endpoint.transport().name().to_string(),
            socket: self.endpoint.socket().map(|p| p.display().to_string()),
            driver: None,
            tls: None,
            started_at: connect.started_at,
            interrupted: self.interrupted,
            stopped_early: self.stopped_early,
            duration_s: round3(window_s),
            qps: if window_s > 0.0 {
                round1(answered as f64 / window_s)
            } else {
                0.0
            },
            requests: totals.counts.requests(),
            hits: totals.counts.hits,
            misses: totals.counts.misses,
            errors,
            error_total: totals.counts.error_total(),
            unsure: totals.counts.unsure,
            error_samples: totals.error_samples.clone(),
            reconnects: totals.counts.reconnects,
            warmup_requests: totals.warm.requests(),
            connected: connect.connected,
            connect_s: round3(connect.seconds),
            connect_failed: connect.failed,
            connect_error: connect.first_error,
            latency_us: Percentiles::of(&totals.latency),
            service_us: Percentiles::of(&totals.service),
            lag_us: self.plan.rate.map(|_| Percentiles::of(&totals.lag)),
            rate: self.plan.rate.map(|r| RateResult {
                backlog: self.threads.iter().map(|t| t.backlog).sum(),
                warmup_dropped: self.threads.iter().map(|t| t.warm_dropped).sum(),
                ..rate_result(r, answered + totals.counts.error_total(), window_s, totals)
            }),
            client_cpu: ClientCpu {
                kernel_share: kernel_share(&self.threads),
                ..ClientCpu::new(
                    worker_ns,
                    process_cpu_ns,
                    wall_ns,
                    self.threads.len(),
                    all_requests,
                )
                .with_busiest(
                    self.threads
                        .iter()
                        .filter(|t| t.busy.1 > 0)
                        .map(|t| t.busy.0 as f64 / t.busy.1 as f64)
                        .reduce(f64::max),
                )
            },
            server_cpu: Some(server_cpu(
                server_proc,
                server_cpu_ns.or_else(|| {
                    // The embedded server: the process's CPU that is not the workers'.
                    (*server_proc == Server::InProcess)
                        .then(|| process_cpu_ns.saturating_sub(worker_ns))
                }),
                worker_ns,
                all_requests,
            )),
            ops: op_results(totals, window_s, &server),
            durability: BTreeMap::new(),
            server_observed: server_observed(
                server.0,
                server.1,
                totals,
                self.plan.instance.is_some(),
            ),
            timeline: self.timeline,
            histogram: encode_histogram(&totals.latency),
            verdict: Default::default(),
            machine_load: None,
        };
        // Server messages (error samples, the first connect error) may echo a URL or a secret.
        crate::redact::run(&mut result);
        result
    }
}

/// `  read 9,000/s  update 1,000/s`: answered requests per op in the interval, for the
/// progress line of a mix that writes (empty for a read-only run).
fn op_rates(iv: &Totals, len_s: f64) -> String {
    let mut s = String::new();
    for (op, o) in Op::ALL.iter().zip(&iv.ops) {
        let n = o.counts.hits + o.counts.misses + o.warm.hits + o.warm.misses;
        if n + o.counts.error_total() + o.warm.error_total() > 0 {
            let rate = (n as f64 / len_s.max(1e-9)).round() as u64;
            s.push_str(&format!(
                "  {} {}/s",
                op.name(),
                crate::report::text::thousands(rate)
            ));
        }
    }
    s
}

/// One interval's timeline row; `warm`: it lies (partly) in the warm-up.
fn timeline_row(
    iv: &Totals,
    t_end_ns: u64,
    warm_ns: u64,
    len_s: f64,
    warm: bool,
    in_flight: u64,
    conns: u64,
) -> TimelineRow {
    let c = if warm { &iv.warm } else { &iv.counts };
    let p = Percentiles::of(&iv.latency);
    // A warm-up interval shows everything that completed in it, counted or not.
    let answered = iv.counts.hits
        + iv.counts.misses
        + if warm {
            iv.warm.hits + iv.warm.misses
        } else {
            0
        };
    TimelineRow {
        t_s: ((t_end_ns as f64 - warm_ns as f64) / 1e6).round() / 1e3,
        qps: if len_s > 0.0 {
            (answered as f64 / len_s).round()
        } else {
            0.0
        },
        hits: c.hits,
        misses: c.misses,
        errors: c.error_total(),
        p50_us: p.p50,
        p99_us: p.p99,
        in_flight,
        connections: conns,
        reconnects: c.reconnects,
    }
}

/// `-R`: the rate asked, the rate achieved over the window, and how many requests went late.
fn rate_result(asked: f64, sent: u64, window_s: f64, totals: &Totals) -> RateResult {
    let achieved = if window_s > 0.0 {
        sent as f64 / window_s
    } else {
        0.0
    };
    RateResult {
        asked,
        achieved: round1(achieved),
        // Requests sent more than 1 ms after their due time.
        late: totals.lag.count_between(1_000_000, u64::MAX),
        kept: (achieved - asked).abs() <= asked * 0.01,
        backlog: 0,
        warmup_dropped: 0,
    }
}

fn by_kind(c: &Counts) -> std::collections::BTreeMap<String, u64> {
    ErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), c.errors[k.index()]))
        .collect()
}

/// Each op of a mix that writes (none for a read-only run), with the server's count of it.
fn op_results(totals: &Totals, window_s: f64, server: &ServerCounts) -> BTreeMap<String, OpResult> {
    let counted = |r: &Result<Option<ServerCount>, String>, op: Op| match r {
        Ok(Some(c)) => c
            .ops
            .get(op.index())
            .copied()
            .filter(|&v| v != ServerCount::UNCOUNTED),
        _ => None,
    };
    Op::ALL
        .iter()
        .zip(&totals.ops)
        .filter(|(_, o)| o.counts.requests() + o.warm.requests() > 0)
        .map(|(&op, o)| {
            let c = &o.counts;
            let server_observed = match (counted(&server.0, op), counted(&server.1, op)) {
                _ if restarted(&server.0, &server.1).is_some() => None,
                (Some(b), Some(a)) => Some(observed(
                    format!("{} ({})", server_source(server), op.name()),
                    a.saturating_sub(b),
                    c,
                    &o.warm,
                    op.name(),
                )),
                _ => None,
            };
            let r = OpResult {
                requests: c.requests(),
                qps: if window_s > 0.0 {
                    round1((c.hits + c.misses) as f64 / window_s)
                } else {
                    0.0
                },
                hits: c.hits,
                misses: c.misses,
                errors: by_kind(c),
                error_total: c.error_total(),
                unsure: c.unsure,
                latency_us: Percentiles::of(&o.latency),
                server_observed,
                histogram: encode_histogram(&o.latency),
            };
            (op.name().to_string(), r)
        })
        .collect()
}

/// Why the two reads of the server's counter cannot be subtracted: the server restarted or
/// reset its counters in between (another epoch, or a counter that went back).
fn restarted(
    before: &Result<Option<ServerCount>, String>,
    after: &Result<Option<ServerCount>, String>,
) -> Option<String> {
    let (Ok(Some(b)), Ok(Some(a))) = (before, after) else {
        return None;
    };
    match (&b.epoch, &a.epoch) {
        (Some(x), Some(y)) if x != y => Some(format!(
            "the server restarted or reset its counters during the run ({x}, then {y}): its count is not comparable"
        )),
        _ if a.value < b.value => Some(format!(
            "the server's counter went back from {} to {} during the run (a restart or a reset): its count is not comparable",
            b.value, a.value
        )),
        _ => None,
    }
}

fn server_source(server: &ServerCounts) -> String {
    match &server.1 {
        Ok(Some(c)) => c.source.clone(),
        _ => String::new(),
    }
}

/// The server's `delta` against what loadgen sent of `what` (warm-up included). Connect
/// failures never reached the server; every other error may have, or not.
fn observed(
    source: String,
    delta: u64,
    counts: &Counts,
    warm: &Counts,
    what: &str,
) -> ServerObserved {
    let connect =
        counts.errors[ErrorKind::Connect.index()] + warm.errors[ErrorKind::Connect.index()];
    let expected = counts.requests() + warm.requests() - connect;
    let unsure = counts.error_total() + warm.error_total() - connect;
    let ok = delta <= expected && delta + unsure >= expected;
    ServerObserved {
        source,
        delta: Some(delta),
        expected,
        matches: ok,
        not_comparable: false,
        note: (!ok).then(|| {
            format!(
                "the server counted {delta} {what}s but loadgen sent {expected} (warm-up included)"
            )
        }),
        before: None,
        after: None,
        shared: false,
    }
}

/// The server's count against what loadgen sent (warm-up included). `shared`: one of several
/// generators (`--instance`), so the count holds the others' requests and can only be checked
/// for holding ours; `merge` checks the sum.
fn server_observed(
    before: Result<Option<ServerCount>, String>,
    after: Result<Option<ServerCount>, String>,
    totals: &Totals,
    shared: bool,
) -> Option<ServerObserved> {
    let connect = totals.counts.errors[ErrorKind::Connect.index()]
        + totals.warm.errors[ErrorKind::Connect.index()];
    let expected = totals.counts.requests() + totals.warm.requests() - connect;
    if let Some(why) = restarted(&before, &after) {
        return Some(ServerObserved {
            source: after
                .map(|a| a.map(|a| a.source))
                .ok()
                .flatten()
                .unwrap_or_default(),
            delta: None,
            expected,
            matches: false,
            note: Some(why),
            not_comparable: true,
            before: None,
            after: None,
            shared,
        });
    }
    match (before, after) {
        (Ok(Some(b)), Ok(Some(a))) => {
            let delta = a.value.saturating_sub(b.value);
            let mut o = observed(a.source, delta, &totals.counts, &totals.warm, "lookup");
            (o.before, o.after) = (Some(b.value), Some(a.value));
            if shared {
                let unsure = totals.counts.error_total() + totals.warm.error_total() - connect;
                o.shared = true;
                o.matches = delta + unsure >= expected;
                o.note = Some(if o.matches {
                    "includes the other generators' requests (--instance); `loadgen merge` \
                     of their results compares the server's count with their sum"
                        .to_string()
                } else {
                    format!("the server counted {delta} lookups, fewer than the {expected} this generator sent")
                });
            }
            Some(o)
        }
        (Ok(None), _) | (_, Ok(None)) => None,
        (Err(e), _) | (_, Err(e)) => Some(ServerObserved {
            source: "unavailable".into(),
            delta: None,
            expected,
            matches: false,
            note: Some(e),
            before: None,
            after: None,
            shared,
            not_comparable: false,
        }),
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// System ticks over all ticks of the worker threads, at their end.
fn kernel_share(threads: &[Thread]) -> Option<f64> {
    let (user, sys) = threads
        .iter()
        .filter_map(|t| t.ticks)
        .fold((0, 0), |(u, s), (tu, ts)| (u + tu, s + ts));
    (user + sys > 0).then(|| round3(sys as f64 / (user + sys) as f64))
}

/// The server's CPU over the run next to the client's, and the rate at which the two together
/// would fill every core of this machine.
fn server_cpu(server: &Server, ns: Option<u64>, worker_ns: u64, requests: u64) -> ServerCpu {
    let (pid, process, note) = match server {
        Server::Process { pid, name } => (Some(*pid), Some(name.clone()), None),
        Server::InProcess => (
            Some(std::process::id()),
            Some("loadgen (embedded server)".to_string()),
            None,
        ),
        Server::Unknown(why) => (None, None, Some(why.clone())),
    };
    let note = note.or_else(|| {
        ns.is_none()
            .then(|| "the server process ended during the run".to_string())
    });
    let per = |n: u64| (requests > 0).then(|| n as f64 / requests as f64 / 1e3);
    let per_request_us = ns.and_then(per);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu_bound_qps = match (per_request_us, per(worker_ns)) {
        (Some(s), Some(c)) if s + c > 0.0 => Some((cores * 1e6 / (s + c)).round()),
        _ => None,
    };
    ServerCpu {
        pid,
        process,
        cpu_s: ns.map(|n| (n as f64 / 1e6).round() / 1e3),
        per_request_us: per_request_us.map(|u| (u * 1e3).round() / 1e3),
        cpu_bound_qps,
        note,
    }
}
