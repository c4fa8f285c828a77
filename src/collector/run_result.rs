//! The `RunResult` a finished run is: counts, rates, percentiles, the server's own count and
//! CPU beside loadgen's, built once every worker has stopped.

use super::members::{members_observed, over_members, partial, reopened};
use super::*;
use crate::result::{count_matches, sent_text, Redirects};

impl Collector<'_> {
    /// The run's result, once every worker has stopped: `wall_ns` is when they had,
    /// `process_cpu_ns` the whole process's CPU time over the run and `server_cpu_ns` that of
    /// the server process it names. The result is redacted.
    pub fn finish(
        self,
        connect: ConnectPhase,
        server: ServerCounts,
        wall_ns: u64,
        process_cpu_ns: u64,
        (server_proc, server_cpu_ns): (&ServerProcess, Option<u64>),
    ) -> RunResult {
        let end = self.measured_end();
        let totals = &self.totals;
        let window_s = end.saturating_sub(self.warm_ns) as f64 / 1e9;
        let answered = totals.counts.hits + totals.counts.misses;
        let all_requests = totals.counts.requests() + totals.warm.requests();
        let worker_ns: u64 = self.threads.iter().map(|t| t.cpu_ns).sum();
        let errors = by_kind(&totals.counts);
        let interval = self.plan.interval;
        let ops = op_results(totals, window_s, &server, (&self.op_points, interval));
        let centers = centers(per_s(answered, window_s), &totals.latency);
        let precision = Figures::of(&self.points, interval.as_secs_f64(), centers).rounded();
        let reached = self.goal_reached_s;
        let ci_goal = self
            .plan
            .ci
            .as_ref()
            .map(|g| g.outcome(&precision, &centers, reached));
        sealed(RunResult {
            target: self.label.to_string(),
            kind: self.kind.to_string(),
            label: None,
            transport: self.endpoint.transport().name().to_string(),
            socket: self.endpoint.socket().map(|p| p.display().to_string()),
            driver: None,
            tls: None,
            started_at: connect.started_at,
            interrupted: self.interrupted,
            stopped_early: stopped_line(self.stopped_early, totals),
            duration_s: round3(window_s),
            qps: round1(per_s(answered, window_s)),
            requests: totals.counts.requests(),
            hits: totals.counts.hits,
            misses: totals.counts.misses,
            errors,
            error_total: totals.counts.error_total(),
            unsure: totals.counts.unsure,
            retries: totals.counts.retries,
            error_samples: totals.error_samples.clone(),
            reconnects: totals.counts.reconnects,
            warmup_requests: totals.warm.requests(),
            connected: connect.connected,
            connect_s: round3(connect.seconds),
            connect_failed: connect.failed,
            connect_error: connect.first_error,
            latency_us: Percentiles::of(&totals.latency),
            service_us: Percentiles::of(&totals.service),
            lag_us: self.plan.scheduled().then(|| Percentiles::of(&totals.lag)),
            connect_us: self
                .plan
                .reconnect_every
                .map(|_| Percentiles::of(&totals.connect)),
            rate: self.plan.rate.map(|r| RateResult {
                backlog: self.threads.iter().map(|t| t.backlog).sum(),
                warmup_dropped: self.threads.iter().map(|t| t.warm_dropped).sum(),
                ..rate_result(r, answered + totals.counts.error_total(), window_s, totals)
            }),
            client_cpu: client_cpu(&self.threads, (process_cpu_ns, wall_ns), all_requests),
            server_cpu: Some(server_cpu(
                server_proc,
                server_cpu_ns.or_else(|| {
                    // The embedded server: the process's CPU that is not the workers'.
                    (*server_proc == ServerProcess::InProcess)
                        .then(|| process_cpu_ns.saturating_sub(worker_ns))
                }),
                worker_ns,
                all_requests,
            )),
            ops,
            durability: BTreeMap::new(),
            keys: (self.plan.multi_get() > 0).then(|| {
                let c = &totals.counts;
                KeysResult::new(self.plan.multi_get(), c.key_hits, c.key_misses, window_s)
            }),
            server_observed: server_observed(
                server.0,
                server.1,
                totals,
                self.plan.instance.is_some(),
            ),
            timeline: self.timeline,
            precision: Some(precision),
            ci_goal,
            histogram: encode_histogram(&totals.latency),
            verdict: Default::default(),
            machine_load: None,
        })
    }
}

