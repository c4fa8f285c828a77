//! The embedded HTTP key-value server: the default target, so `loadgen run` works with nothing
//! installed. It serves the `usr` rows, derived from the id on each request (no memory per row),
//! and answers `GET /usr/<id>` with the tab-separated row (200) or 404, `GET /stats` with its own
//! counters. It listens on TCP, or on a Unix socket (`serve --unix PATH`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UnixListener};

use crate::transport::Listener;

/// Rows `lo..=hi` of the `usr` data set. Every row is derived from its id (row.rs), so the
/// store holds only the range and builds a row when it is asked for: any range costs the same
/// few bytes. Written rows (a future write path) would go in a small map consulted first.
pub struct Store {
    lo: u64,
    hi: u64,
}

impl Store {
    pub fn usr(lo: u64, hi: u64) -> Store {
        Store { lo, hi }
    }

    pub fn get(&self, id: u64) -> Option<Bytes> {
        if !(self.lo..=self.hi).contains(&id) {
            return None;
        }
        let mut row = Vec::with_capacity(64);
        crate::dataset::write_tsv(&mut row, id);
        Some(Bytes::from(row))
    }

    pub fn rows(&self) -> u64 {
        (self.hi - self.lo).saturating_add(1)
    }
}

/// The server's own counters: the server-side truth for the embedded target.
#[derive(Default)]
pub struct ServerStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl ServerStats {
    pub fn lookups(&self) -> u64 {
        self.hits.load(Ordering::Relaxed) + self.misses.load(Ordering::Relaxed)
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
    start_delayed(&Bind::Tcp(addr), rows, threads, Duration::ZERO)
}

/// `start` with a fixed service time per request (`serve --delay`): each answer waits `delay`
/// (an async sleep, so connections do not wait for each other; requests pipelined on one
/// connection are answered in turn), which gives a server of known capacity.
pub fn start_delayed(
    bind: &Bind,
    rows: (u64, u64),
    threads: usize,
    delay: Duration,
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
                accept_loop(listener, store, stats, delay).await;
            })
        })?;
    Ok(server)
}

async fn accept_loop(
    listener: Listener,
    store: Arc<Store>,
    stats: Arc<ServerStats>,
    delay: Duration,
) {
    loop {
        let Ok(sock) = listener.accept().await else {
            continue;
        };
        let (store, stats) = (store.clone(), stats.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let resp = answer(&store, &stats, req.uri().path());
                async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
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

fn answer(store: &Store, stats: &ServerStats, path: &str) -> Response<Full<Bytes>> {
    let reply = |code: StatusCode, body: Bytes| {
        let mut r = Response::new(Full::new(body));
        *r.status_mut() = code;
        r
    };
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
        let body = format!(
            "hits {}\nmisses {}\nrows {}\n",
            stats.hits.load(Ordering::Relaxed),
            stats.misses.load(Ordering::Relaxed),
            store.rows()
        );
        return reply(StatusCode::OK, Bytes::from(body));
    }
    reply(
        StatusCode::BAD_REQUEST,
        Bytes::from_static(b"use GET /usr/<id> or GET /stats\n"),
    )
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
    fn any_range_costs_no_memory_per_row() {
        let s = Store::usr(1, 10_000_000_000);
        assert_eq!(s.rows(), 10_000_000_000);
        assert!(is_row(9_999_999_999, &s.get(9_999_999_999).unwrap()));
        assert!(s.get(10_000_000_001).is_none());
        assert_eq!(Store::usr(0, u64::MAX).rows(), u64::MAX);
    }
}
