//! `loadgen merge a.json b.json ...`: one result from the result files of several generators
//! that loaded the same target(s), e.g. N pods of a Kubernetes Indexed Job.
//!
//! Runs are grouped by position: run *i* of every file must be the same kind of target (the
//! generators ran the same command). For each group:
//!
//! - requests, hits, misses, errors (per kind), reconnects and warm-up requests are summed;
//! - latency percentiles come from the merged latency histogram (`runs[].histogram` of every file,
//!   decoded and added bucket by bucket), never from averaging percentiles;
//! - **QPS**: each run measured over its own window `[started_at + warm-up, + duration_s]`. When
//!   the windows overlap (the generators ran together, the normal case with `--start-at`), the
//!   merged QPS is the **sum of the runs' QPS**: the aggregate rate the target served while they
//!   all ran. With identical windows that is exactly total answered / window. `duration_s` is the
//!   longest window. When the windows do not overlap (the generators ran one after another)
//!   summing would invent load that never happened at once, so QPS is total answered / summed
//!   windows and `duration_s` is the summed windows (with a warning). A window opens at
//!   `started_at` (to the microsecond) + `connect_s` + warm-up: windows that meet within the
//!   millisecond rounding of `connect_s` and `duration_s` ran one after the other. Files from
//!   before have whole-second stamps: their windows closer than 1 s count as overlapping.
//! - the timeline is merged by wall-clock time: each run's rows are shifted by its window's start
//!   after the earliest one's, and rows at the same time are summed (qps, hits, misses, errors,
//!   in-flight, connections, reconnects); their p50/p99 are the maximum of the rows' (an upper
//!   bound: the files hold no per-interval histograms). Runs one after another follow each other;
//! - service and lag percentiles: in closed loop service time equals latency, so they come from
//!   the merged histogram too; for paced runs (`-R`) the files carry no service/lag histogram, so
//!   count, min, mean and max are exact and p50..p99.9 are the maximum over the generators, an
//!   upper bound of the true merged percentile (with a warning);
//! - `server_observed`: generators that ran together on one server each read its counter over
//!   their own window, which holds the others' lookups too; the merged count is the change from
//!   the earliest read before to the latest read after, against the sum of what they sent.
//!   Otherwise (one after another, or each its own server) the counts add up;
//! - `server_cpu`: on one server together, each generator read all of its CPU: charged once (the
//!   highest reading) over every generator's requests; otherwise the readings add up;
//! - per op of a mix that writes (`runs[].ops`): counts and errors summed, QPS as the run's, latency
//!   from the merged per-op histograms (`ops.<op>.histogram`; files from before it give upper
//!   bounds, with a warning). The server's per-op counts are summed when every part read one and
//!   the counters were the parts' own: generators that ran one after another, or each against its
//!   own server (the embedded one). Run together on one server, a part's count exceeds what it
//!   sent (it holds the others' requests too): the count is dropped, with a warning;
//! - client CPU: times summed, per-request CPU recomputed, utilization the highest of any
//!   generator (the one closest to saturation), `saturated` if any was.
//!
//! Files whose workloads differ (key range, distribution, query mode, SQL, `--mix`, `--txn`) are
//! refused;
//! differing connection counts or pipeline depths only warn. Settings of the merged file:
//! connections, threads, `requests` and `rate` summed, `seeds` listing every seed when they
//! differ, the rest from the first file. `machine` sums the cores of each distinct host and lists
//! the hostnames; `instance` is `merged(a,b,...)`, naming each input by
//! its `instance` or, without one, its file name. A run's durability settings come from the first
//! file (a warning when the servers reported different ones).

use crate::error::ConfigError;
use crate::stats::Figures;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod group;
mod input;
mod server;
mod sums;
use group::{
    first_error_samples, group_histogram, group_qps, merge_client_cpu, merge_rates,
    service_and_lag, stopped_early, warn_differences, Windows,
};
pub use input::Input;
use server::{merge_observed, merge_server_cpu, sum_observed};
use sums::{add_histograms, bound, round1, round3};

use crate::result::{
    encode_histogram, Machine, OpResult, Percentiles, ResultFile, RunResult, TimelineRow,
};

