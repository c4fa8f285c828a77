//! Whether a run's figure drifted: a linear trend across its batch means (the batches of its
//! CI, long enough to be about independent), tested with Student's t on the slope, and large
//! enough to matter. A drift anywhere in the window, its first intervals included, is found.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::batch_means::{batch_means, GROW_WHILE};

/// Intervals a run needs for the test: ten batches of two at least.
pub const MIN_INTERVALS: usize = 2 * GROW_WHILE;
/// The p-value under which a slope is not noise.
pub const P_MAX: f64 = 0.01;
/// The change over the window (as a share of the mean) under which a drift does not matter.
pub const CHANGE_MIN: f64 = 0.10;

/// A figure's trend over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// The fitted change from the first batch to the last, as a share of the mean (-0.2: it
    /// fell by a fifth).
    pub change: f64,
    /// The two-sided p-value of the slope.
    pub p: f64,
    pub batches: u32,
    /// Significant (p under [`P_MAX`]) and large (|change| at least [`CHANGE_MIN`]).
    pub drifts: bool,
}

/// The trend of `series` (one value per whole interval); None under [`MIN_INTERVALS`].
pub fn trend_of(series: &[f64]) -> Option<Trend> {
    let n = series.len();
    if n < MIN_INTERVALS {
        return None;
    }
    let len = n / GROW_WHILE;
    let means = batch_means(series, len);
    let k = means.len() as f64;
    let xbar = (k - 1.0) / 2.0;
    let ybar = means.iter().sum::<f64>() / k;
    let sxx: f64 = (0..means.len()).map(|i| (i as f64 - xbar).powi(2)).sum();
    let sxy: f64 = means
        .iter()
        .enumerate()
        .map(|(i, y)| (i as f64 - xbar) * (y - ybar))
        .sum();
    let slope = sxy / sxx;
    let resid: f64 = means
        .iter()
        .enumerate()
        .map(|(i, y)| (y - ybar - slope * (i as f64 - xbar)).powi(2))
        .sum();
    let se = (resid / (k - 2.0) / sxx).sqrt();
    let p = match se > 0.0 {
        true => {
            let t = StudentsT::new(0.0, 1.0, k - 2.0).expect("k > 2");
            2.0 * (1.0 - t.cdf((slope / se).abs()))
        }
        false if slope == 0.0 => 1.0,
        false => 0.0,
    };
    let change = match ybar.abs() > 0.0 {
        true => slope * (k - 1.0) / ybar,
        false => 0.0,
    };
    Some(Trend {
        change: (change * 1e4).round() / 1e4,
        p: (p * 1e6).round() / 1e6,
        batches: means.len() as u32,
        drifts: p < P_MAX && change.abs() >= CHANGE_MIN,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Rng;
    use crate::stats::simulate::qps_run;

    /// The share of 1,000 seeded runs of `n` intervals (AR(1) `phi` noise) flagged, with a
    /// linear drift of `drift` over the run.
    fn flagged(n: usize, phi: f64, drift: f64) -> f64 {
        let hits = (0..1000u64)
            .filter(|&seed| {
                let (mut s, _) = qps_run(&mut Rng::new(seed), n, 50_000.0, phi);
                for (i, x) in s.iter_mut().enumerate() {
                    *x *= 1.0 + drift * i as f64 / (n - 1) as f64;
                }
                trend_of(&s).unwrap().drifts
            })
            .count();
        hits as f64 / 1000.0
    }

    #[test]
    fn a_steady_run_is_rarely_flagged_and_a_drifting_one_nearly_always() {
        for (n, phi) in [(20, 0.0), (60, 0.5), (120, 0.7)] {
            let got = flagged(n, phi, 0.0);
            assert!(got <= 0.01, "steady, {n} intervals AR {phi}: flagged {got}");
            let got = flagged(n, phi, -0.25);
            assert!(
                got >= 0.9,
                "25% fall, {n} intervals AR {phi}: flagged {got}"
            );
        }
        // A drift under the size that matters is left alone, however sure.
        assert!(flagged(120, 0.0, 0.05) <= 0.01);
    }

    #[test]
    fn a_short_run_has_no_trend() {
        assert_eq!(trend_of(&[1.0; 19]), None);
        let t = trend_of(&[1.0; 20]).unwrap();
        assert!(!t.drifts && t.change == 0.0, "{t:?}");
    }
}
