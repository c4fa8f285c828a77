//! The numbers the hook publishes and a scrape reads: updated once per interval, swapped behind
//! an `Arc` so a scrape never holds a lock while it renders. `/metrics` and `/live.json` render
//! from the same snapshot.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::live::{self, Rows, RunInfo};
use super::pages::Pages;
use super::point::{servers, Cum, Live, Point, ServerCum};
use super::render::{self, Format};
use crate::cells::Cells;
use crate::control::{target_tag, IntervalView};
use crate::proto::server_latency::SetMembers;
use crate::result::{ResultFile, Settings};
use crate::stats::Figures;

/// One target as the hook tracks it.
#[derive(Clone, Debug)]
struct Series {
    index: usize,
    kind: String,
    label: String,
    /// `run_start_unix` of the run `cur` belongs to; a new value starts a new run.
    run_start: f64,
    /// Finished runs of this target (sweep and SLO steps).
    base: Cum,
    cur: Cum,
    /// The current run's live blocks, once its first interval has handed them over.
    cells: Option<Arc<Cells>>,
    per_op: bool,
    qps: f64,
    in_flight: u64,
    connections: u64,
    rate: Option<f64>,
    at_ms: i64,
    /// Unix seconds where the live timeline's time axis starts: the end of the first run's
    /// warm-up (NaN until a row arrives). Later runs (sweep steps) follow on the same axis.
    origin: f64,
    /// Seconds the current run's rows are moved along that axis (NaN until its first row).
    offset: f64,
    rows: Rows,
    /// A set's servers: finished runs', and the current run's live view.
    servers_base: Vec<ServerCum>,
    members: Option<SetMembers>,
    /// The current run's CIs so far (None until it has measured intervals).
    precision: Option<Figures>,
}

impl Series {
    /// The current run's numbers: live when it has blocks.
    fn current(&self) -> Cum {
        match &self.cells {
            Some(cells) => Cum::of_cells(cells, self.per_op),
            None => self.cur.clone(),
        }
    }

    fn point(&self) -> Point {
        let mut c = self.base.clone();
        c.add(&self.current());
        Point {
            target: self.label.clone(),
            c,
            qps: self.qps,
            in_flight: self.in_flight,
            connections: self.connections,
            rate: self.rate,
            at_ms: self.at_ms,
            live: self.cells.as_ref().map(|cells| Live {
                base: self.base.clone(),
                cells: cells.clone(),
                per_op: self.per_op,
            }),
            servers_base: self.servers_base.clone(),
            members: self.members.clone(),
            precision: self.precision.clone(),
        }
    }
}

/// One published state: per target its point and its rows so far.
#[derive(Default)]
struct Snapshot {
    points: Vec<Point>,
    rows: Vec<Rows>,
}

pub(crate) struct Shared {
    common: Vec<(String, String)>,
    series: Mutex<Vec<Series>>,
    published: RwLock<Arc<Snapshot>>,
    run: RwLock<Arc<RunInfo>>,
    /// The finished run's HTML report, which `/` serves from then on.
    report: RwLock<Option<Arc<String>>>,
    pages: Pages,
}

impl Shared {
    pub(crate) fn new(common: Vec<(String, String)>, pages: Pages) -> Shared {
        Shared {
            common,
            series: Mutex::new(Vec::new()),
            published: RwLock::new(Arc::new(Snapshot::default())),
            run: RwLock::new(Arc::new(RunInfo {
                started_at: crate::date::now_rfc3339(),
                ..RunInfo::default()
            })),
            report: RwLock::new(None),
            pages,
        }
    }

    /// The settings line the live page shows (and the interval it polls at).
    pub(crate) fn set_settings(&self, settings: Settings) {
        let mut run = (**read(&self.run)).clone();
        run.settings = Some(settings);
        *write(&self.run) = Arc::new(run);
    }

    /// The run has ended: `/` serves its report from now on (the page written beside the
    /// result), and `/live.json` says so. None: it ended without one (a set-up error).
    pub(crate) fn finish(&self, file: Option<&ResultFile>) {
        if let Some(f) = file {
            *write(&self.report) = Some(Arc::new((self.pages.report)(f)));
        }
        let mut run = (**read(&self.run)).clone();
        run.done = true;
        run.valid = file.map(|f| f.runs.iter().all(|r| r.verdict.valid));
        *write(&self.run) = Arc::new(run);
    }

