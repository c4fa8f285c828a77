//! `loadgen run` as a library call: start the embedded server if needed, run each target in
//! turn with the same plan (same seed, so the same key streams), write the result file (and its
//! HTML report and chart beside it) after every target, stop cleanly on Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::sync::watch;

use crate::control::Control;
use crate::dispatch::{run_target, Embedded};
use crate::error::Exit;
use crate::output::Dest;
use crate::plan::{Plan, Stop};
use crate::proto::target::SetupError;
use crate::result::{Machine, ResultFile, RunResult, Settings};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// The pages `--metrics` serves on `/`: the report's, handed down to metrics (which sits below
/// the report and does not import it).
pub const METRICS_PAGES: crate::metrics::Pages = crate::metrics::Pages {
    live: crate::report::html::live_page,
    live_csp: crate::report::html::LIVE_CSP,
    report: crate::report::html::render,
    report_csp: crate::report::html::CSP,
};

pub struct RunOptions {
    /// Target URLs; empty means the embedded server.
    pub targets: Vec<String>,
    /// Where the result JSON goes (see `output`); None: `results/<time>-<kind>.json`.
    /// Standard output (`-`, `/dev/stdout`) is left to the caller, which prints the document.
    pub output: Option<PathBuf>,
    pub format: Format,
    pub progress: bool,
    /// Rows of the embedded server.
    pub embedded_rows: (u64, u64),
    /// Per-interval hooks (metrics, interval log); see `control::IntervalView`.
    pub hooks: Vec<crate::control::Hook>,
    /// Label of this generator in results and metrics (`--instance`).
    pub instance: Option<String>,
    /// Serve Prometheus metrics while running (`--metrics`).
    pub metrics: Option<crate::metrics::MetricsConfig>,
    /// Write an HdrHistogram interval log here (`--hdr-log`).
    pub hdr_log: Option<PathBuf>,
    /// Begin at this Unix time, seconds (`--start-at`), so several generators start together.
    pub start_at: Option<f64>,
    /// One run per target, a sweep over connection counts, or an SLO search.
    pub model: Model,
    /// The server process whose CPU the report shows (`--server-pid`); else found from the
    /// port each target listens on.
    pub server_pid: Option<u32>,
    /// Where progress lines, notes and warnings go (`sink::stderr` in the binary).
    pub say: crate::sink::Sink,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Model {
    Single,
    Sweep(Vec<usize>),
    Slo(crate::sweep::Slo),
}

/// A run that finished: its result, where it went, and how the process should exit.
pub struct Finished {
    pub file: ResultFile,
    /// Where the result was written (None: nowhere, or standard output).
    pub path: Option<PathBuf>,
    /// The chart written beside it.
    pub chart: Option<PathBuf>,
    /// The HTML report written beside it.
    pub report: Option<PathBuf>,
    /// Clean, or errors seen or stopped early.
    pub exit: Exit,
    /// The metrics endpoint, still serving: call `finish` after printing the report, so
    /// `--metrics-linger` keeps the last values up without holding the report back.
    pub exporter: Option<crate::metrics::Exporter>,
}

pub fn settings_of(plan: &Plan) -> Settings {
    Settings {
        connections: plan.connections,
        pipeline: plan.pipeline,
        threads: plan.threads.min(plan.connections),
        duration_s: match plan.stop {
            Stop::Duration(d) => Some(d.as_secs_f64()),
            Stop::Requests(_) | Stop::Trace => None,
        },
        requests: match plan.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration(_) | Stop::Trace => None,
        },
        warmup_s: plan.warmup.as_secs_f64(),
        keys: format!("{}-{}", plan.keys.0, plan.keys.1),
        dist: plan.dist.name(),
        mode: match plan.mode {
            crate::plan::Mode::Prepared => "prepared".into(),
            crate::plan::Mode::Simple => "simple".into(),
        },
        verify: plan.verify,
        timeout_ms: plan.timeout.as_millis() as u64,
        interval_ms: plan.interval.as_millis() as u64,
        seed: plan.seed,
        seeds: None,
        rate: plan.rate,
        arrival: format!("{:?}", plan.arrival).to_lowercase(),
        query: plan.query.clone(),
        mix: (!plan.mix.read_only()).then(|| plan.mix.name()),
        txn: (plan.txn > 1).then_some(plan.txn),
        batch: (plan.batch > 1).then_some(plan.batch),
        retries: (plan.retries > 0).then_some(plan.retries),
        ttl: (plan.ttl > 0).then_some(plan.ttl),
        reconnect_every: plan.reconnect_every,
        value_size: plan.value_size.as_ref().map(|v| v.to_string()),
        key_format: plan.key_format.as_ref().map(|k| k.text()),
        write_queries: (!plan.write_queries.is_empty()).then(|| {
            plan.write_queries
                .iter()
                .map(|(op, sql)| (op.name().to_string(), sql.clone()))
                .collect()
        }),
        reconnect_backoff_us: Some(
            [plan.reconnect_backoff.0, plan.reconnect_backoff.1].map(|d| d.as_micros() as u64),
        ),
        max_errors: plan.max_errors,
        ci: plan.ci.as_ref().map(|g| g.text()),
        insert_from: plan.insert_from,
        trace: plan.trace.as_ref().map(|t| crate::result::TraceSettings {
            file: t.path.display().to_string(),
            lines: t.survey.lines,
            span_s: t.survey.span_us as f64 / 1e6,
            speed: t.speed,
            timed: t.survey.timed,
        }),
    }
}

