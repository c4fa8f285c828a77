//! One run against one target: preflight, the server's counter, the connect phase, then the
//! workers feed the collector (`collector.rs`) until they have all stopped.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use crate::collector::{Collector, ConnectPhase};
use crate::control::Control;
use crate::cpu::ServerProcess;
use crate::keys::KeySpace;
use crate::mix::{InsertSeq, Op};
use crate::plan::Plan;
use crate::proto::caps;
use crate::proto::table;
use crate::proto::target::{greet_target, ServerCount, SetupError, Target};
use crate::recorder::Snapshot;
use crate::result::{RunResult, TlsUsed};
use crate::trace::feed::Feed;
use crate::trace::record::TraceRecorder;
use crate::worker::{self, wait_true, Ctx, End};

/// Runs `plan` against `target`. `label` is the redacted target shown everywhere.
pub async fn run<T: Target>(
    target: T,
    plan: &Plan,
    label: &str,
    control: &Control,
) -> Result<RunResult, SetupError> {
    let target = Arc::new(target);
    let before = read_before(&*target, plan, label, control).await?;
    let cpu_before = process_cpu_ns();
    let machine_before = (crate::machine::Stat::read(), Instant::now());
    // --server-pid or the embedded server as given; else whoever listens where the target
    // connects.
    // A set's servers, or a proxy and the servers behind it, are all the server's processes.
    let server = match &control.server {
        ServerProcess::Unknown(_) => match target.endpoints().await {
            all if all.len() > 1 => ServerProcess::locate_all(&all),
            _ => ServerProcess::locate(target.endpoint()),
        },
        given => given.clone(),
    };
    let server_cpu_before = server.cpu_ns();
    let mut workers = connect_workers(&target, plan, control).await?;
    let start_mono_ns = crate::timer::monotonic_ns();
    let start = Instant::now();
    let cells = Arc::new(crate::cells::Cells::new(workers.nthreads));
    let mut collector = Collector::new(
        label,
        target.kind(),
        target.endpoint(),
        plan,
        control,
        workers.nthreads,
        start,
    );
    collector.live(cells.clone(), target.members());
    let (feed, record) = trace_files(plan)?;
    let ctx = Arc::new(Ctx {
        target: target.clone(),
        plan: plan.clone(),
        keys: KeySpace::new(plan.keys.0, plan.keys.1, plan.dist.clone()),
        inserts: before.inserts,
        start,
        start_mono_ns,
        warm_end_ns: collector.warm_end_ns(),
        end: End::new(collector.end_ns()),
        cells,
        feed,
        record: record.clone(),
    });
    let _ = workers.go.send(Some(ctx.clone()));
    collect(&mut collector, &mut workers, control, &ctx.end).await;
    for h in workers.handles {
        let _ = tokio::task::spawn_blocking(move || h.join()).await;
    }
    if let Some(e) = record.and_then(|r| r.finish()) {
        (control.say)(&format!("loadgen: {e}"));
    }
    let wall_ns = collector.elapsed_ns();
    let cpu_ns = process_cpu_ns().saturating_sub(cpu_before);
    let server_cpu_ns = match server_cpu_before {
        Some(before) => {
            // Closed connections end their server processes (PostgreSQL backends): give the
            // server a moment to reap them, so their CPU is in its children's time.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            server.cpu_ns().map(|after| after.saturating_sub(before))
        }
        None => None,
    };
    let machine_load = machine_load(machine_before, cpu_ns + server_cpu_ns.unwrap_or(0));
    let server_after = if collector.interrupted() {
        Ok(None)
    } else {
        // After a measured run a hung counter read costs only the count: the result stays.
        bounded(target.server_count(), plan, control, "the server's counter")
            .await
            .and_then(|r| r)
    };
    let mut result = collector.finish(
        workers.connect,
        (before.server_count, server_after),
        wall_ns,
        cpu_ns,
        (&server, server_cpu_ns),
    );
    result.driver = target.driver().map(str::to_string);
    result.tls = target.tls().map(|t| TlsUsed {
        version: t.version,
        cipher: t.cipher,
        verified: t.verified.name().to_string(),
    });
    result.durability = before.durability.into_iter().collect();
    result.machine_load = machine_load;
    result.verdict = crate::verdict::judge(&result, !plan.trace_paced());
    Ok(result)
}

/// `--trace`'s feed and `--record-trace`'s file, opened as the clock starts: a trace's due
/// times count from the run's start.
type TraceFiles = (Option<Arc<Feed>>, Option<Arc<TraceRecorder>>);

