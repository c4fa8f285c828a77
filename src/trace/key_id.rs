//! A trace key as an id of the data set, for SQL, HandlerSocket and HTTP, which look rows up by id.

use super::line::digits;

/// A key written as a decimal number is that id when it lies in `lo..=hi`; any other key maps
/// into `lo..=hi` by FNV-1a (64-bit) of its bytes modulo the span: stable across runs, machines
/// and loadgen versions, so a replay reads the same rows.
pub fn key_id(key: &[u8], lo: u64, hi: u64) -> u64 {
    if let Some(n) = decimal(key) {
        if (lo..=hi).contains(&n) {
            return n;
        }
    }
    lo + fnv1a(key) % (hi - lo + 1)
}

/// At most 19 digits: every such number fits a u64.
fn decimal(s: &[u8]) -> Option<u64> {
    (!s.is_empty() && s.len() <= 19)
        .then(|| digits(s))
        .flatten()
}

pub fn fnv1a(s: &[u8]) -> u64 {
    s.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_keys_are_ids_others_hash_stably() {
        assert_eq!(key_id(b"42", 1, 1_000_000), 42);
        // Out of range numbers hash like any other key.
        assert_eq!(key_id(b"0", 1, 10), 1 + fnv1a(b"0") % 10);
        // FNV-1a 64 of "a" is a published value: the mapping cannot drift silently.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let id = key_id(b"user:alice", 1, 1_000_000);
        assert!((1..=1_000_000).contains(&id));
        assert_eq!(id, key_id(b"user:alice", 1, 1_000_000));
        assert_ne!(id, key_id(b"user:bob", 1, 1_000_000));
    }
}
