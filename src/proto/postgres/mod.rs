//! PostgreSQL: the lean `wire` driver (loadgen's own extended-protocol codec, pipelined) and the
//! `tokio` driver (tokio-postgres via deadpool-postgres), plus the server's lookup counter.

pub mod codec;
pub mod count;
pub mod error;
pub mod prepare;
pub mod tokio_driver;
pub mod wire_driver;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 5432;
