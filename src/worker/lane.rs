//! One connection's place in the request loop: what it has sent and has in flight, and the
//! three things a round of `drive` does with it: connect, fill the window, take a reply.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::sleep_until;

use super::ctx::Ctx;
use super::replies::Replies;
use super::requests::Requests;
use super::traced::Traced;
use crate::dataset::TsvRow;
use crate::group::{Group, Sent as Slot};
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::pacer::Pacer;
use crate::proto::codec::Request;
use crate::proto::codec::Tally;
use crate::proto::target::{Conn, Target};
use crate::recorder::Recorder;
use crate::trace::record::Recorded;

/// When a connection's next request goes out.
enum Due {
    At(u64),
    Wait(u64),
    Dropped,
    End,
}

/// The state `drive` keeps for one connection between rounds (the connection itself is held
/// apart, so a reply can borrow it while the lane is read).
pub(super) struct Lane<T> {
    pub(super) ctx: Arc<Ctx<T>>,
    rec: Rc<RefCell<Recorder>>,
    requests: Requests,
    pub(super) pacer: Pacer,
    quota: Option<u64>,
    /// Requests in flight at most (`--pipeline`, as the target allows).
    pub(super) depth: usize,
    pub(super) window: VecDeque<Slot>,
    group: Option<Group>,
    /// Keys per multi-get (`--batch`, `mget:N`; 0 without), and the keys of each one in
    /// flight, `batch` per window place (see `placed`), reused so no request allocates.
    /// `every`: with `--batch` every request is one, else only `mget` requests.
    batch: usize,
    every: bool,
    ring: Vec<u64>,
    ever_connected: bool,
    /// Requests sent (the pacer's index).
    n: u64,
    /// Requests put in the window: request k's keys are at window place k % depth. Not `n`,
    /// which also counts requests dropped after the warm-up, never sent.
    placed: u64,
    /// Counted requests sent or failed to send (what the quota counts).
    counted: u64,
    backoff: Duration,
    pub(super) request_timeout: Duration,
    /// Requests this connection may still send before it is closed and opened again
    /// (`--reconnect-every`; u64::MAX without).
    left: u64,
    /// The connection was closed by plan, not lost: opening the next is no reconnect.
    planned: bool,
    /// `--trace`: this connection's share of the replay.
    trace: Option<Traced>,
    /// The connection's number in the run (a recorded trace's client_id).
    index: usize,
}

impl<T: Target> Lane<T> {
    pub(super) fn new(ctx: Arc<Ctx<T>>, index: usize, rec: Rc<RefCell<Recorder>>) -> Self {
        let plan = &ctx.plan;
        let depth = plan.pipeline.min(ctx.target.caps().pipeline).max(1);
        let batch = plan.multi_get();
        Lane {
            requests: Requests::new(plan, &ctx.keys, ctx.inserts, index as u64),
            pacer: Pacer::new(
                plan.rate,
                plan.arrival,
                index as u64,
                plan.connections as u64,
                plan.seed,
            ),
            quota: plan.quota(index),
            depth,
            window: VecDeque::with_capacity(depth),
            group: Group::new(plan.txn, plan.retries, depth),
            batch,
            every: plan.batch > 1,
            ring: vec![0u64; batch * depth],
            ever_connected: false,
            n: 0,
            placed: 0,
            counted: 0,
            backoff: plan.reconnect_backoff.0,
            request_timeout: plan.timeouts().request,
            left: u64::MAX,
            planned: false,
            trace: ctx
                .feed
                .clone()
                .map(|f| Traced::new(f, depth, ctx.target.caps().named_keys, plan.keys)),
            index,
            rec,
            ctx,
        }
    }

    /// Time or quota reached: nothing more is sent.
    #[inline]
    pub(super) fn over(&self, now: u64) -> bool {
        self.ctx.end_ns().is_some_and(|e| now >= e)
            || self.quota.is_some_and(|q| self.counted >= q)
            || self.trace.as_ref().is_some_and(|t| t.ended)
    }

    /// A connection was opened (in the connect phase or by the loop); a second one is a
    /// reconnect.
    pub(super) fn connected(&mut self) {
        self.backoff = self.ctx.plan.reconnect_backoff.0;
        self.left = self.ctx.plan.reconnect_every.unwrap_or(u64::MAX);
        let mut r = self.rec.borrow_mut();
        r.connections += 1;
        if self.ever_connected && !self.planned {
            r.reconnected();
        }
        self.ever_connected = true;
        self.planned = false;
    }

    /// `--reconnect-every`: this connection sent its share and has nothing in flight.
    #[inline]
    pub(super) fn spent(&self) -> bool {
        self.left == 0 && self.window.is_empty()
    }

