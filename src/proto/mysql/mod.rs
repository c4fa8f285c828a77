//! MySQL / MariaDB: the lean `wire` driver (loadgen's own binary-protocol codec and handshake)
//! and the `mysql_async` driver.

pub mod async_driver;
pub mod codec;
pub mod handshake;
pub mod prepare;
pub mod wire_driver;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 3306;
