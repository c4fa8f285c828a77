//! A Redis Cluster node given as one server (no `?cluster=1`): it would answer `MOVED` for
//! every key of another master's slots, so `run` and `prepare` refuse it in one line that
//! says what to add.

use crate::outcome::LookupError;
use crate::proto::pipelined::StreamConn;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::login::{Answer, Login};

/// Why the server `login` reaches is refused as one server: it is a node of a cluster of more
/// than one master. Asked on a connection of its own, once per run; a server that cannot be
/// asked (it answers `INFO` with an error, or garbage) is not refused here: its requests then
/// show what it is.
pub async fn cluster_refusal(login: &Login) -> Option<String> {
    let mut conn = login.open(false).await.ok()?;
    is_cluster_node(login, &mut conn).await.ok().flatten()
}

async fn is_cluster_node(
    login: &Login,
    conn: &mut StreamConn<RedisCodec>,
) -> Result<Option<String>, LookupError> {
    let info = |a: Answer| match a {
        Answer::Bulk(t) => String::from_utf8_lossy(&t).into_owned(),
        _ => String::new(),
    };
    let enabled = info(
        login
            .ask(conn, &[b"INFO", b"cluster"], "INFO cluster")
            .await?,
    );
    if !enabled.lines().any(|l| l.trim() == "cluster_enabled:1") {
        return Ok(None);
    }
    let state = info(
        login
            .ask(conn, &[b"CLUSTER", b"INFO"], "CLUSTER INFO")
            .await?,
    );
    let masters = state
        .lines()
        .find_map(|l| l.trim().strip_prefix("cluster_size:"))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    Ok((masters > 1).then(|| format!(
        "{} is a node of a Redis Cluster of {masters} masters, which answers MOVED for the keys of the others' slots: add ?cluster=1 to the URL to send each key to its slot's master",
        login.addr
    )))
}
