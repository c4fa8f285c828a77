//! What a run is told from outside (stop, progress, hooks) and what it tells its hooks after
//! every interval. Below the collector, which calls the hooks, and above the exporters
//! (metrics, interval log) that implement them.

use std::sync::Arc;

use tokio::sync::watch;

use crate::cpu::ServerProcess;
use crate::result::TimelineRow;
use crate::totals::Totals;

/// How a run is stopped from outside and what it says while running.
#[derive(Clone)]
pub struct Control {
    /// `true` stops the run now (Ctrl-C, SIGTERM); results so far are kept.
    pub stop: watch::Receiver<bool>,
    /// Print a progress line to stderr every interval.
    pub progress: bool,
    /// Position of the target in a multi-target run.
    pub target_index: usize,
    /// Called with the merged totals after every interval (Prometheus exporter, interval log).
    pub hooks: Vec<Hook>,
    /// The server whose CPU the run reads: `--server-pid`, else located by dispatch.
    pub server: ServerProcess,
    /// Where progress lines and notes go.
    pub say: crate::sink::Sink,
}

pub type Hook = Arc<dyn Fn(&IntervalView) + Send + Sync>;

/// The name a target goes by in metrics labels and interval-log tags: its kind, or
/// `<kind>_<index>` when an earlier target of that kind (at `first`) has the name already.
pub fn target_tag(kind: &str, index: usize, first: usize) -> String {
    if first == index {
        kind.to_string()
    } else {
        format!("{kind}_{index}")
    }
}

/// What the hooks see after each interval.
pub struct IntervalView<'a> {
    /// The redacted target URL (never use it as a metric label: use `kind`).
    pub target: &'a str,
    /// The target's kind: one of `proto::table::kinds()`.
    pub kind: &'a str,
    /// Position of this target in the run (0-based), to tell apart two targets of one kind.
    pub target_index: usize,
    /// Interval bounds, seconds since the run's start; `warm` when it lies in the warm-up.
    pub start_s: f64,
    pub end_s: f64,
    pub warm: bool,
    /// The final interval of this target's run.
    pub last: bool,
    /// Unix time of the run's start, seconds.
    pub run_start_unix: f64,
    pub totals: &'a Totals,
    pub interval: &'a Totals,
    pub interval_s: f64,
    pub in_flight: u64,
    pub connections: u64,
    pub rate: Option<f64>,
    /// The row the result's timeline gets for this interval (None: warm-up, or an empty final
    /// sliver), so a live view draws exactly what the report will.
    pub row: Option<&'a TimelineRow>,
    /// The row the progress line shows: warm-up included; None for a final sliver (the last
    /// replies of a `-n` run just after a whole interval), which gets no line.
    pub progress_row: Option<&'a TimelineRow>,
    /// The workers' live counters (None in tests that feed views by hand).
    pub cells: Option<&'a Arc<crate::cells::Cells>>,
    /// A set's servers one by one, read live (None: one server).
    pub members: Option<&'a crate::proto::server_latency::SetMembers>,
    /// The run's 95% CIs over its measured intervals so far (None: warm-up, or no hooks).
    pub precision: Option<&'a crate::stats::Figures>,
}
