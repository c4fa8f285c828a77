//! After `prepare` loads ids `lo..=hi`, it removes the `<prefix><id>` keys outside them (rows a
//! write run inserted), so the server holds the data set and nothing more of it: a write run
//! starts from the same state every time. memcached lists its keys with `lru_crawler metadump
//! all` (read line by line, never held whole); keys of other prefixes, or whose suffix is not a
//! number, are not ours and stay.

use crate::error::SetupError;
use crate::key_format::KeyFormat;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::transport::{Endpoint, Stream};

/// A pause this long in the listing or in the replies means memcached stopped answering.
const STEP: Duration = Duration::from_secs(30);

/// Removes the keys outside `keys`; returns how many it removed.
pub async fn outside(
    endpoint: &Endpoint,
    format: &KeyFormat,
    keys: (u64, u64),
) -> Result<u64, SetupError> {
    let mut sock = crate::transport::connect(endpoint, crate::timeouts::PREPARE_CONNECT)
        .await
        .map_err(|e| e.message)?;
    let doomed = listed_outside(&mut sock, format, keys).await?;
    // A chunk's replies are read before the next chunk goes out: written all at once, the
    // deletes of a large data set fill both socket buffers and neither side reads again.
    let mut buf = Vec::new();
    for chunk in doomed.chunks(CHUNK) {
        buf.clear();
        for key in chunk {
            buf.extend_from_slice(b"delete ");
            buf.extend_from_slice(key);
            buf.extend_from_slice(b"\r\n");
        }
        tokio::time::timeout(STEP, sock.write_all(&buf))
            .await
            .map_err(|_| format!("memcached took no deletes for {STEP:?}"))?
            .map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(&mut sock);
        for _ in chunk {
            let line = next_line(&mut reader).await?;
            if line != b"DELETED" && line != b"NOT_FOUND" {
                return Err(SetupError(format!(
                    "memcached refused a delete: {}",
                    crate::shown::shown(&line)
                )));
            }
        }
    }
    Ok(doomed.len() as u64)
}

/// Deletes per write: their replies (`DELETED\r\n`) fit in a socket buffer.
const CHUNK: usize = 1000;

/// The keys `lru_crawler metadump all` lists that name ids (`format`) outside `keys`.
async fn listed_outside(
    sock: &mut Stream,
    format: &KeyFormat,
    keys: (u64, u64),
) -> Result<Vec<Vec<u8>>, SetupError> {
    let mut reader = BufReader::new(sock);
    let mut doomed = Vec::new();
    let busy_until = tokio::time::Instant::now() + BUSY_WAIT;
    reader
        .get_mut()
        .write_all(b"lru_crawler metadump all\r\n")
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let line = next_line(&mut reader).await?;
        if line == b"END" {
            return Ok(doomed);
        }
        // A memcached that has just started runs its own crawl for a moment and says BUSY
        // (one line, nothing listed yet): ask again once it is done.
        if line.starts_with(b"BUSY") && tokio::time::Instant::now() < busy_until {
            tokio::time::sleep(Duration::from_millis(200)).await;
            reader
                .get_mut()
                .write_all(b"lru_crawler metadump all\r\n")
                .await
                .map_err(|e| e.to_string())?;
            continue;
        }
        let Some(rest) = line.strip_prefix(b"key=") else {
            return Err(SetupError(format!(
                "memcached cannot list its keys (lru_crawler metadump: {}), so rows a write run \
                 inserted outside {}..{} stay: restart memcached, or use a fresh ?prefix=",
                crate::shown::shown(&line),
                keys.0,
                keys.1
            )));
        };
        let key = percent_decoded(rest.split(|&c| c == b' ').next().unwrap_or_default());
        match format.id_of(&key) {
            Some(n) if !(keys.0..=keys.1).contains(&n) => doomed.push(key),
            _ => {}
        }
    }
}

/// How long a BUSY crawler is waited for before the listing gives up.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// One reply line without its line end.
async fn next_line(reader: &mut BufReader<&mut Stream>) -> Result<Vec<u8>, SetupError> {
    let mut line = Vec::new();
    let n = tokio::time::timeout(STEP, reader.read_until(b'\n', &mut line))
        .await
        .map_err(|_| format!("memcached sent nothing for {STEP:?}"))?
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Err(SetupError("memcached closed the connection".into()));
    }
    while line.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
        line.pop();
    }
    Ok(line)
}

/// metadump's keys are URI-encoded (`usr%3A1`).
fn percent_decoded(s: &[u8]) -> Vec<u8> {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match (
            s[i],
            s.get(i + 1).and_then(|&c| hex(c)),
            s.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h << 4) | l);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadump_keys_decode() {
        assert_eq!(percent_decoded(b"usr%3A1000001"), b"usr:1000001");
        assert_eq!(percent_decoded(b"%F91%10x%"), b"\xf91\x10x%");
    }
}
