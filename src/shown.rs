//! How a server's text is shown: every byte that is not printable escaped (`\x1b`), long text
//! cut with a marker. A server answering garbage must not put NUL, ESC or line breaks into
//! error lines, reports, JSON or metrics. The one function for it; errors pass through it
//! when they are made (`outcome::LookupError::new`).

use std::fmt::Write;

/// Server text longer than this many characters is cut.
pub const MAX_SHOWN: usize = 200;

/// `bytes` as text: printable characters kept (UTF-8 included), the rest escaped as `\xNN`
/// (`\t`, `\r`, `\n` as themselves escaped), cut after `max` characters with a marker saying
/// how many bytes were left out.
pub fn clip(bytes: &[u8], max: usize) -> String {
    let mut out = String::with_capacity(bytes.len().min(max) + 16);
    let mut shown = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        if shown >= max {
            let _ = write!(out, "... ({} more bytes)", rest.len());
            break;
        }
        let (ch, len) = first_char(rest);
        match ch {
            Some('\t') => out.push_str("\\t"),
            Some('\r') => out.push_str("\\r"),
            Some('\n') => out.push_str("\\n"),
            Some(c) if !c.is_control() => out.push(c),
            _ => {
                for b in &rest[..len] {
                    let _ = write!(out, "\\x{b:02x}");
                }
            }
        }
        shown += 1;
        rest = &rest[len..];
    }
    out
}

/// Server bytes for a message: [`clip`] at [`MAX_SHOWN`].
pub fn shown(bytes: &[u8]) -> String {
    clip(bytes, MAX_SHOWN)
}

/// True when `text` would be shown as it is by [`clip`] at `max`.
pub fn is_plain(text: &str, max: usize) -> bool {
    text.len() <= max && !text.chars().any(char::is_control)
}

/// The first character of `bytes` and its length; None (length 1) for a byte that does not
/// start valid UTF-8.
fn first_char(bytes: &[u8]) -> (Option<char>, usize) {
    let head = &bytes[..bytes.len().min(4)];
    let valid = match std::str::from_utf8(head) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    match valid.chars().next() {
        Some(c) => (Some(c), c.len_utf8()),
        None => (None, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bytes_are_escaped_and_text_kept() {
        assert_eq!(
            shown(b"ERR \x00\x07\x1b[2J\r\n\xff"),
            "ERR \\x00\\x07\\x1b[2J\\r\\n\\xff"
        );
        assert_eq!(shown("héllo \u{7f}".as_bytes()), "héllo \\x7f");
        assert_eq!(shown(b"plain"), "plain");
        assert!(is_plain("plain text", 200) && !is_plain("a\nb", 200));
    }

    #[test]
    fn long_text_is_cut_with_a_marker() {
        let s = shown(&[b'a'; 1000]);
        assert_eq!(s, format!("{}... (800 more bytes)", "a".repeat(200)));
        let all: Vec<u8> = (0..=255).collect();
        let s = shown(&all);
        assert!(s.ends_with("... (56 more bytes)"), "{s}");
        assert!(!s.chars().any(char::is_control), "{s}");
    }
}
