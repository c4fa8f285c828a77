//! `GET /live.json`: what the live page draws, from the same snapshot a scrape of `/metrics`
//! reads, so the two agree at every interval's timestamp. Per target the running totals and the
//! timeline rows so far (the rows the result file will hold, merged when there are many).

use serde::Serialize;

use super::point::Point;
use crate::downsample::{merge, spans, Columns, MAX_POINTS};
use crate::result::{Settings, TimelineRow};

/// One target's rows so far, beside its [`Point`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Rows {
    pub kind: String,
    /// The redacted URL.
    pub target: String,
    pub rows: Vec<TimelineRow>,
    /// Unix ms at the end of each row's interval (the samples' timestamp on `/metrics`).
    pub at_ms: Vec<i64>,
}

/// What the page says about the run as a whole.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunInfo {
    pub settings: Option<Settings>,
    pub started_at: String,
    /// The run has ended: `/` serves its report (when there is one).
    pub done: bool,
    /// Every run's verdict is valid (known once the run has ended with a result).
    pub valid: Option<bool>,
}

#[derive(Serialize)]
struct Live<'a> {
    done: bool,
    version: &'static str,
    started_at: &'a str,
    settings: Option<&'a Settings>,
    /// How often the page fetches this again.
    interval_ms: u64,
    targets: Vec<Target<'a>>,
}

#[derive(Serialize)]
struct Target<'a> {
    /// The `target` label on `/metrics`.
    name: &'a str,
    kind: &'a str,
    target: &'a str,
    /// The end of the last interval, unix ms: the timestamp of the `/metrics` samples.
    at_ms: i64,
    /// Totals as `/metrics` has them (warm-up included).
    requests: u64,
    hits: u64,
    misses: u64,
    errors: u64,
    reconnects: u64,
    /// `loadgen_qps`: the last interval's answered lookups per second.
    qps: f64,
    in_flight: u64,
    connections: u64,
    rate: Option<f64>,
    /// Intervals per row at most (1: none merged).
    merged: usize,
    /// The timeline so far, as the report's page has it.
    rows: Columns,
    /// Per row, the end of its (last) interval, unix ms.
    rows_at_ms: Vec<i64>,
}

pub(crate) fn json(points: &[Point], rows: &[Rows], run: &RunInfo) -> String {
    let interval_ms = run.settings.as_ref().map_or(1000, |s| s.interval_ms.max(1));
    let interval_s = interval_ms as f64 / 1000.0;
    let points: Vec<Point> = points.iter().map(Point::now).collect();
    let targets = points
        .iter()
        .zip(rows)
        .map(|(p, r)| {
            let spans = spans(&r.rows, interval_s, MAX_POINTS);
            let merged = spans.iter().map(|s| s.len()).max().unwrap_or(1);
            let mut rows = Columns::default();
            let mut rows_at_ms = Vec::with_capacity(spans.len());
            for s in spans {
                rows_at_ms.push(r.at_ms[s.end - 1]);
                rows.push(&merge(&r.rows, s, interval_s));
            }
            let errors = p.c.errors.iter().sum();
            Target {
                name: &p.target,
                kind: &r.kind,
                target: &r.target,
                at_ms: p.at_ms,
                requests: p.c.hits + p.c.misses + errors,
                hits: p.c.hits,
                misses: p.c.misses,
                errors,
                reconnects: p.c.reconnects,
                qps: p.qps,
                in_flight: p.in_flight,
                connections: p.connections,
                rate: p.rate,
                merged,
                rows,
                rows_at_ms,
            }
        })
        .collect();
    let live = Live {
        done: run.done,
        version: env!("CARGO_PKG_VERSION"),
        started_at: &run.started_at,
        settings: run.settings.as_ref(),
        interval_ms,
        targets,
    };
    serde_json::to_string(&live).expect("the live data serializes")
}