/// The result as it leaves the run: a set's servers opened again counted as the run's
/// reconnects too, and secrets redacted (server messages, as error samples and the first
/// connect error, may echo a URL or a password).
fn sealed(mut result: RunResult) -> RunResult {
    result.reconnects += reopened(result.server_observed.as_ref());
    crate::redact::run(&mut result);
    result
}

/// `-R`: the rate asked, the rate achieved over the window, and how many requests went late.
fn rate_result(asked: f64, sent: u64, window_s: f64, totals: &Totals) -> RateResult {
    let achieved = if window_s > 0.0 {
        sent as f64 / window_s
    } else {
        0.0
    };
    RateResult {
        asked,
        achieved: round1(achieved),
        // Requests sent more than 1 ms after their due time.
        late: totals.lag.count_between(1_000_000, u64::MAX),
        kept: (achieved - asked).abs() <= asked * 0.01,
        backlog: 0,
        warmup_dropped: 0,
    }
}

fn by_kind(c: &Counts) -> std::collections::BTreeMap<String, u64> {
    ErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), c.errors[k.index()]))
        .collect()
}

/// Each op of a mix that writes (none for a read-only run), with the server's count of it.
fn op_results(
    totals: &Totals,
    window_s: f64,
    server: &ServerCounts,
    (points, interval): (&[Vec<Point>], std::time::Duration),
) -> BTreeMap<String, OpResult> {
    let counted = |r: &Result<Option<ServerCount>, SetupError>, op: Op| match r {
        Ok(Some(c)) => c
            .ops
            .get(op.index())
            .copied()
            .filter(|&v| v != ServerCount::UNCOUNTED),
        _ => None,
    };
    // A multi-get adds what the server counts per multi-get; every other request one.
    let per_mget = match &server.1 {
        Ok(Some(c)) => c.per_request.max(1),
        _ => 1,
    };
    Op::ALL
        .iter()
        .zip(&totals.ops)
        .zip(points.iter().map(Some).chain(std::iter::repeat(None)))
        .filter(|((_, o), _)| o.counts.requests() + o.warm.requests() > 0)
        .map(|((&op, o), pts)| {
            let c = &o.counts;
            let server_observed = match (counted(&server.0, op), counted(&server.1, op)) {
                _ if restarted(&server.0, &server.1).is_some() || partial(server) => None,
                (Some(b), Some(a)) => Some(observed(
                    format!("{} ({})", server_source(server), op.name()),
                    a.saturating_sub(b),
                    (c, &o.warm),
                    op.name(),
                    if op == Op::Mget { per_mget } else { 1 },
                    None,
                )),
                _ => None,
            };
            let r = OpResult {
                requests: c.requests(),
                qps: if window_s > 0.0 {
                    round1((c.hits + c.misses) as f64 / window_s)
                } else {
                    0.0
                },
                hits: c.hits,
                misses: c.misses,
                errors: by_kind(c),
                error_total: c.error_total(),
                unsure: c.unsure,
                retries: c.retries,
                latency_us: Percentiles::of(&o.latency),
                server_observed,
                histogram: encode_histogram(&o.latency),
                precision: Some(figures(
                    pts.map_or(&[][..], |p| p.as_slice()),
                    interval,
                    window_s,
                    (c.hits + c.misses, &o.latency),
                )),
            };
            (op.name().to_string(), r)
        })
        .collect()
}

/// Why the run stopped early, with the run's final count of errors: the requests in flight
/// when it stopped fail too, so the line agrees with the outcomes.
fn stopped_line(reached: Option<String>, totals: &Totals) -> Option<String> {
    reached.map(|r| {
        format!(
            "{r}; {} errors in all, with the requests in flight when it stopped",
            totals.counts.error_total()
        )
    })
}

/// Why the two reads of the server's counter cannot be subtracted: the server restarted or
/// reset its counters in between (another epoch, or a counter that went back).
fn restarted(
    before: &Result<Option<ServerCount>, SetupError>,
    after: &Result<Option<ServerCount>, SetupError>,
) -> Option<String> {
    let (Ok(Some(b)), Ok(Some(a))) = (before, after) else {
        return None;
    };
    // A set's servers restart one by one: each is judged on its own (`members_observed`).
    if !a.members.is_empty() && a.members.len() == b.members.len() && a.parts.is_none() {
        return None;
    }
    match (&b.epoch, &a.epoch) {
        (Some(x), Some(y)) if !crate::proto::target::same_epoch(x, y) => Some(format!(
            "the server restarted or reset its counters during the run ({x}, then {y}): its count is not comparable"
        )),
        _ if a.value < b.value => Some(format!(
            "the server's counter went back from {} to {} during the run (a restart or a reset): its count is not comparable",
            b.value, a.value
        )),
        _ => None,
    }
}

