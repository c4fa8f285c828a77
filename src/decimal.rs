//! Decimal digits in and out without the formatting machinery: keys go into every request,
//! lengths and counts come back in every reply, and `--verify` compares ids in every row.
//! The one writer and the one parser every codec and the data set use.

/// The digits of `n`, written right-aligned into `buf`.
pub fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Appends the digits of `n`.
pub fn push(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(digits(n, &mut buf));
}

/// 1 to 20 ASCII digits (no sign, no spaces) whose value fits in `T`; anything else is `None`.
pub fn parse<T: TryFrom<u64>>(text: &[u8]) -> Option<T> {
    if text.is_empty() || text.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &d in text {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    T::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_parses_every_width() {
        let mut buf = [0u8; 20];
        for n in [0u64, 7, 10, 99, 12_345, u64::from(u32::MAX), u64::MAX] {
            let d = digits(n, &mut buf);
            assert_eq!(d, n.to_string().as_bytes());
            assert_eq!(parse::<u64>(d), Some(n));
            let mut out = b"x".to_vec();
            push(&mut out, n);
            assert_eq!(out[1..], *n.to_string().as_bytes());
        }
    }

    #[test]
    fn parse_refuses_what_is_not_plain_digits_or_does_not_fit() {
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"1a",
            b"0x10",
            b"18446744073709551616",
        ] {
            assert_eq!(parse::<u64>(bad), None, "{bad:?}");
        }
        assert_eq!(parse::<u64>(&[b'0'; 21]), None);
        assert_eq!(parse::<u64>(&[b'0'; 20]), Some(0));
        assert_eq!(parse::<u32>(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse::<u32>(b"4294967296"), None);
        assert_eq!(parse::<i64>(b"9223372036854775808"), None);
    }
}
