//! What a reply (or its timeout, or a broken connection) does to a connection's window.

use std::collections::VecDeque;
use std::time::Duration;

use super::requests::Requests;
use crate::group::{Group, Sent as Slot, Step};
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::recorder::Recorder;

/// What a reply to the oldest request in flight changes.
pub(super) struct Replies<'a> {
    pub(super) window: &'a mut VecDeque<Slot>,
    pub(super) requests: &'a mut Requests,
    pub(super) group: Option<&'a mut Group>,
}

impl Replies<'_> {
    /// Counts the reply to the oldest request in flight (None: its timeout); false when the
    /// connection is lost, with every request in flight on it.
    pub(super) fn answer(
        self,
        r: &mut Recorder,
        done: u64,
        result: Option<Result<Outcome, LookupError>>,
        request_timeout: Duration,
    ) -> bool {
        let Some(front) = self.window.front().copied() else {
            return true;
        };
        match result {
            Some(Ok(outcome)) => {
                self.window.pop_front();
                r.in_flight -= 1;
                match self.group {
                    Some(g) => {
                        g.reply(r, front, done, Ok(outcome));
                    }
                    None => r.record(front.warm, front.at(done), Ok(outcome)),
                }
                self.requests.settled(&front.req, outcome);
                true
            }
            Some(Err(e)) if !e.fatal => {
                self.window.pop_front();
                r.in_flight -= 1;
                let step = match self.group {
                    Some(g) => g.reply(r, front, done, Err(e.kind)),
                    None => {
                        r.record(front.warm, front.at(done), Err(e.kind));
                        Step::Failed
                    }
                };
                if !matches!(step, Step::Retry) {
                    self.requests.unsure(&front.req);
                    r.sample(e.kind, &e.message);
                }
                true
            }
            failure => {
                // Timeout or broken connection: every request in flight on it is lost, and
                // the open transaction with it.
                let (kind, message) = match failure {
                    Some(Err(e)) => (e.kind, e.message),
                    _ => (
                        ErrorKind::Timeout,
                        format!("no reply within {request_timeout:?}"),
                    ),
                };
                r.sample(kind, &message);
                if let Some(g) = self.group {
                    g.lost(r, done, kind);
                }
                for s in self.window.drain(..) {
                    r.record(s.warm, s.at(done), Err(kind));
                    if s.req.op.writes() {
                        r.unsure(s.warm, s.req.op);
                    }
                    self.requests.unsure(&s.req);
                    r.in_flight -= 1;
                }
                false
            }
        }
    }
}
