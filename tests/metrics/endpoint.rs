//! The live endpoint itself: scraped during a run and its linger, promtool, abuse, ports.

use super::*;

#[test]
fn scrape_during_linger_counts_every_request() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spawn_run(&[
        "-n",
        "20000",
        "--keys",
        "1-10000",
        "--metrics",
        &addr,
        "--metrics-linger",
        "3s",
    ]);
    let hit = "loadgen_requests_total{target=\"embedded\",outcome=\"hit\"}";
    let text = scrape_until(port, Duration::from_secs(60), |t| {
        value(t, hit) == Some(20000.0)
    });
    // The run is over (every request counted): this scrape happened during the linger.
    assert_eq!(value(&text, hit), Some(20000.0), "{text}");
    // Once the result is made, its verdict: a clean run is valid.
    let ended = scrape_until(port, Duration::from_secs(30), |t| {
        value(t, "loadgen_run_valid").is_some()
    });
    let run_valid = value(&ended, "loadgen_run_valid");
    for outcome in ["miss", "error"] {
        let s = format!("loadgen_requests_total{{target=\"embedded\",outcome=\"{outcome}\"}}");
        assert_eq!(value(&text, &s), Some(0.0), "{s}");
    }
    for kind in [
        "connect",
        "io",
        "timeout",
        "server",
        "protocol",
        "verify",
        "duplicate",
        "deadlock",
        "serialization",
        "readonly",
    ] {
        let s = format!("loadgen_errors_total{{target=\"embedded\",kind=\"{kind}\"}}");
        assert_eq!(value(&text, &s), Some(0.0), "{s}");
    }
    // -n has no warm-up by default: every request is in the histogram too.
    assert_eq!(
        value(
            &text,
            "loadgen_request_duration_seconds_count{target=\"embedded\"}"
        ),
        Some(20000.0)
    );
    assert_eq!(
        value(
            &text,
            "loadgen_request_duration_seconds_bucket{target=\"embedded\",le=\"+Inf\"}"
        ),
        Some(20000.0)
    );
    assert_eq!(
        value(&text, "loadgen_qps{target=\"embedded\"}"),
        Some(0.0),
        "run ended"
    );
    validate(&text, false);
    let (code, doc, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "hits"), 20000);
    // The metric is the JSON's verdict; a clean run is valid unless this machine was busy
    // with other work, which the test does not control.
    let verdict = &doc["runs"][0]["verdict"];
    let valid = verdict["valid"].as_bool().unwrap();
    assert_eq!(run_valid, Some(if valid { 1.0 } else { 0.0 }), "{verdict}");
    assert!(valid || only_disturbed(verdict), "{verdict}");
    // The linger is over: the port is closed.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn cis_follow_the_result() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spawn_run(&[
        "-d",
        "3s",
        "--warmup",
        "300ms",
        "--interval",
        "200ms",
        "--keys",
        "1-10000",
        "--metrics",
        &addr,
        "--metrics-linger",
        "3s",
    ]);
    let ended = scrape_until(port, Duration::from_secs(60), |t| {
        value(t, "loadgen_run_valid").is_some()
    });
    let (code, doc, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    validate(&ended, false);
    let r = &doc["runs"][0];
    let p = &r["precision"];
    // The last interval's CIs are made of the result's intervals: the same widths (QPS) and
    // the same ratio of bounds (p50, made on the logs). Their centers may differ a little: the
    // result's is over its whole window, the final cut interval included.
    let bound =
        |name: &str| value(&ended, name).unwrap_or_else(|| panic!("{name} missing:\n{ended}"));
    let same = |m: f64, j: f64, what: &str| {
        assert!(
            (m - j).abs() <= j.abs() * 0.01,
            "{what}: metric {m}, result {j}"
        );
    };
    let q = |b: &str| {
        bound(&format!(
            "loadgen_qps_ci{{target=\"embedded\",bound=\"{b}\"}}"
        ))
    };
    same(
        q("high") - q("low"),
        f(&p["qps"], "high") - f(&p["qps"], "low"),
        "qps width",
    );
    let l = |b: &str| {
        bound(&format!(
            "loadgen_latency_ci_seconds{{target=\"embedded\",quantile=\"0.5\",bound=\"{b}\"}}"
        ))
    };
    same(
        l("high") / l("low"),
        f(&p["p50"], "high") / f(&p["p50"], "low"),
        "p50 bounds",
    );
    assert!(
        q("low") <= f(r, "qps") * 1.05 && f(r, "qps") * 0.95 <= q("high"),
        "{p}"
    );
}

