//! `run`'s flags as the library takes them: the validated `Plan`, the trace read once, the
//! metrics exporter's settings.

use std::time::Duration;

use loadgen::mix::{Mix, Op};
use loadgen::pacer::Arrival;
use loadgen::plan::{parse_duration, Mode, Plan, Stop};

use crate::args::{ArrivalArg, ModeArg, RunArgs};

pub fn plan_of(a: &RunArgs) -> Result<Plan, String> {
    let stop = match (a.duration, a.requests, &a.trace) {
        (_, Some(n), _) => Stop::Requests(n),
        (Some(d), None, _) => Stop::Duration(d),
        (None, None, Some(_)) => Stop::Trace,
        (None, None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    let warmup = a.warmup.unwrap_or(match (stop, &a.trace) {
        (Stop::Duration(_), None) => Duration::from_secs(1),
        _ => Duration::ZERO,
    });
    if a.ci.is_some() && (a.sweep.is_some() || a.slo.is_some()) {
        return Err("--ci ends one run once its CIs are narrow enough, and each step of --sweep or --slo runs -d: leave --ci out".into());
    }
    let trace = trace_of(a)?;
    let (lo, hi) = a.reconnect_backoff.split_once(',').ok_or_else(|| {
        format!(
            "bad --reconnect-backoff '{}': use MIN,MAX like 10ms,1s",
            a.reconnect_backoff
        )
    })?;
    let backoff = (parse_duration(lo)?, parse_duration(hi)?);
    if backoff.0 > backoff.1 || backoff.0.is_zero() {
        return Err(format!(
            "bad --reconnect-backoff '{}': MIN must be above 0 and at most MAX",
            a.reconnect_backoff
        ));
    }
    let plan = Plan {
        connections: a.connections,
        pipeline: a.pipeline,
        threads: a.threads.unwrap_or_else(loadgen::plan::default_threads),
        stop,
        warmup,
        keys: a.keys,
        dist: a.dist.clone(),
        query: a.query.clone(),
        mode: match a.mode {
            ModeArg::Prepared => Mode::Prepared,
            ModeArg::Simple => Mode::Simple,
        },
        verify: a.verify,
        timeout: a.timeout,
        interval: a.interval,
        seed: a.seed,
        rate: a.rate,
        arrival: match a.arrival {
            ArrivalArg::Uniform => Arrival::Uniform,
            ArrivalArg::Poisson => Arrival::Poisson,
        },
        reconnect_backoff: backoff,
        max_errors: a.max_errors,
        ci: a.ci.clone(),
        mix: trace
            .as_ref()
            .map_or_else(|| a.mix.clone(), |t| Mix::of_counts(&t.survey.ops)),
        insert_from: a.insert_from,
        instance: a.instance.clone(),
        write_queries: [
            (Op::Update, &a.query_update),
            (Op::Insert, &a.query_insert),
            (Op::Delete, &a.query_delete),
            (Op::Upsert, &a.query_upsert),
        ]
        .into_iter()
        .filter_map(|(op, q)| q.clone().map(|q| (op, q)))
        .collect(),
        txn: a.txn,
        batch: a.batch,
        reconnect_every: a.reconnect_every,
        retries: a.retries,
        ttl: a.ttl,
        trace,
        record_trace: a.record_trace.clone(),
        value_size: a.value_size.clone(),
        key_format: a.key_format.clone(),
    };
    plan.validate()?;
    Ok(plan)
}

/// `--trace`: the file read once (every line checked, its ops counted) before anything runs.
fn trace_of(a: &RunArgs) -> Result<Option<loadgen::plan::TracePlan>, String> {
    let Some(path) = &a.trace else {
        return Ok(None);
    };
    if !a.mix.read_only() {
        return Err(format!(
            "--trace replays the file's own ops, which --mix {} would change: leave --mix out",
            a.mix.name()
        ));
    }
    let survey = loadgen::trace::feed::Survey::read(path).map_err(|e| e.to_string())?;
    for w in survey.warnings() {
        eprintln!("loadgen: warning: {}: {w}", path.display());
    }
    Ok(Some(loadgen::plan::TracePlan {
        // Absolute, so the result's settings lead a repeat to it from any directory.
        path: std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
        speed: a.speed,
        survey,
    }))
}

pub fn metrics_config(a: &RunArgs) -> Result<Option<loadgen::metrics::MetricsConfig>, String> {
    let Some(addr) = &a.metrics else {
        if !a.run_label.is_empty() {
            return Err("--run-label needs --metrics ADDR".into());
        }
        return Ok(None);
    };
    let mut labels = Vec::new();
    for l in &a.run_label {
        // The key is checked with the other labels when the exporter starts (metrics.rs).
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| format!("bad --run-label '{l}': use KEY=VALUE"))?;
        labels.push((k.to_string(), v.to_string()));
    }
    Ok(Some(loadgen::metrics::MetricsConfig {
        addr: addr.clone(),
        linger: a.metrics_linger,
        labels,
        instance: a.instance.clone(),
        pages: loadgen::app::METRICS_PAGES,
    }))
}
