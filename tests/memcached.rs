//! memcached, for real: conservation against its own stats, --verify.

mod common;
use common::cluster::assert_only_the_hung_server_waited;
use common::*;

#[test]
fn memcached_conservation_against_get_hits() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let seen = OwnCount::before("memcached get_hits+get_misses", &url);
    let (code, doc, err) = run_json(&[&url, "-n", "20000", "-c", "16"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 20000);
    seen.assert_saw(r, 20000, "");
    assert_schema_valid(&doc);
}

#[test]
fn memcached_verify_full_range() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (code, doc, err) = run_json(&[
        &url, "-n", "1000000", "--dist", "seq", "--verify", "-c", "8", "-p", "16",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 1_000_000);
    assert_eq!(u(r, "error_total"), 0);
}

/// A row changed since `prepare` (our own prefix and key): the verify error says how to
/// restore the data set.
#[test]
fn a_changed_row_fails_verify_and_says_to_prepare_again() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let pool = format!("{url}?prefix=verifyhint:");
    let out = run(&["prepare", &pool, "--rows", "3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let addr = url.trim_start_matches("memcache://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"set verifyhint:2 0 0 7\r\nchanged\r\nquit\r\n")
        .unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("STORED"), "{reply}");
    let (code, doc, err) = run_json(&[
        &pool, "-n", "30", "-c", "1", "--keys", "1-3", "--dist", "seq", "--verify",
    ]);
    assert_eq!(code, 1, "{err}");
    let r = &doc["runs"][0];
    assert_eq!((u(r, "hits"), u(r, "errors.verify")), (20, 10), "{r}");
    let sample = r["error_samples"][0].as_str().unwrap();
    assert!(sample.contains("row for key 2 differs"), "{sample}");
    assert!(
        sample.contains("run `loadgen prepare TARGET` again"),
        "{sample}"
    );
}

