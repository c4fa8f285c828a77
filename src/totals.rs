//! Totals: the merge of every thread's snapshots, per interval (for progress and the timeline)
//! and for the whole run. Histograms are added bucket by bucket, so merged percentiles are exact.

use std::ops::AddAssign;

use hdrhistogram::Histogram;

use crate::recorder::{add_ops, new_histogram, Counts, OpStats, Snapshot, MAX_SAMPLES};

#[derive(Clone, Debug)]
pub struct Totals {
    pub counts: Counts,
    pub warm: Counts,
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    pub lag: Histogram<u64>,
    pub connect: Histogram<u64>,
    pub last_done_ns: u64,
    pub error_samples: Vec<String>,
    /// Per op, when the mix writes (`Op::index` order; empty for a read-only run).
    pub ops: Vec<OpStats>,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            counts: Counts::default(),
            warm: Counts::default(),
            latency: new_histogram(),
            service: new_histogram(),
            lag: new_histogram(),
            connect: new_histogram(),
            last_done_ns: 0,
            error_samples: Vec::new(),
            ops: Vec::new(),
        }
    }
}

impl AddAssign<&Snapshot> for Totals {
    fn add_assign(&mut self, s: &Snapshot) {
        self.counts.add(&s.counts);
        self.warm.add(&s.warm);
        // Same bounds everywhere, so add cannot fail.
        let _ = self.latency.add(&s.latency);
        let _ = self.service.add(&s.service);
        let _ = self.lag.add(&s.lag);
        let _ = self.connect.add(&s.connect);
        self.last_done_ns = self.last_done_ns.max(s.last_done_ns);
        add_ops(&mut self.ops, &s.ops);
        for m in &s.error_samples {
            if self.error_samples.len() < MAX_SAMPLES && !self.error_samples.contains(m) {
                self.error_samples.push(m.clone());
            }
        }
    }
}

impl AddAssign<&Totals> for Totals {
    fn add_assign(&mut self, t: &Totals) {
        self.counts.add(&t.counts);
        self.warm.add(&t.warm);
        let _ = self.latency.add(&t.latency);
        let _ = self.service.add(&t.service);
        let _ = self.lag.add(&t.lag);
        let _ = self.connect.add(&t.connect);
        self.last_done_ns = self.last_done_ns.max(t.last_done_ns);
        add_ops(&mut self.ops, &t.ops);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Op;
    use crate::outcome::{ErrorKind, Outcome};
    use crate::recorder::Recorder;
    use crate::result::Percentiles;

    #[test]
    fn merged_percentiles_equal_one_histogram_of_all_samples() {
        let mut a = Recorder::new(0, false);
        let mut b = Recorder::new(1, false);
        let mut all = new_histogram();
        let mut sorted = Vec::new();
        for i in 0..10_000u64 {
            let (rec, lat) = if i % 3 == 0 {
                (&mut a, 1_000 + i * 7)
            } else {
                (&mut b, 50_000 + i)
            };
            rec.record(false, (Op::Read, 0, 0, lat), Ok(Outcome::Hit));
            all.record(lat).unwrap();
            sorted.push(lat);
        }
        let mut t = Totals::default();
        t += &a.take(0, true);
        t += &b.take(0, true);
        assert_eq!(t.counts.hits, 10_000);
        let p = Percentiles::of(&t.latency);
        assert_eq!(p, Percentiles::of(&all));
        // And against the samples themselves, not only another histogram: the nearest rank,
        // within the histogram's precision (under 0.1%).
        sorted.sort_unstable();
        let rank = |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).max(1) - 1] as f64;
        let close = |got_us: f64, want_ns: f64| {
            assert!(
                (got_us * 1000.0 - want_ns).abs() <= want_ns * 0.001 + 1.0,
                "{got_us} µs vs {want_ns} ns"
            )
        };
        assert_eq!(p.count, 10_000);
        close(p.min, sorted[0] as f64);
        close(p.max, *sorted.last().unwrap() as f64);
        close(p.p50, rank(0.50));
        close(p.p90, rank(0.90));
        close(p.p99, rank(0.99));
        close(p.p999, rank(0.999));
        assert_eq!(
            t.latency.value_at_quantile(0.99),
            all.value_at_quantile(0.99)
        );
    }

    #[test]
    fn counts_add_and_warmup_stays_apart() {
        let mut r = Recorder::new(0, false);
        r.record(true, (Op::Read, 0, 0, 10), Ok(Outcome::Hit));
        r.record(false, (Op::Read, 0, 0, 10), Ok(Outcome::Miss));
        r.record(false, (Op::Read, 0, 0, 10), Err(ErrorKind::Timeout));
        r.record_error(false, ErrorKind::Connect, "refused");
        let s = r.take(0, false);
        let mut t = Totals::default();
        t += &s;
        t += &s;
        assert_eq!(t.warm.hits, 2);
        assert_eq!(t.counts.hits, 0);
        assert_eq!(t.counts.misses, 2);
        assert_eq!(t.counts.errors[ErrorKind::Timeout.index()], 2);
        assert_eq!(t.counts.errors[ErrorKind::Connect.index()], 2);
        assert_eq!(t.counts.requests(), 6);
        // only timed requests enter the histogram
        assert_eq!(t.latency.len(), 4);
        assert_eq!(r.cur.index, 2);
    }
}
