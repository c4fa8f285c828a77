//! `--metrics`: the live Prometheus endpoint of the real binary, checked by scraping it, by
//! promtool, by a real Prometheus (scripts/servers.sh starts one), and the Grafana dashboard's
//! queries against the metrics loadgen exports.

mod common;
use common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// The tests that run loadgen take turns: on a small machine two load runs at once would
/// disturb each other's timing.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `loadgen run ARGS -q --format json -o -`, started in the background.
fn spawn_run(args: &[&str]) -> Child {
    Command::new(bin())
        .arg("run")
        .args(args)
        .args(["-q", "--format", "json", "-o", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen starts")
}

/// Waits for the child (killing it after `limit`) and returns (exit code, JSON, stderr).
fn finish(mut child: Child, limit: Duration) -> (i32, Value, String) {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}); stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

/// One HTTP/1.1 request to the exporter on `port`; None when nothing answers.
fn http(port: u16, method: &str, path: &str, headers: &str) -> Option<Reply> {
    http_request(&format!("127.0.0.1:{port}"), method, path, headers)
}

fn scrape(port: u16) -> Option<String> {
    http(port, "GET", "/metrics", "")
        .filter(|r| r.status == 200)
        .map(|r| r.body)
}

/// Scrapes until `ready` holds for the text (or panics after `limit`).
fn scrape_until(port: u16, limit: Duration, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(t) = scrape(port) {
            if ready(&t) {
                return t;
            }
            last = Some(t);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no scrape of port {port} satisfied the condition in {limit:?}; last: {last:?}");
}

/// A sample line as (series, value, timestamp): the series is the name and its labels, and
/// the exporter stamps every per-target sample with the end of the interval it describes.
fn split_sample(l: &str) -> (&str, &str, Option<&str>) {
    let end = match l.find('{') {
        Some(_) => l.rfind('}').expect("closing }") + 1,
        None => l.find(' ').expect("a value"),
    };
    let mut rest = l[end..].split(' ').filter(|t| !t.is_empty());
    let v = rest.next().expect("a value");
    let ts = rest.next();
    assert!(rest.next().is_none(), "too many fields in {l}");
    (&l[..end], v, ts)
}

/// The value of the sample whose name and labels are exactly `series`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(split_sample)
        .find(|(k, _, _)| *k == series)
        .map(|(_, v, _)| v.parse().unwrap())
}

fn sample_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for f in loadgen::metrics::FAMILIES {
        names.insert(f.name.to_string());
        if f.kind == "histogram" {
            for s in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{}{s}", f.name));
            }
        }
    }
    names
}

/// Parses `{a="b",c="d"}` (with escapes) into pairs; panics on a syntax error.
fn parse_labels(s: &str, line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        let mut name = String::new();
        while let Some(&c) = it.peek() {
            if c == '=' {
                break;
            }
            name.push(c);
            it.next();
        }
        assert!(
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit()),
            "bad label name {name:?} in {line}"
        );
        assert_eq!(it.next(), Some('='), "{line}");
        assert_eq!(it.next(), Some('"'), "{line}");
        let mut v = String::new();
        loop {
            match it.next() {
                Some('\\') => match it.next() {
                    Some('\\') => v.push('\\'),
                    Some('"') => v.push('"'),
                    Some('n') => v.push('\n'),
                    other => panic!("bad escape {other:?} in {line}"),
                },
                Some('"') => break,
                Some('\n') | None => panic!("unterminated label value in {line}"),
                Some(c) => v.push(c),
            }
        }
        assert!(
            !out.iter().any(|(k, _): &(String, String)| *k == name),
            "duplicate label {name} in {line}"
        );
        out.push((name, v));
        match it.next() {
            Some(',') => continue,
            None => break,
            other => panic!("unexpected {other:?} in {line}"),
        }
    }
    out
}

