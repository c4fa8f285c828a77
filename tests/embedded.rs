//! The default target: nothing installed, the embedded HTTP server in-process.

mod common;
use common::*;

#[test]
fn embedded_default_runs_with_qps_and_no_errors() {
    let (code, doc, err) = run_json(&[
        "-d", "2s", "--warmup", "500ms", "--keys", "1-100000", "-c", "8",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(r["kind"], "embedded");
    assert!(f(r, "qps") > 0.0);
    assert_eq!(u(r, "error_total"), 0);
    assert!(u(r, "hits") > 0);
    // The server's own counter saw exactly what loadgen sent, warm-up included.
    assert_eq!(
        r["server_observed"]["matches"], true,
        "{}",
        r["server_observed"]
    );
    assert!(!r["timeline"].as_array().unwrap().is_empty());
    assert_schema_valid(&doc);
}

#[test]
fn embedded_verify_and_exact_count() {
    let (code, doc, err) = run_json(&[
        "-n", "50000", "--keys", "1-50000", "--dist", "seq", "--verify", "-c", "4", "-p", "4",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "hits"), 50000);
    assert_eq!(u(r, "error_total"), 0);
    assert_eq!(u(&r["server_observed"], "delta"), 50000);
}

#[test]
fn result_file_is_written_atomically_and_valid() {
    // -o refuses a directory that does not exist.
    let dir = TempDir::new("loadgen-test");
    let path = dir.join("r.json");
    let out = run(&[
        "run",
        "-n",
        "1000",
        "--keys",
        "1-1000",
        "-o",
        path.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(u(&doc["runs"][0], "hits"), 1000);
    assert_schema_valid(&doc);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path() != path && e.path() != path.with_extension("html"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

/// The times of the progress lines on stderr (`[   2.0s]`), the warm-up line left out.
fn progress_times(stderr: &str) -> Vec<f64> {
    stderr
        .lines()
        .filter(|l| l.starts_with('[') && l.contains(" qps "))
        .filter(|l| !l.starts_with("[warm-up]"))
        .map(|l| {
            let label = &l[1..l.find(']').unwrap()];
            label
                .trim()
                .trim_end_matches('s')
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("progress time: {l}"))
        })
        .collect()
}

#[test]
fn progress_lines_move_forward_and_stop_at_the_end() {
    // Replies to requests sent just before the end used to get a line of their own after it
    // (`[  2.01s]` or a second `[   2.0s]`); a fractional duration and `-n` end mid-interval.
    let cases: &[&[&str]] = &[
        &["-d", "2s", "--warmup", "1s"],
        &["-d", "2s", "--warmup", "1s"],
        &["-d", "1500ms", "--warmup", "1s"],
        &["-n", "60000"],
    ];
    for args in cases {
        let mut all = vec!["run", "--keys", "1-100000", "-c", "8", "-p", "2"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--format", "json", "-o", "-"]);
        let out = run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let end = f(&doc["runs"][0], "duration_s");
        let times = progress_times(&stderr);
        assert!(!times.is_empty(), "{args:?}: no progress lines: {stderr}");
        for w in times.windows(2) {
            assert!(
                w[1] > w[0],
                "{args:?}: times go {} then {}: {stderr}",
                w[0],
                w[1]
            );
        }
        let last = *times.last().unwrap();
        // Labels are rounded to 10 ms at most.
        assert!(
            last <= end + 0.005,
            "{args:?}: a line at {last}s after the measured end {end}s: {stderr}"
        );
        assert!(
            last >= end - 0.05,
            "{args:?}: the final interval ({end}s) has no line: {stderr}"
        );
    }
}

#[test]
fn run_help_names_every_target_that_pipelines() {
    let out = run(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    let p = help
        .split("--pipeline")
        .nth(1)
        .and_then(|s| s.split("\n  -").next())
        .expect("-p in run --help");
    for name in ["PostgreSQL", "MySQL", "HandlerSocket", "memcached", "HTTP"] {
        assert!(p.contains(name), "-p help leaves out {name}: {p}");
    }
}

/// `run --help` lists the target forms one protocol a line (with its TLS form under it), not as
/// one paragraph.
#[test]
fn run_help_lists_each_target_form_on_its_own_line() {
    let out = run(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for form in [
        "postgres://",
        "mysql://",
        "hs://",
        "memcache://",
        "redis://",
        "http://",
    ] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(form)),
            "no line of run --help starts with {form}:\n{help}"
        );
    }
    for tls in ["?sslmode=", "?ssl-mode=", "rediss://", "https://"] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("TLS: {tls}"))),
            "no TLS line for {tls}:\n{help}"
        );
    }
}

/// `-d 5s` measures five seconds: the JSON's duration is 5 s within 2%, and the qps is the
/// requests over that duration.
#[test]
fn duration_5s_measures_5_seconds() {
    let (code, doc, err) = run_json(&["-d", "5s", "--warmup", "0s", "-c", "2"]);
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    let d = f(r, "duration_s");
    assert!((4.9..=5.1).contains(&d), "duration_s {d}");
    let qps = f(r, "qps");
    let want = (u(r, "hits") + u(r, "misses")) as f64 / d;
    assert!(
        (qps - want).abs() <= want * 0.01 + 1.0,
        "qps {qps} vs {want}"
    );
}

/// `serve --delay 2ms` answers after 2 ms, not after the next tick of a millisecond timer wheel
/// (which made it 3.1-3.6 ms). One request in flight per connection, so no queueing adds to it.
#[test]
fn serve_delay_is_kept_to_a_fraction_of_a_millisecond() {
    let served = Served::start_with(10_000, &["--delay", "2ms"]);
    let url = format!("{}?pipeline=1", served.url);
    let (code, doc, err) = run_json(&[
        &url, "-c", "2", "-p", "1", "-d", "1s", "--warmup", "200ms", "--keys", "1-10000",
    ]);
    assert_eq!(code, 0, "{err}");
    let p50 = f(&doc["runs"][0]["latency_us"], "p50");
    assert!(
        (2000.0..=2500.0).contains(&p50),
        "p50 {p50} µs for a 2 ms server"
    );
}

/// The run's verdict: (valid, reasons joined).
fn verdict(doc: &serde_json::Value) -> (bool, String) {
    let v = &doc["runs"][0]["verdict"];
    let reasons: Vec<&str> = v["reasons"]
        .as_array()
        .unwrap_or_else(|| panic!("no verdict: {v}"))
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    (v["valid"].as_bool().unwrap(), reasons.join("; "))
}

#[test]
fn verdict_a_clean_paced_run_is_valid() {
    let (code, doc, err) = run_json(&[
        "-d", "3s", "--warmup", "1s", "-R", "2000", "--keys", "1-100000", "--strict",
    ]);
    assert_schema_valid(&doc);
    // Valid, unless this machine was busy with other work: then only reasons a busy machine
    // causes, and --strict exits 3 for them. Never a reason the run itself controls.
    let (valid, why) = verdict(&doc);
    let v = &doc["runs"][0]["verdict"];
    for r in v["reasons"].as_array().unwrap() {
        let r = r.as_str().unwrap();
        let machine = [
            "machine disturbed",
            "behind schedule: send lag",
            "warm-up too short",
            "client saturated",
        ];
        assert!(machine.iter().any(|m| r.starts_with(m)), "{r}");
    }
    assert_eq!(code, if valid { 0 } else { 3 }, "{why}: {err}");
}

#[test]
fn verdict_mostly_misses_says_prepare_and_strict_exits_3() {
    // A server holding ids 1..=1000, asked for ids it does not have.
    let s = Served::start(1000);
    let args = [
        &s.url,
        "-d",
        "2s",
        "--warmup",
        "500ms",
        "-c",
        "4",
        "-R",
        "1000",
        "--keys",
        "2001-3000",
    ];
    let (code, doc, err) = run_json(&args);
    assert_eq!(code, 0, "misses are not errors: {err}");
    let (valid, why) = verdict(&doc);
    assert!(
        !valid && why.contains("mostly misses: 100%") && why.contains("loadgen prepare"),
        "{why}"
    );
    assert_schema_valid(&doc);
    let mut strict = args.to_vec();
    strict.push("--strict");
    let (code, _, err) = run_json(&strict);
    assert_eq!(code, 3, "{err}");
}

#[test]
fn verdict_a_paced_run_above_capacity_is_behind_schedule() {
    // 2 connections to a server answering each in 5 ms: at most 400/s.
    let s = Served::start_with(1000, &["--delay", "5ms"]);
    let (code, doc, err) = run_json(&[
        &s.url, "-d", "3s", "--warmup", "500ms", "-c", "2", "-R", "2000", "--keys", "1-1000",
    ]);
    assert_exit_fits(code, &doc["runs"][0], &err);
    let (valid, why) = verdict(&doc);
    assert!(
        !valid && why.contains("behind schedule: achieved"),
        "{why} {err}"
    );
    // What was due and never sent when the window closed: about (2000 - 400)/s x 3 s.
    let backlog = u(&doc["runs"][0], "rate.backlog");
    assert!(
        backlog > 2000,
        "backlog {backlog}: {}",
        doc["runs"][0]["rate"]
    );
    assert!(
        why.contains(&format!("a backlog of {backlog} requests due but not sent")),
        "{why}"
    );
    assert!(why.contains("send lag p99"), "{why}");
    assert_schema_valid(&doc);
}

/// -R above capacity with a warm-up: what the warm-up still owed at its end is dropped, so
/// the measured window starts with an empty queue rather than a second of the warm-up's.
#[test]
fn open_loop_warmup_backlog_is_dropped_not_carried_into_the_window() {
    // 2 connections answering in 5 ms each: 400/s; asked 600/s, so the warm-up's 2 s leave
    // about 400 requests (a second of work) unsent at its end.
    let s = Served::start_with(1000, &["--delay", "5ms"]);
    let (code, doc, err) = run_json(&[
        &s.url, "-d", "3s", "--warmup", "2s", "-c", "2", "-R", "600", "--keys", "1-1000",
    ]);
    assert_exit_fits(code, &doc["runs"][0], &err);
    let r = &doc["runs"][0];
    let dropped = u(r, "rate.warmup_dropped");
    assert!((150..=700).contains(&dropped), "dropped {dropped}: {err}");
    let first = r["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| f(row, "t_s") > 0.0)
        .expect("a measured interval");
    // The first measured second answers measured requests at the server's pace, not the
    // warm-up's leftovers, and their latency is not the warm-up's queue.
    let answered = u(first, "hits") + u(first, "misses");
    assert!(
        answered >= 200,
        "first interval answered {answered}: {first}"
    );
    let (p99_first, p99_run) = (f(first, "p99_us"), f(&r["latency_us"], "p99"));
    assert!(
        p99_first < p99_run * 0.8,
        "first interval p99 {p99_first} µs vs the run's {p99_run} µs"
    );
    assert_schema_valid(&doc);
}

/// An HTTP server that answers every request at once with canned bytes, next to no work per
/// request: the one client thread is the bottleneck. (On a small machine every real server,
/// `loadgen serve` and memcached included, costs more per lookup than the client does, so none
/// can saturate it.) Returns the target URL; it serves until the test process ends.
fn instant_http() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            std::thread::spawn(move || {
                const REPLY: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nuser1";
                let mut s = sock;
                let (mut buf, mut out, mut state) = (vec![0u8; 1 << 16], Vec::new(), 0u8);
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    // One reply per request head's end (\r\n\r\n), across reads.
                    for &b in &buf[..n] {
                        state = match (state, b) {
                            (0 | 2, b'\r') | (1 | 3, b'\n') => state + 1,
                            (_, b'\r') => 1,
                            _ => 0,
                        };
                        if state == 4 {
                            out.extend_from_slice(REPLY);
                            state = 0;
                        }
                    }
                    if s.write_all(&out).is_err() {
                        return;
                    }
                    out.clear();
                }
            });
        }
    });
    format!("http://127.0.0.1:{port}/usr/{{key}}")
}

