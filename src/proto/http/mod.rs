//! http: a pure codec and the target that drives it over `proto::stream`.

pub mod codec;
pub mod conn;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 80;
