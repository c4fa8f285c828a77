//! The HTML report: one self-contained page per result file. The result is embedded once, as
//! JSON; the page's own script (`html/report.js` and its `html/charts.js`, hand-written, no
//! library) draws the tables and SVG charts from it in the browser. Nothing is loaded from
//! elsewhere: a Content-Security-Policy of `default-src 'none'` lets the browser itself refuse
//! any request.
//!
//! What is heavy to derive in a browser is derived here: each run's latency spectrum from its
//! compressed HdrHistogram (which is then left out of the page, as are the per-op ones, so a
//! sweep of many steps stays small), and long timelines merged to at most `MAX_POINTS` points per run.
//!
//! The live page of `--metrics` (`live_page`) is the same style and script around the numbers
//! of a running run; its script fetches them again from the server that sent it.

use serde::Serialize;

use crate::downsample::{downsample, Columns, MAX_POINTS};
use crate::result::{decode_histogram, ResultFile, RunResult};

const STYLE: &str = include_str!("html/report.css");
// One strict-mode function scope for both files; the charts come first so that the page's
// code, run at the end of report.js, finds them defined.
const SCRIPT: &str = concat!(
    "(() => {\n  'use strict';\n",
    include_str!("html/charts.js"),
    include_str!("html/report.js"),
    "})();\n"
);

/// Allows the inline style and script, and nothing else: no fetch, no font, no image but data:.
pub const CSP: &str =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";

/// The live page's: the same, and fetches back to the server that sent the page.
pub const LIVE_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; img-src data:; connect-src 'self'";

/// What the page's script reads (`#data`).
#[derive(Serialize)]
struct PageData<'a> {
    /// The result file as written, redacted again, histograms left out.
    result: &'a ResultFile,
    /// Per run, `[percentile, latency µs]` points of its latency spectrum (empty without a histogram).
    spectra: Vec<Vec<(f64, f64)>>,
    /// Per SLO search, its latency bound in µs (None when its text does not parse).
    slo_bounds_us: Vec<Option<f64>>,
    /// Per run, its timeline as drawn (merged when long; the runs' own `timeline` is left out).
    timelines: Vec<Columns>,
    /// Per run, how many intervals one drawn timeline point holds (1: none merged).
    merged: Vec<usize>,
}

/// The whole page for `file`.
pub fn render(file: &ResultFile) -> String {
    page(&title(file), CSP, "data", &script_safe(&data_json(file)))
}

/// What the page draws from, as JSON: the script's `loadgenReport.render` takes it, so a page
/// that updates during a run can fetch it again.
pub fn data_json(file: &ResultFile) -> String {
    let mut shown = file.clone();
    // Callers pass redacted results; a page is shared widely, so it is redacted once more.
    crate::redact::file(&mut shown);
    let spectra = shown.runs.iter().map(run_spectrum).collect();
    let interval_s = shown.settings.interval_ms.max(1) as f64 / 1000.0;
    let (mut timelines, mut merged) = (Vec::new(), Vec::new());
    for r in &mut shown.runs {
        r.histogram.clear();
        r.ops.values_mut().for_each(|o| o.histogram.clear());
        let (rows, per) = downsample(&std::mem::take(&mut r.timeline), interval_s, MAX_POINTS);
        let mut c = Columns::default();
        rows.iter().for_each(|r| c.push(r));
        timelines.push(c);
        merged.push(per);
    }
    let data = PageData {
        result: &shown,
        spectra,
        slo_bounds_us: shown.slo.iter().map(|s| slo_bound_us(&s.slo)).collect(),
        timelines,
        merged,
    };
    serde_json::to_string(&data).expect("the page data serializes")
}

/// The live page of a running run around `live_json` (what `/live.json` serves): the script
/// draws it, then fetches `live.json` once per interval.
pub fn live_page(live_json: &str) -> String {
    page("loadgen live", LIVE_CSP, "live", &script_safe(live_json))
}

/// The page around the data: style and script inline, the data in a JSON script element.
fn page(title: &str, csp: &str, id: &str, data: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{STYLE}</style>
</head>
<body>
<main id="report"><noscript>This report draws its tables and charts with JavaScript; the same numbers are in the result JSON beside it.</noscript></main>
<div id="tip" hidden></div>
<script type="application/json" id="{id}">{data}</script>
<script>
{SCRIPT}</script>
</body>
</html>
"#
    )
}

