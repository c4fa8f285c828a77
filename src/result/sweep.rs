//! `--sweep`: one closed-loop step per connection count, per target.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepStep {
    pub connections: usize,
    pub qps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
    /// Answered requests per second of each op (the step's `runs[].ops[op].qps`), only when
    /// the mix writes: a read-only sweep keeps its shape.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ops: BTreeMap<String, f64>,
    /// The step's run's verdict (files from before it: valid).
    #[serde(default)]
    pub verdict: super::verdict::Verdict,
    /// Worker CPU per request of the step's run, microseconds.
    #[serde(default)]
    pub client_cpu_us: f64,
    /// The server's own count of the step's run, beside loadgen's (None: none was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<StepServer>,
}

/// A step's server count, as its run's `server_observed` says it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepServer {
    /// The counter's change (None: not comparable or unavailable).
    pub delta: Option<u64>,
    pub matches: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepResult {
    pub target: String,
    pub kind: String,
    pub steps: Vec<SweepStep>,
    pub peak_qps: f64,
    pub peak_connections: usize,
    /// With writes: the server settings that decide a write's cost, as its runs report them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub durability: BTreeMap<String, String>,
    /// The sweep as a whole: invalid when a step is, or when the client's CPU per request
    /// rose with the load (files from before it: valid).
    #[serde(default)]
    pub verdict: super::verdict::Verdict,
}
