//! `loadgen run --metrics ADDR`: live Prometheus metrics on `GET /metrics`.
//!
//! Data flow: the collector in [`crate::run`] calls the hook from [`Exporter::hook`] once per
//! interval with the merged totals. The hook turns them into plain numbers (counters, latency
//! bucket counts, gauges) and publishes them as an immutable snapshot behind an `Arc`. A scrape
//! copies that `Arc` (the lock is held for a pointer copy) and renders the exposition text from it
//! outside any lock, so scrapes never slow the collector, and the request hot path never touches
//! any of this. The HTTP server (`server.rs`) is a task on the runtime that called
//! [`Exporter::start`]: in the binary that is the main thread's current_thread runtime, off the
//! worker threads. Text rendering lives in `render.rs`.
//!
//! Counters stay monotonic across the several runs of one target (`--sweep`, `--slo`): each run
//! restarts its totals from zero, so the exporter keeps the finished runs' counts as a base.
//!
//! The `target` label is the target's kind; a later target of a kind already seen in this run gets
//! `<kind>_<index>` (0-based position on the command line), the same tags `--hdr-log` writes. The
//! URL never becomes a label.

mod render;
mod server;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use crate::run::IntervalView;
use crate::totals::Totals;

pub use render::{Family, Format, BUCKETS, FAMILIES};

pub struct MetricsConfig {
    /// `IP:PORT` to listen on, exactly as given (`--metrics`).
    pub addr: String,
    /// Keep serving this long after the run (`--metrics-linger`).
    pub linger: Duration,
    /// `--run-label KEY=VALUE` pairs, added to every series.
    pub labels: Vec<(String, String)>,
    /// `--instance`: exported as the `instance_name` label (Prometheus owns `instance`).
    pub instance: Option<String>,
}

/// Labels loadgen sets itself; a `--run-label` may not reuse them.
const RESERVED: [&str; 6] = [
    "target",
    "outcome",
    "kind",
    "le",
    "version",
    "instance_name",
];

/// Limits of the HTTP server.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Connections served at once; more are accepted and closed at once.
    pub max_connections: usize,
    /// A request's headers must arrive within this (idle keep-alive connections included).
    pub header_timeout: Duration,
    /// A connection is closed gracefully (after its current response) once this old.
    pub max_connection_age: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            header_timeout: Duration::from_secs(10),
            max_connection_age: Duration::from_secs(60),
        }
    }
}

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
    pub async fn start(cfg: MetricsConfig) -> Result<Exporter, String> {
        Self::start_with(cfg, Limits::default()).await
    }

    pub(crate) async fn start_with(cfg: MetricsConfig, limits: Limits) -> Result<Exporter, String> {
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
        let shared = Arc::new(Shared::new(common));
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
    pub fn hook(&self) -> crate::run::Hook {
        let shared = self.shared.clone();
        Arc::new(move |v: &IntervalView| shared.update(v))
    }

    /// The exposition text as a scrape would get it now.
    pub fn render(&self, format: Format) -> String {
        self.shared.render(format)
    }

    /// Keeps serving for the configured linger (a Ctrl-C or SIGTERM cuts it short), then closes
    /// the port; open connections get their current response finished (at most 2 s).
    pub async fn finish(mut self) {
        if !self.linger.is_zero() {
            let ctrl_c = async {
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(self.linger) => {}
                _ = ctrl_c => {}
                _ = term => {}
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
fn common_labels(cfg: &MetricsConfig) -> Result<Vec<(String, String)>, String> {
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
            return Err(format!(
                "bad --run-label key '{k}': use letters, digits and _ (not starting with a digit or __)"
            ));
        }
        if RESERVED.contains(&k.as_str()) {
            return Err(format!(
                "bad --run-label key '{k}': loadgen sets that label itself"
            ));
        }
        if cfg.labels.iter().filter(|(o, _)| o == k).count() > 1 {
            return Err(format!("--run-label '{k}' is given more than once"));
        }
        out.push((k.clone(), v.clone()));
    }
    Ok(out)
}

/// Cumulative numbers of one target.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Cum {
    pub hits: u64,
    pub misses: u64,
    pub errors: [u64; 6],
    pub reconnects: u64,
    /// Latencies per bucket of [`BUCKETS`] (not cumulative); the last slot is above the largest
    /// bound (+Inf).
    pub buckets: [u64; BUCKETS.len() + 1],
    pub sum_ns: u128,
    pub count: u64,
}

impl Cum {
    /// Counters include the warm-up; the latency buckets hold counted requests only (the
    /// recorder never times warm-up requests).
    pub fn of(t: &Totals) -> Cum {
        let mut c = Cum {
            hits: t.counts.hits + t.warm.hits,
            misses: t.counts.misses + t.warm.misses,
            reconnects: t.counts.reconnects + t.warm.reconnects,
            ..Cum::default()
        };
        for (i, e) in c.errors.iter_mut().enumerate() {
            *e = t.counts.errors[i] + t.warm.errors[i];
        }
        let h = &t.latency;
        let mut b = 0;
        for v in h.iter_recorded() {
            let n = v.count_at_value();
            let value = v.value_iterated_to();
            // Values HdrHistogram cannot tell apart (one slot, 0.1% wide) go to the slot's start.
            let low = h.lowest_equivalent(value);
            while b < BUCKETS.len() && low > BUCKETS[b].1 {
                b += 1;
            }
            c.buckets[b] += n;
            c.sum_ns += u128::from(h.median_equivalent(value)) * u128::from(n);
            c.count += n;
        }
        c
    }

    fn add(&mut self, o: &Cum) {
        self.hits += o.hits;
        self.misses += o.misses;
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        self.reconnects += o.reconnects;
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a += b;
        }
        self.sum_ns += o.sum_ns;
        self.count += o.count;
    }
}

