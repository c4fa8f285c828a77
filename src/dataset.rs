//! The data set: the `usr` row every key should return, derived from its id, and the check
//! `--verify` makes. Protocols encode and decode; only this module knows what a row holds.
//!
//! `usr(user_id int primary key, user_name text, user_email text, created timestamp)` with
//! `user_name = 'user<id>'`, `user_email = 'user<id>@example.com'`,
//! `created = 2010-02-03 11:22:33 + id seconds` (UTC, no time zone).

use std::io::Write;

use crate::date::civil;
use crate::decimal;

/// 2010-02-03 11:22:33 UTC as Unix seconds.
pub const CREATED_BASE: i64 = 1_265_196_153;

/// Unix seconds of `created` for this id (wrapping for ids beyond i64, which no table holds).
pub fn created_unix(id: u64) -> i64 {
    CREATED_BASE.wrapping_add(id as i64)
}

/// Appends `created` as `YYYY-MM-DD HH:MM:SS`.
pub fn write_created(out: &mut impl Write, id: u64) {
    let (y, m, d, h, mi, s) = civil(created_unix(id));
    let _ = write!(out, "{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}");
}

/// Appends the row's three value columns, tab-separated: `user<id>\tuser<id>@example.com\t<created>`.
/// This is the value format of memcached, the embedded HTTP server and HandlerSocket replies.
pub fn write_tsv(out: &mut impl Write, id: u64) {
    write_tsv_version(out, id, 0);
}

/// A version a read accepts whatever it is (a key other connections may have written).
pub const ANY_VERSION: u64 = u64::MAX;

/// The largest value a sized write sends (`Request::size`): memcached's default item limit.
pub const MAX_FILL: usize = 1 << 20;

/// The value of a write of (id, version) of `size` bytes (0: the row as it is), as `head`
/// (given its length, to write what goes before it) and the bytes: the row, a tab and filler
/// when the size has room for the row, so `--verify` finds the row in it; else `size` bytes
/// of filler (a trace's small values, never verified).
pub fn write_value(
    id: u64,
    version: u64,
    size: u32,
    out: &mut Vec<u8>,
    head: impl FnOnce(usize, &mut Vec<u8>),
) {
    let row = TsvRow::new(id, version);
    let row = row.as_bytes();
    // The header and the bytes agree: a larger size is sent as the largest (a trace's value
    // over 1 MiB, which the survey warns of).
    let size = (size as usize).min(MAX_FILL);
    match size {
        0 => {
            head(row.len(), out);
            out.extend_from_slice(row);
        }
        n if n > row.len() => {
            head(n, out);
            out.extend_from_slice(row);
            out.push(b'\t');
            out.extend_from_slice(filler(n - row.len() - 1));
        }
        n => {
            head(n, out);
            out.extend_from_slice(filler(n));
        }
    }
}

/// `n` bytes of value for a sized write (at most MAX_FILL), from one buffer made once.
pub fn filler(n: usize) -> &'static [u8] {
    static FILL: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let fill = FILL.get_or_init(|| (0..MAX_FILL).map(|i| b'a' + (i % 26) as u8).collect());
    &fill[..n.min(MAX_FILL)]
}

/// Appends `user_name` of (id, version): `user<id>` as loaded (version 0), `user<id>v<version>`
/// once written; the other columns stay those of the id, so a written row reads as the same size.
pub fn write_name(out: &mut impl Write, id: u64, version: u64) {
    let _ = match version {
        0 => write!(out, "user{id}"),
        v => write!(out, "user{id}v{v}"),
    };
}

/// Appends `user_email` of the id.
pub fn write_email(out: &mut impl Write, id: u64) {
    let _ = write!(out, "user{id}@example.com");
}

/// `write_tsv` of the row as written with `version` (0: the loaded row).
pub fn write_tsv_version(out: &mut impl Write, id: u64, version: u64) {
    write_name(out, id, version);
    let _ = write!(out, "\tuser{id}@example.com\t");
    write_created(out, id);
}

/// The row of (id, version) as `write_tsv_version` writes it, on the stack: for protocols that
/// send a value's length before it, without allocating per request.
pub struct TsvRow {
    buf: [u8; 160],
    len: usize,
}