#[test]
fn verdict_one_worker_thread_never_idle_is_client_saturated() {
    let url = instant_http();
    let (code, doc, err) = run_json(&[
        &url, "-t", "1", "-c", "4", "-p", "32", "-d", "2s", "--warmup", "500ms", "--keys", "1-1000",
    ]);
    assert_exit_fits(code, &doc["runs"][0], &err);
    let busiest = f(&doc["runs"][0], "client_cpu.busiest");
    let (valid, why) = verdict(&doc);
    // On a quiet machine the one thread is never idle. On a busy one the instant server's
    // thread may get too little of a core to keep it busy: then the rule is checked the other
    // way, the verdict saying nothing of a saturation that did not happen.
    let shown = format!(
        "client saturated: busiest worker thread {:.0}% busy",
        busiest * 100.0
    );
    if busiest >= 0.9 {
        assert!(!valid && why.contains(&shown), "{why}: {err}");
    } else {
        assert!(
            !why.contains("client saturated"),
            "busiest {busiest}: {why}"
        );
    }
    assert_schema_valid(&doc);
}

/// A sweep marks the step whose run is not valid, in its JSON, in its own verdict and on the
/// step's row of the text table.
#[test]
fn sweep_marks_a_saturated_step() {
    let url = instant_http();
    let dir = TempDir::new("loadgen-sweep");
    let path = dir.join("s.json");
    let out = run(&[
        "run",
        &url,
        "--sweep",
        "1,8",
        "-t",
        "1",
        "-p",
        "32",
        "-d",
        "1500ms",
        "--warmup",
        "300ms",
        "--keys",
        "1-1000",
        "-o",
        path.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let sw = &doc["sweeps"][0];
    let step = &sw["steps"][1];
    assert_eq!(step["connections"], 8);
    assert_eq!(step["verdict"]["valid"], false, "{step}");
    assert_eq!(step["verdict"], doc["runs"][1]["verdict"]);
    let reasons = sw["verdict"]["reasons"].to_string();
    assert!(
        reasons.contains("8 connections: client saturated"),
        "{reasons}"
    );
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("8"))
        .unwrap_or_else(|| panic!("no row for 8 connections: {text}"));
    assert!(row.ends_with("! not valid"), "{row}");
    assert!(text.contains("verdict    NOT VALID: "), "{text}");
    assert_schema_valid(&doc);
}

/// Answers slow for the server's first 2 s (`serve --cold`): a run without warm-up measures
/// the slow start, and the verdict says the warm-up was too short.
#[test]
fn verdict_a_server_still_warming_up_means_warmup_too_short() {
    let s = Served::start_with(10_000, &["--cold", "2s"]);
    let (code, doc, err) = run_json(&[
        &s.url, "-d", "5s", "--warmup", "0s", "-c", "2", "-p", "1", "--keys", "1-10000",
    ]);
    assert_exit_fits(code, &doc["runs"][0], &err);
    let (valid, why) = verdict(&doc);
    assert!(!valid && why.contains("warm-up too short"), "{why} {err}");
    // The first two intervals ran at most 2 connections / 1 ms.
    let rows = doc["runs"][0]["timeline"].as_array().unwrap();
    assert!(f(&rows[0], "qps") <= 2100.0, "{}", rows[0]);
}

/// A server that slows through the run (`serve --drift`, 5% more delay each second): the
/// verdict names the drift and its size; the same server without it is not drifting.
#[test]
fn verdict_a_server_that_slows_through_the_run_is_drifting() {
    let run_on = |extra: &[&str]| {
        let s = Served::start_with(10_000, &[&["--delay", "1ms"], extra].concat());
        let (code, doc, err) = run_json(&[
            &s.url,
            "-d",
            "6s",
            "--warmup",
            "300ms",
            "--interval",
            "250ms",
            "-c",
            "8",
            "--keys",
            "1-10000",
        ]);
        assert_exit_fits(code, &doc["runs"][0], &err);
        verdict(&doc).1
    };
    let why = run_on(&["--drift", "5%"]);
    // 1 ms growing 5% a second: from about 1.0 to 1.3 ms over the window, QPS falling 20-25%.
    assert!(why.contains("drifting: QPS fell "), "{why}");
    let why = run_on(&[]);
    assert!(!why.contains("drifting: QPS"), "{why}");
}

/// Processes of the test's own, each a shell spinning for at most 30 s, stopped by pid on drop.
struct Hogs(Vec<std::process::Child>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    std::process::Command::new("timeout")
                        .args(["30", "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh starts")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        // SIGTERM, which `timeout` passes on to its shell: a SIGKILL would end `timeout` alone
        // and leave the shell spinning, holding the test's output pipe open.
        for c in &mut self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }
}

#[test]
fn verdict_other_processes_busy_means_machine_disturbed() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let hogs = Hogs::start(cores);
    let (code, doc, err) = run_json(&[
        "-d", "2s", "--warmup", "500ms", "-R", "1000", "--keys", "1-100000",
    ]);
    assert_exit_fits(code, &doc["runs"][0], &err);
    drop(hogs);
    let others = f(&doc["runs"][0], "machine_load.others_share");
    assert!(others > 0.2, "others {others}: {err}");
    let (valid, why) = verdict(&doc);
    assert!(
        !valid && why.contains("machine disturbed: other processes took"),
        "{why}"
    );
    assert_schema_valid(&doc);
}

