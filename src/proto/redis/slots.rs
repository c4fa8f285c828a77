//! A Redis Cluster's slot map (`redis://host:port?cluster=1`): which master serves each of the
//! 16,384 hash slots, read from `CLUSTER NODES` of the node the URL names. A key's slot is
//! CRC16 (XMODEM) of the key, or of its hash tag (the part between the first `{` and the next
//! `}`, when not empty), modulo 16,384, as the cluster specification defines it.
//!
//! The map knows every node, replicas too, so a replica promoted by a failover is a known
//! server: a `MOVED` to it is followed, and [`SlotMap::reread`] (on a lost master, a
//! `CLUSTERDOWN`, a `MOVED` to a node not known) moves its slots to it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::outcome::LookupError;
use crate::proto::redis::login::{Answer, Login};
use crate::proto::routed::{Redirect, Router};

pub const SLOTS: usize = 16384;

/// The least time between two reads of the map in a run: a few a second at most, as cluster
/// clients do, however many lanes ask.
pub const REREAD_GAP: Duration = Duration::from_millis(200);

/// A node's host and port.
type Node = (String, u16);

/// Slot ranges, `first..=last` each.
type SlotRanges = Vec<(usize, usize)>;

/// One node as a line of `CLUSTER NODES` names it.
struct NodeLine {
    node: Node,
    master: bool,
    /// Failed, or with no address yet.
    gone: bool,
    /// A master's slots.
    ranges: SlotRanges,
}

/// The nodes (host, port), in address order, and each slot's master.
pub struct SlotMap {
    /// Every node the cluster named at the start, masters and replicas.
    pub nodes: Vec<Node>,
    /// Whether each node was a master at the start.
    pub masters: Vec<bool>,
    /// Each slot's master; a MOVED reply or a re-read moves its slot for the rest of the run.
    owner: Vec<AtomicU16>,
    /// The redirects followed so far: MOVED, ASK, TRYAGAIN, CLUSTERDOWN; then the map's
    /// re-reads.
    pub redirects: [AtomicU64; 5],
    /// Each node's login, to read the map again from whichever answers.
    logins: Vec<Login>,
    /// When the map was last read, in ms since `born`; and whether a lane is reading it now.
    last_read_ms: AtomicU64,
    reading: AtomicBool,
    born: Instant,
}

/// Its nodes only: the logins hold the password.
impl std::fmt::Debug for SlotMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotMap")
            .field("nodes", &self.nodes)
            .finish()
    }
}

/// The `CLUSTER NODES` of the node `login` reaches.
async fn cluster_nodes(login: &Login) -> Result<String, LookupError> {
    let mut conn = login.open(false).await?;
    let what = "CLUSTER NODES";
    match login.ask(&mut conn, &[b"CLUSTER", b"NODES"], what).await? {
        Answer::Bulk(text) => Ok(String::from_utf8_lossy(&text).into_owned()),
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

/// One line of `CLUSTER NODES`: `<id> <ip:port@cport[,hostname]> <flags> <master> <ping>
/// <pong> <epoch> <link> <slot or range>...`: the node, whether it is a master, whether it is
/// failed (or has no address yet), and a master's slots (`N` or `A-B`; entries in brackets
/// are slots being migrated, still served by this node).
fn node_line(line: &str) -> Option<NodeLine> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let flags: Vec<&str> = f[2].split(',').collect();
    let master = flags.contains(&"master");
    let gone = flags
        .iter()
        .any(|x| matches!(*x, "fail" | "noaddr" | "handshake"));
    let hostport = f[1].split(['@', ',']).next().unwrap_or_default();
    let (h, p) = hostport.rsplit_once(':')?;
    let node = (h.to_string(), p.parse::<u16>().ok().filter(|&p| p > 0)?);
    let ranges = f[8..]
        .iter()
        .filter(|r| !r.starts_with('['))
        .filter_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            Some((a.parse().ok()?, b.parse::<usize>().ok()?.min(SLOTS - 1)))
        })
        .collect();
    Some(NodeLine {
        node,
        master,
        gone,
        ranges,
    })
}

impl SlotMap {
    /// The map of the cluster `login` reaches; every slot must have a master.
    pub async fn discover(login: &Login) -> Result<SlotMap, LookupError> {
        let text = cluster_nodes(login).await?;
        let mut map = SlotMap::parse(&text, &login.addr)?;
        map.logins = map.nodes.iter().map(|(h, p)| login.at(h, *p)).collect();
        Ok(map)
    }

