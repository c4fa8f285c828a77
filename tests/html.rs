//! The HTML report of real runs, opened in headless Chromium (Debian's `chromium`, installed by
//! scripts/test.sh): the page draws without a console message, references nothing outside the
//! file (its CSP would make the browser refuse, and log, any request), and the numbers the
//! browser shows equal the result JSON's. Screenshots at 1280 and 390 px wide are kept under
//! the temp dir as test artifacts (paths printed). Runs use the embedded server (and a
//! `loadgen serve` of our own), so only Chromium is needed. The live page of `--metrics` is
//! opened during a run and checked against `/metrics` at the same interval end.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A fresh directory for one test's files, kept afterwards for its screenshots.
fn artifacts(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("loadgen-html-{test}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The browser, or None (the test skipped with a note) when it is not installed and the
/// servers are not required; under scripts/test.sh (LOADGEN_REQUIRE_SERVERS) a missing browser fails.
fn chromium() -> Option<&'static str> {
    for b in ["chromium", "chromium-browser"] {
        if Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(b);
        }
    }
    if servers_required() {
        panic!("chromium is not installed: scripts/test.sh installs it (apt-get install chromium)");
    }
    eprintln!("skipped: chromium is not installed (scripts/test.sh installs it)");
    None
}

fn lg(cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("loadgen runs")
}

/// loadgen with a command line of words separated by spaces (URLs have none).
fn lg_line(cwd: &Path, line: &str) -> Output {
    lg(cwd, &line.split_whitespace().collect::<Vec<_>>())
}

