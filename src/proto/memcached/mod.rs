//! memcached: a pure codec and the target that drives it over `proto::pipelined`.

pub mod codec;
pub mod conn;
pub mod ketama;
pub mod prepare;
pub mod prune;

use crate::error::ConnectError;
use crate::transport::Endpoint;
use crate::url::TargetUrl;

/// The port a URL without one connects to.
pub const DEFAULT_PORT: u16 = 11211;

/// A Unix socket (memcached -s PATH): the path after an empty host.
pub const SOCKET_URL: &str = "memcache:///run/memcached.sock";

/// The servers of a pool, `memcache://h1:p1,h2:p2,...` (in that order: ketama names them so),
/// or None for one server. The URL parser has read `h1:p1,h2` as the host and `p2` as the port.
pub fn pool(url: &TargetUrl) -> Result<Option<Vec<(String, u16)>>, ConnectError> {
    if !url.host.contains(',') {
        return Ok(None);
    }
    let bad = |what: &str| {
        ConnectError(format!(
            "{what}: a pool is memcache://host1:port1,host2:port2,... (IPv4 or names, each with its port)"
        ))
    };
    let whole = format!("{}:{}", url.host, url.port.ok_or_else(|| bad("no port"))?);
    let mut servers = Vec::new();
    for member in whole.split(',') {
        let (host, port) = member
            .rsplit_once(':')
            .ok_or_else(|| bad("a server without its port"))?;
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("a bad port"))?;
        if host.is_empty() || host.contains(['[', ']']) {
            return Err(bad("a bad host"));
        }
        if servers
            .iter()
            .any(|s: &(String, u16)| s.0 == host && s.1 == port)
        {
            return Err(bad("a server listed twice"));
        }
        servers.push((host.to_string(), port));
    }
    Ok(Some(servers))
}

/// Where a run connects: the one server, or each server of a pool with its ketama ring.
pub fn members(url: &TargetUrl) -> Result<(Vec<Endpoint>, Option<ketama::Ring>), ConnectError> {
    let Some(servers) = pool(url)? else {
        return Ok((vec![endpoint(url)?], None));
    };
    let eps = servers
        .iter()
        .map(|(h, p)| Endpoint::tcp(h, *p, &url.redacted(), None))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((eps, Some(ketama::Ring::new(&servers))))
}

/// `memcache://host:port`, or `memcache:///path/to/memcached.sock`. One socket form only: a
/// percent-encoded host (`memcache://%2Frun%2Fmc.sock`) is refused with this one as the fix.
/// A pool has no one endpoint (`members`).
pub fn endpoint(url: &TargetUrl) -> Result<Endpoint, ConnectError> {
    if pool(url)?.is_some() {
        return Err(ConnectError(
            "a pool of memcached servers has an endpoint per server: connect each (`members`)"
                .into(),
        ));
    }
    if url.host.is_empty() && !url.path.is_empty() {
        if url.port.is_some() {
            return Err(ConnectError(format!(
                "{}: a socket has no port: use {SOCKET_URL}",
                url.redacted()
            )));
        }
        return Endpoint::unix(
            &format!("/{}", crate::url::decode(&url.path)?),
            &url.redacted(),
        );
    }
    Endpoint::tcp(
        &url.host,
        url.port.unwrap_or(DEFAULT_PORT),
        &url.redacted(),
        Some(SOCKET_URL),
    )
}
