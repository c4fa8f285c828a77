//! `--record-trace FILE`: every request a run sends, as a Twitter cache-trace line
//! (`timestamp,key,key_size,value_size,client_id,op,ttl`), so `--trace FILE` replays the run:
//! the same keys, ops, sizes and times. Lines are written as requests go out, under one lock,
//! so the file is in send order and memory stays flat.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use crate::decimal;
use crate::mix::Op;
use crate::output::Dest;

pub struct TraceRecorder {
    out: Mutex<BufWriter<File>>,
    /// The first write error, said once after the run.
    failed: Mutex<Option<String>>,
}

/// One request as the recorder writes it.
pub struct Recorded<'a> {
    /// ns after the run's start.
    pub sent_ns: u64,
    pub key: &'a [u8],
    pub op: Op,
    pub value_size: u32,
    pub client: u32,
    pub ttl: u32,
}

impl TraceRecorder {
    /// Opens `path` as `--hdr-log` does: a regular file is truncated in place, a device, FIFO
    /// or symlink written through.
    pub fn create(path: &Path) -> Result<TraceRecorder, String> {
        let file = Dest::of(path)
            .and_then(|d| d.open_stream())
            .map_err(|e| format!("--record-trace {}: {e}", path.display()))?;
        Ok(TraceRecorder {
            out: Mutex::new(BufWriter::with_capacity(1 << 16, file)),
            failed: Mutex::new(None),
        })
    }

    pub fn write(&self, r: &Recorded<'_>) {
        let mut line = Vec::with_capacity(64 + r.key.len());
        line_of(r, &mut line);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = out.write_all(&line) {
            self.fail(e);
        }
    }

    /// Flushes what is buffered; the first error of the run, if any.
    pub fn finish(&self) -> Option<String> {
        if let Err(e) = self.out.lock().unwrap_or_else(|e| e.into_inner()).flush() {
            self.fail(e);
        }
        self.failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn fail(&self, e: std::io::Error) {
        let mut f = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        f.get_or_insert_with(|| format!("--record-trace: cannot write: {e}"));
    }
}

/// The trace op loadgen's op replays as (`TraceOp::op` maps it back).
pub fn op_name(op: Op) -> &'static [u8] {
    match op {
        Op::Read | Op::Mget => b"get",
        Op::Update => b"replace",
        Op::Insert => b"add",
        Op::Delete => b"delete",
        Op::Upsert => b"set",
    }
}

/// `seconds.micros,key,key_size,value_size,client_id,op,ttl\n`.
fn line_of(r: &Recorded<'_>, out: &mut Vec<u8>) {
    let us = r.sent_ns / 1000;
    decimal::push(out, us / 1_000_000);
    out.push(b'.');
    let frac = us % 1_000_000;
    let mut digits = [0u8; 20];
    let d = decimal::digits(frac, &mut digits);
    out.resize(out.len() + 6 - d.len(), b'0');
    out.extend_from_slice(d);
    for n in [
        None,
        Some(r.key.len() as u64),
        Some(u64::from(r.value_size)),
        Some(u64::from(r.client)),
    ] {
        out.push(b',');
        match n {
            None => out.extend_from_slice(r.key),
            Some(n) => decimal::push(out, n),
        }
    }
    out.push(b',');
    out.extend_from_slice(op_name(r.op));
    out.push(b',');
    decimal::push(out, u64::from(r.ttl));
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::line::parse;

    #[test]
    fn a_recorded_line_parses_back_to_the_same_request() {
        let mut out = Vec::new();
        let r = Recorded {
            sent_ns: 12_000_345_678,
            key: b"usr:42",
            op: Op::Upsert,
            value_size: 55,
            client: 3,
            ttl: 60,
        };
        line_of(&r, &mut out);
        assert_eq!(out, b"12.000345,usr:42,6,55,3,set,60\n");
        let l = parse(&out[..out.len() - 1]).unwrap().unwrap();
        assert_eq!(l.time_us, Some(12_000_345));
        assert_eq!(
            (l.key, l.value_size, l.client_id, l.ttl),
            (&b"usr:42"[..], 55, 3, 60)
        );
        // A multi-get is never recorded (one key per line: refused in preflight).
        for op in Op::ALL.into_iter().filter(|o| *o != Op::Mget) {
            out.clear();
            line_of(&Recorded { op, ..r }, &mut out);
            let l = parse(&out[..out.len() - 1]).unwrap().unwrap();
            assert_eq!(l.op.op(), op);
        }
    }
}
