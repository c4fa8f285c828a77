//! handlersocket: a pure codec and the target that drives it over `proto::pipelined`.

pub mod codec;
pub mod conn;

use crate::error::ConnectError;
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 9998;

/// TCP only: HandlerSocket listens on ports, never on a socket file.
pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    Endpoint::tcp(
        &url.host,
        url.port.unwrap_or(DEFAULT_PORT),
        &url.redacted(),
        None,
    )
}