fn server_source(server: &ServerCounts) -> String {
    match &server.1 {
        Ok(Some(c)) => c.source.clone(),
        _ => String::new(),
    }
}

/// The server's `delta` against what loadgen sent of `what` (warm-up included). Connect
/// failures never reached the server; every other error may have, or not.
/// `per`: what one request adds to the count (the keys of a multi-get where the server counts
/// keys).
fn observed(
    source: String,
    delta: u64,
    (counts, warm): (&Counts, &Counts),
    what: &str,
    per: u64,
    multi: Option<(&Counts, &Counts)>,
) -> ServerObserved {
    let connect =
        counts.errors[ErrorKind::Connect.index()] + warm.errors[ErrorKind::Connect.index()];
    let mut expected = (counts.requests() + warm.requests() - connect) * per;
    let mut unsure = (counts.error_total() + warm.error_total() - connect) * per;
    // With `mget:N` in a mix only its requests count `per`, the others one each (the op's
    // own counts hold no connect errors: those are charged to no op).
    if let Some((m, mw)) = multi {
        expected = expected / per + (m.requests() + mw.requests()) * (per - 1);
        unsure = unsure / per + (m.error_total() + mw.error_total()) * (per - 1);
    }
    // A request sent again (`--retries`) reached the server once more; the send it follows
    // failed, and may or may not have been counted.
    let retries = (counts.retries + warm.retries) * per;
    let (expected, unknown) = (expected + retries, unsure + retries);
    let ok = count_matches(delta, expected, unknown);
    ServerObserved {
        source,
        delta: Some(delta),
        expected,
        unknown,
        matches: ok,
        not_comparable: false,
        note: (!ok).then(|| {
            format!(
                "the server counted {delta} {what}s but loadgen sent {} (warm-up included)",
                sent_text(expected, unknown, |n| n.to_string())
            )
        }),
        before: None,
        after: None,
        shared: false,
        members: Vec::new(),
        redirects: None,
    }
}

/// The server's count against what loadgen sent (warm-up included). `shared`: one of several
/// generators (`--instance`), so the count holds the others' requests and can only be checked
/// for holding ours; `merge` checks the sum.
fn server_observed(
    before: Result<Option<ServerCount>, SetupError>,
    after: Result<Option<ServerCount>, SetupError>,
    totals: &Totals,
    shared: bool,
) -> Option<ServerObserved> {
    let connect = totals.counts.errors[ErrorKind::Connect.index()]
        + totals.warm.errors[ErrorKind::Connect.index()];
    let expected = totals.counts.requests() + totals.warm.requests() - connect;
    if let Some(why) = restarted(&before, &after) {
        return Some(ServerObserved {
            source: after
                .map(|a| a.map(|a| a.source))
                .ok()
                .flatten()
                .unwrap_or_default(),
            delta: None,
            expected,
            unknown: 0,
            matches: false,
            note: Some(why),
            not_comparable: true,
            before: None,
            after: None,
            shared,
            members: Vec::new(),
            redirects: None,
        });
    }
    match (before, after) {
        (Ok(Some(b)), Ok(Some(a))) => {
            let delta = a.value.saturating_sub(b.value);
            let unsure = totals.counts.error_total() + totals.warm.error_total() - connect;
            let per = a.per_request.max(1);
            let members = members_observed(&b.members, &a.members);
            let what = if per > 1 { "key" } else { "lookup" };
            let multi = totals
                .ops
                .get(Op::Mget.index())
                .map(|o| (&o.counts, &o.warm));
            let all = (&totals.counts, &totals.warm);
            let mut o = observed(a.source, delta, all, what, per, multi);
            // SQL shards under --batch: each part of a split multi-get is a statement counted.
            if let (Some(pb), Some(pa)) = (b.parts, a.parts) {
                let parts = pa.saturating_sub(pb);
                let unknown = unsure * per * a.members.len().max(1) as u64;
                (o.expected, o.unknown) = (parts, unknown);
                o.matches = count_matches(delta, parts, unknown);
                o.note = (!o.matches).then(|| {
                    format!("the shards counted {delta} statements but loadgen sent {} (a multi-get is one per shard it reads; warm-up included)", sent_text(parts, unknown, |n| n.to_string()))
                });
            }
            o.members = members;
            (o.before, o.after) = (Some(b.value), Some(a.value));
            // A set of servers (not SQL shards' parts): compared server by server.
            if !o.members.is_empty() && a.parts.is_none() {
                over_members(&mut o, what);
            }
            let (expected, unknown) = (o.expected, o.unknown);
            o.redirects = b
                .redirects
                .zip(a.redirects)
                .map(|(b, a)| Redirects::between(b, a));
            if shared {
                o.shared = true;
                o.matches = delta + unknown >= expected;
                o.note = Some(if o.matches {
                    "includes the other generators' requests (--instance); `loadgen merge` \
                     of their results compares the server's count with their sum"
                        .to_string()
                } else {
                    format!("the server counted {delta} {what}s, fewer than the {expected} this generator sent")
                });
            }
            Some(o)
        }
        (Ok(None), _) | (_, Ok(None)) => None,
        (Err(e), _) | (_, Err(e)) => Some(ServerObserved {
            source: "unavailable".into(),
            delta: None,
            expected,
            unknown: 0,
            matches: false,
            note: Some(e.0.clone()),
            before: None,
            after: None,
            shared,
            not_comparable: false,
            members: Vec::new(),
            redirects: None,
        }),
    }
}

