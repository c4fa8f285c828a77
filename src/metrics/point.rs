//! What a scrape renders for one target: its cumulative numbers, with the latency histogram in
//! the exported buckets.

use hdrhistogram::Histogram;

use crate::outcome::ErrorKind;
use crate::recorder::Counts;
use crate::totals::Totals;

/// Latency bucket bounds: the `le` label (canonical float form) and the bound in nanoseconds.
/// `+Inf` follows.
pub const BUCKETS: [(&str, u64); 19] = [
    ("1e-05", 10_000),
    ("2e-05", 20_000),
    ("5e-05", 50_000),
    ("0.0001", 100_000),
    ("0.0002", 200_000),
    ("0.0005", 500_000),
    ("0.001", 1_000_000),
    ("0.002", 2_000_000),
    ("0.005", 5_000_000),
    ("0.01", 10_000_000),
    ("0.02", 20_000_000),
    ("0.05", 50_000_000),
    ("0.1", 100_000_000),
    ("0.2", 200_000_000),
    ("0.5", 500_000_000),
    ("1.0", 1_000_000_000),
    ("2.0", 2_000_000_000),
    ("5.0", 5_000_000_000),
    ("10.0", 10_000_000_000),
];

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
    /// Unix milliseconds at the end of the interval these numbers describe: every sample carries
    /// it, so a scrape that lands between two updates is not read as "now".
    pub at_ms: i64,
}
