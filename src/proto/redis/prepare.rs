//! `loadgen prepare redis://...`: `SET usr:<id> <row>` for every key, pipelined in batches of
//! about 1 MiB, each batch's `+OK`s counted before the next; then a verified `GET` of the last
//! key and `DBSIZE` prove the rows are there. Keys `usr:<id>` outside the loaded ids (a write
//! run's inserts) are removed, so preparing again resets the data set.

use crate::error::SetupError;
use std::time::Duration;

use crate::outcome::{LookupError, Outcome};
use crate::proto::pipelined::StreamConn;
use crate::proto::redis::codec::{encode_command, parse_reply, shown, RedisCodec, Resp};
use crate::proto::redis::login::{Answer, Login};
use crate::proto::redis::slots::SlotMap;
use crate::proto::target::Conn;
use crate::url::TargetUrl;

/// Bytes of `SET`s per batch.
const BATCH: usize = 1 << 20;

/// A batch that takes longer than this means the server is not keeping up or not answering.
const BATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Loads `keys` (inclusive) into the URL's database; returns the number of rows.
pub async fn load(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, SetupError> {
    let (first, seeds) = super::conn::seeded(url)?;
    let login = &Login::new(&first, crate::timeouts::PREPARE_CONNECT).map_err(|e| e.0)?;
    if url.param("cluster") == Some("1") {
        return load_cluster(login, &seeds, keys).await;
    }
    let mut conn = login.open(true).await.map_err(|e| e.message)?;
    if let Some(why) = super::not_cluster::cluster_refusal(login).await {
        return Err(SetupError(why));
    }
    set_all(login, &mut conn, keys, |_| true).await?;
    let last = crate::proto::codec::Request::read(keys.1);
    conn.send(&last);
    match conn.recv(&last).await {
        Ok(Outcome::Hit) => {}
        Ok(Outcome::Miss) => {
            return Err(SetupError(format!(
                "{}: the key of id {} is missing after SET: is maxmemory too small?",
                login.addr, keys.1
            )))
        }
        Err(e) => return Err(e.message.into()),
    }
    super::prune::outside(login, &mut conn, keys).await?;
    let rows = keys.1 - keys.0 + 1;
    match login
        .ask(&mut conn, &[b"DBSIZE"], "DBSIZE")
        .await
        .map_err(|e| e.message)?
    {
        Answer::Integer(n) if n >= 0 && n as u64 >= rows => Ok(rows),
        other => Err(SetupError(format!(
            "{}: DBSIZE answered {other:?} after {rows} SETs: the server did not keep them all",
            login.addr
        ))),
    }
}

/// A Redis Cluster: each master gets the keys of its slots, as a run reads them (keys of
/// other ids are left as they are: a cluster is not pruned). Each master's DBSIZE must hold
/// at least the keys it was given.
async fn load_cluster(
    login: &Login,
    seeds: &[(String, u16)],
    keys: (u64, u64),
) -> Result<u64, SetupError> {
    use crate::proto::routed::Router;
    let map = SlotMap::discover_any(login, seeds)
        .await
        .map_err(|e| e.message)?;
    for (i, (host, port)) in map.nodes.iter().enumerate() {
        let node = login.at(host, *port);
        let mut conn = node.open(true).await.map_err(|e| e.message)?;
        let given = set_all(&node, &mut conn, keys, |key| map.owner(key) == i).await?;
        match node.ask(&mut conn, &[b"DBSIZE"], "DBSIZE").await {
            Ok(Answer::Integer(n)) if n >= 0 && n as u64 >= given => {}
            other => {
                return Err(SetupError(format!(
                    "{}: DBSIZE answered {:?} after {given} SETs: the server did not keep them all",
                    node.addr,
                    other.map_err(|e| e.message)
                )))
            }
        }
    }
    Ok(keys.1 - keys.0 + 1)
}

/// `SET` of the row of every id of `keys` whose key `mine` takes, in pipelined batches; returns
/// how many were set.
async fn set_all(
    login: &Login,
    conn: &mut StreamConn<RedisCodec>,
    keys: (u64, u64),
    mine: impl Fn(&[u8]) -> bool,
) -> Result<u64, SetupError> {
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut batch = Vec::with_capacity(BATCH + 512);
    let (mut id, mut given) = (keys.0, 0u64);
    while id <= keys.1 {
        batch.clear();
        let mut sets = 0usize;
        while id <= keys.1 && batch.len() < BATCH {
            key.clear();
            login.keys.write(id, &mut key);
            if mine(&key) {
                value.clear();
                crate::dataset::write_tsv(&mut value, id);
                encode_command(&[b"SET", &key, &value], &mut batch);
                sets += 1;
            }
            id += 1;
        }
        given += sets as u64;
        let acks = conn.round_trip(&batch, count_oks(sets));
        tokio::time::timeout(BATCH_TIMEOUT, acks)
            .await
            .map_err(|_| format!("{}: no answer to SET within {BATCH_TIMEOUT:?}", login.addr))?
            .map_err(|e| format!("{}: SET: {}", login.addr, e.message))?;
    }
    Ok(given)
}

/// A parser for `round_trip` that is done after `n` `+OK` replies. It remembers how far it got,
/// so each read scans only the new bytes.
fn count_oks(n: usize) -> impl FnMut(&[u8]) -> Result<Option<(usize, ())>, LookupError> {
    let (mut seen, mut at) = (0usize, 0usize);
    move |buf| {
        while seen < n {
            let Some((len, reply)) = parse_reply(buf.get(at..).unwrap_or_default())? else {
                return Ok(None);
            };
            match reply {
                Resp::Status(_) => {}
                Resp::Error(e) => {
                    return Err(LookupError::server(format!(
                        "the server refused SET: {}",
                        shown(e)
                    )))
                }
                other => {
                    return Err(LookupError::protocol(format!(
                        "unexpected reply to SET: {other:?}"
                    )))
                }
            }
            seen += 1;
            at += len;
        }
        Ok(Some((at, ())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_oks_across_reads() {
        let mut p = count_oks(3);
        assert_eq!(p(b"+OK\r\n+O").unwrap(), None);
        assert_eq!(p(b"+OK\r\n+OK\r\n").unwrap(), None);
        assert_eq!(p(b"+OK\r\n+OK\r\n+OK\r\n$-1\r\n").unwrap(), Some((15, ())));
        let mut p = count_oks(2);
        assert!(p(b"+OK\r\n-OOM command not allowed\r\n").is_err());
    }
}