/// What a scrape renders for one target.
#[derive(Clone, Debug, Default)]
pub(crate) struct Point {
    pub target: String,
    pub c: Cum,
    pub qps: f64,
    pub in_flight: u64,
    pub connections: u64,
    pub rate: Option<f64>,
}

/// One target as the hook tracks it.
#[derive(Clone, Debug)]
struct Series {
    index: usize,
    kind: String,
    label: String,
    /// `run_start_unix` of the run `cur` belongs to; a new value starts a new run.
    run_start: f64,
    /// Finished runs of this target (sweep and SLO steps).
    base: Cum,
    cur: Cum,
    qps: f64,
    in_flight: u64,
    connections: u64,
    rate: Option<f64>,
}

impl Series {
    fn point(&self) -> Point {
        let mut c = self.base.clone();
        c.add(&self.cur);
        Point {
            target: self.label.clone(),
            c,
            qps: self.qps,
            in_flight: self.in_flight,
            connections: self.connections,
            rate: self.rate,
        }
    }
}

pub(crate) struct Shared {
    common: Vec<(String, String)>,
    series: Mutex<Vec<Series>>,
    published: RwLock<Arc<Vec<Point>>>,
}

impl Shared {
    fn new(common: Vec<(String, String)>) -> Shared {
        Shared {
            common,
            series: Mutex::new(Vec::new()),
            published: RwLock::new(Arc::new(Vec::new())),
        }
    }

    pub(crate) fn update(&self, v: &IntervalView) {
        let c = Cum::of(v.totals);
        let iv = v.interval;
        let answered = iv.counts.hits + iv.counts.misses + iv.warm.hits + iv.warm.misses;
        let qps = if v.last || v.interval_s <= 0.0 {
            0.0
        } else {
            answered as f64 / v.interval_s
        };
        let mut all = lock(&self.series);
        let pos = match all.iter().position(|s| s.index == v.target_index) {
            Some(p) => p,
            None => {
                let repeated = all.iter().any(|s| s.kind == v.kind);
                let label = if repeated {
                    format!("{}_{}", v.kind, v.target_index)
                } else {
                    v.kind.to_string()
                };
                all.push(Series {
                    index: v.target_index,
                    kind: v.kind.to_string(),
                    label,
                    run_start: f64::NAN,
                    base: Cum::default(),
                    cur: Cum::default(),
                    qps: 0.0,
                    in_flight: 0,
                    connections: 0,
                    rate: None,
                });
                all.len() - 1
            }
        };
        let s = &mut all[pos];
        if s.run_start.to_bits() != v.run_start_unix.to_bits() {
            let done = std::mem::take(&mut s.cur);
            s.base.add(&done);
            s.run_start = v.run_start_unix;
        }
        s.cur = c;
        s.qps = qps;
        // After the last interval nothing is in flight and the connections are closed.
        s.in_flight = if v.last { 0 } else { v.in_flight };
        s.connections = if v.last { 0 } else { v.connections };
        s.rate = v.rate;
        let points: Vec<Point> = all.iter().map(Series::point).collect();
        drop(all);
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(points);
    }

    pub(crate) fn render(&self, format: Format) -> String {
        let points = self
            .published
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        render::render(&points, &self.common, format)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
