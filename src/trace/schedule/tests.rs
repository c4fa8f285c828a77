use std::io::Cursor;
use std::path::Path;

use super::*;

fn batches(text: &str, speed: f64) -> Vec<Vec<(Option<u64>, String)>> {
    let r = TraceReader::from_reader(
        Path::new("t"),
        Box::new(Cursor::new(text.as_bytes().to_vec())),
    );
    let mut s = Schedule::new(r, speed);
    let mut b = Batch::default();
    let mut all = Vec::new();
    while s.next_batch(&mut b).unwrap() {
        let v = b
            .entries
            .iter()
            .map(|e| (e.due_us, String::from_utf8_lossy(b.key(e)).into_owned()));
        all.push(v.collect());
    }
    all
}

fn s(v: &[(Option<u64>, &str)]) -> Vec<(Option<u64>, String)> {
    v.iter().map(|(t, k)| (*t, k.to_string())).collect()
}

#[test]
fn whole_seconds_spread_evenly_from_the_first_request() {
    let t = "100,a,1,0,1,get,0\n100,bb,1,0,1,get,0\n100,c,1,0,1,set,0\n100,d,1,0,1,get,0\n\
             101,e,1,0,1,get,0\n103,f,1,0,1,get,0\n103,g,1,0,1,get,0\n";
    let want = vec![
        s(&[
            (Some(0), "a"),
            (Some(250_000), "bb"),
            (Some(500_000), "c"),
            (Some(750_000), "d"),
        ]),
        s(&[(Some(1_000_000), "e")]),
        s(&[(Some(3_000_000), "f"), (Some(3_500_000), "g")]),
    ];
    assert_eq!(batches(t, 1.0), want);
}

#[test]
fn finer_timestamps_are_kept_and_speed_divides() {
    let t = "0.1,a,1,0,1,get,0\n0.9,b,1,0,1,get,0\n2,c,1,0,1,get,0\n2,d,1,0,1,get,0\n";
    let want = vec![
        s(&[(Some(0), "a"), (Some(160_000), "b")]),
        s(&[(Some(380_000), "c"), (Some(480_000), "d")]),
    ];
    assert_eq!(batches(t, 5.0), want);
}

#[test]
fn key_lists_come_in_fixed_batches_without_times() {
    let t: String = (0..PLAIN_BATCH + 3).map(|i| format!("{i}\n")).collect();
    let b = batches(&t, 1.0);
    assert_eq!(
        b.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![PLAIN_BATCH, 3]
    );
    assert_eq!(b[1][2], (None, format!("{}", PLAIN_BATCH + 2)));
}
