//! The exposition text: Prometheus text format 0.0.4, or OpenMetrics 1.0 when the scraper asks
//! for it (`# EOF`, counter families named without `_total`, `# UNIT` for the histogram).

use std::fmt::{Display, Write};

use super::point::{Cum, Point, ServerCum, BUCKETS};
use crate::mix::Op;
use crate::outcome::ErrorKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`
    Text,
    /// `application/openmetrics-text; version=1.0.0`
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// OpenMetrics when the Accept header prefers `application/openmetrics-text` (version 1.0.0
    /// or unversioned) at least as much as plain text; the text format otherwise.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut om, mut text) = (0.0f64, 0.0f64);
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let (mut q, mut version) = (1.0f64, None);
            for p in parts {
                if let Some((k, v)) = p.split_once('=') {
                    let v = v.trim().trim_matches('"');
                    match k.trim().to_ascii_lowercase().as_str() {
                        "q" => q = v.parse().unwrap_or(0.0),
                        "version" => version = Some(v.to_string()),
                        _ => {}
                    }
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if matches!(version.as_deref(), None | Some("1.0.0")) =>
                {
                    om = om.max(q)
                }
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if om > 0.0 && om >= text {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }
}

/// One metric family.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// The sample name (counters end in `_total`; OpenMetrics names the family without it).
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    pub help: &'static str,
}

const BUILD_INFO: Family = Family {
    name: "loadgen_build_info",
    kind: "gauge",
    help: "Always 1; the version label is the loadgen version.",
};
const REQUESTS: Family = Family {
    name: "loadgen_requests_total",
    kind: "counter",
    help: "Completed requests by outcome (hit, miss, error), warm-up included.",
};
const ERRORS: Family = Family {
    name: "loadgen_errors_total",
    kind: "counter",
    help: "Failed requests by kind (connect, io, timeout, server, protocol, verify, duplicate, deadlock, serialization, readonly), warm-up included.",
};
const RECONNECTS: Family = Family {
    name: "loadgen_reconnects_total",
    kind: "counter",
    help: "Connections replaced after a failure.",
};
const DURATION: Family = Family {
    name: "loadgen_request_duration_seconds",
    kind: "histogram",
    help: "Latency of counted requests (after the warm-up; warm-up requests are not in it), from due time to reply (corrected for coordinated omission with a rate), in seconds.",
};
const QPS: Family = Family {
    name: "loadgen_qps",
    kind: "gauge",
    help: "Answered lookups (hits and misses) per second in the last interval, warm-up included; 0 once the target's run has ended.",
};
const IN_FLIGHT: Family = Family {
    name: "loadgen_in_flight_requests",
    kind: "gauge",
    help: "Requests sent and not yet answered at the end of the last interval.",
};
const CONNECTIONS: Family = Family {
    name: "loadgen_connections",
    kind: "gauge",
    help: "Open connections at the end of the last interval.",
};
const TARGET_RATE: Family = Family {
    name: "loadgen_target_rate",
    kind: "gauge",
    help:
        "The fixed rate asked for with --rate, in requests per second (absent in closed-loop runs).",
};

const SERVER_REQUESTS: Family = Family {
    name: "loadgen_server_requests_total",
    kind: "counter",
    help: "A set of servers (memcached pool, Redis Cluster, SQL shards): requests routed to each server (label server, its address), warm-up included; a multi-get counts its keys there, on SQL shards its statements.",
};
const SERVER_DURATION: Family = Family {
    name: "loadgen_server_request_duration_seconds",
    kind: "histogram",
    help: "A set of servers: latency of each server's replies (label server), from the send to that server's reply, warm-up included, in seconds.",
};

const QPS_CI: Family = Family {
    name: "loadgen_qps_ci",
    kind: "gauge",
    help: "The 95% confidence interval of the run's QPS so far (bound low, high), by batch means over its measured intervals (docs/statistics.md); absent until it has five.",
};
const LATENCY_CI: Family = Family {
    name: "loadgen_latency_ci_seconds",
    kind: "gauge",
    help: "The 95% confidence interval of the run's latency percentiles so far (quantile 0.5, 0.9, 0.99, 0.999; bound low, high), in seconds; absent where the run has too few intervals, or too few requests in each for that percentile.",
};

const RUN_VALID: Family = Family {
    name: "loadgen_run_valid",
    kind: "gauge",
    help: "1 when every run's verdict is valid, 0 when one is not (the report's verdict line says why); exported once the run has ended.",
};

/// Every family loadgen exports, in exposition order.
pub const FAMILIES: [Family; 14] = [
    BUILD_INFO,
    REQUESTS,
    ERRORS,
    RECONNECTS,
    DURATION,
    QPS,
    IN_FLIGHT,
    CONNECTIONS,
    TARGET_RATE,
    QPS_CI,
    LATENCY_CI,
    SERVER_REQUESTS,
    SERVER_DURATION,
    RUN_VALID,
];

struct Out<'a> {
    s: String,
    f: Format,
    common: &'a [(String, String)],
    /// The timestamp of the samples being written (unix ms), if they have one.
    at_ms: Option<i64>,
}

impl Out<'_> {
    fn family(&mut self, fam: &Family) {
        let name = match self.f {
            Format::OpenMetrics => fam.name.strip_suffix("_total").unwrap_or(fam.name),
            Format::Text => fam.name,
        };
        let _ = writeln!(self.s, "# HELP {name} {}", fam.help);
        let _ = writeln!(self.s, "# TYPE {name} {}", fam.kind);
        if self.f == Format::OpenMetrics && name.ends_with("_seconds") {
            let _ = writeln!(self.s, "# UNIT {name} seconds");
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.s.push_str(name);
        let mut first = true;
        let common = self.common.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        for (k, v) in labels.iter().copied().chain(common) {
            self.s.push(if first { '{' } else { ',' });
            first = false;
            self.s.push_str(k);
            self.s.push_str("=\"");
            escape_into(&mut self.s, v);
            self.s.push('"');
        }
        if !first {
            self.s.push('}');
        }
        let _ = write!(self.s, " {value}");
        match (self.at_ms, self.f) {
            (None, _) => {}
            (Some(ms), Format::Text) => {
                let _ = write!(self.s, " {ms}");
            }
            // OpenMetrics timestamps are seconds.
            (Some(ms), Format::OpenMetrics) => {
                let _ = write!(
                    self.s,
                    " {}.{:03}",
                    ms.div_euclid(1000),
                    ms.rem_euclid(1000)
                );
            }
        }
        self.s.push('\n');
    }
}

/// Label value escaping, the same in both formats: backslash, double quote, line feed.
fn escape_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A float as both formats spell it (`+Inf`, `-Inf`, `NaN`, otherwise the shortest form).
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The series of one target: the whole of it (no `op` label) for a read-only run, else one per
/// op of the mix that has seen requests, labelled with it.
fn by_op(c: &Cum) -> Vec<(Option<&'static str>, &Cum)> {
    if c.ops.is_empty() {
        return vec![(None, c)];
    }
    Op::ALL
        .iter()
        .zip(&c.ops)
        .filter(|(_, o)| o.hits + o.misses + o.errors.iter().sum::<u64>() > 0)
        .map(|(op, o)| (Some(op.name()), o))
        .collect()
}

/// The request duration histogram per target (and op).
fn durations(o: &mut Out, points: &[Point]) {
    o.family(&DURATION);
    for p in points {
        o.at_ms = p.stamp();
        for (op, c) in by_op(&p.c) {
            let mut labels = vec![("target", p.target.as_str())];
            labels.extend(op.map(|op| ("op", op)));
            histogram(o, &DURATION, labels, c);
        }
    }
}

/// One histogram series of `fam`: cumulative buckets, sum and count.
fn histogram<'a>(o: &mut Out, fam: &Family, mut labels: Vec<(&'a str, &'a str)>, c: &Cum) {
    let bucket = format!("{}_bucket", fam.name);
    let n = labels.len();
    let mut acc = 0u64;
    for (i, (le, _)) in BUCKETS.iter().enumerate() {
        acc += c.buckets[i];
        labels.push(("le", le));
        o.sample(&bucket, &labels, acc);
        labels.truncate(n);
    }
    acc += c.buckets[BUCKETS.len()];
    labels.push(("le", "+Inf"));
    o.sample(&bucket, &labels, acc);
    labels.truncate(n);
    o.sample(
        &format!("{}_sum", fam.name),
        &labels,
        float(c.sum_ns as f64 / 1e9),
    );
    o.sample(&format!("{}_count", fam.name), &labels, c.count);
}

/// A set's servers one by one: what was routed to each and its replies' latencies.
fn servers(o: &mut Out, points: &[Point]) {
    let sets: Vec<(&Point, Vec<ServerCum>)> = points
        .iter()
        .map(|p| (p, p.servers()))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    if sets.is_empty() {
        return;
    }
    o.family(&SERVER_REQUESTS);
    for (p, servers) in &sets {
        o.at_ms = p.stamp();
        for s in servers {
            let labels = [("target", p.target.as_str()), ("server", s.name.as_str())];
            o.sample(SERVER_REQUESTS.name, &labels, s.routed);
        }
    }
    o.family(&SERVER_DURATION);
    for (p, servers) in &sets {
        o.at_ms = p.stamp();
        for s in servers {
            let labels = vec![("target", p.target.as_str()), ("server", s.name.as_str())];
            histogram(o, &SERVER_DURATION, labels, &s.latency);
        }
    }
}

/// The runs' CIs so far: each bound a sample, none for a figure without one.
fn cis(o: &mut Out, points: &[Point]) {
    let with: Vec<(&Point, &crate::stats::Figures)> = points
        .iter()
        .filter_map(|p| p.precision.as_ref().map(|f| (p, f)))
        .collect();
    if with.iter().any(|(_, f)| f.qps.ci().is_some()) {
        o.family(&QPS_CI);
        for (p, f) in &with {
            o.at_ms = p.stamp();
            if let Some(c) = f.qps.ci() {
                for (bound, v) in [("low", c.low), ("high", c.high)] {
                    o.sample(
                        QPS_CI.name,
                        &[("target", &p.target), ("bound", bound)],
                        float(v),
                    );
                }
            }
        }
    }
    let pcts = |f: &'_ crate::stats::Figures| {
        [
            ("0.5", &f.p50),
            ("0.9", &f.p90),
            ("0.99", &f.p99),
            ("0.999", &f.p999),
        ]
        .map(|(q, p)| (q, p.ci().cloned()))
    };
    if with
        .iter()
        .any(|(_, f)| pcts(f).iter().any(|(_, c)| c.is_some()))
    {
        o.family(&LATENCY_CI);
        for (p, f) in &with {
            o.at_ms = p.stamp();
            for (q, c) in pcts(f) {
                let Some(c) = c else { continue };
                for (bound, v) in [("low", c.low), ("high", c.high)] {
                    let labels = [
                        ("target", p.target.as_str()),
                        ("quantile", q),
                        ("bound", bound),
                    ];
                    o.sample(LATENCY_CI.name, &labels, float(v / 1e6));
                }
            }
        }
    }
}

/// `valid`: the runs' verdict, once the run has ended.
pub(crate) fn render(
    points: &[Point],
    common: &[(String, String)],
    valid: Option<bool>,
    f: Format,
) -> String {
    let points: Vec<Point> = points.iter().map(Point::now).collect();
    let points = &points[..];
    let mut o = Out {
        s: String::with_capacity(2048 + points.len() * 4096),
        f,
        common,
        at_ms: None,
    };
    o.family(&BUILD_INFO);
    o.sample(
        BUILD_INFO.name,
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    if !points.is_empty() {
        o.family(&REQUESTS);
        for p in points {
            o.at_ms = p.stamp();
            for (op, c) in by_op(&p.c) {
                let errors: u64 = c.errors.iter().sum();
                for (outcome, n) in [("hit", c.hits), ("miss", c.misses), ("error", errors)] {
                    let mut labels = vec![("target", p.target.as_str())];
                    labels.extend(op.map(|op| ("op", op)));
                    labels.push(("outcome", outcome));
                    o.sample(REQUESTS.name, &labels, n);
                }
            }
        }
        o.family(&ERRORS);
        for p in points {
            o.at_ms = p.stamp();
            for k in ErrorKind::ALL {
                o.sample(
                    ERRORS.name,
                    &[("target", &p.target), ("kind", k.name())],
                    p.c.errors[k.index()],
                );
            }
        }
        o.family(&RECONNECTS);
        for p in points {
            o.at_ms = p.stamp();
            o.sample(RECONNECTS.name, &[("target", &p.target)], p.c.reconnects);
        }
        durations(&mut o, points);
        o.family(&QPS);
        for p in points {
            o.at_ms = p.stamp();
            o.sample(QPS.name, &[("target", &p.target)], float(p.qps));
        }
        o.family(&IN_FLIGHT);
        for p in points {
            o.at_ms = p.stamp();
            o.sample(IN_FLIGHT.name, &[("target", &p.target)], p.in_flight);
        }
        o.family(&CONNECTIONS);
        for p in points {
            o.at_ms = p.stamp();
            o.sample(CONNECTIONS.name, &[("target", &p.target)], p.connections);
        }
        if points.iter().any(|p| p.rate.is_some()) {
            o.family(&TARGET_RATE);
            for p in points {
                o.at_ms = p.stamp();
                if let Some(r) = p.rate {
                    o.sample(TARGET_RATE.name, &[("target", &p.target)], float(r));
                }
            }
        }
        cis(&mut o, points);
        servers(&mut o, points);
    }
    if let Some(v) = valid {
        o.at_ms = None;
        o.family(&RUN_VALID);
        o.sample(RUN_VALID.name, &[], u8::from(v));
    }
    if f == Format::OpenMetrics {
        o.s.push_str("# EOF\n");
    }
    o.s
}
