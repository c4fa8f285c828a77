//! `prepare memcache://...`: the rows under `usr:<id>`, as the other stores hold them.

use crate::error::SetupError;
use tokio::io::AsyncWriteExt;

use super::codec::encode_set_noreply;
use super::conn::McTarget;
use crate::proto::target::Conn;
use crate::url::TargetUrl;

/// Rows are written in chunks of about this many bytes.
const CHUNK: usize = 1 << 20;

/// Pipelined `set ... noreply` in 1 MiB writes, then a `get` of the last key, whose reply proves
/// memcached has processed every set before it (replies and commands are in order). Then keys of
/// the prefix outside the loaded ids (a write run's inserts) are removed: preparing again resets.
/// A pool (`memcache://h1:p1,h2:p2`) gets each key on its ketama owner only.
pub async fn load(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, SetupError> {
    let Some(servers) = super::pool(url)? else {
        return load_one(url, keys, None).await;
    };
    let ring = super::ketama::Ring::new(&servers);
    let mut total = 0;
    for (index, (host, port)) in servers.iter().enumerate() {
        let mut one = url.clone();
        (one.host, one.port) = (host.clone(), Some(*port));
        total += load_one(&one, keys, Some((&ring, index))).await?;
    }
    Ok(total)
}

/// Loads the ids of `keys` onto one server; with `owner`, only those the ring gives that server.
async fn load_one(
    url: &TargetUrl,
    keys: (u64, u64),
    owner: Option<(&super::ketama::Ring, usize)>,
) -> Result<u64, SetupError> {
    let plan = crate::plan::Plan::default();
    let target = McTarget::new(url, &plan).map_err(|e| e.0)?;
    let codec = target.codec();
    let mut sock = crate::transport::connect(target.endpoint(), crate::timeouts::PREPARE_CONNECT)
        .await
        .map_err(|e| e.message)?;
    let (mut key, mut value, mut buf) = (Vec::new(), Vec::new(), Vec::with_capacity(CHUNK + 256));
    let (mut loaded, mut last) = (0u64, None);
    for id in keys.0..=keys.1 {
        key.clear();
        codec.key_into(id, &mut key);
        if owner.is_some_and(|(ring, index)| ring.owner(&key) != index) {
            continue;
        }
        (loaded, last) = (loaded + 1, Some(id));
        value.clear();
        crate::dataset::write_tsv(&mut value, id);
        encode_set_noreply(&key, &value, &mut buf);
        if buf.len() >= CHUNK {
            sock.write_all(&buf).await.map_err(|e| e.to_string())?;
            buf.clear();
        }
    }
    sock.write_all(&buf).await.map_err(|e| e.to_string())?;
    let Some(last) = last else {
        // A pool member that owns none of the keys: only the prune is left.
        super::prune::outside(target.endpoint(), target.keys(), keys).await?;
        return Ok(0);
    };
    let mut conn = crate::proto::pipelined::StreamConn::new(sock, codec, true);
    let last = crate::proto::codec::Request::read(last);
    conn.send(&last);
    // memcached answers the get as soon as it has taken the sets before it.
    let limit = crate::timeouts::PREPARE_CONNECT;
    let reply = tokio::time::timeout(limit, conn.recv(&last))
        .await
        .map_err(|_| {
            format!("memcached took the rows but did not answer within {limit:?}: is this a memcached port?")
        })?;
    match reply {
        Ok(crate::outcome::Outcome::Hit) => {
            super::prune::outside(target.endpoint(), target.keys(), keys).await?;
            Ok(loaded)
        }
        Ok(crate::outcome::Outcome::Miss) => Err(SetupError(
            "memcached did not keep the rows: is it out of memory (-m)?".into(),
        )),
        Err(e) => Err(e.message.into()),
    }
}
