//! The progress line on stderr: one line per interval, with what is left of the run.

use std::fmt::Write;

use super::number::{micros, thousands};
use crate::result::TimelineRow;

/// The progress line of one interval (stderr). `errors` and `reconnects` are the interval's,
/// warm-up included; `len_s` is its length.
pub fn progress_line(row: &TimelineRow, errors: u64, reconnects: u64, len_s: f64) -> String {
    let warm = row.t_s <= 0.0;
    let label = if warm {
        "warm-up".to_string()
    } else if ((row.t_s * 10.0).round() - row.t_s * 10.0).abs() > 0.05 {
        // A short last interval (replies to requests sent before the end): its own end
        // time, so it does not look like a second row for the same second.
        format!("{:>6.2}s", row.t_s)
    } else {
        format!("{:>6.1}s", row.t_s)
    };
    // warm-up requests are not timed, and an interval without replies has no latencies
    let none = warm || row.hits + row.misses == 0;
    let pct = |us: f64| if none { "-".to_string() } else { micros(us) };
    format!(
        "[{label}] {:>10} qps  p50 {:>9}  p99 {:>9}  err/s {:>6}  reconn/s {:>4}  conns {:>4}  in-flight {:>4}",
        thousands(row.qps as u64),
        pct(row.p50_us),
        pct(row.p99_us),
        (errors as f64 / len_s.max(1e-9)).round() as u64,
        (reconnects as f64 / len_s.max(1e-9)).round() as u64,
        row.connections,
        row.in_flight
    )
}

/// How long a run is asked to last, for the progress line's count-down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RunLength {
    /// Warm-up plus `-d`, seconds from the run's start.
    Seconds(f64),
    /// `-n` counted requests.
    Requests(u64),
    /// A trace (or a sweep's steps): no count-down.
    Open,
}

impl RunLength {
    pub fn of(plan: &crate::plan::Plan) -> RunLength {
        match plan.stop {
            crate::plan::Stop::Duration(d) => RunLength::Seconds((plan.warmup + d).as_secs_f64()),
            crate::plan::Stop::Requests(n) => RunLength::Requests(n),
            crate::plan::Stop::Trace => RunLength::Open,
        }
    }

    /// `  left 8s  target 2 of 3` at `end_s` since the start, `done` counted requests at
    /// `qps`; `target`: this one's index and how many (0: no count of targets). Empty when
    /// neither is known.
    pub fn left(self, end_s: f64, done: u64, qps: f64, (k, n): (usize, usize)) -> String {
        let left_s = match self {
            RunLength::Seconds(s) => Some((s - end_s).max(0.0)),
            RunLength::Requests(n) if qps > 0.0 => Some(n.saturating_sub(done) as f64 / qps),
            _ => None,
        };
        let mut out = String::new();
        if let Some(s) = left_s {
            let _ = write!(out, "  left {}", short_duration(s));
        }
        if n > 1 {
            let _ = write!(out, "  target {} of {n}", k + 1);
        }
        out
    }
}

/// `8s`, `2m05s`, `1h02m`: whole seconds, rounded up so a count-down reaches 0 only at the end.
fn short_duration(s: f64) -> String {
    let t = s.ceil() as u64;
    match t {
        0..=59 => format!("{t}s"),
        60..=3599 => format!("{}m{:02}s", t / 60, t % 60),
        _ => format!("{}h{:02}m", t / 3600, t % 3600 / 60),
    }
}

/// `  read 9,000/s  update 1,000/s`: answered requests per op in the interval, for the
/// progress line of a mix that writes (empty for a read-only run).
pub fn op_rates(iv: &crate::totals::Totals, len_s: f64) -> String {
    let mut s = String::new();
    for (op, o) in crate::mix::Op::ALL.iter().zip(&iv.ops) {
        let n = o.counts.hits + o.counts.misses + o.warm.hits + o.warm.misses;
        if n + o.counts.error_total() + o.warm.error_total() > 0 {
            let rate = (n as f64 / len_s.max(1e-9)).round() as u64;
            s.push_str(&format!("  {} {}/s", op.name(), thousands(rate)));
        }
    }
    s
}
