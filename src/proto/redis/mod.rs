//! Redis: `GET usr:<id>` over RESP2, pipelined, against the rows `loadgen prepare redis://...`
//! stores (the value is the tab-separated row, as in memcached).
//!
//! `redis://[user:pass@]host:port[/db]`: `AUTH` (password, or ACL user and password) and
//! `SELECT db` at connect. Server truth is `INFO commandstats` (`cmdstat_get` calls).
//!
//! Why not the `redis` crate: its multiplexed connection allocates a command and a reply value
//! per request and answers through a channel per request; a load generator's client must cost
//! less than the server it measures, and `GET` is one request shape and four reply shapes. So
//! the codec is ours, driven by the same pipelined connection as memcached and HandlerSocket.

pub mod codec;
pub mod conn;
pub mod count;
pub mod login;
pub mod prepare;

pub use conn::RedisTarget;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 6379;
