//! Fewer points for a long timeline: adjacent intervals are merged so a chart draws at most
//! [`MAX_POINTS`] of them (an hour at 1 s intervals stays quick to draw and the page small). The
//! result file keeps every interval; only what a page draws is merged. Pages get the rows as
//! columns ([`Columns`]): the field names once, not once per row, keep them small.

use std::ops::Range;

use serde::Serialize;

use crate::result::TimelineRow;

/// Timeline rows as one array per field (the page's script turns them back into rows).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Columns {
    pub t_s: Vec<f64>,
    pub qps: Vec<f64>,
    pub hits: Vec<u64>,
    pub misses: Vec<u64>,
    pub errors: Vec<u64>,
    pub p50_us: Vec<f64>,
    pub p99_us: Vec<f64>,
    pub in_flight: Vec<u64>,
    pub connections: Vec<u64>,
    pub reconnects: Vec<u64>,
}

impl Columns {
    pub fn push(&mut self, r: &TimelineRow) {
        self.t_s.push(r.t_s);
        self.qps.push(r.qps);
        self.hits.push(r.hits);
        self.misses.push(r.misses);
        self.errors.push(r.errors);
        self.p50_us.push(r.p50_us);
        self.p99_us.push(r.p99_us);
        self.in_flight.push(r.in_flight);
        self.connections.push(r.connections);
        self.reconnects.push(r.reconnects);
    }
}

/// Points per chart line at most.
pub const MAX_POINTS: usize = 600;

/// Consecutive rows that become one point each. A short final interval (replies to requests
/// sent before the end) keeps a point of its own, as the chart draws it apart.
pub fn spans(rows: &[TimelineRow], interval_s: f64, cap: usize) -> Vec<Range<usize>> {
    let n = rows.len();
    let short = n >= 2 && rows[n - 1].t_s - rows[n - 2].t_s < interval_s / 2.0;
    let full = n - usize::from(short);
    let budget = cap.saturating_sub(usize::from(short)).max(1);
    let per = full.div_ceil(budget).max(1);
    let mut out: Vec<Range<usize>> = (0..full)
        .step_by(per)
        .map(|a| a..(a + per).min(full))
        .collect();
    if short {
        out.push(full..n);
    }
    out
}

/// One row for `rows[range]`: it ends where the last one ends; QPS is the mean over the span
/// (each interval weighted by its length), counts are summed, and p50 and p99 are the worst
/// interval's, so a spike stays visible when merged.
pub fn merge(rows: &[TimelineRow], range: Range<usize>, interval_s: f64) -> TimelineRow {
    let start = range.start;
    let group = &rows[range];
    let mut out = group[group.len() - 1].clone();
    if group.len() == 1 {
        return out;
    }
    let mut prev = if start == 0 {
        group[0].t_s - interval_s.min(group[0].t_s.max(0.0))
    } else {
        rows[start - 1].t_s
    };
    let (mut answered, mut secs) = (0.0, 0.0);
    // Time and gauges stay the last interval's; the others' counts are added to it.
    for r in &group[..group.len() - 1] {
        out.add_counts(r);
    }
    for r in group {
        let len = (r.t_s - prev).max(0.0);
        prev = r.t_s;
        answered += r.qps * len;
        secs += len;
    }
    out.qps = if secs > 0.0 {
        (answered / secs).round()
    } else {
        group.iter().map(|r| r.qps).sum::<f64>() / group.len() as f64
    };
    out
}

