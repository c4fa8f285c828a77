//! One connection's share of a trace replay (`--trace`): the next request it takes from the
//! run's feed, held until it is due, and the keys of its requests in flight as written.

use std::sync::Arc;

use crate::proto::codec::Request;
use crate::trace::feed::Feed;
use crate::trace::key_id::key_id;

pub(super) struct Traced {
    feed: Arc<Feed>,
    /// The key of each request in flight, per window place (request n's at n % depth), reused
    /// so no request allocates.
    names: Vec<Vec<u8>>,
    /// Taken from the feed, not yet sent: (due ns, the request); its key is at its place.
    held: Option<(Option<u64>, Request)>,
    /// The trace's keys go out as written; else as ids in `keys` (`key_id`).
    pub(super) named: bool,
    keys: (u64, u64),
    /// The feed is empty: this connection sends nothing more.
    pub(super) ended: bool,
}

impl Traced {
    pub(super) fn new(feed: Arc<Feed>, depth: usize, named: bool, keys: (u64, u64)) -> Traced {
        Traced {
            feed,
            names: vec![Vec::with_capacity(64); depth],
            held: None,
            named,
            keys,
            ended: false,
        }
    }

    /// The next request for window place `slot` and its due time (ns after the start; None:
    /// a key list, untimed), without taking it; None at the trace's end.
    #[inline]
    pub(super) fn peek(&mut self, slot: usize) -> Option<(Option<u64>, Request)> {
        if self.held.is_none() && !self.ended {
            let name = &mut self.names[slot];
            match self.feed.next(name) {
                None => self.ended = true,
                Some(item) => {
                    let req = Request {
                        op: item.op.op(),
                        key: key_id(name, self.keys.0, self.keys.1),
                        version: 0,
                        ttl: item.ttl,
                        size: item.value_size,
                    };
                    self.held = Some((item.due_us.map(|us| us * 1000), req));
                }
            }
        }
        self.held
    }

    /// Takes the request `peek` showed, to send it.
    #[inline]
    pub(super) fn take(&mut self) -> Option<Request> {
        self.held.take().map(|(_, r)| r)
    }

    /// The key of the request at window place `slot`, as the trace wrote it.
    #[inline]
    pub(super) fn name(&self, slot: usize) -> &[u8] {
        &self.names[slot]
    }
}
