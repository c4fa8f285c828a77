//! `--ci`: how precise a run must be before it may stop (`2%` for QPS, or `qps=1%,p99=5%`),
//! checked once per interval against the CIs so far; `-d` is the longest the run may take.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::figures::{Centers, Figures};
use super::Precision;

/// Whole intervals a run has before its goal is checked: stopping at the first interval a
/// goal is met favours narrow intervals, which a few more intervals keep from mattering.
pub const FIRST_CHECK: u32 = 10;

/// A figure a goal can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Figure {
    Qps,
    P50,
    P90,
    P99,
    P999,
}

impl Figure {
    const ALL: [Figure; 5] = [
        Figure::Qps,
        Figure::P50,
        Figure::P90,
        Figure::P99,
        Figure::P999,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Figure::Qps => "qps",
            Figure::P50 => "p50",
            Figure::P90 => "p90",
            Figure::P99 => "p99",
            Figure::P999 => "p99.9",
        }
    }

    fn of(self, f: &Figures) -> &Precision {
        match self {
            Figure::Qps => &f.qps,
            Figure::P50 => &f.p50,
            Figure::P90 => &f.p90,
            Figure::P99 => &f.p99,
            Figure::P999 => &f.p999,
        }
    }

    fn center(self, c: &Centers) -> f64 {
        match self {
            Figure::Qps => c.qps,
            Figure::P50 => c.p50,
            Figure::P90 => c.p90,
            Figure::P99 => c.p99,
            Figure::P999 => c.p999,
        }
    }
}

/// Each named figure's largest half-width, as a share of the figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    pub bounds: Vec<(Figure, f64)>,
}

impl Goal {
    /// `2%` (QPS), or `qps=1%,p99=5%`. Err is the one-line message.
    pub fn parse(s: &str) -> Result<Goal, String> {
        let bad = |why: &str| {
            format!("bad --ci '{s}': {why}; use a half-width like 2% (of QPS) or qps=1%,p99=5%")
        };
        let mut bounds: Vec<(Figure, f64)> = Vec::new();
        for part in s.split(',').map(str::trim) {
            let (name, pct) = match part.split_once('=') {
                Some((n, p)) => (n.trim(), p.trim()),
                None => ("qps", part),
            };
            let figure = Figure::ALL
                .into_iter()
                .find(|f| f.name() == name || (name == "p999" && *f == Figure::P999))
                .ok_or_else(|| bad(&format!("'{name}' is not qps, p50, p90, p99 or p99.9")))?;
            let share = pct
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<f64>().ok())
                .filter(|p| p.is_finite() && *p > 0.0 && *p < 100.0)
                .ok_or_else(|| {
                    bad(&format!(
                        "'{pct}' is not a percentage above 0 and under 100"
                    ))
                })?;
            if bounds.iter().any(|(f, _)| *f == figure) {
                return Err(bad(&format!("{name} is named twice")));
            }
            bounds.push((figure, share / 100.0));
        }
        bounds.sort_by_key(|b| b.0);
        Ok(Goal { bounds })
    }

    /// `qps=1%,p99=5%`: how the goal reads back (and how `--repeat` gives it again).
    pub fn text(&self) -> String {
        let b: Vec<String> = self
            .bounds
            .iter()
            .map(|(f, s)| format!("{}={}%", f.name(), s * 100.0))
            .collect();
        b.join(",")
    }

    /// Each named figure's relative half-width in `f` (None: it has no CI yet).
    pub fn widths(&self, f: &Figures, c: &Centers) -> Vec<(Figure, Option<f64>)> {
        self.bounds
            .iter()
            .map(|(fig, _)| (*fig, fig.of(f).ci().map(|ci| ci.relative(fig.center(c)))))
            .collect()
    }

    /// Whether every named figure's CI is at most its bound, once the run has enough intervals.
    pub fn met(&self, f: &Figures, c: &Centers) -> bool {
        f.intervals >= FIRST_CHECK
            && self
                .widths(f, c)
                .iter()
                .zip(&self.bounds)
                .all(|((_, w), (_, b))| w.is_some_and(|w| w <= *b))
    }

    /// What a result says of the goal: asked, reached (and when), the widths at the end.
    pub fn outcome(&self, f: &Figures, c: &Centers, reached_s: Option<f64>) -> GoalResult {
        GoalResult {
            asked: self.text(),
            reached: reached_s.is_some(),
            after_s: reached_s,
            widths: self
                .widths(f, c)
                .into_iter()
                .map(|(fig, w)| (fig.name().to_string(), w.map(|w| (w * 1e5).round() / 1e5)))
                .collect(),
        }
    }
}