/// `rows` with at most `cap` points, and how many intervals the widest point holds (1: none
/// merged).
pub fn downsample(rows: &[TimelineRow], interval_s: f64, cap: usize) -> (Vec<TimelineRow>, usize) {
    if rows.len() <= cap {
        return (rows.to_vec(), 1);
    }
    let spans = spans(rows, interval_s, cap);
    let per = spans.iter().map(|r| r.len()).max().unwrap_or(1);
    let merged = spans
        .into_iter()
        .map(|r| merge(rows, r, interval_s))
        .collect();
    (merged, per)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_s: f64, qps: f64, p99: f64, errors: u64) -> TimelineRow {
        TimelineRow {
            t_s,
            qps,
            hits: qps as u64,
            misses: 1,
            errors,
            p50_us: p99 / 10.0,
            p99_us: p99,
            in_flight: 4,
            connections: t_s as u64,
            reconnects: errors / 2,
        }
    }

    /// An hour at 1 s intervals and a 0.2 s final sliver, QPS alternating 1000/3000.
    fn hour() -> Vec<TimelineRow> {
        let mut rows: Vec<TimelineRow> = (1..=3600)
            .map(|s| {
                let q = if s % 2 == 0 { 3000.0 } else { 1000.0 };
                row(s as f64, q, 100.0 + (s % 7) as f64, (s % 5 == 0) as u64 * 4)
            })
            .collect();
        rows.push(row(3600.2, 50.0, 900.0, 0));
        rows
    }

    #[test]
    fn an_hour_at_one_second_intervals_becomes_at_most_600_points() {
        let rows = hour();
        let (out, per) = downsample(&rows, 1.0, MAX_POINTS);
        assert_eq!(per, 7, "3600 full intervals in 599 points");
        assert_eq!(out.len(), 515 + 1);
        assert!(out.len() <= MAX_POINTS);
        // The sliver keeps its own point, unmerged.
        assert_eq!(out.last().unwrap().t_s, 3600.2);
        assert_eq!(out.last().unwrap().qps, 50.0);
        // Nothing lost: counts sum to the same totals, the time axis ends where it did.
        let sum = |v: &[TimelineRow], f: fn(&TimelineRow) -> u64| v.iter().map(f).sum::<u64>();
        for f in [
            (|r: &TimelineRow| r.hits) as fn(&TimelineRow) -> u64,
            |r| r.misses,
            |r| r.errors,
            |r| r.reconnects,
        ] {
            assert_eq!(sum(&out, f), sum(&rows, f));
        }
        assert!(out.windows(2).all(|w| w[0].t_s < w[1].t_s));
    }

    #[test]
    fn a_merged_point_is_the_mean_qps_and_the_worst_percentiles() {
        let rows = hour();
        // The first seven seconds: 1000,3000,1000,3000,1000,3000,1000 (each 1 s long).
        let m = merge(&rows, 0..7, 1.0);
        assert_eq!(m.t_s, 7.0);
        assert_eq!(m.qps, ((4.0 * 1000.0 + 3.0 * 3000.0) / 7.0f64).round());
        assert_eq!(m.p99_us, 106.0, "the largest of 101..106 and 100");
        assert_eq!(m.p50_us, 10.6);
        assert_eq!(m.errors, 4, "second 5");
        assert_eq!(m.reconnects, 2);
        assert_eq!(m.connections, 7, "gauges: the last interval's");
        // Unequal lengths: 1 s at 1000/s then 3 s at 3000/s.
        let odd = vec![row(1.0, 1000.0, 5.0, 0), row(4.0, 3000.0, 9.0, 1)];
        let m = merge(&odd, 0..2, 1.0);
        assert_eq!(m.qps, 2500.0);
        assert_eq!((m.p99_us, m.errors, m.hits), (9.0, 1, 4000));
        // A group that starts later measures its first length from the row before it.
        let m = merge(&odd, 1..2, 1.0);
        assert_eq!(m.qps, 3000.0);
    }

    #[test]
    fn short_timelines_are_left_alone() {
        let rows: Vec<TimelineRow> = (1..=600).map(|s| row(s as f64, 1.0, 1.0, 0)).collect();
        let (out, per) = downsample(&rows, 1.0, MAX_POINTS);
        assert_eq!((out.len(), per), (600, 1));
        let (out, per) = downsample(&rows[..0], 1.0, MAX_POINTS);
        assert_eq!((out.len(), per), (0, 1));
        // 601 rows: pairs.
        let rows: Vec<TimelineRow> = (1..=601).map(|s| row(s as f64, 1.0, 1.0, 0)).collect();
        let (out, per) = downsample(&rows, 1.0, MAX_POINTS);
        assert_eq!((out.len(), per), (301, 2));
    }
}
