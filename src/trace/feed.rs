//! The trace of a run, shared by all its connections: a reader thread turns the file into
//! batches (a second of the trace each, `schedule`), two batches ahead of the run, and each
//! connection takes the next request when it has room for one. Memory holds three seconds of
//! the trace, never the whole file.

use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Mutex;

use super::line::TraceOp;
use super::reader::{TraceError, TraceReader};
use super::schedule::{Batch, Schedule};
use crate::mix::Op;

/// One request of the trace; its key is what `Feed::next` copied out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// µs after the run's start (`--speed` applied); None in a plain key list.
    pub due_us: Option<u64>,
    pub op: TraceOp,
    pub value_size: u32,
    pub ttl: u32,
}

/// What a trace holds, read once before the run: every line is checked, so a bad one is a
/// setup error, not a replay that stops half way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    pub lines: u64,
    /// Requests per loadgen op (`Op::index`).
    pub ops: [u64; Op::COUNT],
    /// The lines carry timestamps (the Twitter format): the trace sets its own pace.
    pub timed: bool,
    /// µs the trace lasts as written (before `--speed`): first request to last, plus the last
    /// second when the timestamps are whole seconds (its requests spread over it).
    pub span_us: u64,
    /// Inserts (`add`) with a TTL: Redis sends them as `SET NX EX`, counted as `set`.
    pub ttl_inserts: u64,
    /// Writes whose value is larger than loadgen sends ([`crate::dataset::MAX_FILL`]): sent
    /// at that size. And the largest value of the trace.
    pub clamped: u64,
    pub largest_value: u32,
    /// The line of the longest key, and its length: memcached refuses keys over 250 bytes.
    pub longest_key: (u64, usize),
    /// Lines whose time is before a line above them, and the line that goes back most (and
    /// by how many µs): sent when reached, late by that much.
    pub backwards: u64,
    pub back_most: (u64, u64),
}

/// Why a key cannot be sent as one key by a text protocol (memcached's): a space or a control
/// byte would split it or end the command. None: it can.
fn bad_key(key: &[u8]) -> Option<String> {
    let at = key.iter().position(|&b| b <= b' ' || b == 0x7f)?;
    Some(format!(
        "the key \"{}\" has a space or control byte at byte {}: a key is one word (memcached's protocol, and the trace's own)",
        crate::shown::clip(key, 60),
        at + 1
    ))
}

/// Microseconds as seconds, for messages.
fn seconds(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

impl Survey {
    pub fn read(path: &Path) -> Result<Survey, TraceError> {
        let mut r = TraceReader::open(path)?;
        let mut s = Survey::default();
        let (mut first, mut finer, mut last_us) = (None, false, None);
        while let Some((line, l)) = r.next_numbered()? {
            let timed_line = l.time_us.is_some();
            let bad = |msg: String| TraceError {
                path: path.to_path_buf(),
                line,
                msg,
            };
            if let Some(why) = bad_key(l.key) {
                return Err(bad(why));
            }
            // One format in a file: a plain key inside a timed trace is a line cut short.
            if s.lines > 0 && timed_line != s.timed {
                return Err(bad(match s.timed {
                    true => "a key without its timestamp and fields in a timed trace: expected timestamp,key,key_size,value_size,client_id,op,ttl".into(),
                    false => "a timed line in a list of plain keys: give the whole file in one format".into(),
                }));
            }
            // Kept as written: a line due before the one above it is sent when reached.
            if let (Some(t), Some(before)) = (l.time_us, last_us) {
                if t < before {
                    s.backwards += 1;
                    if before - t > s.back_most.1 {
                        s.back_most = (line, before - t);
                    }
                }
            }
            last_us = match (l.time_us, last_us) {
                (Some(t), Some(b)) => Some(t.max(b)),
                (t, b) => t.or(b),
            };
            if l.key.len() > s.longest_key.1 {
                s.longest_key = (line, l.key.len());
            }
            s.lines += 1;
            s.ops[l.op.op().index()] += 1;
            s.ttl_inserts += u64::from(l.op.op() == Op::Insert && l.ttl > 0);
            if l.op.op().writes() {
                s.largest_value = s.largest_value.max(l.value_size);
                s.clamped += u64::from(l.value_size as usize > crate::dataset::MAX_FILL);
            }
            if let Some(t) = l.time_us {
                s.timed = true;
                finer |= t % 1_000_000 != 0;
                let f = *first.get_or_insert(t);
                s.span_us = s.span_us.max(t.saturating_sub(f));
            }
        }
        if s.timed && !finer {
            s.span_us += 1_000_000;
        }
        if s.lines == 0 {
            return Err(TraceError {
                path: path.to_path_buf(),
                line: 0,
                msg: "no requests in it".into(),
            });
        }
        Ok(s)
    }

    /// A step back in time beyond this is warned of: a recording of several connections
    /// steps back by less (their lines are written as each finishes).
    pub const BACK_WARNED_US: u64 = 1_000;

    /// What the replay sends otherwise than the trace says: values larger than sent, lines
    /// out of time order by more than [`Self::BACK_WARNED_US`]; one warning each.
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self.clamp_warning().into_iter().collect();
        if self.back_most.1 > Self::BACK_WARNED_US {
            w.push(format!(
                "{} lines are due before a line above them (the most at line {}, {} s back): they are sent when reached, late by up to that; sort the trace (sort -t, -k1,1n -s) to replay it in time order",
                self.backwards,
                self.back_most.0,
                seconds(self.back_most.1)
            ));
        }
        w
    }

    fn clamp_warning(&self) -> Option<String> {
        (self.clamped > 0).then(|| {
            format!(
                "{} writes of the trace have values over 1 MiB (the largest {} bytes): they are sent at 1 MiB, and on memcached at 1 MiB less 1 KiB (its default item limit, -I 1m, holds the value with its key and header); Redis takes values up to 512 MB, loadgen's stop at 1 MiB",
                self.clamped, self.largest_value
            )
        })
    }

    /// The loadgen ops the trace holds.
    pub fn has(&self, op: Op) -> bool {
        self.ops[op.index()] > 0
    }
}

