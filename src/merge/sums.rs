//! Small sums every part of a merge uses: histograms added, percentile bounds, rounding.

use crate::error::ConfigError;
use crate::result::{decode_histogram, Percentiles};
use hdrhistogram::Histogram;

/// One histogram of every part's encoded histogram (`(input name, base64)`); `what` names the
/// field in errors.
pub(super) fn add_histograms<'a>(
    parts: impl Iterator<Item = (&'a str, &'a str)>,
    what: &str,
) -> Result<Histogram<u64>, ConfigError> {
    let mut hist = crate::recorder::new_histogram();
    for (name, encoded) in parts {
        let h = decode_histogram(encoded).map_err(|e| format!("{name}: {what}: {e}"))?;
        hist.add(&h)
            .map_err(|e| format!("{name}: {what}: histogram does not merge: {e:?}"))?;
    }
    Ok(hist)
}

/// Percentiles of several generators without their histograms: count, min, mean, max exact;
/// each percentile the highest of any generator, which bounds the merged one from above.
pub(super) fn bound<'a>(ps: impl Iterator<Item = &'a Percentiles>) -> Percentiles {
    let ps: Vec<&Percentiles> = ps.filter(|p| p.count > 0).collect();
    if ps.is_empty() {
        return Percentiles::default();
    }
    let count: u64 = ps.iter().map(|p| p.count).sum();
    let max = |f: fn(&Percentiles) -> f64| ps.iter().map(|p| f(p)).fold(0.0, f64::max);
    Percentiles {
        count,
        min: ps.iter().map(|p| p.min).fold(f64::MAX, f64::min),
        mean: round3(ps.iter().map(|p| p.mean * p.count as f64).sum::<f64>() / count as f64),
        p50: max(|p| p.p50),
        p90: max(|p| p.p90),
        p99: max(|p| p.p99),
        p999: max(|p| p.p999),
        max: max(|p| p.max),
    }
}

pub(super) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
