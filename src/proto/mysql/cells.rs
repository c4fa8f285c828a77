//! The cells of a binary result row and the length-encoded values they are framed with, read
//! in place as they are iterated.

use crate::proto::codec::Cell;

/// A length-encoded integer at the front of `b`, and the bytes after it.
pub fn lenenc(b: &[u8]) -> Option<(u64, &[u8])> {
    let (&first, rest) = b.split_first()?;
    let width = match first {
        0..=0xFA => return Some((first as u64, rest)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => return None, // 0xFB is NULL in text rows, 0xFF an error: not integers
    };
    let bytes = rest.get(..width)?;
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(bytes);
    Some((u64::from_le_bytes(v), &rest[width..]))
}

/// A length-encoded string at the front of `b`, and the bytes after it.
pub fn lenenc_str(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (n, rest) = lenenc(b)?;
    let n = usize::try_from(n).ok().filter(|&n| n <= rest.len())?;
    Some(rest.split_at(n))
}

/// The type byte of a column definition (ColumnDefinition41): six length-encoded strings
/// (catalog, schema, table, org_table, name, org_name), the length of the fixed fields, then
/// character set (2 bytes), column length (4), type.
pub fn column_type(def: &[u8]) -> Option<u8> {
    let mut rest = def;
    for _ in 0..6 {
        rest = lenenc_str(rest)?.1;
    }
    lenenc(rest)?.1.get(6).copied()
}

/// The cells of a binary row (0x00, a NULL bitmap whose bits start at offset 2, then each
/// non-NULL value in its type's binary form), read as they are iterated. Bytes that do not
/// frame read as one [`Cell::Other`], and so do bytes left after the last column.
#[derive(Clone, Debug)]
pub struct MyCells<'b> {
    nulls: &'b [u8],
    rest: &'b [u8],
    types: &'b [u8],
    index: usize,
    count: usize,
}

impl<'b> MyCells<'b> {
    pub fn new(row: &'b [u8], columns: u64, types: &'b [u8]) -> MyCells<'b> {
        let count = columns as usize; // at most MAX_COLUMNS
        let bitmap = (count + 7 + 2) / 8;
        match row.get(1..1 + bitmap) {
            Some(nulls) => MyCells {
                nulls,
                rest: &row[1 + bitmap..],
                types,
                index: 0,
                count,
            },
            None => MyCells {
                nulls: &[],
                rest: row,
                types,
                index: 0,
                count: 0,
            },
        }
    }

    /// The value of a column of type `t` at the front of `rest`, and the bytes after it.
    fn value(t: u8, rest: &'b [u8]) -> Option<(Cell<'b>, &'b [u8])> {
        let fixed = |n: usize| rest.get(n..).map(|after| (Cell::Other, after));
        match t {
            0x06 => Some((Cell::Null, rest)), // NULL
            0x01 => fixed(1),                 // TINY
            0x02 | 0x0d => fixed(2),          // SHORT, YEAR
            0x03 | 0x09 | 0x04 => fixed(4),   // LONG, INT24, FLOAT
            0x08 | 0x05 => fixed(8),          // LONGLONG, DOUBLE
            0x07 | 0x0a | 0x0c | 0x0b => {
                // TIMESTAMP, DATE, DATETIME, TIME: a length byte, then that many bytes.
                let (&len, after) = rest.split_first()?;
                let (v, after) = after.split_at_checked(len as usize)?;
                let cell = if t == 0x0b { Cell::Other } else { datetime(v) };
                Some((cell, after))
            }
            // Strings, blobs, decimals, enums, sets, bits, JSON, geometry: length-encoded.
            _ => lenenc_str(rest).map(|(v, after)| (Cell::Text(v), after)),
        }
    }
}

/// A binary DATETIME/TIMESTAMP/DATE without its length byte: year (2 LE), month, day, then
/// hour, minute, second and µs (4 LE) when not zero (the server drops trailing zero parts:
/// 4, 7 or 11 bytes). Malformed values are [`Cell::Other`].
pub(super) fn datetime(v: &[u8]) -> Cell<'static> {
    let (date, time, us) = match v.len() {
        4 => (v, &[0u8, 0, 0][..], 0),
        7 => (&v[..4], &v[4..7], 0),
        11 => (
            &v[..4],
            &v[4..7],
            u32::from_le_bytes([v[7], v[8], v[9], v[10]]),
        ),
        _ => return Cell::Other,
    };
    let y = u16::from_le_bytes([date[0], date[1]]);
    time_cell(y, date[2], date[3], time[0], time[1], time[2], us)
}

/// A MySQL date and time as a cell (also what mysql_async hands over); the zero date, and
/// dates with a zero month or day, are [`Cell::Other`].
pub fn time_cell(y: u16, m: u8, d: u8, h: u8, mi: u8, s: u8, us: u32) -> Cell<'static> {
    if m == 0 || d == 0 {
        return Cell::Other;
    }
    let unix = crate::date::unix_of(y.into(), m.into(), d.into(), h.into(), mi.into(), s.into());
    Cell::Time(unix * 1_000_000 + i64::from(us))
}

impl<'b> MyCells<'b> {
    /// The first column as an integer (TINY, SHORT, LONG, INT24, LONGLONG); None otherwise.
    pub fn first_int(&self) -> Option<u64> {
        let width = match self.types.first()? {
            0x01 => 1,
            0x02 => 2,
            0x03 | 0x09 => 4,
            0x08 => 8,
            _ => return None,
        };
        if self.count == 0 || self.nulls.first().is_some_and(|b| b & 0b100 != 0) {
            return None;
        }
        let mut le = [0u8; 8];
        le[..width].copy_from_slice(self.rest.get(..width)?);
        Some(u64::from_le_bytes(le))
    }
}

impl<'b> Iterator for MyCells<'b> {
    type Item = Cell<'b>;

    fn next(&mut self) -> Option<Cell<'b>> {
        if self.index >= self.count {
            return (!std::mem::take(&mut self.rest).is_empty()).then_some(Cell::Other);
        }
        let i = self.index;
        self.index += 1;
        let bit = i + 2;
        if self
            .nulls
            .get(bit / 8)
            .is_some_and(|b| b >> (bit % 8) & 1 == 1)
        {
            return Some(Cell::Null);
        }
        match self
            .types
            .get(i)
            .and_then(|&t| MyCells::value(t, self.rest))
        {
            Some((cell, after)) => {
                self.rest = after;
                Some(cell)
            }
            None => {
                // A column the prepare did not describe, or a value cut short: nothing after
                // it can be framed.
                self.index = self.count;
                self.rest = &[];
                Some(Cell::Other)
            }
        }
    }
}
