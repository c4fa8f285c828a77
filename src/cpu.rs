//! CPU time from /proc: the server's process tree over a run (where each lookup's time went on
//! the server side) and the kernel share of a worker thread. The server is found from the port it listens on (the
//! process holding that listening socket) or given with `--server-pid`; a remote server has
//! none, and the report says why.

use std::collections::HashMap;
use std::path::Path;

use crate::transport::Endpoint;

/// Clock ticks per second of /proc's CPU times (USER_HZ, 100 on every Linux ABI).
const TICKS_PER_S: u64 = 100;

/// The server whose CPU a run reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerProcess {
    /// A process on this machine: it and every process below it (PostgreSQL's backends).
    Process { pid: u32, name: String },
    /// The embedded server: threads of this process (its CPU is the process's minus the
    /// workers').
    InProcess,
    /// The processes of a set's servers on this machine, each once (two shards may be two
    /// databases of one server): their CPU is summed.
    Set(Vec<(u32, String)>),
    /// Not measured, and why.
    Unknown(String),
}

impl Default for ServerProcess {
    fn default() -> ServerProcess {
        ServerProcess::Unknown("the server was not located".into())
    }
}

impl ServerProcess {
    /// The process `pid`, when the user named it (`--server-pid`).
    pub fn pid(pid: u32) -> ServerProcess {
        match process_name(pid) {
            Some(name) => ServerProcess::Process { pid, name },
            None => ServerProcess::Unknown(format!("--server-pid {pid}: no such process")),
        }
    }

    /// The server listening at `endpoint`: the process holding its listening socket.
    pub fn locate(endpoint: &Endpoint) -> ServerProcess {
        let (inodes, place) = match endpoint {
            Endpoint::Tcp { host, port } => {
                if !is_local(host) {
                    return ServerProcess::Unknown(format!(
                        "{host} is not this machine: its CPU cannot be read from here"
                    ));
                }
                let tables = ["/proc/net/tcp", "/proc/net/tcp6"].map(std::fs::read_to_string);
                let inodes: Vec<u64> = tables
                    .iter()
                    .flatten()
                    .flat_map(|t| listening_inodes(t, *port))
                    .collect();
                (inodes, format!("port {port}"))
            }
            Endpoint::Unix(path) => {
                let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
                (unix_inodes(&table, path), path.display().to_string())
            }
        };
        match inodes.iter().find_map(|&i| socket_owner(i)) {
            Some(pid) => ServerProcess::Process {
                pid,
                name: process_name(pid).unwrap_or_default(),
            },
            None => ServerProcess::Unknown(format!(
                "no process of this machine that loadgen may read listens on {place} \
                 (name it with --server-pid)"
            )),
        }
    }

    /// The servers of a set at `endpoints`: one process when they are all one, else each
    /// process once; Unknown when any of them is not located.
    pub fn locate_all(endpoints: &[Endpoint]) -> ServerProcess {
        let mut found: Vec<(u32, String)> = Vec::new();
        for ep in endpoints {
            match ServerProcess::locate(ep) {
                ServerProcess::Process { pid, name } => {
                    if !found.iter().any(|(p, _)| *p == pid) {
                        found.push((pid, name));
                    }
                }
                ServerProcess::Unknown(why) => {
                    return ServerProcess::Unknown(format!("a server of the set, {ep}: {why}"))
                }
                other => return other,
            }
        }
        match found.len() {
            0 => ServerProcess::default(),
            1 => {
                let (pid, name) = found.remove(0);
                ServerProcess::Process { pid, name }
            }
            _ => ServerProcess::Set(found),
        }
    }

    /// CPU time of the server's processes so far, nanoseconds (None: not a process, or gone).
    pub fn cpu_ns(&self) -> Option<u64> {
        match self {
            ServerProcess::Process { pid, .. } => tree_cpu_ticks(*pid).map(ticks_to_ns),
            ServerProcess::Set(all) => all
                .iter()
                .map(|(pid, _)| tree_cpu_ticks(*pid))
                .sum::<Option<u64>>()
                .map(ticks_to_ns),
            _ => None,
        }
    }
}

fn ticks_to_ns(t: u64) -> u64 {
    t * (1_000_000_000 / TICKS_PER_S)
}

fn is_local(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip.is_unspecified() || local_addresses().contains(&ip),
        Err(_) => false,
    }
}

/// The addresses of this machine's interfaces, from the kernel's IPv4 routing table view
/// (`/proc/net/fib_trie` lists local addresses as `/32 host LOCAL`).
fn local_addresses() -> Vec<std::net::IpAddr> {
    let Ok(t) = std::fs::read_to_string("/proc/net/fib_trie") else {
        return Vec::new();
    };
    let lines: Vec<&str> = t.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[1].contains("/32 host LOCAL"))
        .filter_map(|w| w[0].split_whitespace().last()?.parse().ok())
        .collect()
}

/// Inodes of the sockets in LISTEN state on `port` in a /proc/net/tcp{,6} table.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
            // State 0A is TCP_LISTEN.
            (local_port == port && *f.get(3)? == "0A").then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// Inodes of the listening sockets bound to `path` in /proc/net/unix (state 01 with the
