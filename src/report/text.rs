//! The text report: one block per run, and the side-by-side table when several targets ran.

use std::fmt::Write;

use crate::result::{Percentiles, ResultFile, RunResult, SweepResult};

pub use number::{micros, thousands};
pub use progress::{op_rates, progress_line, RunLength};

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
    out.push_str(&settings_header(file));
    // Sweeps and SLO searches print their own tables instead of one block per step.
    if file.sweeps.is_empty() && file.slo.is_empty() {
        for r in &file.runs {
            out.push('\n');
            out.push_str(&render_run(r));
        }
    }
    for sw in &file.sweeps {
        out.push('\n');
        out.push_str(&sweep_table(sw));
    }
    for slo in &file.slo {
        out.push_str(&slo_table(slo));
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

/// The `settings` line: connections, stop condition, keys, mode and seed(s).
fn settings_header(file: &ResultFile) -> String {
    let mut out = String::new();
    let s = &file.settings;
    let mut stop = match (s.duration_s, s.requests) {
        (_, Some(n)) => format!("{} requests", thousands(n)),
        (Some(d), _) => format!("{d}s"),
        _ => String::new(),
    };
    if let Some(t) = &s.trace {
        let pace = match (t.timed, s.rate) {
            (true, None) => format!("at its pace x {} ({}s as written)", t.speed, t.span_s),
            (_, Some(_)) => "at the fixed rate".into(),
            (false, None) => "as fast as the connections go".into(),
        };
        let cut = if stop.is_empty() {
            String::new()
        } else {
            format!(", cut at {stop}")
        };
        stop = format!(
            "trace {} ({} requests) {pace}{cut}",
            t.file,
            thousands(t.lines)
        );
    }
    // -n and -d apply to each step of a sweep, for every target.
    if !file.sweeps.is_empty() && !stop.is_empty() {
        stop.push_str(" per step");
    }
    let rate = s
        .rate
        .map(|r| format!(", fixed rate {r}/s ({})", s.arrival))
        .unwrap_or_default();
    // A sweep sets the connection count per step: name the counts, not the unused -c.
    let connections = match file.sweeps.first() {
        Some(sw) => format!(
            "connections swept: {}",
            sw.steps
                .iter()
                .map(|st| st.connections.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => format!("{} connections", s.connections),
    };
    let _ = writeln!(
        out,
        "settings   {connections} x {} in flight, {} threads, {stop} after {}s warm-up, keys {} {}, {} mode{}{}, {}",
        s.pipeline,
        s.threads,
        s.warmup_s,
        s.keys,
        s.dist,
        s.mode,
        if s.verify { ", verify" } else { "" },
        rate,
        match &s.seeds {
            Some(all) => format!("seeds {}", all.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
            None => format!("seed {}", s.seed),
        }
    );
    out
}

/// An SLO search: its steps, the bracket it ended in and the best rate found.
fn slo_table(slo: &crate::result::SloResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nslo        {} ({}): {}",
        slo.target, slo.kind, slo.slo
    );
    for st in &slo.steps {
        let _ = writeln!(
            out,
            "  {:>16}  achieved {:>9}/s  {:>9}  {}{}{}",
            st.rate
                .map(|r| format!("rate {}/s", thousands(r as u64)))
                .unwrap_or_else(|| "closed loop".into()),
            thousands(st.achieved_qps.round() as u64),
            micros(st.percentile_us),
            if st.pass { "pass" } else { "fail" },
            if st.retry { " (run again)" } else { "" },
            match st.verdict.valid {
                true => String::new(),
                false => format!("  ! not valid: {}", st.verdict.reasons.join("; ")),
            }
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
    out
}

/// A sweep's table: one row per connection count. A mix that writes adds, per write op, its
/// rate and the time 10,000 of them take at that rate (the seed blogs' "time for 10,000 inserts").
pub fn sweep_table(sw: &SweepResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "sweep      {} ({})", sw.target, sw.kind);
    if !sw.durability.is_empty() {
        let _ = writeln!(out, "durability {}", settings_line(&sw.durability));
    }
    let writes: Vec<&str> = crate::mix::Op::ALL
        .iter()
        .filter(|op| op.writes() && sw.steps.iter().any(|st| st.ops.contains_key(op.name())))
        .map(|op| op.name())
        .collect();
    let mut head = format!("{:>11}  {:>11}", "connections", "qps");
    for w in &writes {
        let _ = write!(
            head,
            "  {:>11}  {:>11}",
            format!("{w}/s"),
            format!("10k {w}s")
        );
    }
    // The server's own count of each step, where one was read.
    let counted = sw.steps.iter().any(|st| st.server.is_some());
    let _ = write!(head, "  {:>9}  {:>9}  {:>8}", "p50", "p99", "errors");
    let _ = writeln!(head, "{}", if counted { "  server count" } else { "" });
    out.push_str(&head);
    for st in &sw.steps {
        let _ = write!(
            out,
            "{:>11}  {:>11}",
            st.connections,
            thousands(st.qps.round() as u64)
        );
        for w in &writes {
            let qps = st.ops.get(*w).copied().unwrap_or(0.0);
            let per_10k = if qps > 0.0 {
                micros(10_000.0 / qps * 1e6)
            } else {
                "-".to_string()
            };
            let _ = write!(
                out,
                "  {:>11}  {:>11}",
                thousands(qps.round() as u64),
                per_10k
            );
        }
        let server = match &st.server {
            _ if !counted => String::new(),
            None => format!("  {:>12}", "-"),
            Some(s) => {
                let n = s.delta.map_or("n/a".into(), thousands);
                let word = if s.matches { "matches" } else { "DIFFERS" };
                format!("  {:>12}", format!("{n} {word}"))
            }
        };
        let _ = writeln!(
            out,
            "  {:>9}  {:>9}  {:>8}{server}{}",
            micros(st.p50_us),
            micros(st.p99_us),
            thousands(st.errors),
            if st.connections == sw.peak_connections {
                "  <- peak"
            } else {
                ""
            }
        );
        if !st.verdict.valid {
            // Before the newline: the mark ends the step's own row.
            out.pop();
            out.push_str("  ! not valid\n");
        }
    }
    let _ = writeln!(
        out,
        "peak       {} qps at {} connections",
        thousands(sw.peak_qps.round() as u64),
        sw.peak_connections
    );
    let _ = writeln!(out, "{}", verdict_line(&sw.verdict));
    out
}

/// `name=value` pairs, two spaces apart.
fn settings_line(set: &std::collections::BTreeMap<String, String>) -> String {
    let set: Vec<String> = set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    set.join("  ")
}

/// A multi-get's keys (`--batch`, `mget:N`), each found or not: the lines above count requests.
fn keys_line(r: &RunResult) -> String {
    r.keys.as_ref().map_or_else(String::new, |k| {
        format!(
            "keys       {} ({} per {}) = {} keys/s  hits {}  misses {}\n",
            thousands(k.keys),
            k.batch,
            if r.ops.contains_key("mget") {
                "mget"
            } else {
                "request"
            },
            thousands(k.keys_per_s.round() as u64),
            thousands(k.hits),
            thousands(k.misses)
        )
    })
}

pub fn render_run(r: &RunResult) -> String {
    let mut out = String::new();
    let driver = r
        .driver
        .as_ref()
        .map_or_else(String::new, |d| format!(", driver {d}"));
    let _ = writeln!(out, "target     {} ({}{driver})", r.target, r.kind);
    count_lines(&mut out, r);
    out.push_str(&pct_line("latency", &r.latency_us));
    let l = &r.latency_us;
    if let Some(line) = ci::line(r.precision.as_ref(), [l.p50, l.p90, l.p99, l.p999]) {
        out.push_str(&line);
    }
    if let Some(line) = ci::goal_line(r.ci_goal.as_ref()) {
        out.push_str(&line);
    }
    for line in op_lines(r) {
        out.push_str(&line);
    }
    if !r.durability.is_empty() {
        let _ = writeln!(out, "durability {}", settings_line(&r.durability));
    }
    pace_lines(&mut out, r);
    connect_lines(&mut out, r);
    let c = &r.client_cpu;
    let _ = writeln!(
        out,
        "client     {:.2}µs CPU per request, workers {:.0}% busy{}",
        c.per_request_us,
        c.utilization * 100.0,
        if c.saturated {
            // What helps depends on why (the cores, the threads): the verdict line says.
            "  WARNING: loadgen itself is the likely bottleneck (the verdict says what helps)"
        } else {
            ""
        }
    );
    if let Some(line) = cost_line(r) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "{}", verdict_line(&r.verdict));
    if let Some(so) = &r.server_observed {
        server_line(&mut out, so);
    }
    for e in r.error_samples.iter().take(4) {
        let _ = writeln!(out, "error      {e}");
    }
    if let Some(s) = &r.stopped_early {
        let _ = writeln!(out, "stopped    {s}");
    }
    out
}

/// The requests line, what they came to (outcomes, retries, writes in doubt).
fn count_lines(out: &mut String, r: &RunResult) {
    // Every request failed: a rate of 0 qps would read as a measurement.
    let rate = if r.requests > 0 && r.hits + r.misses == 0 {
        ": no request succeeded".to_string()
    } else {
        format!(
            " = {} qps{}",
            thousands(r.qps.round() as u64),
            ci::plus_minus(r.precision.as_ref(), r.qps)
        )
    };
    let _ = writeln!(
        out,
        "requests   {} in {:.2}s{rate}{}",
        thousands(r.requests),
        r.duration_s,
        if r.interrupted { "  [interrupted]" } else { "" }
    );
    let _ = writeln!(
        out,
        "outcomes   hits {}  misses {}  errors {}{}{}",
        thousands(r.hits),
        thousands(r.misses),
        thousands(r.error_total),
        by_kind(&r.errors),
        if r.reconnects > 0 {
            format!("  reconnects {}", r.reconnects)
        } else {
            String::new()
        }
    );
    out.push_str(&keys_line(r));
    if r.retries > 0 {
        let _ = writeln!(
            out,
            "retries    {} requests sent again after a deadlock or serialization failure (--retries)",
            thousands(r.retries)
        );
    }
    if r.unsure > 0 {
        let _ = writeln!(
            out,
            "unsure     {} writes in doubt: their connection broke before the reply, so the \
             server may or may not have applied them",
            thousands(r.unsure)
        );
    }
}

/// A paced run's service and lag percentiles and how well it kept `-R`.
fn pace_lines(out: &mut String, r: &RunResult) {
    if let Some(c) = &r.connect_us {
        out.push_str(&pct_line("connects", c));
    }
    if r.rate.is_some() || r.lag_us.is_some() {
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
}

/// How the connections opened, before the measured window (and which failed).
fn connect_lines(out: &mut String, r: &RunResult) {
    if r.connect_failed > 0 {
        let _ = writeln!(
            out,
            "connect    {} of {} connections opened in {:.2}s{}, before the measured window  \
             WARNING: {} failed ({}); retried during the run",
            thousands(r.connected),
            thousands(r.connected + r.connect_failed),
            r.connect_s,
            over(r),
            thousands(r.connect_failed),
            r.connect_error.as_deref().unwrap_or("no message")
        );
    } else if r.connected > 0 {
        // On a set each connection holds one to every server: say how many each server got.
        let servers = r.server_observed.as_ref().map_or(0, |s| s.members.len());
        let each = match servers {
            0 => String::new(),
            n => format!(
                " (each to all {n} servers: {} per server)",
                thousands(r.connected)
            ),
        };
        let _ = writeln!(
            out,
            "connect    {} connections{each} opened in {:.2}s{}, before the measured window",
            thousands(r.connected),
            r.connect_s,
            over(r)
        );
    }
}

/// The error kinds that happened, with their counts: ` (duplicate 3, timeout 1)`, or nothing.
fn by_kind(errors: &std::collections::BTreeMap<String, u64>) -> String {
    let kinds: Vec<String> = errors
        .iter()
        .filter(|(_, &v)| v > 0)
        .map(|(k, v)| format!("{k} {}", thousands(*v)))
        .collect();
    match kinds.is_empty() {
        true => String::new(),
        false => format!(" ({})", kinds.join(", ")),
    }
}

/// One line per op of a mix that writes: its count, rate, outcomes, latency and the server's
/// count of it; none for a read-only run.
fn op_lines(r: &RunResult) -> Vec<String> {
    crate::mix::Op::ALL
        .iter()
        .filter_map(|op| r.ops.get(op.name()).map(|o| (op.name(), o)))
        .map(|(name, o)| {
            let server = match &o.server_observed {
                Some(so) => match so.delta {
                    // The server's count holds the warm-up's requests too: said beside it.
                    Some(d) => format!(
                        "  server {} (sent {}, warm-up included){}",
                        thousands(d),
                        crate::result::sent_text(so.expected, so.unknown, thousands),
                        if so.matches { ", matches" } else { "  WARNING: counts differ" }
                    ),
                    None => String::new(),
                },
                None => String::new(),
            };
            format!(
                "  {name:<8} {} = {} qps{}  hits {}  misses {}  errors {}{}{}{}  p50 {}  p99 {}{}  max {}{server}\n",
                thousands(o.requests),
                thousands(o.qps.round() as u64),
                ci::plus_minus(o.precision.as_ref(), o.qps),
                thousands(o.hits),
                thousands(o.misses),
                thousands(o.error_total),
                by_kind(&o.errors),
                match o.unsure {
                    0 => String::new(),
                    n => format!("  unsure {}", thousands(n)),
                },
                match o.retries {
                    0 => String::new(),
                    n => format!("  retries {}", thousands(n)),
                },
                micros(o.latency_us.p50),
                micros(o.latency_us.p99),
                match o.precision.as_ref().and_then(|f| f.p99.ci()) {
                    Some(c) => format!(" {}", ci::bounds(c, o.latency_us.p99)),
                    None => String::new(),
                },
                micros(o.latency_us.max),
            )
        })
        .chain(connects_line(r))
        .collect()
}

/// Under the op lines: failed connects, which sent no request and so belong to no op.
fn connects_line(r: &RunResult) -> Option<String> {
    let n = r.errors.get("connect").copied().unwrap_or(0);
    (n > 0 && !r.ops.is_empty()).then(|| {
        format!(
            "  {:<8} connect errors {} (no request sent, charged to no op)\n",
            "(no op)",
            thousands(n)
        )
    })
}

/// One line per target: QPS, latency, errors, and QPS relative to the first target.
pub fn comparison(runs: &[RunResult]) -> String {
    let mut out = String::new();
    let width = runs
        .iter()
        .map(|r| r.target.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, TARGET_WIDTH);
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
            super::short_target::shorten(&r.target, width),
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
        if !r.verdict.valid {
            // The row's numbers stand, but not as a fair comparison: say so on the row.
            out.pop();
            out.push_str("  ! not valid\n");
        }
    }
    if runs.iter().any(|r| !r.verdict.valid) {
        out.push_str("! not valid: its verdict line above says why\n");
    }
    out
}

/// The widest target column of the comparison table, in characters.
const TARGET_WIDTH: usize = 60;

/// `cost/lookup  client 14.1 µs (81% kernel)  server 31.0 µs  => CPU-bound at ~44k qps on 2
/// cores`: where each lookup's CPU went, and the rate at which client and server together
/// would fill the machine.
fn cost_line(r: &RunResult) -> Option<String> {
    let s = r.server_cpu.as_ref()?;
    let c = &r.client_cpu;
    let kernel = c
        .kernel_share
        .map(|k| format!(" ({:.0}% kernel)", k * 100.0))
        .unwrap_or_default();
    let server = match (s.per_request_us, &s.note) {
        (Some(us), _) => format!(
            "server {us:.1} µs in {}",
            s.process.as_deref().unwrap_or("the server")
        ),
        (None, Some(why)) => format!("server not measured: {why}"),
        (None, None) => "server not measured".to_string(),
    };
    let bound = s.cpu_bound_qps.map_or(String::new(), |q| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let q = match q {
            q if q >= 1e6 => format!("{:.1}M", q / 1e6),
            q if q >= 1e4 => format!("{:.0}k", q / 1e3),
            q => thousands(q as u64),
        };
        format!("  => CPU-bound at ~{q} qps on {cores} cores")
    });
    Some(format!(
        "cost/lookup  client {:.1} µs{kernel}  {server}{bound}",
        c.per_request_us
    ))
}

/// ` over unix /run/x.sock` for a run on a Unix socket, nothing for TCP (the URL says it); then
/// `, TLS 1.3 <cipher> (...)` or `, plain`.
fn over(r: &RunResult) -> String {
    let path = match &r.socket {
        Some(path) => format!(" over {} {path}", r.transport),
        None => String::new(),
    };
    let tls = match &r.tls {
        Some(t) => {
            let checked = match t.verified.as_str() {
                "full" => "certificate and host name verified",
                "ca" => "certificate chain verified, host name not",
                _ => "certificate not verified",
            };
            // A URL without sslmode= gets libpq's `prefer`: TLS when offered, nothing checked.
            let why = if r.kind == "postgres" && !r.target.contains("sslmode=") {
                ", libpq's default sslmode=prefer"
            } else {
                ""
            };
            format!("{} {} ({checked}{why})", t.version, t.cipher)
        }
        None => "plain".to_string(),
    };
    format!("{path}, {tls}")
}

/// `verdict    valid`, or `verdict    NOT VALID: reason; reason`.
pub fn verdict_line(v: &crate::result::Verdict) -> String {
    if v.valid {
        "verdict    valid: no reason to doubt these numbers".to_string()
    } else {
        format!("verdict    NOT VALID: {}", v.reasons.join("; "))
    }
}

mod ci;
mod number;
mod progress;
mod server_line;
use server_line::server_line;

#[cfg(test)]
mod tests;