/// A strict structural check of an exposition (either format): metadata before samples, every
/// sample in a declared family, families contiguous, label syntax and escaping, histogram
/// buckets ascending and cumulative with +Inf equal to _count, `# EOF` last in OpenMetrics.
/// Returns the samples as (name, labels, value).
fn validate(text: &str, om: bool) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(text.ends_with('\n'), "the text ends with a newline");
    if om {
        assert_eq!(lines.pop(), Some("# EOF"), "OpenMetrics ends with # EOF");
        assert!(!lines.contains(&"# EOF"));
    } else {
        assert!(!text.contains("# EOF"));
    }
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut helped = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut closed = BTreeSet::new();
    let mut samples = Vec::new();
    for l in lines {
        if let Some(rest) = l.strip_prefix("# ") {
            let mut p = rest.splitn(3, ' ');
            let (kw, name, arg) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap_or(""));
            if current.as_deref() != Some(name) {
                if let Some(c) = current.take() {
                    closed.insert(c);
                }
                assert!(!closed.contains(name), "family {name} is split: {l}");
                current = Some(name.to_string());
            }
            match kw {
                "TYPE" => {
                    assert!(families.insert(name.into(), arg.into()).is_none(), "{l}");
                    if om && arg == "counter" {
                        assert!(
                            !name.ends_with("_total"),
                            "OpenMetrics family names drop _total: {l}"
                        );
                    }
                    if !om && arg == "counter" {
                        assert!(name.ends_with("_total"), "{l}");
                    }
                }
                "HELP" => {
                    assert!(helped.insert(name.to_string()), "{l}");
                    assert!(!arg.is_empty());
                }
                "UNIT" => {
                    assert!(om, "UNIT is OpenMetrics only");
                    assert!(name.ends_with(&format!("_{arg}")), "{l}");
                }
                _ => panic!("unknown metadata line {l}"),
            }
            continue;
        }
        assert!(!l.starts_with('#') && !l.is_empty(), "stray line {l:?}");
        let (series, v, ts) = split_sample(l);
        if let Some(ts) = ts {
            // Text format: integer milliseconds; OpenMetrics: seconds with a fraction.
            let ok = if om {
                ts.parse::<f64>().is_ok_and(|t| t > 1e9)
            } else {
                ts.parse::<i64>().is_ok_and(|t| t > 1_000_000_000_000)
            };
            assert!(ok, "bad timestamp in {l}");
        }
        let v: f64 = match v {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {l}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (
                n,
                parse_labels(rest.strip_suffix('}').expect("closing }"), l),
            ),
            None => (series, Vec::new()),
        };
        let fam = current.clone().expect("a sample before any metadata");
        let kind = families
            .get(&fam)
            .unwrap_or_else(|| panic!("no TYPE for {fam}"));
        let ok = match kind.as_str() {
            "counter" if om => name == format!("{fam}_total"),
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name == format!("{fam}{s}")),
            _ => name == fam,
        };
        assert!(ok, "sample {name} does not belong to family {fam} ({kind})");
        samples.push((
            name.to_string(),
            labels.into_iter().collect::<BTreeMap<_, _>>(),
            v,
        ));
    }
    for f in families.keys() {
        assert!(helped.contains(f), "no HELP for {f}");
    }
    // Histograms: per series (labels without le), ascending le, cumulative, +Inf == _count.
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut counts: BTreeMap<String, f64> = BTreeMap::new();
    for (name, labels, v) in &samples {
        let mut rest = labels.clone();
        let le = rest.remove("le");
        let key = format!(
            "{}|{rest:?}",
            name.trim_end_matches("_bucket").trim_end_matches("_count")
        );
        if name.ends_with("_bucket") {
            let le = le.expect("a bucket has le");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            buckets.entry(key).or_default().push((le, *v));
        } else if name.ends_with("_count") {
            counts.insert(key, *v);
        }
    }
    for (k, b) in &buckets {
        for w in b.windows(2) {
            assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "{k}: {w:?}");
        }
        let last = b.last().unwrap();
        assert_eq!(last.0, f64::INFINITY, "{k} has a +Inf bucket");
        assert_eq!(
            Some(&last.1),
            counts.get(k),
            "{k}: +Inf bucket equals _count"
        );
    }
    samples
}

