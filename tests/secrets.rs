//! No password or secret reaches any output: one target of each kind, each with a distinctive
//! password or secret (in the userinfo, in `?secret=`/`?token=`, in a nested `?mysql=` URL), and
//! every output is searched for it: stdout, stderr, the result JSON, the SVG and HTML beside it,
//! the HDR log, `/metrics` scraped during the run, a sweep's files, and `merge` and `report` (fed a
//! file as an older loadgen wrote it, with the passwords in). Failures (wrong password, a URL that does not
//! parse) must not print them either.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PG_ROLE: &str = "lg_secret_pg";
const PG_PW: &str = "Zq7pgS3cretXy";
const MY_USER: &str = "lg_secret_my";
const MY_PW: &str = "Kw4mySecr3tQp";
const MC_PW: &str = "Mc9cacheS3crVb";
const REDIS_USER: &str = "lg_secret_redis";
const REDIS_PW: &str = "Rd6redisS3cretNk";
const HTTP_PW: &str = "Ht5userS3cretJw";
const HTTP_TOKEN: &str = "Tk8tokenS3cretLm";
const WRONG: &str = "Wr0ngS3cretZzq";

struct Env {
    pg: String,
    my: String,
    hs: String,
    hs_secret: String,
    mc_port: String,
    redis: String,
}

/// The servers, and our own PostgreSQL role and MariaDB user with distinctive passwords.
fn setup() -> Option<Env> {
    let pg_admin = server("LOADGEN_PG_URL")?;
    let _ = server("LOADGEN_MY_URL")?;
    let hs = server("LOADGEN_HS_URL")?;
    let mc = server("LOADGEN_MC_URL")?;
    let hs_secret = server("LOADGEN_HS_SECRET")?;
    let _ = server("LOADGEN_REDIS_URL")?;
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} (servers.sh env)"));
    pg_role_with_password(&pg_admin, PG_ROLE, PG_PW);
    my_user_with_password(MY_USER, MY_PW);
    redis_user_with_password(REDIS_USER, REDIS_PW);
    Some(Env {
        pg: format!(
            "postgres://{PG_ROLE}:{PG_PW}@127.0.0.1:{}/loadgen",
            var("LOADGEN_PG_PORT")
        ),
        my: format!(
            "mysql://{MY_USER}:{MY_PW}@127.0.0.1:{}/loadgen",
            var("LOADGEN_MY_PORT")
        ),
        hs,
        hs_secret,
        mc_port: mc
            .rsplit_once(':')
            .expect("memcache URL has a port")
            .1
            .to_string(),
        redis: format!(
            "redis://{REDIS_USER}:{REDIS_PW}@127.0.0.1:{}",
            var("LOADGEN_REDIS_PORT")
        ),
    })
}

