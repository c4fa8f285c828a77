//! The order in which a run's connections reach the server. The worker threads open their
//! connections at the same time, but the TCP connects go out one at a time, dealt round robin
//! over the threads: connection k of thread j is the (k·threads + j)-th. A server that hands
//! its connections to its threads in turn (memcached) then gives each worker
//! thread the same server threads, whatever the timing: a server thread serves one worker, so
//! the pair can share a core instead of waking each other across cores, and no core idles
//! while the other holds three threads.
//! Only the TCP connect waits its turn; handshakes (TLS, auth) still overlap. The order costs
//! the connect phase at most `BUDGET`: a connect slower than `SLOW` (a far or dead server), or
//! a phase that has spent the budget, frees every ticket at once.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The longest the order may hold the connect phase up; past it every connect goes at once.
const BUDGET: Duration = Duration::from_secs(1);
/// A TCP connect that takes longer than this (a loopback or LAN one takes well under a
/// millisecond) gives the order up rather than hold the others back.
const SLOW: Duration = Duration::from_millis(100);

/// One run's connect order, shared by its worker threads.
#[derive(Debug)]
pub struct Turns {
    start: Instant,
    /// The ticket whose connect may go now.
    next: AtomicUsize,
    /// Order given up (a connect failed or took longer than `SLOW`, a ticket was dropped unused,
    /// or the phase spent `BUDGET`): every ticket goes at once, so a dead server costs one
    /// timeout, not one per connection.
    free: AtomicBool,
    moved: Notify,
}

/// One connection's place in the order.
#[derive(Debug)]
pub struct Ticket {
    turns: Arc<Turns>,
    at: usize,
    done: bool,
}

tokio::task_local! {
    static TICKET: Cell<Option<Ticket>>;
}

impl Turns {
    /// The tickets of every thread's connections, for threads holding `conns[j]` connections:
    /// connection k of thread j gets the place of (k, j) in (k, j) order.
    pub fn deal(conns: &[usize]) -> Vec<Vec<Ticket>> {
        let turns = Arc::new(Turns {
            start: Instant::now(),
            next: AtomicUsize::new(0),
            free: AtomicBool::new(false),
            moved: Notify::new(),
        });
        let mut tickets: Vec<Vec<Ticket>> = conns.iter().map(|_| Vec::new()).collect();
        let most = conns.iter().copied().max().unwrap_or(0);
        let mut at = 0;
        for k in 0..most {
            for (j, &n) in conns.iter().enumerate() {
                if k < n {
                    tickets[j].push(Ticket {
                        turns: turns.clone(),
                        at,
                        done: false,
                    });
                    at += 1;
                }
            }
        }
        tickets
    }

    fn advance(&self, past: usize, ok: bool) {
        if !ok {
            self.free.store(true, Ordering::Release);
        }
        self.next.fetch_max(past + 1, Ordering::AcqRel);
        self.moved.notify_waiters();
    }

    fn open_for(&self, at: usize) -> bool {
        self.free.load(Ordering::Acquire) || self.next.load(Ordering::Acquire) >= at
    }
}

impl Ticket {
    /// Runs `connect` (a target's whole connect) holding this ticket: its first TCP connect
    /// waits for the ticket's turn.
    pub async fn hold<F: Future>(self, connect: F) -> F::Output {
        TICKET.scope(Cell::new(Some(self)), connect).await
    }

    /// The ticket of the connect this task is making, once: later connects of the same target
    /// connection (pool members, cluster nodes) are not ordered.
    pub(super) fn take() -> Option<Ticket> {
        TICKET.try_with(|t| t.take()).ok().flatten()
    }

    /// Waits for this ticket's turn (or for the order to be given up, or the budget spent).
    pub(super) async fn wait(&self) {
        let turn = async {
            loop {
                let moved = self.turns.moved.notified();
                tokio::pin!(moved);
                moved.as_mut().enable();
                if self.turns.open_for(self.at) {
                    return;
                }
                moved.await;
            }
        };
        let end = tokio::time::Instant::from_std(self.turns.start + BUDGET);
        if tokio::time::timeout_at(end, turn).await.is_err() {
            self.turns.advance(self.at, false);
        }
    }