/// A run's `--ci` as its result has it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    /// As given (`qps=1%,p99=5%`).
    pub asked: String,
    /// Every named CI got within its bound before `-d` ran out.
    pub reached: bool,
    /// Seconds of the measured window when it did (the run stopped there).
    pub after_s: Option<f64>,
    /// Each named figure's half-width at the end, as a share of the figure (null: no CI).
    pub widths: BTreeMap<String, Option<f64>>,
}

impl GoalResult {
    /// `qps ±0.83%, p99 none`: the goal's figures as the run ended.
    pub fn widths_text(&self) -> String {
        let w: Vec<String> = self
            .widths
            .iter()
            .map(|(name, w)| match w {
                Some(w) => format!("{name} ±{}", percent(*w)),
                None => format!("{name} none"),
            })
            .collect();
        w.join(", ")
    }
}

/// A share as a percentage of two significant figures: 1.2%, 0.35%, 12%.
pub fn percent(x: f64) -> String {
    match x * 100.0 {
        p if p >= 10.0 => format!("{p:.0}%"),
        p if p >= 1.0 => format!("{p:.1}%"),
        p => format!("{p:.2}%"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Ci;

    #[test]
    fn goals_parse_and_read_back() {
        assert_eq!(Goal::parse("2%").unwrap().text(), "qps=2%");
        let g = Goal::parse("p99=5%, qps=1%").unwrap();
        assert_eq!(g.text(), "qps=1%,p99=5%");
        assert_eq!(Goal::parse("p999=3%").unwrap().text(), "p99.9=3%");
        for bad in ["2", "0%", "100%", "x=1%", "qps=1%,qps=2%", "", "-1%"] {
            let e = Goal::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("bad --ci '{bad}'")), "{e}");
        }
    }

    #[test]
    fn a_goal_is_met_only_with_enough_intervals_and_every_bound() {
        let ci = |low: f64, high: f64| {
            Precision::Ci(Ci {
                low,
                high,
                batches: 10,
                batch_intervals: 1,
                lag1: 0.0,
            })
        };
        let mut f = Figures {
            intervals: FIRST_CHECK,
            qps: ci(99.0, 101.0),
            p50: ci(9.0, 11.0),
            p90: ci(1.0, 2.0),
            p99: Precision::None {
                none: "thin".into(),
            },
            p999: ci(1.0, 2.0),
            qps_trend: None,
            p99_trend: None,
        };
        let c = Centers {
            qps: 100.0,
            p50: 10.0,
            p90: 1.5,
            p99: 1.0,
            p999: 1.5,
        };
        assert!(Goal::parse("1%").unwrap().met(&f, &c));
        assert!(!Goal::parse("0.9%").unwrap().met(&f, &c));
        assert!(Goal::parse("qps=1%,p50=10%").unwrap().met(&f, &c));
        // A figure without a CI never meets its bound.
        assert!(!Goal::parse("qps=1%,p99=50%").unwrap().met(&f, &c));
        f.intervals = FIRST_CHECK - 1;
        assert!(!Goal::parse("1%").unwrap().met(&f, &c));
        let o = Goal::parse("qps=1%,p99=5%").unwrap().outcome(&f, &c, None);
        assert!(!o.reached);
        assert_eq!(o.widths["qps"], Some(0.01));
        assert_eq!(o.widths["p99"], None);
    }
}
