//! `--hdr-log FILE`: the run's latency as an HdrHistogram interval log, one histogram per
//! post-warm-up interval, in the format Java's `HistogramLogProcessor` (and the `hdrhistogram`
//! crate's `IntervalLogIterator`) read:
//!
//! ```text
//! #[Histogram log format version 1.3]
//! # loadgen 0.1.0 ... values are latencies in NANOSECONDS ...
//! #[StartTime: 1764697200.123 (seconds since epoch)]
//! #[BaseTime: 1764697200.123 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! Tag=postgres,1.000,1.000,1523711.000,HISTFAAAA...
//! ```
//!
//! Values (and the `Interval_Max` column, whose max value divisor is 1) are nanoseconds: this is
//! also what Java's tools assume by default (`HistogramLogProcessor` prints milliseconds with its
//! default `-outputValueUnitRatio 1000000`). Each line is tagged with the target: `<kind>`, or
//! `<kind>_<index>` for a later target of a kind already seen in this log (index = 0-based position
//! on the command line), since one run may cover several targets. Interval timestamps are seconds
//! since `BaseTime`, the start of the first target's run.
//!
//! An interval is written (and flushed) as soon as the collector hands it over, so a crash keeps
//! everything written until then. Warm-up intervals are skipped; an interval that straddles the
//! end of the warm-up is written with its counted samples only (the recorder never puts warm-up
//! requests into the latency histogram), so the log's intervals add up to exactly the run's
//! latency histogram (`runs[].histogram` in the JSON result).

use crate::error::ConfigError;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;

use crate::control::IntervalView;
use crate::output::Dest;

/// The legend line Java's `HistogramLogWriter` writes before the first interval.
pub const LEGEND: &str =
    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"";

pub struct IntervalLog {
    path: PathBuf,
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
    /// Unix time of the first run's start, once StartTime/BaseTime and the legend are written.
    base_unix: Option<f64>,
    /// (kind, target index) pairs seen, for the tags.
    targets: Vec<(String, usize)>,
    /// First write error; later intervals are not attempted, `finish` reports it.
    error: Option<String>,
}

impl IntervalLog {
    /// Creates (truncates) the log file and writes the comment header. Fails when the file
    /// cannot be created, so a bad path is a setup error before anything runs. A device, FIFO
    /// or descriptor (`/dev/stderr`) is written through; standard output is refused, since the
    /// report goes there and the two would interleave.
    pub fn create(path: &Path) -> Result<IntervalLog, ConfigError> {
        let dest = Dest::of(path)
            .map_err(|e| format!("cannot create --hdr-log {}: {e}", path.display()))?;
        if dest.is_stdout() {
            return Err(ConfigError(format!(
                "--hdr-log {} is standard output, where the report goes: give a file (or /dev/stderr)",
                path.display()
            )));
        }
        let file = dest
            .open_stream()
            .map_err(|e| format!("cannot create --hdr-log {}: {e}", path.display()))?;
        let mut out = BufWriter::new(file);
        let header = format!(
            "#[Histogram log format version 1.3]\n\
             # loadgen {}: request latency (done - due: corrected for coordinated omission with -R)\n\
             # Units: histogram values are NANOSECONDS; Interval_Max is nanoseconds too (max value divisor 1).\n\
             # Java HistogramLogProcessor prints milliseconds by default (-outputValueUnitRatio 1000000); use 1000 for microseconds.\n\
             # Tag=<kind> per target (<kind>_<index> for a repeated kind); pass -tag <kind> to HistogramLogProcessor.\n\
             # Warm-up intervals are not written; timestamps are seconds since BaseTime (the run's start).\n",
            env!("CARGO_PKG_VERSION")
        );
        out.write_all(header.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| format!("cannot write --hdr-log {}: {e}", path.display()))?;
        Ok(IntervalLog {
            path: path.to_path_buf(),
            inner: Arc::new(Mutex::new(Inner {
                out,
                serializer: V2DeflateSerializer::new(),
                base_unix: None,
                targets: Vec::new(),
                error: None,
            })),
        })
    }

    /// The per-interval hook: writes and flushes one interval histogram (post-warm-up only).
    pub fn hook(&self, say: crate::sink::Sink) -> crate::control::Hook {
        let inner = self.inner.clone();
        let path = self.path.clone();
        Arc::new(move |v: &IntervalView| {
            let mut g = lock(&inner);
            if g.error.is_some() {
                return;
            }
            if let Err(e) = g.write(v) {
                let msg = format!("cannot write --hdr-log {}: {e}", path.display());
                say(&format!("loadgen: {msg}"));
                g.error = Some(msg);
            }
        })
    }

