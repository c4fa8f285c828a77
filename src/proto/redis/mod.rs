//! Redis: `GET usr:<id>` over RESP2, pipelined, against the rows `loadgen prepare redis://...`
//! stores (the value is the tab-separated row, as in memcached).
//!
//! `redis://[user:pass@]host:port[/db]` (`rediss://` over TLS, `?cacert=` as redis-cli's
//! `--cacert`, else the system's CAs), or over a Unix socket `redis+unix:///path/redis.sock`
//! (also `unix://`) with `?db=N&user=U&pass=P` (redis-rs's form): `AUTH` (password, or ACL user
//! and password) and `SELECT db` at connect. Server truth is `INFO commandstats` (`cmdstat_get`
//! calls). `redis://host:port?cluster=1` is a Redis Cluster: its slot map from `CLUSTER NODES`,
//! each key sent to its slot's master (`slots.rs`), each master counted apart.
//!
//! Why not the `redis` crate: its multiplexed connection allocates a command and a reply value
//! per request and answers through a channel per request; a load generator's client must cost
//! less than the server it measures, and `GET` is one request shape and four reply shapes. So
//! the codec is ours, driven by the same pipelined connection as memcached and HandlerSocket.

pub mod codec;
pub mod conn;
pub mod count;
pub mod login;
pub mod not_cluster;
pub mod prepare;
pub mod prune;
pub mod slots;

pub use conn::RedisTarget;

use crate::error::ConnectError;
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 6379;

/// A Unix socket, as redis-rs writes it: the path after an empty host.
pub const SOCKET_URL: &str = "redis+unix:///run/redis.sock[?db=N]";

/// Whether the URL is the socket form (`redis+unix://`, `unix://`).
pub fn is_socket_url(url: &TargetUrl) -> bool {
    !matches!(url.scheme.as_str(), "redis" | "rediss")
}

pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    if !is_socket_url(url) {
        return Endpoint::tcp(
            &url.host,
            url.port.unwrap_or(DEFAULT_PORT),
            &url.redacted(),
            Some(SOCKET_URL),
        );
    }
    if !url.host.is_empty() || url.port.is_some() || url.path.is_empty() {
        return Err(ConnectError(format!(
            "{}: the socket path goes after an empty host: {}:///path/to/redis.sock",
            url.redacted(),
            url.scheme
        )));
    }
    Endpoint::unix(
        &format!("/{}", crate::url::decode(&url.path)?),
        &url.redacted(),
    )
}
