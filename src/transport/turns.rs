//! The order in which a run's connections reach the server. The worker threads open their
//! connections at the same time, but the TCP connects go out one at a time, dealt round robin
//! over the threads: connection k of thread j is the (k·threads + j)-th. A server that hands
//! its connections to its threads in turn (memcached, HandlerSocket) then gives each worker
//! thread the same server threads, whatever the timing: a server thread serves one worker, so
//! the pair can share a core instead of waking each other across cores, and no core idles
//! while the other holds three threads.
//! Only the TCP connect waits its turn; handshakes (TLS, auth) still overlap.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// One run's connect order, shared by its worker threads.
#[derive(Debug, Default)]
pub struct Turns {
    /// The ticket whose connect may go now.
    next: AtomicUsize,
    /// Order given up (a connect failed, or a turn took longer than the connect timeout): every
    /// ticket goes at once, so a dead server costs one timeout, not one per connection.
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
        let turns = Arc::new(Turns::default());
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

    /// Waits for this ticket's turn, at most `limit`; past it the order is given up.
    pub(super) async fn wait(&self, limit: Duration) {
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
        if tokio::time::timeout(limit, turn).await.is_err() {
            self.turns.advance(self.at, false);
        }
    }

    /// The connect is made (or failed: then the order is given up).
    pub(super) fn done(mut self, ok: bool) {
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

    #[test]
    fn tickets_are_dealt_round_robin_over_the_threads() {
        let t = Turns::deal(&[3, 2, 3]);
        let at: Vec<Vec<usize>> = t.iter().map(|v| v.iter().map(|t| t.at).collect()).collect();
        assert_eq!(at, vec![vec![0, 3, 6], vec![1, 4], vec![2, 5, 7]]);
        for v in t {
            for ticket in v {
                std::mem::forget(ticket);
            }
        }
    }

    #[test]
    fn connects_go_in_ticket_order_whatever_order_they_start_in() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
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
                    t.wait(Duration::from_secs(5)).await;
                    order.lock().unwrap().push(t.at);
                    tokio::task::yield_now().await;
                    t.done(true);
                }));
            }
            while set.join_next().await.is_some() {}
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_failed_or_dropped_connect_frees_the_rest() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut tickets = Turns::deal(&[3]).pop().unwrap();
            let last = tickets.pop().unwrap();
            drop(tickets); // the first two never connect
            tokio::time::timeout(Duration::from_secs(1), last.wait(Duration::from_secs(60)))
                .await
                .expect("the third connect went without waiting for the first two");
        });
    }
}