/// What `loadgen merge` does: reads, merges, says the warnings through `say`.
pub fn merge_files(paths: &[PathBuf], say: &crate::sink::Sink) -> Result<ResultFile, ConfigError> {
    let inputs = paths
        .iter()
        .map(|p| read_input(p))
        .collect::<Result<Vec<_>, _>>()?;
    let (file, warnings) = merge(&inputs)?;
    for w in warnings {
        say(&format!("loadgen: warning: {w}"));
    }
    Ok(file)
}

pub fn read_input(path: &Path) -> Result<Input, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut file: ResultFile = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a loadgen result file: {e}", path.display()))?;
    // A file from an older loadgen may carry a password: nothing of it is shown unredacted.
    crate::redact::file(&mut file);
    let name = file.instance.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string())
    });
    Ok(Input { name, file })
}

/// Merges parsed result files; returns the merged file and warnings for stderr.
pub fn merge(inputs: &[Input]) -> Result<(ResultFile, Vec<String>), ConfigError> {
    let mut warnings = Vec::new();
    let first = inputs
        .first()
        .ok_or("nothing to merge: give result files")?;
    check_compatible(inputs, &mut warnings)?;

    let mut runs = Vec::new();
    for i in 0..first.file.runs.len() {
        runs.push(merge_group(inputs, i, &mut warnings)?);
    }

    let files: Vec<&ResultFile> = inputs.iter().map(|x| &x.file).collect();
    let mut settings = first.file.settings.clone();
    settings.connections = files.iter().map(|f| f.settings.connections).sum();
    settings.threads = files.iter().map(|f| f.settings.threads).sum();
    settings.duration_s = files
        .iter()
        .filter_map(|f| f.settings.duration_s)
        .reduce(f64::max);
    settings.requests = files
        .iter()
        .map(|f| f.settings.requests)
        .sum::<Option<u64>>();
    settings.rate = files.iter().map(|f| f.settings.rate).sum::<Option<f64>>();
    settings.warmup_s = files
        .iter()
        .map(|f| f.settings.warmup_s)
        .fold(0.0, f64::max);

    let seeds: Vec<u64> = files.iter().map(|f| f.settings.seed).collect();
    settings.seeds = seeds.iter().any(|&s| s != seeds[0]).then_some(seeds);

    // Cores per distinct host: two generators on one machine share its cores.
    let mut hostnames: Vec<String> = Vec::new();
    let mut cores: BTreeMap<&str, usize> = BTreeMap::new();
    for (n, f) in files.iter().enumerate() {
        if !f.machine.hostname.is_empty() && !hostnames.contains(&f.machine.hostname) {
            hostnames.push(f.machine.hostname.clone());
        }
        let host = match f.machine.hostname.as_str() {
            "" => inputs[n].name.as_str(),
            h => h,
        };
        let c = cores.entry(host).or_default();
        *c = (*c).max(f.machine.cores);
    }
    let machine = Machine {
        cores: cores.values().sum(),
        os: first.file.machine.os.clone(),
        hostname: hostnames.join(","),
    };
    let names: Vec<&str> = inputs.iter().map(|x| x.name.as_str()).collect();
    let mut merged = ResultFile {
        loadgen_version: first.file.loadgen_version.clone(),
        started_at: earliest(files.iter().map(|f| f.started_at.as_str())),
        interrupted: files.iter().any(|f| f.interrupted),
        settings,
        machine,
        instance: Some(format!("merged({})", names.join(","))),
        runs,
        sweeps: Vec::new(),
        slo: Vec::new(),
    };
    // Inputs given straight to `merge` (not through `read_input`) are redacted here.
    crate::redact::file(&mut merged);
    let warnings = warnings
        .iter()
        .map(|w| crate::url::redact_text(w))
        .collect();
    Ok((merged, warnings))
}

/// One setting of an input, as text for comparison and messages.
type Field<'a> = dyn Fn(&Input) -> String + 'a;

