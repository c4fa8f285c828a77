//! The parts of one merged group: its QPS, histogram, rates, client CPU and the warnings
//! about generators that differ.

use crate::result::{ClientCpu, Percentiles, RateResult, RunResult};
use hdrhistogram::Histogram;

use super::input::Input;
use super::sums::{add_histograms, bound, round1, round3};
use crate::error::ConfigError;

/// The group's QPS and duration from the generators' measured windows (`wins`, Unix seconds):
/// summed when they ran together, else total answered over the summed windows.
pub(super) fn group_qps(
    runs: &[&RunResult],
    wins: &[(f64, f64)],
    label: &str,
    warnings: &mut Vec<String>,
) -> (Windows, f64, f64) {
    let common_start = wins.iter().map(|w| w.0).fold(f64::MIN, f64::max);
    let common_end = wins.iter().map(|w| w.1).fold(f64::MAX, f64::min);
    let exact = runs
        .iter()
        .all(|r| crate::date::has_fraction(&r.started_at));
    // Exact edges that meet within their rounding: one window after the other. Whole-second
    // stamps (older files) cannot tell, and windows closer than 1 s count as overlapping.
    let (concurrent, slack) = match exact {
        true => (common_end - common_start > EDGE_ROUNDING_S, 0.0),
        false => (common_end - common_start > -1.0, 1.0),
    };
    let durations: Vec<f64> = runs.iter().map(|r| r.duration_s).collect();
    let answered: u64 = runs.iter().map(|r| r.hits + r.misses).sum();
    let windows = Windows {
        concurrent,
        durations: durations.clone(),
    };
    let (qps, duration_s) = if concurrent {
        let shortest = durations.iter().copied().fold(f64::MAX, f64::min);
        let overlap = (common_end - common_start).max(0.0);
        if runs.len() > 1 && shortest > 2.0 && overlap < 0.9 * shortest - slack {
            warnings.push(format!(
                "{label}: the generators' windows overlap for only {overlap:.0}s of {shortest:.0}s; \
                 the merged QPS (their sum) assumes they ran together"
            ));
        }
        (
            windows.qps(runs.iter().map(|r| r.qps), answered),
            durations.iter().copied().fold(0.0, f64::max),
        )
    } else {
        warnings.push(format!(
            "{label}: the generators' measured windows do not overlap (they ran one after another); \
             QPS is total answered / summed windows, not the sum of their QPS"
        ));
        (
            windows.qps(runs.iter().map(|r| r.qps), answered),
            durations.iter().sum(),
        )
    };
    (windows, qps, duration_s)
}

/// How far a window's edges from microsecond stamps may be off: `connect_s` and `duration_s`
/// are each rounded to the millisecond.
const EDGE_ROUNDING_S: f64 = 0.002;

/// Warns where the generators saw different servers: durability settings, target names.
pub(super) fn warn_differences(
    inputs: &[Input],
    runs: &[&RunResult],
    label: &str,
    warnings: &mut Vec<String>,
) {
    let r0 = runs[0];
    if runs.iter().any(|r| r.durability != r0.durability) {
        let all: Vec<String> = inputs
            .iter()
            .zip(runs)
            .map(|(x, r)| format!("{}: {:?}", x.name, r.durability))
            .collect();
        warnings.push(format!(
            "{label}: the servers reported different durability settings ({}); the merged run shows the first",
            all.join(", ")
        ));
    }
    let targets_differ = runs.iter().any(|r| r.target != r0.target);
    if targets_differ {
        let all: Vec<&str> = runs.iter().map(|r| r.target.as_str()).collect();
        warnings.push(format!(
            "{label}: the generators name the target differently ({}); check they loaded the same server",
            all.join(", ")
        ));
    }
}

/// One histogram of every generator's latency samples of run `i`.
pub(super) fn group_histogram(
    inputs: &[Input],
    runs: &[&RunResult],
    i: usize,
) -> Result<Histogram<u64>, ConfigError> {
    for (x, r) in inputs.iter().zip(runs) {
        if r.histogram.is_empty() {
            return Err(ConfigError(format!(
                "{}: run #{} has no latency histogram",
                x.name,
                i + 1
            )));
        }
    }
    add_histograms(
        inputs
            .iter()
            .zip(runs)
            .map(|(x, r)| (x.name.as_str(), r.histogram.as_str())),
        &format!("run #{}", i + 1),
    )
}

/// Up to 8 distinct error samples, in the generators' order.
pub(super) fn first_error_samples(runs: &[&RunResult]) -> Vec<String> {
    let mut error_samples: Vec<String> = Vec::new();
    for r in runs {
        for s in &r.error_samples {
            if error_samples.len() < 8 && !error_samples.contains(s) {
                error_samples.push(s.clone());
            }
        }
    }
    error_samples
}

