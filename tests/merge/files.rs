//! `loadgen merge` of result files built from one real run, edited per case.

use super::*;

fn template() -> &'static Value {
    static T: OnceLock<Value> = OnceLock::new();
    T.get_or_init(|| {
        let (code, doc, err) = run_json(&["-n", "2000", "-c", "2", "--keys", "1-10000"]);
        assert_eq!(code, 0, "{err}");
        doc
    })
}

/// A result file: `hits` answered lookups over `duration_s` from `started_at`, QPS to match.
fn file(instance: &str, started_at: &str, duration_s: f64, hits: u64) -> Value {
    let mut d = template().clone();
    d["instance"] = json!(instance);
    d["started_at"] = json!(started_at);
    let r = &mut d["runs"][0];
    r["started_at"] = json!(started_at);
    r["duration_s"] = json!(duration_s);
    r["hits"] = json!(hits);
    r["misses"] = json!(0);
    r["requests"] = json!(hits);
    r["qps"] = json!(hits as f64 / duration_s);
    d
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

const T0: &str = "2026-12-02T17:40:00Z";

#[test]
fn qps_is_the_sum_when_the_windows_overlap() {
    let dir = tmpdir("overlap");
    let a = write(&dir, "a.json", &file("a", T0, 10.0, 10_000));
    let b = write(&dir, "b.json", &file("b", T0, 10.0, 30_000));
    let (code, m, err) = merge(&[&a, &b]);
    assert_eq!(code, 0, "{err}");
    let r = &m.unwrap()["runs"][0];
    // Identical windows: the sum of QPS is total answered / window.
    assert_eq!(f(r, "qps"), 4000.0);
    assert_eq!(f(r, "qps"), 40_000.0 / 10.0);
    assert_eq!(f(r, "duration_s"), 10.0);
    assert!(!err.contains("overlap"), "{err}");

    // b ran 5 s inside a's 10 s: 1000/s + 3000/s while they overlapped; total / a window
    // (2500/s) would understate the load the server took.
    let c = write(
        &dir,
        "c.json",
        &file("c", "2026-12-02T17:40:02Z", 5.0, 15_000),
    );
    let (code, m, err) = merge(&[&a, &c]);
    assert_eq!(code, 0, "{err}");
    let r = &m.unwrap()["runs"][0];
    assert_eq!(f(r, "qps"), 4000.0);
    assert_eq!(f(r, "duration_s"), 10.0);
    assert!(!err.contains("do not overlap"), "{err}");
}

#[test]
fn qps_of_generators_that_ran_one_after_another_is_total_over_summed_windows() {
    let dir = tmpdir("sequential");
    let a = write(&dir, "a.json", &file("a", T0, 10.0, 10_000));
    let b = write(
        &dir,
        "b.json",
        &file("b", "2026-12-02T17:41:00Z", 10.0, 30_000),
    );
    let (code, m, err) = merge(&[&a, &b]);
    assert_eq!(code, 0, "{err}");
    let r = &m.unwrap()["runs"][0];
    assert_eq!(f(r, "qps"), 40_000.0 / 20.0);
    assert_eq!(f(r, "duration_s"), 20.0);
    assert!(err.contains("do not overlap"), "{err}");
}

#[test]
fn percentiles_come_from_the_histograms_never_from_the_reported_percentiles() {
    let dir = tmpdir("histograms");
    let mut fast = loadgen::recorder::new_histogram();
    let mut slow = loadgen::recorder::new_histogram();
    let mut raw = Vec::new();
    for i in 0..9_900u64 {
        fast.record(80_000 + i * 7).unwrap(); // 80..150 µs
        raw.push(80_000 + i * 7);
    }
    for i in 0..300u64 {
        slow.record(20_000_000 + i * 10_000).unwrap(); // 20..23 ms
        raw.push(20_000_000 + i * 10_000);
    }
    let mut a = file("a", T0, 10.0, 9_900);
    let mut b = file("b", T0, 10.0, 300);
    a["runs"][0]["histogram"] = json!(encode_histogram(&fast));
    b["runs"][0]["histogram"] = json!(encode_histogram(&slow));
    // The files' own percentiles, deliberately wrong: merge must not look at them.
    let bogus = json!({"count": 1, "min": 1.0, "mean": 1.0, "p50": 1.0, "p90": 1.0,
                       "p99": 1.0, "p999": 1.0, "max": 1.0});
    a["runs"][0]["latency_us"] = bogus.clone();
    b["runs"][0]["latency_us"] = bogus;
    let (pa, pb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let (code, m, err) = merge(&[&pa, &pb]);
    assert_eq!(code, 0, "{err}");
    let m = m.unwrap();
    let got = pct(&m["runs"][0]["latency_us"]);
    assert_eq!(got.count, 10_200);
    // The reference: the raw samples, sorted, read by nearest rank. A histogram with 3
    // significant digits reports the top of the value's bucket: at most 1/1024 above.
    raw.sort_unstable();
    let exact = |q: f64| raw[((q * raw.len() as f64).ceil() as usize).max(1) - 1] as f64 / 1000.0;
    for (name, q) in QUANTILES {
        let (want, have) = (exact(q), f(&m["runs"][0]["latency_us"], name));
        assert!(
            have >= want && have <= want * (1.0 + 1.0 / 1024.0),
            "{name}: merged {have}µs, the samples' {want}µs"
        );
    }
    assert!(
        got.max >= 22_990.0 && got.max <= 22_990.0 * (1.0 + 1.0 / 1024.0),
        "{got:?}"
    );
    assert!(
        got.min <= 80.0 && got.min >= 80.0 * (1.0 - 1.0 / 1024.0),
        "{got:?}"
    );
    // 300 of 10,200 samples are slow (2.9%): the merged p99 is slow, unlike fast's p99 and
    // far from the average of the two files' true p99s.
    let avg = (fast.value_at_quantile(0.99) + slow.value_at_quantile(0.99)) as f64 / 2000.0;
    assert!(got.p99 >= 20_000.0, "{got:?}");
    assert!((got.p99 - avg).abs() > 1000.0);
    // Closed loop: service time is the latency, so it is exact as well.
    assert_eq!(pct(&m["runs"][0]["service_us"]), got);
    assert_schema_valid(&m);
}

#[test]
fn timeline_rows_with_equal_t_s_are_summed() {
    let dir = tmpdir("timeline");
    let row = |t: f64, qps: f64, hits: u64, p99: f64| {
        json!({"t_s": t, "qps": qps, "hits": hits, "misses": 1, "errors": 0, "p50_us": 50.0,
               "p99_us": p99, "in_flight": 2, "connections": 4, "reconnects": 0})
    };
    let mut a = file("a", T0, 2.0, 300);
    let mut b = file("b", T0, 2.0, 300);
    a["runs"][0]["timeline"] = json!([row(1.0, 100.0, 100, 200.0), row(2.0, 200.0, 200, 300.0)]);
    b["runs"][0]["timeline"] = json!([row(1.0, 50.0, 50, 900.0), row(2.5, 250.0, 250, 100.0)]);
    let (pa, pb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let (code, m, err) = merge(&[&pa, &pb]);
    assert_eq!(code, 0, "{err}");
    let m = m.unwrap();
    let tl = m["runs"][0]["timeline"].as_array().unwrap();
    let ts: Vec<f64> = tl.iter().map(|r| r["t_s"].as_f64().unwrap()).collect();
    assert_eq!(ts, [1.0, 2.0, 2.5]);
    assert_eq!(f(&tl[0], "qps"), 150.0);
    assert_eq!(u(&tl[0], "hits"), 150);
    assert_eq!(u(&tl[0], "misses"), 2);
    assert_eq!(u(&tl[0], "connections"), 8);
    assert_eq!(
        f(&tl[0], "p99_us"),
        900.0,
        "p99 of a merged row: the highest, an upper bound"
    );
    assert_eq!(f(&tl[1], "qps"), 200.0);
    assert_eq!(f(&tl[2], "qps"), 250.0);
    assert_schema_valid(&m);
}

#[test]
fn different_workloads_are_refused_with_a_clear_error() {
    let dir = tmpdir("refuse");
    let a = write(&dir, "a.json", &file("a", T0, 10.0, 1000));
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 4] = [
        ("keys", |v| v["settings"]["keys"] = json!("1-500"), "--keys"),
        (
            "dist",
            |v| v["settings"]["dist"] = json!("zipf:0.99"),
            "--dist",
        ),
        (
            "kind",
            |v| v["runs"][0]["kind"] = json!("postgres"),
            "kinds of target",
        ),
        (
            "runs",
            |v| {
                let r = v["runs"][0].clone();
                v["runs"].as_array_mut().unwrap().push(r);
            },
            "run counts",
        ),
    ];
    for (name, edit, says) in cases {
        let mut b = file("b", T0, 10.0, 1000);
        edit(&mut b);
        let pb = write(&dir, &format!("b-{name}.json"), &b);
        let (code, m, err) = merge(&[&a, &pb]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(m.is_none(), "{name}: no result on a refusal");
        assert!(
            err.contains("cannot merge") && err.contains(says),
            "{name}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{name}: one line: {err}");
    }
    // Not a result file at all.
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"x\": 1}").unwrap();
    let (code, _, err) = merge(&[&a, &junk]);
    assert_eq!(code, 2);
    assert!(err.contains("junk.json"), "{err}");
}

#[test]
fn differing_connections_warn_and_merge_and_the_result_merges_again() {
    let dir = tmpdir("warn");
    let a = file("a", T0, 10.0, 1000);
    let mut b = file("b", T0, 10.0, 3000);
    b["settings"]["connections"] = json!(64);
    b["settings"]["seed"] = json!(7);
    let (pa, pb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let out = Command::new(bin())
        .args(["merge", pa.to_str().unwrap(), pb.to_str().unwrap()])
        .args([
            "-o",
            dir.join("m.json").to_str().unwrap(),
            "--format",
            "text",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: connection counts (-c) differ"),
        "{err}"
    );
    assert!(
        !err.contains("seed"),
        "different seeds: no seed warning: {err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("= 400 qps"));
    let m: Value = serde_json::from_slice(&std::fs::read(dir.join("m.json")).unwrap()).unwrap();
    assert_schema_valid(&m);
    assert_eq!(m["instance"], "merged(a,b)");
    assert_eq!(
        u(&m, "settings.connections"),
        u(&a, "settings.connections") + 64
    );
    assert_eq!(u(&m["runs"][0], "hits"), 4000);
    // Each part counted on a server of its own (the embedded one): the counts add up.
    let so = &m["runs"][0]["server_observed"];
    assert_eq!(
        u(so, "delta"),
        u(&a["runs"][0], "server_observed.delta") * 2,
        "{so}"
    );
    assert_eq!(so["matches"], true, "{so}");

    // A merged file merges again; an input without an instance is named by its file name.
    let mut c = file("c", T0, 10.0, 1000);
    c["instance"] = Value::Null;
    c["settings"]["seed"] = json!(9);
    let pc = write(&dir, "gen-9.json", &c);
    let (code, m2, err) = merge(&[&dir.join("m.json"), &pc]);
    assert_eq!(code, 0, "{err}");
    let m2 = m2.unwrap();
    assert_eq!(m2["instance"], "merged(merged(a,b),gen-9)");
    assert_eq!(u(&m2["runs"][0], "hits"), 5000);
    assert_eq!(f(&m2["runs"][0], "qps"), 500.0);
    assert_eq!(
        u(&m2["runs"][0], "latency_us.count"),
        3 * u(&template()["runs"][0], "latency_us.count")
    );

    // Same seed everywhere: the generators sent the same keys.
    let (code, _, err) = merge(&[&pa, &pa]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("same key sequences"), "{err}");
}

/// Two generators of a writing mix (`--instance a` / `b`), each against its own embedded server:
/// every op's merged counts are the sums, its server count the sum of the parts' (each part's
/// server counted only its own), its p99 that of one histogram of both parts' samples.
#[test]
fn per_op_results_of_a_writing_mix_merge_exactly() {
    const MIX: &str = "read=50,update=30,insert=10,delete=10";
    let dir = tmpdir("ops");
    let gen = |instance: &'static str, seed: &'static str, c: &'static str| {
        std::thread::spawn(move || {
            #[rustfmt::skip]
            let args = [
                "-n", "12000", "--mix", MIX, "--keys", "1-100000", "-c", c, "-p", "4",
                "--instance", instance, "--seed", seed,
            ];
            run_json(&args)
        })
    };
    let (ha, hb) = (gen("a", "1", "2"), gen("b", "2", "8"));
    let (ca, a, ea) = ha.join().unwrap();
    let (cb, b, eb) = hb.join().unwrap();
    assert_eq!((ca, cb), (0, 0), "a: {ea}\nb: {eb}");
    let (pa, pb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let (code, m, err) = merge(&[&pa, &pb]);
    assert_eq!(code, 0, "{err}");
    let m = m.unwrap();
    assert_schema_valid(&m);
    assert_eq!(m["settings"]["mix"], MIX);
    let (ra, rb, rm) = (&a["runs"][0], &b["runs"][0], &m["runs"][0]);
    let mut sum = 0;
    for op in ["read", "update", "insert", "delete"] {
        let (oa, ob, om) = (&ra["ops"][op], &rb["ops"][op], &rm["ops"][op]);
        assert!(u(oa, "requests") > 0 && u(ob, "requests") > 0, "{op}");
        for k in ["requests", "hits", "misses", "error_total"] {
            assert_eq!(u(om, k), u(oa, k) + u(ob, k), "{op} {k}");
        }
        sum += u(om, "requests");
        // Each generator's embedded server counted its own requests only: the sum is the
        // merged run's count, and still what loadgen sent.
        let so = &om["server_observed"];
        assert_eq!(
            u(so, "delta"),
            u(&oa["server_observed"], "delta") + u(&ob["server_observed"], "delta"),
            "{op}: {so}"
        );
        assert_eq!(u(so, "delta"), u(om, "requests"), "{op}: {so}");
        assert_eq!(so["matches"], true, "{op}: {so}");
        // Latency: one histogram of both parts' samples, read with the hdrhistogram crate.
        let mut h = raw_hist(oa);
        h.add(raw_hist(ob)).unwrap();
        assert_eq!(h.len(), u(om, "requests"), "{op}: every request timed");
        assert_reads(&om["latency_us"], &h);
        let p99 = h.value_at_quantile(0.99) as f64 / 1000.0;
        assert_eq!(f(om, "latency_us.p99"), p99, "{op}");
    }
    assert_eq!(sum, u(rm, "requests"));
    assert_eq!(u(rm, "requests"), 24_000);

    // A merged file merges again: its ops keep their histograms.
    let pm = write(&dir, "m.json", &m);
    let (code, m2, err) = merge(&[&pm, &pa]);
    assert_eq!(code, 0, "{err}");
    let om2 = &m2.unwrap()["runs"][0]["ops"]["update"];
    let mut h = raw_hist(&rm["ops"]["update"]);
    h.add(raw_hist(&ra["ops"]["update"])).unwrap();
    assert_reads(&om2["latency_us"], &h);

    // Run together against one server, each part's count would hold the other's requests too:
    // the sum would count them twice, so it is left out, with a warning.
    let mut shared = a.clone();
    let so = &mut shared["runs"][0]["ops"]["update"]["server_observed"];
    so["delta"] = json!(u(&ra["ops"]["update"], "requests") + u(&rb["ops"]["update"], "requests"));
    let mut b_same = b.clone();
    b_same["runs"][0]["started_at"] = shared["runs"][0]["started_at"].clone();
    let (ps, pb2) = (
        write(&dir, "s.json", &shared),
        write(&dir, "b2.json", &b_same),
    );
    let (code, m3, err) = merge(&[&ps, &pb2]);
    assert_eq!(code, 0, "{err}");
    let m3 = m3.unwrap();
    assert!(m3["runs"][0]["ops"]["update"]["server_observed"].is_null());
    assert!(!m3["runs"][0]["ops"]["read"]["server_observed"].is_null());
    assert!(
        err.contains("update: the server's count is left out"),
        "{err}"
    );

    // Different mixes (a read-only part included) or transaction sizes are different workloads.
    for other in [
        Some("read=90,update=10"),
        None,
        Some("txn"),
        Some("retries"),
    ] {
        let mut c = b.clone();
        match other {
            Some("txn") => c["settings"]["txn"] = json!(4),
            Some("retries") => c["settings"]["retries"] = json!(3),
            Some(mix) => c["settings"]["mix"] = json!(mix),
            None => drop(c["settings"].as_object_mut().unwrap().remove("mix")),
        }
        let pc = write(&dir, "c.json", &c);
        let (code, m, err) = merge(&[&pa, &pc]);
        assert_eq!(code, 2, "{other:?}: {err}");
        assert!(m.is_none());
        let flag = match other {
            Some("txn") => "--txn",
            Some("retries") => "--retries",
            _ => "--mix",
        };
        assert!(err.contains("cannot merge") && err.contains(flag), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// Java's own HistogramLogProcessor reads the log and finds the run's count and max. Needs java
/// and HdrHistogram's jar (Debian's libhdrhistogram-java, which `scripts/servers.sh tools`
/// installs): under scripts/test.sh a missing one fails the test, a bare `cargo test` skips it.
#[test]
fn interval_log_reads_in_javas_histogram_log_processor() {
    let Some(p) = pair() else { return };
    let jar = std::env::var("HDRHISTOGRAM_JAR")
        .unwrap_or_else(|_| "/usr/share/java/hdrhistogram.jar".into());
    let java_ok = Command::new("java")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !java_ok || !Path::new(&jar).is_file() {
        let why = format!("needs java and {jar} (apt-get install libhdrhistogram-java)");
        assert!(
            !servers_required(),
            "{why}: scripts/servers.sh tools installs them"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let dir = p.dir("pair-java");
    let out_prefix = dir.join("a-java");
    let out = Command::new("java")
        .args(["-cp", &jar, "org.HdrHistogram.HistogramLogProcessor", "-i"])
        .arg(dir.join("a.hlog"))
        .args(["-tag", "memcache", "-outputValueUnitRatio", "1000", "-o"])
        .arg(&out_prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hgrm = std::fs::read_to_string(out_prefix.with_extension("hgrm")).unwrap();
    // #[Max     =      812.543, Total count    =        20000]
    let line = hgrm
        .lines()
        .find(|l| l.starts_with("#[Max"))
        .expect("a summary line");
    let nums: Vec<f64> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|t| t.parse().ok())
        .collect();
    let r = &p.a["runs"][0];
    assert_eq!(nums[1] as u64, u(r, "requests"), "{line}");
    assert_eq!(nums[0], f(r, "latency_us.max"), "{line}");
}

/// Runs one after another: their timelines follow each other on one clock (the second's rows
/// a minute later), never summed as if the load had been concurrent, so the chart and the
/// merged QPS tell the same story.
#[test]
fn timelines_of_runs_one_after_another_follow_each_other() {
    let dir = tmpdir("timeline-sequential");
    let row = |t: f64, qps: f64| {
        json!({"t_s": t, "qps": qps, "hits": qps as u64, "misses": 0, "errors": 0,
               "p50_us": 50.0, "p99_us": 90.0, "in_flight": 2, "connections": 4, "reconnects": 0})
    };
    let mut a = file("a", T0, 2.0, 2000);
    let mut b = file("b", "2026-12-02T17:41:00Z", 2.0, 2000);
    for d in [&mut a, &mut b] {
        d["runs"][0]["timeline"] = json!([row(1.0, 1000.0), row(2.0, 1000.0)]);
    }
    let (pa, pb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let (code, m, err) = merge(&[&pa, &pb]);
    assert_eq!(code, 0, "{err}");
    let m = m.unwrap();
    let r = &m["runs"][0];
    let tl = r["timeline"].as_array().unwrap();
    let ts: Vec<f64> = tl.iter().map(|r| r["t_s"].as_f64().unwrap()).collect();
    assert_eq!(ts, [1.0, 2.0, 61.0, 62.0], "{tl:?}");
    assert!(tl.iter().all(|row| f(row, "qps") == 1000.0), "{tl:?}");
    assert_eq!(
        f(r, "qps"),
        1000.0,
        "total / summed windows, as the chart shows"
    );
    assert!(err.contains("do not overlap"), "{err}");
    assert_schema_valid(&m);
}

/// Two generators on one host with seeds 1 and 2 that ran together against one server: the
/// header counts the host's cores once and names both seeds, the server's CPU is charged once
/// over every request, and `merge -o` writes the HTML report beside its JSON.
#[test]
fn merged_header_cores_seeds_server_cpu_and_html_beside() {
    let dir = tmpdir("header");
    let mut a = file("a", T0, 10.0, 10_000);
    let mut b = file("b", T0, 10.0, 30_000);
    let cpu = json!({"pid": 4242, "process": "memcached", "cpu_s": 2.0, "per_request_us": 1.0,
                     "cpu_bound_qps": 1.0, "note": null});
    for d in [&mut a, &mut b] {
        d["machine"] = json!({"cores": 2, "os": "linux", "hostname": "gen-host"});
        d["runs"][0]["server_cpu"] = cpu.clone();
        d["runs"][0]["warmup_requests"] = json!(0);
    }
    a["settings"]["seed"] = json!(1);
    b["settings"]["seed"] = json!(2);
    let (pa, pb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let (code, m, err) = merge(&[&pa, &pb]);
    assert_eq!(code, 0, "{err}");
    let m = m.unwrap();
    assert_eq!(
        u(&m["machine"], "cores"),
        2,
        "one host's cores, counted once"
    );
    assert_eq!(m["settings"]["seeds"], json!([1, 2]));
    let sc = &m["runs"][0]["server_cpu"];
    assert_eq!(f(sc, "cpu_s"), 2.0, "charged once: {sc}");
    assert_eq!(f(sc, "per_request_us"), 2e6 / 40_000.0, "{sc}");
    assert_schema_valid(&m);

    let out_json = dir.join("merged.json");
    let out = Command::new(bin())
        .args(["merge", pa.to_str().unwrap(), pb.to_str().unwrap(), "-o"])
        .arg(&out_json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(text.contains(", seeds 1,2"), "{text}");
    assert!(
        !text.contains("seed 1,") && !text.contains(", seed 1\n"),
        "{text}"
    );
    let html = std::fs::read_to_string(dir.join("merged.html")).expect("an HTML report beside");
    assert!(html.contains("<html"), "{}", &html[..200.min(html.len())]);
    assert!(err.contains("merged.html"), "{err}");
}
