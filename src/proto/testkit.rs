//! Test helpers shared by the codec tests: decode and `outcome` together as the connection runs
//! them, the `Codec` contract checked on every decode, replies fed in pieces, token soups for
//! the property tests, and an allocation counter for the hot path.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;

use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::proto::codec::{outcome, Codec, Request, MAX_FRAME};

/// Decode the reply at the front of `buf` and take it to an outcome, the way `StreamConn` does.
/// A complete reply that came to a non-fatal error is an `Err` too. Checks the contract on the
/// way: an `Err` from `decode` is fatal, an error from `outcome` is not, `n` is within the buffer.
pub fn dec<C: Codec>(
    c: &mut C,
    buf: &[u8],
    key: u64,
    verify: bool,
) -> Result<Option<(usize, Outcome)>, LookupError> {
    match c.decode(buf, key) {
        Err(e) => {
            assert!(e.fatal, "decode returned a non-fatal Err: {e}");
            Err(e)
        }
        Ok(None) => Ok(None),
        Ok(Some((n, reply))) => {
            assert!(n <= buf.len());
            match outcome(reply, &Request::read(key), verify) {
                Ok(o) => Ok(Some((n, o))),
                Err(e) => {
                    assert!(!e.fatal, "fatal error from outcome: {e}");
                    Err(e)
                }
            }
        }
    }
}

/// A complete reply that came to a non-fatal error: its length and the error.
pub fn dec_err<C: Codec>(c: &mut C, buf: &[u8], key: u64, verify: bool) -> (usize, LookupError) {
    match c.decode(buf, key) {
        Ok(Some((n, reply))) => match outcome(reply, &Request::read(key), verify) {
            Err(e) if !e.fatal => (n, e),
            other => panic!("expected a non-fatal error reply, got {other:?}"),
        },
        Ok(None) => panic!("expected a non-fatal error reply, got an incomplete one"),
        Err(e) => panic!("expected a non-fatal error reply, got {e}"),
    }
}

/// `reply` is a complete hit whose row is not the row of `key`: a hit without `--verify`, a
/// non-fatal `Verify` error with it.
pub fn assert_wrong_row<C: Codec>(c: &mut C, reply: &[u8], key: u64) {
    let shown = String::from_utf8_lossy(reply);
    let hit = dec(c, reply, key, false).unwrap_or_else(|e| panic!("{shown:?}: {e}"));
    assert_eq!(hit, Some((reply.len(), Outcome::Hit)), "{shown:?}");
    let (n, e) = dec_err(c, reply, key, true);
    assert_eq!((n, e.kind), (reply.len(), ErrorKind::Verify), "{shown:?}");
}

/// For any bytes: incomplete only below MAX_FRAME, a reply takes 1..=len bytes, errors from a
/// complete reply are non-fatal and `Err` is fatal.
pub fn codec_contract<C: Codec>(c: &mut C, buf: &[u8], key: u64, verify: bool) {
    match c.decode(buf, key) {
        Ok(None) => assert!(buf.len() < MAX_FRAME),
        Ok(Some((n, reply))) => {
            assert!(n > 0 && n <= buf.len());
            assert!(outcome(reply, &Request::read(key), verify).map_or_else(|e| !e.fatal, |_| true));
        }
        Err(e) => assert!(e.fatal),
    }
}

/// What one reply came to in [`feed`]: an outcome, or an error's kind and whether it was fatal.
pub type Seen = Result<Outcome, (ErrorKind, bool)>;

/// Feeds `stream` in the pieces given by `cuts` into a growing buffer as a reader would,
/// decoding (with `--verify`) every complete reply to `keys` after each piece and dropping its
/// bytes, as `StreamConn` does; stops at the first fatal error. `record` sees the codec after
/// each reply. When every key got its reply without a fatal error, every byte must be used.
pub fn feed<C: Codec, T>(
    mut c: C,
    stream: &[u8],
    cuts: &[usize],
    keys: &[u64],
    mut record: impl FnMut(&C, Seen) -> T,
) -> Vec<T> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut last = 0;
    let mut fatal = false;
    'pieces: for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
        buf.extend_from_slice(&stream[last..cut]);
        last = cut;
        while let Some(&key) = keys.get(out.len()) {
            let decoded = match c.decode(&buf, key) {
                Ok(Some((n, reply))) => Ok(Some((n, outcome(reply, &Request::read(key), true)))),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            match decoded {
                Ok(None) => break,
                Ok(Some((n, r))) => {
                    assert!(n <= buf.len());
                    assert!(r.as_ref().map_or_else(|e| !e.fatal, |_| true));
                    buf.drain(..n);
                    out.push(record(&c, r.map_err(|e| (e.kind, e.fatal))));
                }
                Err(e) => {
                    assert!(e.fatal);
                    fatal = true;
                    out.push(record(&c, Err((e.kind, e.fatal))));
                    break 'pieces;
                }
            }
        }
    }
    if !fatal && out.len() == keys.len() {
        assert!(buf.is_empty(), "cut at {cuts:?}: {} bytes left", buf.len());
    }
    out
}

/// The replies to `keys` from `whole` arriving in two reads split at `cut`; none may be fatal.
pub fn decode_split<C: Codec>(
    c: C,
    whole: &[u8],
    cut: usize,
    keys: &[u64],
) -> Vec<Result<Outcome, ErrorKind>> {
    let got = feed(c, whole, &[cut], keys, |_, seen| seen);
    assert_eq!(got.len(), keys.len(), "cut at {cut}: {got:?}");
    got.into_iter()
        .map(|r| {
            r.map_err(|(kind, fatal)| {
                assert!(!fatal, "cut at {cut}: fatal {kind:?}");
                kind
            })
        })
        .collect()
}

/// Up to `max` pieces, each one of the protocol's tokens or, one time in `pieces.len() + 1`, a
/// random byte, concatenated: bytes that get deep into a parser, for the property tests.
pub fn soup(pieces: &'static [&'static [u8]], max: usize) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        pieces.len() as u32 => prop::sample::select(pieces).prop_map(<[u8]>::to_vec),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(piece, 0..max).prop_map(|v| v.concat())
}

/// Counts the allocations of the thread it runs on, so tests running in parallel do not mix.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // try_with: the allocator also runs while a thread's locals are being torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call goes straight to the system allocator; only a thread-local count is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// `f`'s result and the allocations (and reallocations) it made on this thread.
pub fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (r, ALLOCATIONS.with(Cell::get) - before)
}

/// Decoding `reply` to the lookup of `key` and taking it to its outcome, with and without
/// `--verify`, allocates nothing (after one warm-up decode, which may size the codec's buffers).
/// `reply` must be a success (a hit or a miss): error replies carry a message.
pub fn assert_no_alloc<C: Codec>(c: &mut C, reply: &[u8], key: u64) {
    for verify in [false, true] {
        let want = dec(c, reply, key, verify).expect("a hit or a miss");
        assert!(want.is_some(), "a complete reply");
        let (got, n) = allocations(|| dec(c, reply, key, verify));
        assert_eq!(got.unwrap(), want);
        assert_eq!(n, 0, "verify={verify}: {n} allocations in decode + outcome");
    }
}

#[test]
fn the_counter_counts() {
    let (v, n) = allocations(|| vec![1u8; 10]);
    assert_eq!((v.len(), n), (10, 1));
    let (v, n) = allocations(|| std::hint::black_box(1) + 1);
    assert_eq!((v, n), (2, 0));
}