/// The CIs of a run's (or an op's) QPS and percentiles: `answered` over the window and the
/// whole `latency` histogram are the centers, its intervals' `points` give the widths.
fn figures(
    points: &[Point],
    interval: std::time::Duration,
    window_s: f64,
    (answered, latency): (u64, &Histogram<u64>),
) -> Figures {
    let centers = centers(per_s(answered, window_s), latency);
    Figures::of(points, interval.as_secs_f64(), centers).rounded()
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// System ticks over all ticks of the worker threads, at their end.
fn kernel_share(threads: &[Thread]) -> Option<f64> {
    let (user, sys) = threads
        .iter()
        .filter_map(|t| t.ticks)
        .fold((0, 0), |(u, s), (tu, ts)| (u + tu, s + ts));
    (user + sys > 0).then(|| round3(sys as f64 / (user + sys) as f64))
}

/// The server's CPU over the run next to the client's, and the rate at which the two together
/// would fill every core of this machine.
fn server_cpu(server: &ServerProcess, ns: Option<u64>, worker_ns: u64, requests: u64) -> ServerCpu {
    let (pid, process, note) = match server {
        ServerProcess::Process { pid, name } => (Some(*pid), Some(name.clone()), None),
        ServerProcess::InProcess => (
            Some(std::process::id()),
            Some("loadgen (embedded server)".to_string()),
            None,
        ),
        // A set's processes: the first one's pid, and every one named.
        ServerProcess::Set(all) => (
            all.first().map(|p| p.0),
            Some(
                all.iter()
                    .map(|(pid, name)| format!("{name} (pid {pid})"))
                    .collect::<Vec<_>>()
                    .join(" + "),
            ),
            None,
        ),
        ServerProcess::Unknown(why) => (None, None, Some(why.clone())),
    };
    let note = note.or_else(|| {
        ns.is_none()
            .then(|| "the server process ended during the run".to_string())
    });
    let per = |n: u64| (requests > 0).then(|| n as f64 / requests as f64 / 1e3);
    let per_request_us = ns.and_then(per);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu_bound_qps = match (per_request_us, per(worker_ns)) {
        (Some(s), Some(c)) if s + c > 0.0 => Some((cores * 1e6 / (s + c)).round()),
        _ => None,
    };
    ServerCpu {
        pid,
        process,
        cpu_s: ns.map(|n| (n as f64 / 1e6).round() / 1e3),
        per_request_us: per_request_us.map(|u| (u * 1e3).round() / 1e3),
        cpu_bound_qps,
        note,
    }
}

/// The workers' CPU over the run, with the whole process's and the wall time it took.
fn client_cpu(threads: &[Thread], (process_ns, wall_ns): (u64, u64), requests: u64) -> ClientCpu {
    let worker_ns = threads.iter().map(|t| t.cpu_ns).sum();
    ClientCpu {
        kernel_share: kernel_share(threads),
        ..ClientCpu::new(worker_ns, process_ns, wall_ns, threads.len(), requests)
            .with_busiest(busiest(threads))
    }
}

/// The share of the run the busiest worker thread was busy (its event loop not waiting).
fn busiest(threads: &[Thread]) -> Option<f64> {
    threads
        .iter()
        .filter(|t| t.busy.1 > 0)
        .map(|t| t.busy.0 as f64 / t.busy.1 as f64)
        .reduce(f64::max)
}
