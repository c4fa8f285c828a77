//! Two real generators started together, their interval logs, and their sum in Prometheus.

use super::*;

#[test]
fn start_at_makes_both_generators_begin_together() {
    let Some(p) = pair() else { return };
    // Both waited (the runs themselves take well under 3 s here, so the wait dominates) ...
    assert!(
        p.elapsed >= Duration::from_millis(2000),
        "finished after {:?}: --start-at did not wait",
        p.elapsed
    );
    // ... and began at the agreed second or just after.
    for (name, doc) in [("a", &p.a), ("b", &p.b)] {
        let started = loadgen::date::parse_rfc3339(doc["runs"][0]["started_at"].as_str().unwrap())
            .unwrap() as i64;
        assert!(
            (p.start_at..=p.start_at + 1).contains(&started),
            "{name} started at {started}, asked for {}",
            p.start_at
        );
        assert_eq!(doc["instance"], name);
    }
}

#[test]
fn merged_counts_and_p99_come_from_one_histogram_of_all_samples() {
    let Some(p) = pair() else { return };
    let (ra, rb) = (&p.a["runs"][0], &p.b["runs"][0]);
    assert_eq!(u(ra, "requests"), 20000);
    assert_eq!(u(rb, "requests"), 40000);
    let dir = p.dir("pair-merge");
    let (code, merged, err) = merge(&[&dir.join("a.json"), &dir.join("b.json")]);
    assert_eq!(code, 0, "{err}");
    let merged = merged.expect("merge printed JSON");
    assert_schema_valid(&merged);
    assert_eq!(merged["instance"], "merged(a,b)");
    // Different -c on purpose: merge warns, and still merges.
    assert!(err.contains("connection counts"), "{err}");
    let m = &merged["runs"][0];
    assert_eq!(m["kind"], "memcache");
    for k in [
        "requests",
        "hits",
        "misses",
        "error_total",
        "reconnects",
        "warmup_requests",
    ] {
        assert_eq!(u(m, k), u(ra, k) + u(rb, k), "{k}");
    }
    assert_eq!(
        u(m, "latency_us.count"),
        u(ra, "latency_us.count") + u(rb, "latency_us.count")
    );
    assert_eq!(u(m, "latency_us.count"), 60000);
    // Two generators' intervals do not line up: the merged figures have no CI, and say why.
    let none = m["precision"]["qps"]["none"].as_str().unwrap_or_default();
    assert!(
        none.starts_with("merged from 2 parts"),
        "{}",
        m["precision"]
    );

    // The reference: one histogram of both generators' samples, added and read by the
    // hdrhistogram crate itself.
    let mut all = raw_hist(ra);
    all.add(raw_hist(rb)).unwrap();
    assert_reads(&m["latency_us"], &all);
    assert!(
        raw_hist(m) == all,
        "the merged histogram holds every sample of both"
    );
    let got = pct(&m["latency_us"]);
    // Not the average of the two p99s (2 vs 64 connections: the two p99s differ).
    let (pa, pb) = (f(ra, "latency_us.p99"), f(rb, "latency_us.p99"));
    eprintln!(
        "p99: a {pa}µs, b {pb}µs, merged {}µs, average {}µs",
        got.p99,
        (pa + pb) / 2.0
    );
    if pa != pb {
        assert_ne!(got.p99, (pa + pb) / 2.0, "p99 averaged, not merged");
    }
    // They ran together: QPS is the sum of theirs.
    let sum = f(ra, "qps") + f(rb, "qps");
    assert!((f(m, "qps") - sum).abs() < 0.11, "{} vs {sum}", f(m, "qps"));
    assert!(!err.contains("do not overlap"), "{err}");
}

#[test]
fn interval_logs_round_trip_and_sum_to_the_counted_requests() {
    let Some(p) = pair() else { return };
    let dir = p.dir("pair-hlog");
    for (name, doc) in [("a", &p.a), ("b", &p.b)] {
        let r = &doc["runs"][0];
        let text = std::fs::read(dir.join(format!("{name}.hlog"))).unwrap();
        let s = String::from_utf8_lossy(&text);
        assert!(
            s.starts_with("#[Histogram log format version 1.3]\n"),
            "{s}"
        );
        assert!(s.contains("NANOSECONDS"));
        assert!(s.contains(
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        ));
        let mut sum = loadgen::recorder::new_histogram();
        let (mut intervals, mut start_time, mut base_time) = (0, None, None);
        for e in IntervalLogIterator::new(&text) {
            match e.expect("the log parses") {
                LogEntry::StartTime(t) => start_time = Some(t.as_secs_f64()),
                LogEntry::BaseTime(t) => base_time = Some(t.as_secs_f64()),
                LogEntry::Interval(ilh) => {
                    intervals += 1;
                    assert_eq!(ilh.tag().map(|t| t.as_str()), Some("memcache"));
                    let bytes = STANDARD.decode(ilh.encoded_histogram()).expect("base64");
                    let h: Histogram<u64> = Deserializer::new()
                        .deserialize(&mut &bytes[..])
                        .expect("a V2 deflate histogram");
                    assert_eq!(ilh.max(), h.max() as f64, "Interval_Max is in ns");
                    sum.add(&h).unwrap();
                }
            }
        }
        assert!(intervals >= 1);
        let (st, bt) = (start_time.expect("StartTime"), base_time.expect("BaseTime"));
        assert!((st - p.start_at as f64).abs() < 2.0, "StartTime {st}");
        assert_eq!(st, bt);
        // --warmup 0 and -n: every counted request lands in some interval.
        assert_eq!(u(r, "error_total"), 0);
        assert_eq!(sum.len(), u(r, "requests"), "{name}");
        // And the intervals add up to the run's histogram exactly.
        assert!(
            sum == raw_hist(r),
            "{name}: the intervals differ from the run's histogram"
        );
        assert_reads(&r["latency_us"], &sum);
    }
}

