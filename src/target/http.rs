//! HTTP key-value endpoints: `http://host:port/path/{key}` (the key replaces `{key}`, or is
//! appended when the URL has none). GET per lookup over keep-alive HTTP/1.1; 200 is a hit, 404 a
//! miss. The embedded server is this target plus access to the server's own counters.

use std::sync::Arc;

use crate::outcome::LookupError;
use crate::serve::ServerStats;
use crate::target::stream::StreamConn;
use crate::target::{ServerCount, SetupError, Target, TargetUrl};
use crate::wire::http::HttpCodec;

pub struct HttpTarget {
    addr: String,
    host: String,
    prefix: String,
    suffix: String,
    verify: bool,
    pipeline: usize,
    stats: Option<Arc<ServerStats>>,
}

impl HttpTarget {
    /// The options this target reads from its URL's query (`pipeline` is read by dispatch).
    pub const OPTIONS: &'static [&'static str] = &["pipeline"];

    pub fn new(
        url: &TargetUrl,
        verify: bool,
        stats: Option<Arc<ServerStats>>,
    ) -> Result<HttpTarget, SetupError> {
        if url.scheme == "https" {
            return Err(SetupError("https:// is not supported: loadgen measures plain HTTP/1.1 on loopback; use http://".into()));
        }
        let path = format!("/{}", url.path);
        let (prefix, suffix) = match path.split_once("{key}") {
            Some((a, b)) => (a.to_string(), b.to_string()),
            None if path.ends_with('/') => (path.clone(), String::new()),
            None => (format!("{path}/"), String::new()),
        };
        let mut prefix = prefix;
        if !url.query.is_empty() && !path.contains('?') && suffix.is_empty() {
            // keep a query string after the key: /kv/{key}?x=1
            let q: Vec<String> = url.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            return Ok(HttpTarget {
                addr: url.host_port(80),
                host: host_header(url),
                prefix: std::mem::take(&mut prefix),
                suffix: format!("?{}", q.join("&")),
                verify,
                pipeline: 1,
                stats,
            });
        }
        Ok(HttpTarget {
            addr: url.host_port(80),
            host: host_header(url),
            prefix,
            suffix,
            verify,
            pipeline: 1,
            stats,
        })
    }

    /// HTTP/1.1 pipelining is allowed but many servers answer it poorly; the embedded one is fine.
    pub fn allow_pipeline(mut self, depth: usize) -> Self {
        self.pipeline = depth;
        self
    }
}

fn host_header(url: &TargetUrl) -> String {
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

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        StreamConn::connect(
            &self.addr,
            HttpCodec::new(&self.host, &self.prefix, &self.suffix),
            self.verify,
        )
        .await
    }

    fn max_pipeline(&self) -> usize {
        self.pipeline
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, String> {
        Ok(self.stats.as_ref().map(|s| ServerCount {
            value: s.lookups(),
            source: "embedded server hits+misses".into(),
        }))
    }
}
