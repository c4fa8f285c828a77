//! The difference between two runs' figures, as a ratio with its 95% CI: each run's interval
//! gives its figure's standard error, the two are taken as independent, and Welch's degrees of
//! freedom carry each run's batches into the t quantile.

use serde::{Deserialize, Serialize};

use super::batch_means::{t_quantile_f, Ci};

/// A figure and how sure it is, on the log scale (a ratio of two is a difference of logs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub center: f64,
    /// The standard error of ln(center).
    pub se_log: f64,
    /// Degrees of freedom: its batches - 1.
    pub df: f64,
}

impl Estimate {
    /// From a run's figure and its CI. `log_scale`: the CI was made on the logarithms
    /// (percentiles); else it is symmetric around the figure (QPS) and the delta method takes
    /// it to the log.
    pub fn of(center: f64, ci: &Ci, log_scale: bool) -> Option<Estimate> {
        let df = ci.batches.checked_sub(1).filter(|&d| d > 0)? as f64;
        if center <= 0.0 || ci.low <= 0.0 && log_scale {
            return None;
        }
        let t = t_quantile_f(df);
        let se_log = match log_scale {
            true => (ci.high.ln() - ci.low.ln()) / 2.0 / t,
            false => (ci.high - ci.low) / 2.0 / t / center,
        };
        Some(Estimate { center, se_log, df })
    }
}

/// B against A: the change B / A - 1 and its 95% CI, as shares (0.1 is +10%).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    pub change: f64,
    pub low: f64,
    pub high: f64,
    /// The interval leaves out no change.
    pub significant: bool,
}

/// B against A, both runs' errors taken as independent.
pub fn difference(a: &Estimate, b: &Estimate) -> Difference {
    let d = b.center.ln() - a.center.ln();
    let (va, vb) = (a.se_log * a.se_log, b.se_log * b.se_log);
    let se = (va + vb).sqrt();
    // Welch-Satterthwaite: the t of the difference has this many degrees of freedom.
    let df = match va + vb > 0.0 {
        true => (va + vb).powi(2) / (va * va / a.df + vb * vb / b.df),
        false => a.df + b.df,
    };
    let half = t_quantile_f(df) * se;
    let round = |x: f64| (x * 1e5).round() / 1e5;
    let (low, high) = ((d - half).exp_m1(), (d + half).exp_m1());
    Difference {
        change: round(d.exp_m1()),
        low: round(low),
        high: round(high),
        significant: low > 0.0 || high < 0.0,
    }
}

#[cfg(test)]
mod tests;
