//! From a target string to a run: the protocol table names the protocol and its driver, and
//! the one `match` on `Proto` builds the concrete target and calls the generic run, so every
//! target gets its own monomorphized request loop.

use std::sync::Arc;

use crate::control::Control;
use crate::cpu::Server;
use crate::plan::{Mode, Plan};
use crate::proto::handlersocket::conn::HsTarget;
use crate::proto::http::conn::HttpTarget;
use crate::proto::memcached::conn::McTarget;
use crate::proto::mysql::async_driver::MysqlTarget;
use crate::proto::mysql::plugins;
use crate::proto::mysql::wire_driver::MyWireTarget;
use crate::proto::postgres::tokio_driver::PgTarget;
use crate::proto::postgres::wire_driver::PgWireTarget;
use crate::proto::redis::RedisTarget;
use crate::proto::table::{self, Proto, EMBEDDED, NOT_YET};
use crate::proto::target::SetupError;
use crate::result::RunResult;
use crate::run::run;
use crate::server_stats::ServerStats;
use crate::url::TargetUrl;
use crate::worker::wait_true;

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
    if target == EMBEDDED {
        let e = embedded.ok_or_else(|| SetupError("the embedded server is not running".into()))?;
        let url = TargetUrl::parse(&e.url)?;
        let t = HttpTarget::new(&url, plan, Some(e.stats.clone()))?;
        let control = &Control {
            server: Server::InProcess,
            ..control.clone()
        };
        return run(t, plan, &url.redacted(), control).await;
    }
    let url = TargetUrl::parse(target)?;
    let label = url.redacted();
    let Some(protocol) = table::find(&url.scheme) else {
        if let Some((_, what, instead)) = NOT_YET.iter().find(|(s, ..)| *s == url.scheme) {
            return Err(SetupError(format!(
                "{label}: loadgen does not speak {what} yet (issue 16): use {instead}"
            )));
        }
        return Err(SetupError(format!(
            "unknown target scheme '{}://' in {label}: use one of {}",
            url.scheme,
            table::schemes()
        )));
    };
    let driver = protocol.driver(&url, plan.mode == Mode::Simple)?;
    driver.check_options(&url)?;
    match (protocol.proto, driver.name) {
        (Proto::Postgres, "tokio") => run(PgTarget::new(&url, plan)?, plan, &label, control).await,
        (Proto::Postgres, _) => run(PgWireTarget::new(&url, plan)?, plan, &label, control).await,
        (Proto::Mysql, "mysql_async") => {
            run(MysqlTarget::new(&url, plan)?, plan, &label, control).await
        }
        (Proto::Mysql, _) => {
            let wire = MyWireTarget::new(&url, plan)?;
            // The login that decides the driver gives way to Ctrl-C, as the preflight does.
            let unspoken = tokio::select! {
                p = wire.unspoken_plugin() => p.map_err(|e| {
                    SetupError(format!("{label}: {}", crate::url::redact_text(&e.message)))
                })?,
                _ = wait_true(control.stop.clone()) => return Err(SetupError(format!(
                    "{label}: stopped while connecting; nothing was measured"
                ))),
            };
            match unspoken {
                None => run(wire, plan, &label, control).await,
                Some(plugin) => {
                    eprintln!(
                        "loadgen: {}",
                        plugins::fallback(&label, &plugin, plan.pipeline)?
                    );
                    run(MysqlTarget::new(&url, plan)?, plan, &label, control).await
                }
            }
        }
        (Proto::HandlerSocket, _) => run(HsTarget::new(&url, plan)?, plan, &label, control).await,
        (Proto::Memcached, _) => run(McTarget::new(&url, plan)?, plan, &label, control).await,
        (Proto::Redis, _) => run(RedisTarget::new(&url, plan)?, plan, &label, control).await,
        (Proto::Http, _) => {
            http_pipeline(&url, &label, plan.pipeline)?;
            run(HttpTarget::new(&url, plan, None)?, plan, &label, control).await
        }
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