    /// Flushes the file; reports the first write error of the run, if any.
    pub fn finish(&self) -> Result<(), ConfigError> {
        let mut g = lock(&self.inner);
        if let Some(e) = &g.error {
            return Err(ConfigError(e.clone()));
        }
        // Pipes and devices cannot be synced (EINVAL); only a regular file is.
        g.out
            .flush()
            .and_then(|_| match g.out.get_ref().metadata() {
                Ok(m) if m.is_file() => g.out.get_ref().sync_data(),
                _ => Ok(()),
            })
            .map_err(|e| {
                ConfigError(format!(
                    "cannot write --hdr-log {}: {e}",
                    self.path.display()
                ))
            })
    }
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic elsewhere while holding the lock leaves a usable writer: keep logging.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `<kind>` for the first target of a kind, `<kind>_<index>` for a later target of the same kind.
fn tag_for(targets: &mut Vec<(String, usize)>, kind: &str, index: usize) -> String {
    if !targets.iter().any(|(k, i)| k == kind && *i == index) {
        targets.push((kind.to_string(), index));
    }
    let first = targets
        .iter()
        .find(|(k, _)| k == kind)
        .map(|(_, i)| *i)
        .unwrap_or(index);
    let tag = crate::control::target_tag(kind, index, first);
    // Tags may not hold ',', ' ', '\r' or '\n'; kinds never do, but be safe.
    tag.replace([',', ' ', '\r', '\n'], "_")
}

impl Inner {
    fn write(&mut self, v: &IntervalView) -> Result<(), ConfigError> {
        // Warm-up intervals hold no latency samples (warm-up requests are not timed); one that
        // straddles the warm-up end holds the counted ones, which belong in the log.
        if v.warm && v.interval.latency.is_empty() {
            return Ok(());
        }
        let base = match self.base_unix {
            Some(b) => b,
            None => {
                let t = UNIX_EPOCH + Duration::from_secs_f64(v.run_start_unix.max(0.0));
                let mut ser = V2DeflateSerializer::new();
                IntervalLogWriterBuilder::new()
                    .with_start_time(t)
                    .with_base_time(t)
                    .begin_log_with(&mut self.out, &mut ser)
                    .map_err(|e| e.to_string())?;
                writeln!(self.out, "{LEGEND}").map_err(|e| e.to_string())?;
                self.base_unix = Some(v.run_start_unix);
                v.run_start_unix
            }
        };
        let tag = tag_for(&mut self.targets, v.kind, v.target_index);
        let start = (v.run_start_unix - base + v.start_s).max(0.0);
        let len = (v.end_s - v.start_s).max(0.0);
        // No headers configured: this builder writes nothing itself, it only frames the line.
        let mut w = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|e| e.to_string())?;
        w.write_histogram(
            &v.interval.latency,
            Duration::from_secs_f64(start),
            Duration::from_secs_f64(len),
            Tag::new(&tag),
        )
        .map_err(|e| e.to_string())?;
        self.out.flush().map_err(|e| e.to_string())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TempDir;
    use crate::totals::Totals;
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    fn view<'a>(
        kind: &'a str,
        index: usize,
        start_s: f64,
        warm: bool,
        t: &'a Totals,
    ) -> IntervalView<'a> {
        IntervalView {
            target: "x",
            kind,
            target_index: index,
            start_s,
            end_s: start_s + 1.0,
            warm,
            last: false,
            run_start_unix: 1_700_000_000.25,
            totals: t,
            interval: t,
            interval_s: 1.0,
            in_flight: 0,
            connections: 1,
            rate: None,
            row: None,
            progress_row: None,
            cells: None,
            members: None,
            precision: None,
        }
    }

    #[test]
    fn tags_tell_repeated_kinds_apart() {
        let mut seen = Vec::new();
        assert_eq!(tag_for(&mut seen, "postgres", 0), "postgres");
        assert_eq!(tag_for(&mut seen, "memcache", 1), "memcache");
        assert_eq!(tag_for(&mut seen, "hs", 2), "hs");
        assert_eq!(tag_for(&mut seen, "hs", 3), "hs_3");
        assert_eq!(tag_for(&mut seen, "hs", 2), "hs");
    }

    #[test]
    fn writes_a_log_the_crate_reads_back() {
        let dir = TempDir::new("loadgen-hdrlog");
        let path = dir.join("t.hlog");
        let log = IntervalLog::create(&path).unwrap();
        let hook = log.hook(crate::sink::none());
        let empty = Totals::default();
        let mut full = Totals::default();
        for v in [1_000u64, 20_000, 3_000_000] {
            full.latency.record(v).unwrap();
        }
        hook(&view("postgres", 0, 0.0, true, &empty)); // warm-up: skipped
        hook(&view("postgres", 0, 1.0, false, &full));
        hook(&view("postgres", 0, 2.0, false, &full));
        hook(&view("memcache", 1, 0.0, false, &full));
        log.finish().unwrap();
        let text = std::fs::read(&path).unwrap();
        let s = String::from_utf8_lossy(&text);
        assert!(
            s.starts_with("#[Histogram log format version 1.3]\n"),
            "{s}"
        );
        assert!(s.contains("NANOSECONDS"));
        assert!(
            s.contains("#[StartTime: 1700000000.250 (seconds since epoch)]"),
            "{s}"
        );
        assert!(
            s.contains("#[BaseTime: 1700000000.250 (seconds since epoch)]"),
            "{s}"
        );
        assert!(s.contains(&format!("\n{LEGEND}\n")));
        let mut n = 0;
        let mut tags = Vec::new();
        let mut starts = Vec::new();
        for e in IntervalLogIterator::new(&text) {
            match e.unwrap() {
                LogEntry::Interval(ilh) => {
                    let bytes = STANDARD.decode(ilh.encoded_histogram()).unwrap();
                    let h: hdrhistogram::Histogram<u64> =
                        Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                    n += h.len();
                    assert_eq!(ilh.max(), h.max() as f64);
                    tags.push(ilh.tag().unwrap().as_str().to_string());
                    starts.push(ilh.start_timestamp().as_secs_f64());
                }
                LogEntry::StartTime(_) | LogEntry::BaseTime(_) => {}
            }
        }
        assert_eq!(n, 9);
        assert_eq!(tags, ["postgres", "postgres", "memcache"]);
        assert_eq!(starts, [1.0, 2.0, 0.0]);
    }

    #[test]
    fn a_bad_path_is_a_setup_error() {
        let e = IntervalLog::create(Path::new("/nonexistent-dir/x/y.hlog"))
            .err()
            .unwrap();
        assert!(e.contains("--hdr-log"), "{e}");
    }
}
