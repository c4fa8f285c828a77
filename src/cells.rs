//! Live counters of a run, one block per worker thread, so a `/metrics` scrape reads the counts
//! as they are when it lands rather than as of the last interval (an instant `rate()` at "now"
//! then sees every scrape move). Each block is written by its own thread only: a plain
//! load-add-store with `Relaxed` ordering, no read-modify-write and no cache line shared with
//! another writer; a scrape sums the blocks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::mix::Op;
use crate::outcome::ErrorKind;

/// Latency bucket bounds: the `le` label (canonical float form) and the bound in nanoseconds.
/// `+Inf` follows.
pub const BUCKETS: [(&str, u64); 19] = [
    ("1e-05", 10_000),
    ("2e-05", 20_000),
    ("5e-05", 50_000),
    ("0.0001", 100_000),
    ("0.0002", 200_000),
    ("0.0005", 500_000),
    ("0.001", 1_000_000),
    ("0.002", 2_000_000),
    ("0.005", 5_000_000),
    ("0.01", 10_000_000),
    ("0.02", 20_000_000),
    ("0.05", 50_000_000),
    ("0.1", 100_000_000),
    ("0.2", 200_000_000),
    ("0.5", 500_000_000),
    ("1.0", 1_000_000_000),
    ("2.0", 2_000_000_000),
    ("5.0", 5_000_000_000),
    ("10.0", 10_000_000_000),
];

/// The bucket of [`BUCKETS`] a latency (already at its HdrHistogram slot's low end) falls in;
/// `BUCKETS.len()` is +Inf.
#[inline]
pub fn bucket_of(low_ns: u64) -> usize {
    BUCKETS.partition_point(|b| low_ns > b.1)
}

/// One op's live numbers: counters include the warm-up, the latency buckets do not.
#[derive(Default)]
pub struct OpCell {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub errors: [AtomicU64; ErrorKind::COUNT],
    pub buckets: [AtomicU64; BUCKETS.len() + 1],
    /// Nanoseconds, each latency at its HdrHistogram slot's median (as the result has it).
    pub sum_ns: AtomicU64,
}

/// One thread's block, aligned so two threads' blocks never share a cache line.
#[derive(Default)]
#[repr(align(128))]
pub struct Cell {
    /// Per op, `Op::index` order (a read-only run fills only reads).
    pub ops: [OpCell; Op::COUNT],
    pub reconnects: AtomicU64,
}

/// Only the owning thread calls this: a load and a store, no locked instruction.
#[inline]
pub fn bump(a: &AtomicU64, by: u64) {
    a.store(a.load(Relaxed).wrapping_add(by), Relaxed);
}

/// The live counters of one run: a block per worker thread.
pub struct Cells {
    threads: Box<[Cell]>,
}

impl std::fmt::Debug for Cells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cells({} threads)", self.threads.len())
    }
}

impl Cells {
    pub fn new(threads: usize) -> Cells {
        Cells {
            threads: (0..threads).map(|_| Cell::default()).collect(),
        }
    }

    /// Thread `i`'s block (None past the last).
    pub fn thread(&self, i: usize) -> Option<&Cell> {
        self.threads.get(i)
    }

    /// One op's numbers summed over the threads, as plain values.
    pub fn op_sum(&self, op: usize) -> OpSum {
        let mut s = OpSum::default();
        for t in self.threads.iter() {
            let o = &t.ops[op];
            s.hits += o.hits.load(Relaxed);
            s.misses += o.misses.load(Relaxed);
            for (a, b) in s.errors.iter_mut().zip(&o.errors) {
                *a += b.load(Relaxed);
            }
            for (a, b) in s.buckets.iter_mut().zip(&o.buckets) {
                *a += b.load(Relaxed);
            }
            s.sum_ns += u128::from(o.sum_ns.load(Relaxed));
        }
        s
    }

    pub fn reconnects(&self) -> u64 {
        self.threads
            .iter()
            .map(|t| t.reconnects.load(Relaxed))
            .sum()
    }
}

/// [`OpCell`] read out.
#[derive(Clone, Debug, Default)]
pub struct OpSum {
    pub hits: u64,
    pub misses: u64,
    pub errors: [u64; ErrorKind::COUNT],
    pub buckets: [u64; BUCKETS.len() + 1],
    pub sum_ns: u128,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_bounds_inclusive() {
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(10_000), 0);
        assert_eq!(bucket_of(10_001), 1);
        assert_eq!(bucket_of(10_000_000_000), BUCKETS.len() - 1);
        assert_eq!(bucket_of(10_000_000_001), BUCKETS.len());
    }

    #[test]
    fn blocks_do_not_share_a_cache_line() {
        assert!(std::mem::align_of::<Cell>() >= 128);
        assert_eq!(std::mem::size_of::<Cell>() % 128, 0);
    }

    #[test]
    fn sums_add_the_threads() {
        let c = Cells::new(3);
        bump(&c.thread(0).unwrap().ops[0].hits, 2);
        bump(&c.thread(2).unwrap().ops[0].hits, 5);
        bump(&c.thread(1).unwrap().ops[0].buckets[3], 1);
        let s = c.op_sum(0);
        assert_eq!((s.hits, s.buckets[3]), (7, 1));
        assert!(c.thread(3).is_none());
    }
}
