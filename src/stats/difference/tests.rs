//! Known answers: over many seeded pairs of simulated runs whose true ratio is known, the 95%
//! interval of the difference covers it about 95% of the time, and two runs of one truth are
//! called different about 5% of the time.

use super::*;
use crate::keys::Rng;
use crate::stats::batch_means::{interval_of, interval_of_positive};
use crate::stats::simulate::{p99_run, qps_run};

/// Over `pairs` seeded pairs: the share whose interval covers `truth` (as a change, 0.1 is
/// +10%), and the share called significant.
fn pairs_by(pairs: u64, truth: f64, mut pair: impl FnMut(&mut Rng) -> Difference) -> (f64, f64) {
    let (mut covered, mut significant) = (0, 0);
    for seed in 0..pairs {
        let d = pair(&mut Rng::new(seed));
        covered += u32::from(d.low <= truth && truth <= d.high);
        significant += u32::from(d.significant);
    }
    (
        covered as f64 / pairs as f64,
        significant as f64 / pairs as f64,
    )
}

fn qps_estimate(rng: &mut Rng, n: usize, mu: f64, phi: f64) -> Estimate {
    let (series, center) = qps_run(rng, n, mu, phi);
    let ci = interval_of(&series, center);
    Estimate::of(center, ci.ci().expect("long enough"), false).expect("an estimate")
}

#[test]
fn the_qps_ratio_is_covered_95_percent_of_the_time() {
    // Runs of different lengths and correlation, B 10% faster than A.
    for (na, nb, phi) in [(30, 30, 0.0), (20, 60, 0.5), (120, 40, 0.7)] {
        let (cov, sig) = pairs_by(1000, 0.1, |rng| {
            let a = qps_estimate(rng, na, 50_000.0, phi);
            let b = qps_estimate(rng, nb, 55_000.0, phi);
            difference(&a, &b)
        });
        // Each run's correlation correction only widens, so two of them err to the safe side.
        assert!(
            (0.93..=0.98).contains(&cov),
            "{na}/{nb} AR {phi}: coverage {cov}"
        );
        // A 10% change against 5% machine noise is seen most of the time.
        eprintln!("{na}/{nb} AR {phi}: coverage {cov}, found {sig}");
        assert!(sig > 0.75, "{na}/{nb} AR {phi}: found {sig}");
    }
}

#[test]
fn one_truth_is_called_different_about_5_percent_of_the_time() {
    let (cov, sig) = pairs_by(1000, 0.0, |rng| {
        let a = qps_estimate(rng, 30, 50_000.0, 0.5);
        let b = qps_estimate(rng, 30, 50_000.0, 0.5);
        difference(&a, &b)
    });
    eprintln!("one truth: coverage {cov}, false alarms {sig}");
    assert!((0.93..=0.98).contains(&cov), "coverage {cov}");
    assert!((0.02..=0.07).contains(&sig), "false alarms {sig}");
}

#[test]
fn the_p99_ratio_is_covered_95_percent_of_the_time() {
    // B's log-latencies are A's shifted by ln(1.1): its p99 is exactly 10% higher.
    let (slow, fast) = ((0.5, 0.05), 0.3);
    let est = |rng: &mut Rng, scale: f64| {
        let (series, center) = p99_run(rng, 30, 2000, slow, fast);
        let series: Vec<f64> = series.iter().map(|x| x * scale).collect();
        let ci = interval_of_positive(&series, center * scale);
        Estimate::of(center * scale, ci.ci().expect("long enough"), true).expect("an estimate")
    };
    let (cov, _) = pairs_by(1000, 0.1, |rng| {
        let a = est(rng, 1.0);
        let b = est(rng, 1.1);
        difference(&a, &b)
    });
    eprintln!("p99: coverage {cov}");
    assert!((0.93..=0.98).contains(&cov), "p99: coverage {cov}");
}

#[test]
fn a_figure_without_batches_or_a_positive_value_has_no_estimate() {
    let ci = Ci {
        low: 1.0,
        high: 2.0,
        batches: 1,
        batch_intervals: 1,
        lag1: 0.0,
    };
    assert_eq!(Estimate::of(1.5, &ci, false), None);
    let ci = Ci { batches: 10, ..ci };
    assert_eq!(Estimate::of(0.0, &ci, false), None);
    let e = Estimate::of(1.5, &ci, true).unwrap();
    assert_eq!(e.df, 9.0);
}