/// `loadgen report: postgres, memcache` (what ran, HTML-escaped).
fn title(file: &ResultFile) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for r in &file.runs {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
    }
    let what = if !file.sweeps.is_empty() {
        "sweep: "
    } else if !file.slo.is_empty() {
        "SLO search: "
    } else {
        ""
    };
    let t = format!("loadgen report: {what}{}", kinds.join(", "));
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// JSON that cannot end its script element or open a comment in it: `<`, `>` and `&` only occur
/// inside JSON strings, where their `\u` escapes mean the same.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn run_spectrum(r: &RunResult) -> Vec<(f64, f64)> {
    match decode_histogram(&r.histogram) {
        Ok(h) if !r.histogram.is_empty() => spectrum(&h),
        _ => Vec::new(),
    }
}

/// Twenty points per decade of HdrHistogram's percentile axis, x = 1/(1-p) from 1 up to 100,000
/// (p = 99.999%), stopping where the count no longer separates percentiles; then the maximum.
/// Values in µs, as `Percentiles` reports them (highest equivalent value of the bucket).
pub fn spectrum(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    const STEPS: u32 = 100;
    let n = h.len() as f64;
    if n == 0.0 {
        return Vec::new();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let pct = |q: f64| (q * 100.0 * 1e6).round() / 1e6;
    let mut points = Vec::new();
    for k in 0..=STEPS {
        let x = 10f64.powf(k as f64 / 20.0);
        if x > n {
            break;
        }
        let q = 1.0 - 1.0 / x;
        points.push((pct(q), us(h.value_at_quantile(q))));
    }
    if n < 10f64.powf(STEPS as f64 / 20.0) {
        points.push((pct(1.0 - 1.0 / n), us(h.max())));
    }
    points
}

/// The bound of an SLO search from its text, `p99 <= 1.00ms` -> 1000.
fn slo_bound_us(slo: &str) -> Option<f64> {
    let d = slo.rsplit_once("<=")?.1.trim();
    let (num, scale) = if let Some(v) = d.strip_suffix("µs") {
        (v, 1.0)
    } else if let Some(v) = d.strip_suffix("us") {
        (v, 1.0)
    } else if let Some(v) = d.strip_suffix("ms") {
        (v, 1e3)
    } else if let Some(v) = d.strip_suffix('s') {
        (v, 1e6)
    } else {
        return None;
    };
    num.trim().parse::<f64>().ok().map(|v| v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{encode_histogram, TimelineRow};

    fn histogram(n: u64, spread: f64) -> hdrhistogram::Histogram<u64> {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        // A deterministic heavy tail: 20µs to about 20µs * e^spread.
        let mut x: u64 = 88172645463325252;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            h.record((20_000.0 * (spread * u * u * u).exp()) as u64)
                .unwrap();
        }
        h
    }

    /// A file as `loadgen run` writes it, five targets of `secs` seconds each.
    fn file(targets: usize, secs: usize, spread: f64) -> ResultFile {
        let mut runs = Vec::new();
        for t in 0..targets {
            let h = histogram(2_000_000, spread + t as f64);
            let pct = crate::result::Percentiles::of(&h);
            let mut r: RunResult = serde_json::from_value(serde_json::json!({
                "target": format!("postgres://loadgen:***@127.0.0.1:55432/loadgen?t={t}"),
                "kind": "postgres", "started_at": "2026-12-03T10:00:00Z",
                "interrupted": false, "stopped_early": null, "duration_s": secs as f64,
                "qps": 123456.7, "requests": 7_407_402, "hits": 7_407_400, "misses": 0,
                "errors": {"connect": 0, "io": 1, "protocol": 0, "server": 0, "timeout": 1,
                    "verify": 0},
                "error_total": 2, "error_samples": ["io: connection reset by peer"],
                "reconnects": 1, "warmup_requests": 100_000,
                "latency_us": pct, "service_us": pct, "lag_us": null, "rate": null,
                "client_cpu": {"worker_s": 50.0, "process_s": 51.0, "per_request_us": 6.75,
                    "utilization": 0.42, "saturated": false},
                "server_observed": {"source": "pg_stat_statements.calls", "delta": 7_507_402,
                    "expected": 7_507_402, "matches": true, "note": null},
                "timeline": [], "histogram": encode_histogram(&h)
            }))
            .unwrap();
            r.timeline = (1..=secs)
                .map(|s| TimelineRow {
                    t_s: s as f64,
                    qps: 123_456.0 + s as f64,
                    hits: 123_456 + s as u64,
                    misses: 0,
                    errors: (s % 17 == 0) as u64,
                    p50_us: 123.456,
                    p99_us: 1234.567,
                    in_flight: 16,
                    connections: 16,
                    reconnects: (s % 23 == 0) as u64,
                })
                .collect();
            runs.push(r);
        }
        serde_json::from_value(serde_json::json!({
            "loadgen_version": "0.1.0", "started_at": "2026-12-03T10:00:00Z",
            "interrupted": false,
            "settings": {"connections": 16, "pipeline": 1, "threads": 2, "duration_s": secs as f64,
                "requests": null, "warmup_s": 1.0, "keys": "1-1000000", "dist": "uniform",
                "mode": "prepared", "verify": false, "timeout_ms": 5000, "interval_ms": 1000,
                "seed": 1, "rate": null, "arrival": "uniform", "query": null},
            "machine": {"cores": 2, "os": "linux", "hostname": "h"},
            "runs": runs
        }))
        .unwrap()
    }

    /// The JSON a page draws from (its `#data` element).
    fn data_of(html: &str) -> serde_json::Value {
        let start = html
            .find(r#"<script type="application/json" id="data">"#)
            .unwrap();
        let body = &html[start..];
        let data = &body[body.find('>').unwrap() + 1..body.find("</script>").unwrap()];
        assert!(!data.contains('<') && !data.contains('>'), "{data}");
        serde_json::from_str(data).unwrap()
    }

    #[test]
    fn a_sixty_second_run_of_five_targets_stays_under_300_kb() {
        let f = file(5, 60, 9.0);
        let json_len = serde_json::to_string_pretty(&f).unwrap().len();
        let html = render(&f);
        assert!(html.len() < 300_000, "{} bytes", html.len());
        // The data is in the page once: each run's timeline as columns, no histogram.
        let d = data_of(&html);
        for i in 0..5 {
            assert_eq!(d["timelines"][i]["t_s"].as_array().unwrap().len(), 60);
            assert_eq!(d["timelines"][i]["qps"][59], 123_516.0);
            assert_eq!(d["result"]["runs"][i]["timeline"], serde_json::json!([]));
        }
        assert_eq!(d["merged"], serde_json::json!([1, 1, 1, 1, 1]));
        assert!(html.contains("\"histogram\":\"\""));
        assert!(
            html.len() < json_len,
            "page {} vs JSON {json_len}",
            html.len()
        );
    }

    #[test]
    fn an_hour_of_five_targets_stays_under_300_kb_and_the_file_keeps_every_interval() {
        let f = file(5, 3600, 9.0);
        let html = render(&f);
        assert!(html.len() < 300_000, "{} bytes", html.len());
        let d = data_of(&html);
        assert_eq!(d["merged"], serde_json::json!([6, 6, 6, 6, 6]));
        // Six seconds per point: the first ends at 6 s, the last where the run does.
        for i in 0..5 {
            let t = d["timelines"][i]["t_s"].as_array().unwrap();
            assert_eq!(t.len(), 600);
            assert_eq!((t[0].as_f64(), t[599].as_f64()), (Some(6.0), Some(3600.0)));
            // Errors (every 17th second) summed: none lost.
            let errors: u64 = d["timelines"][i]["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_u64().unwrap())
                .sum();
            assert_eq!(errors, 3600 / 17);
        }
        assert_eq!(
            f.runs[0].timeline.len(),
            3600,
            "the file itself is not changed"
        );
    }

    #[test]
    fn the_spectrum_follows_the_histogram_to_p99_999() {
        let h = histogram(2_000_000, 9.0);
        let s = spectrum(&h);
        assert_eq!(s.len(), 101);
        assert_eq!(s[0].0, 0.0);
        assert_eq!(s[40].0, 99.0);
        assert_eq!(s[100].0, 99.999);
        let p = crate::result::Percentiles::of(&h);
        assert_eq!(s[40].1, p.p99);
        assert_eq!(s[60].1, p.p999);
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        // Few samples: the curve ends at the last percentile they tell apart, at the maximum.
        let small = histogram(1000, 9.0);
        let s = spectrum(&small);
        assert_eq!(s.len(), 62);
        assert_eq!(s.last().unwrap(), &(99.9, small.max() as f64 / 1000.0));
        assert!(spectrum(&hdrhistogram::Histogram::<u64>::new(3).unwrap()).is_empty());
    }

    #[test]
    fn the_data_cannot_close_its_script_element() {
        let mut f = file(1, 2, 3.0);
        f.runs[0].error_samples = vec!["</script><script>alert(1)</script><!--".into()];
        f.runs[0].target = "http://h/usr/{key}?x=</ScRiPt>&y=1".into();
        let html = render(&f);
        let back = data_of(&html);
        assert_eq!(
            back["result"]["runs"][0]["error_samples"][0],
            "</script><script>alert(1)</script><!--"
        );
        // The style and script are embedded as written: neither may end its element early.
        assert!(!SCRIPT.to_lowercase().contains("</script"));
        assert!(!STYLE.to_lowercase().contains("</style"));
    }

    #[test]
    fn no_url_or_secret_reaches_the_page() {
        let mut f = file(2, 2, 3.0);
        f.runs[0].target = "postgres://u:Pw5ecretXq@127.0.0.1:5432/db".into();
        f.runs[1].label = Some("mysql://u:Pw5ecretXq@h/db".into());
        f.runs[1].error_samples = vec!["auth failed for postgres://u:Pw5ecretXq@h/db".into()];
        let html = render(&f);
        assert!(!html.contains("Pw5ecretXq"));
        assert!(html.contains("u:***@127.0.0.1:5432"));
        // Outside the data, the page names no URL at all: nothing to fetch.
        let start = html.find(r#"id="data">"#).unwrap();
        let end = start + html[start..].find("</script>").unwrap();
        let rest = format!("{}{}", &html[..start], &html[end..]);
        assert!(!rest.contains("://"), "a URL outside the data");
        assert!(rest.contains(CSP));
    }

    #[test]
    fn a_file_with_only_what_the_schema_requires_renders() {
        let minimal = serde_json::json!({
            "loadgen_version": "0.0.1", "started_at": "2026-01-01T00:00:00Z", "interrupted": false,
            "settings": {"connections": 4, "pipeline": 1, "threads": 1, "warmup_s": 0.0,
                "keys": "1-10", "dist": "uniform", "mode": "prepared", "verify": false,
                "timeout_ms": 1000, "interval_ms": 1000, "seed": 1},
            "machine": {"cores": 1, "os": "linux"},
            "runs": [{"target": "embedded", "kind": "embedded", "interrupted": false,
                "duration_s": 1.0, "qps": 10.0, "requests": 10, "hits": 10, "misses": 0,
                "errors": {"connect": 0, "io": 0, "protocol": 0, "server": 0, "timeout": 0,
                    "verify": 0},
                "error_total": 0,
                "latency_us": {"count": 10, "min": 1.0, "mean": 2.0, "p50": 2.0, "p90": 3.0,
                    "p99": 4.0, "p999": 5.0, "max": 6.0},
                "service_us": {"count": 10, "min": 1.0, "mean": 2.0, "p50": 2.0, "p90": 3.0,
                    "p99": 4.0, "p999": 5.0, "max": 6.0},
                "client_cpu": {"worker_s": 0.1, "process_s": 0.1, "per_request_us": 1.0,
                    "utilization": 0.1, "saturated": false},
                "timeline": [{"t_s": 1.0, "qps": 10.0, "hits": 10, "misses": 0, "errors": 0,
                    "p50_us": 2.0, "p99_us": 4.0}],
                "histogram": ""}]
        });
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/result.schema.json")).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&minimal), "the schema accepts it");
        let f: ResultFile = serde_json::from_value(minimal).expect("the model reads it");
        let html = render(&f);
        assert!(html.contains("\"spectra\":[[]]"));
    }

    #[test]
    fn per_op_histograms_stay_out_of_the_page_and_read_only_data_has_no_ops() {
        let mut f = file(1, 2, 3.0);
        let h = histogram(10_000, 3.0);
        let op: crate::result::OpResult = serde_json::from_value(serde_json::json!({
            "requests": 10_000, "qps": 5000.0, "hits": 9_000, "misses": 1_000,
            "errors": {"server": 0}, "error_total": 0,
            "latency_us": crate::result::Percentiles::of(&h),
            "histogram": encode_histogram(&h)
        }))
        .unwrap();
        let plain = data_of(&render(&f));
        assert!(plain["result"]["runs"][0].get("ops").is_none());
        assert!(plain["result"]["runs"][0].get("durability").is_none());
        f.runs[0].ops.insert("update".into(), op);
        let d = data_of(&render(&f));
        let shown = &d["result"]["runs"][0]["ops"]["update"];
        assert_eq!(shown["requests"], 10_000);
        assert!(shown.get("histogram").is_none(), "{shown}");
        assert!(
            !f.runs[0].ops["update"].histogram.is_empty(),
            "the file keeps it"
        );
    }

    #[test]
    fn slo_bounds_parse_from_their_text() {
        assert_eq!(slo_bound_us("p99 <= 1.00ms"), Some(1000.0));
        assert_eq!(slo_bound_us("p99.9 <= 250.0µs"), Some(250.0));
        assert_eq!(slo_bound_us("p50 <= 2.00s"), Some(2e6));
        assert_eq!(slo_bound_us("p50 <= soon"), None);
        assert_eq!(slo_bound_us("p50"), None);
    }
}
