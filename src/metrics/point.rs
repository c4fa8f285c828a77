//! What a scrape renders for one target: its cumulative numbers, with the latency histogram in
//! the exported buckets.

use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::cells::Cells;
use crate::mix::Op;
use crate::outcome::ErrorKind;
use crate::proto::server_latency::SetMembers;
use crate::recorder::Counts;
use crate::totals::Totals;

pub use crate::cells::BUCKETS;

/// Cumulative numbers of one target.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Cum {
    pub hits: u64,
    pub misses: u64,
    pub errors: [u64; ErrorKind::COUNT],
    pub reconnects: u64,
    /// Latencies per bucket of [`BUCKETS`] (not cumulative); the last slot is above the largest
    /// bound (+Inf).
    pub buckets: [u64; BUCKETS.len() + 1],
    pub sum_ns: u128,
    pub count: u64,
    /// Per op (`Op::index` order) when the mix writes; empty for a read-only run.
    pub ops: Vec<Cum>,
}

impl Cum {
    /// Counters include the warm-up; the latency buckets hold counted requests only (the
    /// recorder never times warm-up requests).
    pub fn of(t: &Totals) -> Cum {
        let mut c = Cum::of_parts(&t.counts, &t.warm, &t.latency);
        c.ops = t
            .ops
            .iter()
            .map(|o| Cum::of_parts(&o.counts, &o.warm, &o.latency))
            .collect();
        c
    }

    /// Latencies only (a set's server: its counts are what was routed to it).
    pub fn of_latency(h: &Histogram<u64>) -> Cum {
        Cum::of_parts(&Counts::default(), &Counts::default(), h)
    }

    fn of_parts(counts: &Counts, warm: &Counts, h: &Histogram<u64>) -> Cum {
        let mut c = Cum {
            hits: counts.hits + warm.hits,
            misses: counts.misses + warm.misses,
            reconnects: counts.reconnects + warm.reconnects,
            ..Cum::default()
        };
        for (i, e) in c.errors.iter_mut().enumerate() {
            *e = counts.errors[i] + warm.errors[i];
        }
        let mut b = 0;
        for v in h.iter_recorded() {
            let n = v.count_at_value();
            let value = v.value_iterated_to();
            // Values HdrHistogram cannot tell apart (one slot, 0.1% wide) go to the slot's start.
            let low = h.lowest_equivalent(value);
            while b < BUCKETS.len() && low > BUCKETS[b].1 {
                b += 1;
            }
            c.buckets[b] += n;
            c.sum_ns += u128::from(h.median_equivalent(value)) * u128::from(n);
            c.count += n;
        }
        c
    }

    /// A run's numbers as its workers' live blocks hold them now; per op when `per_op`.
    pub fn of_cells(cells: &Cells, per_op: bool) -> Cum {
        let mut top = Cum::default();
        let mut ops = Vec::new();
        for i in 0..Op::COUNT {
            let s = cells.op_sum(i);
            let c = Cum {
                hits: s.hits,
                misses: s.misses,
                errors: s.errors,
                reconnects: 0,
                buckets: s.buckets,
                sum_ns: s.sum_ns,
                count: s.buckets.iter().sum(),
                ops: Vec::new(),
            };
            top.add(&c);
            if per_op {
                ops.push(c);
            }
        }
        top.reconnects = cells.reconnects();
        top.ops = ops;
        top
    }

    pub(crate) fn add(&mut self, o: &Cum) {
        self.hits += o.hits;
        self.misses += o.misses;
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        self.reconnects += o.reconnects;
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.sum_ns += o.sum_ns;
        self.count += o.count;
        if self.ops.is_empty() {
            self.ops = o.ops.clone();
        } else {
            for (a, b) in self.ops.iter_mut().zip(&o.ops) {
                a.add(b);
            }
        }
    }
}

/// What a scrape renders for one target.
#[derive(Clone, Debug, Default)]
pub(crate) struct Point {
    pub target: String,
    pub c: Cum,
    pub qps: f64,
    pub in_flight: u64,
    pub connections: u64,
    pub rate: Option<f64>,
    /// Unix milliseconds at the end of the last interval.
    pub at_ms: i64,
    /// The current run's live blocks: `c` is then read from them at each scrape, and the
    /// samples carry no timestamp (they are current when scraped).
    pub live: Option<Live>,
    /// A set's servers: earlier runs' (sweep steps), and the current run's read at the scrape.
    pub servers_base: Vec<ServerCum>,
    pub members: Option<SetMembers>,
    /// The run's 95% CIs over its measured intervals so far.
    pub precision: Option<crate::stats::Figures>,
}

/// One server of a set as a scrape renders it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ServerCum {
    pub name: String,
    /// Requests routed to it (keys of multi-gets; statements on SQL shards).
    pub routed: u64,
    /// The latencies of its replies.
    pub latency: Cum,
}

/// `base` with what `members` hold now added, server by server.
pub(crate) fn servers(base: &[ServerCum], members: Option<&SetMembers>) -> Vec<ServerCum> {
    let Some(m) = members else {
        return base.to_vec();
    };
    (0..m.names.len().max(base.len()))
        .map(|i| {
            let mut s = base.get(i).cloned().unwrap_or_default();
            if let Some(name) = m.names.get(i) {
                let (routed, h) = m.now(i);
                s.name = name.clone();
                s.routed += routed;
                s.latency.add(&Cum::of_latency(&h));
            }
            s
        })
        .collect()
}

/// Where a point's current numbers come from while its run is live.
#[derive(Clone, Debug)]
pub(crate) struct Live {
    /// Finished runs of the target (sweep and SLO steps).
    pub base: Cum,
    pub cells: Arc<Cells>,
    pub per_op: bool,
}

impl Point {
    /// The numbers as of now: read from the live blocks when there are some.
    pub fn now(&self) -> Point {
        let mut p = self.clone();
        if let Some(l) = &self.live {
            let mut c = l.base.clone();
            c.add(&Cum::of_cells(&l.cells, l.per_op));
            p.c = c;
        }
        p
    }

    /// A set's servers as of now.
    pub fn servers(&self) -> Vec<ServerCum> {
        servers(&self.servers_base, self.members.as_ref())
    }

    /// The samples' timestamp: none when live (current at the scrape), else the end of the
    /// interval the numbers describe, so a scrape between two updates is not read as "now".
    pub fn stamp(&self) -> Option<i64> {
        self.live.is_none().then_some(self.at_ms)
    }
}