fn check_compatible(inputs: &[Input], warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let first = &inputs[0];
    for x in inputs {
        if !x.file.sweeps.is_empty() || !x.file.slo.is_empty() {
            return Err(ConfigError(format!(
                "{}: holds a --sweep or --slo result; merge combines plain runs only",
                x.name
            )));
        }
        if x.file.runs.is_empty() {
            return Err(ConfigError(format!("{}: holds no runs", x.name)));
        }
    }
    let differ = |what: &str, f: &Field<'_>| -> Option<String> {
        let v0 = f(first);
        if inputs.iter().all(|x| f(x) == v0) {
            return None;
        }
        let all: Vec<String> = inputs
            .iter()
            .map(|x| format!("{}: {}", x.name, f(x)))
            .collect();
        Some(format!("{what} differ ({})", all.join(", ")))
    };
    // Different workloads: a merged latency distribution or QPS would describe nothing real.
    let refuse: [(&str, &Field); 7] = [
        ("key ranges (--keys)", &|x| x.file.settings.keys.clone()),
        ("key distributions (--dist)", &|x| {
            x.file.settings.dist.clone()
        }),
        ("query modes (--mode)", &|x| x.file.settings.mode.clone()),
        ("queries (--query)", &|x| {
            x.file.settings.query.clone().unwrap_or_default()
        }),
        ("mixes (--mix)", &|x| {
            x.file
                .settings
                .mix
                .clone()
                .unwrap_or_else(|| "read=100".into())
        }),
        ("writes per transaction (--txn)", &|x| {
            x.file.settings.txn.unwrap_or(1).to_string()
        }),
        ("retries (--retries)", &|x| {
            x.file.settings.retries.unwrap_or(0).to_string()
        }),
    ];
    for (what, f) in refuse {
        if let Some(m) = differ(what, f) {
            return Err(ConfigError(format!(
                "cannot merge: {m}; the generators ran different workloads"
            )));
        }
    }
    if let Some(m) = differ("run counts", &|x| x.file.runs.len().to_string()) {
        return Err(ConfigError(format!(
            "cannot merge: {m}; every generator must run the same targets in the same order"
        )));
    }
    for i in 0..first.file.runs.len() {
        if let Some(m) = differ(&format!("kinds of target #{}", i + 1), &|x| {
            x.file.runs[i].kind.clone()
        }) {
            return Err(ConfigError(format!(
                "cannot merge: {m}; every generator must run the same targets in the same order"
            )));
        }
    }
    // Same workload, different shape: fine to add up, but worth a note.
    let warn: [(&str, &Field); 4] = [
        ("connection counts (-c)", &|x| {
            x.file.settings.connections.to_string()
        }),
        ("pipeline depths (-p)", &|x| {
            x.file.settings.pipeline.to_string()
        }),
        ("loop models (-R)", &|x| match x.file.settings.rate {
            Some(r) => format!("{r}/s"),
            None => "closed loop".into(),
        }),
        ("loadgen versions", &|x| x.file.loadgen_version.clone()),
    ];
    for (what, f) in warn {
        if let Some(m) = differ(what, f) {
            warnings.push(m);
        }
    }
    if inputs.len() > 1 && differ("seeds", &|x| x.file.settings.seed.to_string()).is_none() {
        warnings.push(format!(
            "all generators used --seed {}: they sent the same key sequences (use a different --seed per generator)",
            first.file.settings.seed
        ));
    }
    Ok(())
}

/// Measured window of a run, Unix seconds: its clock starts when its connections are open.
fn window(x: &Input, r: &RunResult) -> Result<(f64, f64), ConfigError> {
    let t = crate::date::parse_rfc3339(&r.started_at)
        .map_err(|e| format!("{}: run started_at: {e}", x.name))?;
    let s = t + r.connect_s + x.file.settings.warmup_s;
    Ok((s, s + r.duration_s))
}

