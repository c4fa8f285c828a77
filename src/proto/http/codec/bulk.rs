//! The body of an HTTP multi-get (`GET /usr?ids=k1,...,kN`, which `loadgen serve` answers):
//! a line `<id>\t<row>` per key found, in the order asked; a key not found has no line.

use crate::dataset;
use crate::decimal;
use crate::outcome::LookupError;
use crate::proto::codec::{NoCells, RowView, Tally};

/// The tally of `body` (its last `\n` already taken off) for `keys`. Each line must name a key
/// at or after the previous line's in `keys`; with `verify` its row must be that key's.
pub fn tally(body: &[u8], keys: &[u64], verify: bool) -> Result<Tally, LookupError> {
    let mut next = 0;
    let mut hits = 0u32;
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let (id, row) = match line.iter().position(|&b| b == b'\t') {
            Some(t) => (decimal::parse::<u64>(&line[..t]), &line[t + 1..]),
            None => (None, &line[..0]),
        };
        let Some(id) = id else {
            return Err(LookupError::protocol(
                "http: a multi-get line is not `<id>\\t<row>`",
            ));
        };
        match keys[next..].iter().position(|&k| k == id) {
            Some(i) => next += i + 1,
            None => return Err(LookupError::verify(id)),
        }
        if verify && !dataset::matches(id, RowView::<NoCells>::Tsv(row)) {
            return Err(LookupError::verify(id));
        }
        hits += 1;
    }
    Ok(Tally {
        hits,
        misses: keys.len() as u32 - hits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::TsvRow;
    use crate::outcome::ErrorKind;

    fn body(keys: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        for &k in keys {
            b.extend_from_slice(format!("{k}\t").as_bytes());
            b.extend_from_slice(TsvRow::new(k, 0).as_bytes());
            b.push(b'\n');
        }
        b.pop();
        b
    }

    #[test]
    fn lines_are_hits_in_the_order_asked_and_the_rest_misses() {
        let t = tally(&body(&[7, 7, 9]), &[7, 42, 7, 9], true).unwrap();
        assert_eq!(t, Tally { hits: 3, misses: 1 });
        assert_eq!(
            tally(b"", &[1, 2], true).unwrap(),
            Tally { hits: 0, misses: 2 }
        );
    }

    #[test]
    fn a_line_out_of_order_unasked_or_wrong_fails() {
        let e = tally(&body(&[9, 7]), &[7, 9], false).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Verify);
        let mut b = body(&[7]);
        b[3] = b'X';
        assert_eq!(tally(&b, &[7], true).unwrap_err().kind, ErrorKind::Verify);
        assert!(tally(&b, &[7], false).is_ok());
        assert!(tally(b"x\ty", &[7], false).unwrap_err().fatal);
    }
}