#[test]
fn comparison_over_embedded_postgres_and_memcached() {
    let Some(pg) = server("LOADGEN_PG_URL") else {
        return;
    };
    let Some(mc) = server("LOADGEN_MC_URL") else {
        return;
    };
    let dir = TempDir::new("loadgen-cmp"); // -o makes no directory
    let path = dir.join("cmp.json");
    let out = run(&[
        "run",
        "embedded",
        &pg,
        &mc,
        "-n",
        "20000",
        "-c",
        "8",
        "-o",
        path.to_str().unwrap(),
        "-q",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // one side-by-side table: a header and one row per target, relative to the first
    let header = stdout
        .lines()
        .position(|l| l.starts_with("target") && l.contains("vs 1st"))
        .expect("comparison table");
    let rows: Vec<&str> = stdout.lines().skip(header + 1).take(3).collect();
    assert!(rows[0].contains("1.00x"), "{stdout}");
    assert!(
        rows[1].starts_with("postgres://") && rows[2].starts_with("memcache://"),
        "{stdout}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        assert_eq!(u(r, "hits"), 20000, "{}", r["target"]);
        assert_eq!(
            r["server_observed"]["matches"], true,
            "{}: {}",
            r["target"], r["server_observed"]
        );
        assert_eq!(u(&r["server_observed"], "delta"), 20000);
    }
    assert_schema_valid(&doc);
    let svg =
        std::fs::read_to_string(path.with_extension("svg")).expect("bar chart beside the JSON");
    assert_eq!(svg.matches("<rect x=").count(), 3);
}

/// get_hits + get_misses from memcached's own `stats`, read by the test itself.
fn mc_lookups(url: &str) -> u64 {
    use std::io::{BufRead, BufReader, Write};
    let addr = url.trim_start_matches("memcache://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"stats\r\n").unwrap();
    let mut total = 0;
    for line in BufReader::new(s).lines() {
        let line = line.unwrap();
        if line == "END" {
            break;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if let ["STAT", "get_hits" | "get_misses", v] = f[..] {
            total += v.parse::<u64>().unwrap();
        }
    }
    total
}

/// Two generators named with `--instance` run together on one memcached: each says the
/// server's count includes the other's requests (no "counts differ" warning), and `merge`
/// compares the server's change over both runs with the SUM of what they sent, which equals the
/// change the test reads from memcached itself.
#[test]
fn two_named_generators_on_one_memcached_and_their_merge_count_the_sum() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let dir = TempDir::new("loadgen-mc-instances");
    let before = mc_lookups(&url);
    let children: Vec<_> = [("gen-a", "1"), ("gen-b", "2")]
        .iter()
        .map(|(name, seed)| {
            std::process::Command::new(bin())
                .args([
                    "run", &url, "-d", "2s", "--warmup", "0", "-c", "4", "--keys", "1-100000",
                ])
                .args(["--instance", name, "--seed", seed, "-q", "-o"])
                .arg(dir.join(format!("{name}.json")))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("loadgen starts")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{text}{err}");
        assert!(text.contains("includes the other generators'"), "{text}");
        assert!(!text.contains("WARNING"), "{text}");
    }
    let delta = mc_lookups(&url) - before;
    let (a, b) = (dir.join("gen-a.json"), dir.join("gen-b.json"));
    let out = run(&[
        "merge",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        "-",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &doc["runs"][0];
    let so = &r["server_observed"];
    let sent = u(r, "requests") + u(r, "warmup_requests");
    assert_eq!(
        u(so, "delta"),
        delta,
        "the server's own change over both runs: {so}"
    );
    assert_eq!(u(so, "expected"), sent, "{so}");
    assert_eq!(delta, sent, "memcached saw exactly what the two sent");
    assert_eq!(so["matches"], true, "{so}");
    assert_schema_valid(&doc);
}

/// `--batch 10`: one `get k1 ... k10` per request over a key range half past the data set.
/// The run counts 2,000 requests and 20,000 keys apart; memcached's own get_hits and
/// get_misses, read here, moved by exactly the keys loadgen says it found and did not find.
#[test]
fn memcached_multi_get_counts_keys_apart() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let stat = |name| memcached_stat(&url, name);
    let (hits0, misses0) = (stat("get_hits"), stat("get_misses"));
    let (code, doc, err) = multi_get_run(&url, "2000", "4");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let (hits, misses) = (stat("get_hits") - hits0, stat("get_misses") - misses0);
    assert_eq!(u(r, "requests"), 2000, "{r}");
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(u(r, "keys.batch"), 10);
    assert_eq!(u(r, "keys.keys"), 20_000, "{r}");
    assert_eq!(
        u(r, "keys.hits"),
        hits,
        "memcached's get_hits moved by {hits}: {r}"
    );
    assert_eq!(
        u(r, "keys.misses"),
        misses,
        "memcached's get_misses moved by {misses}"
    );
    // About half the range is past the data set: both kinds are there.
    assert!(hits > 5000 && misses > 5000, "hits {hits} misses {misses}");
    assert_eq!(doc["settings"]["batch"], 10);
    // loadgen's own comparison counts keys too: 10 per request.
    let so = &r["server_observed"];
    assert_eq!(
        (u(so, "delta"), u(so, "expected")),
        (20_000, 20_000),
        "{so}"
    );
    assert_eq!(so["matches"], true, "{so}");
    assert_schema_valid(&doc);
}

/// Whether memcached at `addr` holds `key` (one `get` on a fresh connection).
fn mc_has(addr: &str, key: &str) -> bool {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(format!("get {key}\r\n").as_bytes()).unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line.starts_with("VALUE ")
}

/// A pool `memcache://h:p,h:p+1,h:p+2`: `prepare` puts each key on its ketama owner and on no
/// other member (the ring is checked against libmemcached's own placement in its unit tests);
/// a run sends each get to its key's owner.
#[test]
fn a_pool_gets_each_key_on_its_ketama_owner_in_prepare_and_in_a_run() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, addrs, ports) = memcached_pool(&url, 1, "pooltest:", "600");
    let members: Vec<(String, u16)> = ports.iter().map(|p| ("127.0.0.1".into(), *p)).collect();
    let ring = loadgen::proto::memcached::ketama::Ring::new(&members);
    let mut per = [0u32; 3];
    for id in 1..=600 {
        let key = format!("pooltest:{id}");
        let owner = ring.owner(key.as_bytes());
        for (i, addr) in addrs.iter().enumerate() {
            assert_eq!(mc_has(addr, &key), i == owner, "{key} on {addr}");
        }
        per[owner] += 1;
    }
    assert!(per.iter().all(|&n| n > 100), "keys per server {per:?}");
    // A run routes each get to its key's owner: every key was loaded on its owner only, so a
    // get sent anywhere else would miss; the members' own counters sum to the run's gets.
    let gets = || -> Vec<u64> {
        addrs
            .iter()
            .map(|a| memcached_stat(&format!("memcache://{a}"), "cmd_get"))
            .collect()
    };
    let before = gets();
    let (code, doc, err) = run_json(&[
        &pool, "-n", "6000", "-c", "4", "--keys", "1-600", "--verify",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(
        (u(r, "hits"), u(r, "error_total")),
        (6000, 0),
        "{}",
        r["error_samples"]
    );
    let moved: Vec<u64> = gets().iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(moved.iter().sum::<u64>(), 6000, "{moved:?}");
    assert!(moved.iter().all(|&n| n > 1000), "gets per server {moved:?}");
    assert_eq!(
        r["server_observed"]["matches"], true,
        "{}",
        r["server_observed"]
    );
    // Each server's own line: its share of the requests and the latency of those it answered.
    let members = r["server_observed"]["members"].as_array().expect("members");
    let mut shares = 0.0;
    for (m, n) in members.iter().zip(&moved) {
        assert_eq!(u(m, "latency.count"), *n, "{m}");
        assert!(f(m, "latency.p50") > 0.0, "{m}");
        assert!((f(m, "share") - *n as f64 / 6000.0).abs() < 0.001, "{m}");
        shares += f(m, "share");
    }
    assert!((shares - 1.0).abs() < 0.003, "{members:?}");
    // A multi-get is one `get` per server with the keys it owns: every key is found, and each
    // server's own get_hits+get_misses equals the keys routed to it.
    let before = gets();
    let (code, doc, err) = run_json(&[
        &pool, "-n", "2000", "-c", "4", "--batch", "10", "--keys", "1-600", "--verify", "--warmup",
        "0s",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!((u(r, "requests"), u(r, "error_total")), (2000, 0), "{r}");
    assert_eq!((u(r, "keys.hits"), u(r, "keys.misses")), (20_000, 0), "{r}");
    let moved: Vec<u64> = gets().iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(moved.iter().sum::<u64>(), 20_000, "{moved:?}");
    let so = &r["server_observed"];
    assert_eq!(
        (u(so, "delta"), u(so, "expected")),
        (20_000, 20_000),
        "{so}"
    );
    for (m, n) in so["members"]
        .as_array()
        .expect("members")
        .iter()
        .zip(&moved)
    {
        assert_eq!((u(m, "delta"), u(m, "expected")), (*n, *n), "{m}");
        assert!(*n > 3000, "keys per server {moved:?}");
    }
    // `mget:10` in a mix next to one-key gets: the servers' own counts sum to the keys of both.
    let before = gets();
    let (code, doc, err) = mget_mix_run(&pool, "1-600");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let (reads, mgets) = (u(r, "ops.read.requests"), u(r, "ops.mget.requests"));
    assert_eq!((reads + mgets, u(r, "error_total")), (2000, 0), "{r}");
    assert_eq!(u(r, "keys.hits"), 10 * mgets, "{r}");
    let moved: Vec<u64> = gets().iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(moved.iter().sum::<u64>(), reads + 10 * mgets, "{moved:?}");
    let so = &r["server_observed"];
    assert_eq!(so["matches"], true, "{so}");
    for (m, n) in so["members"].as_array().unwrap().iter().zip(&moved) {
        assert_eq!((u(m, "delta"), u(m, "expected")), (*n, *n), "{m}");
    }
    // Replies from several servers are taken in order: one request in flight per connection.
    let out = run(&["run", &pool, "-n", "10", "-p", "8"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    pool_down(&ports);
}

/// A pool server that dies mid-run fails only its own keys: the other servers' gets go on
/// every second, and once it is started again (empty) its connections come back, so the last
/// seconds have no errors and its keys miss instead.
#[test]
fn a_pool_server_that_dies_fails_only_its_keys_and_comes_back() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, _, ports) = memcached_pool(&url, 11, "deadtest:", "600");
    // A run of gets and one of 4-key multi-gets (a get per server), side by side.
    let spawn = |batch: &str| {
        std::process::Command::new(bin())
            .args([
                "run", &pool, "-d", "7s", "-c", "2", "--keys", "1-600", "--warmup", "0s",
            ])
            .args(["--batch", batch, "--format", "json", "-o", "-", "-q"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("loadgen runs")
    };
    let children = [spawn("1"), spawn("4")];
    let dead = format!("memcached_{}", ports[1]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    servers(&["down", &dead]);
    std::thread::sleep(std::time::Duration::from_secs(1));
    servers(&["up", &dead]);
    let [gets, multi] = children.map(|child| {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
        doc["runs"][0].clone()
    });
    // A multi-get with a key on the dead server fails; the others go on; it comes back.
    assert!(u(&multi, "errors.connect") > 0, "{multi}");
    let seconds = multi["timeline"].as_array().unwrap();
    assert!(seconds.len() >= 6, "{seconds:?}");
    assert!(
        seconds.iter().take(6).all(|s| u(s, "hits") > 100),
        "{seconds:?}"
    );
    assert_eq!(u(&seconds[5], "errors"), 0, "{}", seconds[5]);
    let r = &gets;
    assert!(
        u(r, "errors.connect") > 0,
        "the dead server's keys fail: {r}"
    );
    let seconds = r["timeline"].as_array().unwrap();
    assert!(seconds.len() >= 6, "{seconds:?}");
    // The two live servers answer every second, the one without its third server too.
    for s in seconds.iter().take(6) {
        assert!(
            u(s, "hits") > 500,
            "a second without the live servers' hits: {s}"
        );
    }
    // Back (and empty) well before the end: no errors, and its keys miss.
    let last = &seconds[5];
    assert_eq!(u(last, "errors"), 0, "{last}");
    assert!(u(last, "misses") > 0, "{last}");
    // A new server, with counters of its own: not comparable, said on its line (the two runs
    // side by side count in each other's servers, so the others' lines are not asserted).
    let members = r["server_observed"]["members"].as_array().unwrap();
    let restarted = &members[1];
    assert_eq!(restarted["not_comparable"], true, "{restarted}");
    let note = restarted["note"].as_str().unwrap();
    assert!(
        note.contains("restarted") || note.contains("went back"),
        "{note}"
    );
    pool_down(&ports);
}

/// One slow server of a pool shows as its own line: a memcached stopped (SIGSTOP) for 100 ms
/// out of every 300 answers some requests late, and only its member line's latency says so.
#[test]
fn a_slow_pool_server_shows_on_its_own_line() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, _, ports) = memcached_pool(&url, 41, "slowtest:", "600");
    let pid = servers(&["pid", &format!("memcached_{}", ports[2])]);
    let child = std::process::Command::new(bin())
        .args(["run", &pool, "-d", "3s", "-c", "4", "--keys", "1-600"])
        .args(["--warmup", "0s", "--format", "json", "-o", "-", "-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("loadgen runs");
    let until = std::time::Instant::now() + std::time::Duration::from_millis(2700);
    while std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(200));
        kill("-STOP", &pid);
        std::thread::sleep(std::time::Duration::from_millis(100));
        kill("-CONT", &pid);
    }
    let out = child.wait_with_output().unwrap();
    pool_down(&ports);
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    let members = doc["runs"][0]["server_observed"]["members"]
        .as_array()
        .expect("members")
        .clone();
    // In a closed loop a few requests per pause wait it out (each connection stops sending
    // meanwhile): the stopped server has requests of 50 ms and more at every pause. A busy
    // machine can stall the client, and then a request to any server, so the others are held
    // to far fewer such requests rather than to none.
    let slow: Vec<u64> = members
        .iter()
        .map(|m| {
            let h = loadgen::result::decode_histogram(m["histogram"].as_str().unwrap()).unwrap();
            h.iter_recorded()
                .filter(|v| v.value_iterated_to() >= 50_000_000)
                .map(|v| v.count_at_value())
                .sum()
        })
        .collect();
    assert!(
        slow[2] >= 9,
        "requests of 50 ms or more per server: {slow:?}"
    );
    assert!(
        slow[0] * 3 < slow[2] && slow[1] * 3 < slow[2],
        "requests of 50 ms or more per server: {slow:?}"
    );
}

/// twemproxy (Debian's nutcracker, ketama over md5) in front of three memcached: it answers
/// no `stats`, so the count is read from the servers it fronts (`?behind=`). The proxy
/// places every key where loadgen's ketama does (`prepare` of the pool, then every get
/// through the proxy hits), and the three servers' own counts, read here, sum to the run's
/// keys, one-key gets and multi-gets alike.
#[test]
fn a_proxy_is_counted_by_the_servers_behind_it() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (_, addrs, ports) = memcached_pool(&url, 61, "proxytest:", "600");
    let proxy_port = ports[2] + 1;
    let dir = TempDir::new("loadgen-proxy");
    let conf = dir.join("nc.yml");
    let mut yml = format!(
        "pool:\n  listen: 127.0.0.1:{proxy_port}\n  hash: md5\n  distribution: ketama\n  timeout: 2000\n  servers:\n"
    );
    for a in &addrs {
        yml += &format!("   - {a}:1\n");
    }
    std::fs::write(&conf, yml).unwrap();
    let mut proxy = std::process::Command::new("nutcracker")
        .arg("-c")
        .arg(&conf)
        .args(["-s", &(proxy_port + 1).to_string(), "-a", "127.0.0.1", "-o"])
        .arg(dir.join("nc.log"))
        .spawn()
        .expect("nutcracker (twemproxy) runs: scripts/servers.sh installs it with memcached");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", proxy_port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nutcracker did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let gets = || -> u64 {
        addrs
            .iter()
            .map(|a| {
                let m = format!("memcache://{a}");
                memcached_stat(&m, "get_hits") + memcached_stat(&m, "get_misses")
            })
            .sum()
    };
    let through = format!(
        "memcache://127.0.0.1:{proxy_port}?prefix=proxytest:&behind={}",
        addrs.join(",")
    );
    // The servers' own pids, read before the run: the processes the run must charge.
    let pids: Vec<String> = ports
        .iter()
        .map(|p| servers(&["pid", &format!("memcached_{p}")]))
        .collect();
    let before = gets();
    let (code, doc, err) = mget_mix_run(&through, "1-600");
    let moved = gets() - before;
    // The same proxy with one of its servers left out of ?behind=: the count it reads is the
    // two others', fewer than loadgen sent, and the run says so (its verdict, --strict's exit).
    let short = format!(
        "memcache://127.0.0.1:{proxy_port}?prefix=proxytest:&behind={}",
        addrs[..2].join(",")
    );
    let (short_code, short_doc, short_err) = run_json(&[
        &short, "-n", "600", "--keys", "1-600", "-c", "2", "--strict",
    ]);
    let _ = proxy.kill();
    let _ = proxy.wait();
    pool_down(&ports);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let (reads, mgets) = (u(r, "ops.read.requests"), u(r, "ops.mget.requests"));
    assert_eq!((reads + mgets, u(r, "error_total")), (2000, 0), "{r}");
    assert_eq!(
        (u(r, "ops.read.hits"), u(r, "keys.hits")),
        (reads, 10 * mgets),
        "every key on its ketama owner: {r}"
    );
    let keys = reads + 10 * mgets;
    assert_eq!(moved, keys, "the fronted servers' own get_hits+get_misses");
    let so = &r["server_observed"];
    assert_eq!(
        (u(so, "delta"), so["matches"].clone()),
        (keys, true.into()),
        "{so}"
    );
    assert!(
        so["source"].as_str().unwrap().ends_with("behind the proxy"),
        "{so}"
    );
    assert_eq!(short_code, 3, "{short_err}");
    let so = &short_doc["runs"][0]["server_observed"];
    assert_eq!(
        (so["matches"].clone(), u(so, "expected")),
        (false.into(), 600),
        "{so}"
    );
    assert!(u(so, "delta") < 600, "{so}");
    let note = so["note"].as_str().unwrap();
    assert!(note.contains("but loadgen sent 600"), "{note}");
    let reasons = short_doc["runs"][0]["verdict"]["reasons"].to_string();
    assert!(reasons.contains("server count differs"), "{reasons}");
    // The proxy and the servers behind it are the server's processes: their CPU is the
    // server's, not "other processes" of the machine.
    let process = r["server_cpu"]["process"].as_str().unwrap_or_default();
    assert!(
        process.contains(&format!("(pid {})", proxy.id())),
        "{process}"
    );
    for pid in &pids {
        assert!(
            process.contains(&format!("memcached (pid {pid})")),
            "{process}"
        );
    }
    // The machine's other work may still make it invalid, but never the servers behind.
    for why in r["verdict"]["reasons"].as_array().unwrap() {
        let why = why.as_str().unwrap();
        assert!(why.starts_with("machine disturbed"), "{why}");
    }
}

/// A pool server hung mid-run (SIGSTOP for 3 s of an 8 s run, `--timeout 1s`): each
/// connection waits for it once, then drops its connection to it alone, so its keys fail at
/// once while the two others' keys go on at their rate; once it answers again (SIGCONT) its
/// keys are served again. Its timeouts are on its own line, as sends of unknown fate: every
/// server's own count, read by loadgen and here, is within its range.
#[test]
fn a_hung_pool_server_holds_up_only_its_own_keys() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, _, ports) = memcached_pool(&url, 81, "hungtest:", "600");
    let pid = servers(&["pid", &format!("memcached_{}", ports[1])]);
    let child = std::process::Command::new(bin())
        .args(["run", &pool, "-d", "8s", "-c", "2", "--keys", "1-600"])
        .args(["--timeout", "1s", "--warmup", "0s"])
        .args(["--format", "json", "-o", "-", "-q"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("loadgen runs");
    std::thread::sleep(std::time::Duration::from_secs(2));
    kill("-STOP", &pid);
    std::thread::sleep(std::time::Duration::from_secs(3));
    kill("-CONT", &pid);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    pool_down(&ports);
    assert_only_the_hung_server_waited(&doc["runs"][0], &format!(":{}", ports[1]));
}
