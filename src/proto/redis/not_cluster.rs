//! A Redis Cluster node given as one server (no `?cluster=1`): it would answer `MOVED` for
//! every key of another master's slots, so `run` and `prepare` refuse it in one line that
//! says what to add.

use crate::outcome::LookupError;
use crate::proto::pipelined::StreamConn;
use crate::proto::redis::codec::RedisCodec;
use crate::proto::redis::login::{Answer, Login};

/// Err when the server of `conn` is a node of a cluster of more than one master. A server
/// that answers neither `INFO cluster` nor `CLUSTER INFO` (an ACL that denies them) passes.
pub async fn refuse_cluster_node(
    login: &Login,
    conn: &mut StreamConn<RedisCodec>,
) -> Result<(), LookupError> {
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
        return Ok(());
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
    if masters <= 1 {
        return Ok(());
    }
    Err(LookupError::server(format!(
        "{} is a node of a Redis Cluster of {masters} masters, which answers MOVED for the keys of the others' slots: add ?cluster=1 to the URL to send each key to its slot's master",
        login.addr
    )))
}
