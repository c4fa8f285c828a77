//! A target that is a set of servers exports each server's series: what was routed to it, which
//! its own counter saw (read by the test with memcached's `stats`), and its replies' latencies.

use super::*;

#[test]
fn a_pool_exports_every_servers_requests_as_its_own_counter_saw_them() {
    let _g = serial();
    let Some(mc) = server("LOADGEN_MC_URL") else {
        return;
    };
    let (pool, addrs, ports) = memcached_pool(&mc, 51, "lgmx:", "10000");
    let gets = |a: &str| {
        let url = format!("memcache://{a}");
        memcached_stat(&url, "get_hits") + memcached_stat(&url, "get_misses")
    };
    let before: Vec<u64> = addrs.iter().map(|a| gets(a)).collect();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spawn_run(&[
        &pool,
        "-n",
        "30000",
        "-c",
        "6",
        "--keys",
        "1-10000",
        "--metrics",
        &addr,
        "--metrics-linger",
        "3s",
    ]);
    // Once the run has ended every connection has handed its latencies in.
    let text = scrape_until(port, Duration::from_secs(60), |t| {
        value(t, "loadgen_run_valid").is_some()
    });
    // Well-formed, and every sample of a family loadgen declares.
    let names = sample_names();
    for (name, _, _) in validate(&text, false) {
        assert!(names.contains(&name), "{name} is not in metrics::FAMILIES");
    }
    let (code, doc, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "requests"), 30000);
    let mut total = 0.0;
    for (i, a) in addrs.iter().enumerate() {
        let routed = format!("loadgen_server_requests_total{{target=\"memcache\",server=\"{a}\"}}");
        let routed = value(&text, &routed).unwrap_or_else(|| panic!("no series for {a}: {text}"));
        let own = gets(a) - before[i];
        assert_eq!(routed, own as f64, "{a}: its own get count");
        let count = format!(
            "loadgen_server_request_duration_seconds_count{{target=\"memcache\",server=\"{a}\"}}"
        );
        assert_eq!(
            value(&text, &count),
            Some(routed),
            "{a}: a latency per reply"
        );
        // Uniform keys over three servers: each holds a fair part.
        assert!(routed > 30000.0 * 0.2, "{a}: {routed}");
        total += routed;
    }
    assert_eq!(total, 30000.0);
    pool_down(&ports);
}
