//! A Redis Cluster's slot map (`redis://host:port?cluster=1`): which master serves each of the
//! 16,384 hash slots, read from `CLUSTER NODES` of the node the URL names. A key's slot is
//! CRC16 (XMODEM) of the key, or of its hash tag (the part between the first `{` and the next
//! `}`, when not empty), modulo 16,384, as the cluster specification defines it.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use crate::outcome::LookupError;
use crate::proto::redis::login::{Answer, Login};
use crate::proto::routed::{Redirect, Router};

pub const SLOTS: usize = 16384;

/// A master's host and port.
type Node = (String, u16);

/// The masters (host, port), in address order, and each slot's master.
#[derive(Debug)]
pub struct SlotMap {
    pub nodes: Vec<Node>,
    /// Each slot's master; a MOVED reply moves its slot for the rest of the run.
    owner: Vec<AtomicU16>,
    /// The redirects followed so far: MOVED, ASK, TRYAGAIN.
    pub redirects: [AtomicU64; 3],
}

impl SlotMap {
    /// The map of the cluster `login` reaches; every slot must have a master.
    pub async fn discover(login: &Login) -> Result<SlotMap, LookupError> {
        let mut conn = login.open(false).await?;
        let what = "CLUSTER NODES";
        match login.ask(&mut conn, &[b"CLUSTER", b"NODES"], what).await? {
            Answer::Bulk(text) => SlotMap::parse(&String::from_utf8_lossy(&text), &login.addr),
            Answer::Error(e) => Err(LookupError::server(format!(
                "{}: CLUSTER NODES: {e} (is this a Redis Cluster node? drop ?cluster=1 for a single server)",
                login.addr
            ))),
            other => Err(LookupError::protocol(format!(
                "{}: CLUSTER NODES answered {other:?}",
                login.addr
            ))),
        }
    }

    /// `CLUSTER NODES` text: `<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong>
    /// <epoch> <link> <slot or range>...`; a master's slots are `N` or `A-B` (entries in
    /// brackets are slots being migrated, still served by this node).
    pub fn parse(text: &str, addr: &str) -> Result<SlotMap, LookupError> {
        let mut masters: Vec<(Node, Vec<(usize, usize)>)> = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 || !f[2].split(',').any(|x| x == "master") || f[2].contains("fail") {
                continue;
            }
            let hostport = f[1].split(['@', ',']).next().unwrap_or_default();
            let Some(node) = hostport
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            else {
                continue;
            };
            let ranges = f[8..]
                .iter()
                .filter(|r| !r.starts_with('['))
                .filter_map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    Some((a.parse().ok()?, b.parse::<usize>().ok()?.min(SLOTS - 1)))
                })
                .collect();
            masters.push((node, ranges));
        }
        // In address order, so reports list the masters the same way every run.
        masters.sort();
        let mut owner = vec![u16::MAX; SLOTS];
        for (i, (_, ranges)) in masters.iter().enumerate() {
            for &(a, b) in ranges {
                owner
                    .iter_mut()
                    .take(b + 1)
                    .skip(a)
                    .for_each(|o| *o = i as u16);
            }
        }
        let nodes = masters.into_iter().map(|(n, _)| n).collect();
        if let Some(slot) = owner.iter().position(|&o| o == u16::MAX) {
            return Err(LookupError::server(format!(
                "{addr}: the cluster serves no master for slot {slot}: is `cluster_state` ok?"
            )));
        }
        let owner = owner.into_iter().map(AtomicU16::new).collect();
        Ok(SlotMap {
            nodes,
            owner,
            redirects: Default::default(),
        })
    }
}

impl SlotMap {
    /// The redirects followed so far: MOVED, ASK, TRYAGAIN.
    pub fn followed(&self) -> [u64; 3] {
        self.redirects.each_ref().map(|r| r.load(Ordering::Relaxed))
    }
}

impl Router for SlotMap {
    fn owner(&self, key: &[u8]) -> usize {
        usize::from(self.owner[slot(key)].load(Ordering::Relaxed))
    }

    fn place(&self, key: &[u8]) -> (usize, usize) {
        let slot = slot(key);
        (usize::from(self.owner[slot].load(Ordering::Relaxed)), slot)
    }

