//! A set's servers one by one (a memcached pool, a Redis Cluster's masters): the latency of
//! the requests each answered. A connection records without a lock and adds its histograms
//! to the set's when a run step ends on it ([`Conn::settle`](crate::proto::target::Conn)) or
//! it closes, so one slow server shows as its own line, not as a tail of the total.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// How often a connection hands its latencies in while it runs, so that live views (the
/// metrics endpoint) are at most this old.
const HAND_IN_EVERY: Duration = Duration::from_secs(1);

/// A set's servers as live views read them while a run goes on: each one's name (its address,
/// never a URL), what was routed to it and the latencies it answered with.
#[derive(Clone)]
pub struct SetMembers {
    pub names: Vec<String>,
    pub routed: Arc<[AtomicU64]>,
    pub latency: Arc<ServerLatency>,
}

impl std::fmt::Debug for SetMembers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetMembers")
            .field("names", &self.names)
            .finish()
    }
}

impl SetMembers {
    /// Server `i`: what was routed to it and its latencies, so far.
    pub fn now(&self, i: usize) -> (u64, Histogram<u64>) {
        (self.routed[i].load(Ordering::Relaxed), self.latency.of(i))
    }
}

/// Nanoseconds, 3 significant digits, up to 100 s: as the run's own histograms.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Every server's latencies so far, from the connections that handed theirs in, and the
/// requests routed to each whose fate is unknown.
pub struct ServerLatency {
    each: Vec<Mutex<Histogram<u64>>>,
    /// Sent to the server (counted as routed there), then no reply: timed out, lost with the
    /// connection, or an error reply; the server may or may not have counted them.
    unsure: Vec<AtomicU64>,
    /// Times a connection to the server was opened again after it was lost or hung.
    reopened: Vec<AtomicU64>,
}

impl ServerLatency {
    pub fn new(servers: usize) -> Arc<ServerLatency> {
        Arc::new(ServerLatency {
            each: (0..servers).map(|_| Mutex::new(histogram())).collect(),
            unsure: (0..servers).map(|_| AtomicU64::new(0)).collect(),
            reopened: (0..servers).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Times server `i` was opened again so far.
    pub fn reopened(&self, i: usize) -> u64 {
        self.reopened
            .get(i)
            .map_or(0, |u| u.load(Ordering::Relaxed))
    }

    /// Server `i`'s requests of unknown fate so far (in what it counts: keys of a multi-get
    /// where it counts keys).
    pub fn unsure(&self, i: usize) -> u64 {
        self.unsure.get(i).map_or(0, |u| u.load(Ordering::Relaxed))
    }

    /// Server `i`'s latencies so far.
    pub fn of(&self, i: usize) -> Histogram<u64> {
        self.each[i]
            .lock()
            .map_or_else(|_| histogram(), |h| h.clone())
    }
}

/// One connection's latencies per server, not yet handed in.
pub struct LocalLatency {
    shared: Arc<ServerLatency>,
    each: Vec<Histogram<u64>>,
    recorded: bool,
    /// Records since the clock was last looked at, and when this connection last handed in.
    since_look: u32,
    handed: Instant,
}

impl LocalLatency {
    pub fn new(shared: Arc<ServerLatency>) -> LocalLatency {
        let each = shared.each.iter().map(|_| histogram()).collect();
        LocalLatency {
            shared,
            each,
            recorded: false,
            since_look: 0,
            handed: Instant::now(),
        }
    }

    #[inline]
    pub fn record(&mut self, server: usize, ns: u64) {
        if let Some(h) = self.each.get_mut(server) {
            h.saturating_record(ns.max(1));
            self.recorded = true;
        }
        // The clock only every few hundred replies: a live view may lag a second, no more.
        self.since_look += 1;
        if self.since_look >= 256 {
            self.since_look = 0;
            if self.handed.elapsed() >= HAND_IN_EVERY {
                self.hand_in();
            }
        }
    }

    /// A connection to `server` opened again: rare, so counted at once.
    pub fn reopened(&self, server: usize) {
        if let Some(u) = self.shared.reopened.get(server) {
            u.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `n` requests routed to `server` whose fate is unknown: rare, so counted at once.
    pub fn unsure(&self, server: usize, n: u64) {
        if let Some(u) = self.shared.unsure.get(server) {
            u.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Adds what this connection recorded to the set's, and starts again.
    pub fn hand_in(&mut self) {
        self.handed = Instant::now();
        if !std::mem::take(&mut self.recorded) {
            return;
        }
        for (mine, theirs) in self.each.iter_mut().zip(&self.shared.each) {
            if let Ok(mut t) = theirs.lock() {
                let _ = t.add(&*mine);
            }
            mine.reset();
        }
    }
}

impl Drop for LocalLatency {
    fn drop(&mut self) {
        self.hand_in();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_hands_in_each_servers_latencies() {
        let shared = ServerLatency::new(2);
        let mut a = LocalLatency::new(shared.clone());
        a.record(1, 5_000);
        a.record(1, 7_000);
        assert_eq!(shared.of(1).len(), 0);
        a.hand_in();
        let mut b = LocalLatency::new(shared.clone());
        b.record(0, 1_000);
        drop(b);
        assert_eq!((shared.of(0).len(), shared.of(1).len()), (1, 2));
        assert!((7_000..7_010).contains(&shared.of(1).max()));
    }
}
