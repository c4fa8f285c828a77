//! Where loadgen's files go (`-o`, the chart beside it, `merge -o`, `--hdr-log`): a FIFO or a
//! device is written through and stays what it was, a symlink is followed and stays a link,
//! `-o -` puts the one JSON document on stdout. Embedded target only; everything under a temp
//! dir, never under /dev.

mod common;
use common::*;

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A fresh, empty directory under the system temp dir, removed when the test ends.
fn tempdir(tag: &str) -> TempDir {
    TempDir::new(&format!("loadgen-output-{tag}"))
}

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

fn is_fifo(p: &Path) -> bool {
    std::fs::symlink_metadata(p).unwrap().file_type().is_fifo()
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_symlink()
}

fn json_of(bytes: &[u8], what: &str) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "{what} is not one JSON document ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })
}

/// loadgen with `args`, in `cwd`.
fn lg(cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("loadgen runs")
}

/// A short embedded run (two targets when `two`, so a chart is due).
const SHORT: [&str; 7] = ["-n", "300", "-c", "2", "-t", "1", "-q"];

fn run_args<'a>(two: bool, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["run"];
    if two {
        v.extend(["embedded", "embedded"]);
    }
    v.extend(SHORT);
    v.extend_from_slice(extra);
    v
}

fn stderr_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs loadgen with `args` while this thread reads the FIFO at `fifo`; returns (output, what the
/// FIFO delivered). The read end is opened non-blocking first, so neither side waits on the
/// other, and loadgen cannot hang the test if it never opens the FIFO (the old behaviour).
fn run_reading_fifo(cwd: &Path, args: &[&str], fifo: &Path) -> (Output, Vec<u8>) {
    let mut r = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .expect("open the FIFO's read end");
    let child = Command::new(bin())
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loadgen starts");
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let finished = waiter.is_finished();
        // Before a writer opens it (and after it closes) a read returns 0; while one holds it
        // open with nothing to say, WouldBlock.
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the FIFO: {e}"),
            }
        }
        if finished {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "loadgen (pid {pid}) did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (waiter.join().unwrap(), got)
}

#[test]
fn a_fifo_gets_the_json_and_stays_a_fifo() {
    let d = tempdir("fifo");
    let fifo = d.join("f");
    mkfifo(&fifo);
    // Two targets: the document comes once, at the end, and no chart is written beside a FIFO.
    let args = run_args(true, &["-o", fifo.to_str().unwrap()]);
    let (out, got) = run_reading_fifo(&d, &args, &fifo);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_fifo(&fifo), "{} is no longer a FIFO", fifo.display());
    let doc = json_of(&got, "what the FIFO delivered");
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2, "{doc}");
    assert_eq!(names(&d), ["f"], "nothing beside the FIFO");
}

