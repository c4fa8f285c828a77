//! The data set: the `usr` row every key should return, derived from its id, and the check
//! `--verify` makes. Protocols encode and decode; only this module knows what a row holds.
//!
//! `usr(user_id int primary key, user_name text, user_email text, created timestamp)` with
//! `user_name = 'user<id>'`, `user_email = 'user<id>@example.com'`,
//! `created = 2010-02-03 11:22:33 + id seconds` (UTC, no time zone).

use std::io::Write;

/// 2010-02-03 11:22:33 UTC as Unix seconds.
pub const CREATED_BASE: i64 = 1_265_196_153;

/// Unix seconds of `created` for this id.
pub fn created_unix(id: u64) -> i64 {
    CREATED_BASE + id as i64
}

/// Civil date and time (y, m, d, h, mi, s) of Unix seconds, UTC (Howard Hinnant's algorithm).
pub fn civil(unix: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
}

/// Unix seconds of a civil date and time, UTC.
pub fn unix_of(y: i64, m: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + (h * 3600 + mi * 60 + s) as i64
}

/// Appends `created` as `YYYY-MM-DD HH:MM:SS`.
pub fn write_created(out: &mut impl Write, id: u64) {
    let (y, m, d, h, mi, s) = civil(created_unix(id));
    let _ = write!(out, "{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}");
}

/// Appends the row's three value columns, tab-separated: `user<id>\tuser<id>@example.com\t<created>`.
/// This is the value format of memcached, the embedded HTTP server and HandlerSocket replies.
pub fn write_tsv(out: &mut impl Write, id: u64) {
    let _ = write!(out, "user{id}\tuser{id}@example.com\t");
    write_created(out, id);
}

/// Appends the row as one line of PostgreSQL COPY text / MariaDB LOAD DATA input.
pub fn write_copy_line(out: &mut Vec<u8>, id: u64) {
    let _ = write!(out, "{id}\t");
    write_tsv(out, id);
    out.push(b'\n');
}

/// The longest tab-separated row: two 20-digit ids, the text around them and a date whose year
/// can reach 12 digits for ids near u64::MAX.
const TSV_MAX: usize = 128;

/// True when `value` is exactly the tab-separated row for `id`. Builds the expected row on the
/// stack: `--verify` runs this on every reply.
pub fn tsv_matches(id: u64, value: &[u8]) -> bool {
    if value.len() > TSV_MAX {
        return false;
    }
    let mut expect = [0u8; TSV_MAX];
    let mut w = &mut expect[..];
    write_tsv(&mut w, id);
    let n = TSV_MAX - w.len();
    expect[..n] == *value
}

pub fn user_name(id: u64) -> String {
    format!("user{id}")
}

pub fn user_email(id: u64) -> String {
    format!("user{id}@example.com")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_of_id_zero_is_the_base_time() {
        let mut s = Vec::new();
        write_created(&mut s, 0);
        assert_eq!(s, b"2010-02-03 11:22:33");
        let mut s = Vec::new();
        write_created(&mut s, 1_000_000);
        // 1e6 s = 11 days 13:46:40 later.
        assert_eq!(s, b"2010-02-15 01:09:13");
    }

    #[test]
    fn civil_round_trips() {
        for unix in [
            0i64,
            951_782_400,
            1_265_196_153,
            4_102_444_800,
            -86_400 * 365,
        ] {
            let (y, m, d, h, mi, s) = civil(unix);
            assert_eq!(unix_of(y, m, d, h, mi, s), unix, "{unix}");
        }
    }

    #[test]
    fn tsv_row() {
        let mut s = Vec::new();
        write_tsv(&mut s, 42);
        assert_eq!(s, b"user42\tuser42@example.com\t2010-02-03 11:23:15");
        assert!(tsv_matches(42, &s));
        assert!(!tsv_matches(43, &s));
        let mut big = Vec::new();
        write_tsv(&mut big, u64::MAX);
        assert!(big.len() <= TSV_MAX && tsv_matches(u64::MAX, &big));
    }
}
