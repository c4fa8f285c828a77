//! Dates: civil time from and to Unix seconds (UTC), and RFC 3339 times as the command line
//! and result files write them.

use crate::error::ConfigError;

/// Current UTC time as `2026-12-02T17:40:05Z` (file names).
pub fn now_rfc3339() -> String {
    let secs = since_epoch().as_secs();
    let (y, m, d, h, mi, s) = civil(secs as i64);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Current UTC time to the microsecond, `2026-12-02T17:40:05.250000Z`: when a run started,
/// fine enough that `merge` tells runs made one after the other from runs made together.
pub fn now_rfc3339_us() -> String {
    rfc3339_us(since_epoch())
}

/// Whether an RFC 3339 time has fractional seconds (`...:05.25Z`), not whole ones (`...:05Z`).
pub fn has_fraction(s: &str) -> bool {
    s.trim().as_bytes().get(19) == Some(&b'.')
}

/// A time since the Unix epoch as RFC 3339 UTC with six fractional digits.
pub fn rfc3339_us(t: std::time::Duration) -> String {
    let (y, m, d, h, mi, s) = civil(t.as_secs() as i64);
    let us = t.subsec_micros();
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}Z")
}

fn since_epoch() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
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

/// RFC 3339 time (`2026-12-02T17:40:00Z`, `2026-12-02T18:40:00.5+01:00`) as Unix seconds.
pub fn parse_rfc3339(s: &str) -> Result<f64, ConfigError> {
    let bad = || {
        ConfigError(format!(
            "bad time '{s}': use RFC 3339 like 2026-12-02T17:40:00Z"
        ))
    };
    let b = s.trim().as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b'T' || b[10] == b't' || b[10] == b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<u32, ConfigError> {
        std::str::from_utf8(&b[r])
            .ok()
            .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| t.parse().ok())
            .ok_or_else(bad)
    };
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut frac = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        frac = std::str::from_utf8(&b[start - 1..i])
            .ok()
            .and_then(|t| format!("0{t}").parse::<f64>().ok())
            .ok_or_else(bad)?;
    }
    let offset = match &b[i..] {
        b"Z" | b"z" => 0i64,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            // Digits only: byte arithmetic on anything else would read `+ab:cd` as hours.
            let two = |a: u8, b: u8| -> Result<i64, ConfigError> {
                if a.is_ascii_digit() && b.is_ascii_digit() {
                    Ok((a - b'0') as i64 * 10 + (b - b'0') as i64)
                } else {
                    Err(bad())
                }
            };
            let (hh, mm) = (two(*h1, *h2)?, two(*m1, *m2)?);
            if hh > 23 || mm > 59 {
                return Err(bad());
            }
            let o = hh * 3600 + mm * 60;
            if *sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return Err(bad()),
    };
    let unix = unix_of(y as i64, mo, d, h, mi, sec) - offset;
    Ok(unix as f64 + frac)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rfc3339_times() {
        assert_eq!(
            parse_rfc3339("2010-02-03T11:22:33Z").unwrap(),
            1_265_196_153.0
        );
        assert_eq!(
            parse_rfc3339("2010-02-03T12:22:33.5+01:00").unwrap(),
            1_265_196_153.5
        );
        for bad in [
            "2010-02-03",
            "2010-02-03T11:22:33",
            "2010-13-03T11:22:33Z",
            "yesterday",
            "2010-02-03T11:22:33+1",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn microsecond_stamps_read_back_exactly() {
        let t = std::time::Duration::new(1_265_196_153, 250_017_000);
        let s = rfc3339_us(t);
        assert_eq!(s, "2010-02-03T11:22:33.250017Z");
        assert!((parse_rfc3339(&s).unwrap() - 1_265_196_153.250017).abs() < 1e-6);
        assert!(has_fraction(&now_rfc3339_us()));
        assert!(!has_fraction("2010-02-03T11:22:33Z"));
    }

    #[test]
    fn rfc3339_offsets_take_digits_only() {
        // Letters and punctuation in the offset were read as bytes minus '0': `+ab:cd` was a
        // 549-hour offset and `+/0:00` overflowed (a panic in debug builds).
        for bad in [
            "2010-02-03T11:22:33+ab:cd",
            "2010-02-03T11:22:33+/0:00",
            "2010-02-03T11:22:33-0:-00",
            "2010-02-03T11:22:33+01:0x",
            "2010-02-03T11:22:33+24:00",
            "2010-02-03T11:22:33+01:60",
            "2010-02-03T11:22:33.Z",
            "2010-02-03T11:22:33.+01:00",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_rfc3339("2010-02-03T01:52:33-09:30").unwrap(),
            1_265_196_153.0
        );
        assert_eq!(
            parse_rfc3339("2010-02-03T11:22:33+00:00").unwrap(),
            1_265_196_153.0
        );
    }
}
