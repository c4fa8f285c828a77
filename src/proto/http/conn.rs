//! HTTP key-value endpoints: `http://host:port/path/{key}` (the key replaces `{key}`, in the
//! path or in the query, or is appended to the path when the URL has none). GET per lookup over
//! keep-alive HTTP/1.1, pipelined to `-p`; 200 is a hit, 404 a miss. The embedded server is this
//! target plus access to the server's own counters.
//!
//! Query params: loadgen's own options (`OPTIONS`) are taken out of the request; every other
//! param belongs to the server and is sent as written (`?format=raw`), so unlike the other
//! targets an HTTP URL accepts params loadgen does not know.

use std::sync::Arc;
use std::time::Duration;

use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::caps::{Caps, Counted, ALL_WRITES};
use crate::proto::http::codec::HttpCodec;
use crate::proto::pipelined::StreamConn;
use crate::proto::sniff::{Hello, Kind};
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::server_stats::ServerStats;
use crate::transport::{Endpoint, TlsClient, TlsInfo};
use crate::url::TargetUrl;

pub struct HttpTarget {
    endpoint: Endpoint,
    host: String,
    prefix: String,
    suffix: String,
    verify: bool,
    connect_timeout: Duration,
    stats: Option<Arc<ServerStats>>,
    /// `https://`: TLS from the first byte.
    tls: Option<TlsClient>,
    /// Keys per request (`--batch`; 1 without).
    batch: usize,
}

impl HttpTarget {
    /// loadgen's options in an HTTP URL (read by the table's option check), never sent to the server.
    /// `pipeline` is kept so URLs written for older versions still run: `-p` sets the depth.
    /// `cacert`, `cert`, `key`: curl's names, for `https://` (`transport::DIRECT_OPTIONS`).
    pub const OPTIONS: &'static [&'static str] = &["pipeline", "cacert", "cert", "key"];

    pub fn new(
        url: &TargetUrl,
        plan: &Plan,
        stats: Option<Arc<ServerStats>>,
    ) -> Result<HttpTarget, SetupError> {
        super::legacy_pipeline::check(url, plan.pipeline)?;
        let (prefix, suffix) = request_target(url);
        Ok(HttpTarget {
            endpoint: super::endpoint(url)?,
            host: host_header(url),
            prefix,
            suffix,
            verify: plan.verify,
            connect_timeout: plan.timeouts().connect,
            stats,
            tls: match url.scheme.as_str() {
                "https" => Some(crate::transport::direct(url)?),
                _ => None,
            },
            batch: plan.multi_get().max(1),
        })
    }
}

/// The request target before and after the key: the path, then the server's params as written.
fn request_target(url: &TargetUrl) -> (String, String) {
    let server: Vec<&str> = url
        .query
        .iter()
        .zip(&url.query_raw)
        .filter(|((k, _), _)| !HttpTarget::OPTIONS.contains(&k.as_str()))
        .map(|(_, raw)| raw.as_str())
        .collect();
    let query = if server.is_empty() {
        String::new()
    } else {
        format!("?{}", server.join("&"))
    };
    let path = format!("/{}", url.path);
    if let Some((a, b)) = path.split_once("{key}") {
        (a.to_string(), format!("{b}{query}"))
    } else if let Some((a, b)) = query.split_once("{key}") {
        (format!("{path}{a}"), b.to_string())
    } else if path.ends_with('/') {
        (path, query)
    } else {
        (format!("{path}/"), query)
    }
}

/// The `Host` header: the URL's host and port; over a socket, whose URL host is the path,
/// `localhost`, the name a server behind a socket is usually asked for.
fn host_header(url: &TargetUrl) -> String {
    if url.scheme == "http+unix" {
        return "localhost".into();
    }
    match url.port {
        Some(p) => format!("{}:{p}", url.host),
        None => url.host.clone(),
    }
}

impl Target for HttpTarget {
    type Conn = StreamConn<HttpCodec>;

    fn kind(&self) -> &'static str {
        if self.stats.is_some() {
            "embedded"
        } else {
            "http"
        }
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// `OPTIONS *`: a request about the server, not a key. Not over TLS (`https://`).
    fn hello(&self) -> Option<Hello> {
        let options = || Hello::new(Kind::Http, &b"OPTIONS * HTTP/1.0\r\n\r\n"[..]);
        self.tls.is_none().then(options)
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        StreamConn::connect(
            &self.endpoint,
            self.connect_timeout,
            self.tls.as_ref(),
            HttpCodec::new(&self.host, &self.prefix, &self.suffix),
            self.verify,
        )
        .await
    }

    fn tls(&self) -> Option<TlsInfo> {
        self.tls.as_ref().and_then(TlsClient::negotiated)
    }

    /// HTTP/1.1 answers pipelined requests in order. Reads are GETs, writes PUTs and DELETEs on the same URL (an endpoint that does not
    /// take them answers with errors, 405, counted as `server` errors); a multi-get is one
    /// `GET /usr?ids=k1,...,kN`, the bulk form `loadgen serve` answers (`codec/bulk.rs`) and
    /// counts per key.
    const CAPS: Caps = Caps {
        multi_get: Some(Counted::Keys),
        pipeline: usize::MAX,
        writes: ALL_WRITES,
        ..Caps::READS
    };

    /// A multi-get needs a URL whose key is its last path segment.
    fn refuse(&self, plan: &Plan) -> Result<(), SetupError> {
        let n = plan.multi_get();
        if n > 0 && (!self.prefix.ends_with('/') || !self.suffix.is_empty()) {
            return Err(SetupError(format!(
                "a multi-get of {n} keys (--batch, mget:N) on HTTP sends GET /PATH?ids=k1,...,kN: use a URL whose key is its last path segment (http://host:port/PATH/{{key}}) with no query"
            )));
        }
        Ok(())
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        Ok(self.stats.as_ref().map(|s| {
            let ops = s.per_op();
            ServerCount {
                epoch: None,
                value: ops.iter().sum(),
                source: "embedded server requests".into(),
                ops,
                members: Vec::new(),
                // The embedded server counts each key of a multi-get.
                per_request: self.batch as u64,
                redirects: None,
                parts: None,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> (String, String) {
        request_target(&TargetUrl::parse(url).unwrap())
    }

    #[test]
    fn loadgen_options_are_removed_and_server_params_kept() {
        let t = target("http://h:1/usr/{key}?pipeline=1&format=raw");
        assert_eq!(t, ("/usr/".into(), "?format=raw".into()));
        assert_eq!(
            target("http://h:1/usr/{key}?pipeline=1"),
            ("/usr/".into(), "".into())
        );
        assert_eq!(target("http://h:1/usr"), ("/usr/".into(), "".into()));
        assert_eq!(
            target("http://h:1/kv?id={key}&pipeline=0&q=a%26b"),
            ("/kv?id=".into(), "&q=a%26b".into())
        );
        assert_eq!(
            target("http://h:1/usr/?format=raw"),
            ("/usr/".into(), "?format=raw".into())
        );
    }
}
