//! Simulated runs whose truth is known, for the statistics' known-answer tests.

use crate::keys::Rng;

/// A standard normal draw (Box-Muller).
pub fn normal(rng: &mut Rng) -> f64 {
    let u = 1.0 - rng.unit();
    let v = rng.unit();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// An AR(1) series of `n` values with coefficient `phi` whose stationary sd is `sd`, started
/// in its stationary law.
pub fn ar1(rng: &mut Rng, n: usize, phi: f64, sd: f64) -> Vec<f64> {
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

/// Per-interval QPS around `mu`: AR(1) noise of coefficient `phi` (machine noise that lasts)
/// plus each interval's Poisson count noise.
pub fn qps_run(rng: &mut Rng, n: usize, mu: f64, phi: f64) -> (Vec<f64>, f64) {
    let noise = ar1(rng, n, phi, mu * 0.05);
    let series: Vec<f64> = noise
        .iter()
        .map(|e| mu + e + mu.sqrt() * normal(rng))
        .collect();
    let center = series.iter().sum::<f64>() / n as f64;
    (series, center)
}

/// The empirical `q` quantile of `xs` (reordered), as a histogram's value at a percentile.
pub fn quantile(xs: &mut [f64], q: f64) -> f64 {
    let i = ((xs.len() as f64 * q).ceil() as usize).clamp(1, xs.len()) - 1;
    *xs.select_nth_unstable_by(i, f64::total_cmp).1
}

/// Latencies whose log is a slow AR(1) level per interval (sd `slow`) plus a fast AR(1) per
/// sample (coefficient 0.9, sd `fast`): the log is normal with variance slow^2 + fast^2, so
/// the true p99 is known. Returns the per-interval p99s and the whole run's.
pub fn p99_run(
    rng: &mut Rng,
    n: usize,
    per: usize,
    slow: (f64, f64),
    fast: f64,
) -> (Vec<f64>, f64) {
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
