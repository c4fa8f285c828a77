//! Due times for a trace, one second of it at a time: the batches a shared reader hands to the
//! worker threads. A second whose lines carry whole-second timestamps is spread evenly over that
//! second; finer timestamps are kept as written. `speed` divides every time. Memory holds one
//! second of the trace (bounded by its rate), never the whole file.

use super::line::{TraceLine, TraceOp};
use super::reader::{TraceError, TraceReader};

/// Lines per batch of a plain key list, which has no timestamps (its pace comes from -R).
pub const PLAIN_BATCH: usize = 4096;

/// One request of a batch; its key is `Batch::key(entry)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// µs after the trace's first request, `speed` applied; None in a plain key list.
    pub due_us: Option<u64>,
    key: (u32, u32),
    pub op: TraceOp,
    pub value_size: u32,
    pub ttl: u32,
    pub client_id: u32,
}

/// Requests of one second of the trace (or PLAIN_BATCH lines of a key list), keys in one buffer.
#[derive(Debug, Default)]
pub struct Batch {
    keys: Vec<u8>,
    pub entries: Vec<Entry>,
}

impl Batch {
    pub fn key(&self, e: &Entry) -> &[u8] {
        &self.keys[e.key.0 as usize..e.key.1 as usize]
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.entries.clear();
    }

    fn push(&mut self, l: &TraceLine<'_>, due_us: Option<u64>) {
        let start = self.keys.len() as u32;
        self.keys.extend_from_slice(l.key);
        self.entries.push(Entry {
            due_us,
            key: (start, self.keys.len() as u32),
            op: l.op,
            value_size: l.value_size,
            ttl: l.ttl,
            client_id: l.client_id,
        });
    }
}

pub struct Schedule {
    reader: TraceReader,
    speed: f64,
    first_us: Option<u64>,
    /// The line that opened the next second, read while closing this one.
    carry: Batch,
}

impl Schedule {
    pub fn new(reader: TraceReader, speed: f64) -> Schedule {
        Schedule {
            reader,
            speed,
            first_us: None,
            carry: Batch::default(),
        }
    }

    /// Fills `out` with the next batch; false at the end of the trace.
    pub fn next_batch(&mut self, out: &mut Batch) -> Result<bool, TraceError> {
        out.clear();
        // Entries hold the trace's own times (µs) until `spread` makes them due times.
        let mut second = None;
        if let Some(e) = self.carry.entries.pop() {
            out.keys.extend_from_slice(&self.carry.keys);
            out.entries.push(e);
            second = e.due_us.map(|t| t / 1_000_000);
            self.carry.clear();
        }
        while let Some(l) = self.reader.next_line()? {
            let Some(t) = l.time_us else {
                out.push(&l, None);
                if out.entries.len() >= PLAIN_BATCH {
                    return Ok(true);
                }
                continue;
            };
            self.first_us.get_or_insert(t);
            match second {
                Some(s) if t / 1_000_000 != s => {
                    self.carry.push(&l, Some(t));
                    break;
                }
                _ => second = Some(t / 1_000_000),
            }
            out.push(&l, Some(t));
        }
        self.spread(out);
        Ok(!out.entries.is_empty())
    }

    /// Whole-second lines spread evenly over their second, finer ones kept; all made relative to
    /// the first request, then divided by `speed`.
    fn spread(&self, out: &mut Batch) {
        let first = self.first_us.unwrap_or(0);
        let finer = out
            .entries
            .iter()
            .any(|e| e.due_us.is_some_and(|t| t % 1_000_000 != 0));
        let n = out.entries.len() as u64;
        for (i, e) in out.entries.iter_mut().enumerate() {
            if let Some(t) = e.due_us.as_mut() {
                if !finer {
                    *t += i as u64 * 1_000_000 / n;
                }
                *t = (t.saturating_sub(first) as f64 / self.speed) as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests;
