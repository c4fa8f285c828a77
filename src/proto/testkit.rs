//! Test helpers shared by the codec tests: the `Codec` contract, checked on every decode.

use crate::outcome::{ErrorKind, LookupError, Outcome};
use crate::proto::codec::{Codec, MAX_FRAME};

/// `decode` seen the old way for short assertions: a complete reply that came to a non-fatal
/// error is an `Err` too. Checks the contract on the way: an `Err` from `decode` is fatal,
/// an error inside `Ok(Some)` is not, and `n` is within the buffer.
pub fn dec<C: Codec>(
    c: &mut C,
    buf: &[u8],
    key: u64,
    verify: bool,
) -> Result<Option<(usize, Outcome)>, LookupError> {
    match c.decode(buf, key, verify) {
        Err(e) => {
            assert!(e.fatal, "decode returned a non-fatal Err: {e}");
            Err(e)
        }
        Ok(None) => Ok(None),
        Ok(Some((n, r))) => {
            assert!(n <= buf.len());
            match r {
                Ok(o) => Ok(Some((n, o))),
                Err(e) => {
                    assert!(!e.fatal, "fatal error inside Ok(Some): {e}");
                    Err(e)
                }
            }
        }
    }
}

/// A complete reply that came to a non-fatal error: its length and the error.
pub fn dec_err<C: Codec>(c: &mut C, buf: &[u8], key: u64, verify: bool) -> (usize, LookupError) {
    match c.decode(buf, key, verify) {
        Ok(Some((n, Err(e)))) if !e.fatal => (n, e),
        other => panic!("expected a non-fatal error reply, got {other:?}"),
    }
}

/// For any bytes: incomplete only below MAX_FRAME, a reply takes 1..=len bytes, errors inside a
/// reply are non-fatal and `Err` is fatal.
pub fn codec_contract<C: Codec>(c: &mut C, buf: &[u8], key: u64, verify: bool) {
    match c.decode(buf, key, verify) {
        Ok(None) => assert!(buf.len() < MAX_FRAME),
        Ok(Some((n, r))) => {
            assert!(n > 0 && n <= buf.len() && r.map_or_else(|e| !e.fatal, |_| true))
        }
        Err(e) => assert!(e.fatal),
    }
}

/// Decodes the replies to `keys` from `whole` arriving in two reads split at `cut`, the way
/// `StreamConn` does (parsed replies dropped from the front); every byte must be consumed.
pub fn decode_split<C: Codec>(
    mut c: C,
    whole: &[u8],
    cut: usize,
    keys: &[u64],
) -> Vec<Result<Outcome, ErrorKind>> {
    let mut buf = whole[..cut].to_vec();
    let mut got = Vec::new();
    for arrived in [true, false] {
        while got.len() < keys.len() {
            match c.decode(&buf, keys[got.len()], true).unwrap() {
                Some((n, out)) => {
                    got.push(out.map_err(|e| e.kind));
                    buf.drain(..n);
                }
                None => break,
            }
        }
        if arrived {
            buf.extend_from_slice(&whole[cut..]);
        }
    }
    assert!(buf.is_empty(), "cut at {cut}: {} bytes left", buf.len());
    got
}
