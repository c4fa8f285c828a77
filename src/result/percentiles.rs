//! Latency percentiles as reported, in microseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Percentiles in microseconds, as reported.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| (ns as f64 / 1000.0 * 1000.0).round() / 1000.0;
        Percentiles {
            count: h.len(),
            min: us(h.min()),
            mean: (h.mean() / 1000.0 * 1000.0).round() / 1000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}
