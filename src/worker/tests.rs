//! The request loop against in-process connections whose replies are always ready, so the
//! order in which the loop calls them is the loop's own.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::{drive, Ctx};
use crate::keys::KeySpace;
use crate::mix::InsertSeq;
use crate::outcome::{LookupError, Outcome};
use crate::plan::{Plan, Stop};
use crate::proto::caps::Caps;
use crate::proto::codec::Request;
use crate::proto::target::{Conn, Target};
use crate::recorder::Recorder;
use crate::transport::Endpoint;

thread_local! {
    /// (connection, 's' send | 'r' recv) in call order; a real connection writes in `recv`.
    static LOG: RefCell<Vec<(usize, char)>> = const { RefCell::new(Vec::new()) };
}

struct Ready(usize);

impl Conn for Ready {
    fn send(&mut self, _: &Request) {
        LOG.with(|l| l.borrow_mut().push((self.0, 's')));
    }
    async fn recv(&mut self, _: &Request) -> Result<Outcome, LookupError> {
        LOG.with(|l| l.borrow_mut().push((self.0, 'r')));
        Ok(Outcome::Hit)
    }
}

struct Instant0(Endpoint);

impl Target for Instant0 {
    type Conn = Ready;
    const CAPS: Caps = Caps::READS;
    fn kind(&self) -> &'static str {
        "test"
    }
    fn endpoint(&self) -> &Endpoint {
        &self.0
    }
    async fn connect(&self) -> Result<Ready, LookupError> {
        Err(LookupError::io("no new connections in this test"))
    }
}

/// Runs `conns` connections of one thread, closed loop, to `-n requests` and returns the calls
/// in order.
fn run(conns: usize, requests: u64) -> Vec<(usize, char)> {
    let plan = Plan {
        connections: conns,
        threads: 1,
        stop: Stop::Requests(requests),
        warmup: std::time::Duration::ZERO,
        ..Plan::default()
    };
    let ctx = Arc::new(Ctx {
        target: Arc::new(Instant0(Endpoint::Unix("/nonexistent".into()))),
        keys: KeySpace::new(plan.keys.0, plan.keys.1, plan.dist.clone()),
        inserts: InsertSeq {
            first: 2_000_000,
            lane: 0,
            lanes: 1,
        },
        start: Instant::now(),
        start_mono_ns: 0,
        warm_end_ns: 0,
        end: super::ctx::End::new(None),
        cells: Arc::new(crate::cells::Cells::new(1)),
        feed: None,
        record: None,
        plan,
    });
    let rec = Rc::new(RefCell::new(Recorder::new(0, false)));
    // The runtime the worker threads run (worker.rs `spawn`): the turn-taking is its scheduler's.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build_local(tokio::runtime::LocalOptions::default())
        .unwrap();
    LOG.with(|l| l.borrow_mut().clear());
    rt.block_on(async {
        let tasks: Vec<_> = (0..conns)
            .map(|i| {
                tokio::task::spawn_local(drive(ctx.clone(), i, rec.clone(), Some(Ready(i)), true))
            })
            .collect();
        for t in tasks {
            assert!(t.await.unwrap().is_some(), "the connection is handed back");
        }
    });
    assert_eq!(rec.borrow().in_flight, 0);
    LOG.with(|l| l.borrow().clone())
}

/// Where in `log` each connection's n-th recv is (n from 1), in log order.
fn recvs(log: &[(usize, char)], n: usize) -> Vec<usize> {
    let mut seen = [0; 8];
    let mut at = Vec::new();
    for (i, &(c, what)) in log.iter().enumerate() {
        if what == 'r' {
            seen[c] += 1;
            if seen[c] == n {
                at.push(i);
            }
        }
    }
    at
}

#[test]
fn closed_loop_reads_every_ready_reply_before_writing_the_next_requests() {
    let log = run(4, 40);
    assert_eq!(log.iter().filter(|e| e.1 == 's').count(), 40);
    // Round after round every connection takes its reply before any writes its next request
    // (the recv that follows): connection 0 does not run ahead of the others.
    for n in 1..10 {
        let (this, next) = (recvs(&log, n), recvs(&log, n + 1));
        assert_eq!((this.len(), next.len()), (4, 4), "{log:?}");
        assert!(this.iter().max() < next.iter().min(), "round {n}: {log:?}");
    }
}
