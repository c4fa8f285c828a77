//! memcached, the NoSQL baseline: `get usr:<id>` over the text protocol, pipelined.
//!
//! Why not the `memcache` crate: it is blocking (one OS thread per connection would be needed),
//! and its pool checks each connection with an extra round trip per get; on this machine that
//! measured several times slower than a pipelined async client, so the baseline would be the
//! client, not memcached. The text protocol is small, so the codec is ours (`codec.rs`),
//! driven by the same pipelined connection as HandlerSocket and HTTP.

use std::time::Duration;

use crate::outcome::LookupError;
use crate::plan::Plan;
use crate::proto::memcached::codec::{encode_stats, parse_stats, McCodec, DEFAULT_PREFIX};
use crate::proto::stream::StreamConn;
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::transport::Endpoint;
use crate::url::TargetUrl;

pub struct McTarget {
    endpoint: Endpoint,
    prefix: Vec<u8>,
    verify: bool,
    connect_timeout: Duration,
}

impl McTarget {
    /// The options this target reads from its URL's query (dispatch refuses any other).
    pub const OPTIONS: &'static [&'static str] = &["prefix"];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<McTarget, SetupError> {
        let prefix = url
            .param("prefix")
            .map(|p| p.as_bytes().to_vec())
            .unwrap_or_else(|| DEFAULT_PREFIX.to_vec());
        McCodec::new(prefix.clone())
            .map_err(|e| SetupError(format!("bad memcached key prefix: {}", e.0)))?;
        Ok(McTarget {
            endpoint: super::endpoint(url)?,
            prefix,
            verify: plan.verify,
            connect_timeout: plan.timeouts().connect,
        })
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn codec(&self) -> McCodec {
        McCodec::new(self.prefix.clone()).expect("prefix checked in new")
    }
}

/// get_hits + get_misses from `stats` on a fresh connection.
pub async fn get_count(ep: &Endpoint, connect_timeout: Duration) -> Result<u64, LookupError> {
    let mut c = StreamConn::connect(
        ep,
        connect_timeout,
        None,
        McCodec::new(DEFAULT_PREFIX.to_vec()).expect("default prefix"),
        false,
    )
    .await?;
    let mut req = Vec::new();
    encode_stats(&mut req);
    let stats = c.round_trip(&req, parse_stats).await?;
    let get = |name: &str| {
        stats
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.parse::<u64>().ok())
    };
    match (get("get_hits"), get("get_misses")) {
        (Some(h), Some(m)) => Ok(h + m),
        _ => Err(LookupError::protocol(
            "memcached stats has no get_hits/get_misses",
        )),
    }
}

impl Target for McTarget {
    type Conn = StreamConn<McCodec>;

    fn kind(&self) -> &'static str {
        "memcache"
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        StreamConn::connect(
            &self.endpoint,
            self.connect_timeout,
            None,
            self.codec(),
            self.verify,
        )
        .await
    }

    fn max_pipeline(&self) -> usize {
        usize::MAX
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, String> {
        let v = get_count(&self.endpoint, self.connect_timeout)
            .await
            .map_err(|e| format!("{}: {}", self.endpoint, e.message))?;
        Ok(Some(ServerCount {
            value: v,
            source: "memcached get_hits+get_misses".into(),
        }))
    }
}