    /// The map from the node `login` reaches, or from each node of `seeds` in turn until one
    /// answers (the last one's error when none does), as cluster clients read a seed list.
    pub async fn discover_any(
        login: &Login,
        seeds: &[(String, u16)],
    ) -> Result<SlotMap, LookupError> {
        let mut last = None;
        for (host, port) in seeds {
            match SlotMap::discover(&login.at(host, *port)).await {
                Ok(map) => return Ok(map),
                Err(e) => last = Some(e),
            }
        }
        match last {
            Some(e) => Err(e),
            None => SlotMap::discover(login).await,
        }
    }

    /// `CLUSTER NODES` text: every node not failed, in address order (so reports list them
    /// the same way every run), and each slot's master.
    pub fn parse(text: &str, addr: &str) -> Result<SlotMap, LookupError> {
        let mut nodes: Vec<(Node, bool, SlotRanges)> = text
            .lines()
            .filter_map(node_line)
            .filter(|l| !l.gone)
            .map(|l| match l.master {
                true => (l.node, true, l.ranges),
                false => (l.node, false, Vec::new()),
            })
            .collect();
        nodes.sort();
        let mut owner = vec![u16::MAX; SLOTS];
        for (i, (_, _, ranges)) in nodes.iter().enumerate() {
            for &(a, b) in ranges {
                owner
                    .iter_mut()
                    .take(b + 1)
                    .skip(a)
                    .for_each(|o| *o = i as u16);
            }
        }
        if let Some(slot) = owner.iter().position(|&o| o == u16::MAX) {
            return Err(LookupError::server(format!(
                "{addr}: the cluster serves no master for slot {slot}: is `cluster_state` ok?"
            )));
        }
        Ok(SlotMap {
            masters: nodes.iter().map(|n| n.1).collect(),
            nodes: nodes.into_iter().map(|n| n.0).collect(),
            owner: owner.into_iter().map(AtomicU16::new).collect(),
            redirects: Default::default(),
            logins: Vec::new(),
            last_read_ms: AtomicU64::new(0),
            reading: AtomicBool::new(false),
            born: Instant::now(),
        })
    }

    /// The redirects followed so far (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) and the map's re-reads.
    pub fn followed(&self) -> [u64; 5] {
        self.redirects.each_ref().map(|r| r.load(Ordering::Relaxed))
    }

    /// Moves each slot to the master a `CLUSTER NODES` text names for it, where that master is
    /// a known node; returns how many slots moved.
    pub fn follow(&self, text: &str) -> usize {
        let mut moved = 0;
        for l in text.lines().filter_map(node_line).filter(|l| l.master) {
            let Some(i) = self.nodes.iter().position(|n| *n == l.node) else {
                continue;
            };
            for (a, b) in l.ranges {
                for o in self.owner.iter().take(b + 1).skip(a) {
                    moved += usize::from(o.swap(i as u16, Ordering::Relaxed) != i as u16);
                }
            }
        }
        moved
    }

    /// Reads the map again from the first node that answers (starting after the one named
    /// `first`), unless it was read within [`REREAD_GAP`] or another lane is reading it.
    pub async fn reread(&self, first: usize) {
        let now = self.born.elapsed().as_millis() as u64;
        let last = self.last_read_ms.load(Ordering::Relaxed);
        if (last > 0 && now < last + REREAD_GAP.as_millis() as u64)
            || self.reading.swap(true, Ordering::Acquire)
        {
            return;
        }
        // Cleared however this ends: a lane's request may be dropped at its timeout mid-read.
        let _reading = Reading(&self.reading);
        let n = self.logins.len();
        for k in 1..=n {
            if let Ok(text) = cluster_nodes(&self.logins[(first + k) % n]).await {
                self.follow(&text);
                break;
            }
        }
        self.redirects[4].fetch_add(1, Ordering::Relaxed);
        self.last_read_ms.store(
            self.born.elapsed().as_millis().max(1) as u64,
            Ordering::Relaxed,
        );
    }
}

