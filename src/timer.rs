//! A precise sleep for paced runs. tokio's timer wheel ticks in milliseconds, so a request due
//! in 300 µs would go out up to ~1.5 ms late; that slop would land in the corrected latency of
//! every paced request. A timerfd (hrtimer, CLOCK_MONOTONIC, absolute) wakes within tens of
//! microseconds. It costs two syscalls per wait, paid only in paced runs, never in closed loop.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

/// CLOCK_MONOTONIC now, nanoseconds (the clock `std::time::Instant` uses on Linux).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct PreciseSleep {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseSleep {
    pub fn new() -> std::io::Result<PreciseSleep> {
        // SAFETY: plain syscall; the fd is owned right away.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
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
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (mono_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (mono_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid fd and a spec we own.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
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
            let mut expirations = 0u64;
            // SAFETY: reads 8 bytes into a u64 we own.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    &mut expirations as *mut u64 as *mut libc::c_void,
                    8,
                )
            };
            if n == 8 {
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
    fn wakes_close_to_the_deadline() {
        // Many short waits at deadlines that fall between millisecond ticks: a timerfd wakes
        // tens of microseconds late, a millisecond timer (tokio's wheel) about half a tick or
        // more. The median is robust to the odd late wake on a busy machine; the bound sits
        // well between the two.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut t = PreciseSleep::new().unwrap();
            let mut late = Vec::new();
            for i in 0..200u64 {
                let due = monotonic_ns() + 150_000 + (i * 37_000) % 700_000;
                t.until(due).await;
                let now = monotonic_ns();
                assert!(now >= due, "woke {} ns early", due - now);
                late.push(now - due);
            }
            late.sort_unstable();
            let median = late[late.len() / 2];
            assert!(
                median < 250_000,
                "median wake {median} ns after the deadline; p90 {} ns",
                late[late.len() * 9 / 10]
            );
            // a deadline in the past returns at once
            t.until(monotonic_ns() - 1).await;
        });
    }
}
