//! A connection's open transaction as the request loop sees it (`--txn`, `--retries`), with one
//! request in flight: its writes are counted only when it commits, since one that fails rolls
//! back the writes answered before it; a deadlock or serialization failure sends them all again
//! on the same connection, up to `--retries` times, each keeping its first due time.
//! The drivers group writes the same way: N writes per transaction, counted from a fresh one
//! after any failure in it (`proto/postgres`, `proto/mysql/txn.rs`).

use std::collections::VecDeque;

use crate::outcome::{ErrorKind, Outcome};
use crate::proto::codec::Request;
use crate::recorder::Recorder;

/// One request of the open transaction: what was sent, when it was due and first sent.
#[derive(Clone, Copy)]
pub struct Sent {
    pub req: Request,
    pub due: u64,
    pub sent: u64,
    pub warm: bool,
}

impl Sent {
    /// (op, due, sent, done) for the recorder.
    pub fn at(&self, done: u64) -> (crate::mix::Op, u64, u64, u64) {
        (self.req.op, self.due, self.sent, done)
    }
}

/// A write answered inside the open transaction, waiting for its commit.
#[derive(Clone, Copy)]
struct Answered {
    at: Sent,
    done: u64,
    outcome: Outcome,
}

pub struct Group {
    /// Writes per transaction; 1 is autocommit.
    size: usize,
    /// `--retries`: times a transaction is sent again after a deadlock or serialization failure.
    retries: u32,
    /// Retries the open transaction has used.
    tries: u32,
    /// The open transaction's writes answered so far, oldest first.
    answered: Vec<Answered>,
    /// Requests to send again (a retry), oldest first.
    again: VecDeque<Sent>,
}

/// What a reply did to the open transaction.
pub enum Step {
    /// Counted (or kept until the commit): go on.
    Done,
    /// The transaction is sent again: its requests wait in `again`.
    Retry,
    /// The transaction failed for good: every write in it is in doubt for `--verify`.
    Failed,
}

impl Group {
    /// Tracks transactions when they need it: `--txn` above 1 or `--retries`, one request in
    /// flight (`depth`); None otherwise, and the request loop counts every reply at once.
    pub fn new(txn: usize, retries: u32, depth: usize) -> Option<Group> {
        (depth == 1 && (txn > 1 || retries > 0)).then(|| Group {
            size: txn,
            retries,
            tries: 0,
            answered: Vec::with_capacity(txn),
            again: VecDeque::with_capacity(txn),
        })
    }

    /// The next request to send again, if a retry is under way; counted in `rec`'s retries.
    #[inline]
    pub fn again(&mut self, rec: &mut Recorder) -> Option<Sent> {
        let at = self.again.pop_front()?;
        rec.retried(at.warm, at.req.op);
        Some(at)
    }

    /// Writes answered in the open transaction, not yet committed.
    pub fn open(&self) -> bool {
        !self.answered.is_empty()
    }

    /// `at` was answered at `done` with `result`; counts what is settled in `rec`.
    pub fn reply(
        &mut self,
        rec: &mut Recorder,
        at: Sent,
        done: u64,
        result: Result<Outcome, ErrorKind>,
    ) -> Step {
        let write = at.req.op.writes();
        match result {
            Ok(outcome) if write && self.size > 1 => {
                self.answered.push(Answered { at, done, outcome });
                if self.answered.len() >= self.size {
                    // This write's reply carried the commit.
                    self.committed(rec);
                }
                Step::Done
            }
            Ok(outcome) => {
                if write {
                    self.tries = 0;
                }
                rec.record(at.warm, (at.req.op, at.due, at.sent, done), Ok(outcome));
                Step::Done
            }
            Err(kind) if !write && !self.open() => {
                // A read outside a transaction: nothing to roll back or send again.
                rec.record(at.warm, (at.req.op, at.due, at.sent, done), Err(kind));
                Step::Done
            }
            Err(kind) if retryable(kind) && self.tries < self.retries => {
                // From its first write: the ones answered, this one, then those of an earlier
                // try not yet sent again.
                self.tries += 1;
                self.again.push_front(at);
                for a in self.answered.drain(..).rev() {
                    self.again.push_front(a.at);
                }
                Step::Retry
            }
            Err(kind) => {
                self.failed(rec, done, kind);
                rec.record(at.warm, (at.req.op, at.due, at.sent, done), Err(kind));
                Step::Failed
            }
        }
    }

    /// The connection was lost (or timed out): the open transaction is gone with it, its
    /// writes counted as `kind` at `done`, each in doubt.
    pub fn lost(&mut self, rec: &mut Recorder, done: u64, kind: ErrorKind) {
        for a in &self.answered {
            rec.unsure(a.at.warm, a.at.req.op);
        }
        self.failed(rec, done, kind);
    }

    /// The run ended with the open transaction short of its N writes, and its commit came to
    /// `result` (None: the connection could not send it).
    pub fn ended(&mut self, rec: &mut Recorder, done: u64, result: Result<(), ErrorKind>) {
        match result {
            Ok(()) => self.committed(rec),
            Err(kind) => self.failed(rec, done, kind),
        }
    }

