//! What every worker thread of one run shares: the target, the plan and the run's clock.

use std::sync::atomic::{AtomicU64, Ordering};
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
    /// No request is sent at or after this (duration runs); brought forward when `--ci`'s
    /// goal is met, so the run ends as a timed one does, its requests in flight answered.
    pub end: End,
    /// The run's live counters, a block per thread (what a scrape reads).
    pub cells: Arc<crate::cells::Cells>,
    /// `--trace`: the requests, shared by every connection.
    pub feed: Option<Arc<crate::trace::feed::Feed>>,
    /// `--record-trace`: where each request sent is written.
    pub record: Option<Arc<crate::trace::record::TraceRecorder>>,
}

/// A run's end, ns since its start: none (u64::MAX) or a time that may only come sooner.
#[derive(Debug)]
pub struct End(AtomicU64);

impl End {
    pub fn new(ns: Option<u64>) -> End {
        End(AtomicU64::new(ns.unwrap_or(u64::MAX)))
    }

    #[inline]
    pub fn get(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&e| e != u64::MAX)
    }

    /// Ends the run at `ns` if that is sooner than its end.
    pub fn bring_to(&self, ns: u64) {
        self.0.fetch_min(ns, Ordering::Relaxed);
    }
}

impl<T> Ctx<T> {
    /// No request is sent at or after this (None: no end by time).
    #[inline]
    pub fn end_ns(&self) -> Option<u64> {
        self.end.get()
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    pub fn at(&self, ns: u64) -> tokio::time::Instant {
        (self.start + Duration::from_nanos(ns)).into()
    }
}
