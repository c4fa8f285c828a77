//! From a target string to a run: the protocol table names the protocol and its driver, and
//! the one exhaustive `match` on `DriverKind` builds the concrete target and calls the generic run, so every
//! target gets its own monomorphized request loop.

use std::sync::Arc;

use crate::control::Control;
use crate::cpu::ServerProcess;
use crate::plan::{Mode, Plan};
use crate::proto::caps::Sets;
use crate::proto::handlersocket::conn::HsTarget;
use crate::proto::http::conn::HttpTarget;
use crate::proto::memcached::conn::McTarget;
use crate::proto::mysql;
use crate::proto::mysql::async_driver::MysqlTarget;
use crate::proto::mysql::choose::Chosen;
#[cfg(test)]
use crate::proto::mysql::wire_driver::MyWireTarget;
use crate::proto::postgres::tokio_driver::PgTarget;
use crate::proto::postgres::wire_driver::PgWireTarget;
use crate::proto::redis::RedisTarget;
use crate::proto::shards::ranges::{self, Shard};
use crate::proto::shards::Shards;
use crate::proto::table::{self, DriverKind, EMBEDDED};
use crate::proto::target::{SetupError, Target};
use crate::result::RunResult;
use crate::server_stats::ServerStats;
use crate::target_run::run;
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
            server: ServerProcess::InProcess,
            ..control.clone()
        };
        return run(t, plan, &url.redacted(), control).await;
    }
    if let Some(shards) = ranges::parse(target)? {
        return run_shards(&shards, plan, control).await;
    }
    let url = TargetUrl::parse(target)?;
    let label = url.redacted();
    let protocol = table::find(&url.scheme).ok_or_else(|| {
        SetupError(format!(
            "unknown target scheme '{}://' in {label}: use one of {}",
            url.scheme,
            table::schemes()
        ))
    })?;
    let driver = protocol.driver(&url, plan.mode == Mode::Simple)?;
    driver.check_options(&url)?;
    match driver.kind {
        DriverKind::PgWire => run(PgWireTarget::new(&url, plan)?, plan, &label, control).await,
        DriverKind::PgTokio => run(PgTarget::new(&url, plan)?, plan, &label, control).await,
        DriverKind::MyWire => {
            let stop = wait_true(control.stop.clone());
            match mysql::choose::choose(&url, plan, &label, stop).await? {
                Chosen::Wire(t) => run(t, plan, &label, control).await,
                Chosen::Async(t, note) => {
                    (control.say)(&format!("loadgen: {note}"));
                    run(t, plan, &label, control).await
                }
            }
        }
        DriverKind::MyAsync => run(MysqlTarget::new(&url, plan)?, plan, &label, control).await,
        DriverKind::HsWire => run(HsTarget::new(&url, plan)?, plan, &label, control).await,
        DriverKind::McWire => run(McTarget::new(&url, plan)?, plan, &label, control).await,
        DriverKind::RedisWire => run(RedisTarget::new(&url, plan)?, plan, &label, control).await,
        DriverKind::HttpWire => {
            run(HttpTarget::new(&url, plan, None)?, plan, &label, control).await
        }
    }
}

