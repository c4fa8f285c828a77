//! One run against one target: preflight, server counter, workers, the collector that merges
//! snapshots once per interval (off the hot path), and the RunResult.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::keys::KeySpace;
use crate::outcome::ErrorKind;
use crate::plan::{Plan, Stop};
use crate::proto::target::{SetupError, Target};
use crate::recorder::Snapshot;
use crate::report::result::{ClientCpu, RunResult, ServerObserved, TimelineRow};
use crate::totals::{Percentiles, Totals};
use crate::worker::{self, wait_true, Ctx};

/// How a run is stopped from outside and what it says while running.
#[derive(Clone)]
pub struct Control {
    /// `true` stops the run now (Ctrl-C, SIGTERM); results so far are kept.
    pub stop: watch::Receiver<bool>,
    /// Print a progress line to stderr every interval.
    pub progress: bool,
    /// Position of the target in a multi-target run.
    pub target_index: usize,
    /// Called with the merged totals after every interval (Prometheus exporter, interval log).
    pub hooks: Vec<Hook>,
}

pub type Hook = Arc<dyn Fn(&IntervalView) + Send + Sync>;

/// What the hooks see after each interval.
pub struct IntervalView<'a> {
    /// The redacted target URL (never use it as a metric label: use `kind`).
    pub target: &'a str,
    /// `postgres`, `mysql`, `hs`, `memcache`, `http`, `embedded`.
    pub kind: &'a str,
    /// Position of this target in the run (0-based), to tell apart two targets of one kind.
    pub target_index: usize,
    /// Interval bounds, seconds since the run's start; `warm` when it lies in the warm-up.
    pub start_s: f64,
    pub end_s: f64,
    pub warm: bool,
    /// The final interval of this target's run.
    pub last: bool,
    /// Unix time of the run's start, seconds.
    pub run_start_unix: f64,
    pub totals: &'a Totals,
    pub interval: &'a Totals,
    pub interval_s: f64,
    pub in_flight: u64,
    pub connections: u64,
    pub rate: Option<f64>,
}

