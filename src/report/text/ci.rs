//! The 95% CIs as the text report prints them: `qps 65,415 ±1.2%` on the requests line and
//! one `95% CI` line of the percentiles' intervals, or why the run has none.

use crate::stats::goal::percent;
use crate::stats::{Ci, Figures, GoalResult, Precision};

/// ` ±1.2%` after a rate, or nothing when it has no CI.
pub fn plus_minus(p: Option<&Figures>, qps: f64) -> String {
    match p.and_then(|f| f.qps.ci()) {
        Some(c) => format!(" ±{}", percent(c.relative(qps))),
        None => String::new(),
    }
}

/// `[4.31, 4.80]ms`: the bounds in the unit `micros` gives the center.
pub fn bounds(c: &Ci, center: f64) -> String {
    let (div, unit) = match center.max(c.high) {
        x if x >= 1_000_000.0 => (1e6, "s"),
        x if x >= 1000.0 => (1e3, "ms"),
        _ => (1.0, "µs"),
    };
    let digits = if div > 1.0 { 2 } else { 1 };
    format!(
        "[{:.*}, {:.*}]{unit}",
        digits,
        c.low / div,
        digits,
        c.high / div
    )
}

/// The `95% CI` line of a run's percentiles, or none for a file from before them.
pub fn line(p: Option<&Figures>, centers: [f64; 4]) -> Option<String> {
    let f = p?;
    if let Precision::None { none } = &f.qps {
        return Some(format!("95% CI     none: {none}\n"));
    }
    let mut parts = Vec::new();
    let mut why = None;
    for ((name, p), center) in ["p50", "p90", "p99", "p99.9"]
        .iter()
        .zip([&f.p50, &f.p90, &f.p99, &f.p999])
        .zip(centers)
    {
        match p {
            Precision::Ci(c) => parts.push(format!("{name} {}", bounds(c, center))),
            Precision::None { none } => {
                parts.push(format!("{name} none"));
                why.get_or_insert(none);
            }
        }
    }
    let how = f.qps.ci().map_or(String::new(), |c| {
        format!(
            "  from {} batches of {} interval{}",
            c.batches,
            c.batch_intervals,
            if c.batch_intervals == 1 { "" } else { "s" }
        )
    });
    let why = why.map_or(String::new(), |w| format!(" ({w})"));
    Some(format!("95% CI     {}{how}{why}\n", parts.join("  ")))
}

/// `--ci`'s line: the goal, whether the run reached it and when, the widths it ended with.
pub fn goal_line(g: Option<&GoalResult>) -> Option<String> {
    let g = g?;
    let state = match g.after_s {
        Some(s) if g.reached => format!("reached after {s:.2}s"),
        _ => "NOT reached before -d ran out".to_string(),
    };
    Some(format!(
        "ci goal    {}: {state} ({})\n",
        g.asked,
        g.widths_text()
    ))
}
