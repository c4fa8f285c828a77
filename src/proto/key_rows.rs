//! The tally of a SQL multi-get (`--batch`), whose rows come in any order, one per distinct key
//! found, each naming its key in its first column.

use crate::outcome::LookupError;
use crate::proto::codec::Tally;

pub struct KeyRows<'k> {
    keys: &'k [u64],
    tally: Result<Tally, LookupError>,
}

impl<'k> KeyRows<'k> {
    /// The tally of the multi-get of `keys`.
    pub fn new(keys: &'k [u64]) -> Self {
        KeyRows {
            keys,
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
        let asked = self.keys.iter().filter(|&&k| k == key).count() as u32;
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
