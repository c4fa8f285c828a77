//! HandlerSocket's multi-get (`--batch N`): one find with an IN list,
//! `<id>\t=\t1\t<k1>\t<N>\t0\t@\t0\t<N>\t<k1>\t...\t<kN>\n`. The plugin reads the index once
//! per IN value, in the order given, and answers one line with the rows it found in that
//! order (a missing key adds no row), at most the limit, N.

use crate::dataset;
use crate::decimal;
use crate::outcome::LookupError;
use crate::proto::codec::{NoCells, RowView, Tally};

/// Appends the find of every key of `keys` on index `id`.
pub fn encode(id: u32, keys: &[u64], out: &mut Vec<u8>) {
    let n = keys.len() as u64;
    decimal::push(out, u64::from(id));
    out.extend_from_slice(b"\t=\t1\t");
    decimal::push(out, keys[0]);
    out.push(b'\t');
    decimal::push(out, n);
    out.extend_from_slice(b"\t0\t@\t0\t");
    decimal::push(out, n);
    for &k in keys {
        out.push(b'\t');
        decimal::push(out, k);
    }
    out.push(b'\n');
}

/// The tally of a success reply's `rows` (at most `keys.len()`). With `verify` each row must
/// be the row of a key at or after the previous row's key in `keys` (the keys between are
/// misses).
pub fn tally<'a>(
    rows: impl Iterator<Item = &'a [u8]>,
    found: usize,
    keys: &[u64],
    verify: bool,
) -> Result<Tally, LookupError> {
    let mut next = 0;
    if verify {
        for row in rows {
            // The first key from `next` whose row this is; a row no later key owns is wrong.
            let at = keys[next..]
                .iter()
                .position(|&k| dataset::matches(k, RowView::<NoCells>::Tsv(row)));
            match at {
                Some(i) => next += i + 1,
                None => return Err(LookupError::verify(keys[next.min(keys.len() - 1)])),
            }
        }
    }
    Ok(Tally {
        hits: found as u32,
        misses: (keys.len() - found) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::TsvRow;
    use crate::outcome::ErrorKind;
    use crate::proto::codec::{Codec, DecodedBatch};
    use crate::proto::handlersocket::codec::HsCodec;

    fn decode(buf: &[u8], keys: &[u64], verify: bool) -> Result<DecodedBatch, LookupError> {
        HsCodec::new(0).decode_batch(buf, keys, verify)
    }

    fn reply(keys: &[u64]) -> Vec<u8> {
        let mut out = b"0\t3".to_vec();
        for &k in keys {
            out.push(b'\t');
            out.extend_from_slice(TsvRow::new(k, 0).as_bytes());
        }
        out.push(b'\n');
        out
    }

    #[test]
    fn encodes_an_in_list_with_its_limit() {
        let mut out = Vec::new();
        encode(0, &[7, 42, 9], &mut out);
        assert_eq!(out, b"0\t=\t1\t7\t3\t0\t@\t0\t3\t7\t42\t9\n");
    }

    #[test]
    fn counts_rows_as_hits_and_the_rest_as_misses() {
        let r = reply(&[7, 9]);
        let (n, t) = decode(&r, &[7, 42, 9], true).unwrap().unwrap();
        assert_eq!(n, r.len());
        assert_eq!(t.unwrap(), Tally { hits: 2, misses: 1 });
        assert!(decode(&r[..r.len() - 1], &[7, 42, 9], true)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_row_out_of_order_or_of_another_key_fails_verify() {
        let r = reply(&[9, 7]);
        let (_, t) = decode(&r, &[7, 42, 9], true).unwrap().unwrap();
        assert_eq!(t.unwrap_err().kind, ErrorKind::Verify);
        let (_, t) = decode(&r, &[7, 42, 9], false).unwrap().unwrap();
        assert_eq!(t.unwrap(), Tally { hits: 2, misses: 1 });
        let r = reply(&[5]);
        let (_, t) = decode(&r, &[7, 42, 9], true).unwrap().unwrap();
        assert_eq!(t.unwrap_err().kind, ErrorKind::Verify);
    }

    #[test]
    fn more_rows_than_keys_is_a_protocol_error_and_a_server_error_is_not_fatal() {
        assert!(decode(&reply(&[7, 7]), &[7], false).unwrap_err().fatal);
        let (_, t) = decode(b"2\t1\tkpnum\n", &[7], false).unwrap().unwrap();
        assert!(!t.unwrap_err().fatal);
        assert!(decode(b"3\t1\tunauth\n", &[7], false).unwrap_err().fatal);
    }
}
