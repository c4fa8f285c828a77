//! What every worker thread of one run shares: the target, the plan and the run's clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::keys::KeySpace;
use crate::mix::InsertSeq;
use crate::plan::Plan;

/// What every worker of one run shares, read-only.
pub struct Ctx<T> {
    pub target: Arc<T>,
    pub plan: Plan,
    pub keys: KeySpace,
    /// Where inserts take their keys.
    pub inserts: InsertSeq,
    pub start: Instant,
    /// `start` on CLOCK_MONOTONIC, for the precise pacing timer.
    pub start_mono_ns: u64,
    /// Requests sent before this (ns since start) are warm-up: completed but not counted.
    pub warm_end_ns: u64,
    /// No request is sent at or after this (duration runs).
    pub end_ns: Option<u64>,
    /// The run's live counters, a block per thread (what a scrape reads).
    pub cells: Arc<crate::cells::Cells>,
    /// `--trace`: the requests, shared by every connection.
    pub feed: Option<Arc<crate::trace::feed::Feed>>,
    /// `--record-trace`: where each request sent is written.
    pub record: Option<Arc<crate::trace::record::TraceRecorder>>,
}

impl<T> Ctx<T> {
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    pub fn at(&self, ns: u64) -> tokio::time::Instant {
        (self.start + Duration::from_nanos(ns)).into()
    }
}
