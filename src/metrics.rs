//! `loadgen run --metrics ADDR`: live Prometheus metrics on `GET /metrics`, and a live page on
//! `GET /` that fetches `GET /live.json` once per interval (`live.rs`), the same numbers; once
//! the run has ended, `/` serves its HTML report.
//!
//! Data flow: the worker threads keep live counters and latency buckets, a block per thread
//! (`crate::cells`); a scrape sums them, so `/metrics` is current when it is read. The
//! collector (`crate::collector`) calls the hook from [`Exporter::hook`] once per interval:
//! it hands over the run's blocks and the interval's gauges, published as an immutable snapshot
//! behind an `Arc`. A scrape copies that `Arc` (the lock is held for a pointer copy) and renders
//! the exposition text outside any lock. The request hot path writes only its own thread's
//! block (relaxed stores, no read-modify-write). The HTTP server (`server.rs`) is a task on the
//! runtime that called [`Exporter::start`]: in the binary that is the main thread's
//! current_thread runtime, off the worker threads. Text rendering lives in `render.rs`.
//!
//! Counters stay monotonic across the several runs of one target (`--sweep`, `--slo`): each run
//! restarts its totals from zero, so the exporter keeps the finished runs' counts as a base.
//!
//! The `target` label is the target's kind; a later target of a kind already seen in this run gets
//! `<kind>_<index>` (0-based position on the command line), the same tags `--hdr-log` writes. The
//! URL never becomes a label.

mod live;
mod pages;
mod point;
mod render;
mod server;
mod shared;

use crate::error::ConfigError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use crate::control::IntervalView;

pub use pages::Pages;
pub use point::BUCKETS;
pub use render::{Family, Format, FAMILIES};
pub(crate) use server::Limits;
use shared::Shared;

pub struct MetricsConfig {
    /// `IP:PORT` to listen on, exactly as given (`--metrics`).
    pub addr: String,
    /// Keep serving this long after the run (`--metrics-linger`).
    pub linger: Duration,
    /// `--run-label KEY=VALUE` pairs, added to every series.
    pub labels: Vec<(String, String)>,
    /// `--instance`: exported as the `instance_name` label (Prometheus owns `instance`).
    pub instance: Option<String>,
    /// The HTML pages `/` serves ([`crate::app::METRICS_PAGES`]).
    pub pages: Pages,
}

/// Labels loadgen sets itself; a `--run-label` may not reuse them.
const RESERVED: [&str; 8] = [
    "target",
    "op",
    "outcome",
    "kind",
    "le",
    "version",
    "instance_name",
    "server",
];

/// The running exporter: a listening socket, its accept task and the published numbers.
pub struct Exporter {
    shared: Arc<Shared>,
    addr: SocketAddr,
    linger: Duration,
    stop: watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
    slots: Arc<Semaphore>,
    max_connections: usize,
}

impl Exporter {
    /// Validates the labels and binds `cfg.addr` now, so a taken port is a setup error before
    /// anything runs; then serves on the current tokio runtime until [`Exporter::finish`].
    pub async fn start(cfg: MetricsConfig) -> Result<Exporter, ConfigError> {
        Self::start_with(cfg, Limits::default()).await
    }

