use std::io::{Cursor, Write};

use super::*;
use crate::test_dir::TempDir;

fn ops(r: &mut TraceReader) -> Result<Vec<(Option<u64>, String)>, TraceError> {
    let mut v = Vec::new();
    while let Some(l) = r.next_line()? {
        v.push((l.time_us, String::from_utf8_lossy(l.key).into_owned()));
    }
    Ok(v)
}

const TEXT: &str = "# header\n0,a,1,10,1,get,0\n\n0.5,b,1,10,1,set,5\r\n1,c,1,0,2,delete,0";

#[test]
fn plain_and_zstd_files_read_the_same() {
    let dir = TempDir::new("lg-trace-reader");
    let plain = dir.join("t.csv");
    std::fs::write(&plain, TEXT).unwrap();
    // The magic number decides, not the name.
    let z = dir.join("t.csv.notzst");
    let mut enc = zstd::stream::write::Encoder::new(std::fs::File::create(&z).unwrap(), 3).unwrap();
    enc.write_all(TEXT.as_bytes()).unwrap();
    enc.finish().unwrap();
    let want = vec![
        (Some(0), "a".to_string()),
        (Some(500_000), "b".to_string()),
        (Some(1_000_000), "c".to_string()),
    ];
    assert_eq!(ops(&mut TraceReader::open(&plain).unwrap()).unwrap(), want);
    assert_eq!(ops(&mut TraceReader::open(&z).unwrap()).unwrap(), want);
}

#[test]
fn errors_name_the_file_and_line() {
    let src = Cursor::new(b"0,a,1,10,1,get,0\n\n1,b,1,10,1,put,0\n".to_vec());
    let mut r = TraceReader::from_reader(Path::new("t.csv"), Box::new(src));
    let e = ops(&mut r).unwrap_err().to_string();
    assert!(
        e.starts_with("trace t.csv line 3: unknown op \"put\""),
        "{e}"
    );
    let e = TraceReader::open(Path::new("/nonexistent/x.zst"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("trace /nonexistent/x.zst: cannot open"),
        "{e}"
    );
}

#[test]
fn a_truncated_zst_is_one_clear_error() {
    let mut z = zstd::stream::encode_all(TEXT.repeat(50).as_bytes(), 3).unwrap();
    z.truncate(z.len() / 2);
    let mut r = TraceReader::from_reader(
        Path::new("t.zst"),
        Box::new(std::io::BufReader::new(
            zstd::stream::read::Decoder::new(Cursor::new(z)).unwrap(),
        )),
    );
    let e = ops(&mut r).unwrap_err().to_string();
    assert!(
        e.contains("cannot read (a truncated or corrupt .zst?)"),
        "{e}"
    );
}
