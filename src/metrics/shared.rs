//! The numbers the hook publishes and a scrape reads: updated once per interval, swapped behind
//! an `Arc` so a scrape never holds a lock while it renders.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::point::{Cum, Point};
use super::render::{self, Format};
use crate::control::{target_tag, IntervalView};

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
    qps: f64,
    in_flight: u64,
    connections: u64,
    rate: Option<f64>,
    at_ms: i64,
}

impl Series {
    fn point(&self) -> Point {
        let mut c = self.base.clone();
        c.add(&self.cur);
        Point {
            target: self.label.clone(),
            c,
            qps: self.qps,
            in_flight: self.in_flight,
            connections: self.connections,
            rate: self.rate,
            at_ms: self.at_ms,
        }
    }
}

pub(crate) struct Shared {
    common: Vec<(String, String)>,
    series: Mutex<Vec<Series>>,
    published: RwLock<Arc<Vec<Point>>>,
}

impl Shared {
    pub(crate) fn new(common: Vec<(String, String)>) -> Shared {
        Shared {
            common,
            series: Mutex::new(Vec::new()),
            published: RwLock::new(Arc::new(Vec::new())),
        }
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
                    qps: 0.0,
                    in_flight: 0,
                    connections: 0,
                    rate: None,
                    at_ms: 0,
                });
                all.len() - 1
            }
        };
        let s = &mut all[pos];
        if s.run_start.to_bits() != v.run_start_unix.to_bits() {
            let done = std::mem::take(&mut s.cur);
            s.base.add(&done);
            s.run_start = v.run_start_unix;
        }
        s.cur = c;
        s.qps = qps;
        // After the last interval nothing is in flight and the connections are closed.
        s.in_flight = if v.last { 0 } else { v.in_flight };
        s.connections = if v.last { 0 } else { v.connections };
        s.rate = v.rate;
        // Strictly increasing: Prometheus rejects a changed value under a timestamp it has seen.
        let at_ms = ((v.run_start_unix + v.end_s) * 1e3).round() as i64;
        s.at_ms = at_ms.max(s.at_ms + 1);
        let points: Vec<Point> = all.iter().map(Series::point).collect();
        drop(all);
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(points);
    }

    pub(crate) fn render(&self, format: Format) -> String {
        let points = self
            .published
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        render::render(&points, &self.common, format)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