/// Pipes the text to `promtool check metrics`; None when promtool is not installed.
fn promtool(text: &str) -> Option<(i32, String)> {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(_) => {
            if servers_required() {
                panic!("promtool is not installed (Debian package prometheus)");
            }
            eprintln!("skipped: promtool is not installed");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.code().unwrap_or(-1), msg))
}

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
    assert_eq!(value(&ended, "loadgen_run_valid"), Some(1.0), "{ended}");
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
    // The linger is over: the port is closed.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
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
        .filter(|n| *n != "loadgen_run_valid")
        .collect();
    assert_eq!(families, all, "a paced run exports every family");

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

/// GET on the Prometheus HTTP API; returns the `data` of a successful answer.
fn prom_api(base: &str, path_and_query: &str) -> Value {
    let resp = http_request(&host_port(base), "GET", path_and_query, "").unwrap_or_else(|| {
        panic!("Prometheus at {base} is not reachable: scripts/servers.sh up prometheus")
    });
    let v: Value = serde_json::from_str(&resp.body)
        .unwrap_or_else(|e| panic!("{e}: {} {}", resp.status, resp.body));
    assert_eq!(v["status"], "success", "{path_and_query}: {v}");
    v["data"].clone()
}

/// An instant query; the single result's value, or None when the result is empty.
fn prom_query(base: &str, q: &str, time: f64) -> Option<f64> {
    let data = prom_api(
        base,
        &format!("/api/v1/query?query={}&time={time:.3}", urlencode(q)),
    );
    let r = data["result"].as_array().unwrap();
    assert!(r.len() <= 1, "{q}: {data}");
    r.first()
        .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
}

