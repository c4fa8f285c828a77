//! Per-thread recording: counters and HdrHistograms for the current interval. The request loop
//! writes here (no locks, no atomics: one thread owns it); every interval the thread hands the
//! snapshot to the collector and starts a fresh one. It also keeps the thread's live block
//! (`crate::cells`) current, for a scrape that lands between two snapshots.

use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::cells::{bucket_of, bump, Cell, Cells};

use crate::mix::Op;
use crate::outcome::{ErrorKind, Outcome};
use crate::proto::codec::Tally;

/// Latencies are recorded in nanoseconds, 3 significant digits, up to 100 s.
pub const HIST_MAX_NS: u64 = 100_000_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

/// Counters of one interval (or of a whole run, once summed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub hits: u64,
    pub misses: u64,
    pub errors: [u64; ErrorKind::COUNT],
    pub reconnects: u64,
    /// Writes in doubt: sent on a connection that broke (or timed out) before their reply, so
    /// the server may or may not have applied them. Each is also counted as its error.
    pub unsure: u64,
    /// Multi-gets (`--batch`): keys found and not found, over the requests answered.
    pub key_hits: u64,
    pub key_misses: u64,
    /// Requests sent again after a deadlock or serialization failure (`--retries`); each try's
    /// outcome is counted once, by its last try.
    pub retries: u64,
}

impl Counts {
    pub fn error_total(&self) -> u64 {
        self.errors.iter().sum()
    }
    /// Requests that got an outcome: hits + misses + errors.
    pub fn requests(&self) -> u64 {
        self.hits + self.misses + self.error_total()
    }
    pub fn add(&mut self, o: &Counts) {
        self.hits += o.hits;
        self.misses += o.misses;
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        self.reconnects += o.reconnects;
        self.unsure += o.unsure;
        self.key_hits += o.key_hits;
        self.key_misses += o.key_misses;
        self.retries += o.retries;
    }
}

/// One op's share of an interval, when the mix is not read-only.
#[derive(Clone, Debug)]
pub struct OpStats {
    pub counts: Counts,
    pub warm: Counts,
    /// Done minus due, as the run's `latency`.
    pub latency: Histogram<u64>,
}

impl OpStats {
    /// One per op (`Op::index` order) when `per_op`, else none: a read-only run keeps none.
    pub fn per_op(per_op: bool) -> Vec<OpStats> {
        let n = if per_op { Op::COUNT } else { 0 };
        (0..n)
            .map(|_| OpStats {
                counts: Counts::default(),
                warm: Counts::default(),
                latency: new_histogram(),
            })
            .collect()
    }

    pub fn add(&mut self, o: &OpStats) {
        self.counts.add(&o.counts);
        self.warm.add(&o.warm);
        let _ = self.latency.add(&o.latency);
    }
}

/// Adds `from` into `into` op by op (`into` takes the ops of the first that has them).
pub fn add_ops(into: &mut Vec<OpStats>, from: &[OpStats]) {
    if into.is_empty() {
        into.extend(from.iter().cloned());
    } else {
        for (a, b) in into.iter_mut().zip(from) {
            a.add(b);
        }
    }
}

/// What one thread measured in one interval.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub thread: usize,
    /// 1-based interval number; the collector merges all threads' snapshots of one index.
    pub index: u64,
    /// The thread's final snapshot: it has stopped.
    pub last: bool,
    /// Counted requests (after the warm-up).
    pub counts: Counts,
    /// Requests completed during the warm-up: not counted, kept for the server-side cross-check.
    pub warm: Counts,
    /// Done minus due (due = sent in closed loop): corrected for coordinated omission.
    pub latency: Histogram<u64>,
    /// Done minus sent: what the server and network took.
    pub service: Histogram<u64>,
    /// Sent minus due: how late the generator was (paced runs only).
    pub lag: Histogram<u64>,
    /// How long each connect of the measured window took (`--reconnect-every`).
    pub connect: Histogram<u64>,
    /// Latest completion, nanoseconds since the run's start.
    pub last_done_ns: u64,
    pub in_flight: u64,
    pub connections: u64,
    /// This thread's CPU time so far (cumulative), nanoseconds.
    pub cpu_ns: u64,
    /// (user, system) clock ticks of this thread so far, on the last snapshot only.
    pub ticks: Option<(u64, u64)>,
    /// Paced runs, so far: requests due in the measured window never sent, and requests of
    /// the warm-up dropped at its end (see `Recorder`).
    pub backlog: u64,
    pub warm_dropped: u64,
    /// (busy, elapsed) ns of the thread since the clock started (worker.rs `busy`).
    pub busy: (u64, u64),
    /// A few error messages, for the report.
    pub error_samples: Vec<String>,
    /// Per op, when the mix writes (empty for a read-only run).
    pub ops: Vec<OpStats>,
}

impl Snapshot {
    pub fn new(thread: usize, index: u64, per_op: bool) -> Snapshot {
        Snapshot {
            thread,
            index,
            last: false,
            counts: Counts::default(),
            warm: Counts::default(),
            latency: new_histogram(),
            service: new_histogram(),
            lag: new_histogram(),
            connect: new_histogram(),
            last_done_ns: 0,
            in_flight: 0,
            connections: 0,
            cpu_ns: 0,
            ticks: None,
            backlog: 0,
            warm_dropped: 0,
            busy: (0, 0),
            error_samples: Vec::new(),
            ops: OpStats::per_op(per_op),
        }
    }
}

/// Error messages kept per thread, and per run once merged.
pub const MAX_SAMPLES: usize = 8;