fn merge_group(
    inputs: &[Input],
    i: usize,
    warnings: &mut Vec<String>,
) -> Result<RunResult, ConfigError> {
    let runs: Vec<&RunResult> = inputs.iter().map(|x| &x.file.runs[i]).collect();
    let r0 = runs[0];
    let label = format!("{} (target #{})", r0.kind, i + 1);

    let hist = group_histogram(inputs, &runs, i)?;
    let latency_us = Percentiles::of(&hist);

    // Windows and QPS.
    let wins = inputs
        .iter()
        .zip(&runs)
        .map(|(x, r)| window(x, r))
        .collect::<Result<Vec<_>, _>>()?;
    let (windows, qps, duration_s) = group_qps(&runs, &wins, &label, warnings);
    let concurrent = windows.concurrent;
    let durations = windows.durations.clone();

    let errors = sum_errors(runs.iter().map(|r| &r.errors));
    let ops = merge_ops(inputs, &runs, &label, &windows, warnings)?;
    let error_samples = first_error_samples(&runs);
    let stopped = stopped_early(inputs, &runs);
    warn_differences(inputs, &runs, &label, warnings);

    let (service_us, lag_us) = service_and_lag(&runs, &latency_us, &label, warnings);
    let rate = merge_rates(&runs, concurrent, &durations);

    let hosts: Vec<(&str, usize)> = inputs
        .iter()
        .map(|x| (x.file.machine.hostname.as_str(), x.file.machine.cores))
        .collect();
    let requests: u64 = runs.iter().map(|r| r.requests).sum();
    let warmup_requests: u64 = runs.iter().map(|r| r.warmup_requests).sum();
    let all_requests = requests + warmup_requests;
    let client_cpu = merge_client_cpu(&runs, all_requests);

    Ok(RunResult {
        target: r0.target.clone(),
        kind: r0.kind.clone(),
        label: r0.label.clone(),
        transport: r0.transport.clone(),
        tls: r0.tls.clone(),
        socket: r0.socket.clone(),
        // Generators that ran different drivers have no one driver to name.
        driver: r0
            .driver
            .clone()
            .filter(|d| runs.iter().all(|r| r.driver.as_ref() == Some(d))),
        started_at: earliest(runs.iter().map(|r| r.started_at.as_str())),
        interrupted: runs.iter().any(|r| r.interrupted),
        stopped_early: stopped,
        duration_s: round3(duration_s),
        qps: round1(qps),
        requests,
        hits: runs.iter().map(|r| r.hits).sum(),
        misses: runs.iter().map(|r| r.misses).sum(),
        error_total: errors.values().sum(),
        unsure: runs.iter().map(|r| r.unsure).sum(),
        retries: runs.iter().map(|r| r.retries).sum(),
        errors,
        error_samples,
        reconnects: runs.iter().map(|r| r.reconnects).sum(),
        warmup_requests,
        connected: runs.iter().map(|r| r.connected).sum(),
        connect_s: runs.iter().map(|r| r.connect_s).fold(0.0, f64::max),
        connect_failed: runs.iter().map(|r| r.connect_failed).sum(),
        connect_error: runs.iter().find_map(|r| r.connect_error.clone()),
        server_cpu: merge_server_cpu(&hosts, &runs, concurrent, all_requests, &client_cpu),
        latency_us,
        service_us,
        lag_us,
        connect_us: None,
        rate,
        client_cpu,
        server_observed: merge_observed(&runs, concurrent, &label, warnings),
        ops,
        durability: r0.durability.clone(),
        // The window that gives the merged qps gives the merged keys/s.
        keys: crate::result::KeysResult::sum(
            runs.iter().map(|r| r.keys.as_ref()),
            runs.iter().map(|r| r.hits + r.misses).sum::<u64>() as f64 / qps,
        ),
        timeline: group_timeline(&runs, &wins),
        precision: merged_precision(runs.iter().map(|r| r.precision.as_ref())),
        ci_goal: None, // each part ran to its own goal
        histogram: encode_histogram(&hist),
        verdict: crate::result::Verdict::combine(
            inputs
                .iter()
                .zip(&runs)
                .map(|(x, r)| (x.name.as_str(), &r.verdict)),
        ),
        // Each part judged its own machine; its verdict above carries that.
        machine_load: None,
    })
}

/// Errors by kind, summed.
fn sum_errors<'a>(maps: impl Iterator<Item = &'a BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for m in maps {
        for (k, v) in m {
            *errors.entry(k.clone()).or_default() += v;
        }
    }
    errors
}

