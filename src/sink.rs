//! Where the library's lines for the user go (progress, notes, warnings): the binary gives a
//! sink and the library says everything through it, so it never prints on its own.

use std::sync::Arc;

/// Called with one whole line, without its newline.
pub type Sink = Arc<dyn Fn(&str) + Send + Sync>;

/// Standard error: the binary's sink.
pub fn stderr() -> Sink {
    Arc::new(|line: &str| eprintln!("{line}"))
}

/// Nowhere: for callers (tests) that want no lines.
pub fn none() -> Sink {
    Arc::new(|_: &str| {})
}