/// The exporter's latency bucket bounds in seconds (docs/metrics.md), `+Inf` left out.
const BUCKET_BOUNDS_S: [f64; 19] = [
    1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0, 10.0,
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A run of the embedded server at `-R RATE` for `-d SECS` (1 s warm-up, 3 s linger) with
/// `--metrics` on a free one of the two ports scripts/servers.sh's Prometheus scrapes every
/// second, labelled `test_run=<run id>`. Returns (address, run id, the run's result).
fn scraped_run(what: &str, secs: &str, rate: &str) -> (String, String, Value) {
    let (child, addr, run_id) = start_scraped_run(what, secs, rate);
    let (code, doc, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    (addr, run_id, doc)
}

/// [`scraped_run`] started in the background: (the child, address, run id).
fn start_scraped_run(what: &str, secs: &str, rate: &str) -> (Child, String, String) {
    let port = [59464u16, 59465]
        .into_iter()
        .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("port 59464 or 59465 is free");
    let run_id = format!("{what}-{}-{}", std::process::id(), now_unix() as u64);
    let addr = format!("127.0.0.1:{port}");
    let label = format!("test_run={run_id}");
    let child = spawn_run(&[
        "--metrics",
        &addr,
        "--metrics-linger",
        "3s",
        "-d",
        secs,
        "--warmup",
        "1s",
        "-R",
        rate,
        "--keys",
        "1-100000",
        "--run-label",
        &label,
    ]);
    (child, addr, run_id)
}

#[test]
fn prometheus_sees_loadgens_rate_and_latency() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let _g = serial();
    let t0 = now_unix();
    let (addr, run_id, doc) = scraped_run("whole", "12s", "3000");
    let r = &doc["runs"][0];
    let loadgen_qps = f(r, "qps");
    let loadgen_p99_s = f(r, "latency_us.p99") / 1e6;

    let sel = format!("test_run=\"{run_id}\"");
    // Scrapes were working (Prometheus asks for OpenMetrics first, so this parses it too).
    let up = prom_query(
        &prom,
        &format!("up{{job=\"loadgen\",instance=\"{addr}\"}}"),
        t0 + 8.0,
    );
    assert_eq!(up, Some(1.0), "Prometheus scraped {addr}");
    // ...in OpenMetrics: only that format has UNIT lines and counter families without _total.
    let meta = prom_api(
        &prom,
        &format!(
            "/api/v1/targets/metadata?match_target={}",
            urlencode(&format!("{{instance=\"{addr}\"}}"))
        ),
    );
    let meta = meta.as_array().expect("metadata list");
    let of = |m: &str| meta.iter().find(|x| x["metric"] == m).cloned();
    let d = of("loadgen_request_duration_seconds").expect("histogram metadata");
    assert_eq!(
        (d["type"].as_str(), d["unit"].as_str()),
        (Some("histogram"), Some("seconds"))
    );
    let c = of("loadgen_requests").expect("counter family without _total");
    assert_eq!(c["type"], "counter");
    // Several evaluation times around 8 s into the run: rate() over 1 s scrapes of counters that
    // move once a second can be off by one step when the two clocks line up; the median is not.
    let times: Vec<f64> = (0..5).map(|i| t0 + 7.0 + i as f64 * 0.5).collect();
    let rates: Vec<f64> = times
        .iter()
        .map(|&t| {
            prom_query(
                &prom,
                &format!("sum(rate(loadgen_requests_total{{{sel}}}[5s]))"),
                t,
            )
            .unwrap_or_else(|| panic!("no rate at {t}"))
        })
        .collect();
    let rate = median(rates.clone());
    eprintln!("prometheus rate {rates:?} -> {rate:.1}/s; loadgen {loadgen_qps}/s");
    for want in [3000.0, loadgen_qps] {
        assert!(
            (rate - want).abs() <= want * 0.10,
            "Prometheus {rate:.1}/s vs {want}/s ({rates:?})"
        );
    }
    let q = format!(
        "histogram_quantile(0.99, sum by (le) (rate(loadgen_request_duration_seconds_bucket{{{sel}}}[5s])))"
    );
    let p99s: Vec<f64> = times
        .iter()
        .map(|&t| prom_query(&prom, &q, t).unwrap_or_else(|| panic!("no p99 at {t}")))
        .collect();
    let p99 = median(p99s.clone());
    eprintln!("prometheus p99 {p99s:?} -> {p99:.6}s over 5 s windows; loadgen {loadgen_p99_s:.6}s");
    assert!(p99.is_finite() && p99 > 0.0, "{p99s:?}");
    // The whole run, from the last scraped buckets (the same samples as loadgen's histogram):
    // histogram_quantile interpolates inside the bucket that holds the 99th percentile, so
    // Prometheus' p99 lies between that bucket's bounds, and they are read here from the
    // result's own histogram, the way the exporter files a sample: by the low end of its
    // HdrHistogram slot.
    let h = loadgen::result::decode_histogram(r["histogram"].as_str().unwrap()).unwrap();
    let low = h.lowest_equivalent(h.value_at_quantile(0.99));
    let bounds: Vec<f64> = [0.0]
        .into_iter()
        .chain(BUCKET_BOUNDS_S.iter().copied())
        .collect();
    let b = bounds
        .iter()
        .position(|&le| low <= (le * 1e9).round() as u64)
        .expect("p99 within the largest bucket");
    let (lo, hi) = (bounds[b - 1], bounds[b]);
    let whole = prom_query(
        &prom,
        &format!(
            "histogram_quantile(0.99, sum by (le) (max_over_time(loadgen_request_duration_seconds_bucket{{{sel}}}[60s])))"
        ),
        now_unix(),
    )
    .expect("a whole-run p99");
    eprintln!("prometheus whole-run p99 {whole:.6}s, bucket ({lo}, {hi}]");
    assert!(
        (lo..=hi).contains(&whole),
        "Prometheus p99 {whole}s outside the bucket ({lo}, {hi}] that holds loadgen's {loadgen_p99_s}s"
    );
    // The last scrape (during the linger) holds the final count.
    let hits = prom_query(
        &prom,
        &format!("max_over_time(loadgen_requests_total{{{sel},outcome=\"hit\"}}[60s])"),
        now_unix(),
    );
    let total = u(r, "hits") + u(r, "warmup_requests");
    assert_eq!(
        hits,
        Some(total as f64),
        "last scraped hit counter vs the run's hits + warm-up"
    );
}

/// Counters move once per interval and Prometheus scrapes on its own clock at the same period:
/// without the samples' own timestamps a scrape sees one step twice or skips it, and a short
/// rate() window is off by a fifth. With them every evaluation is the paced rate.
#[test]
fn prometheus_rate_over_four_seconds_is_the_paced_rate_at_one_second_scrapes() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let _g = serial();
    let (_, run_id, doc) = scraped_run("paced", "16s", "15000");
    let qps = f(&doc["runs"][0], "qps");
    assert!(
        (qps - 15000.0).abs() < 150.0,
        "the run kept its pace: {qps}/s"
    );
    let sel = format!("test_run=\"{run_id}\"");
    // The first stored sample: the end of the run's first interval (its own timestamp), so the
    // windows below lie inside the run, whenever the connect phase let it start.
    let first = prom_api(
        &prom,
        &format!(
            "/api/v1/query?query={}&time={:.3}",
            urlencode(&format!(
                "loadgen_requests_total{{{sel},outcome=\"hit\"}}[60s]"
            )),
            now_unix()
        ),
    );
    let first = first["result"][0]["values"][0][0]
        .as_f64()
        .unwrap_or_else(|| panic!("no stored sample: {first}"));
    let q = format!("sum(rate(loadgen_requests_total{{{sel}}}[4s]))");
    // Ten consecutive evaluations, one a second, inside the run (17 s from its start).
    let rates: Vec<f64> = (0..10)
        .map(|i| {
            let t = first + 4.0 + i as f64;
            prom_query(&prom, &q, t)
                .unwrap_or_else(|| panic!("no rate at first sample + {}", 4 + i))
        })
        .collect();
    eprintln!("prometheus rate[4s] at 1 s steps: {rates:?}; loadgen {qps}/s");
    for r in &rates {
        assert!(
            (r - 15000.0).abs() <= 15000.0 * 0.05,
            "rate {r:.0}/s is more than 5% off the paced 15000/s: {rates:?}"
        );
    }
}

