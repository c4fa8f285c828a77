//! One worker = one OS thread with its own current_thread runtime, its connections and its
//! recorder. `drive` is the only request loop: stop condition x pacer x target are composed
//! here, never copied per combination.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::sleep_until;

use crate::group::{Group, Sent as Slot, Step};
use crate::keys::KeySpace;
use crate::mix::InsertSeq;
use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::pacer::Pacer;
use crate::plan::{Plan, Share};
use crate::proto::codec::{Request, Tally};
use crate::proto::target::{Conn, Target};
use crate::recorder::{Recorder, Snapshot};

/// The outcome of one worker's connect phase.
#[derive(Debug, Default)]
pub struct Connected {
    pub ok: usize,
    pub failed: usize,
    /// The first failure's message (the others are retried in the run and counted there).
    pub first_error: Option<String>,
}

/// What every worker of one run shares, read-only.
pub struct Ctx<T> {
    pub target: Arc<T>,
    pub plan: Plan,
    pub keys: KeySpace,
    /// Where inserts take their keys.
    pub inserts: InsertSeq,
    pub start: Instant,
    /// `start` on CLOCK_MONOTONIC, for the precise pacing timer.
    pub start_mono_ns: u64,
    /// Requests sent before this (ns since start) are warm-up: completed but not counted.
    pub warm_end_ns: u64,
    /// No request is sent at or after this (duration runs).
    pub end_ns: Option<u64>,
    /// The run's live counters, a block per thread (what a scrape reads).
    pub cells: Arc<crate::cells::Cells>,
}

impl<T> Ctx<T> {
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    pub fn at(&self, ns: u64) -> tokio::time::Instant {
        (self.start + Duration::from_nanos(ns)).into()
    }
}

/// CPU time of the calling thread, nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// (busy, elapsed) ns of this thread since the clock started: busy is the time its runtime
/// was not parked (see idle.rs); `idle_from` the idle time it had then.
fn busy<T>(ctx: &Ctx<T>, idle_from: u64) -> (u64, u64) {
    let elapsed = ctx.now_ns();
    let idle = crate::idle::idle_ns().saturating_sub(idle_from);
    (elapsed.saturating_sub(idle), elapsed)
}

/// Starts the worker thread of `share`. It first opens its connections (the connect phase,
/// before the clock starts, as pgbench and sysbench do: the measured window holds lookups, not
/// connection set-up; at 1,000 PostgreSQL connections set-up takes seconds), says how many it
/// got on `ready`, then waits for the run's context on `go`. Snapshots go to `tx` every
/// interval and once at the end (`last = true`). A `true` on `stop` ends the thread at once,
/// abandoning requests in flight; after the thread's last snapshot it is the collector's word
/// that every worker has drained and the connections may close.
pub fn spawn<T: Target>(
    target: Arc<T>,
    share: Share,
    ready: mpsc::UnboundedSender<Connected>,
    go: watch::Receiver<Option<Arc<Ctx<T>>>>,
    tx: mpsc::UnboundedSender<Snapshot>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("loadgen-w{}", share.thread))
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .on_thread_park(crate::idle::on_park)
                .on_thread_unpark(crate::idle::on_unpark)
                .build()
                .expect("worker runtime");
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                // Connections are made here, on this thread's runtime, where they are used.
                // A stop (Ctrl-C, SIGTERM) abandons the connects still waiting.
                let connects =
                    futures_util::future::join_all((0..share.conns).map(|_| target.connect()));
                let results = tokio::select! {
                    r = connects => r,
                    _ = wait_true(stop.clone()) => return,
                };
                let mut report = Connected::default();
                let conns: Vec<Option<T::Conn>> = results
                    .into_iter()
                    .map(|r| match r {
                        Ok(c) => {
                            report.ok += 1;
                            Some(c)
                        }
                        Err(e) => {
                            report.failed += 1;
                            report.first_error.get_or_insert(e.message);
                            None
                        }
                    })
                    .collect();
                let _ = ready.send(report);
                if let Some(ctx) = wait_for_start(go, stop.clone()).await {
                    thread_main(ctx, share, conns, tx, stop).await;
                }
            });
        })
}