fn ok(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{what}: {err}");
    err
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// Chromium, headless, with a profile of its own under `dir`; at most 90 s.
fn browse(browser: &str, dir: &Path, args: &[&str], page: &Path) -> Output {
    browse_url(browser, dir, args, &format!("file://{}", page.display()))
}

fn browse_url(browser: &str, dir: &Path, args: &[&str], url: &str) -> Output {
    Command::new("timeout")
        .arg("90")
        .arg(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", dir.join("chromium-profile").display()),
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs")
}

/// Opens `page` in Chromium: the DOM after its script ran, checked for a clean draw, and a
/// screenshot at each width (kept beside the page, paths printed).
fn open(browser: &str, page: &Path) -> String {
    let dir = page.parent().unwrap();
    let stem = page.file_stem().unwrap().to_string_lossy().into_owned();
    open_url(
        browser,
        dir,
        &format!("file://{}", page.display()),
        &stem,
        &[],
    )
}

/// As `open`, for any URL; screenshots go to `dir` as `<stem>-<width>.png`. `extra`: more
/// Chromium arguments (a virtual time budget for a page that keeps fetching).
fn open_url(browser: &str, dir: &Path, url: &str, stem: &str, extra: &[&str]) -> String {
    let page = url;
    let mut args = vec!["--enable-logging=stderr", "--v=0", "--dump-dom"];
    args.extend_from_slice(extra);
    let out = browse_url(browser, dir, &args, url);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "chromium: {log}");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    // Every console message (a script error, a request the CSP refused) is logged as CONSOLE.
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "{page}: console messages: {console:#?}");
    let body = tag_of(&dom, "<body").unwrap_or_else(|| panic!("no body: {dom}"));
    assert!(
        !body.contains("data-error"),
        "the page failed to draw: {body}"
    );
    assert!(
        body.contains(r#"data-ready="1""#),
        "the page did not finish: {body}"
    );
    for (w, h) in [(1280, 900), (390, 844)] {
        let png = dir.join(format!("{stem}-{w}.png"));
        let mut args = vec![
            format!("--screenshot={}", png.display()),
            format!("--window-size={w},{h}"),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = browse_url(browser, dir, &args, url);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let len = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
        assert!(
            len > 10_000,
            "screenshot {} is empty ({len} bytes)",
            png.display()
        );
        println!("screenshot: {}", png.display());
    }
    dom
}

/// What the hover box says when the pointer rests at (`fx`, `fy`) of chart `id`'s width and
/// height: the page in a frame of a page of our own, which sends the pointer event.
/// Where the pointer goes: a fraction of the chart's box, or the point of the chart's first
/// line at this fraction of its points (a box position can miss a line the data put elsewhere).
enum Aim {
    Box(f64, f64),
    Line(f64),
}

fn hover(browser: &str, page: &Path, id: &str, aim: Aim) -> String {
    let at = match aim {
        Aim::Box(fx, fy) => format!("[r.left + r.width * {fx}, r.top + r.height * {fy}]"),
        Aim::Line(f) => format!(
            "(() => {{ const p = svg.querySelector('polyline').getAttribute('points').trim().split(/\\s+/); \
             const [x, y] = p[Math.floor((p.length - 1) * {f})].split(',').map(Number); \
             const vb = svg.viewBox.baseVal; \
             return [r.left + x * r.width / vb.width, r.top + y * r.height / vb.height]; }})()"
        ),
    };
    let dir = page.parent().unwrap();
    let probe = dir.join("hover-probe.html");
    std::fs::write(
        &probe,
        format!(
            r#"<!doctype html><body><iframe id="f" src="{}" style="width:1280px;height:900px"></iframe>
<pre id="out"></pre><script>
document.getElementById('f').onload = function () {{
  const d = this.contentDocument, svg = d.getElementById('c-{id}').querySelector('svg');
  svg.scrollIntoView();
  const r = svg.getBoundingClientRect(), at = {at};
  svg.dispatchEvent(new this.contentWindow.PointerEvent('pointermove',
    {{ clientX: at[0], clientY: at[1], bubbles: true }}));
  const tip = d.getElementById('tip');
  document.getElementById('out').textContent = tip.hidden ? 'hidden' : tip.textContent;
}};
</script></body>"#,
            page.file_name().unwrap().to_string_lossy()
        ),
    )
    .unwrap();
    let out = browse(
        browser,
        dir,
        &["--allow-file-access-from-files", "--dump-dom"],
        &probe,
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let (_, text) = element(&dom, "out");
    text.replace("&amp;", "&")
}

/// The start tag that begins with `start` (`<body`), up to its `>`.
fn tag_of<'a>(dom: &'a str, start: &str) -> Option<&'a str> {
    let i = dom.find(start)?;
    Some(&dom[i..i + dom[i..].find('>')? + 1])
}

/// The element with `id`: its start tag and its text up to the next tag.
fn element<'a>(dom: &'a str, id: &str) -> (&'a str, &'a str) {
    let at = dom
        .find(&format!(r#" id="{id}""#))
        .unwrap_or_else(|| panic!("no element #{id} in the page"));
    let open = dom[..at].rfind('<').unwrap();
    let close = at + dom[at..].find('>').unwrap();
    let text_end = close + 1 + dom[close + 1..].find('<').unwrap();
    (&dom[open..=close], &dom[close + 1..text_end])
}

fn attr(tag: &str, name: &str) -> String {
    let key = format!(r#" {name}=""#);
    let i = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    tag[i..i + tag[i..].find('"').unwrap()].to_string()
}

/// A sweep's or a step's verdict as the JSON has it: valid or not, and a mark that says so.
fn assert_verdict_shown(dom: &str, id: &str, v: &Value) {
    let (tag, text) = element(dom, id);
    let valid = v["valid"]
        .as_bool()
        .unwrap_or_else(|| panic!("no verdict: {v}"));
    assert_eq!(attr(tag, "data-valid"), valid.to_string(), "#{id}: {tag}");
    assert_eq!(text.contains("NOT VALID"), !valid, "#{id}: {text}");
}

/// The number the page holds for element `id` equals the JSON's, and so does the text shown.
fn assert_shown(dom: &str, id: &str, want: &Value) {
    let (tag, text) = element(dom, id);
    let got: f64 = attr(tag, "data-value").parse().unwrap();
    let v = want.as_f64().unwrap();
    assert!((got - v).abs() <= 1e-9 * v.abs(), "#{id}: {tag}, JSON {v}");
    let shown: f64 = text
        .trim_end_matches(['s', 'µ', 'm', '/'])
        .replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("#{id} shows {text:?}"));
    let unit = if text.ends_with("ms") {
        1e3
    } else if text.ends_with("µs") || text.ends_with("/s") || !text.ends_with('s') {
        1.0
    } else {
        1e6
    };
    assert!(
        (shown * unit - v).abs() <= 0.005 * v.abs() + 0.51,
        "#{id} shows {text:?} for {v}"
    );
}

/// Per run: QPS, p99 and hits as the JSON has them; the server count's verdict.
fn assert_runs_shown(dom: &str, doc: &Value) {
    for (i, r) in doc["runs"].as_array().unwrap().iter().enumerate() {
        assert_shown(dom, &format!("qps-{i}"), &r["qps"]);
        assert_shown(dom, &format!("p99-{i}"), &r["latency_us"]["p99"]);
        assert_shown(dom, &format!("hits-{i}"), &r["hits"]);
        assert_shown(dom, &format!("errors-{i}"), &r["error_total"]);
        // The verdict's badge says what the JSON says.
        if let Some(valid) = r["verdict"]["valid"].as_bool() {
            let (tag, text) = element(dom, &format!("verdict-{i}"));
            assert_eq!(attr(tag, "data-valid"), valid.to_string(), "{tag}");
            let want = if valid { "valid: " } else { "NOT VALID: " };
            assert!(text.starts_with(want), "#verdict-{i}: {text}");
            for reason in r["verdict"]["reasons"].as_array().unwrap() {
                let head = reason.as_str().unwrap().split(':').next().unwrap();
                assert!(text.contains(head), "#verdict-{i} lacks {head}: {text}");
            }
        }
        // The server's CPU per request, where it was measured (the embedded server always is).
        if let Some(us) = r["server_cpu"]["per_request_us"].as_f64() {
            let (tag, _) = element(dom, &format!("server-cpu-{i}"));
            let got: f64 = attr(tag, "data-value").parse().unwrap();
            assert!((got - us).abs() <= 1e-9 * us, "{tag} vs {us}");
        }
        // The connect row says how the connections went: TLS or plain, as the text report does.
        if r["connected"].as_u64().unwrap_or(0) > 0 {
            let (_, over) = element(dom, &format!("over-{i}"));
            match r["tls"]["version"].as_str() {
                Some(v) => assert!(over.contains(v), "#over-{i}: {over}"),
                None => assert!(over.ends_with(", plain"), "#over-{i}: {over}"),
            }
        }
        let so = &r["server_observed"];
        if so["delta"].is_u64() {
            let (tag, _) = element(dom, &format!("server-{i}"));
            assert_eq!(
                attr(tag, "data-matches"),
                so["matches"].to_string(),
                "{tag}"
            );
        }
    }
}

/// Outside its data, the page names no URL and loads nothing; the CSP forbids any request.
fn assert_self_contained(html: &str) {
    assert_no_url_outside(html, "data");
    assert!(html.contains(
        r#"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">"#
    ));
}

/// Outside the JSON element `id`, the page names no URL and refers to nothing to load.
fn assert_no_url_outside(html: &str, id: &str) {
    let start = html
        .find(&format!(r#"<script type="application/json" id="{id}">"#))
        .unwrap();
    let end = start + html[start..].find("</script>").unwrap();
    let rest = format!("{}{}", &html[..start], &html[end..]);
    assert!(!rest.contains("://"), "a URL outside the data");
    for bad in [
        "src=", "href=", "url(", "@import", "<link", "<img", "<iframe",
    ] {
        assert!(!rest.contains(bad), "{bad} in the page");
    }
}

fn count(dom: &str, chart: &str, what: &str) -> usize {
    let at = dom
        .find(&format!(r#"id="c-{chart}""#))
        .unwrap_or_else(|| panic!("no chart {chart}"));
    let end = at + dom[at..].find("</svg>").unwrap();
    dom[at..end].matches(what).count()
}

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

/// A mix that writes: the per-op table shows each op's numbers as the JSON has them, the server's
/// count beside loadgen's, and the durability the server reported; a read-only run's page has
/// neither.
#[test]
fn a_writing_mix_shows_each_op_and_the_durability_as_the_json_has_them() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("mix");
    const MIX: &str = "read=50,update=30,insert=10,delete=10";
    let line = format!("run -n 20000 --mix {MIX} --keys 1-100000 -c 4 -p 4 -t 1 -q -o mix.json");
    ok(&lg_line(&d, &line), "mix run");
    let doc = read_json(&d.join("mix.json"));
    let html = std::fs::read_to_string(d.join("mix.html")).unwrap();
    assert_self_contained(&html);
    let dom = open(browser, &d.join("mix.html"));
    assert_runs_shown(&dom, &doc);
    let ops = doc["runs"][0]["ops"].as_object().unwrap();
    assert_eq!(ops.len(), 4, "{ops:?}");
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
    assert_eq!(rows, ["read", "update", "insert", "delete"]);
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

/// A loadgen of the test's own, killed if the test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The requests (every series summed) and the qps gauge of one `/metrics` text.
fn scraped(text: &str) -> Option<(f64, f64)> {
    let (mut requests, mut qps) = (0.0, None);
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, v)) = l.rsplit_once(' ') else {
            continue;
        };
        if series.starts_with("loadgen_requests_total{") {
            requests += v.parse::<f64>().ok()?;
        } else if series.starts_with("loadgen_qps{") {
            qps = Some(v.parse::<f64>().ok()?);
        }
    }
    Some((requests, qps?))
}

/// One scrape of `/metrics`: when it was asked and answered, its requests and qps.
type Scrape = (Instant, Instant, f64, f64);

/// Scrapes `/metrics` every 50 ms until `stop`. Its counters are current when scraped, so
/// each scrape is kept with the times it was asked and answered.
fn record_metrics(addr: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Scrape>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let asked = Instant::now();
            let r = http_request(&addr, "GET", "/metrics", "");
            if let Some((requests, qps)) = r.as_ref().and_then(|r| scraped(&r.body)) {
                seen.push((asked, Instant::now(), requests, qps));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        seen
    })
}

/// `/live.json` once it satisfies `ready` (panics after `limit`).
fn live_json_until(addr: &str, limit: Duration, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(r) = http_request(addr, "GET", "/live.json", "") {
            let v: Value = serde_json::from_str(&r.body).expect("live.json is JSON");
            if ready(&v) {
                return v;
            }
            last = Some(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("live.json never got ready in {limit:?}; last: {last:?}");
}

/// A server that holds one HTTP request open until told, then answers it: a page that loads
/// from it has its load event (and so Chromium's --dump-dom) held back until then, in real time.
fn held_open() -> (
    u16,
    std::sync::mpsc::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 2048];
        let _ = s.read(&mut buf);
        let _ = rx.recv_timeout(Duration::from_secs(60));
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/javascript\r\nContent-Length: 0\r\n\
              Connection: close\r\n\r\n",
        );
    });
    (port, tx, h)
}

