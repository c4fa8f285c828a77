//! The result document: what `--format json` prints and what `results/*.json` holds.
//! Its JSON schema is `schemas/result.schema.json`; a test checks real output against it.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::proto::target::ServerCount;
use crate::totals::{Percentiles, Totals};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResultFile {
    pub loadgen_version: String,
    pub started_at: String,
    pub interrupted: bool,
    pub settings: Settings,
    pub machine: Machine,
    /// `--instance`: which generator wrote this (when several run together).
    #[serde(default)]
    pub instance: Option<String>,
    pub runs: Vec<RunResult>,
    /// `--sweep`: one table per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<crate::sweep::SweepResult>,
    /// `--slo`: the search per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<crate::sweep::SloResult>,
}

impl ResultFile {
    /// Masks every password and secret in the strings that can carry a URL or a server's
    /// message: a file written by an older loadgen (read by `merge`) may hold them.
    pub fn redact(&mut self) {
        use crate::url::{redact_str, redact_text};
        for r in &mut self.runs {
            r.redact();
        }
        for s in &mut self.sweeps {
            s.target = redact_str(&s.target);
        }
        for s in &mut self.slo {
            s.target = redact_str(&s.target);
        }
        if let Some(i) = &mut self.instance {
            *i = redact_text(i);
        }
    }
}

