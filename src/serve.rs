//! The embedded HTTP key-value server: the default target, so `loadgen run` works with nothing
//! installed. It serves the `usr` rows, derived from the id on each request (no memory per row),
//! and answers `GET /usr/<id>` with the tab-separated row (200) or 404, `GET /usr?ids=1,2,3`
//! with a line `<id>\t<row>` per id found (a multi-get), `GET /stats` with its own
//! counters. It is writable: `PUT /usr/<id>` stores the body as the row (`If-Match: *` only
//! over a row that is there, `If-None-Match: *` only where none is; 204, or 412 when the
//! condition fails), `DELETE /usr/<id>` removes it (204, or 404). It listens on TCP, or on a
//! Unix socket (`serve --unix PATH`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UnixListener};

use crate::mix::Op;
use crate::server_stats::ServerStats;
use crate::transport::Listener;

/// Rows `lo..=hi` of the `usr` data set. Every row is derived from its id (dataset.rs), so the
/// store holds only the range and builds a row when it is asked for: any range costs the same
/// few bytes. Written rows go in a map consulted first (a deleted row is `None` there), only
/// once something was written, so a read-only run never takes its lock.
pub struct Store {
    lo: u64,
    hi: u64,
    written: RwLock<HashMap<u64, Option<Bytes>>>,
    any_written: AtomicBool,
}

impl Store {
    pub fn usr(lo: u64, hi: u64) -> Store {
        Store {
            lo,
            hi,
            written: RwLock::new(HashMap::new()),
            any_written: AtomicBool::new(false),
        }
    }

    pub fn get(&self, id: u64) -> Option<Bytes> {
        if self.any_written.load(Ordering::Acquire) {
            if let Some(row) = self.written.read().expect("store lock").get(&id) {
                return row.clone();
            }
        }
        if !(self.lo..=self.hi).contains(&id) {
            return None;
        }
        let mut row = Vec::with_capacity(64);
        crate::dataset::write_tsv(&mut row, id);
        Some(Bytes::from(row))
    }

    /// Applies a write of `op` to `id`, `row` the new row (unused by a delete). False: it
    /// changed nothing (update or delete of a missing row, insert over a present one).
    pub fn write(&self, op: Op, id: u64, row: Bytes) -> bool {
        let mut w = self.written.write().expect("store lock");
        self.any_written.store(true, Ordering::Release);
        let present = match w.get(&id) {
            Some(r) => r.is_some(),
            None => (self.lo..=self.hi).contains(&id),
        };
        let (done, new) = match op {
            Op::Update => (present, Some(row)),
            Op::Insert => (!present, Some(row)),
            Op::Upsert => (true, Some(row)),
            Op::Delete | Op::Read | Op::Mget => (present, None),
        };
        if done {
            w.insert(id, new);
        }
        done
    }

    pub fn rows(&self) -> u64 {
        (self.hi - self.lo).saturating_add(1)
    }
}

/// Where the server listens.
#[derive(Clone, Debug)]
pub enum Bind {
    /// Port 0: an ephemeral port.
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A running embedded server; dropping it does not stop it (it lives as long as the process).
pub struct Server {
    url: String,
    pub stats: Arc<ServerStats>,
    pub rows: u64,
}

impl Server {
    /// `http://127.0.0.1:PORT/usr/{key}`, or `http+unix://%2Fpath%2Fto.sock/usr/{key}`.
    pub fn url(&self) -> String {
        self.url.clone()
    }
}

/// Binds `addr` and serves rows `rows.0..=rows.1` on `threads` threads in the background.
pub fn start(addr: SocketAddr, rows: (u64, u64), threads: usize) -> std::io::Result<Server> {
    start_delayed(&Bind::Tcp(addr), rows, threads, Timing::default())
}

/// How long answers take: `delay` each (`serve --delay`), and 1 ms more during the first
/// `cold` from the first request (`serve --cold`): a server that warms up, as a cold cache
/// does, for testing that a too short warm-up is noticed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    pub delay: Duration,
    pub cold: Duration,
    /// `serve --noise AMP,EPOCH`: each epoch from the first request scales `delay` by a factor
    /// drawn in [1 - AMP, 1 + AMP]: a server whose speed wanders, for testing that CIs widen.
    pub noise: Option<(f64, Duration)>,
    /// `serve --drift PCT`: the delay grows by this share of itself each second from the first
    /// request: a server that slows down through a run, for testing that a drift is flagged.
    pub drift: f64,
}

