//! Known answers: over many seeded simulated runs whose true QPS and p99 are known, the 95%
//! intervals cover the truth about 95% of the time, for independent intervals and for
//! autocorrelated ones.

use super::*;
use crate::keys::Rng;
use crate::stats::simulate::{p99_run, qps_run};

/// The share of `runs` seeded runs whose CI (by `ci`) covers `truth`; each run gives
/// (series, center).
fn coverage_by(
    ci: fn(&[f64], f64) -> Precision,
    runs: u64,
    truth: f64,
    mut run: impl FnMut(&mut Rng) -> (Vec<f64>, f64),
) -> f64 {
    let mut covered = 0;
    for seed in 0..runs {
        let mut rng = Rng::new(seed);
        let (series, center) = run(&mut rng);
        let ci = ci(&series, center);
        if ci.ci().expect("long enough").contains(truth) {
            covered += 1;
        }
    }
    covered as f64 / runs as f64
}

fn coverage(runs: u64, truth: f64, run: impl FnMut(&mut Rng) -> (Vec<f64>, f64)) -> f64 {
    coverage_by(interval_of, runs, truth, run)
}

fn assert_covers(got: f64, what: &str) {
    assert!((0.93..=0.97).contains(&got), "{what}: coverage {got}");
}

#[test]
fn qps_of_independent_intervals_is_covered_95_percent_of_the_time() {
    for n in [10, 30] {
        let got = coverage(1000, 50_000.0, |rng| qps_run(rng, n, 50_000.0, 0.0));
        assert_covers(got, &format!("{n} independent intervals"));
    }
}

#[test]
fn qps_of_autocorrelated_intervals_is_covered_95_percent_of_the_time() {
    for (n, phi) in [(60, 0.5), (120, 0.7)] {
        let got = coverage(1000, 50_000.0, |rng| qps_run(rng, n, 50_000.0, phi));
        assert_covers(got, &format!("{n} intervals, AR(1) {phi}"));
    }
}

#[test]
fn p99_of_autocorrelated_latencies_is_covered_95_percent_of_the_time() {
    let (slow, fast): ((f64, f64), f64) = ((0.5, 0.05), 0.3);
    // exp(z_0.99 * sd) of the log's normal law.
    let truth = (2.326_347_874 * (slow.1 * slow.1 + fast * fast).sqrt()).exp();
    let got = coverage_by(interval_of_positive, 1000, truth, |rng| {
        p99_run(rng, 30, 2000, slow, fast)
    });
    assert_covers(got, "p99, 30 intervals");
}

#[test]
fn a_run_of_too_few_intervals_has_no_ci_and_says_why() {
    match interval_of(&[1.0, 2.0, 3.0, 4.0], 2.5) {
        Precision::None { none } => {
            assert!(
                none.starts_with("4 whole intervals; a CI needs 5"),
                "{none}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_run_of_twenty_intervals_or_more_is_cut_into_ten_batches() {
    let mut rng = Rng::new(7);
    for (n, len) in [(10, 1), (19, 1), (20, 2), (245, 24)] {
        let (series, center) = qps_run(&mut rng, n, 10_000.0, 0.5);
        let ci = interval_of(&series, center);
        let ci = ci.ci().unwrap();
        assert_eq!(
            (ci.batch_intervals as usize, ci.batches as usize),
            (len, n / len),
            "{n}"
        );
    }
}
