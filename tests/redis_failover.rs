//! A Redis Cluster with replicas (three masters, one replica each, `cluster-node-timeout`
//! 2 s) failing over mid-run: loadgen follows the promoted replica, and every node's own
//! counters, read here, add up to what loadgen says it did.

mod common;
use common::cluster::*;
use common::*;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Six nodes of our own with rows 1..`rows` loaded, and the cluster's URL.
fn replicated_cluster(first: u16, rows: &str) -> (Nodes, String) {
    let nodes = start_cluster_of(first, 3, 1, &["--cluster-node-timeout", "2000"]);
    prepared(nodes, rows)
}

/// A master other than the URL's node, and the port of its replica.
fn master_and_replica(nodes: &Nodes) -> (u16, u16) {
    let id = |p: u16| cli(p, &["cluster", "myid"]);
    let role = |p: u16| cli(p, &["role"]);
    let master = *nodes.ports[1..]
        .iter()
        .find(|&&p| role(p).starts_with("master"))
        .expect("a master");
    let master_id = id(master);
    let text = cli(master, &["cluster", "nodes"]);
    let replica = text
        .lines()
        .find(|l| l.split_whitespace().nth(3) == Some(master_id.as_str()))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|a| a.split('@').next()?.rsplit_once(':')?.1.parse().ok())
        .expect("the master's replica");
    (master, replica)
}