    /// The caller closes a spent connection: the next connect is planned, not a reconnect.
    pub(super) fn hung_up(&mut self) {
        self.planned = true;
        self.rec.borrow_mut().connections -= 1;
    }

    /// Opens a connection; on failure counts it and backs off (doubling, capped) first.
    pub(super) async fn connect(&mut self, now: u64) -> Option<T::Conn> {
        match self.ctx.target.connect().await {
            Ok(c) => {
                if self.ctx.plan.reconnect_every.is_some() && now >= self.ctx.warm_end_ns {
                    let took = self.ctx.now_ns().saturating_sub(now);
                    self.rec.borrow_mut().connect_took(took);
                }
                self.connected();
                Some(c)
            }
            Err(e) => {
                // A failed connect is a request that could not be sent: it is counted (and
                // uses quota), so `-n` runs end even when the server stays down.
                let warm = now < self.ctx.warm_end_ns;
                self.rec
                    .borrow_mut()
                    .record_error(warm, ErrorKind::Connect, &e.message);
                self.counted += u64::from(!warm);
                let end = self.ctx.end_ns().unwrap_or(u64::MAX);
                let wake = (now + self.backoff.as_nanos() as u64).min(end);
                sleep_until(self.ctx.at(wake)).await;
                self.backoff = (self.backoff * 2).min(self.ctx.plan.reconnect_backoff.1);
                None
            }
        }
    }

    /// Fills the window up to `depth`, as the pacer allows: a transaction sent again first
    /// (it was counted when first sent). Returns the due time it stopped at (None: time or
    /// quota reached, or the window is full) and whether it sent anything.
    #[inline]
    pub(super) fn fill(&mut self, c: &mut T::Conn, mut now: u64) -> (Option<u64>, bool) {
        let before = self.window.len();
        let mut wait_for = None;
        while self.window.len() < self.depth {
            let again = self.group.as_mut();
            if let Some(slot) = again.and_then(|g| g.again(&mut self.rec.borrow_mut())) {
                c.send(&slot.req);
                self.window.push_back(slot);
                self.placed += 1;
                continue;
            }
            if self.ctx.end_ns().is_some_and(|e| now >= e)
                || self.quota.is_some_and(|q| self.counted >= q)
                || self.left == 0
            {
                break;
            }
            let slot = self.placed as usize % self.depth;
            let due = match self.due(now, slot) {
                Due::At(d) => d,
                Due::Wait(d) => {
                    wait_for = Some(d);
                    break;
                }
                Due::Dropped => continue,
                Due::End => break,
            };
            let req = match self.trace.as_mut() {
                Some(t) => t.take().expect("peeked"),
                None => self.requests.next(),
            };
            let at = slot * self.batch;
            match (
                self.ring
                    .get_mut(at..at + self.batch)
                    .filter(|k| !k.is_empty() && (self.every || req.op == Op::Mget)),
                self.trace.as_ref().filter(|t| t.named),
            ) {
                (Some(keys), _) => {
                    keys[0] = req.key;
                    keys[1..].fill_with(|| self.requests.keys.next_key());
                    c.send_batch(keys);
                }
                (None, Some(t)) => c.send_named(&req, t.name(slot)),
                (None, None) => c.send(&req),
            }
            if self.ctx.record.is_some() {
                self.record(&req, slot, due);
            }
            let warm = due < self.ctx.warm_end_ns;
            self.window.push_back(Slot {
                req,
                due,
                sent: now,
                warm,
            });
            self.n += 1;
            self.placed += 1;
            self.counted += u64::from(!warm);
            self.left -= 1;
            if self.window.len() < self.depth && (self.pacer.is_paced() || self.trace.is_some()) {
                now = self.ctx.now_ns();
            }
        }
        let sent = self.window.len() - before;
        self.rec.borrow_mut().in_flight += sent as u64;
        (wait_for, sent > 0)
    }

    /// `--record-trace`: the request just sent, with its key as the target names it.
    #[cold]
    fn record(&mut self, req: &Request, slot: usize, due: u64) {
        let Some(rec) = &self.ctx.record else { return };
        let mut key = Vec::with_capacity(32);
        match self.trace.as_ref().filter(|t| t.named) {
            Some(t) => key.extend_from_slice(t.name(slot)),
            None => self.ctx.target.key_name(req.key, &mut key),
        }
        let value_size = match (req.op, req.size) {
            (Op::Read | Op::Delete, _) => 0,
            (_, 0) => TsvRow::new(req.key, req.version).as_bytes().len() as u32,
            (_, n) => n,
        };
        rec.write(&Recorded {
            sent_ns: due,
            key: &key,
            op: req.op,
            value_size,
            client: self.index as u32,
            ttl: req.ttl,
        });
    }