// ------------------------------------------------------------------ Prometheus

/// GET on the test Prometheus' HTTP API; returns the JSON body.
fn prom_query(prom_url: &str, query: &str) -> Value {
    let path = format!("/api/v1/query?query={}", urlencode(query));
    let resp = http_get(&host_port(prom_url), &path);
    serde_json::from_str(&resp.body)
        .unwrap_or_else(|e| panic!("prometheus: {e}: {} {}", resp.status, resp.body))
}

/// Waits (up to a minute) until nothing listens on `port`: other tests on this machine use the
/// ports that the test Prometheus scrapes, one at a time.
fn wait_port_free(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "127.0.0.1:{port} stays taken");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn prometheus_sum_of_rates_across_generators_matches_their_qps() {
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let dir = tmpdir("prom");
    let (a_json, b_json) = (dir.join("a.json"), dir.join("b.json"));
    let mut tries = 0;
    let (start_at, a, b) = loop {
        tries += 1;
        // scripts/servers.sh's Prometheus scrapes these two ports every second.
        let [pa, pb] = scrape_ports();
        wait_port_free(pa);
        wait_port_free(pb);
        let (ma, mb) = (format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}"));
        let start_at = now_unix().ceil() as i64 + 3;
        let at = rfc3339(start_at);
        #[rustfmt::skip]
        let mut ca = spawn(&[
            "run", &url, "-R", "2000", "-d", "12s", "-c", "8", "--seed", "1", "--start-at", &at,
            "--instance", "prom-a", "--metrics", &ma, "-o", a_json.to_str().unwrap(),
            "--format", "json", "-q",
        ]);
        #[rustfmt::skip]
        let mut cb = spawn(&[
            "run", &url, "-R", "2000", "-d", "12s", "-c", "8", "--seed", "2", "--start-at", &at,
            "--instance", "prom-b", "--metrics", &mb, "-o", b_json.to_str().unwrap(),
            "--format", "json", "-q",
        ]);
        // Both bind their port before waiting for --start-at; one that lost a race for its
        // port has exited by then: stop the other and start over.
        std::thread::sleep(Duration::from_secs(1));
        let lost = [ca.try_wait().unwrap(), cb.try_wait().unwrap()]
            .iter()
            .any(|s| s.is_some());
        if lost && tries < 3 {
            for c in [&mut ca, &mut cb] {
                let _ = c.kill();
                let _ = c.wait();
            }
            continue;
        }
        break (start_at, ca, cb);
    };
    // ~8 s into the run (1 s warm-up, then 12 s measured): a 5 s rate window inside the run.
    let query_at = start_at as f64 + 8.0;
    std::thread::sleep(Duration::from_secs_f64((query_at - now_unix()).max(0.0)));
    let resp = prom_query(&prom, "sum(rate(loadgen_requests_total[5s]))");
    let (ca, da, ea) = finish(a);
    let (cb, db, eb) = finish(b);
    assert_eq!(ca, 0, "{ea}");
    assert_eq!(cb, 0, "{eb}");
    assert_eq!(resp["status"], "success", "{resp}");
    let seen: f64 = resp["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("no series in {resp}"))
        .parse()
        .unwrap();
    let reported = f(&da["runs"][0], "qps") + f(&db["runs"][0], "qps");
    eprintln!("Prometheus: {seen:.1}/s; the generators reported {reported:.1}/s");
    assert!(
        (seen - reported).abs() <= 0.10 * reported,
        "Prometheus saw {seen:.0}/s, the generators reported {reported:.0}/s"
    );
    // And merge agrees with the generators.
    let (code, merged, err) = merge(&[&a_json, &b_json]);
    assert_eq!(code, 0, "{err}");
    let mq = f(&merged.unwrap()["runs"][0], "qps");
    assert!((mq - reported).abs() < 0.11, "{mq} vs {reported}");
}
