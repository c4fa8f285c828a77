//! The text report: one block per run, and the side-by-side table when several targets ran.

use std::fmt::Write;

use crate::report::result::{ResultFile, RunResult};
use crate::totals::Percentiles;

pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// 87.3µs, 1.24ms, 2.10s
pub fn micros(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1000.0 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{us:.1}µs")
    }
}

fn pct_line(name: &str, p: &Percentiles) -> String {
    format!(
        "{name:<10} min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  mean {}\n",
        micros(p.min),
        micros(p.p50),
        micros(p.p90),
        micros(p.p99),
        micros(p.p999),
        micros(p.max),
        micros(p.mean)
    )
}

pub fn render(file: &ResultFile) -> String {
    let mut out = String::new();
    let s = &file.settings;
    let stop = match (s.duration_s, s.requests) {
        (_, Some(n)) => format!("{} requests", thousands(n)),
        (Some(d), _) => format!("{d}s"),
        _ => String::new(),
    };
    let rate = s
        .rate
        .map(|r| format!(", fixed rate {r}/s ({})", s.arrival))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "settings   {} connections x {} in flight, {} threads, {stop} after {}s warm-up, keys {} {}, {} mode{}{}, seed {}",
        s.connections,
        s.pipeline,
        s.threads,
        s.warmup_s,
        s.keys,
        s.dist,
        s.mode,
        if s.verify { ", verify" } else { "" },
        rate,
        s.seed
    );
    // Sweeps and SLO searches print their own tables instead of one block per step.
    if file.sweeps.is_empty() && file.slo.is_empty() {
        for r in &file.runs {
            out.push('\n');
            out.push_str(&render_run(r));
        }
    }
    for sw in &file.sweeps {
        let _ = writeln!(out, "\nsweep      {} ({})", sw.target, sw.kind);
        let _ = writeln!(
            out,
            "{:>11}  {:>11}  {:>9}  {:>9}  {:>8}",
            "connections", "qps", "p50", "p99", "errors"
        );
        for st in &sw.steps {
            let _ = writeln!(
                out,
                "{:>11}  {:>11}  {:>9}  {:>9}  {:>8}{}",
                st.connections,
                thousands(st.qps.round() as u64),
                micros(st.p50_us),
                micros(st.p99_us),
                thousands(st.errors),
                if st.connections == sw.peak_connections {
                    "  <- peak"
                } else {
                    ""
                }
            );
        }
        let _ = writeln!(
            out,
            "peak       {} qps at {} connections",
            thousands(sw.peak_qps.round() as u64),
            sw.peak_connections
        );
    }
    for slo in &file.slo {
        let _ = writeln!(
            out,
            "\nslo        {} ({}): {}",
            slo.target, slo.kind, slo.slo
        );
        for st in &slo.steps {
            let _ = writeln!(
                out,
                "  {:>16}  achieved {:>9}/s  {:>9}  {}{}",
                st.rate
                    .map(|r| format!("rate {}/s", thousands(r as u64)))
                    .unwrap_or_else(|| "closed loop".into()),
                thousands(st.achieved_qps.round() as u64),
                micros(st.percentile_us),
                if st.pass { "pass" } else { "fail" },
                if st.retry { " (run again)" } else { "" }
            );
        }
        if let Some(f) = slo.fail_rate {
            let p = slo.pass_rate.unwrap_or(0.0);
            let _ = writeln!(
                out,
                "bracket    pass {}/s, fail {}/s ({:.1}% of the upper end): {}",
                thousands(p as u64),
                thousands(f as u64),
                (f - p) / f.max(1e-9) * 100.0,
                slo.stopped
            );
        }
        match slo.best_rate {
            Some(r) => {
                let _ = writeln!(
                    out,
                    "best       {}/s meets {} (closed-loop maximum {}/s)",
                    thousands(r as u64),
                    slo.slo,
                    thousands(slo.max_qps as u64)
                );
            }
            None => {
                let _ = writeln!(out, "best       no rate tried meets {}", slo.slo);
            }
        }
    }
    if file.runs.len() > 1 && file.sweeps.is_empty() && file.slo.is_empty() {
        out.push('\n');
        out.push_str(&comparison(&file.runs));
    }
    if file.interrupted {
        out.push_str("\ninterrupted: results cover the time until Ctrl-C\n");
    }
    out
}

