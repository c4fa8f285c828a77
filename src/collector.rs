//! The collector: the one place the workers' snapshots meet. It merges each snapshot into the
//! run's totals and into its interval, closes an interval once every worker has handed it over
//! (hooks, the progress line among them, and the timeline row), decides when errors stop the run, and builds the
//! `RunResult`. All of it runs once per interval per thread, off the request path.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::cells::Cells;
use crate::control::{Control, IntervalView};
use crate::cpu::ServerProcess;
use crate::error::SetupError;
use crate::mix::Op;
use crate::outcome::ErrorKind;
use crate::plan::{Plan, Stop};
use crate::proto::server_latency::SetMembers;
use crate::proto::target::ServerCount;
use crate::recorder::{Counts, Snapshot};
use crate::result::{
    encode_histogram, ClientCpu, KeysResult, OpResult, Percentiles, RateResult, RunResult,
    ServerCpu, ServerObserved, TimelineRow,
};
use crate::stats::{Centers, Figures, Point};
use crate::totals::Totals;
use crate::transport::Endpoint;

mod members;
mod run_result;

/// The live CIs are made again every interval up to this many, then every n / this.
const LIVE_REMAKES: usize = 1000;

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
    Result<Option<ServerCount>, SetupError>,
    Result<Option<ServerCount>, SetupError>,
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
    /// The timeline's intervals as the statistics read them: the run's, then each op's.
    points: Vec<Point>,
    op_points: Vec<Vec<Point>>,
    /// `--ci`: the measured seconds at which the goal was met, and whether the stop it asks
    /// for is still to be handed to the workers.
    goal_reached_s: Option<f64>,
    goal_stop: bool,
    /// The CIs over the measured intervals as last made, for live views.
    so_far: Option<Figures>,
    interrupted: bool,
    stopped_at: Option<u64>,
    stopped_early: Option<String>,
    /// The workers' live counters, handed to the hooks.
    cells: Option<Arc<Cells>>,
    /// A set's servers, for live views.
    members: Option<SetMembers>,
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
                Stop::Requests(_) | Stop::Trace => None,
            },
            totals: Totals::default(),
            pending: BTreeMap::new(),
            threads: vec![Thread::default(); threads],
            timeline: Vec::new(),
            points: Vec::new(),
            op_points: Vec::new(),
            goal_reached_s: None,
            goal_stop: false,
            so_far: None,
            interrupted: false,
            stopped_at: None,
            stopped_early: None,
            cells: None,
            members: None,
        }
    }

    /// The workers' live counters, which the hooks get with every interval.
    pub fn live(&mut self, cells: Arc<Cells>, members: Option<SetMembers>) {
        self.cells = Some(cells);
        self.members = members;
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

    /// Calls the hooks with interval `k` (the progress line is one) and appends its timeline row.
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
        let measured = !warm && !empty_sliver;
        if measured {
            self.points.push(point(&iv.counts, &iv.latency, len_s));
            self.op_points.resize_with(iv.ops.len(), Vec::new);
            for (o, pts) in iv.ops.iter().zip(&mut self.op_points) {
                pts.push(point(&o.counts, &o.latency, len_s));
            }
        }
        // The CIs so far, for live views and `--ci`: from the points, never per request, and
        // made again at most [`LIVE_REMAKES`] times per that many intervals, so a day-long run's
        // last intervals cost no more than its first thousand.
        let want = !self.control.hooks.is_empty() || self.plan.ci.is_some();
        let n = self.points.len();
        if measured && want && (self.so_far.is_none() || n % n.div_ceil(LIVE_REMAKES) == 0) {
            let (f, c) = self.figures_so_far();
            if let Some(goal) = &self.plan.ci {
                if self.goal_reached_s.is_none() && goal.met(&f, &c) {
                    self.goal_reached_s = Some(row.t_s);
                    self.goal_stop = true;
                }
            }
            self.so_far = Some(f);
        }
        let so_far = self.so_far.as_ref().filter(|_| measured);
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
            progress_row: (!sliver).then_some(&row),
            cells: self.cells.as_ref(),
            members: self.members.as_ref(),
            precision: so_far,
        };
        for f in &self.control.hooks {
            f(&view);
        }
        if measured {
            self.timeline.push(row);
        }
    }

    /// The run's CIs over its measured intervals so far, centered on its figures so far.
    fn figures_so_far(&self) -> (Figures, Centers) {
        let (answered, secs) = self
            .points
            .iter()
            .fold((0, 0.0), |(n, t), p| (n + p.answered, t + p.len_s));
        let centers = centers(per_s(answered, secs), &self.totals.latency);
        let f = Figures::of(&self.points, self.plan.interval.as_secs_f64(), centers);
        (f, centers)
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

    /// Once, when `--ci`'s goal was met at the interval just closed: the run's new end, now,
    /// which the workers must be given.
    pub fn goal_reached(&mut self) -> Option<u64> {
        if !std::mem::take(&mut self.goal_stop) || self.stopped_at.is_some() {
            return None;
        }
        let now = self.now_ns().min(self.end_ns.unwrap_or(u64::MAX));
        self.end_ns = Some(now);
        Some(now)
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
}

/// One measured interval of `len_s` seconds, as the statistics read it.
fn point(c: &Counts, latency: &Histogram<u64>, len_s: f64) -> Point {
    let answered = c.hits + c.misses;
    let at = centers(per_s(answered, len_s), latency);
    Point {
        len_s,
        answered,
        at,
    }
}

/// A rate and the percentiles of `latency`, as the statistics read them.
fn centers(qps: f64, latency: &Histogram<u64>) -> Centers {
    let p = Percentiles::of(latency);
    Centers {
        qps,
        p50: p.p50,
        p90: p.p90,
        p99: p.p99,
        p999: p.p999,
    }
}

/// `n` a second over `secs` (0 over none).
fn per_s(n: u64, secs: f64) -> f64 {
    match secs > 0.0 {
        true => n as f64 / secs,
        false => 0.0,
    }
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
