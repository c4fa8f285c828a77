//! Every time bound of a run, derived from `--timeout` in one place. Targets take theirs from
//! `Plan::timeouts` when they are built; the worker and the preflight read the same value.

use std::time::Duration;

/// `loadgen prepare` has no `--timeout`: its connections get this.
pub const PREPARE_CONNECT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// A request with no reply after this is a timeout error, and its connection is replaced.
    pub request: Duration,
    /// Opening a connection: the TCP connect, and each step of a handshake (greeting, auth,
    /// open index), so the message can name the step that hung.
    pub connect: Duration,
    /// A whole handshake of several steps: longer than any one step, so it never races them.
    pub setup: Duration,
    /// The preflight's backstop around a target's own bounds: it must not race them either.
    pub preflight: Duration,
    /// After the end of a timed run, requests in flight get this long to finish.
    pub drain: Duration,
    /// A worker keeps its finished connections open this long at most while the others drain.
    pub hold: Duration,
}

impl Timeouts {
    /// The bounds that follow from `--timeout`.
    pub fn new(timeout: Duration) -> Timeouts {
        let setup = timeout * 2;
        Timeouts {
            request: timeout,
            connect: timeout,
            setup,
            preflight: setup + Duration::from_secs(1),
            drain: timeout + Duration::from_millis(100),
            hold: timeout + Duration::from_secs(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outer_bound_outlasts_the_steps_inside_it() {
        let t = Timeouts::new(Duration::from_millis(300));
        assert_eq!(t.request, t.connect);
        assert!(t.setup > t.connect);
        assert!(t.preflight > t.setup);
        assert!(t.drain > t.request && t.hold > t.request);
    }
}
