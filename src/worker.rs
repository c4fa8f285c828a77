//! One worker = one OS thread with its own current_thread runtime, its connections and its
//! recorder. `drive` is the only request loop: stop condition x pacer x target are composed
//! here, never copied per combination.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::sleep_until;

use crate::outcome::{LookupError, Outcome};
use crate::plan::Share;
use crate::proto::codec::{Request, Tally};
use crate::proto::target::{Conn, Target};
use crate::recorder::{Recorder, Snapshot};
use crate::transport::Ticket;

/// The outcome of one worker's connect phase.
#[derive(Debug, Default)]
pub struct Connected {
    pub ok: usize,
    pub failed: usize,
    /// The first failure's message (the others are retried in the run and counted there).
    pub first_error: Option<String>,
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
    tickets: Vec<Ticket>,
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
                .build_local(tokio::runtime::LocalOptions::default())
                .expect("worker runtime");
            rt.block_on(async move {
                // Connections are made here, on this thread's runtime, where they are used.
                // A stop (Ctrl-C, SIGTERM) abandons the connects still waiting. Each holds its
                // ticket of the run's connect order (transport/turns.rs).
                let connects = futures_util::future::join_all(
                    tickets.into_iter().map(|t| t.hold(target.connect())),
                );
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
    let hard_end = ctx.end_ns().map(|e| e + timeouts.drain.as_nanos() as u64);
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
    let mut lane = Lane::new(ctx.clone(), index, rec);
    // The connection from the connect phase, if it succeeded; else the loop connects.
    let mut conn: Option<T::Conn> = first;
    if conn.is_some() {
        lane.connected();
    }
    let timeout = lane.request_timeout.as_nanos() as u64;
    // The timeout timer is re-armed lazily: it may fire early (then it is moved to the oldest
    // request's deadline), never late, so steady state costs no timer call per request.
    let mut timer = Box::pin(sleep_until(ctx.at(u64::MAX / 4)));
    let mut timer_at = u64::MAX;
    // Paced runs wait for due times on a precise timer (see timer.rs); closed loops never wait.
    let timed = lane.pacer.is_paced() || ctx.feed.is_some();
    let mut pace_timer = match timed {
        true => crate::timer::PreciseSleep::new().ok(),
        false => None,
    };
    let together = together && !timed && lane.depth == 1;
    // The clock read that timed the last reply also starts the next round: in a closed loop the
    // next request is sent within nanoseconds of it, and one clock read per request is saved.
    let mut last_done: Option<u64> = None;

    loop {
        let replied = last_done.is_some();
        let now = last_done.take().unwrap_or_else(|| ctx.now_ns());
        // `--reconnect-every`: closed once its share is answered, opened again below.
        if conn.is_some() && lane.spent() {
            conn = None;
            lane.hung_up();
            continue;
        }
        let Some(c) = conn.as_mut() else {
            if lane.over(now) {
                break;
            }
            conn = lane.connect(now).await;
            continue;
        };
        let (wait_for, sent) = lane.fill(c, now);
        if together && replied && sent {
            tokio::task::yield_now().await;
        }
        let Some(&front) = lane.window.front() else {
            match wait_for {
                Some(d) => {
                    pace(
                        &mut pace_timer,
                        &ctx,
                        d.min(ctx.end_ns().unwrap_or(u64::MAX)),
                    )
                    .await;
                    continue;
                }
                None => break, // time or quota reached, nothing in flight
            }
        };
        let deadline = front.sent + timeout;
        if timer_at > deadline {
            timer_at = deadline;
            timer.as_mut().reset(ctx.at(deadline));
        }
        let result = tokio::select! {
            biased;
            r = receive(c, &front.req, lane.front_keys()) => Some(r),
            _ = &mut timer => {
                timer_at = u64::MAX;
                if ctx.now_ns() < deadline {
                    continue; // fired for an older request: re-arm for this one
                }
                Some(Err(timed_out(&*ctx.target, c, lane.request_timeout)))
            }
            _ = pace(&mut pace_timer, &ctx, wait_for.unwrap_or(0)), if wait_for.is_some() => continue,
        };
        let done = ctx.now_ns();
        if matches!(result, Some(Ok(_))) {
            last_done = Some(done);
        }
        if !lane.take(done, result) {
            conn = None;
            timer_at = u64::MAX;
        }
    }
    lane.close(conn.as_mut()).await;
    conn
}

/// The oldest request's timeout, naming the server it waited on (a set's member, or the
/// target's one server): the connection is lost with every request in flight on it.
#[cold]
fn timed_out<T: Target>(target: &T, c: &T::Conn, limit: std::time::Duration) -> LookupError {
    let server = c
        .awaiting()
        .unwrap_or_else(|| target.endpoint().to_string());
    LookupError::new(
        crate::outcome::ErrorKind::Timeout,
        true,
        format!("no reply within {limit:?} from {server}"),
    )
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

/// Waits for a due time, on the precise timer when there is one.
async fn pace<T>(timer: &mut Option<crate::timer::PreciseSleep>, ctx: &Ctx<T>, due_ns: u64) {
    match timer.as_mut() {
        Some(t) => t.until(ctx.start_mono_ns + due_ns).await,
        None => sleep_until(ctx.at(due_ns)).await,
    }
}

mod ctx;
mod lane;
mod replies;
mod requests;
mod traced;
pub use ctx::{Ctx, End};
use lane::Lane;

#[cfg(test)]
mod tests;
