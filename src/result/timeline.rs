//! One row of a run's timeline: an interval after the warm-up.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimelineRow {
    /// Seconds since the end of the warm-up, at the end of this interval.
    pub t_s: f64,
    pub qps: f64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    // Optional in the schema (older files lack them).
    #[serde(default)]
    pub in_flight: u64,
    #[serde(default)]
    pub connections: u64,
    #[serde(default)]
    pub reconnects: u64,
}

impl TimelineRow {
    /// Adds `o`'s counts to this row's; p50 and p99 become the higher of the two (what merged
    /// rows can tell without their histograms). QPS, time and gauges are the caller's to set.
    pub fn add_counts(&mut self, o: &TimelineRow) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.reconnects += o.reconnects;
        self.p50_us = self.p50_us.max(o.p50_us);
        self.p99_us = self.p99_us.max(o.p99_us);
    }
}