/// Resolves once `stop` holds true (without marking the change seen for other clones); never,
/// if the sender is gone first.
pub async fn wait_true(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The run's context once the collector has started the clock; None when stopped first.
async fn wait_for_start<T>(
    mut go: watch::Receiver<Option<Arc<Ctx<T>>>>,
    mut stop: watch::Receiver<bool>,
) -> Option<Arc<Ctx<T>>> {
    loop {
        if let Some(ctx) = go.borrow_and_update().clone() {
            return Some(ctx);
        }
        if *stop.borrow_and_update() {
            return None;
        }
        tokio::select! {
            r = go.changed() => r.ok()?,
            r = stop.changed() => r.ok()?,
        }
    }
}

async fn thread_main<T: Target>(
    ctx: Arc<Ctx<T>>,
    share: Share,
    conns: Vec<Option<T::Conn>>,
    tx: mpsc::UnboundedSender<Snapshot>,
    mut stop: watch::Receiver<bool>,
) {
    let rec = Rc::new(RefCell::new(
        Recorder::new(share.thread, !ctx.plan.mix.read_only()).with_cells(ctx.cells.clone()),
    ));
    let mut set = JoinSet::new();
    // With one connection on the thread there is no other reply to wait for.
    let together = share.conns > 1;
    for (conn, first) in (share.first_conn..).zip(conns) {
        set.spawn_local(drive(ctx.clone(), conn, rec.clone(), first, together));
    }
    let interval = ctx.plan.interval.as_nanos() as u64;
    let mut tick = 1u64;
    let idle_from = crate::idle::idle_ns();
    // Requests still in flight at the end get up to one timeout to finish, then are abandoned.
    let timeouts = ctx.plan.timeouts();
    let hard_end = ctx.end_ns.map(|e| e + timeouts.drain.as_nanos() as u64);
    let far = ctx.now_ns() + 10 * 365 * 86_400 * 1_000_000_000;
    let mut finished = Vec::new();
    loop {
        tokio::select! {
            _ = sleep_until(ctx.at(tick * interval)) => {
                let mut s = rec.borrow_mut().take(thread_cpu_ns(), false);
                s.busy = busy(&ctx, idle_from);
                let _ = tx.send(s);
                tick += 1;
            }
            r = set.join_next() => match r {
                None => break,
                Some(Ok(Some(conn))) => finished.push(conn),
                Some(_) => {}
            },
            _ = stop.changed() => break,
            _ = sleep_until(ctx.at(hard_end.unwrap_or(far))) => break,
        }
    }
    set.abort_all();
    let mut s = rec.borrow_mut().take(thread_cpu_ns(), true);
    s.ticks = crate::cpu::thread_ticks();
    s.busy = busy(&ctx, idle_from);
    let _ = tx.send(s);
    // Connections that finished stay open until every worker has drained (the collector then
    // says stop): closing one ends its server process (a PostgreSQL backend exits) while other
    // connections still wait for their last replies, which showed as millisecond tail latencies
    // in a run's last interval. Bounded by one timeout in case the collector is gone.
    if !finished.is_empty() {
        let _ = tokio::time::timeout(timeouts.hold, wait_true(stop)).await;
    }
    drop(finished);
}

/// The request loop of one connection: fill the window up to `--pipeline` (as the pacer allows),
/// take one reply, repeat; replace the connection when it breaks; stop on time or quota.
/// Returns the connection it ended with, for the caller to close.
///
/// In a closed loop the requests queued after a reply go out only once every connection of
/// this thread whose reply is ready has had its turn (`yield_now` runs after the thread's
/// other ready tasks and the next poll of its sockets): the thread reads all its replies first
/// and writes the next requests after, together, so they reach the server in one burst that
/// it takes in one wake-up, as a libevent client's do, instead of one wake-up per request.
/// Not deferred: paced sends (due times), a thread's only connection (`together` false) and
/// pipelined ones, which batch on their own and whose server would idle while others read.
async fn drive<T: Target>(
    ctx: Arc<Ctx<T>>,
    index: usize,
    rec: Rc<RefCell<Recorder>>,
    first: Option<T::Conn>,
    together: bool,
) -> Option<T::Conn> {
    let plan = &ctx.plan;
    let conns = plan.connections as u64;
    let mut requests = Requests::new(&ctx.plan, &ctx.keys, ctx.inserts, index as u64);
    let mut pacer = Pacer::new(plan.rate, plan.arrival, index as u64, conns, plan.seed);
    let quota = plan.quota(index);
    let depth = plan.pipeline.min(ctx.target.max_pipeline()).max(1);
    let request_timeout = plan.timeouts().request;
    let timeout = request_timeout.as_nanos() as u64;
    let (backoff_min, backoff_max) = plan.reconnect_backoff;

    let mut window: VecDeque<Slot> = VecDeque::with_capacity(depth);
    let mut group = Group::new(plan.txn, plan.retries, depth);
    // `--batch`: the keys of each multi-get in flight, N per window place (request n's at
    // n % depth), reused so no request allocates.
    let batch = if plan.batch > 1 { plan.batch } else { 0 };
    let mut ring = vec![0u64; batch * depth];
    // The connection from the connect phase, if it succeeded; else the loop connects.
    let mut ever_connected = first.is_some();
    if ever_connected {
        rec.borrow_mut().connections += 1;
    }
    let mut conn: Option<T::Conn> = first;
    let mut n = 0u64; // requests sent (pacer index)
    let mut counted = 0u64; // counted requests sent or failed to send
    let mut backoff = backoff_min;
    // `--reconnect-every`: requests sent on this connection; a planned close is no reconnect
    // after an error.
    let mut on_conn = 0u64;
    let mut planned = false;
    // The timeout timer is re-armed lazily: it may fire early (then it is moved to the oldest
    // request's deadline), never late, so steady state costs no timer call per request.
    let mut timer = Box::pin(sleep_until(ctx.at(u64::MAX / 4)));
    // Paced runs wait for due times on a precise timer (see timer.rs); closed loops never wait.
    let mut pace_timer = if pacer.is_paced() {
        crate::timer::PreciseSleep::new().ok()
    } else {
        None
    };
    let mut timer_at = u64::MAX;
    let together = together && !pacer.is_paced() && depth == 1;
    // The clock read that timed the last reply also starts the next round: in a closed loop the
    // next request is sent within nanoseconds of it, and one clock read per request is saved.
    let mut last_done: Option<u64> = None;

    loop {
        let replied = last_done.is_some();
        let now = last_done.take().unwrap_or_else(|| ctx.now_ns());
        if let Some(c) = conn.as_mut().filter(|_| due_close(plan, on_conn, &window)) {
            finish(&ctx, c, &rec, group.as_mut(), &mut requests).await;
            conn = None;
            rec.borrow_mut().connections -= 1;
            planned = true;
        }
        let Some(c) = conn.as_mut() else {
            if ctx.end_ns.is_some_and(|e| now >= e) || quota.is_some_and(|q| counted >= q) {
                break;
            }
            let asked = ctx.now_ns();
            match ctx.target.connect().await {
                Ok(c) => {
                    conn = Some(c);
                    backoff = backoff_min;
                    on_conn = 0;
                    let mut r = rec.borrow_mut();
                    r.connect_took(ctx.now_ns() - asked);
                    r.connections += 1;
                    if ever_connected && !planned {
                        r.reconnected();
                    }
                    planned = false;
                    ever_connected = true;
                }
                Err(e) => {
                    // A failed connect is a request that could not be sent: it is counted (and
                    // uses quota), so `-n` runs end even when the server stays down.
                    let warm = now < ctx.warm_end_ns;
                    rec.borrow_mut()
                        .record_error(warm, ErrorKind::Connect, &e.message);
                    if !warm {
                        counted += 1;
                    }
                    let wake =
                        (now + backoff.as_nanos() as u64).min(ctx.end_ns.unwrap_or(u64::MAX));
                    sleep_until(ctx.at(wake)).await;
                    backoff = (backoff * 2).min(backoff_max);
                }
            }
            continue;
        };

        // Fill the window: a transaction sent again first (it was counted when first sent).
        let mut wait_for: Option<u64> = None;
        let mut now = now;
        let before = window.len();
        while window.len() < depth {
            if let Some(slot) = group.as_mut().and_then(|g| g.again(&mut rec.borrow_mut())) {
                c.send(&slot.req);
                window.push_back(slot);
                continue;
            }
            if ctx.end_ns.is_some_and(|e| now >= e) || quota.is_some_and(|q| counted >= q) {
                break;
            }
            if plan.reconnect_every > 0 && on_conn >= plan.reconnect_every {
                break; // the window drains, then the connection is replaced
            }
            let due = match pacer.due_ns(n) {
                None => now,
                Some(d) if d > now => {
                    wait_for = Some(d);
                    break;
                }
                // Still owed from the warm-up once it is over: dropped, not sent, so the
                // measured window does not open behind the warm-up's queue.
                Some(d) if d < ctx.warm_end_ns && now >= ctx.warm_end_ns => {
                    let next = pacer.first_due_from(n, ctx.warm_end_ns);
                    rec.borrow_mut().warm_dropped += next - n;
                    n = next;
                    continue;
                }
                Some(d) => d,
            };
            let req = requests.next();
            let at = (n as usize % depth) * batch;
            match ring.get_mut(at..at + batch).filter(|k| !k.is_empty()) {
                None => c.send(&req),
                Some(keys) => {
                    keys[0] = req.key;
                    keys[1..].fill_with(|| requests.keys.next_key());
                    c.send_batch(keys);
                }
            }
            let warm = due < ctx.warm_end_ns;
            window.push_back(Slot {
                req,
                due,
                sent: now,
                warm,
            });
            n += 1;
            on_conn += 1;
            counted += u64::from(!warm);
            if window.len() < depth && pacer.is_paced() {
                now = ctx.now_ns();
            }
        }
        rec.borrow_mut().in_flight += (window.len() - before) as u64;
        if together && replied && window.len() > before {
            tokio::task::yield_now().await;
        }

        let Some(&front) = window.front() else {
            match wait_for {
                Some(d) => {
                    let d = d.min(ctx.end_ns.unwrap_or(u64::MAX));
                    match pace_timer.as_mut() {
                        Some(t) => t.until(ctx.start_mono_ns + d).await,
                        None => sleep_until(ctx.at(d)).await,
                    }
                    continue;
                }
                None => break, // time or quota reached, nothing in flight
            }
        };

        // Requests are sent in order and answered in order: the oldest is request n - len.
        let front_at = ((n - window.len() as u64) as usize % depth) * batch;
        let deadline = front.sent + timeout;
        if timer_at > deadline {
            timer_at = deadline;
            timer.as_mut().reset(ctx.at(deadline));
        }
        let result = tokio::select! {
            biased;
            r = receive(c, &front.req, &ring[front_at..front_at + batch]) => Some(r),
            _ = &mut timer => {
                timer_at = u64::MAX;
                if ctx.now_ns() < deadline {
                    continue; // fired for an older request: re-arm for this one
                }
                None
            }
            _ = pace(&mut pace_timer, &ctx, wait_for.unwrap_or(0)), if wait_for.is_some() => continue,
        };
        let done = ctx.now_ns();
        if matches!(result, Some(Ok(_))) {
            last_done = Some(done);
        }
        let mut r = rec.borrow_mut();
        let result = result.map(|x| {
            x.map(|(outcome, tally)| {
                if batch > 0 {
                    r.keys(front.warm, tally);
                }
                outcome
            })
        });
        let replies = Replies {
            window: &mut window,
            requests: &mut requests,
            group: group.as_mut(),
        };
        if !replies.answer(&mut r, done, result, request_timeout) {
            r.connections -= 1;
            conn = None;
            timer_at = u64::MAX;
        }
    }
    if let Some(c) = conn.as_mut() {
        finish(&ctx, c, &rec, group.as_mut(), &mut requests).await;
        // A reply after the last one is answered: the server was out of step all along.
        if let Err(e) = c.settle(request_timeout.min(SETTLE)).await {
            rec.borrow_mut().record_error(false, e.kind, &e.message);
        }
        rec.borrow_mut().connections -= 1;
    }
    // What the schedule still owed when the window closed (a run cut short by its quota owes
    // nothing).
    if let (Some(end), true) = (ctx.end_ns, !quota.is_some_and(|q| counted >= q)) {
        rec.borrow_mut().backlog += pacer.first_due_from(n, end) - n;
    }
    conn
}

/// `--reconnect-every`: the connection has sent its N requests and every one is answered.
fn due_close(plan: &crate::plan::Plan, on_conn: u64, window: &VecDeque<Slot>) -> bool {
    plan.reconnect_every > 0 && on_conn >= plan.reconnect_every && window.is_empty()
}

/// What a reply to the oldest request in flight changes.
struct Replies<'a> {
    window: &'a mut VecDeque<Slot>,
    requests: &'a mut Requests,
    group: Option<&'a mut Group>,
}

impl Replies<'_> {
    /// Counts the reply to the oldest request in flight (None: its timeout); false when the
    /// connection is lost, with every request in flight on it.
    fn answer(
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

/// The reply to the oldest request: a one-key request's, or with `--batch` (`keys` not empty)
/// the multi-get's, with its tally per key.
async fn receive<C: Conn>(
    c: &mut C,
    req: &Request,
    keys: &[u64],
) -> Result<(Outcome, Tally), LookupError> {
    match keys.is_empty() {
        true => c.recv(req).await.map(|o| (o, Tally::default())),
        false => c.recv_batch(keys).await,
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

/// Waits for a due time, on the precise timer when there is one.
async fn pace<T>(timer: &mut Option<crate::timer::PreciseSleep>, ctx: &Ctx<T>, due_ns: u64) {
    match timer.as_mut() {
        Some(t) => t.until(ctx.start_mono_ns + due_ns).await,
        None => sleep_until(ctx.at(due_ns)).await,
    }
}

mod requests;
use requests::Requests;

#[cfg(test)]
mod tests;
