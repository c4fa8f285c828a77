//! Masks every password and secret in the strings of a result document that can carry a URL
//! or a server's message. Kept out of the result model, which imports nothing above it.

use crate::result::{ResultFile, RunResult};
use crate::url::{redact_str, redact_text};

/// A whole document: a file written by an older loadgen (read by `merge`) may hold secrets.
pub fn file(f: &mut ResultFile) {
    for r in &mut f.runs {
        run(r);
    }
    for s in &mut f.sweeps {
        s.target = redact_str(&s.target);
    }
    for s in &mut f.slo {
        s.target = redact_str(&s.target);
    }
    if let Some(i) = &mut f.instance {
        *i = redact_text(i);
    }
}

/// One run: its target, its label, and server messages (error samples, the first connect error, the
/// server-count note) that may echo a URL or a secret.
pub fn run(r: &mut RunResult) {
    r.target = redact_str(&r.target);
    for e in &mut r.error_samples {
        *e = redact_text(e);
    }
    let note = r.server_observed.as_mut().and_then(|o| o.note.as_mut());
    for m in [&mut r.connect_error, &mut r.stopped_early, &mut r.label]
        .into_iter()
        .flatten()
        .chain(note)
    {
        *m = redact_text(m);
    }
}
