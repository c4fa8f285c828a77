//! Which driver runs a `driver=wire` MySQL target: the wire driver, unless the user logs in
//! with an auth plugin only mysql_async speaks; then mysql_async, with a note that says so.

use std::future::Future;

use super::async_driver::MysqlTarget;
use super::plugins;
use super::wire_driver::MyWireTarget;
use crate::plan::Plan;
use crate::proto::target::{greet_target, SetupError};
use crate::url::TargetUrl;

pub enum Chosen {
    Wire(MyWireTarget),
    /// mysql_async takes the run over; the line says so (for stderr).
    Async(MysqlTarget, String),
}

/// Logs in once to learn the user's plugin. The login gives way to `stop` (Ctrl-C), as the
/// preflight does.
pub async fn choose(
    url: &TargetUrl,
    plan: &Plan,
    label: &str,
    stop: impl Future<Output = ()>,
) -> Result<Chosen, SetupError> {
    let wire = MyWireTarget::new(url, plan)?;
    // The preflight's check of what answers, before this login waits for a greeting.
    let said = |e: &str| SetupError(format!("{label}: {}", crate::url::redact_text(e)));
    let first = async {
        greet_target(&wire, plan.timeouts().connect)
            .await
            .map_err(|e| said(&e))?;
        wire.unspoken_plugin().await.map_err(|e| said(&e.message))
    };
    let unspoken = tokio::select! {
        p = first => p?,
        _ = stop => return Err(SetupError(format!(
            "{label}: stopped while connecting; nothing was measured"
        ))),
    };
    match unspoken {
        None => Ok(Chosen::Wire(wire)),
        Some(plugin) => {
            let note = plugins::fallback(label, &plugin, plan.pipeline)?;
            Ok(Chosen::Async(MysqlTarget::new(url, plan)?, note))
        }
    }
}