fn dashboard() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/loadgen.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("dashboard is JSON")
}

/// (panel title, exprs) of every panel, rows' nested panels included.
fn panels(v: &Value) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for p in v["panels"].as_array().expect("panels") {
        if p["type"] == "row" {
            out.extend(panels(p));
            continue;
        }
        let exprs = p["targets"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["expr"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        out.push((p["title"].as_str().unwrap_or("").to_string(), exprs));
    }
    out
}

/// Identifiers matching `loadgen_[a-z_]+` that are not part of a longer identifier.
fn metric_names(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(j) = expr[i..].find("loadgen_") {
        let start = i + j;
        let before = start.checked_sub(1).map(|k| b[k]);
        let mut end = start + "loadgen_".len();
        while end < b.len() && (b[end].is_ascii_lowercase() || b[end] == b'_') {
            end += 1;
        }
        let glued = before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
            || b.get(end)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b':');
        assert!(
            !glued,
            "odd identifier around {} in {expr}",
            &expr[start..end]
        );
        out.push(expr[start..end].to_string());
        i = end;
    }
    out
}

#[test]
fn dashboard_queries_name_only_exported_metrics() {
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["uid"].as_str().is_some());
    // A templated datasource: importable as-is, any Prometheus picked from a drop-down.
    let vars = d["templating"]["list"].as_array().expect("templating");
    assert!(
        vars.iter().any(|v| v["type"] == "datasource"
            && v["name"] == "datasource"
            && v["query"] == "prometheus"),
        "a datasource variable"
    );
    let names = sample_names();
    let ps = panels(&d);
    assert!(ps.len() >= 6, "{ps:?}");
    let mut all = String::new();
    for (title, exprs) in &ps {
        assert!(!exprs.is_empty(), "panel {title:?} has no expression");
        for e in exprs {
            let used = metric_names(e);
            assert!(
                !used.is_empty(),
                "panel {title:?}: {e} uses no loadgen metric"
            );
            for n in used {
                assert!(
                    names.contains(&n),
                    "panel {title:?}: {n} is not exported ({names:?})"
                );
            }
            all.push_str(e);
            all.push('\n');
        }
    }
    for p in d["panels"].as_array().unwrap() {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
    }
    for want in [
        "sum by (target) (rate(loadgen_requests_total",
        "loadgen_qps",
        "histogram_quantile(0.5,",
        "histogram_quantile(0.99,",
        "histogram_quantile(0.999,",
        "loadgen_request_duration_seconds_bucket",
        "loadgen_errors_total",
        "loadgen_in_flight_requests",
        "loadgen_connections",
        "loadgen_reconnects_total",
        "[$__rate_interval]",
    ] {
        assert!(all.contains(want), "no panel query uses {want}");
    }
}