#[test]
fn promtool_accepts_a_live_scrape_and_openmetrics_is_well_formed() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spawn_run(&[
        "-d",
        "3s",
        "--warmup",
        "500ms",
        "--keys",
        "1-10000",
        "-R",
        "4000",
        "--metrics",
        &addr,
        "--metrics-linger",
        "2s",
        "--instance",
        "gen \"1\"\\x",
        "--run-label",
        "env=ci",
    ]);
    let has_requests = |t: &str| t.contains("loadgen_requests_total{");
    let live = scrape_until(port, Duration::from_secs(30), has_requests);
    let om = loop {
        let r = http(port, "GET", "/metrics", "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n")
            .expect("scrape");
        assert_eq!(r.status, 200);
        assert!(
            r.headers
                .contains("content-type: application/openmetrics-text; version=1.0.0"),
            "{}",
            r.headers
        );
        if has_requests(&r.body) {
            break r.body;
        }
    };
    let (code, doc, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "error_total"), 0);

    let samples = validate(&live, false);
    validate(&om, true);
    let names = sample_names();
    for (name, labels, _) in &samples {
        assert!(names.contains(name), "{name} is not in metrics::FAMILIES");
        assert_eq!(
            labels.get("instance_name").map(String::as_str),
            Some("gen \"1\"\\x")
        );
        assert_eq!(labels.get("env").map(String::as_str), Some("ci"));
        assert!(
            !labels.contains_key("instance"),
            "Prometheus owns the instance label"
        );
    }
    assert!(
        live.contains(r#"instance_name="gen \"1\"\\x",env="ci"}"#),
        "{live}"
    );
    let families: BTreeSet<&str> = live
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    // loadgen_run_valid comes once the run has ended.
    let all: BTreeSet<&str> = loadgen::metrics::FAMILIES
        .iter()
        .map(|f| f.name)
        .filter(|n| *n != "loadgen_run_valid" && !n.starts_with("loadgen_server_"))
        .filter(|n| !n.ends_with("_ci") && !n.ends_with("_ci_seconds"))
        .collect();
    assert_eq!(
        families, all,
        "a paced run exports every family but a set's (`sets.rs`) and the CIs, which need five \
         intervals (`cis_follow_the_result`)"
    );

    let Some((rc, msg)) = promtool(&live) else {
        return;
    };
    assert_eq!(rc, 0, "promtool check metrics: {msg}\n{live}");
    assert!(msg.trim().is_empty(), "promtool reported: {msg}");
    // promtool (2.42) has no OpenMetrics mode: it reads the OpenMetrics text with the 0.0.4
    // parser. It must parse (exit 1 is a parse error); the only lint it may raise is the missing
    // HELP of the `_total` names, since OpenMetrics declares counter families without `_total`.
    // The 0.0.4 parser also wants integer milliseconds where OpenMetrics has seconds: the
    // timestamps go (validate() checked them above; Prometheus itself reads them, see the
    // Prometheus tests).
    let untimed: String = om
        .lines()
        .map(|l| match l.starts_with('#') {
            true => format!("{l}\n"),
            false => {
                let (series, v, _) = split_sample(l);
                format!("{series} {v}\n")
            }
        })
        .collect();
    let (rc, msg) = promtool(&untimed).unwrap();
    assert_ne!(rc, 1, "promtool cannot parse the OpenMetrics text: {msg}");
    for l in msg.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            l.ends_with("_total no help text"),
            "promtool on OpenMetrics: {l}"
        );
    }
}