    pub(crate) async fn start_with(
        cfg: MetricsConfig,
        limits: Limits,
    ) -> Result<Exporter, ConfigError> {
        let want: SocketAddr = cfg.addr.trim().parse().map_err(|_| {
            format!(
                "cannot serve metrics on {}: not an IP:PORT address (use e.g. 127.0.0.1:9464)",
                cfg.addr
            )
        })?;
        let common = common_labels(&cfg)?;
        let listener = tokio::net::TcpListener::bind(want)
            .await
            .map_err(|e| bind_error(&cfg.addr, &e))?;
        let addr = listener.local_addr().unwrap_or(want);
        let shared = Arc::new(Shared::new(common, cfg.pages));
        let (stop, stop_rx) = watch::channel(false);
        let slots = Arc::new(Semaphore::new(limits.max_connections));
        let server = tokio::spawn(server::accept_loop(
            listener,
            shared.clone(),
            slots.clone(),
            limits,
            stop_rx,
        ));
        Ok(Exporter {
            shared,
            addr,
            linger: cfg.linger,
            stop,
            server: Some(server),
            slots,
            max_connections: limits.max_connections,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The per-interval hook: cheap (one pass over the latency histogram's recorded buckets and
    /// a pointer swap), never blocks on a scrape.
    pub fn hook(&self) -> crate::control::Hook {
        let shared = self.shared.clone();
        Arc::new(move |v: &IntervalView| shared.update(v))
    }

    /// The exposition text as a scrape would get it now.
    pub fn render(&self, format: Format) -> String {
        self.shared.render(format)
    }

    /// What `/live.json` serves now.
    pub fn live_json(&self) -> String {
        self.shared.live_json()
    }

    /// The run's settings, for the live page's settings line and its polling interval.
    pub fn set_settings(&self, settings: crate::result::Settings) {
        self.shared.set_settings(settings);
    }

    /// The run has ended: from now on `/` serves `file`'s HTML report (None: the run ended
    /// without a result) and `/live.json` says `"done": true`, so an open live page reloads.
    pub fn run_ended(&self, file: Option<&crate::result::ResultFile>) {
        self.shared.finish(file);
    }

    /// How long `finish` keeps serving (`--metrics-linger`).
    pub fn linger(&self) -> Duration {
        self.linger
    }

    /// Keeps serving for the configured linger (a Ctrl-C or SIGTERM cuts it short), then closes
    /// the port; open connections get their current response finished (at most 2 s).
    pub async fn finish(mut self) {
        if !self.linger.is_zero() {
            let mut signals = crate::signals::StopSignals::install();
            tokio::select! {
                _ = tokio::time::sleep(self.linger) => {}
                _ = signals.next() => {}
            }
        }
        self.stop.send_replace(true);
        if let Some(h) = self.server.take() {
            let _ = h.await;
        }
        let all = u32::try_from(self.max_connections).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.slots.acquire_many(all)).await;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // Without `finish` (an early return): stop accepting, which closes the port.
        self.stop.send_replace(true);
    }
}

fn bind_error(addr: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let why = match e.kind() {
        K::AddrInUse => "address already in use (choose another --metrics port)".to_string(),
        K::AddrNotAvailable => {
            "no such address on this machine (use a local address, e.g. 127.0.0.1:9464)".to_string()
        }
        K::PermissionDenied => {
            "permission denied (ports below 1024 need privileges; choose another --metrics port)"
                .to_string()
        }
        _ => e.to_string(),
    };
    format!("cannot serve metrics on {addr}: {why}")
}

/// `instance_name` and the run labels, validated (names are also checked by the CLI; a library
/// caller gets the same errors).
fn common_labels(cfg: &MetricsConfig) -> Result<Vec<(String, String)>, ConfigError> {
    let mut out: Vec<(String, String)> = Vec::new();
    if let Some(i) = cfg.instance.as_deref().filter(|i| !i.is_empty()) {
        out.push(("instance_name".into(), i.to_string()));
    }
    for (k, v) in &cfg.labels {
        let ok = !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && !k.starts_with("__");
        if !ok {
            return Err(ConfigError(format!(
                "bad --run-label key '{k}': use letters, digits and _ (not starting with a digit or __)"
            )));
        }
        if RESERVED.contains(&k.as_str()) {
            return Err(ConfigError(format!(
                "bad --run-label key '{k}': loadgen sets that label itself"
            )));
        }
        if cfg.labels.iter().filter(|(o, _)| o == k).count() > 1 {
            return Err(ConfigError(format!(
                "--run-label '{k}' is given more than once"
            )));
        }
        out.push((k.clone(), v.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
