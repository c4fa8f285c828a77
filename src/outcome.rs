//! What one lookup came to: a hit, a miss, or an error of a counted kind.

use std::fmt;

use crate::shown;

/// An error message longer than this is cut: our words around at most [`shown::MAX_SHOWN`] of the server's.
const MAX_MESSAGE: usize = 2 * shown::MAX_SHOWN;

/// A lookup that got an answer. A key with no row is a `Miss`, never an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Hit,
    Miss,
}

/// Per-request errors are counted by kind, not by message, so the hot path never formats strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Could not open (or re-open) a connection.
    Connect,
    /// The connection broke while a request was in flight.
    Io,
    /// No answer within `--timeout`.
    Timeout,
    /// The server answered with an error (SQL error, HandlerSocket error code, HTTP 5xx).
    Server,
    /// The server answered with bytes that do not parse.
    Protocol,
    /// `--verify`: the row returned is not the row derived from the key.
    Verify,
    /// A server error classed by its code: the key is already there (SQL unique violation).
    Duplicate,
    /// A server error classed by its code: a deadlock, or a lock wait that timed out.
    Deadlock,
    /// A server error classed by its code: a serialization failure (retry the transaction).
    Serialization,
    /// A server error classed by its code: the server or transaction is read-only.
    Readonly,
}

impl ErrorKind {
    /// How many kinds there are: the length of every per-kind counter array.
    pub const COUNT: usize = 10;

    pub const ALL: [ErrorKind; Self::COUNT] = [
        ErrorKind::Connect,
        ErrorKind::Io,
        ErrorKind::Timeout,
        ErrorKind::Server,
        ErrorKind::Protocol,
        ErrorKind::Verify,
        ErrorKind::Duplicate,
        ErrorKind::Deadlock,
        ErrorKind::Serialization,
        ErrorKind::Readonly,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Io => "io",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Server => "server",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Verify => "verify",
            ErrorKind::Duplicate => "duplicate",
            ErrorKind::Deadlock => "deadlock",
            ErrorKind::Serialization => "serialization",
            ErrorKind::Readonly => "readonly",
        }
    }
}

/// A failed lookup. `fatal` means the connection is unusable and must be replaced.
#[derive(Clone, Debug)]
pub struct LookupError {
    pub kind: ErrorKind,
    pub fatal: bool,
    /// Kept for the report (first few per kind); built only on the error path.
    pub message: String,
}

impl LookupError {
    /// `message` may carry a server's text: it is kept printable and cut ([`crate::shown`]).
    pub fn new(kind: ErrorKind, fatal: bool, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if !shown::is_plain(&message, MAX_MESSAGE) {
            message = shown::clip(message.as_bytes(), MAX_MESSAGE);
        }
        LookupError {
            kind,
            fatal,
            message,
        }
    }
    pub fn io(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Io, true, message)
    }
    pub fn protocol(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Protocol, true, message)
    }
    pub fn server(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Server, false, message)
    }
    pub fn verify(key: u64) -> Self {
        Self::new(
            ErrorKind::Verify,
            false,
            // Most often the data set was written to since it was loaded: say how to restore it.
            format!(
                "row for key {key} differs from the row derived from the key: if writes (a write \
                 mix, a trace, the tests) changed the data set since it was loaded, run \
                 `loadgen prepare TARGET` again"
            ),
        )
    }
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

impl std::error::Error for LookupError {}
