//! The state of a multi-get in flight on a set ([`super::multi_get`]): its parts and where
//! each stands, kept across a `recv_batch` the request loop drops and calls again.

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::outcome::{LookupError, Outcome};
use crate::proto::codec::Tally;

/// One server's part of a multi-get: the keys `from..to` of [`MultiGet::keys`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Part {
    pub server: usize,
    pub from: usize,
    pub to: usize,
    /// Sent: its server was up (counted as routed there).
    pub out: bool,
}

/// Where a part stands.
#[derive(Debug)]
pub(super) enum Stage {
    /// Sent; its reply not taken yet.
    Waiting,
    /// Its first reply, taken this long after the send.
    Got(Result<(Outcome, Tally), LookupError>, u64),
    /// Being redirected to this server (its `ASKING` in flight, or not sent yet).
    Following(usize),
    /// Sent again to this server, its reply not taken yet: the connection's `recv_batch` is
    /// cancel-safe, so a call cut short takes it up again.
    Resent(usize),
    /// Answered `TRYAGAIN` by this server (counted), and not sent again yet: it is, after
    /// the pause, even when the request loop cut the pause short and called again.
    Pausing(usize, LookupError),
    /// Counted in the request's tally or error.
    Done,
}

/// The multi-get in flight on a set (one request in flight on a set).
#[derive(Default)]
pub(super) struct MultiGet {
    pub parts: Vec<Part>,
    pub keys: Vec<u64>,
    /// Each part's stage, in `parts` order; a lock only so that every server's reader may
    /// write its own parts' replies while the others read theirs.
    pub stages: Mutex<Vec<Stage>>,
    /// Scratch for splitting: (group, server, key).
    pub placed: Vec<(usize, usize, u64)>,
    pub sent: Option<Instant>,
    pub tally: Tally,
    pub failed: Option<LookupError>,
}

impl MultiGet {
    /// The parts that went out and are not answered (server, keys): a connection dropped
    /// now leaves their fate unknown.
    pub fn outstanding(&self) -> Vec<(usize, u64)> {
        let stages = lock(&self.stages);
        self.parts
            .iter()
            .zip(stages.iter())
            .filter(|(p, s)| p.out && !matches!(s, Stage::Done | Stage::Got(Ok(_), _)))
            .map(|(p, _)| (p.server, (p.to - p.from) as u64))
            .collect()
    }
}

pub(super) fn lock(stages: &Mutex<Vec<Stage>>) -> MutexGuard<'_, Vec<Stage>> {
    stages.lock().unwrap_or_else(|e| e.into_inner())
}