impl TsvRow {
    pub fn new(id: u64, version: u64) -> TsvRow {
        let mut buf = [0u8; 160];
        let mut w = &mut buf[..];
        write_tsv_version(&mut w, id, version);
        let len = 160 - w.len();
        TsvRow { buf, len }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Appends the row as one line of PostgreSQL COPY text / MariaDB LOAD DATA input.
pub fn write_copy_line(out: &mut Vec<u8>, id: u64) {
    let _ = write!(out, "{id}\t");
    write_tsv(out, id);
    out.push(b'\n');
}

/// One value of a row, decoded from its protocol's encoding by the codec or driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell<'b> {
    Null,
    /// Text or bytes, as the server sent them.
    Text(&'b [u8]),
    /// A timestamp without time zone, as microseconds since 1970-01-01 00:00:00.
    Time(i64),
    /// A value of any other type, or bytes that do not decode as their column's type.
    Other,
}

/// A row a server returned, borrowed from its reply: what `--verify` checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowView<'b, C> {
    /// The value columns joined by tabs, as one value: memcached, Redis, an HTTP body, and
    /// HandlerSocket's tokens as they came (the usr row has no byte HandlerSocket escapes, so
    /// escaped tokens equal to the row are the row).
    Tsv(&'b [u8]),
    /// The value columns one by one (SQL rows). Decoded as they are read, so a run without
    /// `--verify` never pays for it.
    Cells(C),
}

/// True when `row` is the row of `key`: `user<key>`, `user<key>@example.com`, and `created`
/// (as a timestamp, or as its `YYYY-MM-DD HH:MM:SS` text), and nothing more. No allocation:
/// `--verify` runs this on every reply.
pub fn matches<'b>(key: u64, row: RowView<'b, impl Iterator<Item = Cell<'b>>>) -> bool {
    matches_version(key, 0, row)
}

/// `matches` for the row of (key, version); [`ANY_VERSION`] takes the row of any version.
pub fn matches_version<'b>(
    key: u64,
    version: u64,
    row: RowView<'b, impl Iterator<Item = Cell<'b>>>,
) -> bool {
    let mut buf = [0u8; 20];
    let id = decimal::digits(key, &mut buf);
    let name_ok = |n: &[u8]| is_name(n, id, version);
    match row {
        RowView::Tsv(value) => {
            let mut cols = value.splitn(3, |&b| b == b'\t');
            // A sized value (`write_value`) has a tab and exactly the filler after the row.
            let created = |c: &[u8]| match c.iter().position(|&b| b == b'\t') {
                None => is_created_text(c, key),
                Some(at) => {
                    is_created_text(&c[..at], key) && c[at + 1..] == *filler(c.len() - at - 1)
                }
            };
            cols.next().is_some_and(name_ok)
                && cols.next().is_some_and(|e| is_email(e, id))
                && cols.next().is_some_and(created)
        }
        RowView::Cells(mut cells) => {
            matches!(cells.next(), Some(Cell::Text(n)) if name_ok(n))
                && matches!(cells.next(), Some(Cell::Text(e)) if is_email(e, id))
                && match cells.next() {
                    Some(Cell::Time(us)) => Some(us) == created_unix(key).checked_mul(1_000_000),
                    Some(Cell::Text(c)) => is_created_text(c, key),
                    _ => false,
                }
                && cells.next().is_none()
        }
    }
}

fn is_name(value: &[u8], id: &[u8], version: u64) -> bool {
    let Some(rest) = value.strip_prefix(b"user").and_then(|v| v.strip_prefix(id)) else {
        return false;
    };
    match (version, rest) {
        (_, []) => version == 0 || version == ANY_VERSION,
        (0, _) => false,
        (_, [b'v', digits @ ..]) if version == ANY_VERSION => {
            !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        }
        (v, [b'v', digits @ ..]) => {
            let mut buf = [0u8; 20];
            digits == decimal::digits(v, &mut buf)
        }
        _ => false,
    }
}

fn is_email(value: &[u8], id: &[u8]) -> bool {
    value.strip_prefix(b"user").and_then(|v| v.strip_prefix(id)) == Some(b"@example.com")
}

