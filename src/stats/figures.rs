//! The 95% intervals of one run's figures (its QPS and latency percentiles), from the points
//! it kept per interval: the whole run's figure is the center, the intervals give the width.

use serde::{Deserialize, Serialize};

use super::batch_means::{interval_of, interval_of_positive, Precision};
use super::trend::{trend_of, Trend};

/// One interval of a run (or of one op of it), as the statistics read it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point {
    /// The interval's length, seconds (a last, cut interval is shorter).
    pub len_s: f64,
    /// Requests answered in it (the latency percentiles' sample size).
    pub answered: u64,
    /// Its rate and latency percentiles.
    pub at: Centers,
}

/// A rate and latency percentiles (µs): an interval's, or the whole run's (the centers).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Centers {
    pub qps: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
}

/// How sure a run's figures are: a 95% CI for each, or why it has none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The whole intervals they were made from.
    pub intervals: u32,
    pub qps: Precision,
    pub p50: Precision,
    pub p90: Precision,
    pub p99: Precision,
    pub p999: Precision,
    /// Linear trends of the per-interval QPS and p99 across the run (docs/verdict.md): none
    /// under twenty whole intervals, or for a p99 whose intervals are too thin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qps_trend: Option<Trend>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_trend: Option<Trend>,
}

/// The tail samples an interval needs for its percentile to count: a p99 of an interval of
/// a few hundred requests rests on a handful of them.
pub const TAIL_SAMPLES: f64 = 10.0;

/// An interval shorter than this share of `--interval` (the last one, cut by the end or a
/// stop) is left out: its rate and percentiles rest on less than the others'.
const WHOLE: f64 = 0.9;

impl Figures {
    /// The intervals of `points` (each `interval_s` long but the last), around `centers`.
    pub fn of(points: &[Point], interval_s: f64, centers: Centers) -> Figures {
        let whole: Vec<&Point> = points
            .iter()
            .filter(|p| p.len_s >= interval_s * WHOLE)
            .collect();
        let qps: Vec<f64> = whole.iter().map(|p| p.at.qps).collect();
        let pct = |q: f64, f: fn(&Point) -> f64, center: f64| {
            // Each interval must hold enough of the tail: else its percentile is a few samples.
            let need = (TAIL_SAMPLES / (1.0 - q)).ceil() as u64;
            let fewest = whole.iter().map(|p| p.answered).min().unwrap_or(0);
            if !whole.is_empty() && fewest < need {
                return Precision::None {
                    none: format!(
                        "an interval answered {fewest} requests; p{} needs {need} in each: use a longer --interval",
                        q * 100.0
                    ),
                };
            }
            let series: Vec<f64> = whole.iter().map(|p| f(p)).collect();
            interval_of_positive(&series, center)
        };
        let p99 = pct(0.99, |p| p.at.p99, centers.p99);
        let p99s: Vec<f64> = whole.iter().map(|p| p.at.p99).collect();
        Figures {
            intervals: whole.len() as u32,
            qps_trend: trend_of(&qps),
            p99_trend: p99.ci().and_then(|_| trend_of(&p99s)),
            qps: interval_of(&qps, centers.qps),
            p50: pct(0.50, |p| p.at.p50, centers.p50),
            p90: pct(0.90, |p| p.at.p90, centers.p90),
            p99,
            p999: pct(0.999, |p| p.at.p999, centers.p999),
        }
    }

    /// No figure has a CI, each for the reason `why`.
    pub fn none(why: &str) -> Figures {
        let none = || Precision::None {
            none: why.to_string(),
        };
        Figures {
            intervals: 0,
            qps: none(),
            p50: none(),
            p90: none(),
            p99: none(),
            p999: none(),
            qps_trend: None,
            p99_trend: None,
        }
    }

    /// Bounds rounded for a result file: to the nearest thousandth.
    pub fn rounded(mut self) -> Figures {
        for p in [
            &mut self.qps,
            &mut self.p50,
            &mut self.p90,
            &mut self.p99,
            &mut self.p999,
        ] {
            if let Precision::Ci(c) = p {
                c.low = (c.low * 1000.0).round() / 1000.0;
                c.high = (c.high * 1000.0).round() / 1000.0;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(len_s: f64, answered: u64, qps: f64, p99: f64) -> Point {
        let at = Centers {
            qps,
            p50: p99 / 4.0,
            p90: p99 / 2.0,
            p99,
            p999: p99 * 2.0,
        };
        Point {
            len_s,
            answered,
            at,
        }
    }

    #[test]
    fn a_cut_last_interval_is_left_out_and_thin_tails_say_so() {
        let mut pts: Vec<Point> = (0..10)
            .map(|i| point(1.0, 5_000, 5_000.0 + i as f64, 100.0 + i as f64))
            .collect();
        // A last sliver whose rate is far off: inside, it would widen the QPS interval.
        pts.push(point(0.05, 10, 200.0, 900.0));
        let c = Centers {
            qps: 5_004.5,
            p50: 26.0,
            p90: 52.0,
            p99: 104.0,
            p999: 208.0,
        };
        let f = Figures::of(&pts, 1.0, c);
        assert_eq!(f.intervals, 10);
        let q = f.qps.ci().expect("ten intervals");
        assert!(q.contains(5_004.5) && q.high - q.low < 20.0, "{q:?}");
        assert!(f
            .p99
            .ci()
            .expect("5,000 a second hold 50 of the tail")
            .contains(104.0));
        // p99.9 needs 10,000 per interval.
        match &f.p999 {
            Precision::None { none } => assert!(none.contains("needs 10000"), "{none}"),
            ci => panic!("{ci:?}"),
        }
    }

    #[test]
    fn a_short_run_has_no_interval() {
        let pts: Vec<Point> = (0..3).map(|_| point(1.0, 50_000, 1.0, 1.0)).collect();
        let f = Figures::of(&pts, 1.0, Centers::default());
        assert!(f.qps.ci().is_none() && f.p99.ci().is_none());
    }
}
