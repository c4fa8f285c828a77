//! Load models over several runs: `--sweep` (one closed-loop step per connection count: where
//! does QPS peak?) and `--slo` (the highest fixed rate whose latency percentile stays under a
//! bound, by bisection). Each step is an ordinary run through `dispatch::run_target`.

use serde::{Deserialize, Serialize};

use crate::dispatch::{run_target, Embedded};
use crate::plan::Plan;
use crate::report::result::RunResult;
use crate::run::Control;
use crate::target::SetupError;

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

/// `--slo p99=1ms`: which percentile, and its bound in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    pub name: String,
    pub bound_us: f64,
}

impl Slo {
    pub fn parse(s: &str) -> Result<Slo, String> {
        let bad = || {
            format!("bad --slo '{s}': use PERCENTILE=DURATION with p50, p90, p99 or p99.9, like p99=1ms")
        };
        let (p, d) = s.split_once('=').ok_or_else(bad)?;
        if !matches!(p, "p50" | "p90" | "p99" | "p99.9" | "p999") {
            return Err(bad());
        }
        let d = crate::plan::parse_duration(d).map_err(|_| bad())?;
        if d.is_zero() {
            return Err(bad());
        }
        Ok(Slo {
            name: p.replace("p999", "p99.9"),
            bound_us: d.as_secs_f64() * 1e6,
        })
    }

    /// This percentile of a run's corrected latency, microseconds.
    pub fn of(&self, r: &RunResult) -> f64 {
        let l = &r.latency_us;
        match self.name.as_str() {
            "p50" => l.p50,
            "p90" => l.p90,
            "p99" => l.p99,
            _ => l.p999,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SloStep {
    /// None: the closed-loop step that measures the maximum.
    pub rate: Option<f64>,
    pub achieved_qps: f64,
    pub percentile_us: f64,
    pub pass: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SloResult {
    pub target: String,
    pub kind: String,
    pub slo: String,
    /// Highest rate that met the bound (None: not even the lowest step did).
    pub best_rate: Option<f64>,
    pub max_qps: f64,
    pub steps: Vec<SloStep>,
}

pub async fn sweep(
    target: &str,
    plan: &Plan,
    counts: &[usize],
    control: &Control,
    embedded: Option<&Embedded>,
    runs: &mut Vec<RunResult>,
) -> Result<SweepResult, SetupError> {
    let mut steps = Vec::new();
    let (mut label, mut kind) = (String::new(), String::new());
    for &c in counts {
        if *control.stop.borrow() {
            break;
        }
        let p = Plan {
            connections: c,
            rate: None,
            ..plan.clone()
        };
        if control.progress {
            eprintln!("loadgen: sweep step: {c} connections");
        }
        let r = run_target(target, &p, control, embedded).await?;
        steps.push(SweepStep {
            connections: c,
            qps: r.qps,
            p50_us: r.latency_us.p50,
            p99_us: r.latency_us.p99,
            errors: r.error_total,
        });
        label.clone_from(&r.target);
        kind.clone_from(&r.kind);
        runs.push(r);
    }
    let peak = steps.iter().max_by(|a, b| a.qps.total_cmp(&b.qps));
    Ok(SweepResult {
        target: label,
        kind,
        peak_qps: peak.map(|s| s.qps).unwrap_or(0.0),
        peak_connections: peak.map(|s| s.connections).unwrap_or(0),
        steps,
    })
}

/// Bisection over the rate between 0 and the closed-loop maximum.
pub async fn slo_search(
    target: &str,
    plan: &Plan,
    slo: &Slo,
    control: &Control,
    embedded: Option<&Embedded>,
    runs: &mut Vec<RunResult>,
) -> Result<SloResult, SetupError> {
    const ROUNDS: usize = 6;
    let max = run_target(
        target,
        &Plan {
            rate: None,
            ..plan.clone()
        },
        control,
        embedded,
    )
    .await?;
    let max_p = slo.of(&max);
    let mut steps = vec![SloStep {
        rate: None,
        achieved_qps: max.qps,
        percentile_us: max_p,
        pass: max_p <= slo.bound_us,
    }];
    let (label, kind, max_qps) = (max.target.clone(), max.kind.clone(), max.qps);
    runs.push(max);
    let mut best = None;
    if max_p <= slo.bound_us {
        // Even flat out the bound holds: the maximum is the answer.
        best = Some(max_qps);
    } else {
        let (mut lo, mut hi) = (0.0f64, max_qps);
        for _ in 0..ROUNDS {
            if *control.stop.borrow() {
                break;
            }
            let rate = ((lo + hi) / 2.0).max(1.0).round();
            if control.progress {
                eprintln!("loadgen: slo step: {rate}/s");
            }
            let r = run_target(
                target,
                &Plan {
                    rate: Some(rate),
                    ..plan.clone()
                },
                control,
                embedded,
            )
            .await?;
            let p = slo.of(&r);
            let kept = r.rate.as_ref().is_some_and(|k| k.achieved >= rate * 0.98);
            let pass = p <= slo.bound_us && kept && r.error_total == 0;
            steps.push(SloStep {
                rate: Some(rate),
                achieved_qps: r.qps,
                percentile_us: p,
                pass,
            });
            runs.push(r);
            if pass {
                best = Some(rate);
                lo = rate;
            } else {
                hi = rate;
            }
        }
    }
    Ok(SloResult {
        target: label,
        kind,
        slo: format!(
            "{} <= {}",
            slo.name,
            crate::report::text::micros(slo.bound_us)
        ),
        best_rate: best,
        max_qps,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_parsing() {
        assert_eq!(
            Slo::parse("p99=1ms").unwrap(),
            Slo {
                name: "p99".into(),
                bound_us: 1000.0
            }
        );
        assert_eq!(Slo::parse("p99.9=250us").unwrap().bound_us, 250.0);
        for bad in ["p99", "p98=1ms", "p99=0s", "p99=fast"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
    }
}