/// What `--cold` adds to each answer while the server is cold.
const COLD_EXTRA: Duration = Duration::from_millis(1);

impl Timing {
    /// The wait for a request arriving at `now` (monotonic ns); `first` holds the first
    /// request's arrival.
    fn wait(&self, now: u64, first: &std::sync::OnceLock<u64>) -> Duration {
        if self.cold.is_zero() && self.noise.is_none() && self.drift == 0.0 {
            return self.delay;
        }
        let since = now.saturating_sub(*first.get_or_init(|| now));
        let delay = match self.noise {
            Some((amp, epoch)) => {
                let k = since / epoch.as_nanos().max(1) as u64;
                // A fixed draw per epoch (the key streams' generator, seeded by the epoch).
                let u = crate::keys::Rng::new(k ^ 0x006e_6f69_7365).unit();
                self.delay.mul_f64(1.0 + amp * (2.0 * u - 1.0))
            }
            None => self.delay,
        };
        let delay = delay.mul_f64(1.0 + self.drift * since as f64 / 1e9);
        match since < self.cold.as_nanos() as u64 {
            true => delay + COLD_EXTRA,
            false => delay,
        }
    }
}

/// `start` with a fixed service time per request (`serve --delay`): each answer waits `delay`
/// (an async sleep, so connections do not wait for each other; requests pipelined on one
/// connection are answered in turn), which gives a server of known capacity.
pub fn start_delayed(
    bind: &Bind,
    rows: (u64, u64),
    threads: usize,
    timing: Timing,
) -> std::io::Result<Server> {
    // One descriptor per client connection: take the whole hard limit.
    crate::fdlimit::raise();
    // Bound here, before the runtime, so a bad address is this call's error; made a tokio
    // listener inside the runtime that polls it.
    enum Bound {
        Tcp(std::net::TcpListener),
        Unix(std::os::unix::net::UnixListener),
    }
    let (bound, url) = match bind {
        Bind::Tcp(addr) => {
            let l = std::net::TcpListener::bind(addr)?;
            l.set_nonblocking(true)?;
            let url = format!("http://{}/usr/{{key}}", l.local_addr()?);
            (Bound::Tcp(l), url)
        }
        Bind::Unix(path) => {
            let l = Listener::bind_unix(path)?;
            let url = format!(
                "http+unix://{}/usr/{{key}}",
                crate::url::encode(&path.to_string_lossy())
            );
            (Bound::Unix(l), url)
        }
    };
    let store = Arc::new(Store::usr(rows.0, rows.1));
    let stats = Arc::new(ServerStats::default());
    let server = Server {
        url,
        stats: stats.clone(),
        rows: store.rows(),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("loadgen-serve")
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("loadgen-serve".into())
        .spawn(move || {
            rt.block_on(async move {
                let listener = match bound {
                    Bound::Tcp(l) => Listener::Tcp(TcpListener::from_std(l).expect("listener")),
                    Bound::Unix(l) => Listener::Unix(UnixListener::from_std(l).expect("listener")),
                };
                accept_loop(listener, store, stats, timing).await;
            })
        })?;
    Ok(server)
}

async fn accept_loop(
    listener: Listener,
    store: Arc<Store>,
    stats: Arc<ServerStats>,
    timing: Timing,
) {
    let first = Arc::new(std::sync::OnceLock::new());
    loop {
        let Ok(sock) = listener.accept().await else {
            continue;
        };
        let (store, stats, first) = (store.clone(), stats.clone(), first.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                // The delay counts from the request's arrival.
                let now = crate::timer::monotonic_ns();
                let delay = timing.wait(now, &first);
                let due = now + delay.as_nanos() as u64;
                // A read is answered at once; a write first takes its body.
                let write = matches!(*req.method(), Method::PUT | Method::DELETE);
                let read = (!write).then(|| answer(&store, &stats, req.uri()));
                let write = write.then(|| (store.clone(), stats.clone(), req));
                async move {
                    let resp = match (read, write) {
                        (Some(r), _) => r,
                        (None, Some((store, stats, req))) => {
                            answer_write(&store, &stats, req).await
                        }
                        (None, None) => unreachable!("a request is a read or a write"),
                    };
                    if !delay.is_zero() {
                        wait_until(due, delay).await;
                    }
                    Ok::<_, Infallible>(resp)
                }
            });
            // pipeline_flush: answers to pipelined requests go out in one write.
            let _ = http1::Builder::new()
                .pipeline_flush(true)
                .serve_connection(TokioIo::new(sock), svc)
                .await;
        });
    }
}

