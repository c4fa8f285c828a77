//! libmemcached's ketama consistent hashing (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, equal weights),
//! so a key of a `memcache://h1:p1,h2:p2` pool goes to the server a real client puts it on.

use md5::{Digest, Md5};

/// md5s per server; each gives four points on the ring (160 points, libmemcached's
/// MEMCACHED_POINTS_PER_SERVER_KETAMA).
const HASHES_PER_SERVER: u32 = 40;

/// The ring: points sorted by value, each naming the index of its server in the pool's list.
#[derive(Debug, Clone)]
pub struct Ring {
    points: Vec<(u32, usize)>,
}

/// Four bytes of an md5 digest, little-endian, as libmemcached reads them.
fn word(digest: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([digest[at], digest[at + 1], digest[at + 2], digest[at + 3]])
}

impl Ring {
    /// A ring over `servers` (host, port) in the order given. The point names are
    /// libmemcached's: `host-i` on port 11211 (memcached's default), else `host:port-i`.
    pub fn new(servers: &[(String, u16)]) -> Ring {
        let mut points = Vec::with_capacity(servers.len() * HASHES_PER_SERVER as usize * 4);
        for (index, (host, port)) in servers.iter().enumerate() {
            for i in 0..HASHES_PER_SERVER {
                let name = if *port == 11211 {
                    format!("{host}-{i}")
                } else {
                    format!("{host}:{port}-{i}")
                };
                let digest = Md5::digest(name.as_bytes());
                for x in 0..4 {
                    points.push((word(&digest, x * 4), index));
                }
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    /// The index of the server owning `key`: the first point at or above the key's hash,
    /// wrapping to the first point (libmemcached's dispatch_host).
    pub fn owner(&self, key: &[u8]) -> usize {
        let hash = word(&Md5::digest(key), 0);
        let at = self.points.partition_point(|&(value, _)| value < hash);
        self.points.get(at).unwrap_or(&self.points[0]).1
    }
}

impl crate::proto::routed::Router for Ring {
    fn owner(&self, key: &[u8]) -> usize {
        Ring::owner(self, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(servers: &[(&str, u16)]) -> String {
        let list: Vec<(String, u16)> = servers.iter().map(|&(h, p)| (h.to_string(), p)).collect();
        let ring = Ring::new(&list);
        (1..=60)
            .map(|n| char::from(b'0' + ring.owner(format!("usr:{n}").as_bytes()) as u8))
            .collect()
    }

    // The expected owners of usr:1..usr:60 came from libmemcached 1.1.4 itself
    // (memcached_generate_hash with MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, called through ctypes).
    #[test]
    fn three_servers_on_own_ports_match_libmemcached() {
        let got = owners(&[
            ("127.0.0.1", 44211),
            ("127.0.0.1", 44212),
            ("127.0.0.1", 44213),
        ]);
        assert_eq!(
            got,
            "111222210012212021110002101201112211100022012010220221200200"
        );
    }

    #[test]
    fn default_port_is_left_out_of_point_names_as_libmemcached_does() {
        let got = owners(&[
            ("127.0.0.1", 11211),
            ("127.0.0.2", 11211),
            ("127.0.0.3", 11211),
        ]);
        assert_eq!(
            got,
            "010022200010100222000002112101221112022110201210112221021111"
        );
    }

    #[test]
    fn two_servers_match_libmemcached() {
        let got = owners(&[("127.0.0.1", 44211), ("127.0.0.1", 44212)]);
        assert_eq!(
            got,
            "111100010011011001110000101101111111100011011010100111000000"
        );
    }

    #[test]
    fn one_server_owns_every_key() {
        assert_eq!(owners(&[("127.0.0.1", 44211)]), "0".repeat(60));
    }
}
