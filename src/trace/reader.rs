//! Streams a trace file line by line through one reused buffer, zstd-decompressing when the file
//! starts with the zstd magic number.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::line::{parse, skipped, TraceLine};

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const BUF: usize = 1 << 20;

/// What went wrong, where: `trace FILE line N: why` (line 0: the file itself).
#[derive(Debug)]
pub struct TraceError {
    pub path: PathBuf,
    pub line: u64,
    pub msg: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "trace {}: {}", self.path.display(), self.msg),
            n => write!(f, "trace {} line {n}: {}", self.path.display(), self.msg),
        }
    }
}

impl std::error::Error for TraceError {}

pub struct TraceReader {
    path: PathBuf,
    src: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    line: u64,
}

impl TraceReader {
    pub fn open(path: &Path) -> Result<TraceReader, TraceError> {
        let err = |msg: String| TraceError {
            path: path.to_path_buf(),
            line: 0,
            msg,
        };
        let file = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
        let mut file = BufReader::with_capacity(BUF, file);
        let head = file
            .fill_buf()
            .map_err(|e| err(format!("cannot read: {e}")))?;
        let src: Box<dyn BufRead + Send> = if head.starts_with(&ZSTD_MAGIC) {
            let z = zstd::stream::read::Decoder::with_buffer(file)
                .map_err(|e| err(format!("cannot start zstd decoding: {e}")))?;
            Box::new(BufReader::with_capacity(BUF, z))
        } else {
            Box::new(file)
        };
        Ok(TraceReader::from_reader(path, src))
    }

    /// A trace from any reader (tests; `path` only names it in errors).
    pub fn from_reader(path: &Path, src: Box<dyn BufRead + Send>) -> TraceReader {
        TraceReader {
            path: path.to_path_buf(),
            src,
            buf: Vec::with_capacity(256),
            line: 0,
        }
    }

    /// The next request, skipping blank and `#` lines; Ok(None) at the end of the file.
    pub fn next_line(&mut self) -> Result<Option<TraceLine<'_>>, TraceError> {
        Ok(self.next_numbered()?.map(|(_, l)| l))
    }

    /// The next request with its line number in the file, as [`Self::next_line`].
    pub fn next_numbered(&mut self) -> Result<Option<(u64, TraceLine<'_>)>, TraceError> {
        loop {
            self.buf.clear();
            self.line += 1;
            let n = self
                .src
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| self.error(read_msg(&e)))?;
            if n == 0 {
                return Ok(None);
            }
            if !skipped(&self.buf) {
                break;
            }
        }
        let text = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
        let (path, line) = (&self.path, self.line);
        let parsed = parse(text).map_err(|e| TraceError {
            path: path.clone(),
            line,
            msg: e.0,
        })?;
        Ok(parsed.map(|l| (line, l)))
    }

    /// Lines read so far (the number of the last one returned).
    pub fn line_number(&self) -> u64 {
        self.line
    }

    fn error(&self, msg: String) -> TraceError {
        TraceError {
            path: self.path.clone(),
            line: self.line,
            msg,
        }
    }
}

fn read_msg(e: &std::io::Error) -> String {
    format!("cannot read (a truncated or corrupt .zst?): {e}")
}

#[cfg(test)]
mod tests;
