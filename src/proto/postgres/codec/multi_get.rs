//! PostgreSQL's multi-get (`--batch N`, `mget:N`): the statement is `... WHERE user_id =
//! ANY($1)` with the key column first, bound to one binary integer array of the N keys, or
//! with `?multi=in` `... WHERE user_id IN ($1, ..., $N)`, one binary integer per key. The rows
//! come in the index's order, one per distinct key found; each names its key in its first cell.

/// The multi-get of the data set's table.
pub const SQL: &str =
    "SELECT user_id, user_name, user_email, created FROM usr WHERE user_id = ANY($1)";

/// How a multi-get binds its keys (`?multi=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Form {
    /// One array parameter, `= ANY($1)`: one statement whatever N is.
    #[default]
    Any,
    /// One parameter per key, `IN ($1, ..., $N)`: what most ORMs send.
    In,
}

/// The statement of a multi-get of `n` keys in `form`.
pub fn sql(form: Form, n: usize) -> String {
    match form {
        Form::Any => SQL.to_string(),
        Form::In => {
            let params: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
            let head = SQL
                .strip_suffix("= ANY($1)")
                .expect("the multi-get ends in ANY");
            format!("{head}IN ({})", params.join(", "))
        }
    }
}

/// Appends Bind and Execute of a multi-get of `keys` in `form`: the array, or one parameter
/// per key (integers `width` bytes wide, binary results).
pub fn encode_form(form: Form, statement: &str, width: usize, keys: &[u64], out: &mut Vec<u8>) {
    match form {
        Form::Any => encode(statement, width, keys, out),
        Form::In => encode_in(statement, width, keys, out),
    }
}

