//! The verdict on a run: whether its numbers can be trusted, judged once from its result and
//! shown wherever the numbers are (JSON `verdict`, the text report's `verdict` line, merge).

use crate::result::{
    sent_text, ClientCpu, RunResult, ServerObserved, SweepStep, TimelineRow, Verdict,
    SATURATED_SHARE,
};

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

/// The verdict on one run, from its result; `steady`: its rate was meant to stay level (not a
/// timed trace's own pace), so the warm-up rule applies.
pub fn judge(r: &RunResult, steady: bool) -> Verdict {
    let mut why = Vec::new();
    if r.interrupted {
        why.push(format!(
            "interrupted: stopped after {:.2}s of the measured window{}; the numbers describe a shorter run than asked",
            r.duration_s,
            if r.server_observed.is_none() { ", before the server's count was read" } else { "" }
        ));
    }
    let c = &r.client_cpu;
    if c.saturated {
        why.push(saturated(c, r.machine_load.as_ref().map(|m| m.cores)));
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
    }
    // A trace replay has a schedule too (its lines' due times): its lag is judged like -R's.
    if let Some(lag) = &r.lag_us {
        if lag.p99 > LAG_P99_BOUND_US {
            let of = if r.rate.is_some() {
                ""
            } else {
                " behind the trace's own times"
            };
            why.push(format!(
                "behind schedule: send lag p99 {:.0}µs{of} (> {LAG_P99_BOUND_US:.0}µs)",
                lag.p99
            ));
        }
    }
    if let Some(so) = &r.server_observed {
        if let Some(w) = server_count(so) {
            why.push(w);
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
    if let Some(g) = r.ci_goal.as_ref().filter(|g| !g.reached) {
        why.push(format!(
            "CI goal not reached: --ci {} ended at {} after {:.2}s (-d); run longer, or on a quieter machine",
            g.asked,
            g.widths_text(),
            r.duration_s
        ));
    }
    for w in drifting(r).into_iter().filter(|_| steady) {
        why.push(w);
    }
    if let Some(w) = warmup_short(r).filter(|_| steady) {
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

/// The drift reasons: a figure whose per-interval values trend by more than the bound,
/// beyond what the noise could make (`stats::trend`).
fn drifting(r: &RunResult) -> Vec<String> {
    let Some(f) = &r.precision else {
        return Vec::new();
    };
    [("QPS", &f.qps_trend), ("p99", &f.p99_trend)]
        .into_iter()
        .filter_map(|(name, t)| t.as_ref().filter(|t| t.drifts).map(|t| (name, t)))
        .map(|(name, t)| {
            format!(
                "drifting: {name} {} {:.0}% over the measured window (a linear trend across {} batches, p {:.4} < {}, more than {:.0}%); the server or the machine changed during the run",
                if t.change < 0.0 { "fell" } else { "rose" },
                t.change.abs() * 100.0,
                t.batches,
                t.p,
                crate::stats::trend::P_MAX,
                crate::stats::trend::CHANGE_MIN * 100.0
            )
        })
        .collect()
}

/// The saturation reason, with advice that fits: a thread that was ready but got no core is
/// the machine's limit (more threads cannot help), and threads beyond the cores add nothing.
fn saturated(c: &ClientCpu, cores: Option<usize>) -> String {
    let what = format!(
        "client saturated: busiest worker thread {:.0}% busy, workers {:.0}% on a core (>= {:.0}%)",
        c.busiest * 100.0,
        c.utilization * 100.0,
        SATURATED_SHARE * 100.0
    );
    let cores = cores.unwrap_or(0);
    let advice = if ClientCpu::saturates(c.busiest) && c.utilization < WAITED_FOR_A_CORE {
        format!(
            "the worker threads were ready to run but waited for a core{}: give the client cores of its own (taskset) or another machine; more -t cannot help",
            match cores {
                0 => String::new(),
                n => format!(" (the server and the client share {n} cores)"),
            }
        )
    } else if c.threads > 0 && cores > 0 && c.threads >= cores {
        format!("every one of the {cores} cores has a worker thread: add -p pipelining, or run the client on more cores or machines")
    } else {
        "add -t threads or -p pipelining".to_string()
    };
    format!("{what}; {advice}")
}

/// Busy but on a core for less than this share: the threads mostly waited for a core.
const WAITED_FOR_A_CORE: f64 = 0.5;

/// The server-count reason, named for what it is: a count that differs, one that cannot be
/// compared (a restart), or one that could not be read.
fn server_count(so: &ServerObserved) -> Option<String> {
    let note = so.note.as_deref().unwrap_or("");
    // A set compared over some of its servers: what it says holds for those only.
    if so.matches && so.members.iter().any(|m| m.not_comparable) {
        return Some(format!("server count partial: {note}"));
    }
    if so.matches {
        return None;
    }
    Some(match so.delta {
        _ if so.not_comparable => format!("server count not comparable: {note}"),
        None => format!("server count unavailable: {note}"),
        Some(_) if !note.is_empty() => format!("server count differs: {}: {note}", so.source),
        Some(d) => format!(
            "server count differs: {} counted {d}, loadgen sent {}",
            so.source,
            sent_text(so.expected, so.unknown, |n| n.to_string())
        ),
    })
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
            server: None,
        }
    }

    fn cpu(busiest: f64, utilization: f64, threads: usize) -> ClientCpu {
        ClientCpu {
            busiest,
            utilization,
            threads,
            saturated: true,
            ..ClientCpu::new(0, 0, 1, threads, 1)
        }
    }

    #[test]
    fn saturation_advice_fits_the_machine() {
        // Ready but never on a core (a server with hundreds of backends on 2 cores).
        let why = saturated(&cpu(0.97, 0.17, 2), Some(2));
        assert!(
            why.contains("waited for a core (the server and the client share 2 cores)"),
            "{why}"
        );
        assert!(why.contains("more -t cannot help"), "{why}");
        // On a core all the time, one thread per core: threads cannot help either.
        let why = saturated(&cpu(0.95, 0.93, 2), Some(2));
        assert!(
            why.contains("every one of the 2 cores has a worker thread: add -p"),
            "{why}"
        );
        // Free cores: more threads can.
        let why = saturated(&cpu(0.95, 0.93, 1), Some(4));
        assert!(why.ends_with("add -t threads or -p pipelining"), "{why}");
    }

    fn observed(delta: Option<u64>, expected: u64, unknown: u64) -> ServerObserved {
        ServerObserved {
            source: "memcached get_hits+get_misses".into(),
            delta,
            expected,
            unknown,
            matches: delta.is_some_and(|d| crate::result::count_matches(d, expected, unknown)),
            note: None,
            before: None,
            after: None,
            shared: false,
            not_comparable: false,
            members: Vec::new(),
            redirects: None,
        }
    }

    #[test]
    fn the_server_count_reason_says_which_it_is() {
        assert_eq!(server_count(&observed(Some(90), 100, 10)), None);
        assert_eq!(server_count(&observed(Some(100), 100, 0)), None);
        // Exact when nothing is unknown: more is as wrong as fewer.
        let why = server_count(&observed(Some(101), 100, 0)).unwrap();
        assert_eq!(
            why,
            "server count differs: memcached get_hits+get_misses counted 101, loadgen sent 100"
        );
        let why = server_count(&observed(Some(89), 100, 10)).unwrap();
        assert!(
            why.ends_with("loadgen sent 100, 10 of unknown fate: 90-100"),
            "{why}"
        );
        let mut restarted = observed(None, 100, 0);
        (restarted.not_comparable, restarted.note) = (true, Some("it restarted".into()));
        assert_eq!(
            server_count(&restarted).unwrap(),
            "server count not comparable: it restarted"
        );
        let mut gone = observed(None, 100, 0);
        gone.note = Some("no answer".into());
        assert_eq!(
            server_count(&gone).unwrap(),
            "server count unavailable: no answer"
        );
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
