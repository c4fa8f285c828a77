//! The tally of a SQL multi-get (`--batch`), whose rows come in any order, one per distinct key
//! found, each naming its key in its first column.

use crate::outcome::LookupError;
use crate::proto::codec::Tally;

pub struct KeyRows<'k> {
    /// The keys asked for, sorted: a row's key is found by binary search.
    keys: &'k [u64],
    tally: Result<Tally, LookupError>,
}

impl<'k> KeyRows<'k> {
    /// The tally of the multi-get of `keys`; `sorted` is the codec's scratch, kept between
    /// requests so a tally allocates nothing.
    pub fn new(keys: &[u64], sorted: &'k mut Vec<u64>) -> Self {
        sorted.clear();
        sorted.extend_from_slice(keys);
        sorted.sort_unstable();
        KeyRows {
            keys: sorted,
            tally: Ok(Tally::default()),
        }
    }

    /// One row, of `key` (None: its first column is not an integer). The key is a hit as many
    /// times as the request asked for it; a key not asked for, or a row `row_ok` refuses
    /// (`--verify`), is the request's `Verify` error.
    pub fn add(&mut self, key: Option<u64>, row_ok: impl FnOnce(u64) -> bool) {
        let Ok(tally) = self.tally.as_mut() else {
            return;
        };
        let Some(key) = key else {
            self.tally = Err(LookupError::protocol(
                "a multi-get row without its key in its first column",
            ));
            return;
        };
        let from = self.keys.partition_point(|&k| k < key);
        let asked = self.keys[from..].partition_point(|&k| k == key) as u32;
        if asked == 0 || !row_ok(key) {
            self.tally = Err(LookupError::verify(key));
            return;
        }
        tally.hits += asked;
    }

    /// The request's tally: the keys no row answered are misses.
    pub fn end(self) -> Result<Tally, LookupError> {
        let n = self.keys.len() as u32;
        self.tally.map(|t| Tally {
            hits: t.hits,
            misses: n - t.hits.min(n),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_asked_twice_is_two_hits_and_the_rest_miss() {
        let mut sorted = Vec::new();
        let mut rows = KeyRows::new(&[7, 3, 7, 9, 1], &mut sorted);
        rows.add(Some(7), |_| true);
        rows.add(Some(1), |_| true);
        assert_eq!(rows.end().unwrap(), Tally { hits: 3, misses: 2 });
    }

    #[test]
    fn a_row_of_a_key_not_asked_for_is_a_verify_error() {
        let mut sorted = Vec::new();
        let mut rows = KeyRows::new(&[2, 4], &mut sorted);
        rows.add(Some(3), |_| true);
        assert!(rows.end().is_err());
    }
}
