//! `--value-size`: how many bytes each write stores on memcached and Redis: one size, a uniform
//! range, or sizes with weights. A value holds the data set's row, a tab and filler up to the
//! size (`dataset::write_value`), so `--verify` still checks what was written.

use crate::error::ConfigError;
use crate::keys::Rng;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueSize {
    Fixed(u32),
    /// Uniform over `lo..=hi`.
    Range(u32, u32),
    /// (size, weight) pairs; the weights' sum is above 0.
    Weighted(Vec<(u32, u32)>, u64),
}

impl ValueSize {
    /// `55`, `100-1000` or `100:80,4000:20`; every size from 1 byte to 1 MiB.
    pub fn parse(s: &str) -> Result<ValueSize, ConfigError> {
        let bad = |why: String| {
            ConfigError(format!(
                "bad --value-size '{s}': {why}; use a size (55), a range (100-1000) or sizes with weights (100:80,4000:20), in bytes from 1 to {}",
                crate::dataset::MAX_FILL
            ))
        };
        let size = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=crate::dataset::MAX_FILL as u32).contains(n))
                .ok_or_else(|| bad(format!("'{}' is not a size", t.trim())))
        };
        if s.contains(':') {
            let mut pairs = Vec::new();
            for part in s.split(',') {
                let (sz, w) = part
                    .split_once(':')
                    .ok_or_else(|| bad(format!("'{part}' has no :weight")))?;
                let w: u32 = w
                    .trim()
                    .parse()
                    .map_err(|_| bad(format!("weight '{}' is not a whole number", w.trim())))?;
                pairs.push((size(sz)?, w));
            }
            let total = pairs.iter().map(|&(_, w)| u64::from(w)).sum();
            return match total {
                0 => Err(bad("every weight is 0".into())),
                _ => Ok(ValueSize::Weighted(pairs, total)),
            };
        }
        match s.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (size(lo)?, size(hi)?);
                match lo <= hi {
                    true => Ok(ValueSize::Range(lo, hi)),
                    false => Err(bad("the first size is above the last".into())),
                }
            }
            None => Ok(ValueSize::Fixed(size(s)?)),
        }
    }

    /// The next write's size.
    pub fn pick(&self, rng: &mut Rng) -> u32 {
        match self {
            ValueSize::Fixed(n) => *n,
            ValueSize::Range(lo, hi) => lo + rng.below(u64::from(hi - lo) + 1) as u32,
            ValueSize::Weighted(pairs, total) => {
                let mut at = rng.below(*total);
                for &(size, w) in pairs {
                    if at < u64::from(w) {
                        return size;
                    }
                    at -= u64::from(w);
                }
                pairs[pairs.len() - 1].0
            }
        }
    }
}

/// As `parse` reads it.
impl std::fmt::Display for ValueSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueSize::Fixed(n) => write!(f, "{n}"),
            ValueSize::Range(lo, hi) => write!(f, "{lo}-{hi}"),
            ValueSize::Weighted(pairs, _) => {
                let parts: Vec<String> = pairs.iter().map(|(s, w)| format!("{s}:{w}")).collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_form_parses_and_picks_inside_its_sizes() {
        let mut rng = Rng::new(7);
        assert_eq!(ValueSize::parse("55").unwrap().pick(&mut rng), 55);
        let r = ValueSize::parse("100-1000").unwrap();
        let picks: Vec<u32> = (0..10_000).map(|_| r.pick(&mut rng)).collect();
        assert!(picks.iter().all(|p| (100..=1000).contains(p)));
        assert!(picks.contains(&100) && picks.contains(&1000));
        let w = ValueSize::parse("100:80,4000:20").unwrap();
        let big = (0..10_000).filter(|_| w.pick(&mut rng) == 4000).count();
        assert!((1700..2300).contains(&big), "{big} of 10000 at 4000");
        for form in ["55", "100-1000", "100:80,4000:20"] {
            assert_eq!(ValueSize::parse(form).unwrap().to_string(), form);
        }
        for bad in ["0", "x", "10-5", "100:0", "100:x", "2000000", "1-"] {
            let e = ValueSize::parse(bad).unwrap_err().0;
            assert!(e.starts_with(&format!("bad --value-size '{bad}'")), "{e}");
        }
    }
}