/// The paced rate of the group when every run was paced: summed when they ran together, else
/// weighted by their durations.
pub(super) fn merge_rates(
    runs: &[&RunResult],
    concurrent: bool,
    durations: &[f64],
) -> Option<RateResult> {
    if runs.iter().all(|r| r.rate.is_some()) {
        let rs: Vec<&RateResult> = runs.iter().filter_map(|r| r.rate.as_ref()).collect();
        let combine = |f: &dyn Fn(&RateResult) -> f64| -> f64 {
            if concurrent {
                rs.iter().map(|r| f(r)).sum()
            } else {
                let total: f64 = durations.iter().sum();
                if total > 0.0 {
                    rs.iter().zip(durations).map(|(r, d)| f(r) * d).sum::<f64>() / total
                } else {
                    0.0
                }
            }
        };
        Some(RateResult {
            asked: combine(&|r| r.asked),
            achieved: round1(combine(&|r| r.achieved)),
            late: rs.iter().map(|r| r.late).sum(),
            kept: rs.iter().all(|r| r.kept),
            backlog: rs.iter().map(|r| r.backlog).sum(),
            warmup_dropped: rs.iter().map(|r| r.warmup_dropped).sum(),
        })
    } else {
        None
    }
}

/// The generators' CPU: summed times, the highest utilization.
pub(super) fn merge_client_cpu(runs: &[&RunResult], all_requests: u64) -> ClientCpu {
    let worker_s: f64 = runs.iter().map(|r| r.client_cpu.worker_s).sum();
    ClientCpu {
        worker_s: round3(worker_s),
        process_s: round3(runs.iter().map(|r| r.client_cpu.process_s).sum()),
        per_request_us: if all_requests > 0 {
            round3(worker_s * 1e6 / all_requests as f64)
        } else {
            0.0
        },
        utilization: runs
            .iter()
            .map(|r| r.client_cpu.utilization)
            .fold(0.0, f64::max),
        busiest: runs
            .iter()
            .map(|r| r.client_cpu.busiest)
            .fold(0.0, f64::max),
        saturated: runs.iter().any(|r| r.client_cpu.saturated),
        threads: runs.iter().map(|r| r.client_cpu.threads).sum(),
        // Weighted by each generator's CPU, when every one measured it.
        kernel_share: runs
            .iter()
            .map(|r| Some(r.client_cpu.kernel_share? * r.client_cpu.worker_s))
            .sum::<Option<f64>>()
            .filter(|_| worker_s > 0.0)
            .map(|k| round3(k / worker_s)),
    }
}

/// How the parts' measured windows combine.
pub(super) struct Windows {
    /// They overlapped: their rates add up.
    pub(super) concurrent: bool,
    pub(super) durations: Vec<f64>,
}

impl Windows {
    /// Merged QPS: the sum of the parts' when they ran together, else total answered over the
    /// summed windows.
    pub(super) fn qps(&self, qps: impl Iterator<Item = f64>, answered: u64) -> f64 {
        let total: f64 = self.durations.iter().sum();
        if self.concurrent {
            qps.sum()
        } else if total > 0.0 {
            answered as f64 / total
        } else {
            0.0
        }
    }
}

/// Service and lag percentiles: upper bounds over paced parts (said in a warning); a closed
/// loop's service time is its latency (due = sent).
pub(super) fn service_and_lag(
    runs: &[&RunResult],
    latency_us: &Percentiles,
    label: &str,
    warnings: &mut Vec<String>,
) -> (Percentiles, Option<Percentiles>) {
    let paced = runs.iter().any(|r| r.rate.is_some());
    let service_us = if paced {
        bound(runs.iter().map(|r| &r.service_us))
    } else {
        // Closed loop: due = sent, so service time is the latency.
        latency_us.clone()
    };
    let lags: Vec<&Percentiles> = runs.iter().filter_map(|r| r.lag_us.as_ref()).collect();
    let lag_us = (!lags.is_empty()).then(|| bound(lags.iter().copied()));
    if paced && runs.len() > 1 {
        warnings.push(format!(
            "{label}: service and lag percentiles of paced runs are upper bounds (the highest of any \
             generator); latency percentiles are exact"
        ));
    }
    (service_us, lag_us)
}

/// Which generators stopped early and why, one `name: reason` each.
pub(super) fn stopped_early(inputs: &[Input], runs: &[&RunResult]) -> Option<String> {
    let stopped: Vec<String> = inputs
        .iter()
        .zip(runs)
        .filter_map(|(x, r)| r.stopped_early.as_ref().map(|s| format!("{}: {s}", x.name)))
        .collect();
    (!stopped.is_empty()).then(|| stopped.join("; "))
}
