//! Load models over several runs: `--sweep` (one closed-loop step per connection count: where
//! does QPS peak?) and `--slo` (the highest fixed rate whose latency percentile stays under a
//! bound, by bisection). Each step is an ordinary run through `dispatch::run_target`.

use crate::control::Control;
use crate::dispatch::{run_target, Embedded};
use crate::error::ConfigError;
use crate::plan::Plan;
use crate::proto::target::SetupError;
use crate::result::{RunResult, SloResult, SloStep, StepServer, SweepResult, SweepStep};

/// `--slo p99=1ms`: which percentile, and its bound in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    pub name: String,
    pub bound_us: f64,
}

impl Slo {
    pub fn parse(s: &str) -> Result<Slo, ConfigError> {
        let bad = || {
            format!("bad --slo '{s}': use PERCENTILE=DURATION with p50, p90, p99 or p99.9, like p99=1ms")
        };
        let (p, d) = s.split_once('=').ok_or_else(bad)?;
        if !matches!(p, "p50" | "p90" | "p99" | "p99.9" | "p999") {
            return Err(bad().into());
        }
        let d = crate::plan::parse_duration(d).map_err(|_| bad())?;
        if d.is_zero() {
            return Err(bad().into());
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

/// The search ends when the bracket is this narrow, relative to its upper end...
pub const SLO_WITHIN: f64 = 0.05;
/// ...or after this many paced steps (retries included): a bound that is never met at any rate
/// walks down towards 1/s and must end too.
pub const SLO_STEPS: usize = 12;
/// A step that fails only on latency, by at most this factor of the bound, and held its rate
/// within 5%, is run once more before it is believed: on a shared machine one short stall can
/// push a p99 just over the line, while a rate past the capacity overshoots by far more as
/// its queue grows.
pub const SLO_NEAR: f64 = 1.25;

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
    let mut durability = std::collections::BTreeMap::new();
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
            let s = if c == 1 { "" } else { "s" };
            (control.say)(&format!("loadgen: sweep step: {c} connection{s}"));
        }
        let r = run_target(target, &p, control, embedded).await?;
        steps.push(SweepStep {
            connections: c,
            qps: r.qps,
            p50_us: r.latency_us.p50,
            p99_us: r.latency_us.p99,
            errors: r.error_total,
            ops: r.ops.iter().map(|(op, o)| (op.clone(), o.qps)).collect(),
            verdict: r.verdict.clone(),
            client_cpu_us: r.client_cpu.per_request_us,
            server: r.server_observed.as_ref().map(|o| StepServer {
                delta: o.delta,
                matches: o.matches,
            }),
        });
        label.clone_from(&r.target);
        kind.clone_from(&r.kind);
        durability.clone_from(&r.durability);
        runs.push(r);
    }
    let peak = steps.iter().max_by(|a, b| a.qps.total_cmp(&b.qps));
    Ok(SweepResult {
        target: label,
        kind,
        peak_qps: peak.map(|s| s.qps).unwrap_or(0.0),
        peak_connections: peak.map(|s| s.connections).unwrap_or(0),
        verdict: crate::verdict::judge_sweep(&steps),
        steps,
        durability,
    })
}

/// Bisection over the rate between 0 and the closed-loop maximum, until the bracket
/// [highest pass, lowest fail] is within `SLO_WITHIN` of its upper end or `SLO_STEPS` are spent.
pub async fn slo_search(
    target: &str,
    plan: &Plan,
    slo: &Slo,
    control: &Control,
    embedded: Option<&Embedded>,
    runs: &mut Vec<RunResult>,
) -> Result<SloResult, SetupError> {
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
        retry: false,
        verdict: max.verdict.clone(),
    }];
    let (label, kind, max_qps) = (max.target.clone(), max.kind.clone(), max.qps);
    runs.push(max);
    let (pass_rate, fail_rate, stopped) = if max_p <= slo.bound_us {
        // Even flat out the bound holds: the maximum is the answer.
        (
            Some(max_qps),
            None,
            "the closed loop meets the bound".to_string(),
        )
    } else {
        let mut search = Bisect::new(max_qps);
        let stopped = loop {
            if *control.stop.borrow() {
                break "interrupted".to_string();
            }
            let (rate, retry) = match search.next() {
                Next::Run { rate, retry } => (rate, retry),
                Next::Done(why) => break why,
            };
            let (st, near) =
                slo_step(target, plan, slo, rate, retry, control, embedded, runs).await?;
            search.record(rate, st.pass, near);
            steps.push(st);
        };
        (search.pass, Some(search.fail), stopped)
    };
    Ok(SloResult {
        target: label,
        kind,
        slo: format!(
            "{} <= {}",
            slo.name,
            crate::report::text::micros(slo.bound_us)
        ),
        best_rate: pass_rate,
        max_qps,
        pass_rate,
        fail_rate,
        stopped,
        steps,
    })
}

/// The search's rules apart from running steps: which rate to run next and when to stop.
pub struct Bisect {
    /// Highest rate that met the bound.
    pub pass: Option<f64>,
    /// Lowest rate that did not (the closed-loop maximum to begin with).
    pub fail: f64,
    used: usize,
    /// A near fail waiting for its second run.
    again: Option<f64>,
}

#[derive(Debug, PartialEq)]
pub enum Next {
    Run { rate: f64, retry: bool },
    Done(String),
}