#[test]
fn the_live_endpoint_answers_only_its_paths_and_survives_abuse() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = spawn_run(&[
        "-d",
        "3s",
        "--warmup",
        "0s",
        "--keys",
        "1-10000",
        "-c",
        "4",
        "-R",
        "2000",
        "--metrics",
        &addr,
        "--metrics-linger",
        "1s",
    ]);
    scrape_until(port, Duration::from_secs(30), |t| {
        t.contains("loadgen_requests_total{")
    });
    let r = http(port, "GET", "/favicon.ico", "").unwrap();
    assert_eq!(r.status, 404);
    // The live page and its data are served too.
    let r = http(port, "GET", "/", "").unwrap();
    assert_eq!(r.status, 200);
    assert!(
        r.headers.contains("content-type: text/html"),
        "{}",
        r.headers
    );
    let r = http(port, "GET", "/live.json", "").unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with("{\"done\":false,"), "{}", r.body);
    let r = http(port, "DELETE", "/metrics", "").unwrap();
    assert_eq!(r.status, 405);
    assert!(r.headers.contains("allow: get, head"), "{}", r.headers);
    let r = http(port, "HEAD", "/metrics", "").unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, ""));
    // A client that never sends its headers, and garbage.
    let _idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut g = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let _ = g.write_all(b"\x00\x01\x02 garbage \xff\r\n\r\n");
    // Parallel scrapes, several rounds, while the run goes on.
    for _ in 0..3 {
        let handles: Vec<_> = (0..32)
            .map(|_| std::thread::spawn(move || scrape(port).is_some()))
            .collect();
        for h in handles {
            assert!(h.join().unwrap(), "a parallel scrape failed");
        }
    }
    let (code, doc, err) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    assert_eq!(u(&doc["runs"][0], "error_total"), 0);
}

#[test]
fn a_taken_port_or_a_bad_address_is_a_setup_error() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&["run", "-n", "100", "--metrics", &addr, "-q", "-o", "-"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        format!("loadgen: cannot serve metrics on {addr}: address already in use (choose another --metrics port)\n")
    );
    let out = run(&[
        "run",
        "-n",
        "100",
        "--metrics",
        "localhost:9464",
        "-q",
        "-o",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("loadgen: cannot serve metrics on localhost:9464: not an IP:PORT"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = run(&[
        "run",
        "-n",
        "100",
        "--metrics",
        "127.0.0.1:0",
        "--run-label",
        "target=x",
        "-q",
        "-o",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("loadgen sets that label itself"), "{err}");
}

/// TCP ports the process listens on (from its socket fds and /proc/net/tcp{,6}).
fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let mut inodes = BTreeSet::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(l) = std::fs::read_link(fd.path()) {
                let l = l.to_string_lossy().to_string();
                if let Some(n) = l.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                    inodes.insert(n.to_string());
                }
            }
        }
    }
    let mut ports = BTreeSet::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(t) = std::fs::read_to_string(f) else {
            continue;
        };
        for l in t.lines().skip(1) {
            let c: Vec<&str> = l.split_whitespace().collect();
            if c.len() > 9 && c[3] == "0A" && inodes.contains(c[9]) {
                let port = c[1].rsplit(':').next().unwrap();
                ports.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

#[test]
fn without_metrics_no_port_is_opened() {
    let _g = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    for with in [false, true] {
        let mut args = vec![
            "-d", "2s", "--warmup", "0s", "--keys", "1-1000", "-c", "2", "-R", "500",
        ];
        if with {
            args.extend(["--metrics", &addr]);
        }
        let child = spawn_run(&args);
        std::thread::sleep(Duration::from_millis(1200));
        let ports = listening_ports(child.id());
        let (code, _, err) = finish(child, Duration::from_secs(30));
        assert_eq!(code, 0, "{err}");
        // The embedded server listens on one port; --metrics adds exactly its own.
        if with {
            assert_eq!(ports.len(), 2, "{ports:?}");
            assert!(ports.contains(&port), "{ports:?}");
        } else {
            assert_eq!(ports.len(), 1, "only the embedded server: {ports:?}");
        }
    }
}

/// `--metrics` says where it serves when it starts listening, and a linger says how long and
/// until when it keeps serving; `-q` keeps stderr quiet about both.
#[test]
fn metrics_say_where_they_serve_and_how_long_they_linger() {
    let _g = serial();
    for quiet in [false, true] {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut args = vec!["run", "-n", "2000", "--keys", "1-10000", "--metrics", &addr];
        args.extend(["--metrics-linger", "1s", "--format", "json", "-o", "-"]);
        if quiet {
            args.push("-q");
        }
        let out = Command::new(bin()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let listens = format!("metrics at http://{addr}/metrics, live page at http://{addr}/");
        let lingers = format!("metrics stay up at http://{addr}/ for 1s (until ");
        assert_eq!(err.contains(&listens), !quiet, "{err}");
        assert_eq!(err.contains(&lingers), !quiet, "{err}");
    }
}