/// Each op of the group's runs (a mix that writes), merged as the run's totals are.
fn merge_ops(
    inputs: &[Input],
    runs: &[&RunResult],
    label: &str,
    windows: &Windows,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<String, OpResult>, ConfigError> {
    let names: BTreeSet<&String> = runs.iter().flat_map(|r| r.ops.keys()).collect();
    let mut ops = BTreeMap::new();
    for name in names {
        let parts: Vec<(&str, &OpResult)> = inputs
            .iter()
            .zip(runs)
            .filter_map(|(x, r)| r.ops.get(name).map(|o| (x.name.as_str(), o)))
            .collect();
        let (latency_us, histogram) = if parts.iter().all(|(_, o)| !o.histogram.is_empty()) {
            let hist = add_histograms(
                parts.iter().map(|(x, o)| (*x, o.histogram.as_str())),
                &format!("{label} {name}"),
            )?;
            (Percentiles::of(&hist), encode_histogram(&hist))
        } else {
            warnings.push(format!(
                "{label}: a file from an older loadgen has no {name} histogram; the merged {name} \
                 percentiles are upper bounds (the highest of any generator)"
            ));
            (
                bound(parts.iter().map(|(_, o)| &o.latency_us)),
                String::new(),
            )
        };
        let errors = sum_errors(parts.iter().map(|(_, o)| &o.errors));
        let (hits, misses) = (
            parts.iter().map(|(_, o)| o.hits).sum::<u64>(),
            parts.iter().map(|(_, o)| o.misses).sum::<u64>(),
        );
        let server_observed = if parts.len() == runs.len() {
            sum_observed(
                &parts,
                windows.concurrent,
                &format!("{label} {name}"),
                warnings,
            )
        } else {
            None
        };
        let op = OpResult {
            requests: parts.iter().map(|(_, o)| o.requests).sum(),
            qps: round1(windows.qps(parts.iter().map(|(_, o)| o.qps), hits + misses)),
            hits,
            misses,
            error_total: errors.values().sum(),
            unsure: parts.iter().map(|(_, o)| o.unsure).sum(),
            retries: parts.iter().map(|(_, o)| o.retries).sum(),
            errors,
            latency_us,
            server_observed,
            histogram,
            precision: merged_precision(parts.iter().map(|(_, o)| o.precision.as_ref())),
        };
        ops.insert(name.clone(), op);
    }
    Ok(ops)
}

/// One part's CIs as they are; several parts' intervals do not line up (nor do their
/// per-interval percentiles add), so a merged figure has none and says why.
fn merged_precision<'a>(parts: impl Iterator<Item = Option<&'a Figures>>) -> Option<Figures> {
    let parts: Vec<Option<&Figures>> = parts.collect();
    match parts.as_slice() {
        [one] => one.cloned(),
        _ => Some(Figures::none(&format!(
            "merged from {} parts, whose intervals do not line up: each part's file has its own",
            parts.len()
        ))),
    }
}

/// The parts' timelines on one clock: each shifted by when its window opened after the first.
fn group_timeline(runs: &[&RunResult], wins: &[(f64, f64)]) -> Vec<TimelineRow> {
    let first_start = wins.iter().map(|w| w.0).fold(f64::MAX, f64::min);
    merge_timelines(
        runs.iter()
            .zip(wins)
            .map(|(r, w)| (r.timeline.as_slice(), w.0 - first_start)),
    )
}

/// Rows placed on one clock, each timeline shifted by its window's start after the first's
/// (seconds): rows at the same wall-clock time (to the millisecond) are summed, p50/p99 the
/// highest of the rows; runs one after another follow each other instead of adding up.
pub fn merge_timelines<'a>(
    timelines: impl Iterator<Item = (&'a [TimelineRow], f64)>,
) -> Vec<TimelineRow> {
    let mut by_t: BTreeMap<i64, TimelineRow> = BTreeMap::new();
    for (rows, offset) in timelines {
        for row in rows {
            let t_s = row.t_s + offset;
            let key = (t_s * 1000.0).round() as i64;
            match by_t.get_mut(&key) {
                None => {
                    by_t.insert(key, TimelineRow { t_s, ..row.clone() });
                }
                Some(m) => {
                    m.add_counts(row);
                    m.qps += row.qps;
                    m.in_flight += row.in_flight;
                    m.connections += row.connections;
                }
            }
        }
    }
    by_t.into_values().collect()
}

/// The earliest of RFC 3339 times (falls back to the first when one does not parse).
fn earliest<'a>(times: impl Iterator<Item = &'a str>) -> String {
    let mut best: Option<(f64, &str)> = None;
    let mut first: Option<&str> = None;
    for t in times {
        first.get_or_insert(t);
        if let Ok(v) = crate::date::parse_rfc3339(t) {
            match best {
                Some((b, _)) if b <= v => {}
                _ => best = Some((v, t)),
            }
        }
    }
    best.map(|(_, t)| t)
        .or(first)
        .unwrap_or_default()
        .to_string()
}