/// The thread-local recorder shared (via `Rc<RefCell>`) by the thread's connection tasks.
pub struct Recorder {
    pub cur: Snapshot,
    pub in_flight: u64,
    pub connections: u64,
    /// Requests due before the end but never sent, counted once per connection at its end.
    pub backlog: u64,
    /// Requests due in the warm-up that were not sent by its end, and never will be.
    pub warm_dropped: u64,
    samples_taken: usize,
    per_op: bool,
    /// The run's live counters; this thread writes only its own block.
    live: Option<Arc<Cells>>,
}

impl Recorder {
    /// `per_op`: the mix writes, so each op gets its own counts and latency.
    pub fn new(thread: usize, per_op: bool) -> Recorder {
        Recorder {
            per_op,
            cur: Snapshot::new(thread, 1, per_op),
            in_flight: 0,
            connections: 0,
            backlog: 0,
            warm_dropped: 0,
            samples_taken: 0,
            live: None,
        }
    }

    /// Also keeps `cells`' block of this thread current.
    pub(crate) fn with_cells(mut self, cells: Arc<Cells>) -> Recorder {
        self.live = Some(cells);
        self
    }

    #[inline]
    fn cell(&self) -> Option<&Cell> {
        self.live.as_deref().and_then(|c| c.thread(self.cur.thread))
    }

    /// One request finished. Times are nanoseconds since the run's start.
    #[inline]
    pub fn record(
        &mut self,
        warm: bool,
        (op, due, sent, done): (Op, u64, u64, u64),
        result: Result<Outcome, ErrorKind>,
    ) {
        self.count(warm, Some(op), |counts| match result {
            Ok(Outcome::Hit) => counts.hits += 1,
            Ok(Outcome::Miss) => counts.misses += 1,
            Err(kind) => counts.errors[kind.index()] += 1,
        });
        let latency = done.saturating_sub(due).max(1);
        if let Some(cell) = self.cell() {
            let o = &cell.ops[op.index()];
            match result {
                Ok(Outcome::Hit) => bump(&o.hits, 1),
                Ok(Outcome::Miss) => bump(&o.misses, 1),
                Err(kind) => bump(&o.errors[kind.index()], 1),
            }
            if !warm {
                // The slot the histogram files it in, so a scrape's buckets and the result's
                // histogram agree to the request.
                let h = &self.cur.latency;
                let v = latency.min(h.high());
                bump(&o.buckets[bucket_of(h.lowest_equivalent(v))], 1);
                bump(&o.sum_ns, h.median_equivalent(v));
            }
        }
        if warm {
            return;
        }
        if let Some(o) = self.cur.ops.get_mut(op.index()) {
            o.latency.saturating_record(latency);
        }
        // Errors count toward latency too: a timeout took that long from the user's view.
        self.cur.latency.saturating_record(latency);
        self.cur
            .service
            .saturating_record(done.saturating_sub(sent).max(1));
        if sent > due {
            self.cur.lag.saturating_record(sent - due);
        }
        self.cur.last_done_ns = self.cur.last_done_ns.max(done);
    }

    /// A connect that failed: counted as a run-level `connect` error, not timed, and charged
    /// to no op, since no request was sent. The live cells have no run-level slot: a scrape
    /// shows it under `read`, as the total of errors by kind stays right.
    pub fn record_error(&mut self, warm: bool, kind: ErrorKind, message: &str) {
        self.count(warm, None, |c| c.errors[kind.index()] += 1);
        if let Some(cell) = self.cell() {
            bump(&cell.ops[Op::Read.index()].errors[kind.index()], 1);
        }
        self.sample(kind, message);
    }

    /// The keys of one answered multi-get, found and not found (the request itself is
    /// `record`ed as one).
    #[inline]
    pub fn keys(&mut self, warm: bool, tally: Tally) {
        self.count(warm, None, |c| {
            c.key_hits += u64::from(tally.hits);
            c.key_misses += u64::from(tally.misses);
        });
    }

    /// A write of `op` lost with its connection: it may or may not have been applied.
    pub fn unsure(&mut self, warm: bool, op: Op) {
        self.count(warm, Some(op), |c| c.unsure += 1);
    }

    /// A request of `op` is sent again (`--retries`).
    pub fn retried(&mut self, warm: bool, op: Op) {
        self.count(warm, Some(op), |c| c.retries += 1);
    }

    /// Applies `add` to the run's counts (or warm-up counts) and to `op`'s, when per op.
    #[inline]
    fn count(&mut self, warm: bool, op: Option<Op>, add: impl Fn(&mut Counts)) {
        add(if warm {
            &mut self.cur.warm
        } else {
            &mut self.cur.counts
        });
        if let Some(o) = op.and_then(|op| self.cur.ops.get_mut(op.index())) {
            add(if warm { &mut o.warm } else { &mut o.counts });
        }
    }

    pub fn sample(&mut self, kind: ErrorKind, message: &str) {
        if self.samples_taken < MAX_SAMPLES {
            self.samples_taken += 1;
            self.cur
                .error_samples
                .push(format!("{}: {}", kind.name(), message));
        }
    }

    /// A connect of the measured window took `ns`.
    pub fn connect_took(&mut self, ns: u64) {
        self.cur.connect.saturating_record(ns);
    }

    pub fn reconnected(&mut self) {
        self.cur.counts.reconnects += 1;
        if let Some(cell) = self.cell() {
            bump(&cell.reconnects, 1);
        }
    }

    /// Hands over the interval's snapshot and starts the next one.
    pub fn take(&mut self, cpu_ns: u64, last: bool) -> Snapshot {
        let next = Snapshot::new(self.cur.thread, self.cur.index + 1, self.per_op);
        let mut s = std::mem::replace(&mut self.cur, next);
        s.last = last;
        s.in_flight = self.in_flight;
        s.connections = self.connections;
        s.cpu_ns = cpu_ns;
        s.backlog = self.backlog;
        s.warm_dropped = self.warm_dropped;
        s
    }
}
