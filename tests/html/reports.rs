//! Reports of finished runs, merged files, sweeps and SLO searches, as Chromium shows them.

use super::*;

#[test]
fn a_run_of_three_targets_shows_the_json_numbers_in_chromium() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("compare");
    // Three targets: the embedded server twice, and a `loadgen serve` of our own.
    let served = Served::start(100_000);
    let out = lg_line(
        &d,
        &format!(
            "run embedded {} embedded -d 2s --warmup 300ms --interval 500ms -c 4 -t 1 \
             --keys 1-100000 -q",
            served.url
        ),
    );
    let err = ok(&out, "run");
    drop(served);
    // Beside the JSON: the report, named on the "written to" line.
    let mut files: Vec<String> = std::fs::read_dir(d.join("results"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    let stem = files[0].strip_suffix(".html").expect("the report");
    assert!(stem.ends_with("-compare"), "{files:?}");
    assert_eq!(files[1], format!("{stem}.json"));
    assert_eq!(files[2], format!("{stem}.svg"));
    assert!(
        err.contains(&format!(
            "loadgen: result written to results/{stem}.json (report: results/{stem}.html, \
             chart: results/{stem}.svg)"
        )),
        "{err}"
    );
    let page = d.join("results").join(format!("{stem}.html"));
    let doc = read_json(&d.join("results").join(format!("{stem}.json")));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    let dom = open(browser, &page);
    assert_runs_shown(&dom, &doc);
    for i in 0..3 {
        let (tag, _) = element(&dom, &format!("server-{i}"));
        if i != 1 {
            assert_eq!(attr(tag, "data-matches"), "true", "{tag}");
        }
    }
    let (_, settings) = element(&dom, "settings");
    assert!(
        settings.contains("4 connections x 1 in flight, 1 threads, 2s after 0.3s warm-up"),
        "{settings}"
    );
    // One spectrum line per target; QPS and latency over time; bars for the comparison.
    assert_eq!(count(&dom, "spectrum", "<polyline"), 3);
    assert!(count(&dom, "tl-qps", "<polyline") >= 3);
    assert_eq!(
        count(&dom, "tl-lat", "<polyline"),
        6,
        "p50 and p99 per target"
    );
    assert_eq!(count(&dom, "bars-qps", "<rect"), 3);
    assert!(dom.contains("embedded #2"), "repeated kinds are numbered");
    // Hover values: a bar names its run and QPS, the spectrum a percentile and its latency.
    let tip = hover(browser, &page, "bars-qps", Aim::Box(0.5, 0.1));
    let qps =
        loadgen::report::text::thousands(doc["runs"][0]["qps"].as_f64().unwrap().round() as u64);
    assert!(
        tip.starts_with(&format!("embedded #1\n{qps} qps")),
        "{tip:?}"
    );
    let tip = hover(browser, &page, "spectrum", Aim::Line(0.6));
    let (run, value) = tip.split_once('\n').unwrap_or_else(|| panic!("{tip:?}"));
    assert!(
        ["embedded #1", "http", "embedded #2"].contains(&run),
        "{tip:?}"
    );
    assert!(value.contains("%: ") && value.ends_with('s'), "{tip:?}");
}

#[test]
fn a_paced_run_draws_latency_service_time_and_lag() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("paced");
    let json = d.join("paced.json");
    let out = lg_line(
        &d,
        "run -R 2000 -d 1500ms --warmup 200ms -c 4 -t 1 --keys 1-10000 -q -o paced.json",
    );
    ok(&out, "paced run");
    let doc = read_json(&json);
    let dom = open(browser, &d.join("paced.html"));
    assert_runs_shown(&dom, &doc);
    // The histogram's spectrum, and service time and lag from their percentiles.
    assert_eq!(count(&dom, "spectrum", "<polyline"), 3);
    assert!(
        dom.contains("service time") && dom.contains(">lag<"),
        "legend"
    );
    assert!(dom.contains("asked 2,000/s"), "the rate row");
}

