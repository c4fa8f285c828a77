//! One connection's stream of requests: ops, keys and versions, and what `--verify` expects
//! each read to find after this connection's own writes.

use std::collections::{HashMap, VecDeque};

use crate::dataset::{TsvRow, ANY_VERSION};
use crate::keys::{KeyGen, KeySpace, Rng};
use crate::mix::{InsertSeq, Mix, Op};
use crate::outcome::Outcome;
use crate::plan::Plan;
use crate::proto::codec::Request;
use crate::value_size::ValueSize;

/// One connection's requests: the op of each (`--mix`), its key (inserts from the insert
/// sequence, the others from `--dist`) and version, and with `--verify` and writes the version
/// this connection last wrote per key, which its later reads must find (read-your-writes).
pub(super) struct Requests {
    /// None: a read-only mix, which draws nothing per request.
    mix: Option<(Mix, Rng)>,
    pub(super) keys: KeyGen,
    inserts: InsertSeq,
    conn: u64,
    conns: u64,
    inserted: u64,
    version: u64,
    written: Option<HashMap<u64, u64>>,
    /// With `--verify` and `--txn N`: the keys of the last N writes, a superset of the open
    /// transaction's. A failed write rolls its whole group back, so all of them are unsure.
    group: Option<VecDeque<u64>>,
    txn: usize,
    /// `--ttl` of every write.
    ttl: u32,
    /// `--value-size` of each write, drawn from its own stream.
    sizes: Option<(ValueSize, Rng)>,
}

impl Requests {
    pub(super) fn new(plan: &Plan, keys: &KeySpace, inserts: InsertSeq, conn: u64) -> Requests {
        let conns = plan.connections as u64;
        let writes = !plan.mix.read_only();
        Requests {
            mix: writes.then(|| {
                let seed = plan.seed ^ 0x6D69_7800 ^ conn.wrapping_mul(0xD6E8_FEB8_6659_FD93);
                (plan.mix.clone(), Rng::new(seed))
            }),
            keys: keys.stream(plan.seed, conn, conns),
            inserts,
            conn,
            conns,
            inserted: 0,
            version: 0,
            written: (writes && plan.verify).then(HashMap::new),
            group: (writes && plan.verify && plan.txn > 1)
                .then(|| VecDeque::with_capacity(plan.txn)),
            txn: plan.txn,
            ttl: plan.ttl,
            sizes: plan.value_size.clone().map(|v| {
                let seed = plan.seed ^ 0x7369_7A65 ^ conn.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                (v, Rng::new(seed))
            }),
        }
    }

    #[inline]
    pub(super) fn next(&mut self) -> Request {
        let Some((mix, rng)) = &mut self.mix else {
            return Request::read(self.keys.next_key());
        };
        let op = mix.pick(rng);
        let key = if op == Op::Insert {
            self.inserted += 1;
            self.inserts.key(self.conn, self.conns, self.inserted - 1)
        } else if op.writes() && self.written.is_some() {
            let key = self.keys.next_key();
            self.own_key(key)
        } else {
            self.keys.next_key()
        };
        if !op.writes() {
            // A key this connection did not write may hold any version another one wrote.
            let version = self.written.as_ref().map_or(0, |w| match w.get(&key) {
                Some(&v) if v != Request::GONE && v & MAYBE != 0 => ANY_VERSION,
                Some(&v) => v,
                None => ANY_VERSION,
            });
            return Request {
                op,
                key,
                version,
                ttl: 0,
                size: 0,
            };
        }
        self.version += 1;
        let version = self.version;
        if let Some(g) = self.group.as_mut() {
            if g.len() == self.txn {
                g.pop_front();
            }
            g.push_back(key);
        }
        if let Some(w) = self.written.as_mut() {
            let after = match (op, w.get(&key).copied()) {
                (Op::Delete, _) => Request::GONE,
                (Op::Update, Some(Request::GONE)) => Request::GONE,
                (Op::Update, Some(v)) if v & MAYBE == 0 => version,
                // Whether there is a row to update is learnt from the reply (`settled`).
                (Op::Update, _) => version | MAYBE,
                _ => version,
            };
            w.insert(key, after);
        }
        let size = match (&mut self.sizes, op) {
            (Some(_), Op::Delete) | (None, _) => 0,
            (Some((sizes, rng)), _) => {
                let size = sizes.pick(rng);
                // With --verify a value must hold its row (`dataset::write_value`).
                match self.written.is_some() {
                    true => size.max(TsvRow::new(key, version).as_bytes().len() as u32 + 1),
                    false => size,
                }
            }
        };
        Request {
            op,
            key,
            version,
            ttl: self.ttl,
            size,
        }
    }

    /// A write's reply: an update of a row this connection knew nothing of tells whether the
    /// row was there (unless a later write of the key was sent meanwhile).
    pub(super) fn settled(&mut self, req: &Request, outcome: Outcome) {
        if let (Op::Update, Some(w)) = (req.op, self.written.as_mut()) {
            if let Some(v) = w.get_mut(&req.key) {
                if *v == req.version | MAYBE {
                    *v = match outcome {
                        Outcome::Hit => req.version,
                        Outcome::Miss => Request::GONE,
                    };
                }
            }
        }
    }

    /// With `--verify`, connection i of n writes only keys i, i+n, ... of the range (the one
    /// nearest `key`), so no other connection changes a row this one must read back as it wrote.
    pub(super) fn own_key(&self, key: u64) -> u64 {
        let (lo, hi) = (self.keys.space().lo, self.keys.space().hi);
        let slot = (key - lo) / self.conns * self.conns + self.conn;
        match lo.checked_add(slot) {
            Some(k) if k <= hi => k,
            // past the end: the last key of this connection's class below it
            _ => lo + slot.saturating_sub(self.conns).min(hi - lo),
        }
    }

    /// A request failed: what its key holds now is unknown if it wrote, and with `--txn` so is
    /// what every key of its transaction holds (a failed read rolls it back too).
    pub(super) fn unsure(&mut self, req: &Request) {
        if let (true, Some(w)) = (req.op.writes(), self.written.as_mut()) {
            w.insert(req.key, ANY_VERSION);
        }
        self.unsure_group();
    }

    /// With `--verify --txn`: the open transaction failed, so what each of its keys holds is
    /// unknown (the keys of the last N writes, a superset).
    pub(super) fn unsure_group(&mut self) {
        if let Some(w) = self.written.as_mut() {
            for &key in self.group.iter().flatten() {
                w.insert(key, ANY_VERSION);
            }
        }
    }
}

/// Marks a version an update wrote to a row that may not exist: reads take any version or none.
const MAYBE: u64 = 1 << 62;
