//! Autocorrelation of a series: how much each value still says about the next, which decides
//! how long the batches of a batch-means interval must be.

/// The lag-`lag` sample autocorrelation of `xs` (the usual estimator: the lagged
/// autocovariance over the variance, both around the series' mean). 0 for a series too short
/// or constant.
pub fn at_lag(xs: &[f64], lag: usize) -> f64 {
    let n = xs.len();
    if n <= lag + 1 {
        return 0.0;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    if var <= 0.0 {
        return 0.0;
    }
    let cov: f64 = xs
        .iter()
        .zip(&xs[lag..])
        .map(|(a, b)| (a - mean) * (b - mean))
        .sum();
    cov / var
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_series() {
        // Alternating: perfectly anti-correlated at lag 1, correlated at lag 2.
        let alt: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!((at_lag(&alt, 1) + 0.99).abs() < 0.011);
        assert!((at_lag(&alt, 2) - 0.98).abs() < 0.011);
        assert_eq!(at_lag(&[3.0; 10], 1), 0.0);
        assert_eq!(at_lag(&[1.0, 2.0], 1), 0.0);
    }
}