#[test]
fn a_runs_cis_are_in_its_card_and_bands_on_its_charts() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("cis");
    let out = lg_line(
        &d,
        "run -d 2s --warmup 200ms --interval 100ms -c 4 -t 1 --keys 1-10000 -q -o ci.json",
    );
    ok(&out, "run");
    let doc = read_json(&d.join("ci.json"));
    let p = &doc["runs"][0]["precision"];
    let dom = open(browser, &d.join("ci.html"));
    let (tag, _) = element(&dom, "ci-0");
    for bound in ["low", "high"] {
        let shown: f64 = attr(tag, &format!("data-qps-{bound}")).parse().unwrap();
        assert_eq!(shown, p["qps"][bound].as_f64().unwrap(), "{tag}");
    }
    let (qps, _) = element(&dom, "qps-0");
    let after = &dom[dom.find(qps).unwrap() + qps.len()..];
    assert!(after.contains(r#"<span class="note"> ±"#), "{after}");
    // One band for the QPS; p50's and p99's where they have one.
    assert_eq!(count(&dom, "tl-qps", r#"class="band""#), 1);
    let lat = ["p50", "p99"]
        .iter()
        .filter(|k| p[**k]["low"].is_number())
        .count();
    assert!(lat >= 1, "{p}");
    assert_eq!(count(&dom, "tl-lat", r#"class="band""#), lat);
    // A run too short for a CI says why instead.
    let out = lg_line(
        &d,
        "run -d 1s --warmup 200ms -c 4 -t 1 --keys 1-10000 -q -o short.json",
    );
    ok(&out, "short run");
    let dom = open(browser, &d.join("short.html"));
    let (_, text) = element(&dom, "ci-0");
    assert!(text.starts_with("none: 0 whole intervals"), "{text}");
    assert_eq!(count(&dom, "tl-qps", r#"class="band""#), 0);
}

#[test]
fn report_renders_a_merged_file_a_sweep_and_an_slo_search() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("report");
    let short = "-d 1s --warmup 200ms -c 2 -t 1 --keys 1-10000 -q";
    for name in ["a", "b"] {
        let line = format!("run -o {name}.json --instance {name} {short}");
        ok(&lg_line(&d, &line), "run");
    }
    ok(&lg_line(&d, "merge a.json b.json -o m.json"), "merge");
    // merge -o writes the page beside its JSON, as a run does; `report` writes it again.
    assert!(
        d.join("m.html").exists(),
        "merge writes its HTML report beside m.json"
    );
    std::fs::remove_file(d.join("m.html")).unwrap();
    let err = ok(&lg(&d, &["report", "m.json"]), "report");
    assert_eq!(err, "loadgen: report written to m.html\n");
    let merged = read_json(&d.join("m.json"));
    assert_eq!(merged["instance"], "merged(a,b)");
    let html = std::fs::read_to_string(d.join("m.html")).unwrap();
    assert_self_contained(&html);
    let dom = open(browser, &d.join("m.html"));
    assert_runs_shown(&dom, &merged);
    assert!(dom.contains("merged(a,b)"));

    // A sweep: its page is written beside the JSON by the run, and again by `report -o`.
    let line = format!("run --sweep 1,2,4 -o s.json {short}");
    ok(&lg_line(&d, &line), "sweep");
    assert!(
        d.join("s.html").exists(),
        "the sweep's page beside its JSON"
    );
    ok(&lg(&d, &["report", "s.json", "-o", "s2.html"]), "report -o");
    let sweep = read_json(&d.join("s.json"));
    let dom = open(browser, &d.join("s2.html"));
    let sw = &sweep["sweeps"][0];
    let (tag, _) = element(&dom, "sweep-0-peak");
    assert_eq!(
        attr(tag, "data-value").parse::<f64>().ok(),
        sw["peak_qps"].as_f64()
    );
    assert_eq!(
        attr(tag, "data-connections"),
        sw["peak_connections"].to_string()
    );
    for (j, st) in sw["steps"].as_array().unwrap().iter().enumerate() {
        assert_shown(&dom, &format!("sweep-0-{j}-qps"), &st["qps"]);
        assert_shown(&dom, &format!("sweep-0-{j}-p99"), &st["p99_us"]);
        assert_verdict_shown(&dom, &format!("sweep-0-{j}-verdict"), &st["verdict"]);
    }
    assert_verdict_shown(&dom, "sweep-0-verdict", &sw["verdict"]);
    assert_eq!(
        count(&dom, "sw-qps", "<circle cx"),
        3 + 1,
        "three steps and the peak ring"
    );

    // An SLO search against a server of known service time: every step in the table and chart.
    let served = Served::start_with(10_000, &["--delay", "2ms"]);
    let out = lg_line(
        &d,
        &format!(
            "run {} --slo p99=20ms -d 300ms --warmup 100ms --keys 1-10000 -c 4 -p 16 -q \
             -o slo.json",
            served.url
        ),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{err}");
    drop(served);
    let slo = read_json(&d.join("slo.json"));
    let dom = open(browser, &d.join("slo.html"));
    let steps = slo["slo"][0]["steps"].as_array().unwrap();
    assert!(steps.len() >= 3, "{slo}");
    for (j, st) in steps.iter().enumerate() {
        assert_shown(&dom, &format!("slo-0-{j}-qps"), &st["achieved_qps"]);
        assert_verdict_shown(&dom, &format!("slo-0-{j}-verdict"), &st["verdict"]);
    }
    assert_eq!(count(&dom, "slo-0", "<circle cx"), steps.len());
    assert!(dom.contains("bound 20.00ms"));
    // The bound's label sits in the legend, never over the points in the chart.
    assert_eq!(count(&dom, "slo-0", "bound"), 0);
    assert_eq!(count(&dom, "slo-0", r#"class="hline""#), 1);

    // Steps all near 11 ms under a 20 ms bound: the log axis spans the data, not the decade
    // 10-100 ms that squashed every point along its bottom.
    let mut tight = slo.clone();
    for (j, st) in tight["slo"][0]["steps"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        st["percentile_us"] = serde_json::json!(10_500.0 + 150.0 * j as f64);
    }
    std::fs::write(d.join("tight.json"), serde_json::to_vec(&tight).unwrap()).unwrap();
    ok(
        &lg_line(&d, "report tight.json -o tight.html"),
        "report tight.json",
    );
    let dom = open(browser, &d.join("tight.html"));
    let at = dom.find(r#"id="c-slo-0""#).unwrap();
    let svg = &dom[at..at + dom[at..].find("</svg>").unwrap()];
    let nums = |key: &str| -> Vec<f64> {
        svg.match_indices(key)
            .map(|(i, _)| {
                let v = &svg[i + key.len()..];
                v[..v.find('"').unwrap()].parse().unwrap()
            })
            .collect()
    };
    let spread = |v: &[f64]| {
        v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min)
    };
    // The plot's height: the vertical grid lines run from its top to its bottom.
    let mut ys = nums(r#" y1=""#);
    ys.extend(nums(r#" y2=""#));
    let (cy, plot) = (nums(r#" cy=""#), spread(&ys));
    let n = tight["slo"][0]["steps"].as_array().unwrap().len() as f64;
    let decades = ((10_500.0 + 150.0 * (n - 1.0)) / 10_500.0f64).log10();
    // On a whole-decade axis the points take `decades` of the height; on the data's range
    // (with the bound) several times that.
    assert!(
        spread(&cy) / plot > 2.0 * decades,
        "points span {} of {plot} px: {svg}",
        spread(&cy)
    );
}

/// A mix that writes (and multi-gets): the per-op table shows each op's numbers as the JSON has
/// them, the server's count beside loadgen's, and the durability the server reported; a
/// read-only run's page has neither.
#[test]
fn a_writing_mix_shows_each_op_and_the_durability_as_the_json_has_them() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("mix");
    const MIX: &str = "read=40,update=30,insert=10,delete=10,mget:5=10";
    let line = format!("run -n 20000 --mix {MIX} --keys 1-100000 -c 4 -p 4 -t 1 -q -o mix.json");
    ok(&lg_line(&d, &line), "mix run");
    let doc = read_json(&d.join("mix.json"));
    let html = std::fs::read_to_string(d.join("mix.html")).unwrap();
    assert_self_contained(&html);
    let dom = open(browser, &d.join("mix.html"));
    assert_runs_shown(&dom, &doc);
    let ops = doc["runs"][0]["ops"].as_object().unwrap();
    assert_eq!(ops.len(), 5, "{ops:?}");
    for (op, o) in ops {
        let id = |k: &str| format!("op-0-{op}-{k}");
        for k in ["requests", "qps", "hits", "misses"] {
            assert_shown(&dom, &id(k), &o[k]);
        }
        assert_shown(&dom, &id("errors"), &o["error_total"]);
        for k in ["p50", "p99", "p999"] {
            assert_shown(&dom, &id(k), &o["latency_us"][k]);
        }
        // The server's count, and loadgen's beside it.
        let so = &o["server_observed"];
        assert_shown(&dom, &id("server"), &so["delta"]);
        let (tag, _) = element(&dom, &id("server"));
        assert_eq!(attr(tag, "data-expected"), so["expected"].to_string());
        assert_eq!(attr(tag, "data-matches"), "true", "{tag}");
    }
    // Rows in the mix's order, one per op.
    let table = &dom[dom.find(r#"id="ops-0""#).unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let rows: Vec<&str> = table
        .split("<tr><td>")
        .skip(1)
        .map(|r| &r[..r.find('<').unwrap()])
        .collect();
    assert_eq!(rows, ["read", "update", "insert", "delete", "mget"]);
    let (_, settings) = element(&dom, "settings");
    assert!(settings.contains(&format!(", mix {MIX}")), "{settings}");
    // The embedded server has no durability settings: the ones a PostgreSQL run reports.
    let mut pg = doc.clone();
    pg["runs"][0]["durability"] = serde_json::json!({"synchronous_commit": "off", "fsync": "on",
        "wal_sync_method": "fdatasync"});
    // And the error kinds of writes, in the card and in the op's row.
    for path in ["/runs/0", "/runs/0/ops/update"] {
        let v = pg.pointer_mut(path).unwrap();
        v["errors"]["deadlock"] = serde_json::json!(2);
        v["error_total"] = serde_json::json!(u(v, "error_total") + 2);
        v["requests"] = serde_json::json!(u(v, "requests") + 2);
    }
    std::fs::write(d.join("pg.json"), serde_json::to_vec(&pg).unwrap()).unwrap();
    ok(&lg(&d, &["report", "pg.json"]), "report");
    let dom = open(browser, &d.join("pg.html"));
    let (_, errors) = element(&dom, "errors-0");
    assert!(errors.ends_with("(deadlock 2)"), "{errors}");
    assert_shown(&dom, "op-0-update-errors", &serde_json::json!(2));
    let after = &dom[dom.find(r#"id="op-0-update-errors""#).unwrap()..];
    assert!(after[..after.find("</td>").unwrap()].contains("(deadlock 2)"));
    let want = "fsync=on, synchronous_commit=off, wal_sync_method=fdatasync";
    assert_eq!(element(&dom, "durability-0").1, want);
    assert_eq!(
        element(&dom, "ops-0-durability").1,
        format!("durability {want}")
    );
    // A read-only run: no per-op table, no durability.
    ok(
        &lg_line(&d, "run -n 2000 --keys 1-1000 -c 2 -t 1 -q -o ro.json"),
        "read-only run",
    );
    let dom = open(browser, &d.join("ro.html"));
    assert_runs_shown(&dom, &read_json(&d.join("ro.json")));
    // What the script drew (the page also holds the script's own text).
    let drawn = &dom[dom.find(r#"<main id="report">"#).unwrap()..dom.find("</main>").unwrap()];
    for absent in ["Per op", r#"id="ops-0""#, "durability", ", mix "] {
        assert!(!drawn.contains(absent), "{absent} on a read-only page");
    }
}

#[test]
fn report_reads_the_reference_file_of_an_earlier_version() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("reference");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("results/reference-compare.json");
    let page = d.join("reference.html");
    ok(
        &lg(
            &d,
            &[
                "report",
                src.to_str().unwrap(),
                "-o",
                page.to_str().unwrap(),
            ],
        ),
        "report",
    );
    let doc = read_json(&src);
    let dom = open(browser, &page);
    assert_runs_shown(&dom, &doc);
    // The labels scripts/compare.sh gave the runs name them.
    assert!(dom.contains("HandlerSocket (2 conns x 16)"));
    assert_eq!(
        count(&dom, "spectrum", "<polyline"),
        doc["runs"].as_array().unwrap().len()
    );
}

#[test]
fn a_password_in_a_url_never_reaches_the_page() {
    let d = artifacts("secret");
    let served = Served::start(1000);
    const PW: &str = "Pw7htmlS3cretQz";
    const TOKEN: &str = "Tk2htmlS3cretWv";
    let url = served
        .url
        .replacen("http://", &format!("http://lg:{PW}@"), 1)
        + &format!("?token={TOKEN}&format=raw");
    let out = lg_line(
        &d,
        &format!("run {url} -n 2000 -c 2 -t 1 --keys 1-1000 -q -o r.json"),
    );
    ok(&out, "run");
    let html = std::fs::read_to_string(d.join("r.html")).unwrap();
    assert!(html.contains("lg:***@127.0.0.1") && html.contains("token=***"));
    // A file as an older loadgen wrote it, the password in: `report` redacts it too.
    let mut old = read_json(&d.join("r.json"));
    old["runs"][0]["target"] = url.clone().into();
    old["runs"][0]["error_samples"] = serde_json::json!([format!("io: lost {url}")]);
    std::fs::write(d.join("old.json"), serde_json::to_vec(&old).unwrap()).unwrap();
    ok(&lg(&d, &["report", "old.json"]), "report");
    let old_html = std::fs::read_to_string(d.join("old.html")).unwrap();
    for page in [&html, &old_html] {
        assert!(
            !page.contains(PW) && !page.contains(TOKEN),
            "a secret in the page"
        );
    }
    assert!(old_html.contains("io: lost http://lg:***@127.0.0.1"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let d = artifacts("bad");
    std::fs::write(d.join("not.json"), "this is not JSON").unwrap();
    std::fs::write(d.join("other.json"), r#"{"hello": "world"}"#).unwrap();
    std::fs::create_dir(d.join("dir.html")).unwrap();
    std::fs::write(d.join("r.json"), "{}").unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["report", "missing.json"], "cannot read missing.json"),
        (
            &["report", "not.json"],
            "not.json is not a loadgen result file",
        ),
        (
            &["report", "other.json"],
            "other.json is not a loadgen result file",
        ),
        (&["report", "--", "-o"], "cannot read -o"),
    ];
    for (args, want) in cases {
        let out = lg(&d, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("loadgen: {want}")),
            "{args:?}: {err}"
        );
    }
    // A result file, but a directory to write to.
    let out = lg_line(&d, "run -n 200 -c 1 -t 1 -q -o r.json");
    ok(&out, "run");
    let out = lg(&d, &["report", "r.json", "-o", "dir.html"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err, "loadgen: cannot write dir.html: is a directory\n");
    let _ = std::fs::remove_dir_all(&d);
}

/// A memcached pool's report: each server on its own line, with its count, share and latency.
#[test]
fn a_pools_report_shows_each_server() {
    let Some(browser) = chromium() else { return };
    let Some(url) = server("LOADGEN_MC_URL") else {
        return;
    };
    let d = artifacts("pool");
    let (pool, _, ports) = memcached_pool(&url, 31, "htmlpool:", "600");
    let json = d.join("pool.json");
    let line = format!(
        "run {pool} -n 3000 -c 4 --keys 1-600 -q -o {}",
        json.display()
    );
    let out = lg_line(&d, &line);
    pool_down(&ports);
    ok(&out, "run");
    let doc = read_json(&json);
    assert_eq!(
        doc["runs"][0]["server_observed"]["members"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    let dom = open(browser, &json.with_extension("html"));
    assert_runs_shown(&dom, &doc);
}
