//! MySQL / MariaDB: the lean `wire` driver (loadgen's own binary-protocol codec and handshake)
//! and the `mysql_async` driver.

pub mod async_driver;
mod cells;
pub mod choose;
pub mod codec;
pub mod error;
pub mod handshake;
mod multi_get;
pub mod plugins;
pub mod prepare;
pub mod ssl;
pub mod txn;
pub mod wire_driver;
pub mod writes;

use crate::error::ConnectError;
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 3306;

/// A Unix socket, as the mysql client writes it.
pub const SOCKET_URL: &str = "mysql://user@localhost/db?socket=/run/mysqld/mysqld.sock";

/// The mysql client's rules: `?socket=PATH` is the Unix socket (host `localhost` or none, no
/// port: a TCP address beside it would be ignored, so it is refused); otherwise TCP.
pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    match url.param("socket") {
        Some(path) => {
            if !(url.host.is_empty() || url.host == "localhost") || url.port.is_some() {
                return Err(ConnectError(format!(
                    "{}: socket= connects to the Unix socket, so the URL names no TCP address: use mysql://user@localhost/db?socket={path}",
                    url.redacted()
                )));
            }
            Endpoint::unix(path, &url.redacted())
        }
        None => Endpoint::tcp(
            &url.host,
            url.port.unwrap_or(DEFAULT_PORT),
            &url.redacted(),
            Some(SOCKET_URL),
        ),
    }
}
