//! `loadgen trace-bench FILE`: how fast one core reads and parses a trace, so a user can see that
//! the trace will not be the bottleneck of a replay at the rate they ask for.

use std::path::Path;
use std::time::{Duration, Instant};

use super::line::TraceOp;
use super::reader::{TraceError, TraceReader};

#[derive(Debug, Default)]
pub struct BenchResult {
    pub lines: u64,
    pub elapsed: Duration,
    /// Requests per trace op, in the order of [`TraceOp::ALL`].
    pub per_op: [u64; 11],
    /// First and last timestamp (µs), when the trace has them.
    pub span_us: Option<(u64, u64)>,
    pub key_bytes: u64,
}

impl BenchResult {
    pub fn lines_per_sec(&self) -> f64 {
        self.lines as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// One line for the terminal: count, time, rate, per-op counts, the trace's own span.
    pub fn render(&self) -> String {
        let ops: Vec<String> = TraceOp::ALL
            .iter()
            .zip(self.per_op)
            .filter(|(_, n)| *n > 0)
            .map(|(op, n)| format!("{} {n}", op.name()))
            .collect();
        let span = match self.span_us {
            Some((a, b)) => format!("; timestamps {:.3} s first to last", (b - a) as f64 / 1e6),
            None => String::new(),
        };
        format!(
            "{} lines parsed in {:.3} s on one core: {:.0} lines/s ({}){span}",
            self.lines,
            self.elapsed.as_secs_f64(),
            self.lines_per_sec(),
            ops.join(", ")
        )
    }
}

/// Reads and parses every line of `path` on the calling thread.
pub fn bench(path: &Path) -> Result<BenchResult, TraceError> {
    let start = Instant::now();
    let mut r = TraceReader::open(path)?;
    let mut res = BenchResult::default();
    while let Some(l) = r.next_line()? {
        res.lines += 1;
        res.per_op[l.op as usize] += 1;
        res.key_bytes += l.key.len() as u64;
        if let Some(t) = l.time_us {
            res.span_us = Some(match res.span_us {
                Some((a, b)) => (a.min(t), b.max(t)),
                None => (t, t),
            });
        }
    }
    res.elapsed = start.elapsed();
    Ok(res)
}