/// Installs Ctrl-C / SIGTERM handling: the first signal stops the run (results kept), set-up
/// included. The handlers are registered here, before any set-up work runs, not when the task
/// first gets to run.
pub fn stop_on_signals(say: crate::sink::Sink) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let mut signals = crate::signals::StopSignals::install();
    tokio::spawn(async move {
        signals.next().await;
        say("loadgen: stopping, keeping the results measured so far");
        let _ = tx.send(true);
    });
    rx
}

pub async fn execute(
    plan: &Plan,
    mut opts: RunOptions,
    stop: watch::Receiver<bool>,
) -> Result<Finished, SetupError> {
    plan.validate()?;
    check_open_files(plan, &opts)?;
    // Bind the metrics port and create the log before anything runs: a taken port is a setup error.
    let exporter = match opts.metrics.take() {
        Some(cfg) => Some(crate::metrics::Exporter::start(cfg).await?),
        None => None,
    };
    if let Some(e) = &exporter {
        if opts.progress {
            let a = e.local_addr();
            (opts.say)(&format!(
                "loadgen: metrics at http://{a}/metrics, live page at http://{a}/"
            ));
        }
        e.set_settings(settings_of(plan));
        opts.hooks.push(e.hook());
    }
    let hdr_log = match &opts.hdr_log {
        Some(p) => Some(crate::hdrlog::IntervalLog::create(p)?),
        None => None,
    };
    if let Some(l) = &hdr_log {
        opts.hooks.push(l.hook(opts.say.clone()));
    }
    if let Some(at) = opts.start_at {
        wait_until(at, opts.progress.then_some(&opts.say), stop.clone()).await;
    }
    let result = execute_targets(plan, &opts, stop).await;
    if let Some(l) = &hdr_log {
        if let Err(e) = l.finish() {
            (opts.say)(&format!("loadgen: {e}"));
        }
    }
    match result {
        Ok(mut out) => {
            if let Some(x) = &exporter {
                x.run_ended(Some(&out.file));
            }
            out.exporter = exporter;
            Ok(out)
        }
        Err(e) => {
            if let Some(x) = exporter {
                x.run_ended(None);
                x.finish().await;
            }
            Err(e)
        }
    }
}

/// `loadgen: running target 2 of 3: URL` before each of several targets.
fn announce(opts: &RunOptions, (i, n): (usize, usize), target: &str) {
    if opts.progress && n > 1 {
        let shown = crate::url::redact_str(target);
        (opts.say)(&format!(
            "loadgen: running target {} of {n}: {shown}",
            i + 1
        ));
    }
}