/// A sharded target (`proto::shards`): every shard by the same driver, one that owns its
/// socket (the wire drivers and HandlerSocket).
async fn run_shards(
    shards: &[Shard],
    plan: &Plan,
    control: &Control,
) -> Result<RunResult, SetupError> {
    let label = shards
        .iter()
        .map(|s| s.label.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let mut kind = None;
    for s in shards {
        let protocol = table::find(&s.url.scheme).ok_or_else(|| {
            SetupError(format!(
                "unknown target scheme '{}://' in {}: use one of {}",
                s.url.scheme,
                s.url.redacted(),
                table::schemes()
            ))
        })?;
        let driver = protocol.driver(&s.url, plan.mode == Mode::Simple)?;
        driver.check_options(&s.url)?;
        if kind.is_some_and(|k| k != driver.kind) {
            return Err(SetupError(format!(
                "{label}: every shard must use the same driver (?driver=)"
            )));
        }
        kind = Some(driver.kind);
    }
    let statements = plan.multi_get() > 0;
    let kind = kind.expect("a sharded target has a shard");
    match kind {
        DriverKind::PgWire => {
            let ts = each(shards, plan, PgWireTarget::new)?;
            run(Shards::new(shards, ts, statements), plan, &label, control).await
        }
        DriverKind::MyWire => {
            let mut ts = Vec::with_capacity(shards.len());
            for s in shards {
                let stop = wait_true(control.stop.clone());
                match mysql::choose::choose(&s.url, plan, &s.url.redacted(), stop).await? {
                    Chosen::Wire(t) => ts.push(t),
                    Chosen::Async(..) => {
                        return Err(SetupError(format!(
                            "{}: its user logs in with an auth plugin only ?driver=mysql_async speaks, and shards run on the wire driver",
                            s.url.redacted()
                        )))
                    }
                }
            }
            server_each(&ts, shards)?;
            run(Shards::new(shards, ts, statements), plan, &label, control).await
        }
        DriverKind::HsWire => {
            let ts = each(shards, plan, HsTarget::new)?;
            server_each(&ts, shards)?;
            run(Shards::new(shards, ts, false), plan, &label, control).await
        }
        DriverKind::PgTokio
        | DriverKind::MyAsync
        | DriverKind::McWire
        | DriverKind::RedisWire
        | DriverKind::HttpWire => {
            Err(SetupError(format!(
                "{label}: ?keys= shards are {} (their wire drivers); memcached pools and Redis Cluster place keys themselves (memcache://h1:p1,h2:p2, redis://h:p?cluster=1)",
                table::who(&|c| c.sets == Sets::Shards)
            )))
        }
    }
}

/// MariaDB counts lookups per server (global status), not per database as PostgreSQL does:
/// two shards on one server would each count both.
fn server_each<T: Target>(ts: &[T], shards: &[Shard]) -> Result<(), SetupError> {
    for (i, t) in ts.iter().enumerate() {
        if ts[..i].iter().any(|o| o.endpoint() == t.endpoint()) {
            return Err(SetupError(format!(
                "{}: another shard is on the same server, and MariaDB counts lookups per server, so each shard's count would hold both: give each shard a server of its own",
                shards[i].url.redacted()
            )));
        }
    }
    Ok(())
}

/// One target per shard, each built by `new` from its URL.
fn each<T>(
    shards: &[Shard],
    plan: &Plan,
    new: impl Fn(&TargetUrl, &Plan) -> Result<T, SetupError>,
) -> Result<Vec<T>, SetupError> {
    shards.iter().map(|s| new(&s.url, plan)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::caps::Caps;
    use crate::proto::table::PROTOCOLS;
    use crate::proto::Target;

    /// (kind, caps) of the target a driver row builds, from a URL that needs no server.
    fn built(kind: DriverKind, scheme: &str) -> (&'static str, Caps) {
        let plan = Plan::default();
        let rest = match scheme {
            "postgres" | "mysql" => "u@127.0.0.1:1/db",
            "hs" => "127.0.0.1:1/db/usr",
            "http" => "127.0.0.1:1/usr/{key}",
            _ => "127.0.0.1:1",
        };
        let url = TargetUrl::parse(&format!("{scheme}://{rest}")).expect("url");
        fn of<T: Target>(t: Result<T, SetupError>) -> (&'static str, Caps) {
            let t = t.expect("target");
            (t.kind(), t.caps())
        }
        match kind {
            DriverKind::PgWire => of(PgWireTarget::new(&url, &plan)),
            DriverKind::PgTokio => of(PgTarget::new(&url, &plan)),
            DriverKind::MyWire => of(MyWireTarget::new(&url, &plan)),
            DriverKind::MyAsync => of(MysqlTarget::new(&url, &plan)),
            DriverKind::HsWire => of(HsTarget::new(&url, &plan)),
            DriverKind::McWire => of(McTarget::new(&url, &plan)),
            DriverKind::RedisWire => of(RedisTarget::new(&url, &plan)),
            DriverKind::HttpWire => of(HttpTarget::new(&url, &plan, None)),
        }
    }

    /// A driver's row and the target it builds agree: the kind results and metrics carry is
    /// the row's first scheme, and the row's capabilities are the target's.
    #[test]
    fn every_driver_builds_the_target_its_row_describes() {
        for p in PROTOCOLS {
            for d in p.drivers {
                let (kind, caps) = built(d.kind, p.schemes[0]);
                assert_eq!(kind, p.kind(), "{} driver {}", p.name, d.name);
                assert_eq!(caps, d.caps, "{} driver {}", p.name, d.name);
            }
        }
    }
}
