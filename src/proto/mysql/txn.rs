//! `--txn N` on the wire driver: a connection's writes grouped N at a time into one
//! transaction, BEGIN before a group's first write and COMMIT after its Nth, sent as COM_QUERY
//! in the same batch as the write (so they pipeline) and answered inside the codec: their OK
//! replies are taken with the write's own, and their time goes into its latency. Reads ride
//! along inside the open group. Any failure in the open group ends it, as on PostgreSQL (a
//! deadlock, 1213, makes InnoDB roll the whole transaction back; a lock wait timeout, 1205, or
//! another error only the statement): the connection's next write sends ROLLBACK and BEGIN, a
//! fresh transaction, so a group either commits all its writes or none (the request loop
//! counts them by that, `group.rs`). At the end of a run the open group is committed (`commit`).

use std::collections::VecDeque;

use crate::outcome::ErrorKind;

/// Commands sent with a request, as flags.
pub const ROLLBACK: u8 = 1;
pub const BEGIN: u8 = 2;
pub const COMMIT: u8 = 4;

const COM_QUERY: u8 = 0x03;

/// The grouping state of one connection.
pub struct Groups {
    size: u32,
    /// Writes encoded in the open group (0: none open).
    open: u32,
    /// The number of the open group, or of the next one.
    group: u32,
    /// A failure ended the open group: the next write rolls back and begins afresh.
    restart: bool,
    /// Each request encoded and not yet answered, oldest first: its command flags and group.
    pending: VecDeque<(u8, u32)>,
}

impl Groups {
    /// Groups of `size` writes; None for 1, autocommit (nothing to track).
    pub fn new(size: usize) -> Option<Groups> {
        (size > 1).then(|| Groups {
            size: size as u32,
            open: 0,
            group: 0,
            restart: false,
            pending: VecDeque::with_capacity(64),
        })
    }

    /// Appends one request, `body` its own packet, with the commands that go around it.
    pub fn encode(&mut self, write: bool, out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
        let mut flags = 0;
        if write && self.restart {
            flags |= ROLLBACK;
            query(out, b"ROLLBACK");
            self.restart = false;
            self.open = 0;
            self.group += 1;
        }
        if write && self.open == 0 {
            flags |= BEGIN;
            query(out, b"BEGIN");
        }
        body(out);
        let group = self.group;
        if write {
            self.open += 1;
            if self.open == self.size {
                flags |= COMMIT;
                query(out, b"COMMIT");
                self.open = 0;
                self.group += 1;
            }
        }
        self.pending.push_back((flags, group));
    }

    /// The command flags of the oldest request not yet answered (none for a request this
    /// did not encode: unit tests).
    pub fn front(&self) -> (u8, u32) {
        self.pending.front().copied().unwrap_or((0, u32::MAX))
    }

    /// The oldest request is answered, with an error of `failed` kind or none; a failure in
    /// the open group ends it.
    pub fn answered(&mut self, failed: Option<ErrorKind>) {
        let (_, group) = self.front();
        self.pending.pop_front();
        if failed.is_some() && group == self.group && self.open > 0 {
            self.restart = true;
        }
    }

    /// Appends the COMMIT of the open group, short of its N writes (nothing in flight); false
    /// when none is open or it failed (the connection's close rolls it back).
    pub fn commit(&mut self, out: &mut Vec<u8>) -> bool {
        if self.open == 0 || self.restart {
            return false;
        }
        query(out, b"COMMIT");
        self.open = 0;
        self.group += 1;
        true
    }
}

/// The replies before the request's own: its ROLLBACK's and BEGIN's.
pub fn replies_before(flags: u8) -> u32 {
    (flags & (ROLLBACK | BEGIN)).count_ones()
}

/// A COM_QUERY of `sql`, sequence id 0.
fn query(out: &mut Vec<u8>, sql: &[u8]) {
    out.extend_from_slice(&(sql.len() as u32 + 1).to_le_bytes()[..3]);
    out.push(0);
    out.push(COM_QUERY);
    out.extend_from_slice(sql);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(g: &mut Groups, write: bool) -> Vec<u8> {
        let mut out = Vec::new();
        g.encode(write, &mut out, |o| o.push(b'.'));
        out
    }

    #[test]
    fn writes_are_grouped_and_reads_ride_along() {
        let mut g = Groups::new(2).unwrap();
        assert!(Groups::new(1).is_none());
        assert_eq!(send(&mut g, false), b".");
        assert_eq!(send(&mut g, true), b"\x06\0\0\0\x03BEGIN.");
        assert_eq!(send(&mut g, false), b".");
        assert_eq!(send(&mut g, true), b".\x07\0\0\0\x03COMMIT");
        assert_eq!(send(&mut g, true), b"\x06\0\0\0\x03BEGIN.");
        let flags: Vec<u8> = g.pending.iter().map(|p| p.0).collect();
        assert_eq!(flags, [0, BEGIN, 0, COMMIT, BEGIN]);
    }

    #[test]
    fn a_deadlock_in_the_open_group_starts_a_fresh_one() {
        let mut g = Groups::new(3).unwrap();
        send(&mut g, true);
        send(&mut g, true);
        g.answered(None);
        g.answered(Some(ErrorKind::Deadlock));
        let out = send(&mut g, true);
        assert_eq!(out, b"\x09\0\0\0\x03ROLLBACK\x06\0\0\0\x03BEGIN.");
        assert_eq!(g.front().0, ROLLBACK | BEGIN);
        assert_eq!(replies_before(g.front().0), 2);
        // A deadlock in a group already committed changes nothing.
        let mut g = Groups::new(2).unwrap();
        send(&mut g, true);
        send(&mut g, true);
        send(&mut g, true);
        g.answered(Some(ErrorKind::Deadlock));
        assert_eq!(send(&mut g, true), b".\x07\0\0\0\x03COMMIT");
    }

    #[test]
    fn any_failure_ends_the_group_and_a_short_one_commits_at_the_end() {
        let mut g = Groups::new(3).unwrap();
        send(&mut g, true);
        send(&mut g, false);
        g.answered(None);
        g.answered(Some(ErrorKind::Server)); // a failed read inside the group
        let mut out = Vec::new();
        assert!(!g.commit(&mut out), "a failed group is not committed");
        assert_eq!(
            send(&mut g, true),
            b"\x09\0\0\0\x03ROLLBACK\x06\0\0\0\x03BEGIN."
        );
        g.answered(None);
        assert!(g.commit(&mut out));
        assert_eq!(out, b"\x07\0\0\0\x03COMMIT");
        // Nothing open: nothing to commit, and the next write begins afresh.
        assert!(!g.commit(&mut out));
        assert_eq!(send(&mut g, true), b"\x06\0\0\0\x03BEGIN.");
    }
}
