//! A sharded SQL target's key ranges: several URLs of one protocol, each declaring the ids its
//! server holds with `?keys=FROM-TO`, written as one target
//! (`postgres://h1/db?keys=1-500000 postgres://h2/db?keys=500001-1000000`). The ranges must
//! follow each other without gap or overlap; the first reaches down to id 0 and the last up
//! without end, so every id has one owner (inserts above the data set land on the last shard).

use crate::error::SetupError;
use crate::proto::routed::Router;
use crate::url::TargetUrl;

/// The URL option that declares a shard's ids.
pub const KEYS: &str = "keys";

/// One shard: its URL without `?keys=`, and the ids it declared.
#[derive(Clone, Debug)]
pub struct Shard {
    pub url: TargetUrl,
    /// The URL as given, redacted, `?keys=` included: results name the shard so, and a
    /// repeat of the result runs the same shards.
    pub label: String,
    pub from: u64,
    pub to: u64,
}

/// The shards of `target`: several URLs separated by spaces, each with `?keys=`; None when
/// `target` is one URL without `?keys=` (not sharded).
pub fn parse(target: &str) -> Result<Option<Vec<Shard>>, SetupError> {
    let words: Vec<&str> = target.split_whitespace().collect();
    if words.len() == 1 && !has_keys(words[0]) {
        return Ok(None);
    }
    let mut shards = Vec::with_capacity(words.len());
    for w in &words {
        let mut url = TargetUrl::parse(w)?;
        let label = url.redacted();
        let range = url.param(KEYS).map(str::to_string).ok_or_else(|| {
            SetupError(format!(
                "{label}: a shard declares its ids with ?keys=FROM-TO (every URL of a sharded target has one)"
            ))
        })?;
        let (from, to) = crate::plan::parse_key_range(&range)
            .map_err(|e| SetupError(format!("{label}: ?keys={range}: {}", e.0)))?;
        url.query.retain(|(k, _)| k != KEYS);
        url.query_raw
            .retain(|kv| kv.split_once('=').map_or(kv.as_str(), |(k, _)| k) != KEYS);
        shards.push(Shard {
            url,
            label,
            from,
            to,
        });
    }
    for pair in shards.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.url.scheme != b.url.scheme {
            return Err(SetupError(format!(
                "shards of one target speak one protocol: {} then {}",
                a.url.redacted(),
                b.url.redacted()
            )));
        }
        if b.from != a.to + 1 {
            return Err(SetupError(format!(
                "shard key ranges must follow each other in order, without gap or overlap: ?keys={}-{} then ?keys={}-{} (the next should start at {})",
                a.from,
                a.to,
                b.from,
                b.to,
                a.to + 1
            )));
        }
    }
    Ok(Some(shards))
}

/// Whether one URL declares shard keys (`?keys=` in its query). Not an HTTP URL's: its query
/// is the server's own, which may well name `keys`.
fn has_keys(url: &str) -> bool {
    if url.to_ascii_lowercase().starts_with("http") {
        return false;
    }
    url.split_once('?').is_some_and(|(_, q)| {
        q.split('&')
            .any(|kv| kv.split_once('=').map_or(kv, |(k, _)| k) == KEYS)
    })
}

/// The command line's targets with each run of shard URLs (`?keys=`) joined into one target.
pub fn group(targets: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(targets.len());
    let mut open = false;
    for t in targets {
        let shard = has_keys(t);
        match out.last_mut() {
            Some(last) if open && shard => {
                last.push(' ');
                last.push_str(t);
            }
            _ => out.push(t.clone()),
        }
        open = shard;
    }
    out
}

/// Which shard owns an id: the last whose range starts at or below it.
pub struct Ranges {
    starts: Vec<u64>,
    /// Under `--batch` a shard counts statements, so a multi-get part counts 1.
    parts: bool,
}

impl Ranges {
    pub fn new(shards: &[Shard], parts: bool) -> Ranges {
        Ranges {
            starts: shards.iter().map(|s| s.from).collect(),
            parts,
        }
    }

