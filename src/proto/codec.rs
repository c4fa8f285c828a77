//! The codec contract: bytes in, replies out, no sockets, no data set. Each protocol's
//! `codec.rs` implements it; one generic pipelined connection (`proto::stream`) drives any of
//! them, and [`outcome`] alone turns a reply into what the run counts.

use crate::dataset;
use crate::outcome::{LookupError, Outcome};

pub use crate::dataset::{Cell, RowView};

/// Replies larger than this are a protocol error: a garbage stream must not grow a buffer forever.
pub const MAX_FRAME: usize = 1 << 20;

/// What the server answered to one lookup, borrowed from the read buffer (or the codec).
/// `C` reads a SQL row's cells; protocols whose rows are one value use [`NoCells`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply<'b, C> {
    Row(RowView<'b, C>),
    /// The key has no row.
    Miss,
    /// The server failed this request and the stream is still in step: a non-fatal `Server`
    /// error with the server's message. Built on the error path only.
    Server(String),
}

impl<'b, C> Reply<'b, C> {
    /// A library driver's answer: the cells of the first row it returned, or no row.
    pub fn from_cells(row: Option<C>) -> Self {
        row.map_or(Reply::Miss, |cells| Reply::Row(RowView::Cells(cells)))
    }
}

/// The cells of a protocol whose rows are a single value ([`RowView::Tsv`]).
pub type NoCells<'b> = std::iter::Empty<Cell<'b>>;

/// A complete reply: the bytes it took, and the reply.
pub type Decoded<'b, C> = Option<(usize, Reply<'b, C>)>;

/// One request/response protocol with in-order replies (so requests can be pipelined).
pub trait Codec {
    /// Reads the cells of a [`RowView::Cells`] row; borrows the reply and the codec's column
    /// types, decodes nothing until iterated.
    type Cells<'b>: Iterator<Item = Cell<'b>>
    where
        Self: 'b;

    /// Append the request for `key` to `out`. Must not allocate beyond growing `out`.
    fn encode(&mut self, key: u64, out: &mut Vec<u8>);

    /// Parse the reply at the front of `buf`. `Ok(None)`: not complete yet, read more.
    /// `Ok(Some((n, reply)))`: the reply took the first `n` bytes; `n` is 0 only for a request
    /// the server is known to have skipped, answered from the codec's own state. `Err`:
    /// malformed bytes or a reply after which the stream is lost, a fatal error; the connection
    /// must be replaced. Must not allocate unless the reply is an error.
    ///
    /// `key` is the key of the request this reply answers. Only memcached reads it: its replies
    /// echo the key, and another key there means the stream is out of step. Codecs never check
    /// a row against the key; [`outcome`] does.
    fn decode<'b>(
        &'b mut self,
        buf: &'b [u8],
        key: u64,
    ) -> Result<Decoded<'b, Self::Cells<'b>>, LookupError>;

    /// Called before the write buffer goes out: ends the batch of requests encoded since the
    /// last call, for protocols that mark batches (PostgreSQL's Sync). Must append nothing when
    /// nothing was encoded since, because a cancelled flush calls it again.
    fn end_batch(&mut self, _out: &mut Vec<u8>) {}

    /// True when the last reply asked to close the connection (HTTP `Connection: close`).
    fn must_close(&self) -> bool {
        false
    }
}

/// What a reply to the lookup of `key` comes to. With `verify`, a row that is not the data
/// set's row for `key` is a non-fatal `Verify` error. The one place replies become outcomes:
/// the pipelined connection and the library drivers both call it.
pub fn outcome<'b>(
    reply: Reply<'b, impl Iterator<Item = Cell<'b>>>,
    key: u64,
    verify: bool,
) -> Result<Outcome, LookupError> {
    match reply {
        Reply::Row(row) if verify => match dataset::matches(key, row) {
            true => Ok(Outcome::Hit),
            false => Err(LookupError::verify(key)),
        },
        Reply::Row(_) => Ok(Outcome::Hit),
        Reply::Miss => Ok(Outcome::Miss),
        Reply::Server(message) => Err(LookupError::server(message)),
    }
}