/// Appends Bind (one binary integer parameter per key, binary results) and Execute of prepared
/// `statement`, whose N parameters are integers `width` bytes wide.
fn encode_in(statement: &str, width: usize, keys: &[u64], out: &mut Vec<u8>) {
    let bind = 1 + statement.len() + 1 + 4 + 2 + keys.len() * (4 + width) + 4;
    out.push(b'B');
    out.extend_from_slice(&(4 + bind as i32).to_be_bytes());
    out.push(0); // unnamed portal
    out.extend_from_slice(statement.as_bytes());
    out.push(0);
    out.extend_from_slice(&[0, 1, 0, 1]); // one parameter format for all: binary
    out.extend_from_slice(&(keys.len() as i16).to_be_bytes());
    for &k in keys {
        push_int(out, width, k);
    }
    out.extend_from_slice(&[0, 1, 0, 1]); // binary results
    out.extend_from_slice(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
}

/// One binary integer value with its length, `width` bytes wide.
fn push_int(out: &mut Vec<u8>, width: usize, k: u64) {
    out.extend_from_slice(&(width as i32).to_be_bytes());
    match width {
        2 => out.extend_from_slice(&(k as i16).to_be_bytes()),
        4 => out.extend_from_slice(&(k as i32).to_be_bytes()),
        _ => out.extend_from_slice(&(k as i64).to_be_bytes()),
    }
}

/// The element type of an integer array type $1 (int2[], int4[], int8[]); None for any other.
pub fn element(array_oid: u32) -> Option<u32> {
    match array_oid {
        1005 => Some(21),
        1007 => Some(23),
        1016 => Some(20),
        _ => None,
    }
}

/// Appends Bind (the array of `keys`, binary results) and Execute of prepared `statement`,
/// whose $1 is an array of integers `width` bytes wide (2, 4 or 8).
pub fn encode(statement: &str, width: usize, keys: &[u64], out: &mut Vec<u8>) {
    let oid: i32 = match width {
        2 => 21,
        4 => 23,
        _ => 20,
    };
    let param = 20 + keys.len() * (4 + width);
    let bind = 1 + statement.len() + 1 + 4 + 2 + 4 + param + 4;
    out.push(b'B');
    out.extend_from_slice(&(4 + bind as i32).to_be_bytes());
    out.push(0); // unnamed portal
    out.extend_from_slice(statement.as_bytes());
    out.push(0);
    out.extend_from_slice(&[0, 1, 0, 1, 0, 1]); // one binary parameter
    out.extend_from_slice(&(param as i32).to_be_bytes());
    // ndim 1, no NULLs, element type, N elements from index 1.
    for v in [1, 0, oid, keys.len() as i32, 1] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    for &k in keys {
        push_int(out, width, k);
    }
    out.extend_from_slice(&[0, 1, 0, 1]); // binary results
    out.extend_from_slice(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
}

/// The integer in a DataRow's first cell, and the offset of the cell after it.
pub fn first_cell(body: &[u8]) -> Option<(u64, usize)> {
    let len = i32::from_be_bytes(body.get(2..6)?.try_into().ok()?);
    let v = body.get(6..6 + usize::try_from(len).ok()?)?;
    let key = match v.len() {
        2 => i16::from_be_bytes(v.try_into().ok()?) as u64,
        4 => i32::from_be_bytes(v.try_into().ok()?) as u64,
        8 => i64::from_be_bytes(v.try_into().ok()?) as u64,
        _ => return None,
    };
    Some((key, 6 + v.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ErrorKind;
    use crate::proto::codec::{Codec, Tally};
    use crate::proto::postgres::codec::{KeyType, PgCodec};

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// The row of `key` as the server sends it: id, name, email, created (binary).
    fn row(key: u64, name: &str) -> Vec<u8> {
        let created = crate::dataset::created_unix(key) * 1_000_000 - 946_684_800_000_000;
        let email = format!("user{key}@example.com");
        let cols: [&[u8]; 4] = [
            &(key as i64).to_be_bytes(),
            name.as_bytes(),
            email.as_bytes(),
            &created.to_be_bytes(),
        ];
        let mut b = 4i16.to_be_bytes().to_vec();
        for c in cols {
            b.extend_from_slice(&(c.len() as i32).to_be_bytes());
            b.extend_from_slice(c);
        }
        msg(b'D', &b)
    }

    fn reply(rows: &[Vec<u8>]) -> Vec<u8> {
        let mut r = msg(b'2', &[]);
        rows.iter().for_each(|x| r.extend_from_slice(x));
        r.extend_from_slice(&msg(b'C', b"SELECT 2\0"));
        r.extend_from_slice(&msg(b'Z', b"I"));
        r
    }

    fn codec() -> PgCodec {
        PgCodec::new(KeyType::Int8, &[20, 25, 25, 1114])
    }

    #[test]
    fn the_in_form_binds_one_integer_per_key() {
        assert!(sql(Form::In, 3).ends_with("WHERE user_id IN ($1, $2, $3)"));
        assert_eq!(sql(Form::Any, 3), SQL);
        let mut out = Vec::new();
        encode_form(Form::In, "m", 8, &[7, 9], &mut out);
        let bind_len = i32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
        assert_eq!(out.len(), 1 + bind_len + 10, "Bind, then a 10-byte Execute");
        let body = &out[5..1 + bind_len];
        let want = [
            &b"\0m\0\0\x01\0\x01\0\x02"[..],
            &8i32.to_be_bytes(),
            &7i64.to_be_bytes(),
            &8i32.to_be_bytes(),
            &9i64.to_be_bytes(),
            &[0, 1, 0, 1],
        ]
        .concat();
        assert_eq!(body, &want[..]);
    }

    #[test]
    fn binds_one_int8_array_of_the_keys() {
        let mut out = Vec::new();
        encode("lg", 8, &[7, 42], &mut out);
        let param = &out[1 + 4 + 1 + 3 + 6..];
        assert_eq!(
            i32::from_be_bytes(param[..4].try_into().unwrap()),
            20 + 2 * 12
        );
        let arr = &param[4..];
        let ints: Vec<i32> = (0..5)
            .map(|i| i32::from_be_bytes(arr[i * 4..i * 4 + 4].try_into().unwrap()))
            .collect();
        assert_eq!(ints, [1, 0, 20, 2, 1]);
        assert_eq!(&arr[20..24], &8i32.to_be_bytes());
        assert_eq!(&arr[24..32], &7i64.to_be_bytes());
        assert_eq!(&arr[36..44], &42i64.to_be_bytes());
        let len = i32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
        assert_eq!(&out[1 + len..], &[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn a_key_asked_twice_is_two_hits_and_an_absent_key_a_miss() {
        let r = reply(&[row(7, "user7"), row(42, "user42")]);
        let keys = [42, 7, 9, 42];
        for cut in 0..r.len() {
            assert!(codec()
                .decode_batch(&r[..cut], &keys, true)
                .unwrap()
                .is_none());
        }
        let (n, t) = codec().decode_batch(&r, &keys, true).unwrap().unwrap();
        assert_eq!(n, r.len());
        assert_eq!(t.unwrap(), Tally { hits: 3, misses: 1 });
    }

    #[test]
    fn a_wrong_row_or_a_key_not_asked_fails_verify() {
        let r = reply(&[row(7, "user8")]);
        let (_, t) = codec().decode_batch(&r, &[7], true).unwrap().unwrap();
        assert_eq!(t.unwrap_err().kind, ErrorKind::Verify);
        let (_, t) = codec().decode_batch(&r, &[7], false).unwrap().unwrap();
        assert_eq!(t.unwrap(), Tally { hits: 1, misses: 0 });
        let r = reply(&[row(5, "user5")]);
        let (_, t) = codec().decode_batch(&r, &[7], false).unwrap().unwrap();
        assert_eq!(t.unwrap_err().kind, ErrorKind::Verify);
    }
}