/// Waits for `due` on a timerfd: tokio's millisecond timer wheel would add up to a tick and a
/// half to every answer, so `--delay 2ms` would not be a 2 ms server.
async fn wait_until(due: u64, delay: Duration) {
    match crate::timer::PreciseSleep::new() {
        Ok(mut t) => t.until(due).await,
        Err(_) => tokio::time::sleep(delay).await,
    }
}

fn reply(code: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = code;
    r
}

/// PUT (update with `If-Match: *`, insert with `If-None-Match: *`, else upsert) or DELETE of
/// `/usr/<id>`, counted per op.
async fn answer_write(
    store: &Store,
    stats: &ServerStats,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let op = match *req.method() {
        Method::DELETE => Op::Delete,
        _ if req.headers().contains_key(hyper::header::IF_MATCH) => Op::Update,
        _ if req.headers().contains_key(hyper::header::IF_NONE_MATCH) => Op::Insert,
        _ => Op::Upsert,
    };
    let id = req
        .uri()
        .path()
        .strip_prefix("/usr/")
        .and_then(|id| id.parse::<u64>().ok());
    let Some(id) = id else {
        return reply(
            StatusCode::BAD_REQUEST,
            Bytes::from_static(b"use PUT or DELETE /usr/<id>\n"),
        );
    };
    let Ok(body) = req.into_body().collect().await else {
        return reply(StatusCode::BAD_REQUEST, Bytes::new());
    };
    stats.writes[op.index()].fetch_add(1, Ordering::Relaxed);
    match (store.write(op, id, body.to_bytes()), op) {
        (true, _) => reply(StatusCode::NO_CONTENT, Bytes::new()),
        (false, Op::Delete) => reply(StatusCode::NOT_FOUND, Bytes::new()),
        (false, _) => reply(StatusCode::PRECONDITION_FAILED, Bytes::new()),
    }
}

fn answer(store: &Store, stats: &ServerStats, uri: &hyper::Uri) -> Response<Full<Bytes>> {
    let path = uri.path();
    if let (Some(ids), "/usr") = (uri.query().and_then(|q| q.strip_prefix("ids=")), path) {
        return answer_bulk(store, stats, ids);
    }
    if let Some(id) = path.strip_prefix("/usr/") {
        return match id.parse::<u64>().ok().and_then(|id| store.get(id)) {
            Some(v) => {
                stats.hits.fetch_add(1, Ordering::Relaxed);
                reply(StatusCode::OK, v)
            }
            None => {
                stats.misses.fetch_add(1, Ordering::Relaxed);
                reply(StatusCode::NOT_FOUND, Bytes::new())
            }
        };
    }
    if path == "/stats" {
        let mut body = format!(
            "hits {}\nmisses {}\nmulti_get_keys {}\nrows {}\n",
            stats.hits.load(Ordering::Relaxed),
            stats.misses.load(Ordering::Relaxed),
            stats.multi_keys.load(Ordering::Relaxed),
            store.rows()
        );
        for op in Op::ALL.into_iter().filter(|o| o.writes()) {
            let n = stats.writes[op.index()].load(Ordering::Relaxed);
            body.push_str(&format!("{}s {n}\n", op.name()));
        }
        return reply(StatusCode::OK, Bytes::from(body));
    }
    reply(
        StatusCode::BAD_REQUEST,
        Bytes::from_static(b"use GET /usr/<id>, GET /usr?ids=1,2,3 or GET /stats\n"),
    )
}

