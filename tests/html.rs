//! The HTML report of real runs, opened in headless Chromium (Debian's `chromium`, installed by
//! scripts/test.sh): the page draws without a console message, references nothing outside the
//! file (its CSP would make the browser refuse, and log, any request), and the numbers the
//! browser shows equal the result JSON's. Screenshots at 1280 and 390 px wide are kept under
//! the temp dir as test artifacts (paths printed). Runs use the embedded server (and a
//! `loadgen serve` of our own), so only Chromium is needed. The live page of `--metrics` is
//! opened during a run and checked against `/metrics` at the same interval end.

mod common;
#[path = "html/live.rs"]
mod live;
#[path = "html/reports.rs"]
mod reports;
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
        // A set's servers, each on its own line with its count.
        for (k, m) in so["members"].as_array().into_iter().flatten().enumerate() {
            let (tag, text) = element(dom, &format!("server-{i}-member-{k}"));
            assert_eq!(attr(tag, "data-value"), m["delta"].to_string(), "{tag}");
            assert!(text.contains(m["server"].as_str().unwrap()), "{text}");
            let (tag, text) = element(dom, &format!("server-{i}-member-{k}-latency"));
            assert_eq!(attr(tag, "data-value"), m["latency"]["p99"].to_string());
            assert!(
                text.contains("share ") && text.contains("%, p50 "),
                "{text}"
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
