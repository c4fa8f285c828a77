//! 95% confidence intervals from a run's per-interval values by batch means. Consecutive
//! intervals are grouped into batches long enough that the batch means are no longer
//! correlated, and the spread of the batch means sets the width (Student's t with batches - 1
//! degrees of freedom). The center is the whole run's figure (its QPS, or its percentile from
//! the whole histogram): for a percentile that is sectioning (Asmussen and Glynn, Stochastic
//! Simulation, III.5a), which keeps the exact estimate and takes only the width from the
//! batches.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::autocorr;

/// Fewest batches a CI is made from: below it the run is too short to say.
pub const MIN_BATCHES: usize = 5;
/// The batches of a run of at least twice as many intervals.
pub const GROW_WHILE: usize = 10;
/// The lag-1 autocorrelation of batch means under which they count as independent.
pub const LAG1_MAX: f64 = 0.2;
/// The confidence level of every interval.
pub const LEVEL: f64 = 0.95;

/// A 95% confidence interval and how it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ci {
    pub low: f64,
    pub high: f64,
    /// The batches it was made of, and the intervals in each.
    pub batches: u32,
    pub batch_intervals: u32,
    /// Lag-1 autocorrelation of the batch means: above [`LAG1_MAX`] the batches could not be
    /// made long enough, and the width was widened for it.
    pub lag1: f64,
}

impl Ci {
    /// The half-width as a share of `center` (`qps 65,415 ±1.2%` is 0.012).
    pub fn relative(&self, center: f64) -> f64 {
        match center.abs() > 0.0 {
            true => (self.high - self.low) / 2.0 / center.abs(),
            false => 0.0,
        }
    }

    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// A figure's CI, or why the run has none (too few intervals).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Precision {
    Ci(Ci),
    None { none: String },
}

impl Precision {
    pub fn ci(&self) -> Option<&Ci> {
        match self {
            Precision::Ci(c) => Some(c),
            Precision::None { .. } => None,
        }
    }
}

/// The means of consecutive batches of `len` values (a last, shorter batch left out).
pub(super) fn batch_means(series: &[f64], len: usize) -> Vec<f64> {
    series
        .chunks_exact(len)
        .map(|b| b.iter().sum::<f64>() / len as f64)
        .collect()
}

/// The 95% CI around `center` of the figure whose per-interval values are `series`.
pub fn interval_of(series: &[f64], center: f64) -> Precision {
    let n = series.len();
    if n < MIN_BATCHES {
        return Precision::None {
            none: format!(
                "{n} whole intervals; a CI needs {MIN_BATCHES} at least: run longer or use a shorter --interval"
            ),
        };
    }
    // Ten batches (Schmeiser's 10 to 30) once the run has twenty intervals: batches as long
    // as the run allows, so correlation that lasts several intervals stays inside them.
    let len = if n >= 2 * GROW_WHILE {
        n / GROW_WHILE
    } else {
        1
    };
    let means = batch_means(series, len);
    let lag1 = autocorr::at_lag(&means, 1);
    let k = means.len();
    let mean = means.iter().sum::<f64>() / k as f64;
    let var = means.iter().map(|m| (m - mean) * (m - mean)).sum::<f64>() / (k - 1) as f64;
    // Correlation left between the batch means widens the interval by the AR(1) factor for
    // the variance of a mean, from their lag-1 autocorrelation corrected for its bias, about
    // -(1 + 4r) / k (Marriott and Pope). Batches of one interval (runs under twenty) are
    // taken as independent unless the autocorrelation plainly says otherwise.
    let inflate = match len > 1 || lag1 > LAG1_MAX {
        true => {
            let r = ((lag1 * k as f64 + 1.0) / (k as f64 - 4.0).max(1.0)).clamp(0.0, 0.8);
            (1.0 + r) / (1.0 - r)
        }
        false => 1.0,
    };
    let half = t_quantile(k - 1) * (var * inflate / k as f64).sqrt();
    Precision::Ci(Ci {
        low: center - half,
        high: center + half,
        batches: k as u32,
        batch_intervals: len as u32,
        lag1: (lag1 * 1000.0).round() / 1000.0,
    })
}

/// The 95% CI around `center` of a latency percentile whose per-interval values are `series`,
/// made on their logarithms: a percentile's spread grows with its level and its errors are
/// skewed to the high side, which an interval symmetric in the log follows (it is a ratio
/// either way, `[4.31, 4.80]` around 4.55).
pub fn interval_of_positive(series: &[f64], center: f64) -> Precision {
    if center <= 0.0 || series.iter().any(|&x| x <= 0.0) {
        return interval_of(series, center);
    }
    let logs: Vec<f64> = series.iter().map(|x| x.ln()).collect();
    match interval_of(&logs, center.ln()) {
        Precision::Ci(c) => Precision::Ci(Ci {
            low: c.low.exp(),
            high: c.high.exp(),
            ..c
        }),
        none => none,
    }
}

/// Student's t quantile at (1 + LEVEL) / 2 with `df` degrees of freedom (statrs).
fn t_quantile(df: usize) -> f64 {
    t_quantile_f(df as f64)
}

/// As `t_quantile`, for the fractional degrees of freedom of a difference (Welch).
pub fn t_quantile_f(df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df)
        .map(|t| t.inverse_cdf((1.0 + LEVEL) / 2.0))
        .unwrap_or(f64::INFINITY)
}

#[cfg(test)]
mod tests;