    /// Runs this ticket's TCP connect; one slower than `SLOW` frees the others meanwhile.
    pub(super) async fn connect<T, E>(
        self,
        open: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.wait().await;
        tokio::pin!(open);
        let made = tokio::select! {
            made = &mut open => made,
            _ = tokio::time::sleep(SLOW) => {
                self.turns.advance(self.at, false);
                open.await
            }
        };
        self.done(made.is_ok());
        made
    }

    /// The connect is made (or failed: then the order is given up).
    fn done(mut self, ok: bool) {
        self.done = true;
        self.turns.advance(self.at, ok);
    }
}

impl Drop for Ticket {
    /// A ticket dropped before its connect (a stop, a connect that never reached TCP) must not
    /// hold the others back.
    fn drop(&mut self) {
        if !self.done {
            self.turns.advance(self.at, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn tickets_are_dealt_round_robin_over_the_threads() {
        let t = Turns::deal(&[3, 2, 3]);
        let at: Vec<Vec<usize>> = t.iter().map(|v| v.iter().map(|t| t.at).collect()).collect();
        assert_eq!(at, vec![vec![0, 3, 6], vec![1, 4], vec![2, 5, 7]]);
    }

    #[test]
    fn connects_go_in_ticket_order_whatever_order_they_start_in() {
        let rt = rt();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        rt.block_on(async {
            let mut tickets = Turns::deal(&[2, 2]);
            let (b, a) = (tickets.pop().unwrap(), tickets.pop().unwrap());
            // Thread 1's connections start first; thread 0's first connect must still go first.
            let mut all: Vec<Ticket> = b.into_iter().chain(a).collect();
            let mut set = tokio::task::JoinSet::new();
            for ticket in all.drain(..) {
                let order = order.clone();
                set.spawn(ticket.hold(async move {
                    let t = Ticket::take().unwrap();
                    let at = t.at;
                    t.connect(async {
                        order.lock().unwrap().push(at);
                        tokio::task::yield_now().await;
                        Ok::<(), ()>(())
                    })
                    .await
                }));
            }
            while set.join_next().await.is_some() {}
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_failed_or_dropped_connect_frees_the_rest() {
        let rt = rt();
        rt.block_on(async {
            let mut tickets = Turns::deal(&[3]).pop().unwrap();
            let last = tickets.pop().unwrap();
            drop(tickets); // the first two never connect
            tokio::time::timeout(Duration::from_millis(500), last.wait())
                .await
                .expect("the third connect went without waiting for the first two");
        });
    }

    #[test]
    fn a_connect_that_hangs_holds_the_others_back_no_longer_than_slow() {
        let rt = rt();
        rt.block_on(async {
            let mut tickets = Turns::deal(&[2]).pop().unwrap();
            let second = tickets.pop().unwrap();
            let first = tickets.pop().unwrap();
            let hang = tokio::spawn(first.connect(async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<(), ()>(())
            }));
            let t0 = Instant::now();
            second.wait().await;
            assert!(t0.elapsed() < SLOW * 3, "waited {:?}", t0.elapsed());
            hang.abort();
        });
    }

    #[test]
    fn the_order_gives_up_once_the_budget_is_spent() {
        let rt = rt();
        rt.block_on(async {
            let mut tickets = Turns::deal(&[2]).pop().unwrap();
            let second = tickets.pop().unwrap();
            let _first = tickets.pop().unwrap(); // held, never connects
            let t0 = Instant::now();
            second.wait().await;
            assert!(t0.elapsed() >= BUDGET - Duration::from_millis(50));
            assert!(t0.elapsed() < BUDGET * 2, "waited {:?}", t0.elapsed());
        });
    }
}
