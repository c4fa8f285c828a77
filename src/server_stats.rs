//! The embedded server's own counters, the server-side truth for the embedded target: `serve`
//! counts into them and the HTTP driver reads them, so they sit below both.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::mix::Op;

/// The server's own counters: the server-side truth for the embedded target.
#[derive(Default)]
pub struct ServerStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Writes per op (`Op::index` order; reads are hits + misses), whatever they came to.
    pub writes: [AtomicU64; Op::COUNT],
    /// The keys multi-gets read (counted in hits and misses too), so reads of one key and
    /// multi-gets can be told apart.
    pub multi_keys: AtomicU64,
}

impl ServerStats {
    pub fn lookups(&self) -> u64 {
        self.hits.load(Ordering::Relaxed) + self.misses.load(Ordering::Relaxed)
    }

    /// Requests per op, `Op::index` order.
    pub fn per_op(&self) -> Vec<u64> {
        let mut ops: Vec<u64> = self
            .writes
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect();
        let multi = self.multi_keys.load(Ordering::Relaxed);
        ops[Op::Read.index()] = self.lookups().saturating_sub(multi);
        ops[Op::Mget.index()] = multi;
        ops
    }
}