impl Bisect {
    pub fn new(max_qps: f64) -> Bisect {
        Bisect {
            pass: None,
            fail: max_qps,
            used: 0,
            again: None,
        }
    }

    pub fn next(&self) -> Next {
        if let Some(rate) = self.again {
            return Next::Run { rate, retry: true };
        }
        let lo = self.pass.unwrap_or(0.0);
        if self.fail - lo <= SLO_WITHIN * self.fail {
            return Next::Done(format!("bracket within {:.0}%", SLO_WITHIN * 100.0));
        }
        if self.used >= SLO_STEPS {
            return Next::Done(format!("step budget of {SLO_STEPS} steps spent"));
        }
        let rate = ((lo + self.fail) / 2.0).round().max(1.0);
        if rate <= lo || rate >= self.fail {
            return Next::Done("no whole rate left between pass and fail".into());
        }
        Next::Run { rate, retry: false }
    }

    /// The outcome of a step at `rate`; `near`: it failed by a little (see `SLO_NEAR`).
    pub fn record(&mut self, rate: f64, pass: bool, near: bool) {
        self.used += 1;
        let first = self.again.take().is_none();
        if !pass && near && first && self.used < SLO_STEPS {
            self.again = Some(rate);
        } else if pass {
            self.pass = Some(self.pass.map_or(rate, |p| p.max(rate)));
        } else {
            self.fail = self.fail.min(rate);
        }
    }
}

/// One paced step of the search: passes when the percentile meets the bound, the rate was held
/// and nothing failed. Also says whether a fail was near (see `SLO_NEAR`).
#[allow(clippy::too_many_arguments)]
async fn slo_step(
    target: &str,
    plan: &Plan,
    slo: &Slo,
    rate: f64,
    retry: bool,
    control: &Control,
    embedded: Option<&Embedded>,
    runs: &mut Vec<RunResult>,
) -> Result<(SloStep, bool), SetupError> {
    if control.progress {
        let again = if retry {
            " (again: it failed by a little)"
        } else {
            ""
        };
        (control.say)(&format!("loadgen: slo step: {rate}/s{again}"));
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
    let achieved = r.rate.as_ref().map_or(0.0, |k| k.achieved);
    let kept = achieved >= rate * 0.98;
    let near = p <= slo.bound_us * SLO_NEAR && achieved >= rate * 0.95 && r.error_total == 0;
    let st = SloStep {
        rate: Some(rate),
        achieved_qps: r.qps,
        percentile_us: p,
        pass: p <= slo.bound_us && kept && r.error_total == 0,
        retry,
        verdict: r.verdict.clone(),
    };
    runs.push(r);
    Ok((st, near))
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

    /// Runs the search against a judge of each step; returns it and the rates run.
    fn search(
        max: f64,
        mut judge: impl FnMut(f64, bool) -> (bool, bool),
    ) -> (Bisect, Vec<f64>, String) {
        let mut b = Bisect::new(max);
        let mut rates = Vec::new();
        loop {
            match b.next() {
                Next::Run { rate, retry } => {
                    let (pass, near) = judge(rate, retry);
                    b.record(rate, pass, near);
                    rates.push(rate);
                }
                Next::Done(why) => return (b, rates, why),
            }
        }
    }

    #[test]
    fn bisection_narrows_the_bracket_to_five_percent_around_the_capacity() {
        for capacity in [50.0, 333.0, 700.0, 990.0] {
            let (b, rates, why) = search(1000.0, |r, _| (r <= capacity, false));
            let (p, f) = (b.pass.unwrap(), b.fail);
            assert!(p <= capacity && capacity < f, "{capacity}: [{p}, {f}]");
            assert!(f - p <= 0.05 * f, "{capacity}: [{p}, {f}]");
            assert!(rates.len() <= SLO_STEPS, "{capacity}: {rates:?}");
            assert_eq!(why, "bracket within 5%");
        }
    }

    #[test]
    fn a_near_fail_is_run_again_and_the_second_run_believed() {
        // The first step (500/s) fails by a little once, then passes: the search goes up.
        let (b, rates, _) = search(1000.0, |r, retry| {
            if r == 500.0 && !retry {
                (false, true)
            } else {
                (r <= 800.0, false)
            }
        });
        assert_eq!(&rates[..3], &[500.0, 500.0, 750.0]);
        assert!(b.pass.unwrap() > 750.0, "{rates:?}");
        // A near fail that fails again is believed.
        let (b, rates, _) = search(1000.0, |r, _| (r <= 300.0, r > 300.0));
        assert_eq!(&rates[..2], &[500.0, 500.0]);
        assert!(b.pass.unwrap() <= 300.0 && b.fail > 300.0);
        // A far fail is believed at once.
        let (_, rates, _) = search(1000.0, |r, _| (r <= 300.0, false));
        assert_eq!(&rates[..2], &[500.0, 250.0]);
    }

    #[test]
    fn a_bound_never_met_ends_on_the_step_budget() {
        let (b, rates, why) = search(1e6, |_, _| (false, false));
        assert_eq!(b.pass, None);
        assert_eq!(rates.len(), SLO_STEPS);
        assert_eq!(why, format!("step budget of {SLO_STEPS} steps spent"));
        // Nor does a run of near fails go past the budget.
        let (_, rates, _) = search(1e6, |_, _| (false, true));
        assert_eq!(rates.len(), SLO_STEPS);
    }
}
