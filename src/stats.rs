//! Statistics of a run's intervals: how sure its figures are. Computed once per run from the
//! per-interval rows the collector keeps anyway (never per request), and described, with
//! their assumptions, in docs/statistics.md.

pub mod autocorr;
pub mod batch_means;
pub mod difference;
pub mod figures;
pub mod goal;
#[cfg(test)]
mod simulate;
pub mod trend;

pub use batch_means::{interval_of, Ci, Precision};
pub use difference::{difference, Difference, Estimate};
pub use figures::{Centers, Figures, Point};
pub use goal::{Goal, GoalResult};
pub use trend::{trend_of, Trend};
