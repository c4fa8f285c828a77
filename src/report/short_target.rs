//! A target URL cut to a column's width so that what tells targets apart stays: the scheme,
//! host and path (the database and table) whole where they fit, the options elided in their
//! middle; a nested URL in an option (HandlerSocket's `?mysql=`) is the first to go.

/// `s` in at most `width` characters.
pub fn shorten(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if let Some(q) = s.find('?') {
        let (base, query) = s.split_at(q);
        let room = width.saturating_sub(base.chars().count());
        // `?x…y` at least: the options' start and end around the ellipsis.
        if room >= 4 {
            return format!("{base}{}", middle(query, room));
        }
    }
    middle(s, width)
}

/// `s` cut to `width` characters by an ellipsis in the middle.
fn middle(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let head = width.saturating_sub(1).div_ceil(2);
    let tail = width.saturating_sub(1) - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_middle_goes_when_there_are_no_options() {
        assert_eq!(shorten("abcdef", 6), "abcdef");
        assert_eq!(shorten("abcdefghij", 7), "abc…hij");
        assert_eq!(shorten("µsµsµsµs", 5), "µs…µs");
    }

    #[test]
    fn the_table_stays_and_the_nested_url_is_elided() {
        let hs = "hs://127.0.0.1:59998/loadgen/usr?mysql=mysql://loadgen@127.0.0.1:53306/loadgen";
        let s = shorten(hs, 60);
        assert_eq!(s.chars().count(), 60, "{s}");
        assert!(
            s.starts_with("hs://127.0.0.1:59998/loadgen/usr?mysql="),
            "{s}"
        );
        assert!(s.contains('…'), "{s}");
        let other = hs.replace("/usr?", "/usr2?");
        assert!(shorten(&other, 60).contains("/loadgen/usr2?"));
    }
}
