//! The one `match` on the URL scheme: it builds the concrete target and calls the generic run,
//! so every target gets its own monomorphized request loop.

use std::sync::Arc;

use crate::plan::Plan;
use crate::proto::redis::RedisTarget;
use crate::report::result::RunResult;
use crate::run::{run, Control};
use crate::serve::ServerStats;
use crate::target::handlersocket::HsTarget;
use crate::target::http::HttpTarget;
use crate::target::memcached::McTarget;
use crate::target::mysql::MysqlTarget;
use crate::target::mysqlwire::MyWireTarget;
use crate::target::pgwire::PgWireTarget;
use crate::target::postgres::PgTarget;
use crate::target::{SetupError, TargetUrl, SCHEMES};

/// The embedded server, when the run uses it: its URL and its own counters.
pub struct Embedded {
    pub url: String,
    pub stats: Arc<ServerStats>,
}

pub async fn run_target(
    target: &str,
    plan: &Plan,
    control: &Control,
    embedded: Option<&Embedded>,
) -> Result<RunResult, SetupError> {
    if target == "embedded" {
        let e = embedded.ok_or_else(|| SetupError("the embedded server is not running".into()))?;
        let url = TargetUrl::parse(&e.url)?;
        let t = HttpTarget::new(&url, plan.verify, Some(e.stats.clone()))?;
        return run(t, plan, &url.redacted(), control).await;
    }
    let url = TargetUrl::parse(target)?;
    let label = url.redacted();
    let options = |known: &[&str]| check_options(&url, &label, known);
    match url.scheme.as_str() {
        // The lean wire driver is the default: measured ~1.4x the QPS of tokio-postgres at the
        // same settings here, because it spends a third of the client CPU per lookup (README).
        // Simple mode needs the query protocol, which only the tokio-postgres path speaks.
        "postgres" | "postgresql" => {
            pg_sslmode(&url, &label)?;
            let simple = plan.mode == crate::plan::Mode::Simple;
            match url
                .param("driver")
                .unwrap_or(if simple { "tokio" } else { "wire" })
            {
                "tokio" => {
                    options(PgTarget::OPTIONS)?;
                    run(PgTarget::new(&url, plan)?, plan, &label, control).await
                }
                "wire" => {
                    options(PgWireTarget::OPTIONS)?;
                    run(PgWireTarget::new(&url, plan)?, plan, &label, control).await
                }
                other => Err(SetupError(format!(
                    "unknown PostgreSQL driver '{other}' in {label}: use driver=tokio \
                     (tokio-postgres via deadpool) or driver=wire"
                ))),
            }
        }
        // The same for MySQL / MariaDB: loadgen's own binary-protocol driver by default
        // (a third of mysql_async's client CPU per lookup here, README); simple mode needs the
        // text protocol, which only mysql_async speaks. The `driver` parameter is read here
        // only: mysql_opts builds the mysql_async options from the URL's parts, not its query.
        "mysql" | "mariadb" => {
            let simple = plan.mode == crate::plan::Mode::Simple;
            match url
                .param("driver")
                .unwrap_or(if simple { "mysql_async" } else { "wire" })
            {
                "mysql_async" => {
                    options(MysqlTarget::OPTIONS)?;
                    run(MysqlTarget::new(&url, plan)?, plan, &label, control).await
                }
                "wire" => {
                    options(MyWireTarget::OPTIONS)?;
                    run(MyWireTarget::new(&url, plan)?, plan, &label, control).await
                }
                other => Err(SetupError(format!(
                    "unknown MySQL driver '{other}' in {label}: use driver=mysql_async \
                     or driver=wire"
                ))),
            }
        }
        "hs" | "handlersocket" => {
            options(HsTarget::OPTIONS)?;
            run(HsTarget::new(&url, plan)?, plan, &label, control).await
        }
        "memcache" | "memcached" => {
            options(McTarget::OPTIONS)?;
            run(McTarget::new(&url, plan)?, plan, &label, control).await
        }
        "redis" => {
            options(RedisTarget::OPTIONS)?;
            run(RedisTarget::new(&url, plan)?, plan, &label, control).await
        }
        "rediss" | "redis+unix" => Err(SetupError(format!(
            "{label}: loadgen does not speak Redis over TLS or a Unix socket yet (issue 16): \
             use redis://host:port"
        ))),
        // Params other than loadgen's belong to the server (HttpTarget sends them): no check.
        "http" | "https" => {
            http_pipeline(&url, &label, plan.pipeline)?;
            run(
                HttpTarget::new(&url, plan.verify, None)?,
                plan,
                &label,
                control,
            )
            .await
        }
        other => Err(SetupError(format!(
            "unknown target scheme '{other}://' in {label}: use one of {SCHEMES}"
        ))),
    }
}

/// Pasted libpq URLs often carry `sslmode`: loadgen speaks plain TCP (loopback), which is what
/// disable/allow/prefer allow; the modes that demand TLS are refused, not silently downgraded.
fn pg_sslmode(url: &TargetUrl, label: &str) -> Result<(), SetupError> {
    match url.param("sslmode") {
        None | Some("disable" | "allow" | "prefer") => Ok(()),
        Some(m) => Err(SetupError(format!(
            "sslmode={m} in {label}: loadgen does not speak TLS to PostgreSQL; use sslmode=disable or leave it out"
        ))),
    }
}

/// `?pipeline=` is from before `-p` pipelined HTTP: still accepted (and never sent), but `-p`
/// sets the depth, so a URL that forbids pipelining while `-p` asks for it is refused.
fn http_pipeline(url: &TargetUrl, label: &str, depth: usize) -> Result<(), SetupError> {
    match url.param("pipeline") {
        None | Some("1" | "true") => Ok(()),
        Some("0" | "false") if depth == 1 => Ok(()),
        Some(v @ ("0" | "false")) => Err(SetupError(format!(
            "pipeline={v} in {label} contradicts -p {depth}: -p sets the pipeline depth of \
             HTTP targets; drop ?pipeline= from the URL or use -p 1"
        ))),
        Some(other) => Err(SetupError(format!(
            "pipeline={other} in {label}: -p sets the pipeline depth of HTTP targets; drop \
             ?pipeline= from the URL"
        ))),
    }
}

/// Refuses query options the chosen target does not read: a typo would otherwise be ignored
/// silently (`?drvier=wire` measuring the other driver, `?cache_metadata=0` with mysql_async).
/// Each target lists its options next to the code that reads them (`OPTIONS`).
fn check_options(url: &TargetUrl, label: &str, known: &[&str]) -> Result<(), SetupError> {
    match url.query.iter().find(|(k, _)| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some((k, _)) if known.is_empty() => Err(SetupError(format!(
            "unknown option '{k}' in {label}: this target takes no options"
        ))),
        Some((k, _)) => Err(SetupError(format!(
            "unknown option '{k}' in {label}: this target takes {}",
            known.join(", ")
        ))),
    }
}