/// The number the live page shows in element `id`, and the interval end it is of.
fn live_value(dom: &str, id: &str) -> (f64, i64) {
    let (tag, _) = element(dom, id);
    (
        attr(tag, "data-value").parse().unwrap(),
        attr(tag, "data-at").parse().unwrap(),
    )
}

#[test]
fn the_live_page_shows_what_metrics_says_then_the_report() {
    let Some(browser) = chromium() else { return };
    let d = artifacts("live");
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(bin())
        .current_dir(&d)
        .args([
            "run",
            "-R",
            "2000",
            "-d",
            "8s",
            "--warmup",
            "500ms",
            "-c",
            "4",
            "-t",
            "1",
            "--keys",
            "1-10000",
            "-q",
            "-o",
            "run.json",
            "--metrics",
            &addr,
            "--metrics-linger",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen starts");
    let mut run = Running(child);
    let stop = Arc::new(AtomicBool::new(false));
    let recorder = record_metrics(addr.clone(), stop.clone());
    // Two timeline rows, so the charts have lines to draw.
    live_json_until(&addr, Duration::from_secs(30), |v| {
        v["targets"][0]["rows"]["t_s"]
            .as_array()
            .is_some_and(|r| r.len() >= 2)
    });

    // The page as served: its CSP lets it fetch from its own origin only, it names no URL
    // outside its data, and the target is shown as the report shows it.
    let served = http_get(&addr, "/");
    assert_eq!(served.status, 200);
    assert!(
        served.headers.contains(
            "content-security-policy: default-src 'none'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; img-src data:; connect-src 'self'\r\n"
        ),
        "{}",
        served.headers
    );
    assert_no_url_outside(&served.body, "live");
    let url = format!("http://{addr}/");
    let opened = Instant::now();
    let dom = open_url(browser, &d, &url, "live", &["--virtual-time-budget=3000"]);
    let closed = Instant::now();
    let (tag, _) = element(&dom, "live-status");
    let polls: u32 = attr(tag, "data-polls").parse().unwrap();
    assert!(polls >= 1, "the page never fetched live.json: {tag}");
    let (requests, at) = live_value(&dom, "live-requests-0");
    let (qps, qps_at) = live_value(&dom, "live-qps-0");
    assert_eq!(qps_at, at);
    // The paced rate, as Prometheus' rate() is checked against it in tests/metrics.rs.
    assert!(
        (qps - 2000.0).abs() <= 100.0,
        "last-interval QPS {qps} for -R 2000"
    );
    assert!(requests > 0.0, "{requests}");
    assert!(count(&dom, "tl-qps", "<polyline") >= 1);
    assert_eq!(count(&dom, "tl-lat", "<polyline"), 2, "p50 and p99");

    // A page left open until the run ends reloads into the report: a probe page frames it
    // and counts the frame's loads, its own load held back (in real time) until after the end.
    let (held, release, holder) = held_open();
    let probe = d.join("reload-probe.html");
    std::fs::write(
        &probe,
        format!(
            r#"<!doctype html><body><pre id="loads">0</pre><iframe id="f" src="{url}"
style="width:1280px;height:900px"></iframe><script>
let n = 0;
document.getElementById('f').addEventListener('load', () => {{
  n += 1;
  document.getElementById('loads').textContent = String(n);
}});
</script><script src="http://127.0.0.1:{held}/held.js"></script></body>"#
        ),
    )
    .unwrap();
    let (b, dir, p) = (browser.to_string(), d.clone(), probe.clone());
    let prober = std::thread::spawn(move || browse(&b, &dir, &["--dump-dom"], &p));

    // The run ends; the server lingers with the report.
    let done = live_json_until(&addr, Duration::from_secs(40), |v| v["done"] == true);
    // Past the next poll of the framed page, then the probe may finish loading.
    std::thread::sleep(Duration::from_millis(2500));
    let _ = release.send(());
    holder.join().unwrap();
    let out = prober.join().unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let (_, loads) = element(&dom, "loads");
    assert_eq!(
        loads, "2",
        "the open live page did not reload into the report"
    );
    let doc = read_json(&d.join("run.json"));
    stop.store(true, Ordering::Relaxed);
    let seen = recorder.join().expect("the scrapes were read");
    // The page and /metrics read the same live counters: every scrape answered before the page
    // was opened counted no more than the page shows, every one asked after it closed no less,
    // and the page's qps is a value the gauge had.
    let earlier: Vec<f64> = seen.iter().filter(|s| s.1 <= opened).map(|s| s.2).collect();
    let later: Vec<f64> = seen.iter().filter(|s| s.0 >= closed).map(|s| s.2).collect();
    assert!(!earlier.is_empty() && !later.is_empty(), "{seen:?}");
    assert!(
        earlier.iter().all(|&r| r <= requests) && later.iter().all(|&r| r >= requests),
        "page {requests} requests between scrapes {earlier:?} and {later:?}"
    );
    assert!(
        seen.iter().any(|s| s.3 == qps),
        "page qps {qps} never on /metrics: {seen:?}"
    );
    // Once the run has ended, the live rows are the result's timeline, row for row.
    let rows = &done["targets"][0]["rows"];
    let timeline = doc["runs"][0]["timeline"].as_array().unwrap();
    assert_eq!(rows["t_s"].as_array().unwrap().len(), timeline.len());
    for (k, t) in timeline.iter().enumerate() {
        for f in ["t_s", "qps", "hits", "errors", "p50_us", "p99_us"] {
            assert_eq!(rows[f][k], t[f], "row {k} {f}");
        }
    }

    let r = &doc["runs"][0];
    // Every request: the counted ones and the warm-up's, on /metrics and in live.json alike.
    let metrics = http_get(&addr, "/metrics");
    let (total, _) = scraped(&metrics.body).unwrap();
    assert_eq!(total as u64, u(r, "requests") + u(r, "warmup_requests"));
    assert_eq!(done["targets"][0]["requests"].as_f64(), Some(total));
    // `/` is now the report written beside the result, and shows its numbers.
    let page = http_get(&addr, "/");
    let written = std::fs::read_to_string(d.join("run.html")).unwrap();
    assert!(page.body == written, "/ is not the written report");
    assert!(
        page.headers.contains(
            "content-security-policy: default-src 'none'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; img-src data:\r\n"
        ),
        "{}",
        page.headers
    );
    let dom = open_url(browser, &d, &url, "live-report", &[]);
    assert_runs_shown(&dom, &doc);

    // SIGTERM ends the linger: the process exits cleanly and the port closes.
    kill("-TERM", &run.0.id().to_string());
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(st) = run.0.try_wait().unwrap() {
            break st.code();
        }
        assert!(Instant::now() < deadline, "loadgen did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(code, Some(0));
    assert!(http_request(&addr, "GET", "/", "").is_none());
}
