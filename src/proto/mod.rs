//! Protocols: one folder each (codec, connection, driver variants, data loading) and one table
//! (`table::PROTOCOLS`) that dispatch, `prepare`, URL checks and `--help` read. Nothing here
//! imports upward: protocols know the plan and the data set, never the run or the report.

pub mod caps;
pub mod codec;
pub mod handlersocket;
pub mod http;
pub mod key_rows;
pub mod memcached;
pub mod mysql;
pub mod pipelined;
pub mod postgres;
pub mod redis;
pub mod routed;
pub mod server_latency;
pub mod shards;
pub mod sniff;
pub mod table;
pub mod target;
#[cfg(test)]
pub(crate) mod testkit;

pub use crate::url::TargetUrl;
pub use target::{Conn, ServerCount, SetupError, Target};
