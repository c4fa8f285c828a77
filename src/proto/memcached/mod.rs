//! memcached: a pure codec and the target that drives it over `proto::stream`.

pub mod codec;
pub mod conn;
pub mod ketama;
pub mod prepare;
pub mod prune;

use crate::error::ConnectError;
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 11211;

/// A Unix socket (memcached -s PATH): the path after an empty host.
pub const SOCKET_URL: &str = "memcache:///run/memcached.sock";

/// `memcache://host:port`, or `memcache:///path/to/memcached.sock`. One socket form only: a
/// percent-encoded host (`memcache://%2Frun%2Fmc.sock`) is refused with this one as the fix.
pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    if url.host.is_empty() && !url.path.is_empty() {
        if url.port.is_some() {
            return Err(ConnectError(format!(
                "{}: a socket has no port: use {SOCKET_URL}",
                url.redacted()
            )));
        }
        return Endpoint::unix(
            &format!("/{}", crate::url::decode(&url.path)?),
            &url.redacted(),
        );
    }
    Endpoint::tcp(
        &url.host,
        url.port.unwrap_or(DEFAULT_PORT),
        &url.redacted(),
        Some(SOCKET_URL),
    )
}
