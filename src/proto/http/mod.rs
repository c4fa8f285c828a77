//! http: a pure codec and the target that drives it over `proto::pipelined`.

pub mod codec;
pub mod conn;
pub mod legacy_pipeline;

use crate::error::ConnectError;
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 80;

/// A Unix socket (requests-unixsocket's form): the socket path percent-encoded as the host.
pub const SOCKET_URL: &str = "http+unix://%2Frun%2Fapp.sock/path/{key}";

pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    if url.scheme != "http+unix" {
        return Endpoint::tcp(
            &url.host,
            url.port.unwrap_or(DEFAULT_PORT),
            &url.redacted(),
            Some(SOCKET_URL),
        );
    }
    let path = crate::url::decode(&url.host)?;
    if url.port.is_some() || !path.starts_with('/') {
        return Err(ConnectError(format!(
            "{}: the host of an http+unix:// URL is the socket path, percent-encoded, with no port: {SOCKET_URL}",
            url.redacted()
        )));
    }
    Endpoint::unix(&path, &url.redacted())
}
