//! A Redis Cluster of our own for tests: cluster-enabled redis-servers on ports of our own,
//! joined by `redis-cli --cluster create`, and their own counters.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{run, u, TempDir};

/// Cluster-enabled redis-servers of our own, killed when dropped.
pub struct Nodes {
    pub children: Vec<Child>,
    pub ports: Vec<u16>,
    /// Dropped after `drop` below has stopped the servers.
    pub dir: TempDir,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Three masters on ports `first`.. (no replicas).
pub fn start_cluster(first: u16) -> Nodes {
    start_cluster_of(first, 3, 0, &[])
}

/// `masters` masters, each with `replicas` replicas, on ports `first`.. (masters first, as
/// `redis-cli --cluster create` assigns them), each started with `extra` arguments too.
pub fn start_cluster_of(first: u16, masters: u16, replicas: u16, extra: &[&str]) -> Nodes {
    let ports: Vec<u16> = (first..first + masters * (1 + replicas)).collect();
    let mut nodes = Nodes {
        children: Vec::new(),
        ports: ports.clone(),
        dir: TempDir::new(&format!("loadgen-cluster-{first}")),
    };
    for p in &ports {
        let conf = nodes.dir.join(format!("nodes-{p}.conf"));
        let child = Command::new("redis-server")
            .args([
                "--port",
                &p.to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
            ])
            .arg("--cluster-config-file")
            .arg(&conf)
            .arg("--dir")
            .arg(nodes.dir.path())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        nodes.children.push(child);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ports.iter().all(|p| cli(*p, &["ping"]) == "PONG") {
        assert!(
            Instant::now() < deadline,
            "the cluster nodes did not answer PING"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .output()
        .expect("redis-cli --cluster create runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Every node sees the cluster whole, and every replica has its master's data.
    let ready = |p: &u16| {
        cli(*p, &["cluster", "info"]).contains("cluster_state:ok") && {
            let r = cli(*p, &["info", "replication"]);
            r.contains("role:master") || r.contains("master_link_status:up")
        }
    };
    while !ports.iter().all(ready) {
        assert!(Instant::now() < deadline, "cluster_state did not become ok");
        std::thread::sleep(Duration::from_millis(100));
    }
    nodes
}

pub fn gets(port: u16) -> u64 {
    let info = cli(port, &["info", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .map_or(0, |v| v.split(',').next().unwrap().parse().unwrap())
}

/// `cmdstat_mget` calls of one node.
pub fn mgets(port: u16) -> u64 {
    let info = cli(port, &["info", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_mget:calls="))
        .map_or(0, |v| v.split(',').next().unwrap().parse().unwrap())
}

/// Ports of our own next to servers.sh's Redis, low enough that each node's cluster bus (its
/// port + 10,000) lies below the kernel's ephemeral range (32768 up), where a client
/// connection's local port could hold it.
pub fn cluster_ports(redis_url: &str) -> u16 {
    let port: u16 = redis_url.rsplit_once(':').unwrap().1.parse().unwrap();
    12_000 + port % 10_000 + 100
}

/// `nodes` with rows 1..`rows` loaded by `prepare`, and the cluster's URL.
pub fn prepared(nodes: Nodes, rows: &str) -> (Nodes, String) {
    let url = format!("redis://127.0.0.1:{}?cluster=1", nodes.ports[0]);
    let out = run(&["prepare", &url, "--rows", rows]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (nodes, url)
}

/// A run of 8 s over a set one of whose servers (the one whose name ends with `hung`) was
/// stopped from 2 s to 5 s, with `--timeout 1s`: each connection waited for it at most a few
/// times, not once per request of its keys; the others' keys went on (a second in full of the
/// hang answers at least a third of the second before it); it is served again by the last
/// second; and every server's own count is within its range, the hung one's unknowns (its
/// timeouts) its own.
pub fn assert_only_the_hung_server_waited(r: &serde_json::Value, hung: &str) {
    let seconds = r["timeline"].as_array().unwrap();
    assert!(seconds.len() >= 8, "{seconds:?}");
    let timeouts = u(r, "errors.timeout");
    assert!((1..=8).contains(&timeouts), "{}", r["errors"]);
    assert!(
        u(r, "errors.connect") > timeouts,
        "its keys fail at once: {}",
        r["errors"]
    );
    let before = u(&seconds[1], "hits");
    for s in &seconds[3..5] {
        assert!(u(s, "hits") * 3 > before, "{before} then {s}: {seconds:?}");
    }
    assert_eq!(u(&seconds[7], "errors"), 0, "{seconds:?}");
    let so = &r["server_observed"];
    assert_eq!(so["matches"], true, "{so}");
    for m in so["members"].as_array().unwrap() {
        assert_eq!(m["matches"], true, "{m}");
        let is_hung = m["server"].as_str().unwrap().ends_with(hung);
        assert_eq!(m["unknown"].as_u64().unwrap_or(0) > 0, is_hung, "{m}");
        // Its connections were opened again once it answered, and the run counts them.
        assert_eq!(m["reconnects"].as_u64().unwrap_or(0) > 0, is_hung, "{m}");
    }
    assert!(u(r, "reconnects") > 0, "{}", r["reconnects"]);
}