/// listening flag 00010000).
fn unix_inodes(table: &str, path: &Path) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let listening = f.get(3) == Some(&"00010000");
            (listening && f.get(7).map(Path::new) == Some(path)).then(|| f.get(6)?.parse().ok())?
        })
        .collect()
}

/// The process that holds socket `inode` open (the first found: a forking server's children
/// inherit the listening socket, and the parent comes first in /proc's order).
fn socket_owner(inode: u64) -> Option<u32> {
    let want = format!("socket:[{inode}]");
    let mut pids: Vec<u32> = pids();
    pids.sort_unstable();
    pids.into_iter().find(|pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()))
    })
}

fn pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn process_name(pid: u32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(s.trim().to_string())
}

/// The fields of a /proc stat line after `pid (comm)`: field 3 (state) is index 0.
fn stat_fields(line: &str) -> Option<Vec<&str>> {
    let rest = &line[line.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// (ppid, own ticks, reaped children's ticks) of one /proc/<pid>/stat line.
fn stat_cpu(line: &str) -> Option<(u32, u64, u64)> {
    let f = stat_fields(line)?;
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    // utime, stime, cutime, cstime are fields 14-17 (indices 11-14 here); ppid is field 4.
    Some((f.get(1)?.parse().ok()?, n(11)? + n(12)?, n(13)? + n(14)?))
}

/// Ticks of `root` and every live process below it, plus what `root` has reaped: a
/// PostgreSQL backend that exits during the run is counted by the postmaster's children time.
fn tree_cpu_ticks(root: u32) -> Option<u64> {
    let mut procs: HashMap<u32, (u32, u64, u64)> = HashMap::new();
    for pid in pids() {
        if let Some(c) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|l| stat_cpu(&l))
        {
            procs.insert(pid, c);
        }
    }
    let &(_, own, reaped) = procs.get(&root)?;
    Some(own + reaped + descendants_ticks(&procs, root))
}

fn descendants_ticks(procs: &HashMap<u32, (u32, u64, u64)>, root: u32) -> u64 {
    procs
        .iter()
        .filter(|(_, (ppid, ..))| *ppid == root)
        .map(|(&pid, &(_, own, reaped))| own + reaped + descendants_ticks(procs, pid))
        .sum()
}

/// (user, system) ticks of the calling thread, for the kernel share of the generator's CPU.
pub fn thread_ticks() -> Option<(u64, u64)> {
    let line = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let f = stat_fields(&line)?;
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TempDir;

    #[test]
    fn listening_sockets_are_found_by_port_and_state() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:D858 00000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 41234 1 0 100 0 0 10 0
   1: 0100007F:D858 0100007F:9C40 01 00000000:00000000 00:00000000 00000000   106        0 41299 1 0 20 4 30 10 -1
   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0 100 0 0 10 0";
        // 0xD858 = 55384: the listener, not the established connection on the same port.
        assert_eq!(listening_inodes(t, 55384), [41234]);
        assert_eq!(listening_inodes(t, 8080), [777]);
        assert!(listening_inodes(t, 1).is_empty());
    }

    #[test]
    fn stat_lines_with_spaces_and_parens_in_the_name() {
        let l = "4242 (postgres: a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 3 20 0 1 0 5 0 0";
        assert_eq!(stat_cpu(l), Some((17, 280, 10)));
    }

    #[test]
    fn this_process_is_found_and_its_cpu_counts() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = tcp("127.0.0.1", l.local_addr().unwrap().port());
        let me = std::process::id();
        match ServerProcess::locate(&addr) {
            ServerProcess::Process { pid, .. } => assert_eq!(pid, me),
            other => panic!("{other:?}"),
        }
        let before = ServerProcess::locate(&addr).cpu_ns().unwrap();
        // Spin for 300 ms of this thread's CPU (not wall time: the machine may be busy).
        let t = crate::worker::thread_cpu_ns();
        let mut x = 0u64;
        while crate::worker::thread_cpu_ns() - t < 300_000_000 {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let after = ServerProcess::locate(&addr).cpu_ns().unwrap();
        assert!(after - before >= 280_000_000, "{before} -> {after}");
    }

    #[test]
    fn a_remote_host_or_a_free_port_is_unknown_with_a_reason() {
        let ServerProcess::Unknown(why) = ServerProcess::locate(&tcp("db.example.com", 5432))
        else {
            panic!()
        };
        assert!(why.contains("not this machine"), "{why}");
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        let ServerProcess::Unknown(why) = ServerProcess::locate(&tcp("127.0.0.1", port)) else {
            panic!()
        };
        assert!(why.contains("--server-pid"), "{why}");
        assert!(matches!(
            ServerProcess::pid(std::process::id()),
            ServerProcess::Process { .. }
        ));
    }

    #[test]
    fn a_unix_socket_server_is_found_by_its_path() {
        let dir = TempDir::new("loadgen-cpu");
        let path = dir.join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let found = ServerProcess::locate(&Endpoint::Unix(path.clone()));
        match found {
            ServerProcess::Process { pid, .. } => assert_eq!(pid, std::process::id()),
            other => panic!("{other:?}"),
        }
    }

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp {
            host: host.into(),
            port,
        }
    }
}