/// `GET /usr?ids=1,2,3` (a multi-get, `--batch`): a line `<id>\t<row>` per id found, in the
/// order asked; each id counted as a hit or a miss.
fn answer_bulk(store: &Store, stats: &ServerStats, ids: &str) -> Response<Full<Bytes>> {
    let ids: Option<Vec<u64>> = ids.split(',').map(|i| i.parse().ok()).collect();
    let Some(ids) = ids.filter(|i| i.len() <= crate::mix::MAX_BATCH) else {
        return reply(
            StatusCode::BAD_REQUEST,
            Bytes::from_static(b"use GET /usr?ids=1,2,3 (at most 1000 ids)\n"),
        );
    };
    let mut body = Vec::with_capacity(ids.len() * 64);
    stats
        .multi_keys
        .fetch_add(ids.len() as u64, Ordering::Relaxed);
    for id in ids {
        let Some(row) = store.get(id) else {
            stats.misses.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        stats.hits.fetch_add(1, Ordering::Relaxed);
        body.extend_from_slice(format!("{id}\t").as_bytes());
        body.extend_from_slice(row.strip_suffix(b"\n").unwrap_or(&row));
        body.push(b'\n');
    }
    reply(StatusCode::OK, Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{matches, Cell, RowView};

    fn is_row(id: u64, value: &[u8]) -> bool {
        matches(id, RowView::<std::iter::Empty<Cell>>::Tsv(value))
    }

    #[test]
    fn store_rows_are_the_derived_rows() {
        let s = Store::usr(5, 1004);
        assert_eq!(s.rows(), 1000);
        assert!(is_row(5, &s.get(5).unwrap()));
        assert!(is_row(1004, &s.get(1004).unwrap()));
        assert!(s.get(4).is_none());
        assert!(s.get(1005).is_none());
    }

    #[test]
    fn writes_change_what_reads_see() {
        let s = Store::usr(1, 10);
        let row = Bytes::from_static(b"x");
        assert!(!s.write(Op::Update, 11, row.clone()));
        assert!(!s.write(Op::Insert, 5, row.clone()));
        assert!(s.write(Op::Update, 5, row.clone()));
        assert_eq!(s.get(5).unwrap(), row);
        assert!(s.write(Op::Insert, 11, row.clone()));
        assert_eq!(s.get(11).unwrap(), row);
        assert!(s.write(Op::Delete, 11, Bytes::new()));
        assert!(s.get(11).is_none());
        assert!(!s.write(Op::Delete, 11, Bytes::new()));
        assert!(!s.write(Op::Update, 11, row.clone()));
        assert!(s.write(Op::Upsert, 11, row.clone()));
        assert!(is_row(4, &s.get(4).unwrap()));
    }

    #[test]
    fn any_range_costs_no_memory_per_row() {
        let s = Store::usr(1, 10_000_000_000);
        assert_eq!(s.rows(), 10_000_000_000);
        assert!(is_row(9_999_999_999, &s.get(9_999_999_999).unwrap()));
        assert!(s.get(10_000_000_001).is_none());
        assert_eq!(Store::usr(0, u64::MAX).rows(), u64::MAX);
    }
}