    fn committed(&mut self, rec: &mut Recorder) {
        for a in self.answered.drain(..) {
            let at = a.at;
            rec.record(at.warm, (at.req.op, at.due, at.sent, a.done), Ok(a.outcome));
        }
        self.tries = 0;
    }

    /// The open transaction failed for good: its answered writes were rolled back with it.
    fn failed(&mut self, rec: &mut Recorder, done: u64, kind: ErrorKind) {
        for a in self.answered.drain(..) {
            let at = a.at;
            rec.record(at.warm, (at.req.op, at.due, at.sent, done), Err(kind));
        }
        // Retries not yet sent are failed with it.
        for at in self.again.drain(..) {
            rec.record(at.warm, (at.req.op, at.due, at.sent, done), Err(kind));
        }
        self.tries = 0;
    }
}

/// A failure that goes away when the transaction is sent again: a deadlock (PostgreSQL 40P01,
/// MySQL 1213, and a lock wait timeout, 1205) or a serialization failure (PostgreSQL 40001).
pub fn retryable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::Deadlock | ErrorKind::Serialization)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Op;

    fn write(key: u64) -> Sent {
        Sent {
            req: Request {
                op: Op::Update,
                key,
                version: key,
                ttl: 0,
                size: 0,
            },
            due: key * 10,
            sent: key * 10,
            warm: false,
        }
    }

    fn counts(rec: &Recorder) -> (u64, u64, u64) {
        let c = &rec.cur.counts;
        (c.hits, c.errors[ErrorKind::Deadlock.index()], c.retries)
    }

    #[test]
    fn writes_count_when_their_transaction_commits() {
        let mut rec = Recorder::new(0, true);
        let mut g = Group::new(3, 0, 1).unwrap();
        assert!(Group::new(1, 0, 1).is_none() && Group::new(3, 1, 8).is_none());
        g.reply(&mut rec, write(1), 11, Ok(Outcome::Hit));
        g.reply(&mut rec, write(2), 21, Ok(Outcome::Hit));
        assert_eq!(counts(&rec), (0, 0, 0));
        g.reply(&mut rec, write(3), 31, Ok(Outcome::Hit));
        assert_eq!(counts(&rec), (3, 0, 0));
        // A short last group: committed at the end, or failed with its commit.
        g.reply(&mut rec, write(4), 41, Ok(Outcome::Hit));
        g.ended(&mut rec, 50, Ok(()));
        assert_eq!(counts(&rec), (4, 0, 0));
        g.reply(&mut rec, write(5), 51, Ok(Outcome::Hit));
        g.ended(&mut rec, 60, Err(ErrorKind::Deadlock));
        assert_eq!(counts(&rec), (4, 1, 0));
    }

    #[test]
    fn a_deadlocked_transaction_is_sent_again_then_fails_for_good() {
        let mut rec = Recorder::new(0, true);
        let mut g = Group::new(3, 1, 1).unwrap();
        g.reply(&mut rec, write(1), 11, Ok(Outcome::Hit));
        let step = g.reply(&mut rec, write(2), 21, Err(ErrorKind::Deadlock));
        assert!(matches!(step, Step::Retry));
        assert_eq!(counts(&rec), (0, 0, 0));
        // Sent again in order, with their first due times, each counted as a retry.
        let again: Vec<(u64, u64)> = std::iter::from_fn(|| g.again(&mut rec))
            .map(|s| (s.req.key, s.due))
            .collect();
        assert_eq!(again, [(1, 10), (2, 20)]);
        assert_eq!(counts(&rec), (0, 0, 2));
        g.reply(&mut rec, write(1), 61, Ok(Outcome::Hit));
        let step = g.reply(&mut rec, write(2), 71, Err(ErrorKind::Deadlock));
        assert!(matches!(step, Step::Failed));
        assert_eq!(counts(&rec), (0, 2, 2));
        // Latency runs from the first due time.
        assert_eq!(
            rec.cur.latency.max(),
            rec.cur.latency.highest_equivalent(71 - 10)
        );
        // A write sent again that fails before the rest of its transaction is sent again
        // goes back in front of them; those never sent again count no retry.
        let mut g = Group::new(3, 2, 1).unwrap();
        let mut rec2 = Recorder::new(0, true);
        g.reply(&mut rec2, write(1), 11, Ok(Outcome::Hit));
        g.reply(&mut rec2, write(2), 21, Ok(Outcome::Hit));
        g.reply(&mut rec2, write(3), 31, Err(ErrorKind::Deadlock));
        let first = g.again(&mut rec2).unwrap();
        g.reply(&mut rec2, first, 41, Err(ErrorKind::Deadlock));
        let again: Vec<u64> = std::iter::from_fn(|| g.again(&mut rec2))
            .map(|s| s.req.key)
            .collect();
        assert_eq!(again, [1, 2, 3]);
        assert_eq!(counts(&rec2), (0, 0, 4));
        // A fresh transaction gets its retries again; other failures are not retried.
        g.reply(&mut rec, write(3), 81, Ok(Outcome::Hit));
        let step = g.reply(&mut rec, write(4), 91, Err(ErrorKind::Server));
        assert!(matches!(step, Step::Failed));
        assert_eq!(rec.cur.counts.errors[ErrorKind::Server.index()], 2);
    }
}
