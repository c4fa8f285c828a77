//! How long a worker thread's runtime sat idle (parked: nothing to run, waiting for I/O or a
//! timer). The rest of the time it was busy, running or waiting for a core, so a thread that
//! never parks holds its connections back whatever its CPU time says on a crowded machine.

use std::cell::Cell;

thread_local! {
    /// (idle so far, when the current park began), nanoseconds on CLOCK_MONOTONIC.
    static PARKED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// The runtime's `on_thread_park` hook.
pub fn on_park() {
    PARKED.with(|p| p.set((p.get().0, crate::timer::monotonic_ns())));
}

/// The runtime's `on_thread_unpark` hook.
pub fn on_unpark() {
    PARKED.with(|p| {
        let (idle, at) = p.get();
        p.set((idle + crate::timer::monotonic_ns().saturating_sub(at), 0));
    });
}

/// Idle time of the calling thread so far, nanoseconds.
pub fn idle_ns() -> u64 {
    PARKED.with(|p| p.get().0)
}