fn trace_files(plan: &Plan) -> Result<TraceFiles, SetupError> {
    let feed = match &plan.trace {
        Some(t) => Some(Arc::new(
            Feed::start(&t.path, t.speed).map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let record = match &plan.record_trace {
        Some(p) => Some(Arc::new(TraceRecorder::create(p)?)),
        None => None,
    };
    Ok((feed, record))
}

/// What else ran on this machine since `before` (its /proc/stat and when it was read), next to
/// `ours`: the CPU time of loadgen and of the server over the same span.
fn machine_load(
    before: (Option<crate::machine::Stat>, Instant),
    ours: u64,
) -> Option<crate::result::MachineLoad> {
    match (before, crate::machine::Stat::read()) {
        ((Some(before), at), Some(now)) => {
            before.load_since(&now, at.elapsed().as_nanos() as u64, ours)
        }
        _ => None,
    }
}

/// What is read from the server before the run: whether it can run at all (preflight), where
/// inserts start, its durability settings and its counter.
struct Before {
    inserts: InsertSeq,
    durability: Vec<(String, String)>,
    server_count: Result<Option<ServerCount>, SetupError>,
}

async fn read_before<T: Target>(
    target: &T,
    plan: &Plan,
    label: &str,
    control: &Control,
) -> Result<Before, SetupError> {
    preflight(target, plan, label, control).await?;
    let inserts = insert_seq(target, plan, label, control).await?;
    let durability = match plan.mix.read_only() {
        true => Vec::new(),
        false => bounded(
            target.durability(),
            plan,
            control,
            "the durability settings",
        )
        .await
        .map_err(|e| SetupError(format!("{label}: {e}")))?,
    };
    // A server that takes the connection but never answers the counter read is a setup
    // failure: the run would only time out on every request.
    let server_count = bounded(target.server_count(), plan, control, "the server's counter")
        .await
        .map_err(|e| SetupError(format!("{label}: {e}")))?;
    Ok(Before {
        inserts,
        durability,
        server_count,
    })
}

/// The worker threads, their connections open, waiting for `go`.
struct Workers<T: Target> {
    handles: Vec<std::thread::JoinHandle<()>>,
    nthreads: usize,
    connect: ConnectPhase,
    go: watch::Sender<Option<Arc<Ctx<T>>>>,
    snapshots: mpsc::UnboundedReceiver<Snapshot>,
    abort: watch::Sender<bool>,
}

/// The connect phase: every worker opens its connections, then the clock may start.
async fn connect_workers<T: Target>(
    target: &Arc<T>,
    plan: &Plan,
    control: &Control,
) -> Result<Workers<T>, SetupError> {
    let started_at = crate::date::now_rfc3339_us();
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<worker::Connected>();
    let (go_tx, go_rx) = watch::channel::<Option<Arc<Ctx<T>>>>(None);
    let (tx, rx) = mpsc::unbounded_channel::<Snapshot>();
    let (abort_tx, abort_rx) = watch::channel(false);
    let shares = plan.split();
    let nthreads = shares.len();
    let mut handles = Vec::new();
    let connect_started = Instant::now();
    let conns: Vec<usize> = shares.iter().map(|s| s.conns).collect();
    for (share, tickets) in shares
        .into_iter()
        .zip(crate::transport::Turns::deal(&conns))
    {
        let h = worker::spawn(
            target.clone(),
            share,
            tickets,
            ready_tx.clone(),
            go_rx.clone(),
            tx.clone(),
            abort_rx.clone(),
        )
        .map_err(|e| SetupError(format!("cannot start a worker thread: {e}")))?;
        handles.push(h);
    }
    drop((tx, ready_tx, go_rx));
    let mut connect = ConnectPhase {
        started_at,
        ..ConnectPhase::default()
    };
    for _ in 0..nthreads {
        tokio::select! {
            r = ready_rx.recv() => if let Some(r) = r {
                connect.connected += r.ok as u64;
                connect.failed += r.failed as u64;
                if connect.first_error.is_none() {
                    connect.first_error = r.first_error;
                }
            },
            // Ctrl-C while connecting: the clock starts anyway and the collector sees the
            // stop at once (its `changed` is not consumed here).
            _ = wait_true(control.stop.clone()) => break,
        }
    }
    connect.seconds = connect_started.elapsed().as_secs_f64();
    Ok(Workers {
        handles,
        nthreads,
        connect,
        go: go_tx,
        snapshots: rx,
        abort: abort_tx,
    })
}

/// Merges the workers' snapshots until they have all stopped; a stop signal or too many
/// errors tells them to stop.
async fn collect<T: Target>(
    collector: &mut Collector<'_>,
    workers: &mut Workers<T>,
    control: &Control,
    end: &End,
) {
    let mut stop = control.stop.clone();
    loop {
        tokio::select! {
            s = workers.snapshots.recv() => {
                let Some(snap) = s else { break };
                collector.merge(&snap);
                if collector.all_done() {
                    // Every worker has drained: they may now close their connections (worker.rs).
                    let _ = workers.abort.send(true);
                }
                collector.close_intervals();
                if collector.too_many_errors() {
                    let _ = workers.abort.send(true);
                }
                // `--ci` met: the run ends now as a timed run ends, its requests in flight
                // answered (the server's count then agrees).
                if let Some(ns) = collector.goal_reached() {
                    end.bring_to(ns);
                }
            }
            r = stop.changed(), if !collector.interrupted() => {
                if r.is_ok() && *stop.borrow() {
                    collector.interrupt();
                    let _ = workers.abort.send(true);
                }
            }
        }
    }
}

/// One connection before anything else, so a wrong password or a missing table is a clear
/// setup error (exit 2) rather than a run full of connect errors.
async fn preflight<T: Target>(
    target: &T,
    plan: &Plan,
    label: &str,
    control: &Control,
) -> Result<(), SetupError> {
    // What the target itself refuses (a URL's shape, a mode) first: its words are the
    // more exact; then what its driver cannot do at all (`caps.rs`).
    target
        .refuse(plan)
        .and_then(|()| {
            let set = target.is_set();
            caps::refuse(
                &target.caps(),
                plan,
                target.kind(),
                set,
                target.driver(),
                table::who,
            )
        })
        .map_err(|e| SetupError(format!("{label}: {e}")))?;
    // Targets bound their own connect by --timeout, per step, with a message that names the
    // step that hung (e.g. "sent no MySQL greeting"); this bound is only the backstop, so it
    // must not race them.
    // What answers at the endpoint, named when it is another kind of server.
    let greeted = tokio::select! {
        r = greet_target(target, plan.timeouts().connect) => r,
        _ = wait_true(control.stop.clone()) => {
            return Err(SetupError(format!("{label}: stopped while connecting; nothing was measured")))
        }
    };
    greeted.map_err(|e| SetupError(format!("{label}: {}", crate::url::redact_text(&e))))?;
    let backstop = plan.timeouts().preflight;
    let pre = tokio::select! {
        r = tokio::time::timeout(backstop, target.connect()) => r,
        _ = wait_true(control.stop.clone()) => {
            return Err(SetupError(format!("{label}: stopped while connecting; nothing was measured")))
        }
    };
    match pre {
        Err(_) => Err(SetupError(format!(
            "{label}: no answer within {backstop:?} while connecting"
        ))),
        Ok(Err(e)) => Err(SetupError(format!(
            "{label}: {}",
            crate::url::redact_text(&e.message)
        ))),
        Ok(Ok(conn)) => {
            drop(conn);
            Ok(())
        }
    }
}

/// Where this run's inserts start: `--insert-from`, else the target's own start (above the keys
/// it holds), else above `--keys`.
async fn insert_seq<T: Target>(
    target: &T,
    plan: &Plan,
    label: &str,
    control: &Control,
) -> Result<InsertSeq, SetupError> {
    let first = match plan.insert_from {
        Some(f) => f,
        None if !plan.mix.has(Op::Insert) => plan.keys.1.saturating_add(1),
        None => match bounded(target.insert_from(), plan, control, "where inserts start")
            .await
            .map_err(|e| SetupError(format!("{label}: {e}")))?
        {
            Ok(Some(f)) => f,
            Ok(None) => plan.keys.1.saturating_add(1),
            Err(e) => {
                return Err(SetupError(format!(
                    "{label}: cannot find where inserts start ({e}); give --insert-from"
                )))
            }
        },
    };
    Ok(InsertSeq::for_instance(first, plan.instance.as_deref()))
}

/// A round trip outside the request loop (counter, settings, insert start), bounded like a
/// handshake by --timeout and given up at once on Ctrl-C / SIGTERM: a server that accepts and
/// never answers must not hang loadgen.
async fn bounded<R>(
    step: impl std::future::Future<Output = R>,
    plan: &Plan,
    control: &Control,
    what: &str,
) -> Result<R, SetupError> {
    let limit = plan.timeouts().setup;
    tokio::select! {
        r = tokio::time::timeout(limit, step) => r.map_err(|_| SetupError(format!(
            "no answer within {limit:?} reading {what} (is the server hung?); check it or raise --timeout"
        ))),
        _ = wait_true(control.stop.clone()) => Err(SetupError(format!("stopped while reading {what}"))),
    }
}

/// CPU time of the whole process (user + system, all threads, ended ones too), nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
