//! `--key-format`: how memcached and Redis keys name an id, printf-style, so loadgen reads data
//! another tool loaded: `usr:%d` (loadgen's own), `key:%012d` (redis-benchmark -r),
//! `memtier-%d` (memtier_benchmark). One `%d`, optionally zero-padded (`%0Nd`); `%%` is a `%`.

use crate::decimal;
use crate::error::ConfigError;

/// memcached's longest key; Redis takes longer, but one limit keeps a format good for both.
pub const MAX_KEY_LEN: usize = 250;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFormat {
    head: Vec<u8>,
    /// Zero-padded to this many digits (0: no padding).
    width: usize,
    tail: Vec<u8>,
}

impl Default for KeyFormat {
    fn default() -> KeyFormat {
        KeyFormat::prefix(b"usr:")
    }
}

impl KeyFormat {
    /// `<prefix><id>`.
    pub fn prefix(p: &[u8]) -> KeyFormat {
        KeyFormat {
            head: p.to_vec(),
            width: 0,
            tail: Vec::new(),
        }
    }

    pub fn parse(s: &str) -> Result<KeyFormat, ConfigError> {
        let bad = |why: &str| {
            ConfigError(format!(
                "bad --key-format '{s}': {why}; use text around one %d or %0Nd, like usr:%d, key:%012d or memtier-%d"
            ))
        };
        let (mut head, mut tail, mut width) = (Vec::new(), Vec::new(), None);
        let mut rest = s.as_bytes();
        while let Some((&b, after)) = rest.split_first() {
            rest = after;
            let out = if width.is_some() {
                &mut tail
            } else {
                &mut head
            };
            if b != b'%' {
                out.push(b);
                continue;
            }
            if let Some(after) = rest.strip_prefix(b"%") {
                out.push(b'%');
                rest = after;
                continue;
            }
            if width.is_some() {
                return Err(bad("it has more than one %d"));
            }
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            let (spec, after) = rest.split_at(digits);
            rest = after
                .strip_prefix(b"d")
                .ok_or_else(|| bad("only %d and %0Nd are taken"))?;
            width = Some(match spec {
                [] => 0,
                [b'0', n @ ..] if !n.is_empty() => decimal::parse::<usize>(n).unwrap_or(usize::MAX),
                _ => return Err(bad("a width must be zero-padded, like %012d")),
            });
        }
        let width = width.ok_or_else(|| bad("it has no %d for the id"))?;
        if width > 20 {
            return Err(bad("the width is above 20 digits"));
        }
        if head.len() + tail.len() + 20 > MAX_KEY_LEN {
            return Err(bad("with a 20-digit id a key would pass 250 bytes"));
        }
        if head.iter().chain(&tail).any(|&b| b <= b' ' || b == 0x7f) {
            return Err(bad("a key cannot hold spaces or control characters"));
        }
        Ok(KeyFormat { head, width, tail })
    }

    /// Appends the key of `id`.
    #[inline]
    pub fn write(&self, id: u64, out: &mut Vec<u8>) {
        let mut buf = [0u8; 20];
        let digits = decimal::digits(id, &mut buf);
        out.extend_from_slice(&self.head);
        for _ in digits.len()..self.width {
            out.push(b'0');
        }
        out.extend_from_slice(digits);
        out.extend_from_slice(&self.tail);
    }

    /// The key of `id` on the stack (`len` bytes of `buf`), for encoders that must not allocate.
    #[inline]
    pub fn on_stack(&self, id: u64) -> ([u8; MAX_KEY_LEN], usize) {
        let mut buf = [0u8; MAX_KEY_LEN];
        let mut digits = [0u8; 20];
        let d = decimal::digits(id, &mut digits);
        let pad = self.width.saturating_sub(d.len());
        let mut at = 0;
        for part in [&self.head[..], &[b'0'; 20][..pad], d, &self.tail[..]] {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        (buf, at)
    }

    /// The id a key names in this format (None: another key). Parses rather than writes:
    /// memcached replies carry the key, and this runs on every hit.
    #[inline]
    pub fn id_of(&self, key: &[u8]) -> Option<u64> {
        let digits = key
            .strip_prefix(&self.head[..])?
            .strip_suffix(&self.tail[..])?;
        let canonical = match self.width {
            0 => !(digits.len() > 1 && digits[0] == b'0'),
            w => digits.len() == w || (digits.len() > w && digits[0] != b'0'),
        };
        match canonical && !digits.is_empty() && digits.len() <= 20 {
            true => decimal::parse::<u64>(digits),
            false => None,
        }
    }

    /// The text before the id and after it.
    pub fn around(&self) -> (&[u8], &[u8]) {
        (&self.head, &self.tail)
    }

    /// As `parse` reads it.
    pub fn text(&self) -> String {
        let esc = |b: &[u8]| String::from_utf8_lossy(b).replace('%', "%%");
        let spec = match self.width {
            0 => "%d".to_string(),
            w => format!("%0{w}d"),
        };
        format!("{}{spec}{}", esc(&self.head), esc(&self.tail))
    }
}

/// The URL option that carries a key format (`prepare --key-format` sets it; a URL may too,
/// with `%` written `%25`).
pub const KEY_FORMAT: &str = "key-format";

/// A target's key format: `--key-format`, else the URL's `?key-format=`; None: neither.
pub fn key_format(
    url: &crate::url::TargetUrl,
    given: Option<&KeyFormat>,
) -> Result<Option<KeyFormat>, ConfigError> {
    match (given, url.param(KEY_FORMAT)) {
        (Some(f), _) => Ok(Some(f.clone())),
        (None, Some(text)) => KeyFormat::parse(text).map(Some),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_write_and_read_back_their_ids() {
        for (f, id, key) in [
            ("usr:%d", 42, "usr:42"),
            ("key:%012d", 42, "key:000000000042"),
            ("memtier-%d", 7, "memtier-7"),
            ("a%%b%03d.x", 1234, "a%b1234.x"),
        ] {
            let k = KeyFormat::parse(f).unwrap();
            let mut out = Vec::new();
            k.write(id, &mut out);
            assert_eq!(out, key.as_bytes(), "{f}");
            let (buf, n) = k.on_stack(id);
            assert_eq!(&buf[..n], key.as_bytes(), "{f}");
            assert_eq!(k.id_of(key.as_bytes()), Some(id), "{f}");
            assert_eq!(k.text(), f);
        }
        let k = KeyFormat::parse("key:%012d").unwrap();
        assert_eq!(k.id_of(b"key:42"), None);
        assert_eq!(KeyFormat::default().id_of(b"usr:042"), None);
        assert_eq!(KeyFormat::default().id_of(b"other:42"), None);
        for bad in ["usr:", "%d%d", "%5d", "%s", "a b%d", "%030d"] {
            let e = KeyFormat::parse(bad).unwrap_err().0;
            assert!(e.starts_with(&format!("bad --key-format '{bad}'")), "{e}");
        }
    }
}