/// Raises the open-files limit and refuses a run whose connections it cannot hold.
fn check_open_files(plan: &Plan, opts: &RunOptions) -> Result<(), SetupError> {
    let connections = match &opts.model {
        Model::Sweep(counts) => counts.iter().copied().max().unwrap_or(0),
        _ => plan.connections,
    };
    let per = crate::fdlimit::PerConn {
        embedded: opts.targets.is_empty() || opts.targets.iter().any(|t| t == "embedded"),
        paced: plan.rate.is_some() || matches!(opts.model, Model::Slo(_)),
    };
    crate::fdlimit::ensure(connections, per, plan.threads.min(connections))
        .map_err(SetupError::from)
}

/// The run's hooks: the progress line on stderr first (it printed before the others ran),
/// then the exporters'.
fn hooks(opts: &RunOptions, plan: &Plan, targets: usize) -> Vec<crate::control::Hook> {
    let mut hooks: Vec<crate::control::Hook> = Vec::new();
    if opts.progress {
        let say = opts.say.clone();
        // A sweep's or SLO search's steps are runs of their own: no one length to count down.
        let (length, targets) = match opts.model {
            Model::Single => (crate::report::text::RunLength::of(plan), targets),
            _ => (crate::report::text::RunLength::Open, 0),
        };
        hooks.push(std::sync::Arc::new(
            move |v: &crate::control::IntervalView| {
                if let Some(row) = v.progress_row {
                    let iv = v.interval;
                    let errors = iv.counts.error_total() + iv.warm.error_total();
                    let reconnects = iv.counts.reconnects + iv.warm.reconnects;
                    let done = v.totals.counts.requests();
                    say(&format!(
                        "{}{}{}",
                        crate::report::text::progress_line(row, errors, reconnects, v.interval_s),
                        crate::report::text::op_rates(iv, v.interval_s),
                        length.left(v.end_s, done, row.qps, (v.target_index, targets)),
                    ));
                }
            },
        ));
    }
    hooks.extend(opts.hooks.iter().cloned());
    hooks
}

/// Sleeps until Unix time `at` (or Ctrl-C).
async fn wait_until(at: f64, say: Option<&crate::sink::Sink>, mut stop: watch::Receiver<bool>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    if at <= now {
        return;
    }
    if let Some(say) = say {
        say(&format!("loadgen: waiting {:.1}s for --start-at", at - now));
    }
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_secs_f64(at - now)) => {}
        _ = stop.changed() => {}
    }
}