    /// When the next request is due (`now` in a closed loop): its pacer's time, or the trace's
    /// unless `-R` sets the pace; a request still owed from the warm-up once it is over is
    /// dropped, not sent, so the measured window does not open behind the warm-up's queue.
    #[inline]
    fn due(&mut self, now: u64, slot: usize) -> Due {
        let traced = match self.trace.as_mut() {
            Some(t) => match t.peek(slot) {
                None => return Due::End,
                Some((at, _)) => at,
            },
            None => None,
        };
        let due = match self.pacer.due_ns(self.n) {
            None => traced,
            paced => paced,
        };
        match due {
            None => Due::At(now),
            Some(d) if d > now => Due::Wait(d),
            Some(d) if d < self.ctx.warm_end_ns && now >= self.ctx.warm_end_ns => {
                if self.trace.as_mut().and_then(Traced::take).is_some() {
                    self.rec.borrow_mut().warm_dropped += 1;
                    self.n += 1;
                } else {
                    let next = self.pacer.first_due_from(self.n, self.ctx.warm_end_ns);
                    self.rec.borrow_mut().warm_dropped += next - self.n;
                    self.n = next;
                }
                Due::Dropped
            }
            Some(d) => Due::At(d),
        }
    }

    /// The keys of the oldest request in flight when it is a multi-get (else empty): requests
    /// are sent and answered in order, so it is the one placed len requests ago.
    #[inline]
    pub(super) fn front_keys(&self) -> &[u64] {
        let multi = self.every || self.window.front().is_some_and(|s| s.req.op == Op::Mget);
        let n = if multi { self.batch } else { 0 };
        let at = ((self.placed - self.window.len() as u64) as usize % self.depth) * self.batch;
        &self.ring[at..at + n]
    }

    /// Counts the reply to the oldest request in flight (None: its timeout) at `done`; false
    /// when the connection is lost, with every request in flight on it.
    #[inline]
    pub(super) fn take(
        &mut self,
        done: u64,
        result: Option<Result<(Outcome, Tally), LookupError>>,
    ) -> bool {
        let Some(warm) = self.window.front().map(|s| s.warm) else {
            return true;
        };
        let mut r = self.rec.borrow_mut();
        let result = result.map(|x| {
            x.map(|(outcome, tally)| {
                if self.batch > 0 {
                    r.keys(warm, tally);
                }
                outcome
            })
        });
        let replies = Replies {
            window: &mut self.window,
            requests: &mut self.requests,
            group: self.group.as_mut(),
        };
        let alive = replies.answer(&mut r, done, result, self.request_timeout);
        if !alive {
            r.connections -= 1;
        }
        alive
    }

    /// The end of the loop: the last transaction committed, replies too many listened for,
    /// the connection uncounted, and what the schedule still owed counted as backlog.
    pub(super) async fn close(&mut self, conn: Option<&mut T::Conn>) {
        if let Some(c) = conn {
            finish(
                &self.ctx,
                c,
                &self.rec,
                self.group.as_mut(),
                &mut self.requests,
            )
            .await;
            // A reply after the last one is answered: the server was out of step all along.
            if let Err(e) = c.settle(self.request_timeout.min(SETTLE)).await {
                self.rec
                    .borrow_mut()
                    .record_error(false, e.kind, &e.message);
            }
            self.rec.borrow_mut().connections -= 1;
        }
        // A run cut short by its quota owes nothing.
        if let (Some(end), false) = (
            self.ctx.end_ns(),
            self.quota.is_some_and(|q| self.counted >= q),
        ) {
            self.rec.borrow_mut().backlog += self.pacer.first_due_from(self.n, end) - self.n;
        }
    }
}

/// `--txn`: the connection's last transaction, short of its N writes when the run ends, is
/// committed (within `--timeout`), so the writes counted are the writes applied.
async fn finish<T: Target>(
    ctx: &Ctx<T>,
    c: &mut T::Conn,
    rec: &RefCell<Recorder>,
    group: Option<&mut Group>,
    requests: &mut Requests,
) {
    if ctx.plan.txn < 2 {
        return;
    }
    let timeout = ctx.plan.timeouts().request;
    let result = match tokio::time::timeout(timeout, c.commit()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            rec.borrow_mut().sample(e.kind, &e.message);
            Err(e.kind)
        }
        Err(_) => Err(ErrorKind::Timeout),
    };
    if result.is_err() {
        requests.unsure_group();
    }
    if let Some(g) = group {
        g.ended(&mut rec.borrow_mut(), ctx.now_ns(), result);
    }
}

/// How long a connection listens for replies too many once its last request is answered:
/// past Linux's 40 ms delayed ACK, which holds back a server's late reply under Nagle.
const SETTLE: Duration = Duration::from_millis(50);