    /// `MOVED <slot> <host:port>` (the slot is that master's from now on), `ASK <slot>
    /// <host:port>` (this request only, during a slot's migration) or `TRYAGAIN` (a multi-key
    /// request whose keys a migration split), anywhere in `message`; None for any other error,
    /// or a master not in the map. Each one returned is counted.
    fn redirect(&self, message: &str) -> Option<Redirect> {
        let (ask, rest) = match (message.find("MOVED "), message.find("ASK ")) {
            (Some(i), _) => (false, &message[i + 6..]),
            (None, Some(i)) => (true, &message[i + 4..]),
            _ if message.contains("TRYAGAIN") => {
                self.redirects[2].fetch_add(1, Ordering::Relaxed);
                return Some(Redirect::TryAgain);
            }
            _ => return None,
        };
        let mut f = rest.split_whitespace();
        let slot: usize = f.next()?.parse().ok().filter(|&s| s < SLOTS)?;
        let (host, port) = f.next()?.rsplit_once(':')?;
        let port: u16 = port.parse().ok()?;
        let to = self
            .nodes
            .iter()
            .position(|(h, p)| h == host && *p == port)?;
        self.redirects[usize::from(ask)].fetch_add(1, Ordering::Relaxed);
        if ask {
            return Some(Redirect::Ask(to));
        }
        self.owner[slot].store(to as u16, Ordering::Relaxed);
        Some(Redirect::Moved(to))
    }

    fn asking(&self) -> (&'static [u8], &'static [u8]) {
        (b"*1\r\n$6\r\nASKING\r\n", b"+OK")
    }
}

/// The hash slot of `key`.
pub fn slot(key: &[u8]) -> usize {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty());
    usize::from(crc16(tagged.unwrap_or(key))) % SLOTS
}

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial 0, as Redis Cluster uses.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_cluster_specification() {
        // The specification's check value, and slots redis-cli's CLUSTER KEYSLOT gives.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"usr:1"), slot(b"usr:1"));
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(
            slot(b"foo{}{bar}"),
            usize::from(crc16(b"foo{}{bar}")) % SLOTS
        );
        assert_eq!(slot(b"foo{{bar}}zap"), usize::from(crc16(b"{bar")) % SLOTS);
    }

    #[test]
    fn the_map_follows_cluster_nodes() {
        let text = "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                    b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922 [10923->-c3]\n\
                    d4 127.0.0.1:7003@17003 slave b2 0 0 2 connected\n\
                    c3 127.0.0.1:7002@17002,host3 master - 0 0 3 connected 10923-16383\n";
        let text = text.replace("7000", "7009"); // listed first, sorted last
        let m = SlotMap::parse(&text, "x").unwrap();
        assert_eq!(
            m.nodes,
            [
                ("127.0.0.1".into(), 7001),
                ("127.0.0.1".into(), 7002),
                ("127.0.0.1".into(), 7009)
            ]
        );
        let owner = |s: usize| m.owner[s].load(Ordering::Relaxed);
        assert_eq!(
            (owner(0), owner(5461), owner(10923), owner(16383)),
            (2, 0, 1, 1)
        );
        // MOVED moves the slot for good, ASK only the one request; unknown masters are None.
        assert_eq!(
            m.redirect("redis: MOVED 5461 127.0.0.1:7009"),
            Some(Redirect::Moved(2))
        );
        assert_eq!(owner(5461), 2);
        assert_eq!(
            m.redirect("redis: ASK 0 127.0.0.1:7001"),
            Some(Redirect::Ask(0))
        );
        assert_eq!(
            m.redirect("redis: TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(m.followed(), [1, 1, 1]);
        assert_eq!(owner(0), 2);
        assert_eq!(m.redirect("redis: MOVED 1 10.0.0.9:7000"), None);
        assert_eq!(m.redirect("redis: ERR nope"), None);
        let e = SlotMap::parse(&text.replace("10923-16383", "10923-16000"), "x").unwrap_err();
        assert!(e.message.contains("slot 16001"), "{}", e.message);
    }
}