struct Cursor {
    rx: Receiver<Batch>,
    batch: Batch,
    at: usize,
}

pub struct Feed {
    cursor: Mutex<Cursor>,
}

impl Feed {
    /// Opens the trace and starts its reader thread, which ends with the trace or when the
    /// feed is dropped.
    pub fn start(path: &Path, speed: f64) -> Result<Feed, TraceError> {
        let reader = TraceReader::open(path)?;
        let (tx, rx) = sync_channel::<Batch>(2);
        let spawned = std::thread::Builder::new()
            .name("loadgen-trace".into())
            .spawn(move || {
                let mut schedule = Schedule::new(reader, speed);
                loop {
                    let mut b = Batch::default();
                    // The survey read every line: an error here is the file changing under us,
                    // and the replay ends where it stands.
                    match schedule.next_batch(&mut b) {
                        Ok(true) if tx.send(b).is_ok() => {}
                        _ => break,
                    }
                }
            });
        spawned.map_err(|e| TraceError {
            path: path.to_path_buf(),
            line: 0,
            msg: format!("cannot start its reader thread: {e}"),
        })?;
        Ok(Feed {
            cursor: Mutex::new(Cursor {
                rx,
                batch: Batch::default(),
                at: 0,
            }),
        })
    }

    /// The next request of the trace, its key copied into `key`; None at its end.
    pub fn next(&self, key: &mut Vec<u8>) -> Option<Item> {
        let mut c = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        while c.at >= c.batch.entries.len() {
            c.batch = c.rx.recv().ok()?;
            c.at = 0;
        }
        let e = c.batch.entries[c.at];
        c.at += 1;
        key.clear();
        key.extend_from_slice(c.batch.key(&e));
        Some(Item {
            due_us: e.due_us,
            op: e.op,
            value_size: e.value_size,
            ttl: e.ttl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TempDir;

    #[test]
    fn a_trace_comes_out_in_order_with_its_keys_and_due_times() {
        let dir = TempDir::new("lg-feed-order");
        let path = dir.join("t.csv");
        let mut text = String::new();
        for i in 0..10 {
            text += &format!(
                "{},k{i},2,{},1,{},0\n",
                100 + i / 5,
                10 * i,
                ["get", "set"][i % 2]
            );
        }
        std::fs::write(&path, text).unwrap();
        let s = Survey::read(&path).unwrap();
        assert_eq!((s.lines, s.timed, s.span_us), (10, true, 2_000_000));
        assert_eq!((s.ops[Op::Read.index()], s.ops[Op::Upsert.index()]), (5, 5));
        let feed = Feed::start(&path, 2.0).unwrap();
        let mut key = Vec::new();
        let mut got = Vec::new();
        while let Some(item) = feed.next(&mut key) {
            got.push((String::from_utf8(key.clone()).unwrap(), item));
        }
        assert_eq!(got.len(), 10);
        assert_eq!(got[3].0, "k3");
        assert_eq!(got[3].1.value_size, 30);
        assert_eq!(got[3].1.op, TraceOp::Set);
        // Five whole-second lines spread over their second, then halved by --speed 2.
        assert_eq!(got[1].1.due_us, Some(100_000));
        assert_eq!(got[5].1.due_us, Some(500_000));
    }

    #[test]
    fn an_empty_or_bad_trace_is_refused_before_the_run() {
        let dir = TempDir::new("lg-feed-bad");
        let path = dir.join("t.csv");
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(Survey::read(&path)
            .unwrap_err()
            .to_string()
            .contains("no requests"));
        std::fs::write(&path, "1,k,1,1,1,get,0\n1,k,1,x,1,get,0\n").unwrap();
        let e = Survey::read(&path).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }
}
