//! `--metrics`: the live Prometheus endpoint of the real binary, checked by scraping it, by
//! promtool, by a real Prometheus (scripts/servers.sh starts one), and the Grafana dashboard's
//! queries against the metrics loadgen exports.

mod common;
#[path = "metrics/dashboard.rs"]
mod dashboard;
#[path = "metrics/endpoint.rs"]
mod endpoint;
#[path = "metrics/prometheus.rs"]
mod prometheus;
#[path = "metrics/sets.rs"]
mod sets;
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