/// Runs `plan` against `target`. `label` is the redacted target shown everywhere.
pub async fn run<T: Target>(
    target: T,
    plan: &Plan,
    label: &str,
    control: &Control,
) -> Result<RunResult, SetupError> {
    let target = Arc::new(target);
    if plan.pipeline > target.max_pipeline() {
        return Err(SetupError(format!(
            "{label}: this {} driver cannot pipeline; use -p 1 and more connections (-c), or ?driver=wire",
            target.kind()
        )));
    }
    // Preflight: one connection, so a wrong password or a missing table is a clear setup error
    // (exit 2) rather than a run full of connect errors.
    // Targets bound their own connect by --timeout, per step, with a message that names the
    // step that hung (e.g. "sent no MySQL greeting"); this bound is only the backstop, so it
    // must not race them.
    let backstop = plan.timeout * 2 + Duration::from_secs(1);
    let pre = tokio::select! {
        r = tokio::time::timeout(backstop, target.connect()) => r,
        _ = wait_true(control.stop.clone()) => {
            return Err(SetupError(format!("{label}: stopped while connecting; nothing was measured")))
        }
    };
    match pre {
        Err(_) => {
            return Err(SetupError(format!(
                "{label}: no answer within {backstop:?} while connecting"
            )))
        }
        Ok(Err(e)) => {
            return Err(SetupError(format!(
                "{label}: {}",
                crate::url::redact_text(&e.message)
            )))
        }
        Ok(Ok(conn)) => drop(conn),
    }
    let server_before = target.server_count().await;
    let cpu_before = process_cpu_ns();
    let started_at = crate::report::now_rfc3339();

    // The connect phase: every worker opens its connections, then the clock starts.
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<worker::Connected>();
    let (go_tx, go_rx) = watch::channel::<Option<Arc<Ctx<T>>>>(None);
    let (tx, mut rx) = mpsc::unbounded_channel::<Snapshot>();
    let (abort_tx, abort_rx) = watch::channel(false);
    let shares = plan.split();
    let nthreads = shares.len();
    let mut handles = Vec::new();
    let connect_started = Instant::now();
    for share in shares {
        let h = worker::spawn(
            target.clone(),
            share,
            ready_tx.clone(),
            go_rx.clone(),
            tx.clone(),
            abort_rx.clone(),
        )
        .map_err(|e| SetupError(format!("cannot start a worker thread: {e}")))?;
        handles.push(h);
    }
    drop((tx, ready_tx, go_rx));
    let mut stop = control.stop.clone();
    let mut connected = 0usize;
    let mut connect_failed = 0usize;
    let mut connect_error: Option<String> = None;
    for _ in 0..nthreads {
        tokio::select! {
            r = ready_rx.recv() => if let Some(r) = r {
                connected += r.ok;
                connect_failed += r.failed;
                if connect_error.is_none() {
                    connect_error = r.first_error;
                }
            },
            // Ctrl-C while connecting: the clock starts anyway and the collector below sees
            // the stop at once (its `changed` is not consumed here).
            _ = wait_true(stop.clone()) => break,
        }
    }
    let connect_s = connect_started.elapsed().as_secs_f64();

    let start_mono_ns = crate::timer::monotonic_ns();
    let start = Instant::now();
    let run_start_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let warm_ns = plan.warmup.as_nanos() as u64;
    let end_ns = match plan.stop {
        Stop::Duration(d) => Some(warm_ns + d.as_nanos() as u64),
        Stop::Requests(_) => None,
    };
    let ctx = Arc::new(Ctx {
        target: target.clone(),
        plan: plan.clone(),
        keys: KeySpace::new(plan.keys.0, plan.keys.1, plan.dist.clone()),
        start,
        start_mono_ns,
        warm_end_ns: warm_ns,
        end_ns,
    });
    let _ = go_tx.send(Some(ctx));

    let mut totals = Totals::default();
    let mut pending: BTreeMap<u64, (Totals, u64, u64)> = BTreeMap::new();
    let mut sent_upto = vec![0u64; nthreads];
    let mut done = vec![false; nthreads];
    let mut cpu_ns = vec![0u64; nthreads];
    // Each thread's latest in-flight and connection gauges.
    let mut gauges = vec![(0u64, 0u64); nthreads];
    let mut timeline = Vec::new();
    let mut emitted = 0u64;
    let mut interrupted = false;
    let mut stopped_at: Option<u64> = None;
    let mut aborted: Option<String> = None;
    let interval_ns = plan.interval.as_nanos() as u64;

    loop {
        let snap = tokio::select! {
            s = rx.recv() => match s { Some(s) => s, None => break },
            r = stop.changed(), if !interrupted => {
                if r.is_ok() && *stop.borrow() {
                    interrupted = true;
                    stopped_at = Some(start.elapsed().as_nanos() as u64);
                    let _ = abort_tx.send(true);
                }
                continue;
            }
        };
        let t = snap.thread;
        totals += &snap;
        cpu_ns[t] = snap.cpu_ns;
        gauges[t] = (snap.in_flight, snap.connections);
        sent_upto[t] = snap.index;
        done[t] |= snap.last;
        if done.iter().all(|&d| d) {
            // Every worker has drained: they may now close their connections (worker.rs).
            let _ = abort_tx.send(true);
        }
        let e = pending
            .entry(snap.index)
            .or_insert_with(|| (Totals::default(), 0, 0));
        e.0 += &snap;
        e.1 += snap.in_flight;
        e.2 += snap.connections;
        // An interval is complete when every thread has sent it or has finished.
        while let Some((&k, _)) = pending.iter().next() {
            if !(0..nthreads).all(|i| done[i] || sent_upto[i] >= k) {
                break;
            }
            let all_done = done.iter().all(|&d| d);
            // The interval that reaches the end of a timed run also takes the replies that come
            // after the end (to requests sent before it): it waits for every worker to finish,
            // so no progress line follows the end and none repeats its time.
            let reaches_end = end_ns.is_some_and(|e| k * interval_ns >= e);
            if reaches_end && !all_done {
                break;
            }
            let (mut iv, mut in_flight, mut conns) = pending.remove(&k).expect("present");
            if reaches_end {
                for (_, (tail, _, _)) in std::mem::take(&mut pending) {
                    iv += &tail;
                }
                in_flight = gauges.iter().map(|g| g.0).sum();
                conns = gauges.iter().map(|g| g.1).sum();
            }
            emitted = k;
            let last = pending.is_empty() && all_done;
            let t_start = (k - 1) * interval_ns;
            let mut t_end = (k * interval_ns).min(start.elapsed().as_nanos() as u64);
            if last {
                // The final interval ends where the measured window ends.
                t_end = (k * interval_ns).min(measured_end(&totals, end_ns, stopped_at));
            }
            let t_end = t_end.max(t_start);
            let len_s = (t_end - t_start) as f64 / 1e9;
            let warm = t_start < warm_ns;
            let row = TimelineRow::of(&iv, k, t_end, warm_ns, len_s, warm, in_flight, conns);
            // A final sliver (the last replies of a `-n` run just after a whole interval) stays
            // in the totals (and in the timeline if it holds any) but gets no line: it would
            // read as the same second twice.
            let sliver = last && k > 1 && t_end < t_start + SLIVER_NS;
            let empty_sliver = sliver && iv.counts.requests() + iv.warm.requests() == 0;
            if control.progress && !sliver {
                eprintln!("{}", row.progress_line(&iv, len_s));
            }
            for f in &control.hooks {
                f(&IntervalView {
                    target: label,
                    kind: target.kind(),
                    target_index: control.target_index,
                    start_s: t_start as f64 / 1e9,
                    end_s: t_end as f64 / 1e9,
                    warm,
                    last,
                    run_start_unix,
                    totals: &totals,
                    interval: &iv,
                    interval_s: len_s,
                    in_flight,
                    connections: conns,
                    rate: plan.rate,
                });
            }
            if !warm && !empty_sliver {
                timeline.push(row);
            }
        }
        if let Some(max) = plan.max_errors {
            if aborted.is_none() && totals.counts.error_total() >= max {
                aborted = Some(format!(
                    "stopped early: {} errors reached --max-errors {max}",
                    totals.counts.error_total()
                ));
                stopped_at = Some(start.elapsed().as_nanos() as u64);
                let _ = abort_tx.send(true);
            }
        }
    }
    let _ = emitted;
    for h in handles {
        let _ = tokio::task::spawn_blocking(move || h.join()).await;
    }
    let wall_ns = start.elapsed().as_nanos() as u64;
    let cpu_after = process_cpu_ns();
    let server_after = if interrupted {
        Ok(None)
    } else {
        target.server_count().await
    };

    // The measured window: from the end of the warm-up to the last reply, but never shorter
    // than the time we were asked to run (a stalled server must not inflate QPS).
    let end = measured_end(&totals, end_ns, stopped_at);
    let window_s = (end.saturating_sub(warm_ns)) as f64 / 1e9;
    let answered = totals.counts.hits + totals.counts.misses;
    let all_requests = totals.counts.requests() + totals.warm.requests();
    let worker_ns: u64 = cpu_ns.iter().sum();

    let client_cpu = ClientCpu::new(
        worker_ns,
        cpu_after.saturating_sub(cpu_before),
        wall_ns,
        nthreads,
        all_requests,
    );
    let server_observed = ServerObserved::of(server_before, server_after, &totals);
    let mut errors = BTreeMap::new();
    for k in ErrorKind::ALL {
        errors.insert(k.name().to_string(), totals.counts.errors[k.index()]);
    }
    let mut result = RunResult {
        target: label.to_string(),
        kind: target.kind().to_string(),
        started_at,
        interrupted,
        stopped_early: aborted,
        duration_s: round3(window_s),
        qps: if window_s > 0.0 {
            round1(answered as f64 / window_s)
        } else {
            0.0
        },
        requests: totals.counts.requests(),
        hits: totals.counts.hits,
        misses: totals.counts.misses,
        errors,
        error_total: totals.counts.error_total(),
        error_samples: totals.error_samples.clone(),
        reconnects: totals.counts.reconnects,
        warmup_requests: totals.warm.requests(),
        connected: connected as u64,
        connect_s: round3(connect_s),
        connect_failed: connect_failed as u64,
        connect_error,
        latency_us: Percentiles::of(&totals.latency),
        service_us: Percentiles::of(&totals.service),
        lag_us: if plan.rate.is_some() {
            Some(Percentiles::of(&totals.lag))
        } else {
            None
        },
        rate: plan.rate.map(|r| {
            crate::report::result::RateResult::of(
                r,
                answered + totals.counts.error_total(),
                window_s,
                &totals,
            )
        }),
        client_cpu,
        server_observed,
        timeline,
        histogram: crate::report::result::encode_histogram(&totals.latency),
        totals: Some(totals),
    };
    // Server messages (error samples, the first connect error) may echo a URL or a secret.
    result.redact();
    Ok(result)
}

/// A final interval shorter than this is not printed (see the collector).
const SLIVER_NS: u64 = 10_000_000;

/// The end of the measured window, ns since the start: the last reply, but never before the
/// time we were asked to run (a stalled server must not inflate QPS) or the stop.
fn measured_end(totals: &Totals, end_ns: Option<u64>, stopped_at: Option<u64>) -> u64 {
    let mut end = totals.last_done_ns;
    if let Some(e) = end_ns {
        end = end.max(e.min(stopped_at.unwrap_or(e)));
    }
    if let Some(s) = stopped_at {
        end = end.max(s.min(end_ns.unwrap_or(s)));
    }
    end
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// CPU time of the whole process (user + system, all threads, ended ones too), nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
