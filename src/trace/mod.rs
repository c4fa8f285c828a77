//! Trace files: requests read from a file instead of drawn from a formula.
//!
//! Two formats, told apart line by line by their field count: the Twitter cache-trace format
//! (`timestamp,key,key_size,value_size,client_id,op,ttl`, timestamps in seconds, decimals allowed)
//! and a plain `key` or `key,op` list. A file whose first bytes are the zstd magic number is
//! decompressed as it streams, whatever its name. [`reader::TraceReader`] reuses one line buffer, so
//! memory stays flat however long the trace is; [`bench`](mod@bench) measures how fast one core parses.

pub mod bench;
pub mod feed;
pub mod key_id;
pub mod line;
pub mod reader;
pub mod record;
pub mod schedule;

pub use line::{TraceLine, TraceOp};
pub use reader::{TraceError, TraceReader};