/// Marks the map as being read while it lives.
struct Reading<'a>(&'a AtomicBool);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
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
    /// <host:port>` (this request only, during a slot's migration), `TRYAGAIN` (a multi-key
    /// request whose keys a migration split) or `CLUSTERDOWN` (a failover under way),
    /// anywhere in `message`; None for any other error, or a node not in the map. Each one
    /// returned is counted.
    fn redirect(&self, message: &str) -> Option<Redirect> {
        let (ask, rest) = match (message.find("MOVED "), message.find("ASK ")) {
            (Some(i), _) => (false, &message[i + 6..]),
            (None, Some(i)) => (true, &message[i + 4..]),
            _ if message.contains("TRYAGAIN") => {
                self.redirects[2].fetch_add(1, Ordering::Relaxed);
                return Some(Redirect::TryAgain);
            }
            _ if message.contains("CLUSTERDOWN") => {
                self.redirects[3].fetch_add(1, Ordering::Relaxed);
                return Some(Redirect::Down);
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

    /// A multi-get's part is one MGET of one slot's keys: one call, as the node counts it.
    fn weight(&self, _keys: usize) -> u64 {
        1
    }

    fn asking(&self) -> (&'static [u8], &'static [u8]) {
        (b"*1\r\n$6\r\nASKING\r\n", b"+OK")
    }

    fn reread(&self, at: usize) -> Option<Pin<Box<dyn Future<Output = ()> + '_>>> {
        Some(Box::pin(SlotMap::reread(self, at)))
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
        // Every node, the replica too: a failover may make it a master.
        assert_eq!(
            m.nodes,
            [
                ("127.0.0.1".into(), 7001),
                ("127.0.0.1".into(), 7002),
                ("127.0.0.1".into(), 7003),
                ("127.0.0.1".into(), 7009)
            ]
        );
        assert_eq!(m.masters, [true, true, false, true]);
        let owner = |s: usize| m.owner[s].load(Ordering::Relaxed);
        assert_eq!(
            (owner(0), owner(5461), owner(10923), owner(16383)),
            (3, 0, 1, 1)
        );
        // MOVED moves the slot for good, ASK only the one request; unknown masters are None.
        assert_eq!(
            m.redirect("redis: MOVED 5461 127.0.0.1:7009"),
            Some(Redirect::Moved(3))
        );
        assert_eq!(owner(5461), 3);
        assert_eq!(
            m.redirect("redis: ASK 0 127.0.0.1:7001"),
            Some(Redirect::Ask(0))
        );
        assert_eq!(
            m.redirect("redis: TRYAGAIN Multiple keys request during rehashing of slot"),
            Some(Redirect::TryAgain)
        );
        assert_eq!(
            m.redirect("redis: CLUSTERDOWN The cluster is down"),
            Some(Redirect::Down)
        );
        assert_eq!(m.followed(), [1, 1, 1, 1, 0]);
        assert_eq!(owner(0), 3);
        assert_eq!(m.redirect("redis: MOVED 1 10.0.0.9:7000"), None);
        assert_eq!(m.redirect("redis: ERR nope"), None);
        // A MOVED to the replica, once it is promoted, is followed as to any master.
        assert_eq!(
            m.redirect("redis: MOVED 5462 127.0.0.1:7003"),
            Some(Redirect::Moved(2))
        );
        // After a failover: b2 failed, its replica d4 serves its slots; a node added since
        // (7005) is not known, so its slot stays where it was.
        let after = "a1 127.0.0.1:7009@17000 master - 0 0 1 connected 0-5460\n\
                     b2 127.0.0.1:7001@17001 master,fail - 0 0 2 disconnected\n\
                     d4 127.0.0.1:7003@17003 master - 0 0 4 connected 5461-10921\n\
                     e5 127.0.0.1:7005@17005 master - 0 0 5 connected 10922\n\
                     c3 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383\n";
        assert_eq!(m.follow(after), 10921 - 5461 + 1 - 1);
        assert_eq!((owner(5461), owner(10921), owner(10922)), (2, 2, 0));
        assert_eq!(owner(0), 3);
        // A failed node is left out of a new map.
        let failed = SlotMap::parse(after.replace("10922\n", "10922-10922\n").as_str(), "x");
        assert!(failed.unwrap().nodes.iter().all(|n| n.1 != 7001));
        let e = SlotMap::parse(&text.replace("10923-16383", "10923-16000"), "x").unwrap_err();
        assert!(e.message.contains("slot 16001"), "{}", e.message);
    }
}