/// Every dashboard query, with Grafana's variables filled in, is valid PromQL for Prometheus.
#[test]
fn dashboard_queries_parse_in_prometheus() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    for (title, exprs) in panels(&dashboard()) {
        for e in exprs {
            let q = e
                .replace("$__rate_interval", "1m")
                .replace("$__interval", "15s")
                .replace("$target", ".*")
                .replace("$instance_name", ".*");
            assert!(!q.contains('$'), "unhandled variable in {q}");
            // prom_api asserts status "success" (a syntax error is status "error").
            prom_api(&prom, &format!("/api/v1/query?query={}", urlencode(&q)));
            eprintln!("ok: {title}: {q}");
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

/// Grafana, alerting and recording rules evaluate at "now", not at a stored sample's time: the
/// counters a scrape reads are current when it lands, so rate() at now is the paced rate, in an
/// instant query and at the last point of a range query ending now.
#[test]
fn prometheus_rate_at_now_is_the_paced_rate() {
    let Some(prom) = server("LOADGEN_PROM_URL") else {
        return;
    };
    let _g = serial();
    let (child, _, run_id) = start_scraped_run("now", "24s", "15000");
    let sel = format!("test_run=\"{run_id}\"");
    let q = format!("sum(rate(loadgen_requests_total{{{sel}}}[4s]))");
    let instant = |q: &str| -> Option<f64> {
        let data = prom_api(&prom, &format!("/api/v1/query?query={}", urlencode(q)));
        let r = data["result"].as_array().unwrap().first().cloned()?;
        Some(r["value"][1].as_str().unwrap().parse().unwrap())
    };
    // The first scrape of the run, then 5 s more, so every 4 s window below lies inside it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while instant(&format!("loadgen_requests_total{{{sel},outcome=\"hit\"}}")).is_none() {
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped the run"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(5));
    let mut rates = Vec::new();
    for _ in 0..10 {
        rates.push(instant(&q).expect("a rate at now"));
        std::thread::sleep(Duration::from_secs(1));
    }
    let end = now_unix();
    let range = prom_api(
        &prom,
        &format!(
            "/api/v1/query_range?query={}&start={:.3}&end={end:.3}&step=1",
            urlencode(&q),
            end - 10.0
        ),
    );
    let values = range["result"][0]["values"].as_array().cloned();
    let last: f64 = values
        .and_then(|v| v.last().cloned())
        .and_then(|p| p[1].as_str().map(|s| s.parse().unwrap()))
        .unwrap_or_else(|| panic!("no range result: {range}"));
    let (code, doc, err) = finish(child, Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let qps = f(&doc["runs"][0], "qps");
    eprintln!("rate[4s] at now, 1 s apart: {rates:?}; range query's last point {last:.0}; loadgen {qps}/s");
    assert!(
        (qps - 15000.0).abs() < 150.0,
        "the run kept its pace: {qps}/s"
    );
    for r in rates.iter().chain([&last]) {
        assert!(
            (r - 15000.0).abs() <= 15000.0 * 0.05,
            "rate {r:.0}/s at now is more than 5% off the paced 15000/s: {rates:?}, range {last:.0}"
        );
    }
}
