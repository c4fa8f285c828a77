//! The verdict on a run: whether its numbers can be trusted, judged once from its result and
//! shown wherever the numbers are (JSON `verdict`, the text report's `verdict` line, merge).

use crate::result::{RunResult, SweepStep, TimelineRow, Verdict};

/// Lag p99 above this means the generator sent late (a paced run fell behind its schedule).
/// A backlog at the end worth more than this much of the schedule means the same.
pub const LAG_P99_BOUND_US: f64 = 10_000.0;

/// Share of all cores' time the hypervisor may steal before the run is suspect.
pub const STEAL_BOUND: f64 = 0.05;

/// Share of all cores' time other processes may take (not loadgen, not the server).
pub const OTHERS_BOUND: f64 = 0.20;

/// A sweep step whose client CPU per request exceeds this many times the lowest of the steps
/// before it: the client's own cost grows with the load, so its peak may be the client's.
pub const CPU_RISE_BOUND: f64 = 1.5;

/// The verdict on one run, from its result alone.
pub fn judge(r: &RunResult) -> Verdict {
    let mut why = Vec::new();
    let c = &r.client_cpu;
    if c.saturated {
        why.push(format!(
            "client saturated: busiest worker thread {:.0}% busy, workers {:.0}% (>= {:.0}%); add -t threads or -p pipelining",
            c.busiest * 100.0,
            c.utilization * 100.0,
            crate::result::SATURATED_SHARE * 100.0
        ));
    }
    if let Some(rate) = &r.rate {
        if rate.achieved < rate.asked * 0.99 {
            why.push(format!(
                "behind schedule: achieved {:.0}/s of -R {:.0}/s (< 99%)",
                rate.achieved, rate.asked
            ));
        }
        let owed_us = rate.backlog as f64 * 1e6 / rate.asked.max(1e-9);
        if owed_us > LAG_P99_BOUND_US {
            why.push(format!(
                "behind schedule: a backlog of {} requests due but not sent when the window closed ({:.0} ms of the schedule, > {:.0} ms)",
                rate.backlog,
                owed_us / 1e3,
                LAG_P99_BOUND_US / 1e3
            ));
        }
        if let Some(lag) = &r.lag_us {
            if lag.p99 > LAG_P99_BOUND_US {
                why.push(format!(
                    "behind schedule: send lag p99 {:.0}µs (> {LAG_P99_BOUND_US:.0}µs)",
                    lag.p99
                ));
            }
        }
    }
    if let Some(so) = &r.server_observed {
        if !so.matches {
            let seen = so.delta.map_or("unknown".into(), |d| d.to_string());
            why.push(format!(
                "server count differs: {} counted {seen}, loadgen {}",
                so.source, so.expected
            ));
        }
    }
    if r.error_total > 0 || r.reconnects > 0 {
        let timeouts = r.errors.get("timeout").copied().unwrap_or(0);
        why.push(format!(
            "errors in the measured window: {} errors ({timeouts} timeouts), {} reconnects",
            r.error_total, r.reconnects
        ));
    }
    if let Some(m) = &r.machine_load {
        if m.steal_share > STEAL_BOUND {
            why.push(format!(
                "machine disturbed: the hypervisor stole {:.0}% of the {} cores' time (> {:.0}%)",
                m.steal_share * 100.0,
                m.cores,
                STEAL_BOUND * 100.0
            ));
        }
        if m.others_share > OTHERS_BOUND {
            why.push(format!(
                "machine disturbed: other processes took {:.0}% of the {} cores' time (> {:.0}%); run on a quiet machine",
                m.others_share * 100.0,
                m.cores,
                OTHERS_BOUND * 100.0
            ));
        }
    }
    if let Some(w) = warmup_short(r) {
        why.push(w);
    }
    let answered = r.hits + r.misses;
    if r.ops.is_empty() && answered > 0 && r.misses * 2 >= answered {
        why.push(format!(
            "mostly misses: {:.0}% of reads found no row; the data set is probably not loaded (run `loadgen prepare`) or --keys is outside it",
            r.misses as f64 * 100.0 / answered as f64
        ));
    }
    Verdict::from(why)
}

/// The first measured intervals differ from the rest by more than 10%: the warm-up ended
/// before the rate settled. Needs 5 intervals or more; the last (possibly partial) is left out.
fn warmup_short(r: &RunResult) -> Option<String> {
    let rows = &r.timeline;
    if rows.len() < 5 {
        return None;
    }
    let rows = &rows[..rows.len() - 1];
    let mean = |rs: &[TimelineRow]| rs.iter().map(|x| x.qps).sum::<f64>() / rs.len() as f64;
    let (first, rest) = (mean(&rows[..2]), mean(&rows[2..]));
    if rest > 0.0 && (first - rest).abs() > rest * 0.10 {
        return Some(format!(
            "warm-up too short: the first 2 intervals ran {first:.0}/s, the rest {rest:.0}/s (> 10% apart); use a longer --warmup"
        ));
    }
    None
}

/// The verdict on a sweep: each step's that is not valid, and the client's CPU per request
/// rising with the load (at the first step where it does).
pub fn judge_sweep(steps: &[SweepStep]) -> Verdict {
    let mut why: Vec<String> = steps
        .iter()
        .filter(|st| !st.verdict.valid)
        .map(|st| {
            format!(
                "{} connections: {}",
                st.connections,
                st.verdict.reasons.join("; ")
            )
        })
        .collect();
    let mut low: Option<&SweepStep> = None;
    for st in steps.iter().filter(|st| st.client_cpu_us > 0.0) {
        if let Some(l) = low {
            if st.client_cpu_us > l.client_cpu_us * CPU_RISE_BOUND {
                why.push(format!(
                    "client CPU per request rose with the load: {:.1}µs at {} connections, {:.1}µs at {} (> {CPU_RISE_BOUND}x); the peak may be the client's",
                    l.client_cpu_us, l.connections, st.client_cpu_us, st.connections
                ));
                break;
            }
        }
        if !low.is_some_and(|l| st.client_cpu_us >= l.client_cpu_us) {
            low = Some(st);
        }
    }
    Verdict::from(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(connections: usize, cpu_us: f64, reasons: &[&str]) -> SweepStep {
        SweepStep {
            connections,
            qps: 1000.0,
            p50_us: 100.0,
            p99_us: 200.0,
            errors: 0,
            ops: Default::default(),
            verdict: Verdict::from(reasons.iter().map(|r| r.to_string()).collect()),
            client_cpu_us: cpu_us,
        }
    }

    #[test]
    fn a_sweep_is_invalid_when_a_step_is_or_client_cpu_rises() {
        let v = judge_sweep(&[step(1, 10.0, &[]), step(8, 6.0, &[]), step(64, 5.0, &[])]);
        assert!(v.valid, "{v:?}");
        let v = judge_sweep(&[step(1, 10.0, &[]), step(64, 5.0, &["client saturated: x"])]);
        assert_eq!(v.reasons, vec!["64 connections: client saturated: x"]);
        let v = judge_sweep(&[step(1, 10.0, &[]), step(8, 4.0, &[]), step(64, 6.5, &[])]);
        assert!(
            v.reasons[0].starts_with(
                "client CPU per request rose with the load: 4.0µs at 8 connections, 6.5µs at 64"
            ),
            "{v:?}"
        );
    }
}