/// Waits until `port` is a master serving slots, as every node sees it.
fn wait_master(nodes: &Nodes, port: u16, within: Duration) -> Duration {
    let t0 = Instant::now();
    let addr = format!("127.0.0.1:{port}@");
    let promoted = |p: &u16| {
        cli(*p, &["cluster", "nodes"])
            .lines()
            .any(|l| l.contains(&addr) && l.contains("master") && l.split_whitespace().count() > 8)
    };
    loop {
        let up: Vec<u16> = nodes
            .ports
            .iter()
            .copied()
            .filter(|p| cli(*p, &["ping"]) == "PONG")
            .collect();
        if up.iter().all(promoted) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < within, "{port} was not promoted");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn_run(url: &str, seconds: &str, extra: &[&str]) -> Child {
    Command::new(bin())
        .args(["run", url, "-d", seconds, "-c", "2", "--keys", "1-3000"])
        .args(extra)
        .args(["--timeout", "1s", "--warmup", "0s"])
        .args(["--format", "json", "-o", "-", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen runs")
}

fn result_of(child: Child) -> serde_json::Value {
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    doc["runs"][0].clone()
}

/// `CLUSTER FAILOVER` on a healthy cluster mid-run: the old master answers MOVED to its
/// replica, loadgen follows it for good (one MOVED per slot, not one per request), no request
/// fails, and the six nodes' own GET counts add up to loadgen's requests exactly, the promoted
/// replica's included.
#[test]
fn a_graceful_failover_is_followed_and_counted_on_every_node() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (nodes, url) = replicated_cluster(cluster_ports(&redis) + 40, "3000");
    let (master, replica) = master_and_replica(&nodes);
    let before: Vec<u64> = nodes.ports.iter().map(|p| gets(*p)).collect();
    let child = spawn_run(&url, "6s", &[]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(cli(replica, &["cluster", "failover"]), "OK");
    let took = wait_master(&nodes, replica, Duration::from_secs(4));
    assert!(cli(master, &["role"]).starts_with("slave"), "{master}");
    let r = result_of(child);
    assert_eq!(u(&r, "error_total"), 0, "{}", r["error_samples"]);
    let after: Vec<u64> = nodes.ports.iter().map(|p| gets(*p)).collect();
    let each: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let at = |p: u16| each[nodes.ports.iter().position(|&x| x == p).unwrap()];
    // The promoted replica served the old master's slots for the rest of the run.
    assert!(at(replica) > 1_000, "promoted after {took:?}: {each:?}");
    assert!(at(master) > 1_000, "{each:?}");
    // Conservation over every node: what loadgen says it did, the servers saw.
    let requests = u(&r, "requests");
    assert_eq!(each.iter().sum::<u64>(), requests, "{each:?} {r}");
    let so = &r["server_observed"];
    assert_eq!(so["matches"], true, "{so} ours: {:?} {each:?}", nodes.ports);
    assert_eq!(u(so, "delta"), requests, "{so}");
    // Each node's own count is loadgen's count for it.
    for m in so["members"].as_array().unwrap() {
        assert_eq!(m["matches"], true, "{m}");
        let port: u16 = m["server"]
            .as_str()
            .unwrap()
            .rsplit_once(':')
            .unwrap()
            .1
            .parse()
            .unwrap();
        assert_eq!(u(m, "delta"), at(port), "{m}");
    }
    // A moved slot is learned once: MOVED replies are at most one per key per connection,
    // far fewer than the requests the promoted replica served after the failover.
    let moved = u(&so["redirects"], "moved");
    assert!(moved > 0 && moved <= 2 * 3000, "{}", so["redirects"]);
    assert!(moved * 5 < at(replica), "{moved} {each:?}");
}

/// A master killed mid-run (SIGKILL) with a replica to take over: its keys fail while the
/// cluster notices (counted, by kind), the replica is promoted, loadgen reads the slot map
/// again and sends them there, and the run ends with every slot served, for GETs and for
/// multi-gets alike; every node but the dead one is within its own count's range.
#[test]
fn a_killed_master_is_failed_over_and_its_slots_served_again() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (mut nodes, url) = replicated_cluster(cluster_ports(&redis) + 50, "3000");
    let (master, replica) = master_and_replica(&nodes);
    let before = gets(replica) + mgets(replica);
    // GETs and 4-key multi-gets in one run: the nodes' counts are this run's alone.
    let child = spawn_run(&url, "14s", &["--mix", "read=50,mget:4=50"]);
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(2000));
    let victim = nodes.ports.iter().position(|&p| p == master).unwrap();
    nodes.children[victim].kill().unwrap();
    nodes.children[victim].wait().unwrap();
    let took = wait_master(&nodes, replica, Duration::from_secs(9));
    let promoted_at = started.elapsed();
    assert!(
        promoted_at < Duration::from_secs(10),
        "the failover took {took:?}: too late to test"
    );
    {
        let r = result_of(child);
        // Its keys failed for a while, each failure counted as what it was.
        assert!(u(&r, "error_total") > 0, "{r}");
        let kinds = &r["errors"];
        assert_eq!(
            u(kinds, "connect") + u(kinds, "server") + u(kinds, "timeout"),
            u(&r, "error_total"),
            "{kinds}"
        );
        let seconds = r["timeline"].as_array().unwrap();
        assert!(seconds.len() >= 13, "{seconds:?}");
        // Every slot is served again once the replica is promoted: the last seconds of the
        // run have no error at all.
        let from = promoted_at.as_secs() as usize + 2;
        for s in &seconds[from..13] {
            assert_eq!(
                u(s, "errors"),
                0,
                "second {s} (promoted at {promoted_at:?}): {seconds:?}"
            );
            assert!(u(s, "hits") > 100, "{s}");
        }
        let so = &r["server_observed"];
        assert!(u(&so["redirects"], "map_reads") > 0, "{so}");
        // The dead master cannot be read after the run: named, left out; every other node
        // (the promoted replica too) is within its own range, and so is the set.
        let dead = format!(":{master}");
        for m in so["members"].as_array().unwrap() {
            let gone = m["server"].as_str().unwrap().ends_with(&dead);
            assert_eq!(m["not_comparable"] == true, gone, "{m}");
            assert_eq!(m["matches"] == true, !gone, "{m}");
        }
        assert_eq!(so["matches"], true, "{so}");
        assert!(
            so["note"].as_str().unwrap().starts_with("over 5 of 6"),
            "{so}"
        );
    }
    // The promoted replica's own count: it served the dead master's keys.
    assert!(gets(replica) + mgets(replica) - before > 1_000);
}

/// A master hung mid-run (SIGSTOP for 3 s of an 8 s run, `--timeout 1s`; no failover, the
/// node timeout is longer): each connection waits for it once, then its keys fail at once
/// while the other masters' keys go on; once it answers again its keys are served again, and
/// every node's own count is within its range (the hung one's timeouts as its unknowns).
#[test]
fn a_hung_master_holds_up_only_its_own_keys() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (nodes, url) = prepared(start_cluster(cluster_ports(&redis) + 60), "3000");
    let pid = nodes.children[2].id().to_string();
    let child = spawn_run(&url, "8s", &[]);
    std::thread::sleep(Duration::from_secs(2));
    kill("-STOP", &pid);
    std::thread::sleep(Duration::from_secs(3));
    kill("-CONT", &pid);
    let r = result_of(child);
    assert_only_the_hung_server_waited(&r, &format!(":{}", nodes.ports[2]));
}