#[test]
fn verdict_a_server_stopped_mid_run_means_errors() {
    let s = Served::start(1000);
    let pid = s.child.id().to_string();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(2000));
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
    });
    let (code, doc, err) = run_json(&[
        &s.url,
        "-d",
        "3s",
        "--warmup",
        "500ms",
        "-c",
        "2",
        "-R",
        "1000",
        "--keys",
        "1-1000",
        "--timeout",
        "500ms",
    ]);
    killer.join().unwrap();
    assert_eq!(code, 1, "{err}");
    let (valid, why) = verdict(&doc);
    assert!(
        !valid && why.contains("errors in the measured window"),
        "{why}"
    );
}

/// `trace-bench` reads a zstd trace as it streams and counts it per op; a bad line is one clear
/// error naming the file and line, exit 2.
#[test]
fn trace_bench_counts_a_zst_trace_and_names_a_bad_line() {
    let dir = TempDir::new("loadgen-trace-bench");
    let text: String = (0..3000)
        .map(|i| {
            format!(
                "{},k{i},3,10,1,{},0\n",
                i / 1000,
                ["get", "set", "delete"][i % 3]
            )
        })
        .collect();
    let zst = dir.join("t.zst");
    std::fs::write(&zst, zstd::stream::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
    let o = run(&["trace-bench", zst.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.starts_with("3000 lines parsed in "), "{out}");
    assert!(
        out.contains("(get 1000, set 1000, delete 1000); timestamps 2.000 s first to last"),
        "{out}"
    );
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "0,a,1,1,1,get,0\n0,b,1,1,1,fly,0\n").unwrap();
    let o = run(&["trace-bench", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.csv line 2: unknown op \"fly\""), "{err}");
}

/// `--batch 10` over HTTP: `GET /usr?ids=k1,...,k10`, answered by a `loadgen serve` of our
/// own with a line `<id>\t<row>` per id found. With `--dist seq` over 2,000 ids of which the
/// server holds 1,000, exactly half the keys hit; the server's own `/stats`, read here, counts
/// the same hits and misses, key by key.
#[test]
fn http_multi_get_reads_each_key_and_the_server_counts_them() {
    let served = Served::start(1000);
    let hostport = served.url["http://".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let stat = |name: &str| -> u64 {
        let body = http_get(&hostport, "/stats").body;
        body.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /stats: {body}"))
    };
    // The bulk form itself: ids in the order asked, once per time asked, misses left out.
    let one = http_get(&hostport, "/usr?ids=5,2000,5");
    assert_eq!(one.status, 200);
    let lines: Vec<&str> = one.body.lines().collect();
    assert_eq!(lines.len(), 2, "{}", one.body);
    assert!(
        lines.iter().all(|l| l.starts_with("5\tuser5\t")),
        "{}",
        one.body
    );
    let (hits0, misses0) = (stat("hits "), stat("misses "));
    let (code, doc, err) = multi_get_seq_run(&served.url, "1-2000");
    assert_eq!(code, 0, "{err}");
    let r = &doc["runs"][0];
    assert_eq!(u(r, "error_total"), 0, "{r}");
    assert_eq!(
        (u(r, "keys.hits"), u(r, "keys.misses")),
        (10_000, 10_000),
        "{r}"
    );
    assert_eq!(stat("hits ") - hits0, 10_000, "the server's own hits");
    assert_eq!(stat("misses ") - misses0, 10_000, "the server's own misses");
    assert_schema_valid(&doc);
    // A URL whose key is not its last path segment has no bulk form: one line, exit 2.
    let url = served.url.replace("/usr/{key}", "/kv?id={key}");
    let out = run(&["run", &url, "--batch", "10", "-n", "10"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