async fn execute_targets(
    plan: &Plan,
    opts: &RunOptions,
    stop: watch::Receiver<bool>,
) -> Result<Finished, SetupError> {
    // A path we cannot write (a directory, a symlink loop) is refused before anything runs.
    let dest = match &opts.output {
        Some(p) => Some(
            Dest::of(p).map_err(|e| SetupError(format!("cannot write -o {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let to_file = dest.as_ref().map_or(true, Dest::is_file);
    // Shard URLs (`?keys=`) one after another are one sharded target.
    let mut targets = crate::proto::shards::ranges::group(&opts.targets);
    if targets.is_empty() {
        targets.push("embedded".into());
    }
    // Bad input (a --server-pid that does not exist) is refused before anything starts.
    let server = server_of(opts.server_pid)?;
    let embedded = start_embedded(plan, opts, &targets)?;
    let mut control = Control {
        stop: stop.clone(),
        progress: opts.progress,
        target_index: 0,
        hooks: hooks(opts, plan, targets.len()),
        server,
        say: opts.say.clone(),
    };
    let mut file = ResultFile {
        loadgen_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: crate::date::now_rfc3339_us(),
        interrupted: false,
        settings: settings_of(plan),
        machine: this_machine(),
        instance: opts.instance.clone(),
        runs: Vec::new(),
        sweeps: Vec::new(),
        slo: Vec::new(),
    };
    let mut saved = Saved::default();
    let mut exit = Exit::Clean;
    for (i, t) in targets.iter().enumerate() {
        if *stop.borrow() {
            break;
        }
        control.target_index = i;
        announce(opts, (i, targets.len()), t);
        let before = file.runs.len();
        if let Err(e) = run_one(t, plan, opts, &control, embedded.as_ref(), &mut file).await {
            // Stopped during a target's set-up: report what earlier targets measured.
            if *stop.borrow() && !file.runs.is_empty() {
                file.interrupted = true;
                if to_file {
                    write_result(&file, opts, dest.as_ref(), &mut saved);
                }
                break;
            }
            // Keep what earlier targets measured, then report the setup error.
            if !file.runs.is_empty() {
                write_result(&file, opts, dest.as_ref(), &mut saved);
            }
            return Err(e);
        }
        for r in &file.runs[before..] {
            if r.error_total > 0 || r.stopped_early.is_some() {
                exit = Exit::Errors;
            }
            file.interrupted |= r.interrupted;
        }
        // A file is rewritten after every target, so a crash keeps what was measured; a
        // device, FIFO or descriptor gets the document once, at the end.
        if to_file {
            write_result(&file, opts, dest.as_ref(), &mut saved);
        }
    }
    // An SLO no rate met is a threshold that failed (an interrupted search decided nothing).
    if file
        .slo
        .iter()
        .any(|s| s.best_rate.is_none() && s.stopped != "interrupted")
    {
        exit = Exit::Errors;
    }
    if !to_file {
        write_result(&file, opts, dest.as_ref(), &mut saved);
    }
    Ok(Finished {
        file,
        path: saved.ok.then_some(saved.path).flatten(),
        chart: saved.chart,
        report: saved.report,
        exit,
        exporter: None,
    })
}

/// The server whose CPU the report shows: `--server-pid` (which must exist), else found later.
fn server_of(pid: Option<u32>) -> Result<crate::cpu::ServerProcess, SetupError> {
    match pid {
        Some(pid) => match crate::cpu::ServerProcess::pid(pid) {
            s @ crate::cpu::ServerProcess::Process { .. } => Ok(s),
            _ => Err(SetupError(format!(
                "--server-pid {pid}: no such process on this machine; give the pid of the \
                 server's main process (e.g. the postmaster's) or leave it out"
            ))),
        },
        None => Ok(crate::cpu::ServerProcess::default()),
    }
}

/// The embedded server, started when a target is `embedded`.
fn start_embedded(
    plan: &Plan,
    opts: &RunOptions,
    targets: &[String],
) -> Result<Option<Embedded>, SetupError> {
    if !targets.iter().any(|t| t == "embedded") {
        return Ok(None);
    }
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let server = crate::serve::start(addr, opts.embedded_rows, plan.threads)
        .map_err(|e| SetupError(format!("cannot start the embedded server: {e}")))?;
    if opts.progress {
        (opts.say)(&format!(
            "loadgen: embedded server with {} rows on {}",
            crate::report::text::thousands(server.rows),
            server.url()
        ));
    }
    Ok(Some(Embedded {
        url: server.url(),
        stats: server.stats.clone(),
    }))
}

/// One target by the run's model: its runs (and its sweep or SLO search) go into `file`.
async fn run_one(
    t: &str,
    plan: &Plan,
    opts: &RunOptions,
    control: &Control,
    embedded: Option<&Embedded>,
    file: &mut ResultFile,
) -> Result<(), SetupError> {
    match &opts.model {
        Model::Single => run_target(t, plan, control, embedded)
            .await
            .map(|r| file.runs.push(r)),
        Model::Sweep(counts) => {
            crate::sweep::sweep(t, plan, counts, control, embedded, &mut file.runs)
                .await
                .map(|s| file.sweeps.push(s))
        }
        Model::Slo(slo) => {
            crate::sweep::slo_search(t, plan, slo, control, embedded, &mut file.runs)
                .await
                .map(|s| file.slo.push(s))
        }
    }
}

/// The machine the run measured from.
fn this_machine() -> Machine {
    Machine {
        cores: crate::plan::default_threads(),
        os: std::env::consts::OS.to_string(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

/// Where the result went so far.
#[derive(Default)]
struct Saved {
    path: Option<PathBuf>,
    chart: Option<PathBuf>,
    report: Option<PathBuf>,
    /// The last write succeeded.
    ok: bool,
}

fn write_result(file: &ResultFile, opts: &RunOptions, dest: Option<&Dest>, saved: &mut Saved) {
    if dest.is_some_and(Dest::is_stdout) {
        return; // the caller prints the document there
    }
    let p = saved.path.get_or_insert_with(|| match &opts.output {
        Some(p) => p.clone(),
        None => {
            // Named by what the document holds, decided before the first target finishes.
            let kind = match &opts.model {
                Model::Sweep(_) => "sweep",
                Model::Slo(_) => "slo",
                Model::Single if crate::proto::shards::ranges::group(&opts.targets).len() > 1 => {
                    "compare"
                }
                Model::Single => file.runs.first().map(|r| r.kind.as_str()).unwrap_or("run"),
            };
            // The default directory is ours to make; a directory the user named is not.
            let _ = std::fs::create_dir_all("results");
            crate::report::default_path(std::path::Path::new("results"), kind)
        }
    });
    let json = serde_json::to_vec_pretty(file).expect("result serializes");
    let written = match dest {
        Some(d) => d.write(&json),
        None => crate::output::write(p, &json),
    };
    saved.ok = match written {
        Ok(()) => true,
        Err(e) => {
            (opts.say)(&format!("loadgen: cannot write {}: {e}", p.display()));
            false
        }
    };
    if !saved.ok || !dest.map_or(true, Dest::is_file) {
        return; // no chart beside a device, a FIFO or a descriptor
    }
    // The HTML report beside the JSON, by the same rules as the chart.
    let html_path = crate::output::beside(p, "html");
    let html = crate::report::html::render(file);
    match crate::output::write(&html_path, html.as_bytes()) {
        Ok(()) => saved.report = Some(html_path),
        Err(e) => (opts.say)(&format!(
            "loadgen: cannot write {}: {e}",
            html_path.display()
        )),
    }
    // Charts beside the JSON: the comparison as bars, a sweep as QPS against connections.
    let chart = if !file.sweeps.is_empty() {
        let series: Vec<(String, Vec<(f64, f64)>)> = file
            .sweeps
            .iter()
            .map(|s| {
                (
                    s.kind.clone(),
                    s.steps
                        .iter()
                        .map(|st| (st.connections as f64, st.qps))
                        .collect(),
                )
            })
            .collect();
        Some(crate::report::svg::line_chart_log_x(
            "QPS by connection count",
            "connections",
            "lookups/s",
            &series,
        ))
    } else if file.runs.len() > 1 && file.slo.is_empty() {
        let bars: Vec<(String, f64)> = file
            .runs
            .iter()
            .map(|r| (run_name(r, &file.runs), r.qps))
            .collect();
        Some(crate::report::svg::bar_chart(
            "Point lookups per second",
            "lookups/s",
            &bars,
        ))
    } else {
        None
    };
    if let Some(svg) = chart {
        let svg_path = crate::output::beside(p, "svg");
        match crate::output::write(&svg_path, svg.as_bytes()) {
            Ok(()) => saved.chart = Some(svg_path),
            Err(e) => (opts.say)(&format!(
                "loadgen: cannot write {}: {e}",
                svg_path.display()
            )),
        }
    }
}

/// A short bar label: the kind, plus the pipeline depth or index when kinds repeat.
fn run_name(r: &RunResult, all: &[RunResult]) -> String {
    let same = all.iter().filter(|o| o.kind == r.kind).count();
    if same > 1 {
        let i = all
            .iter()
            .filter(|o| o.kind == r.kind)
            .position(|o| std::ptr::eq(o, r))
            .unwrap_or(0);
        format!("{} #{}", r.kind, i + 1)
    } else {
        r.kind.clone()
    }
}