/// `value` is `created` of `key` as `YYYY-MM-DD HH:MM:SS`, written into a stack buffer (years
/// beyond 9999, for ids near the top of the u64 range, take the slower formatted path).
fn is_created_text(value: &[u8], key: u64) -> bool {
    let (y, m, d, h, mi, s) = civil(created_unix(key));
    if !(0..=9999).contains(&y) {
        let mut want = [0u8; 40];
        let mut w = &mut want[..];
        write_created(&mut w, key);
        let n = 40 - w.len();
        return value == &want[..n];
    }
    let two = |n: u32| [b'0' + (n / 10) as u8, b'0' + (n % 10) as u8];
    let y = y as u32;
    let [c, yy] = [two(y / 100), two(y % 100)];
    let [mo, dd, hh, mm, ss] = [two(m), two(d), two(h), two(mi), two(s)];
    let want = [
        c[0], c[1], yy[0], yy[1], b'-', mo[0], mo[1], b'-', dd[0], dd[1], b' ', hh[0], hh[1], b':',
        mm[0], mm[1], b':', ss[0], ss[1],
    ];
    value == want
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

    type Cells<'b> = std::array::IntoIter<Cell<'b>, 3>;

    fn tsv(id: u64) -> Vec<u8> {
        let mut s = Vec::new();
        write_tsv(&mut s, id);
        s
    }

    fn tsv_matches(key: u64, value: &[u8]) -> bool {
        matches(key, RowView::<Cells>::Tsv(value))
    }

    #[test]
    fn tsv_row() {
        let s = tsv(42);
        assert_eq!(s, b"user42\tuser42@example.com\t2010-02-03 11:23:15");
        assert!(tsv_matches(42, &s));
        assert!(!tsv_matches(43, &s));
        assert!(!tsv_matches(4, &s));
        for id in [0, 1, 999_999, 1_000_000, u64::MAX, i64::MAX as u64 - 1] {
            assert!(tsv_matches(id, &tsv(id)), "{id}");
        }
        // Anything else around the row is not the row.
        for bad in [
            &b""[..],
            b"user42",
            b"user42\tuser42@example.com",
            b"user42\tuser42@example.com\t",
            b"user42\tuser42@example.com\t2010-02-03 11:23:15\n",
            b"user42\tuser42@example.com\t2010-02-03 11:23:15\tx",
            b"user42\tuser42@example.org\t2010-02-03 11:23:15",
            b"user042\tuser42@example.com\t2010-02-03 11:23:15",
            b"user42\tuser42@example.com\t2010-02-03 11:23:16",
            b"user42 user42@example.com 2010-02-03 11:23:15",
        ] {
            assert!(!tsv_matches(42, bad), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn versions() {
        let mut v = Vec::new();
        write_tsv_version(&mut v, 42, 7);
        assert_eq!(v, b"user42v7\tuser42@example.com\t2010-02-03 11:23:15");
        fn row(v: &[u8]) -> RowView<'_, Cells<'_>> {
            RowView::Tsv(v)
        }
        assert!(matches_version(42, 7, row(&v)));
        assert!(matches_version(42, ANY_VERSION, row(&v)));
        assert!(!matches_version(42, 0, row(&v)));
        assert!(!matches_version(42, 8, row(&v)));
        assert!(!matches_version(42, 70, row(&v)));
        assert!(!matches_version(4, ANY_VERSION, row(&v)));
        assert!(matches_version(42, ANY_VERSION, row(&tsv(42))));
        assert!(!matches_version(42, 7, row(&tsv(42))));
        assert!(!matches_version(
            42,
            ANY_VERSION,
            row(b"user42v\tuser42@example.com\t2010-02-03 11:23:15")
        ));
    }

    #[test]
    fn created_text_matches_the_formatted_time_for_every_width_of_year() {
        for id in [
            0u64,
            1,
            86_399,
            1_000_000,
            250_000_000_000,
            300_000_000_000,
            u64::MAX,
        ] {
            let mut want = Vec::new();
            write_created(&mut want, id);
            assert!(is_created_text(&want, id), "{id}");
            assert!(!is_created_text(&want, id.wrapping_add(1)), "{id}");
        }
    }

    #[test]
    fn cells_row() {
        let us = created_unix(42) * 1_000_000;
        let good = |t: Cell<'static>| [Cell::Text(b"user42"), Cell::Text(b"user42@example.com"), t];
        for created in [Cell::Time(us), Cell::Text(b"2010-02-03 11:23:15")] {
            assert!(matches(42, RowView::Cells(good(created).into_iter())));
            assert!(!matches(43, RowView::Cells(good(created).into_iter())));
        }
        for bad in [
            good(Cell::Time(us + 1)),
            good(Cell::Null),
            good(Cell::Other),
            good(Cell::Text(b"2010-02-03 11:23:16")),
            [
                Cell::Null,
                Cell::Text(b"user42@example.com"),
                Cell::Time(us),
            ],
            [Cell::Text(b"user42"), Cell::Other, Cell::Time(us)],
            [
                Cell::Text(b"user42@example.com"),
                Cell::Text(b"user42"),
                Cell::Time(us),
            ],
        ] {
            assert!(!matches(42, RowView::Cells(bad.into_iter())), "{bad:?}");
        }
        // Fewer or more cells than the row has.
        let two = [Cell::Text(b"user42"), Cell::Text(b"user42@example.com")];
        assert!(!matches(42, RowView::Cells(two.into_iter())));
        let four = [
            Cell::Text(b"user42"),
            Cell::Text(b"user42@example.com"),
            Cell::Time(us),
            Cell::Null,
        ];
        assert!(!matches(42, RowView::Cells(four.into_iter())));
    }
}
