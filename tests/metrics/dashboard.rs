//! The Grafana dashboard's queries against the metrics loadgen exports.

use super::*;

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
