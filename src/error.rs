//! The library's errors, one type per layer, each holding the one line the user sees, and the
//! process's exit codes. The library returns these and never prints them; the binary turns
//! an `Error` into its line and exit code (`Error::exit`) in one place.

use thiserror::Error as ThisError;

/// Bad input: a flag, a URL, a file named on the command line (plan, key ranges, mixes,
/// merge inputs, the metrics address, the open-files limit).
#[derive(Debug, Clone, PartialEq, ThisError)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// A connection that cannot be set up before any byte is sent: the endpoint, TLS material.
#[derive(Debug, Clone, PartialEq, ThisError)]
#[error("{0}")]
pub struct ConnectError(pub String);

/// A target that cannot run: its URL, its server's answers during set-up, its data set.
#[derive(Debug, Clone, PartialEq, ThisError)]
#[error("{0}")]
pub struct SetupError(pub String);

/// What ends a command before (or instead of) its result.
#[derive(Debug, Clone, PartialEq, ThisError)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

// The binary's own checks of its flags say what is wrong in a line, like `ConfigError`.
impl From<String> for Error {
    fn from(s: String) -> Self {
        Error::Config(ConfigError(s))
    }
}

impl From<&str> for Error {
    fn from(s: &str) -> Self {
        Error::Config(ConfigError(s.to_string()))
    }
}

impl Error {
    /// Every error that ends a command is bad input or a failed set-up.
    pub fn exit(&self) -> Exit {
        Exit::BadInput
    }
}

/// The process's exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The run finished and saw no errors.
    Clean,
    /// The run finished but saw errors, stopped early, or a threshold failed.
    Errors,
    /// Bad input or a set-up failure: one line on stderr.
    BadInput,
    /// `--strict`: a run's verdict says its numbers cannot be trusted.
    NotValid,
    /// `compare --fail-if`: a difference is significant and beyond its bound.
    Regression,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Clean => 0,
            Exit::Errors => 1,
            Exit::BadInput => 2,
            Exit::NotValid => 3,
            Exit::Regression => 4,
        }
    }
}

// Messages are built with `format!` where they arise; `?` and `.into()` wrap them.
macro_rules! from_text {
    ($($t:ident),*) => {$(
        impl From<String> for $t {
            fn from(s: String) -> Self {
                $t(s)
            }
        }
        impl From<$t> for String {
            fn from(e: $t) -> String {
                e.0
            }
        }
        // The message, for tests and callers that match on its words.
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl From<&str> for $t {
            fn from(s: &str) -> Self {
                $t(s.to_string())
            }
        }
    )*};
}
from_text!(ConfigError, ConnectError, SetupError);

// A lower layer's error says what is wrong in the same words at the layer above.
macro_rules! same_words {
    ($($from:ident => $to:ident),*) => {$(
        impl From<$from> for $to {
            fn from(e: $from) -> Self {
                $to(e.0)
            }
        }
    )*};
}
same_words!(
    ConfigError => SetupError,
    ConnectError => SetupError,
    ConfigError => ConnectError,
    ConnectError => ConfigError
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes the README and `--help` promise.
    #[test]
    fn exit_codes() {
        let codes: Vec<i32> = [Exit::Clean, Exit::Errors, Exit::BadInput, Exit::NotValid]
            .map(Exit::code)
            .to_vec();
        assert_eq!(codes, [0, 1, 2, 3]);
        assert_eq!(Error::from(ConfigError("x".into())).exit(), Exit::BadInput);
        assert_eq!(Error::from(SetupError("y".into())).to_string(), "y");
    }
}
