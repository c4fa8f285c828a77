//! The open-files limit (RLIMIT_NOFILE). Every connection is a descriptor, two with the
//! embedded server (it holds the other end in-process), three in a paced run (its precise
//! timer). Shells often set a soft limit of 1,024 under a far higher hard limit, so the soft
//! limit is raised to the hard one, as most load generators do; a run that even the hard limit
//! cannot hold is refused before it starts, not run with connect errors.
use crate::error::ConfigError;

/// Descriptors kept for everything but the connections: standard streams, runtimes (an epoll
/// and a waker each), listeners, result and log files.
const BASE: u64 = 64;
/// And per worker thread (its runtime).
const PER_THREAD: u64 = 4;

/// Raises the soft limit to the hard limit (once is enough; again is harmless). Returns the
/// limit now in force, or None when it cannot be read.
pub fn raise() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // None is RLIM_INFINITY.
    let lim = getrlimit(Resource::Nofile);
    let (soft, hard) = (
        lim.current.unwrap_or(u64::MAX),
        lim.maximum.unwrap_or(u64::MAX),
    );
    if soft < hard {
        let want = Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        if setrlimit(Resource::Nofile, want).is_ok() {
            return Some(hard);
        }
    }
    Some(soft)
}

/// What one connection costs: its socket, the embedded server's end of it, a paced run's timer.
#[derive(Clone, Copy, Debug)]
pub struct PerConn {
    pub embedded: bool,
    pub paced: bool,
}

impl PerConn {
    fn fds(self) -> u64 {
        1 + u64::from(self.embedded) + u64::from(self.paced)
    }

    fn why(self) -> String {
        let mut parts = vec!["its socket"];
        if self.embedded {
            parts.push("the embedded server's end");
        }
        if self.paced {
            parts.push("a pacing timer");
        }
        format!("{} per connection: {}", self.fds(), parts.join(", "))
    }
}

/// Descriptors a run of `connections` over `threads` threads needs.
pub fn needed(connections: usize, per: PerConn, threads: usize) -> u64 {
    connections as u64 * per.fds() + BASE + PER_THREAD * threads as u64
}

/// Raises the limit, then checks that `connections` fit; the error is the one line to show.
pub fn ensure(connections: usize, per: PerConn, threads: usize) -> Result<(), ConfigError> {
    match raise() {
        Some(limit) => check(limit, connections, per, threads),
        None => Ok(()),
    }
}

fn check(limit: u64, connections: usize, per: PerConn, threads: usize) -> Result<(), ConfigError> {
    let need = needed(connections, per, threads);
    if need <= limit {
        return Ok(());
    }
    let rest = needed(0, per, threads);
    let fits = limit.saturating_sub(rest) / per.fds();
    Err(ConfigError(format!(
        "-c {connections} needs about {need} open files ({}; {rest} more for the process), but \
         the limit is {limit} even at the hard limit: raise the hard limit (`ulimit -Hn {}` as \
         root, or LimitNOFILE= for a service) or use at most -c {fits}",
        per.why(),
        need.next_power_of_two(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_both_ends_and_refuses_what_does_not_fit() {
        let plain = PerConn {
            embedded: false,
            paced: false,
        };
        let embedded = PerConn {
            embedded: true,
            paced: false,
        };
        let both = PerConn {
            embedded: true,
            paced: true,
        };
        assert_eq!(needed(1000, embedded, 2), 2000 + BASE + 2 * PER_THREAD);
        assert_eq!(needed(1000, both, 2), 3000 + BASE + 2 * PER_THREAD);
        assert!(check(4096, 2000, plain, 2).is_ok());
        let e = check(1024, 2000, embedded, 2).unwrap_err();
        assert!(e.contains("-c 2000 needs about 4072 open files"), "{e}");
        assert!(e.contains("2 per connection"), "{e}");
        assert!(e.contains("the limit is 1024"), "{e}");
        assert!(e.contains("ulimit -Hn 4096"), "{e}");
        // what the message offers must itself fit
        assert!(e.contains("at most -c 476"), "{e}");
        assert!(check(1024, 476, embedded, 2).is_ok());
        assert!(check(1024, 477, embedded, 2).is_err());
    }

    #[test]
    fn raise_lifts_the_soft_limit_to_the_hard_one() {
        let limit = raise().expect("readable");
        let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(lim.current, lim.maximum);
        assert_eq!(Some(limit), lim.current.or(Some(u64::MAX)));
    }
}