    /// `GET /`: the live page, or the report once the run has ended; and its CSP.
    pub(crate) fn page(&self) -> (Arc<String>, &'static str) {
        if let Some(r) = read(&self.report).clone() {
            return (r, self.pages.report_csp);
        }
        (
            Arc::new((self.pages.live)(&self.live_json())),
            self.pages.live_csp,
        )
    }

    pub(crate) fn live_json(&self) -> String {
        let snap = read(&self.published).clone();
        let run = read(&self.run).clone();
        live::json(&snap.points, &snap.rows, &run)
    }

    pub(crate) fn update(&self, v: &IntervalView) {
        let c = Cum::of(v.totals);
        let iv = v.interval;
        let answered = iv.counts.hits + iv.counts.misses + iv.warm.hits + iv.warm.misses;
        let qps = if v.last || v.interval_s <= 0.0 {
            0.0
        } else {
            answered as f64 / v.interval_s
        };
        let mut all = lock(&self.series);
        let pos = match all.iter().position(|s| s.index == v.target_index) {
            Some(p) => p,
            None => {
                let first = all.iter().find(|s| s.kind == v.kind);
                let first = first.map_or(v.target_index, |s| s.index);
                let label = target_tag(v.kind, v.target_index, first);
                all.push(Series {
                    index: v.target_index,
                    kind: v.kind.to_string(),
                    label,
                    run_start: f64::NAN,
                    base: Cum::default(),
                    cur: Cum::default(),
                    cells: None,
                    per_op: false,
                    qps: 0.0,
                    in_flight: 0,
                    connections: 0,
                    rate: None,
                    at_ms: 0,
                    origin: f64::NAN,
                    offset: f64::NAN,
                    servers_base: Vec::new(),
                    members: None,
                    precision: None,
                    rows: Rows {
                        kind: v.kind.to_string(),
                        target: crate::url::redact_str(v.target),
                        ..Rows::default()
                    },
                });
                all.len() - 1
            }
        };
        let s = &mut all[pos];
        if s.run_start.to_bits() != v.run_start_unix.to_bits() {
            let done = s.current();
            s.base.add(&done);
            s.cur = Cum::default();
            s.cells = None;
            s.run_start = v.run_start_unix;
            s.offset = f64::NAN;
            s.servers_base = servers(&s.servers_base, s.members.as_ref());
            s.precision = None;
        }
        if let Some(f) = v.precision {
            s.precision = Some(f.clone());
        }
        s.members = v.members.cloned();
        s.cur = c;
        s.cells = v.cells.cloned();
        s.per_op = !v.totals.ops.is_empty();
        s.qps = qps;
        // After the last interval nothing is in flight and the connections are closed.
        s.in_flight = if v.last { 0 } else { v.in_flight };
        s.connections = if v.last { 0 } else { v.connections };
        s.rate = v.rate;
        // Strictly increasing: Prometheus rejects a changed value under a timestamp it has seen.
        let at_ms = ((v.run_start_unix + v.end_s) * 1e3).round() as i64;
        s.at_ms = at_ms.max(s.at_ms + 1);
        if let Some(row) = v.row {
            // t_s counts from the end of this run's warm-up.
            let warm_end = v.run_start_unix + v.end_s - row.t_s;
            if s.offset.is_nan() {
                if s.origin.is_nan() {
                    s.origin = warm_end;
                }
                s.offset = ((warm_end - s.origin) * 1e3).round() / 1e3;
            }
            let mut row = row.clone();
            if s.offset != 0.0 {
                row.t_s = ((row.t_s + s.offset) * 1e3).round() / 1e3;
            }
            s.rows.rows.push(row);
            s.rows.at_ms.push(s.at_ms);
        }
        let snap = Snapshot {
            points: all.iter().map(Series::point).collect(),
            rows: all.iter().map(|s| s.rows.clone()).collect(),
        };
        drop(all);
        *write(&self.published) = Arc::new(snap);
    }

    pub(crate) fn render(&self, format: Format) -> String {
        let snap = read(&self.published).clone();
        let valid = read(&self.run).valid;
        render::render(&snap.points, &self.common, valid, format)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
