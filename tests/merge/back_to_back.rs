//! Two real runs of the embedded target, merged: made one after the other (back to back, well
//! inside a second of each other) they are sequential; made together they are concurrent.

use super::*;

/// `loadgen run` of the embedded target for 1 s after a 200 ms warm-up, its result in `out`.
fn embedded_args<'a>(seed: &'a str, out: &'a str) -> Vec<&'a str> {
    #[rustfmt::skip]
    let args = vec![
        "run", "-d", "1s", "--warmup", "200ms", "-c", "2", "-t", "1", "--keys", "1-10000",
        "--seed", seed, "-q", "--format", "json", "-o", out,
    ];
    args
}

/// The two results and their paths, each checked to have exited 0.
fn results(dir: &Path, outs: Vec<std::process::Output>) -> (Vec<Value>, Vec<PathBuf>) {
    let paths: Vec<PathBuf> = (0..outs.len())
        .map(|i| dir.join(format!("r{i}.json")))
        .collect();
    let docs = outs
        .iter()
        .zip(&paths)
        .map(|(o, p)| {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
        })
        .collect();
    (docs, paths)
}

/// The merge of `paths`: (its run, stderr).
fn merged_run(paths: &[PathBuf]) -> (Value, String) {
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (code, doc, err) = merge(&paths);
    assert_eq!(code, 0, "{err}");
    let doc = doc.expect("merge printed JSON");
    assert_schema_valid(&doc);
    (doc["runs"][0].clone(), err)
}

const ONE_AFTER_THE_OTHER: &str = "the generators' measured windows do not overlap";

#[test]
fn runs_made_back_to_back_merge_as_one_after_the_other() {
    let dir = tmpdir("back-to-back");
    let outs: Vec<_> = ["1", "2"]
        .iter()
        .enumerate()
        .map(|(i, seed)| {
            let out = dir.join(format!("r{i}.json"));
            run(&embedded_args(seed, out.to_str().unwrap()))
        })
        .collect();
    let (docs, paths) = results(&dir, outs);
    let (a, b) = (&docs[0]["runs"][0], &docs[1]["runs"][0]);
    for d in &docs {
        let t = d["runs"][0]["started_at"].as_str().unwrap();
        assert!(loadgen::date::has_fraction(t), "started_at {t}");
    }
    let (m, err) = merged_run(&paths);
    assert!(err.contains(ONE_AFTER_THE_OTHER), "{err}");
    // Total answered over the summed windows, not the sum of their QPS.
    let windows = f(a, "duration_s") + f(b, "duration_s");
    assert!((f(&m, "duration_s") - windows).abs() < 1e-6, "{m}");
    let answered = u(&m, "hits") + u(&m, "misses");
    assert_eq!(
        answered,
        u(a, "hits") + u(a, "misses") + u(b, "hits") + u(b, "misses")
    );
    let want = answered as f64 / windows;
    assert!(
        (f(&m, "qps") - want).abs() <= 0.05 + 1e-9,
        "{} vs {want}",
        f(&m, "qps")
    );
    assert!(f(&m, "qps") < f(a, "qps") + f(b, "qps") - 1.0, "{m}");
    // Their timelines follow each other: every row of both, none added to another.
    let rows = |r: &Value| r["timeline"].as_array().unwrap().len();
    assert_eq!(rows(&m), rows(a) + rows(b));
}

#[test]
fn runs_made_together_merge_as_concurrent() {
    let dir = tmpdir("together");
    // Both wait for the same moment, so their windows coincide but for process start-up.
    let at = rfc3339(now_unix().ceil() as i64 + 2);
    let children: Vec<Child> = ["1", "2"]
        .iter()
        .enumerate()
        .map(|(i, seed)| {
            let out = dir.join(format!("r{i}.json"));
            let mut args = embedded_args(seed, out.to_str().unwrap());
            args.extend(["--start-at", at.as_str()]);
            spawn(&args)
        })
        .collect();
    let outs = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let (docs, paths) = results(&dir, outs);
    let (a, b) = (&docs[0]["runs"][0], &docs[1]["runs"][0]);
    let (m, err) = merged_run(&paths);
    assert!(!err.contains(ONE_AFTER_THE_OTHER), "{err}");
    // The sum of their QPS over the longest window.
    let sum = f(a, "qps") + f(b, "qps");
    assert!(
        (f(&m, "qps") - sum).abs() <= 0.05 + 1e-9,
        "{} vs {sum}",
        f(&m, "qps")
    );
    let longest = f(a, "duration_s").max(f(b, "duration_s"));
    assert!((f(&m, "duration_s") - longest).abs() < 1e-6, "{m}");
}