impl RunResult {
    /// See `ResultFile::redact`.
    pub fn redact(&mut self) {
        use crate::url::{redact_str, redact_text};
        self.target = redact_str(&self.target);
        for e in &mut self.error_samples {
            *e = redact_text(e);
        }
        let note = self.server_observed.as_mut().and_then(|o| o.note.as_mut());
        for m in [&mut self.connect_error, &mut self.stopped_early]
            .into_iter()
            .flatten()
            .chain(note)
        {
            *m = redact_text(m);
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub connections: usize,
    pub pipeline: usize,
    pub threads: usize,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub keys: String,
    pub dist: String,
    pub mode: String,
    pub verify: bool,
    pub timeout_ms: u64,
    pub interval_ms: u64,
    pub seed: u64,
    pub rate: Option<f64>,
    pub arrival: String,
    pub query: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub os: String,
    pub hostname: String,
}

impl Machine {
    pub fn here() -> Machine {
        Machine {
            cores: crate::plan::default_threads(),
            os: std::env::consts::OS.to_string(),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// The target URL with any password replaced by ***.
    pub target: String,
    pub kind: String,
    pub started_at: String,
    pub interrupted: bool,
    pub stopped_early: Option<String>,
    /// Measured window (after the warm-up), seconds.
    pub duration_s: f64,
    /// Answered lookups (hits + misses) per second over the measured window.
    pub qps: f64,
    /// hits + misses + errors.
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: BTreeMap<String, u64>,
    pub error_total: u64,
    pub error_samples: Vec<String>,
    pub reconnects: u64,
    pub warmup_requests: u64,
    /// The connect phase, before the clock starts: connections opened and the seconds it took.
    #[serde(default)]
    pub connected: u64,
    #[serde(default)]
    pub connect_s: f64,
    /// Connections that failed in the connect phase (each is retried in the run, where a
    /// failure counts as a `connect` error), and the first failure's message.
    #[serde(default)]
    pub connect_failed: u64,
    #[serde(default)]
    pub connect_error: Option<String>,
    /// Done minus due: with `-R`, corrected for coordinated omission; else equal to service.
    pub latency_us: Percentiles,
    /// Done minus sent.
    pub service_us: Percentiles,
    /// Sent minus due (paced runs).
    pub lag_us: Option<Percentiles>,
    pub rate: Option<RateResult>,
    pub client_cpu: ClientCpu,
    pub server_observed: Option<ServerObserved>,
    pub timeline: Vec<TimelineRow>,
    /// The run's latency histogram, HdrHistogram V2 compressed, base64: merge results exactly.
    pub histogram: String,
    #[serde(skip)]
    pub totals: Option<Totals>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RateResult {
    pub asked: f64,
    pub achieved: f64,
    /// Requests sent more than 1 ms after their due time.
    pub late: u64,
    pub kept: bool,
}

impl RateResult {
    pub fn of(asked: f64, sent: u64, window_s: f64, totals: &Totals) -> RateResult {
        let achieved = if window_s > 0.0 {
            sent as f64 / window_s
        } else {
            0.0
        };
        let late = totals.lag.count_between(1_000_000, u64::MAX);
        RateResult {
            asked,
            achieved: (achieved * 10.0).round() / 10.0,
            late,
            kept: (achieved - asked).abs() <= asked * 0.01,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClientCpu {
    /// CPU time of the worker threads (the generator itself), seconds.
    pub worker_s: f64,
    /// CPU time of the whole process (includes an embedded server), seconds.
    pub process_s: f64,
    /// Worker CPU per request, microseconds.
    pub per_request_us: f64,
    /// Worker CPU / (wall time x worker threads): near 1 means the generator is saturated.
    pub utilization: f64,
    pub saturated: bool,
}

impl ClientCpu {
    pub fn new(
        worker_ns: u64,
        process_ns: u64,
        wall_ns: u64,
        threads: usize,
        requests: u64,
    ) -> ClientCpu {
        let util = if wall_ns > 0 {
            worker_ns as f64 / (wall_ns as f64 * threads as f64)
        } else {
            0.0
        };
        ClientCpu {
            worker_s: (worker_ns as f64 / 1e6).round() / 1e3,
            process_s: (process_ns as f64 / 1e6).round() / 1e3,
            per_request_us: if requests > 0 {
                (worker_ns as f64 / requests as f64).round() / 1e3
            } else {
                0.0
            },
            utilization: (util * 1000.0).round() / 1000.0,
            saturated: util > 0.9,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServerObserved {
    /// What was read: e.g. `pg_stat_statements.calls`, `memcached get_hits+get_misses`.
    pub source: String,
    /// The counter's change over the run (None when it could not be read).
    pub delta: Option<u64>,
    /// What loadgen sent that the server should have counted: requests + warm-up requests.
    pub expected: u64,
    pub matches: bool,
    pub note: Option<String>,
}

impl ServerObserved {
    pub fn of(
        before: Result<Option<ServerCount>, String>,
        after: Result<Option<ServerCount>, String>,
        totals: &Totals,
    ) -> Option<ServerObserved> {
        // Connect failures never reached the server; every other request did, or may have.
        let connect = totals.counts.errors[crate::outcome::ErrorKind::Connect.index()]
            + totals.warm.errors[crate::outcome::ErrorKind::Connect.index()];
        let expected = totals.counts.requests() + totals.warm.requests() - connect;
        let unsure = totals.counts.error_total() + totals.warm.error_total() - connect;
        match (before, after) {
            (Ok(Some(b)), Ok(Some(a))) => {
                let delta = a.value.saturating_sub(b.value);
                let ok = delta <= expected && delta + unsure >= expected;
                Some(ServerObserved {
                    source: a.source,
                    delta: Some(delta),
                    expected,
                    matches: ok,
                    note: (!ok).then(|| {
                        format!("the server counted {delta} lookups but loadgen sent {expected} (warm-up included)")
                    }),
                })
            }
            (Ok(None), _) | (_, Ok(None)) => None,
            (Err(e), _) | (_, Err(e)) => Some(ServerObserved {
                source: "unavailable".into(),
                delta: None,
                expected,
                matches: false,
                note: Some(e),
            }),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimelineRow {
    /// Seconds since the end of the warm-up, at the end of this interval.
    pub t_s: f64,
    pub qps: f64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub in_flight: u64,
    pub connections: u64,
    pub reconnects: u64,
}

impl TimelineRow {
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        iv: &Totals,
        _k: u64,
        t_end_ns: u64,
        warm_ns: u64,
        len_s: f64,
        warm: bool,
        in_flight: u64,
        conns: u64,
    ) -> TimelineRow {
        let c = if warm { &iv.warm } else { &iv.counts };
        let p = Percentiles::of(&iv.latency);
        // A warm-up interval shows everything that completed in it, counted or not.
        let answered = iv.counts.hits
            + iv.counts.misses
            + if warm {
                iv.warm.hits + iv.warm.misses
            } else {
                0
            };
        TimelineRow {
            t_s: ((t_end_ns as f64 - warm_ns as f64) / 1e6).round() / 1e3,
            qps: if len_s > 0.0 {
                (answered as f64 / len_s).round()
            } else {
                0.0
            },
            hits: c.hits,
            misses: c.misses,
            errors: c.error_total(),
            p50_us: p.p50,
            p99_us: p.p99,
            in_flight,
            connections: conns,
            reconnects: c.reconnects,
        }
    }

    pub fn progress_line(&self, iv: &Totals, len_s: f64) -> String {
        let errs = iv.counts.error_total() + iv.warm.error_total();
        let warm = self.t_s <= 0.0;
        let label = if self.t_s <= 0.0 {
            "warm-up".to_string()
        } else if ((self.t_s * 10.0).round() - self.t_s * 10.0).abs() > 0.05 {
            // A short last interval (replies to requests sent before the end): its own end
            // time, so it does not look like a second row for the same second.
            format!("{:>6.2}s", self.t_s)
        } else {
            format!("{:>6.1}s", self.t_s)
        };
        format!(
            "[{label}] {:>10} qps  p50 {:>9}  p99 {:>9}  err/s {:>6}  reconn/s {:>4}  conns {:>4}  in-flight {:>4}",
            crate::report::text::thousands(self.qps as u64),
            // warm-up requests are not timed: no percentiles to show for them
            if warm { "-".to_string() } else { crate::report::text::micros(self.p50_us) },
            if warm { "-".to_string() } else { crate::report::text::micros(self.p99_us) },
            (errs as f64 / len_s.max(1e-9)).round() as u64,
            ((iv.counts.reconnects + iv.warm.reconnects) as f64 / len_s.max(1e-9)).round() as u64,
            self.connections,
            self.in_flight
        )
    }
}

/// V2 deflate encoding, base64 (standard alphabet, padded): the format HistogramLogProcessor and `hdrhistogram` read.
pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut buf = Vec::new();
    if V2DeflateSerializer::new().serialize(h, &mut buf).is_err() {
        return String::new();
    }
    STANDARD.encode(&buf)
}

pub fn decode_histogram(s: &str) -> Result<hdrhistogram::Histogram<u64>, String> {
    use hdrhistogram::serialization::Deserializer;
    let bytes = STANDARD
        .decode(s)
        .map_err(|_| "histogram is not valid base64")?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("histogram does not decode: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_round_trip() {
        let mut h = crate::recorder::new_histogram();
        for v in [1_000u64, 2_000, 50_000, 1_000_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
    }
}