#[test]
fn a_symlink_is_followed_and_stays_a_link() {
    let d = tempdir("link");
    std::fs::create_dir(d.join("real")).unwrap();
    let target = d.join("real/r.json");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink("real/r.json", d.join("link.json")).unwrap();
    let out = lg(&d, &run_args(false, &["-o", "link.json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_link(&d.join("link.json")), "the link was replaced");
    let doc = json_of(&std::fs::read(&target).unwrap(), "the link's target");
    assert_eq!(u(&doc["runs"][0], "hits"), 300);
    assert_eq!(names(&d.join("real")), ["r.json"], "no temp file left");
}

#[test]
fn a_dangling_symlink_creates_its_target() {
    let d = tempdir("dangling");
    std::fs::create_dir(d.join("real")).unwrap();
    std::os::unix::fs::symlink(d.join("real/new.json"), d.join("link.json")).unwrap();
    let out = lg(&d, &run_args(false, &["-o", "link.json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_link(&d.join("link.json")), "the link was replaced");
    let doc = json_of(
        &std::fs::read(d.join("real/new.json")).expect("the target was created"),
        "the link's target",
    );
    assert_eq!(u(&doc["runs"][0], "hits"), 300);
}

#[test]
fn dash_puts_one_json_document_on_stdout_and_the_report_on_stderr() {
    let d = tempdir("dash");
    // /dev/stdout through a link of our own: a regression that renames over the path then
    // replaces only the link, never the real /dev/stdout.
    std::os::unix::fs::symlink("/dev/stdout", d.join("stdout")).unwrap();
    for extra in [
        &["-o", "-"][..],
        &["-o", "stdout"],
        &["-o", "-", "--format", "json"],
    ] {
        let out = lg(&d, &run_args(true, extra));
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {err}");
        let doc = json_of(&out.stdout, "stdout");
        assert_eq!(doc["runs"].as_array().unwrap().len(), 2, "{extra:?}");
        if !extra.contains(&"json") {
            assert!(
                err.contains("latency") && err.contains("outcomes"),
                "{extra:?}: the text report is on stderr: {err}"
            );
        }
        assert!(!err.contains("result written"), "{extra:?}: {err}");
    }
    assert_eq!(names(&d), ["stdout"], "no file written");
    assert!(is_link(&d.join("stdout")));
}

#[test]
fn a_regular_file_is_replaced_atomically_keeping_its_mode() {
    let d = tempdir("regular");
    let p = d.join("r.json");
    std::fs::write(&p, "old").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ino = std::fs::metadata(&p).unwrap().ino();
    let out = lg(&d, &run_args(false, &["-o", "r.json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let m = std::fs::metadata(&p).unwrap();
    // A new inode: renamed into place, never truncated and rewritten where a reader could
    // see half of it.
    assert_ne!(m.ino(), ino, "the file was rewritten in place");
    assert_eq!(
        m.permissions().mode() & 0o777,
        0o600,
        "a private result stays private"
    );
    json_of(&std::fs::read(&p).unwrap(), "r.json");
    assert_eq!(names(&d), ["r.html", "r.json"], "no temp file left");
}

#[test]
fn a_device_node_is_written_through_and_gets_no_chart() {
    let d = tempdir("device");
    let dev = d.join("null");
    let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
    // The null device (1, 3), made here so the real /dev is never touched.
    let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if rc != 0 {
        eprintln!(
            "skipped: mknod needs root with CAP_MKNOD ({})",
            std::io::Error::last_os_error()
        );
        return;
    }
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(&dev) {
        eprintln!("skipped: device nodes cannot be opened here (nodev mount?): {e}");
        return;
    }
    let out = lg(&d, &run_args(true, &["-o", "null"]));
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let m = std::fs::symlink_metadata(&dev).unwrap();
    assert!(
        m.file_type().is_char_device(),
        "the device node was replaced"
    );
    assert_eq!(names(&d), ["null"], "no chart or temp file beside a device");
    assert!(err.contains("result written to null\n"), "{err}");
}

#[test]
fn merge_writes_through_a_fifo_and_follows_a_symlink() {
    let d = tempdir("merge");
    let a = d.join("a.json");
    let out = lg(&d, &run_args(false, &["-o", a.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let fifo = d.join("f");
    mkfifo(&fifo);
    let (out, got) = run_reading_fifo(
        &d,
        &["merge", a.to_str().unwrap(), "-o", fifo.to_str().unwrap()],
        &fifo,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_fifo(&fifo), "merge -o replaced the FIFO");
    let doc = json_of(&got, "what the FIFO delivered");
    assert_eq!(u(&doc["runs"][0], "hits"), 300);

    std::fs::write(d.join("m.json"), "old").unwrap();
    std::os::unix::fs::symlink("m.json", d.join("link.json")).unwrap();
    let out = lg(&d, &["merge", "a.json", "-o", "link.json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_link(&d.join("link.json")), "merge -o replaced the link");
    let doc = json_of(&std::fs::read(d.join("m.json")).unwrap(), "m.json");
    assert_eq!(u(&doc["runs"][0], "hits"), 300);

    // merge -o -: the merged JSON on stdout, the text report on stderr.
    let out = lg(&d, &["merge", "a.json", "-o", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    json_of(&out.stdout, "merge -o - stdout");
    assert!(stderr_of(&out).contains("latency"), "{}", stderr_of(&out));
    // The HTML report went beside the link merge -o named, as a run's goes beside its JSON.
    assert_eq!(
        names(&d),
        ["a.html", "a.json", "f", "link.html", "link.json", "m.json"]
    );
}

#[test]
fn hdr_log_follows_symlinks_writes_through_fifos_and_refuses_stdout() {
    let d = tempdir("hdrlog");
    // A symlink to a regular file: the target gets the log.
    std::fs::write(d.join("real.hlog"), "old").unwrap();
    std::os::unix::fs::symlink("real.hlog", d.join("link.hlog")).unwrap();
    let out = lg(
        &d,
        &run_args(false, &["-o", "r.json", "--hdr-log", "link.hlog"]),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(is_link(&d.join("link.hlog")));
    let log = std::fs::read_to_string(d.join("real.hlog")).unwrap();
    assert!(log.starts_with("#[Histogram log format"), "{log}");

    // A symlink to a FIFO: written through, no error (a pipe cannot be fsynced).
    let fifo = d.join("f");
    mkfifo(&fifo);
    std::os::unix::fs::symlink("f", d.join("fifo-link")).unwrap();
    let args = run_args(false, &["-o", "r.json", "--hdr-log", "fifo-link"]);
    let (out, got) = run_reading_fifo(&d, &args, &fifo);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("cannot"), "{err}");
    assert!(is_fifo(&fifo) && is_link(&d.join("fifo-link")));
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("#[Histogram log format"), "{got}");
    assert!(
        got.contains("Tag=embedded,"),
        "an interval was logged: {got}"
    );

    // Standard output carries the report: refused before the run, nothing created.
    std::os::unix::fs::symlink("/dev/stdout", d.join("stdout")).unwrap();
    let before = names(&d);
    for to in ["-", "stdout"] {
        let out = lg(&d, &run_args(false, &["-o", "r.json", "--hdr-log", to]));
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "--hdr-log {to}: {err}");
        assert!(err.contains("standard output"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(names(&d), before, "no file named '-'");
}

/// Default names say what the document holds, and the "written to" line names the HTML report
/// and the chart beside it.
#[test]
fn default_names_say_compare_sweep_or_slo_and_name_the_chart() {
    let d = tempdir("names");
    let cases: [(&[&str], &str, bool); 4] = [
        (&["run", "-n", "300"], "embedded", false),
        (
            &["run", "embedded", "embedded", "-n", "300"],
            "compare",
            true,
        ),
        (&["run", "--sweep", "1,2", "-n", "300"], "sweep", true),
        (
            &["run", "--slo", "p99=2s", "-d", "200ms", "--warmup", "0"],
            "slo",
            false,
        ),
    ];
    for (args, kind, chart) in cases {
        let _ = std::fs::remove_dir_all(d.join("results"));
        let mut all = args.to_vec();
        all.extend(["-c", "2", "-t", "1", "-q"]);
        let out = lg(&d, &all);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        let files = names(&d.join("results"));
        let json: Vec<&String> = files.iter().filter(|f| f.ends_with(".json")).collect();
        assert_eq!(json.len(), 1, "{args:?}: {files:?}");
        assert!(
            json[0].ends_with(&format!("-{kind}.json")),
            "{args:?}: {files:?}"
        );
        let line = err
            .lines()
            .find(|l| l.starts_with("loadgen: result written to"))
            .unwrap_or_else(|| panic!("{args:?}: {err}"));
        let svg = json[0].replace(".json", ".svg");
        let html = json[0].replace(".json", ".html");
        assert_eq!(files.contains(&svg), chart, "{args:?}: {files:?}");
        assert!(files.contains(&html), "{args:?}: {files:?}");
        assert_eq!(files.len(), 2 + chart as usize, "{args:?}: {files:?}");
        let beside = if chart {
            format!("report: results/{html}, chart: results/{svg}")
        } else {
            format!("report: results/{html}")
        };
        assert_eq!(
            line,
            format!("loadgen: result written to results/{} ({beside})", json[0])
        );
    }
}

/// `-o` into a directory that does not exist is refused before the run, in one line naming the
/// directory, and creates nothing (it used to make the whole missing path); the default
/// `results/` is still made when absent.
#[test]
fn a_missing_directory_is_refused_not_created() {
    let d = tempdir("missing-dir");
    for to in ["no/such/dir/r.json", "gone/r.json"] {
        let out = lg(&d, &run_args(false, &["-o", to]));
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "-o {to}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let dir = Path::new(to).parent().unwrap().display().to_string();
        assert!(
            err.contains(&format!("directory {dir} does not exist")),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(names(&d).is_empty(), "nothing created: {:?}", names(&d));
    let out = lg(&d, &run_args(false, &[]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(d.join("results").is_dir());
}
