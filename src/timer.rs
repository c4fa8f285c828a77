//! A precise sleep for paced runs. tokio's timer wheel ticks in milliseconds, so a request due
//! in 300 µs would go out up to ~1.5 ms late; that slop would land in the corrected latency of
//! every paced request. A timerfd (hrtimer, CLOCK_MONOTONIC, absolute) wakes within tens of
//! microseconds. It costs two syscalls per wait, paid only in paced runs, never in closed loop.

use std::os::fd::OwnedFd;

use rustix::time::{
    clock_gettime, timerfd_create, timerfd_settime, ClockId, Itimerspec, TimerfdClockId,
    TimerfdFlags, TimerfdTimerFlags, Timespec,
};
use tokio::io::unix::AsyncFd;

/// CLOCK_MONOTONIC now, nanoseconds (the clock `std::time::Instant` uses on Linux).
pub fn monotonic_ns() -> u64 {
    let ts = clock_gettime(ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct PreciseSleep {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseSleep {
    pub fn new() -> std::io::Result<PreciseSleep> {
        let fd: OwnedFd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // SAFETY: the OwnedFd stays open and unchanged for as long as the AsyncFd owns it.
        let fd =
            unsafe { AsyncFd::register(fd) }.map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(PreciseSleep { fd })
    }

    /// Sleeps until CLOCK_MONOTONIC reaches `mono_ns`. Cancel-safe.
    pub async fn until(&mut self, mono_ns: u64) {
        if mono_ns <= monotonic_ns() {
            return;
        }
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: (mono_ns / 1_000_000_000) as i64,
                tv_nsec: (mono_ns % 1_000_000_000) as _,
            },
        };
        if timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::ABSTIME, &spec).is_err() {
            tokio::time::sleep(std::time::Duration::from_nanos(
                mono_ns.saturating_sub(monotonic_ns()),
            ))
            .await;
            return;
        }
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                return;
            };
            let mut expirations = [0u8; 8];
            if rustix::io::read(self.fd.get_ref(), &mut expirations) == Ok(8) {
                return;
            }
            guard.clear_ready();
            if monotonic_ns() >= mono_ns {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_closer_to_the_deadline_than_a_millisecond_timer() {
        // Short waits at deadlines that fall between millisecond ticks, alternating a timerfd
        // wait with tokio's millisecond wheel: the timerfd wakes tens of microseconds late, the
        // wheel about half a tick or more. Compared in the same run, so a busy machine delays
        // both alike and the test does not depend on what else runs.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut t = PreciseSleep::new().unwrap();
            let (mut precise, mut wheel) = (Vec::new(), Vec::new());
            for i in 0..200u64 {
                let due = monotonic_ns() + 150_000 + (i * 37_000) % 700_000;
                t.until(due).await;
                let now = monotonic_ns();
                assert!(now >= due, "woke {} ns early", due - now);
                precise.push(now - due);
                let due = monotonic_ns() + 150_000 + (i * 37_000) % 700_000;
                let wait = std::time::Duration::from_nanos(due - monotonic_ns());
                tokio::time::sleep_until(tokio::time::Instant::now() + wait).await;
                wheel.push(monotonic_ns().saturating_sub(due));
            }
            let median = |v: &mut Vec<u64>| {
                v.sort_unstable();
                v[v.len() / 2]
            };
            let (p, w) = (median(&mut precise), median(&mut wheel));
            assert!(
                p * 2 < w,
                "timerfd median wake {p} ns after the deadline, millisecond wheel {w} ns"
            );
            // a deadline in the past returns at once
            t.until(monotonic_ns() - 1).await;
        });
    }
}
