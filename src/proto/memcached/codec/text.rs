//! What memcached's two text dialects share (the classic commands in `codec.rs`, the meta
//! ones in `meta.rs`): reply lines, error lines and the largest value sent.

use crate::dataset;
use crate::outcome::LookupError;
use crate::proto::codec::{DecodedBatch, Tally, MAX_FRAME};

/// Longest reply line accepted (a `VALUE` line is at most ~320 bytes, error lines are short).
pub const MAX_LINE: usize = 8192;

/// The largest value sent: memcached's default item limit (`-I 1m`) holds the value with the
/// item's header, key and flags, so a value of a full 1 MiB is refused as too large.
pub const VALUE_MAX: u32 = (dataset::MAX_FILL - 1024) as u32;

pub(super) fn protocol(what: &str) -> LookupError {
    LookupError::protocol(format!("memcached: {what}"))
}

/// The line for a message: escaped and cut (`crate::shown`).
pub(super) fn shown(line: &[u8]) -> String {
    crate::shown::shown(line)
}

/// The line starting at `from`, without its `\r\n`, and the offset after it. `Ok(None)` if the
/// line is not complete yet; a line longer than [`MAX_LINE`] or ending in a bare `\n` is an error.
pub(super) fn line_at(buf: &[u8], from: usize) -> Result<Option<(&[u8], usize)>, LookupError> {
    let rest = buf.get(from..).unwrap_or_default();
    let window = rest.get(..MAX_LINE).unwrap_or(rest);
    match window.iter().position(|&b| b == b'\n') {
        Some(p) => match rest.get(..p).and_then(|l| l.strip_suffix(b"\r")) {
            Some(line) => Ok(Some((line, from + p + 1))),
            None => Err(protocol("reply line ends with a bare \\n")),
        },
        None if rest.len() >= MAX_LINE => Err(protocol("reply line longer than MAX_LINE")),
        None => Ok(None),
    }
}

/// True when `got` (possibly incomplete) could still be the start of one of `starts`.
pub(super) fn could_start(got: &[u8], starts: &[&[u8]]) -> bool {
    starts.iter().any(|s| {
        let n = got.len().min(s.len());
        got.get(..n) == s.get(..n)
    })
}

/// The error for an `ERROR`, `CLIENT_ERROR` or `SERVER_ERROR` line, or `None` for other lines.
pub(super) fn error_line(line: &[u8]) -> Option<LookupError> {
    if line == b"ERROR" || line.starts_with(b"ERROR ") {
        Some(protocol(&format!(
            "server sent `{}`: it did not understand a command, the stream is out of step",
            shown(line)
        )))
    } else if line.starts_with(b"CLIENT_ERROR") {
        Some(protocol(&format!(
            "server sent `{}`: it rejected the input, the stream is out of step",
            shown(line)
        )))
    } else if line.starts_with(b"SERVER_ERROR") {
        Some(LookupError::server(format!("memcached: {}", shown(line))))
    } else {
        None
    }
}

/// Where a multi-get reply's decoding stands: both dialects answer with a value block per key
/// found, in the order asked, the others left out, then an end line.
#[derive(Default)]
pub(super) struct MultiGet {
    pub tally: Tally,
    /// The first non-fatal error (a verify failure, a `SERVER_ERROR`): the request's outcome.
    pub bad: Option<LookupError>,
    /// The offset of the next line.
    pub pos: usize,
    /// The first key of the request not yet answered or passed over.
    next_key: usize,
}

impl MultiGet {
    /// The next line at `pos` of `buf`, which must be able to start as one of `starts`, and
    /// the offset after it. `Ok(None)`: not complete yet.
    pub fn line<'b>(
        &self,
        buf: &'b [u8],
        starts: &[&[u8]],
    ) -> Result<Option<(&'b [u8], usize)>, LookupError> {
        let rest = buf.get(self.pos..).unwrap_or_default();
        if !could_start(rest, starts) {
            return Err(protocol(&format!(
                "unexpected reply `{}` in a multi-get reply",
                shown(rest.get(..40).unwrap_or(rest))
            )));
        }
        let line = line_at(buf, self.pos)?;
        if line.is_some_and(|(_, next)| next > MAX_FRAME) {
            return Err(protocol("multi-get reply larger than MAX_FRAME"));
        }
        Ok(line)
    }

    /// A value for `got` (`data`), the block ending at `end`: the keys before it that the
    /// server left out are misses. A key not asked for, or out of order, is fatal.
    pub fn found(
        &mut self,
        (keys, verify): (&[u64], bool),
        got: &[u8],
        data: &[u8],
        end: usize,
        matches: impl Fn(&[u8], u64) -> bool,
    ) -> Result<(), LookupError> {
        let Some(at) = keys[self.next_key..].iter().position(|&k| matches(got, k)) else {
            return Err(protocol(&format!(
                "a value for `{}` that the multi-get did not ask for (or out of order): the stream is out of step",
                shown(got)
            )));
        };
        self.tally.misses += at as u32;
        if let Err(e) = self.tally.row(keys[self.next_key + at], data, verify) {
            self.bad.get_or_insert(e);
        }
        self.next_key += at + 1;
        self.pos = end;
        Ok(())
    }

    /// The end line, ending at `end`: the keys not answered are misses.
    pub fn end(mut self, keys: &[u64], end: usize) -> DecodedBatch {
        self.tally.misses += (keys.len() - self.next_key) as u32;
        Some((end, self.bad.map_or(Ok(self.tally), Err)))
    }
}
