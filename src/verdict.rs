//! The verdict on a run: whether its numbers can be trusted, judged once from its result and
//! shown wherever the numbers are (JSON `verdict`, the text report's `verdict` line, merge).

use crate::result::{RunResult, TimelineRow, Verdict};

/// Lag p99 above this means the generator sent late (a paced run fell behind its schedule).
pub const LAG_P99_BOUND_US: f64 = 10_000.0;

/// The verdict on one run, from its result alone.
pub fn judge(r: &RunResult) -> Verdict {
    let mut why = Vec::new();
    let c = &r.client_cpu;
    if c.saturated {
        why.push(format!(
            "client saturated: workers {:.0}% busy (>= 90%); add -t threads or -p pipelining",
            c.utilization * 100.0
        ));
    }
    if let Some(rate) = &r.rate {
        if rate.achieved < rate.asked * 0.99 {
            why.push(format!(
                "behind schedule: achieved {:.0}/s of -R {:.0}/s (< 99%)",
                rate.achieved, rate.asked
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
