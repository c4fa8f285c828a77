//! `--sweep`: one closed-loop step per connection count, per target.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepStep {
    pub connections: usize,
    pub qps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepResult {
    pub target: String,
    pub kind: String,
    pub steps: Vec<SweepStep>,
    pub peak_qps: f64,
    pub peak_connections: usize,
}
