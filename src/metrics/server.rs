//! The HTTP side: hyper 1 HTTP/1.1 on a task of the current runtime. Only `GET` (and HEAD) of
//! `/metrics`, `/` (the live page) and `/live.json` are answered; other paths get 404, other
//! methods 405. Abuse is bounded: at most
//! `max_connections` at once (more are accepted and closed), request headers must arrive within
//! `header_timeout` (idle keep-alive connections included), connections are closed gracefully
//! after `max_connection_age`, and garbage gets hyper's 400 and a closed connection.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    X_CONTENT_TYPE_OPTIONS,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::render::Format;
use super::shared::Shared;

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

pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stopped(&mut stop) => return,
            r = listener.accept() => r,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over the cap: dropping the stream closes it.
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve(stream, shared.clone(), permit, limits, stop.clone()));
    }
}

async fn serve(
    stream: TcpStream,
    shared: Arc<Shared>,
    _permit: OwnedSemaphorePermit,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let svc = service_fn(move |req: Request<Incoming>| {
        let r = respond(&shared, &req);
        async move { Ok::<_, Infallible>(r) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(64 * 1024)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopped(&mut stop) => {}
        _ = tokio::time::sleep(limits.max_connection_age) => {}
    }
    // Finish the response being written, then close.
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
}

/// Resolves once the exporter stops (or is dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn respond(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if !matches!(path, "/metrics" | "/" | "/live.json") {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: loadgen serves GET /metrics, / (the live page) and /live.json\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: use GET\n",
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if path == "/" {
        let (page, csp) = shared.page();
        return body(
            Bytes::from(page.as_bytes().to_vec()),
            "text/html; charset=utf-8",
            Some(csp),
        );
    }
    if path == "/live.json" {
        return body(Bytes::from(shared.live_json()), "application/json", None);
    }
    let accept: Vec<&str> = req
        .headers()
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let accept = (!accept.is_empty()).then(|| accept.join(","));
    let format = Format::negotiate(accept.as_deref());
    body(
        Bytes::from(shared.render(format)),
        format.content_type(),
        None,
    )
}

/// A 200 that is never cached (the numbers change every interval), its type not sniffed.
fn body(b: Bytes, content_type: &'static str, csp: Option<&'static str>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(b));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Some(csp) = csp {
        h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(csp));
    }
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
