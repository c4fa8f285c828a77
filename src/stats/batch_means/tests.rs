//! Known answers: over many seeded simulated runs whose true QPS and p99 are known, the 95%
//! intervals cover the truth about 95% of the time, for independent intervals and for
//! autocorrelated ones.

use super::*;
use crate::keys::Rng;

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut Rng) -> f64 {
    let u = 1.0 - rng.unit();
    let v = rng.unit();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// An AR(1) series of `n` values with coefficient `phi` whose stationary sd is `sd`, started
/// in its stationary law.
fn ar1(rng: &mut Rng, n: usize, phi: f64, sd: f64) -> Vec<f64> {
    let innov = sd * (1.0 - phi * phi).sqrt();
    let mut x = sd * normal(rng);
    (0..n)
        .map(|_| {
            let now = x;
            x = phi * x + innov * normal(rng);
            now
        })
        .collect()
}

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

/// Per-interval QPS around `mu`: AR(1) noise of coefficient `phi` (machine noise that lasts)
/// plus each interval's Poisson count noise.
fn qps_run(rng: &mut Rng, n: usize, mu: f64, phi: f64) -> (Vec<f64>, f64) {
    let noise = ar1(rng, n, phi, mu * 0.05);
    let series: Vec<f64> = noise
        .iter()
        .map(|e| mu + e + mu.sqrt() * normal(rng))
        .collect();
    let center = series.iter().sum::<f64>() / n as f64;
    (series, center)
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

/// The empirical `q` quantile of `xs` (reordered), as a histogram's value at a percentile.
fn quantile(xs: &mut [f64], q: f64) -> f64 {
    let i = ((xs.len() as f64 * q).ceil() as usize).clamp(1, xs.len()) - 1;
    *xs.select_nth_unstable_by(i, f64::total_cmp).1
}

/// Latencies whose log is a slow AR(1) level per interval (sd `slow`) plus a fast AR(1) per
/// sample (coefficient 0.9, sd `fast`): the log is normal with variance slow^2 + fast^2, so
/// the true p99 is known. Returns the per-interval p99s and the whole run's.
fn p99_run(rng: &mut Rng, n: usize, per: usize, slow: (f64, f64), fast: f64) -> (Vec<f64>, f64) {
    let levels = ar1(rng, n, slow.0, slow.1);
    let samples = ar1(rng, n * per, 0.9, fast);
    let mut all: Vec<f64> = Vec::with_capacity(n * per);
    let mut series = Vec::with_capacity(n);
    for (i, level) in levels.iter().enumerate() {
        let mut iv: Vec<f64> = samples[i * per..(i + 1) * per]
            .iter()
            .map(|s| (level + s).exp())
            .collect();
        all.extend_from_slice(&iv);
        series.push(quantile(&mut iv, 0.99));
    }
    (series, quantile(&mut all, 0.99))
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
