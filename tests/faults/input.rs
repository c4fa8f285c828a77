//! Bad input, what `prepare` says it loads, and passwords kept out of every output.

use super::*;

/// (arguments, expected fragment of the one-line message). Every case exits 2.
const BAD_INPUTS: &[(&[&str], &str)] = &[
    (&["run", "ftp://127.0.0.1/x"], "unknown target scheme"),
    (&["run", "127.0.0.1:5432"], "bad target"),
    (&["run", "postgres://h:99999/db"], "port"),
    (&["run", "postgres://h:notaport/db"], "port"),
    (&["run", "--keys", "10-1"], "key range"),
    (&["run", "--keys", "a-b"], "key range"),
    (&["run", "-d", "ten"], "duration"),
    (&["run", "-d", "0s"], "--duration"),
    (&["run", "--duration=-5s"], "duration"),
    (&["run", "-n", "0"], "--requests"),
    (&["run", "-n", "lots"], "count"),
    (&["run", "-c", "0"], "--connections"),
    (&["run", "-p", "0"], "--pipeline"),
    (&["run", "-t", "0"], "--threads"),
    (&["run", "--rate=-5"], "--rate"),
    (&["run", "-R", "0"], "--rate"),
    (&["run", "--dist", "gauss"], "--dist"),
    (&["run", "--dist", "zipf:3"], "--dist"),
    (&["run", "--dist", "hot:0.2"], "--dist"),
    (&["run", "--timeout", "0s"], "--timeout"),
    (&["run", "--interval", "1ms"], "--interval"),
    (&["run", "-d", "5s", "-n", "100"], "cannot be used with"),
    (&["run", "--sweep", "1,x"], "--sweep"),
    (&["run", "--slo", "p98=1ms"], "--slo"),
    (&["run", "--reconnect-backoff", "1s"], "--reconnect-backoff"),
    (&["run", "--start-at", "tomorrow"], "RFC 3339"),
    (&["run", "--run-label", "x=y"], "--metrics"),
    (&["run", "--metrics", "nonsense"], "metrics"),
    (
        &["run", "http://127.0.0.1:1/usr/{key}", "-n", "5"],
        "cannot connect",
    ),
    (&["run", "hs://127.0.0.1:9998/only_db"], "DATABASE/TABLE"),
    // URL options are checked before connecting: a typo or a bad value is refused.
    (
        &["run", "http://127.0.0.1:1/usr/{key}?pipeline=yes"],
        "pipeline=yes",
    ),
    // HTTP: params other than loadgen's are the server's (sent, not refused); -p pipelines
    // HTTP as every other target, and a URL that forbids it contradicts -p.
    (
        &["run", "http://127.0.0.1:1/usr/{key}?pipelined=1", "-n", "5"],
        "cannot connect",
    ),
    (
        &["run", "http://127.0.0.1:1/usr/{key}", "-p", "16", "-n", "5"],
        "cannot connect",
    ),
    (
        &["run", "http://127.0.0.1:1/usr/{key}?pipeline=0", "-p", "16"],
        "-p sets the pipeline depth",
    ),
    (
        &["run", "memcache://127.0.0.1:1?prefx=usr:"],
        "unknown option 'prefx'",
    ),
    (
        &["run", "postgres://u@127.0.0.1:1/db?sslmod=disable"],
        "unknown option 'sslmod'",
    ),
    (
        &["run", "postgres://u@127.0.0.1:1/db?sslmode=on"],
        "sslmode=on in postgres://u@127.0.0.1:1/db?sslmode=on: use one of disable, allow, prefer, require, verify-ca, verify-full",
    ),
    (
        &["run", "postgres://u@127.0.0.1:1/db?sslmode=verify-full"],
        "sslmode=verify-full needs the CA that signed the server's certificate: add sslrootcert=PATH",
    ),
    (&["prepare", "http://127.0.0.1:1/x"], "cannot prepare"),
    (
        &["prepare", "postgres://127.0.0.1:1/db", "--rows", "0"],
        "--rows",
    ),
    (&["serve", "--addr", "nowhere"], "--addr"),
    (&["run", "--batch", "0"], "--batch must be between 1 and 1000"),
    (
        &["run", "--batch", "10", "--mix", "read=9,update=1"],
        "--mix read=9,update=1 writes: use --mix read=100",
    ),
    (
        &["run", "http://127.0.0.1:1/kv?id={key}", "--batch", "10", "-n", "10"],
        "a multi-get of 10 keys (--batch, mget:N) on HTTP sends GET /PATH?ids=",
    ),
    (
        &["run", "--mix", "read=1,mget=1"],
        "mget needs its keys per request, as mget:10",
    ),
    (
        &["run", "--mix", "read=1,mget:5=1", "--batch", "5"],
        "both make multi-gets",
    ),
    (
        &["run", "--mix", "mget:5=1,update=1", "--verify"],
        "--verify checks a multi-get's rows",
    ),
    (&["merge", "/no/such/file.json"], "file.json"),
];

