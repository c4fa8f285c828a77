//! `--slo`: the search for the highest rate whose latency percentile meets a bound, per target.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SloStep {
    /// None: the closed-loop step that measures the maximum.
    pub rate: Option<f64>,
    pub achieved_qps: f64,
    pub percentile_us: f64,
    pub pass: bool,
    /// This step runs the rate of the step before again, which failed by a little.
    #[serde(default)]
    pub retry: bool,
    /// The step's run's verdict (files from before it: valid).
    #[serde(default)]
    pub verdict: super::verdict::Verdict,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SloResult {
    pub target: String,
    pub kind: String,
    pub slo: String,
    /// Highest rate that met the bound (None: not even the lowest step did).
    pub best_rate: Option<f64>,
    pub max_qps: f64,
    /// The bracket the answer lies in: the highest rate that met the bound and the lowest that
    /// did not (the closed-loop maximum until a paced step fails; None when it met the bound).
    #[serde(default)]
    pub pass_rate: Option<f64>,
    #[serde(default)]
    pub fail_rate: Option<f64>,
    /// Why the search ended: the bracket is narrow enough, the step budget is spent, ...
    #[serde(default)]
    pub stopped: String,
    pub steps: Vec<SloStep>,
}
