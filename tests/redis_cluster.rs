//! A Redis Cluster of three masters of our own (`redis-server --cluster-enabled yes` on ports
//! of our own, `redis-cli --cluster create`): `prepare` puts each key on its slot's master, and
//! a run sends every GET to its key's master. The masters' own counters are read here.

mod common;
use common::cluster::*;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Three masters of our own whose rows 1..`rows` are loaded with `prepare`, and the URL.
fn prepared_cluster(first: u16, rows: &str) -> (Nodes, String) {
    prepared(start_cluster(first), rows)
}

#[test]
fn a_cluster_gets_each_key_from_its_slots_master() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let nodes = start_cluster(cluster_ports(&redis));
    let url = format!("redis://127.0.0.1:{}?cluster=1", nodes.ports[0]);
    // A SET sent to a master that does not own the key's slot is refused with MOVED, so a
    // prepare that succeeds put every key on its owner.
    let out = run(&["prepare", &url, "--rows", "3000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sizes: Vec<u64> = nodes
        .ports
        .iter()
        .map(|p| cli(*p, &["dbsize"]).parse().unwrap())
        .collect();
    assert_eq!(sizes.iter().sum::<u64>(), 3000, "{sizes:?}");
    assert!(sizes.iter().all(|&n| n > 500), "keys per master {sizes:?}");
    let before: Vec<u64> = nodes.ports.iter().map(|p| gets(*p)).collect();
    let (code, doc, err) = run_json(&[
        &url, "-n", "6000", "-c", "4", "--keys", "1-3000", "--verify", "--warmup", "0s",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    // A GET sent to any other master would be a MOVED error, not a hit.
    assert_eq!((u(r, "hits"), u(r, "error_total")), (6000, 0), "{r}");
    let seen: Vec<u64> = nodes
        .ports
        .iter()
        .zip(&before)
        .map(|(p, b)| gets(*p) - b)
        .collect();
    assert_eq!(seen.iter().sum::<u64>(), 6000, "{seen:?}");
    let members = r["server_observed"]["members"]
        .as_array()
        .expect("members")
        .clone();
    assert_eq!(members.len(), 3, "{r}");
    for (m, (p, n)) in members.iter().zip(nodes.ports.iter().zip(&seen)) {
        assert_eq!(m["server"], format!("127.0.0.1:{p}"), "{m}");
        assert_eq!((u(m, "delta"), u(m, "expected")), (*n, *n), "{m}");
        assert!(*n > 1000, "{seen:?}");
    }
    assert_eq!(r["server_observed"]["matches"], true, "{r}");
    // The cluster's CPU is its three masters', each located by its port and read.
    let cpu = &r["server_cpu"];
    for c in &nodes.children {
        let pid = format!("redis-server (pid {})", c.id());
        assert!(cpu["process"].as_str().unwrap().contains(&pid), "{cpu}");
    }
    assert!(
        cpu["per_request_us"].as_f64().is_some_and(|x| x > 0.0),
        "{cpu}"
    );
    assert_schema_valid(&doc);
    assert_eq!(r["server_observed"]["redirects"]["moved"], 0, "{r}");
    // A multi-get is one MGET per hash slot of its keys, each to the slot's master: every key
    // is found (a key asked of another master would be a MOVED error), and each master's own
    // MGET calls equal the MGETs routed to it (the commands' count, which a migration's own
    // keyspace lookups do not move).
    let calls = || -> Vec<u64> { nodes.ports.iter().map(|p| mgets(*p) + gets(*p)).collect() };
    let before = calls();
    let (code, doc, err) = run_json(&[
        &url, "-n", "2000", "-c", "4", "--batch", "10", "--keys", "1-3000", "--verify", "--warmup",
        "0s",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!((u(r, "requests"), u(r, "error_total")), (2000, 0), "{r}");
    assert_eq!((u(r, "keys.hits"), u(r, "keys.misses")), (20_000, 0), "{r}");
    let seen: Vec<u64> = calls().iter().zip(&before).map(|(a, b)| a - b).collect();
    let parts: u64 = seen.iter().sum();
    // Ten keys fall in ten slots but for a rare pair sharing one.
    assert!((19_000..=20_000).contains(&parts), "{seen:?}");
    let so = &r["server_observed"];
    assert!(
        so["source"].as_str().unwrap().contains("cmdstat_mget"),
        "{so}"
    );
    assert_eq!((u(so, "delta"), u(so, "expected")), (parts, parts), "{so}");
    let members = so["members"].as_array().expect("members");
    assert_eq!(members.len(), 3, "{so}");
    for (m, n) in members.iter().zip(&seen) {
        assert_eq!((u(m, "delta"), u(m, "expected")), (*n, *n), "{m}");
        assert!(*n > 4000, "{m}");
    }
    assert_eq!(so["matches"], true, "{so}");
    assert_schema_valid(&doc);
    // `mget:10` in a mix next to one-key GETs: the masters' own GET and MGET calls sum to
    // the GETs and the MGETs (one per slot) of both, each master's to what went to it.
    let before = calls();
    let (code, doc, err) = mget_mix_run(&url, "1-3000");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let (reads, mgets) = (u(r, "ops.read.requests"), u(r, "ops.mget.requests"));
    assert_eq!((reads + mgets, u(r, "error_total")), (2000, 0), "{r}");
    let seen: u64 = calls().iter().zip(&before).map(|(a, b)| a - b).sum();
    assert!(
        seen > reads + 9 * mgets && seen <= reads + 10 * mgets,
        "{seen} {r}"
    );
    let so = &r["server_observed"];
    assert_eq!(
        (u(so, "delta"), so["matches"].clone()),
        (seen, true.into()),
        "{so}"
    );
}

/// Slots moved from one master to another mid-run (`redis-cli --cluster reshard`): requests
/// for keys already moved get ASK (during the migration) or MOVED (after it), and loadgen
/// follows both, for GETs and for multi-gets' MGETs alike, so no lookup is lost: every
/// request of the run is a hit, the redirects are counted, and each node's own count is what
/// loadgen routed to it.
#[test]
fn a_reshard_mid_run_loses_no_lookup() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (nodes, url) = prepared_cluster(cluster_ports(&redis) + 10, "20000");
    // Single GETs and multi-gets (an MGET per slot) in one run, so the nodes' counts are its
    // own.
    let spawn = || {
        Command::new(bin())
            .args([
                "run", &url, "-d", "10s", "-c", "2", "--keys", "1-20000", "--verify",
            ])
            .args(["--mix", "read=50,mget:8=50"])
            .args(["--warmup", "0s", "--format", "json", "-o", "-", "-q"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loadgen runs")
    };
    let children = [spawn()];
    let started = Instant::now();
    let size = |p: u16| -> u64 { cli(p, &["dbsize"]).parse().unwrap() };
    let moved_to = size(nodes.ports[1]);
    std::thread::sleep(Duration::from_millis(1500));
    let id = |p: u16| cli(p, &["cluster", "myid"]);
    let (from, to) = (id(nodes.ports[0]), id(nodes.ports[1]));
    let reshard = Command::new("redis-cli")
        .args([
            "--cluster",
            "reshard",
            &format!("127.0.0.1:{}", nodes.ports[0]),
        ])
        .args([
            "--cluster-from",
            &from,
            "--cluster-to",
            &to,
            "--cluster-slots",
            "1000",
        ])
        .args(["--cluster-yes"])
        .output()
        .expect("redis-cli --cluster reshard runs");
    assert!(
        reshard.status.success(),
        "{}",
        String::from_utf8_lossy(&reshard.stdout)
    );
    // The keys moved, and the run went on for a while after: its requests for them were
    // redirected (MOVED), not only the ones during the migration (ASK).
    assert!(
        size(nodes.ports[1]) > moved_to + 300,
        "the reshard moved no keys"
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the reshard took too long to test"
    );
    for child in children {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
        let r = &doc["runs"][0];
        assert_eq!(u(r, "error_total"), 0, "{}", r["error_samples"]);
        assert_eq!(u(r, "hits"), u(r, "requests"), "{r}");
        assert!(u(r, "requests") > 5_000, "{r}");
        if r["keys"].is_object() {
            assert_eq!(u(r, "keys.misses"), 0, "{r}");
        }
        // The run followed redirects, and says how many.
        let so = &r["server_observed"];
        let redirects = &so["redirects"];
        assert!(
            u(redirects, "moved") + u(redirects, "ask") > 0,
            "{redirects}"
        );
        // Each node's own GET and MGET calls are what was routed to it, after every
        // redirect: MIGRATE's own lookups of the keys it moves count in no command.
        assert_eq!(so["matches"], true, "{so}");
        for m in so["members"].as_array().unwrap() {
            assert_eq!(m["matches"], true, "{m}");
        }
    }
}

/// A master killed mid-run (SIGKILL, no replica to take over): the requests for its slots fail
/// as connect errors, counted; the other masters' keys go on every second, for GETs and for
/// multi-gets alike.
#[test]
fn a_killed_master_fails_only_its_slots() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let (mut nodes, url) = prepared_cluster(cluster_ports(&redis) + 20, "3000");
    let spawn = |batch: &str| {
        Command::new(bin())
            .args(["run", &url, "-d", "5s", "-c", "2", "--keys", "1-3000"])
            .args([
                "--batch", batch, "--warmup", "0s", "--format", "json", "-o", "-", "-q",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loadgen runs")
    };
    let children = [spawn("1"), spawn("2")];
    std::thread::sleep(Duration::from_millis(1500));
    // The last master in address order: the URL's node stays up.
    let victim = nodes.children.last_mut().unwrap();
    victim.kill().unwrap();
    victim.wait().unwrap();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
        let r = &doc["runs"][0];
        assert!(u(r, "errors.connect") > 0, "its slots fail: {r}");
        let seconds = r["timeline"].as_array().unwrap();
        assert!(seconds.len() >= 5, "{seconds:?}");
        // Every second, killed master or not, the two others answer.
        assert!(
            seconds.iter().take(5).all(|s| u(s, "hits") > 100),
            "{seconds:?}"
        );
        // After the kill, about a third of the requests (more for multi-gets) fail, not all.
        let last = &seconds[4];
        let (ok, failed) = (u(last, "hits") + u(last, "misses"), u(last, "errors"));
        assert!(failed > 0 && ok > failed / 4, "{last}");
    }
}

/// A multi-get whose keys a slot migration has split is answered `TRYAGAIN`: loadgen sends it
/// again after a pause, counts every one, and after 8 gives up with the server's error; the
/// requests whose keys lie on one side are served (an `ASK` for the moved ones). Once the slot
/// has moved, a run is served in full.
#[test]
fn a_multi_get_split_by_a_migration_is_tried_again() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    // Every key shares the hash tag {lgt}, so all are in one slot.
    let format = "{lgt}:%d";
    let nodes = start_cluster(cluster_ports(&redis) + 30);
    let url = format!("redis://127.0.0.1:{}?cluster=1", nodes.ports[0]);
    let out = run(&["prepare", &url, "--rows", "200", "--key-format", format]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p0 = nodes.ports[0];
    let slot = cli(p0, &["cluster", "keyslot", "{lgt}:1"]);
    let count = |p: u16| -> u64 {
        cli(p, &["cluster", "countkeysinslot", &slot])
            .parse()
            .unwrap()
    };
    let src = *nodes
        .ports
        .iter()
        .find(|&&p| count(p) == 200)
        .expect("the slot's master");
    let dst = *nodes.ports.iter().find(|&&p| p != src).unwrap();
    let id = |p: u16| cli(p, &["cluster", "myid"]);
    let (src_id, dst_id) = (id(src), id(dst));
    assert_eq!(
        cli(dst, &["cluster", "setslot", &slot, "importing", &src_id]),
        "OK"
    );
    assert_eq!(
        cli(src, &["cluster", "setslot", &slot, "migrating", &dst_id]),
        "OK"
    );
    let migrate = |ids: std::ops::RangeInclusive<u32>| {
        let keys: Vec<String> = ids.map(|i| format!("{{lgt}}:{i}")).collect();
        let mut args = vec!["migrate", "127.0.0.1", "", "", "0", "5000", "keys"];
        let port = dst.to_string();
        args[2] = &port;
        args.extend(keys.iter().map(String::as_str));
        assert_eq!(cli(src, &args), "OK");
    };
    // Half the keys have moved: a 4-key multi-get is split 7 times in 8.
    migrate(1..=100);
    let args = [
        url.as_str(),
        "--batch",
        "4",
        "-n",
        "200",
        "-c",
        "2",
        "--warmup",
        "0s",
        "--keys",
        "1-200",
        "--key-format",
        format,
        "--verify",
        // The request loop's timer, lazily re-armed, fires for answered requests about once
        // a timeout: a short one cuts pauses and resent parts short many times in the run.
        "--timeout",
        "500ms",
    ];
    let (code, doc, err) = run_json(&args);
    let r = &doc["runs"][0];
    let redirects = &r["server_observed"]["redirects"];
    let failed = u(r, "errors.server");
    assert!(failed > 0, "split requests fail in the end: {r} {err}");
    assert_eq!(code, 1, "a run with errors: {err}");
    // Only as the server's TRYAGAIN: a pause the request loop cuts short is taken up again,
    // never a connection given up.
    assert_eq!(failed, u(r, "error_total"), "{}", r["errors"]);
    // Each one that failed was sent again 8 times, each time counted.
    assert!(
        u(redirects, "tryagain") >= 8 * failed,
        "{redirects} {failed}"
    );
    assert!(
        u(r, "hits") > 0 && u(redirects, "ask") > 0,
        "one-sided ones are served: {r}"
    );
    assert_eq!(u(r, "errors.verify"), 0, "{r}");
    // The slot moves for good: every request is served, after a MOVED.
    migrate(101..=200);
    for p in &nodes.ports {
        cli(*p, &["cluster", "setslot", &slot, "node", &dst_id]);
    }
    let (code, doc, err) = run_json(&args);
    let r = &doc["runs"][0];
    assert_eq!(code, 0, "{err}");
    assert_eq!((u(r, "error_total"), u(r, "hits")), (0, 200), "{r}");
    // A new run reads the new slot map: nothing to follow.
    let redirects = &r["server_observed"]["redirects"];
    assert_eq!(r["server_observed"]["matches"], true, "{r}");
    assert_eq!(
        u(redirects, "tryagain") + u(redirects, "moved"),
        0,
        "{redirects}"
    );
}

/// What a user gets wrong about a cluster gets one line and exit 2, naming what to do: a node
/// without `?cluster=1` (run and prepare), `-p` on a cluster, a list of nodes without
/// `?cluster=1`. A seed list is read as cluster clients read one: a first node that is down is
/// passed over for the next.
#[test]
fn cluster_mistakes_get_one_line_and_a_seed_list_is_tried_in_turn() {
    let Some(redis) = server("LOADGEN_REDIS_URL") else {
        return;
    };
    let nodes = start_cluster(cluster_ports(&redis) + 70);
    let plain = format!("redis://127.0.0.1:{}", nodes.ports[0]);
    let one_line = |args: &[&str], want: &str| {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    one_line(&["prepare", &plain, "--rows", "100"], "add ?cluster=1");
    one_line(&["run", &plain, "-n", "100"], "add ?cluster=1");
    let url = format!("{plain}?cluster=1");
    one_line(&["run", &url, "-n", "100", "-p", "4"], "use -p 1");
    let out = run(&["run", &url, "-n", "100", "-p", "4"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("driver=wire"));
    let list = format!(
        "redis://127.0.0.1:{},127.0.0.1:{}",
        nodes.ports[0], nodes.ports[1]
    );
    one_line(&["run", &list, "-n", "100"], "add ?cluster=1");
    // A seed list whose first node is down (a port of ours nothing listens on).
    let dead = free_port();
    let seeds = format!(
        "redis://127.0.0.1:{dead},127.0.0.1:{}?cluster=1",
        nodes.ports[1]
    );
    let out = run(&["prepare", &seeds, "--rows", "500"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, doc, err) = run_json(&[&seeds, "-n", "2000", "--keys", "1-500", "--verify"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!((u(r, "hits"), u(r, "error_total")), (2000, 0), "{r}");
    assert_eq!(r["server_observed"]["members"].as_array().unwrap().len(), 3);
}