#[test]
fn bad_inputs_get_one_clear_line_and_exit_2() {
    for (args, needle) in BAD_INPUTS {
        let mut all: Vec<&str> = args.to_vec();
        if all[0] == "run" {
            all.extend_from_slice(&["-o", "-", "-q"]);
        }
        let out = run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: expected '{needle}' in: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("backtrace"),
            "{args:?}: {stderr}"
        );
        // clap adds a usage hint after its error line; our own errors are exactly one line
        let first = stderr.lines().next().unwrap_or("");
        assert!(
            first.contains("error") || first.starts_with("loadgen:"),
            "{args:?}: {stderr}"
        );
        if first.starts_with("loadgen:") {
            assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        }
    }
}

/// The "cannot prepare" line lists exactly what prepare loads, and prepare --help names each.
#[test]
fn prepare_names_what_it_loads() {
    let out = run(&["prepare", "hs://127.0.0.1:1/db/usr"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let list = stderr
        .split_once("use one of ")
        .and_then(|(_, rest)| rest.split(" (").next())
        .unwrap_or_else(|| panic!("no list in: {stderr}"))
        .trim();
    let schemes: Vec<&str> = list.split(", ").collect();
    assert_eq!(
        schemes,
        [
            "postgres://",
            "postgresql://",
            "mysql://",
            "mariadb://",
            "memcache://",
            "memcached://",
            "redis://",
            "rediss://",
            "redis+unix://",
            "unix://"
        ],
        "{stderr}"
    );
    let help = run(&["prepare", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for s in &schemes {
        assert!(
            help.contains(s),
            "prepare --help does not name {s}:\n{help}"
        );
    }
}

#[test]
fn passwords_never_appear_in_any_output_or_file() {
    let Some(url) = server("LOADGEN_PG_URL") else {
        return;
    };
    const SECRET: &str = "S3cretProbe42x";
    // Idempotent: a run cut short earlier leaves the role with its grant, which DROP ROLE refuses.
    pg_role_with_password(&url, "redact_probe", SECRET);
    let with_pw = url.replacen(
        "postgres://loadgen@",
        &format!("postgres://redact_probe:{SECRET}@"),
        1,
    );
    let dir = TempDir::new("loadgen-redact");
    let json = dir.join("r.json");
    let log = dir.join("r.hlog");
    let out = Command::new(bin())
        .args([
            "run",
            &with_pw,
            "-n",
            "2000",
            "-c",
            "2",
            "-o",
            json.to_str().unwrap(),
            "--hdr-log",
            log.to_str().unwrap(),
        ])
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("redact_probe:***@"),
        "the URL is shown redacted: {stdout}"
    );
    // wrong password, too
    let bad = with_pw.replace(SECRET, &format!("{SECRET}WRONG"));
    let out2 = Command::new(bin())
        .args(["run", &bad, "-n", "10", "-o", "-"])
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    let mut everything = format!(
        "{stdout}{stderr}{}{}",
        String::from_utf8_lossy(&out2.stdout),
        String::from_utf8_lossy(&out2.stderr)
    );
    for f in std::fs::read_dir(&dir).unwrap() {
        everything.push_str(&String::from_utf8_lossy(
            &std::fs::read(f.unwrap().path()).unwrap(),
        ));
    }
    assert!(!everything.contains(SECRET), "password leaked");
    psql(&url, "DROP OWNED BY redact_probe; DROP ROLE redact_probe");
}
