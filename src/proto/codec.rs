//! The codec contract: bytes in, replies out, no sockets, no data set. Each protocol's
//! `codec.rs` implements it; one generic pipelined connection (`proto::pipelined`) drives any of
//! them, and [`outcome`] alone turns a reply into what the run counts.

use crate::dataset;
use crate::mix::Op;
use crate::outcome::{ErrorKind, LookupError, Outcome};

pub use crate::dataset::{Cell, RowView};

/// Replies larger than this are a protocol error: a garbage stream must not grow a buffer forever.
pub const MAX_FRAME: usize = 1 << 20;

/// [`MAX_FRAME`] as messages name it (`1 MiB`).
pub fn max_frame_text() -> String {
    format!("{} MiB", MAX_FRAME >> 20)
}

/// One request: the op, its key, and the version of the row (see [`dataset`]): the version a
/// write stores, or the version a read must find (with `--verify`): 0 the loaded row,
/// [`dataset::ANY_VERSION`] any version, [`Request::GONE`] no row (this connection deleted it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    pub key: u64,
    pub version: u64,
    /// A write's time to live in seconds (`--ttl`, a trace's ttl field; memcached exptime,
    /// Redis `EX`); 0: none.
    pub ttl: u32,
    /// A write's value size in bytes (a trace's value_size); 0: the data set's row.
    pub size: u32,
}

impl Request {
    /// The version a read expects of a key this connection deleted: a row is a verify error.
    pub const GONE: u64 = u64::MAX - 1;

    /// The lookup of `key`, expecting the loaded row.
    pub fn read(key: u64) -> Request {
        Request {
            op: Op::Read,
            key,
            version: 0,
            ttl: 0,
            size: 0,
        }
    }
}

/// What the server answered to one lookup, borrowed from the read buffer (or the codec).
/// `C` reads a SQL row's cells; protocols whose rows are one value use [`NoCells`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply<'b, C> {
    Row(RowView<'b, C>),
    /// The key has no row (a write: it found no row to change, or the row was there already).
    Miss,
    /// A write changed this many rows (0 is a miss, as a lookup that finds no row).
    Written(u64),
    /// The server failed this request and the stream is still in step: a non-fatal error of
    /// the kind the server's code says (`Server` when it says nothing more), with the server's
    /// message. Built on the error path only.
    Server(ErrorKind, String),
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

/// What the reply to one multi-get (`--batch N`) held, key by key: one request, N keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub hits: u32,
    pub misses: u32,
}

impl Tally {
    /// The request's own outcome: a hit when any of its keys was.
    pub fn outcome(&self) -> Outcome {
        match self.hits {
            0 => Outcome::Miss,
            _ => Outcome::Hit,
        }
    }

    /// One key's row, checked against the data set with `verify`: a row that is not the
    /// loaded row of `key` is the request's `Verify` error.
    pub fn row(&mut self, key: u64, value: &[u8], verify: bool) -> Result<(), LookupError> {
        if verify && !dataset::matches(key, RowView::<NoCells>::Tsv(value)) {
            return Err(LookupError::verify(key));
        }
        self.hits += 1;
        Ok(())
    }
}

/// A complete multi-get reply: the bytes it took, and its tally or the non-fatal error it
/// came to (a server error, a row that failed `--verify`).
pub type DecodedBatch = Option<(usize, Result<Tally, LookupError>)>;

/// One request/response protocol with in-order replies (so requests can be pipelined).
pub trait Codec {
    /// Reads the cells of a [`RowView::Cells`] row; borrows the reply and the codec's column
    /// types, decodes nothing until iterated.
    type Cells<'b>: Iterator<Item = Cell<'b>>
    where
        Self: 'b;

    /// Append `req` to `out`. Must not allocate beyond growing `out`. Codecs that cannot
    /// write are never given a write (the preflight refuses a write its `Caps` lack).
    fn encode(&mut self, req: &Request, out: &mut Vec<u8>);

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

    /// Appends `req` with the key as written (`key`, a trace's), for stores whose keys are
    /// names (memcached, Redis); the others look rows up by `req.key`, the id.
    fn encode_named(&mut self, req: &Request, _key: &[u8], out: &mut Vec<u8>) {
        self.encode(req, out)
    }

    /// Appends one request reading every key of `keys` (`--batch`), in the protocol's own
    /// multi-get. Only called where its `Caps` have a multi-get.
    fn encode_batch(&mut self, _keys: &[u64], _out: &mut Vec<u8>) {
        unreachable!("the preflight refuses --batch where Caps have no multi-get")
    }

    /// Parses the reply at the front of `buf` to the multi-get of `keys`, checking each row
    /// with `verify`. `Ok(None)`: not complete yet. Must not allocate unless the reply is an error.
    fn decode_batch(
        &mut self,
        _buf: &[u8],
        _keys: &[u64],
        _verify: bool,
    ) -> Result<DecodedBatch, LookupError> {
        unreachable!("the preflight refuses --batch where Caps have no multi-get")
    }

    /// `--txn`: appends the commit of the open transaction (nothing in flight) and says
    /// whether one was open.
    fn commit(&mut self, _out: &mut Vec<u8>) -> bool {
        false
    }

    /// The reply to `commit` at the front of `buf`: the bytes it took, and the server's error
    /// when the commit failed. `Ok(None)`: not complete yet.
    fn decode_commit(
        &mut self,
        _buf: &[u8],
    ) -> Result<Option<(usize, Option<LookupError>)>, LookupError> {
        Ok(Some((0, None)))
    }

    /// True when the last reply asked to close the connection (HTTP `Connection: close`).
    fn must_close(&self) -> bool {
        false
    }
}

/// What a reply to `req` comes to. With `verify`, a row that is not the data set's row for the
/// key at the version the read expects is a non-fatal `Verify` error, as is a miss where this
/// connection wrote a row. A write that changed a row is a hit, one that changed none a miss.
/// The one place replies become outcomes: the pipelined connection and the library drivers
/// both call it.
pub fn outcome<'b>(
    reply: Reply<'b, impl Iterator<Item = Cell<'b>>>,
    req: &Request,
    verify: bool,
) -> Result<Outcome, LookupError> {
    let key = req.key;
    match reply {
        Reply::Server(kind, message) => Err(LookupError::new(kind, false, message)),
        _ if req.op.writes() => match reply {
            Reply::Row(_) | Reply::Written(1..) => Ok(Outcome::Hit),
            _ => Ok(Outcome::Miss),
        },
        Reply::Row(row) if verify => {
            match req.version != Request::GONE && dataset::matches_version(key, req.version, row) {
                true => Ok(Outcome::Hit),
                false => Err(LookupError::verify(key)),
            }
        }
        Reply::Row(_) => Ok(Outcome::Hit),
        Reply::Miss
            if verify && !matches!(req.version, 0 | dataset::ANY_VERSION | Request::GONE) =>
        {
            Err(LookupError::verify(key))
        }
        Reply::Miss => Ok(Outcome::Miss),
        Reply::Written(_) => Err(LookupError::server(
            "the server answered a lookup with the reply to a write",
        )),
    }
}