pub fn render_run(r: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "target     {} ({})", r.target, r.kind);
    let _ = writeln!(
        out,
        "requests   {} in {:.2}s = {} qps{}",
        thousands(r.requests),
        r.duration_s,
        thousands(r.qps.round() as u64),
        if r.interrupted { "  [interrupted]" } else { "" }
    );
    let errs: Vec<String> = r
        .errors
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| format!("{k} {}", thousands(*v)))
        .collect();
    let _ = writeln!(
        out,
        "outcomes   hits {}  misses {}  errors {}{}{}",
        thousands(r.hits),
        thousands(r.misses),
        thousands(r.error_total),
        if errs.is_empty() {
            String::new()
        } else {
            format!(" ({})", errs.join(", "))
        },
        if r.reconnects > 0 {
            format!("  reconnects {}", r.reconnects)
        } else {
            String::new()
        }
    );
    out.push_str(&pct_line("latency", &r.latency_us));
    if r.rate.is_some() {
        out.push_str(&pct_line("service", &r.service_us));
        if let Some(l) = &r.lag_us {
            out.push_str(&pct_line("lag", l));
        }
    }
    if let Some(rate) = &r.rate {
        let _ = writeln!(
            out,
            "rate       asked {}/s, achieved {}/s, {} requests sent more than 1ms late{}",
            rate.asked,
            rate.achieved,
            thousands(rate.late),
            if rate.kept {
                ""
            } else {
                "  WARNING: the generator did not keep the rate"
            }
        );
    }
    if r.connect_failed > 0 {
        let _ = writeln!(
            out,
            "connect    {} of {} connections opened in {:.2}s, before the measured window  \
             WARNING: {} failed ({}); retried during the run",
            thousands(r.connected),
            thousands(r.connected + r.connect_failed),
            r.connect_s,
            thousands(r.connect_failed),
            r.connect_error.as_deref().unwrap_or("no message")
        );
    } else if r.connected > 0 {
        let _ = writeln!(
            out,
            "connect    {} connections opened in {:.2}s, before the measured window",
            thousands(r.connected),
            r.connect_s
        );
    }
    let c = &r.client_cpu;
    let _ = writeln!(
        out,
        "client     {:.2}µs CPU per request, workers {:.0}% busy{}",
        c.per_request_us,
        c.utilization * 100.0,
        if c.saturated {
            "  WARNING: loadgen itself is the likely bottleneck (add -t threads or -p pipelining)"
        } else {
            ""
        }
    );
    if let Some(so) = &r.server_observed {
        match so.delta {
            Some(d) => {
                let _ = writeln!(
                    out,
                    "server     {} = {} (loadgen sent {}){}",
                    so.source,
                    thousands(d),
                    thousands(so.expected),
                    if so.matches {
                        ", matches"
                    } else {
                        "  WARNING: counts differ"
                    }
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "server     counter unavailable: {}",
                    so.note.clone().unwrap_or_default()
                );
            }
        }
    }
    for e in r.error_samples.iter().take(4) {
        let _ = writeln!(out, "error      {e}");
    }
    if let Some(s) = &r.stopped_early {
        let _ = writeln!(out, "stopped    {s}");
    }
    out
}

/// One line per target: QPS, latency, errors, and QPS relative to the first target.
pub fn comparison(runs: &[RunResult]) -> String {
    let mut out = String::new();
    let width = runs
        .iter()
        .map(|r| r.target.len())
        .max()
        .unwrap_or(6)
        .clamp(6, 60);
    let _ = writeln!(
        out,
        "{:<width$}  {:>11}  {:>9}  {:>9}  {:>9}  {:>8}  {:>7}",
        "target", "qps", "p50", "p99", "p99.9", "errors", "vs 1st"
    );
    let base = runs.first().map(|r| r.qps).unwrap_or(0.0);
    for r in runs {
        let _ = writeln!(
            out,
            "{:<width$}  {:>11}  {:>9}  {:>9}  {:>9}  {:>8}  {:>7}",
            r.target,
            thousands(r.qps.round() as u64),
            micros(r.latency_us.p50),
            micros(r.latency_us.p99),
            micros(r.latency_us.p999),
            thousands(r.error_total),
            if base > 0.0 {
                format!("{:.2}x", r.qps / base)
            } else {
                "-".into()
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(micros(87.34), "87.3µs");
        assert_eq!(micros(1240.0), "1.24ms");
    }
}