/// loadgen with no password or secret in its environment: only the URLs carry them.
fn loadgen() -> Command {
    let mut c = Command::new(bin());
    c.env_remove("PGPASSWORD")
        .env_remove("MYSQL_PWD")
        .env_remove("LOADGEN_HS_SECRET")
        .env_remove("LOADGEN_REDIS_PASSWORD");
    c
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read(p: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .into_owned()
}

/// `GET path` (`/metrics`, or the live page's `/` and `/live.json`) from the exporter.
fn scrape(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// Fails naming the output and the secret when any secret is in any output.
fn assert_clean(outputs: &[(String, String)], secrets: &[&str]) {
    for (name, body) in outputs {
        for s in secrets {
            assert!(!body.contains(s), "secret {s} leaked into {name}:\n{body}");
        }
    }
}

#[test]
fn no_output_of_a_run_a_sweep_or_a_merge_holds_a_secret() {
    let Some(env) = setup() else { return };
    let served = Served::start(1000);
    let nested = format!("{}?secret={}&mysql={}", env.hs, env.hs_secret, env.my);
    let http = served
        .url
        .replacen("http://", &format!("http://lg:{HTTP_PW}@"), 1)
        + &format!("?token={HTTP_TOKEN}&format=raw");
    let targets = [
        env.pg.clone(),
        format!("{}?driver=tokio", env.pg),
        env.my.clone(),
        nested.clone(),
        format!("memcache://lg:{MC_PW}@127.0.0.1:{}", env.mc_port),
        http,
        env.redis.clone(),
    ];
    let secrets = [
        PG_PW,
        MY_PW,
        MC_PW,
        REDIS_PW,
        HTTP_PW,
        HTTP_TOKEN,
        env.hs_secret.as_str(),
    ];
    let dir = TempDir::new("loadgen-secrets");
    let json = dir.join("r.json");
    let hdr = dir.join("r.hlog");
    let port = free_port();
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(targets.iter().cloned());
    for a in [
        "-d",
        "600ms",
        "--warmup",
        "0s",
        "--interval",
        "200ms",
        "-c",
        "2",
        "--keys",
        "1-1000",
        "-o",
        json.to_str().unwrap(),
        "--hdr-log",
        hdr.to_str().unwrap(),
        "--metrics",
        &format!("127.0.0.1:{port}"),
        "--metrics-linger",
        "1s",
    ] {
        args.push(a.into());
    }
    let mut child = loadgen()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Scrape all through the run and the linger: every target's series is seen while live.
    let (mut metrics, mut live) = (String::new(), String::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run did not end");
        if let Some(m) = scrape(port, "/metrics") {
            metrics.push_str(&m);
        }
        for path in ["/", "/live.json"] {
            if let Some(m) = scrape(port, path) {
                live.push_str(&m);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    assert_eq!(
        doc["runs"].as_array().unwrap().len(),
        targets.len(),
        "{stderr}"
    );
    for kind in ["postgres", "mysql", "hs", "memcache", "http", "redis"] {
        assert!(
            metrics.contains(&format!("target=\"{kind}")),
            "no {kind} series scraped:\n{metrics}"
        );
    }
    // The live page names every target (redacted, as the report does).
    for kind in ["postgres", "mysql", "hs", "memcache", "http", "redis"] {
        assert!(
            live.contains(&format!("\"kind\":\"{kind}\"")),
            "no {kind} on the live page:\n{live}"
        );
    }
    // Metric labels and HDR tags never carry a URL; the shown URLs keep all but the secret.
    assert!(!metrics.contains("://"), "a URL in the metrics:\n{metrics}");
    assert!(!read(&hdr).contains("://"), "a URL in the HDR log");
    let shown = format!(
        "{}?secret=***&mysql=mysql://{MY_USER}:***@127.0.0.1:",
        env.hs
    );
    assert!(stdout.contains(&shown), "{shown} not in:\n{stdout}");
    assert_eq!(
        doc["runs"][3]["target"].as_str().unwrap(),
        redacted(&nested)
    );
    assert!(
        stderr.contains(&format!("loadgen: running target 4 of 7: {shown}")),
        "{stderr}"
    );
    assert!(stdout.contains(&format!("{PG_ROLE}:***@")), "{stdout}");
    assert!(stdout.contains("token=***&format=raw"), "{stdout}");

    // A sweep: its table, its JSON and its chart.
    let sweep_json = dir.join("s.json");
    let sweep = loadgen()
        .args([
            "run",
            &nested,
            "--sweep",
            "1,2",
            "-d",
            "300ms",
            "--warmup",
            "0s",
            "-o",
            sweep_json.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (sweep_out, sweep_err) = text(&sweep);
    assert_eq!(sweep.status.code(), Some(0), "{sweep_err}");

    // merge: of the file as written, and of one as an older loadgen wrote it, with the
    // passwords in its targets (named differently, so the warning that lists both targets
    // runs), an error sample and the connect error.
    let mut old = doc.clone();
    for (i, t) in targets.iter().enumerate() {
        old["runs"][i]["target"] = t.replacen("127.0.0.1", "localhost", 1).into();
        old["runs"][i]["error_samples"] = serde_json::json!([format!("io: lost {t}")]);
        old["runs"][i]["connect_error"] = format!("cannot connect to {t}").into();
    }
    let old_json = dir.join("old.json");
    std::fs::write(&old_json, serde_json::to_vec_pretty(&old).unwrap()).unwrap();
    let merged_json = dir.join("m.json");
    let merge_text = loadgen()
        .args(["merge", json.to_str().unwrap(), old_json.to_str().unwrap()])
        .args(["-o", merged_json.to_str().unwrap()])
        .output()
        .unwrap();
    let merge_json = loadgen()
        .args(["merge", old_json.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    // The HTML report of that old file (the run and the sweep wrote theirs beside their JSON).
    let report = loadgen()
        .args(["report", old_json.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(report.status.code(), Some(0), "{}", text(&report).1);
    let (mt_out, mt_err) = text(&merge_text);
    let (mj_out, mj_err) = text(&merge_json);
    assert_eq!(merge_text.status.code(), Some(0), "{mt_err}");
    assert_eq!(merge_json.status.code(), Some(0), "{mj_err}");
    assert!(
        mt_err.contains("name the target differently"),
        "the warning that lists the targets was not exercised: {mt_err}"
    );

    let mut outputs = vec![
        ("run stdout".to_string(), stdout),
        ("run stderr".into(), stderr),
        ("metrics".into(), metrics),
        ("live page and live.json".into(), live),
        ("sweep stdout".into(), sweep_out),
        ("sweep stderr".into(), sweep_err),
        ("merge stdout".into(), mt_out),
        ("merge stderr".into(), mt_err),
        ("merge --format json".into(), mj_out),
        ("merge --format json stderr".into(), mj_err),
    ];
    let mut files = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let p = f.unwrap().path();
        if p != old_json {
            files += 1;
            outputs.push((p.display().to_string(), read(&p)));
        }
    }
    // r.json, r.svg, r.html, r.hlog, s.json, s.svg, s.html, m.json, m.html, old.html
    assert_eq!(files, 10, "{outputs:?}");
    assert_clean(&outputs, &secrets);
}

/// The form loadgen shows: parsed, secrets masked, the rest kept.
fn redacted(url: &str) -> String {
    loadgen::url::redact_str(url)
}

#[test]
fn failures_never_print_the_secret() {
    let Some(env) = setup() else { return };
    let wrong_pg = env.pg.replace(PG_PW, WRONG);
    let wrong_my = env.my.replace(MY_PW, WRONG);
    // (URL, what the one error line must say)
    let fatal = [
        (wrong_pg.clone(), "password"),
        (format!("{wrong_pg}?driver=tokio"), "password"),
        (wrong_my.clone(), "Access denied"),
        (format!("{wrong_my}?driver=mysql_async"), "Access denied"),
        (format!("{}?secret={WRONG}", env.hs), "secret"),
        (env.redis.replace(REDIS_PW, WRONG), "refused the password"),
        // An unencoded '/' in the password: the URL does not parse.
        (env.pg.replace(PG_PW, &format!("{WRONG}/x")), "bad target"),
        (
            format!("http://u:{WRONG}@127.0.0.1:1/usr/{{key}}?token={WRONG}"),
            "cannot connect",
        ),
    ];
    for (url, needle) in &fatal {
        let out = loadgen()
            .args(["run", url, "-n", "10", "--timeout", "2s", "-o", "-"])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needle), "'{needle}' not in: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert_clean(
            &[("stdout".into(), stdout), ("stderr".into(), stderr)],
            &[WRONG],
        );
    }
    // The nested URL's login fails: the run goes on without the server count, and says why
    // without the password.
    let nested = format!("{}?secret={}&mysql={wrong_my}", env.hs, env.hs_secret);
    let out = loadgen()
        .args([
            "run", &nested, "-n", "100", "-c", "1", "--format", "json", "-o", "-",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("Access denied"), "{stdout}");
    assert_clean(
        &[("stdout".into(), stdout), ("stderr".into(), stderr)],
        &[WRONG, &env.hs_secret],
    );
}

/// `run --repeat`: the result holds no password, so a user retypes the target (secret and all)
/// or sets the server's variable (REDISCLI_AUTH for Redis, PGPASSWORD, MYSQL_PWD). The
/// `repeating ...` line, the report and the new result hold none of them.
#[test]
fn a_repeat_never_prints_the_password() {
    let Some(env) = setup() else { return };
    let dir = TempDir::new("secrets-repeat");
    for (url, var, pw) in [
        (&env.redis, "REDISCLI_AUTH", REDIS_PW),
        (&env.pg, "PGPASSWORD", PG_PW),
        (&env.my, "MYSQL_PWD", MY_PW),
    ] {
        let first = dir.path().join("first.json");
        let again = dir.path().join("again.json");
        let out = loadgen()
            .args(["run", url, "-n", "200", "-c", "1", "-q", "--format", "json"])
            .arg("-o")
            .arg(&first)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out).1);
        let mut outputs = vec![("first.json".to_string(), read(&first))];
        // The target retyped with its password beside --repeat.
        let retyped = loadgen()
            .arg("run")
            .arg("--repeat")
            .arg(&first)
            .arg(url)
            .arg("-o")
            .arg(&again)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&retyped);
        assert_eq!(retyped.status.code(), Some(0), "{url}: {stderr}");
        assert!(stderr.contains("loadgen: repeating"), "{stderr}");
        outputs.push(("retyped stdout".into(), stdout));
        outputs.push(("retyped stderr".into(), stderr));
        outputs.push(("again.json".into(), read(&again)));
        // No target given: the file's (password masked, so dropped) with the password from
        // the server's own variable.
        let from_env = loadgen()
            .arg("run")
            .arg("--repeat")
            .arg(&first)
            .env(var, pw)
            .args(["--format", "json", "-o", "-"])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&from_env);
        assert_eq!(from_env.status.code(), Some(0), "{var}: {stderr}");
        let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(u(&doc, "runs.0.requests"), 200, "{stdout}");
        outputs.push((format!("{var} stdout"), stdout));
        outputs.push((format!("{var} stderr"), stderr));
        assert_clean(&outputs, &[pw]);
    }
}