    /// The ids `keys` of shard `i` of `shards` holds: the part of `keys` in its range, the first
    /// range open below and the last above. None: none of them.
    pub fn share(shards: &[Shard], i: usize, keys: (u64, u64)) -> Option<(u64, u64)> {
        let from = if i == 0 { 0 } else { shards[i].from };
        let to = if i + 1 == shards.len() {
            u64::MAX
        } else {
            shards[i].to
        };
        let (a, b) = (keys.0.max(from), keys.1.min(to));
        (a <= b).then_some((a, b))
    }
}

impl Router for Ranges {
    /// Keys go by id ([`Self::owner_id`]); a name is read as its decimal id.
    fn owner(&self, key: &[u8]) -> usize {
        let id = key
            .iter()
            .filter(|b| b.is_ascii_digit())
            .fold(0u64, |n, b| {
                n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
            });
        self.owner_id(id).unwrap_or(0)
    }

    #[inline]
    fn owner_id(&self, id: u64) -> Option<usize> {
        Some(self.starts.partition_point(|&s| s <= id).saturating_sub(1))
    }

    fn weight(&self, keys: usize) -> u64 {
        match self.parts {
            true => 1,
            false => keys as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards(s: &str) -> Result<Vec<Shard>, String> {
        parse(s).map(Option::unwrap).map_err(|e| e.0)
    }

    #[test]
    fn ranges_tile_the_ids_and_route_by_id() {
        let s = shards("postgres://u@h1/db?keys=1-500 postgres://u@h2/db?keys=501-1000").unwrap();
        assert_eq!(
            (s[0].from, s[0].to, s[1].from, s[1].to),
            (1, 500, 501, 1000)
        );
        assert!(
            s[0].url.param(KEYS).is_none(),
            "keys= is loadgen's, not the server's"
        );
        let r = Ranges::new(&s, false);
        let owners: Vec<_> = [0, 1, 500, 501, 1000, 5000]
            .iter()
            .map(|&id| r.owner_id(id).unwrap())
            .collect();
        assert_eq!(owners, [0, 0, 0, 1, 1, 1]);
        assert_eq!(r.owner(b"501"), 1);
        assert_eq!(Ranges::share(&s, 0, (1, 2000)), Some((1, 500)));
        assert_eq!(Ranges::share(&s, 1, (1, 2000)), Some((501, 2000)));
        assert_eq!(Ranges::share(&s, 1, (1, 400)), None);
        assert_eq!((r.weight(7), Ranges::new(&s, true).weight(7)), (7, 1));
    }

    #[test]
    fn bad_shard_sets_are_refused_with_the_fix() {
        assert!(parse("postgres://u@h/db").unwrap().is_none());
        let gap = shards("postgres://u@h/a?keys=1-10 postgres://u@h/b?keys=12-20").unwrap_err();
        assert!(gap.contains("should start at 11"), "{gap}");
        let overlap = shards("postgres://u@h/a?keys=1-10 postgres://u@h/b?keys=5-20").unwrap_err();
        assert!(overlap.contains("without gap or overlap"), "{overlap}");
        let mixed = shards("postgres://u@h/a?keys=1-10 mysql://u@h/b?keys=11-20").unwrap_err();
        assert!(mixed.contains("one protocol"), "{mixed}");
        let missing = shards("postgres://u:pw@h/a?keys=1-10 postgres://u:pw@h/b").unwrap_err();
        assert!(
            missing.contains("?keys=FROM-TO") && !missing.contains("pw@"),
            "{missing}"
        );
        let bad = shards("postgres://u@h/a?keys=ten").unwrap_err();
        assert!(bad.contains("?keys=ten"), "{bad}");
    }

    #[test]
    fn an_http_query_naming_keys_is_the_servers() {
        assert!(parse("http://h:1/usr?keys={key}").unwrap().is_none());
        let t = vec![
            "http://h/a?keys=1".to_string(),
            "http://h/b?keys=2".to_string(),
        ];
        assert_eq!(group(&t), t);
    }

    #[test]
    fn consecutive_shard_urls_group_into_one_target() {
        let t = |v: &[&str]| group(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            t(&[
                "memcache://h:1",
                "postgres://h/a?keys=1-5",
                "postgres://h/b?keys=6-9",
                "redis://h:2"
            ]),
            [
                "memcache://h:1",
                "postgres://h/a?keys=1-5 postgres://h/b?keys=6-9",
                "redis://h:2"
            ]
        );
    }
}
