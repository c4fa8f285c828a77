//! The codec contract: bytes in, replies out, no sockets. Each protocol's `codec.rs` implements
//! it; one generic pipelined connection (`proto::stream`) drives any of them.

use crate::outcome::{LookupError, Outcome};

/// A complete reply: bytes it took, and what it came to.
pub type Decoded = Option<(usize, Result<Outcome, LookupError>)>;

/// Replies larger than this are a protocol error: a garbage stream must not grow a buffer forever.
pub const MAX_FRAME: usize = 1 << 20;

/// One request/response protocol with in-order replies (so requests can be pipelined).
pub trait Codec {
    /// Append the request for `key` to `out`. Must not allocate beyond growing `out`.
    fn encode(&mut self, key: u64, out: &mut Vec<u8>);

    /// Parse the reply at the front of `buf` to the request for `key`.
    /// `Ok(None)`: the reply is not complete yet, read more. `Ok(Some((n, result)))`: the reply
    /// took the first `n` bytes and came to `result`: an outcome, or a non-fatal error that
    /// leaves the stream in step (a server-side error reply is `Server`; with `verify`, a row
    /// that is not `row::write_tsv(key)` is `Verify`). `n` is 0 only for a request the server
    /// is known to have skipped, answered from the codec's own state. `Err`: malformed bytes,
    /// a fatal `Protocol` error; the connection must be replaced.
    fn decode(&mut self, buf: &[u8], key: u64, verify: bool) -> Result<Decoded, LookupError>;

    /// Called before the write buffer goes out: ends the batch of requests encoded since the
    /// last call, for protocols that mark batches (PostgreSQL's Sync). Must append nothing when
    /// nothing was encoded since, because a cancelled flush calls it again.
    fn end_batch(&mut self, _out: &mut Vec<u8>) {}

    /// True when the last reply asked to close the connection (HTTP `Connection: close`).
    fn must_close(&self) -> bool {
        false
    }
}

/// Decimal digits of `n`, written right-aligned into `buf` (no allocation: keys go into every
/// request, and `--verify` compares them in every reply).
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}
