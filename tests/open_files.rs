//! The open-files limit: loadgen raises its soft limit to the hard one, and refuses (exit 2,
//! one line) a connection count that even the hard limit cannot hold.

mod common;
use common::*;

use std::process::Command;
use std::time::{Duration, Instant};

fn hard_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_max
}

/// Exit code, stdout and stderr of `loadgen ARGS` under `prlimit --nofile=SOFT:HARD`
/// (util-linux). A run still going after a minute is killed (by pid) and fails the test.
fn run_limited(soft: u64, hard: u64, args: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let dir = TempDir::new(&format!("loadgen-nofile-{soft}"));
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new("prlimit")
        .arg(format!("--nofile={soft}:{hard}"))
        .arg(bin())
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("prlimit runs (util-linux)");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loadgen {args:?} still running after 60s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status.code(),
        std::fs::read(&out).unwrap(),
        std::fs::read_to_string(&err).unwrap(),
    )
}

#[test]
fn a_hard_limit_too_low_for_the_connections_is_refused_before_the_run() {
    let (code, stdout, err) = run_limited(
        1024,
        1024,
        &["run", "-c", "2000", "-d", "2s", "-q", "-o", "-"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for part in ["-c 2000", "open files", "1024", "ulimit -Hn", "at most -c"] {
        assert!(err.contains(part), "missing '{part}': {err}");
    }
    assert!(stdout.is_empty(), "a run was reported");
}

#[test]
fn a_low_soft_limit_is_raised_and_every_connection_opens() {
    let hard = hard_limit();
    assert!(
        hard >= 4200,
        "this test needs a hard open-files limit of at least 4200 (ulimit -Hn is {hard})"
    );
    let (code, stdout, err) = run_limited(
        256,
        hard,
        &[
            "run", "-c", "2000", "-t", "2", "-n", "4000", "--format", "json", "-q", "-o", "-",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let r = &doc["runs"][0];
    assert_eq!(u(r, "connected"), 2000, "{err}");
    assert_eq!(u(r, "connect_failed"), 0);
    assert_eq!(u(r, "error_total"), 0, "{}", r["errors"]);
    assert_eq!(u(r, "hits"), 4000);
}
