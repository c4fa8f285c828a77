//! The server's own count of lookups and writes: `calls` of `cmdstat_get` (and `set`, `setnx`,
//! `del`) in `INFO commandstats`.

use crate::outcome::LookupError;
use crate::proto::redis::login::{Answer, Login};

/// `calls` of each of `commands` (lower case, e.g. `get`) since the server started (or
/// `CONFIG RESETSTAT`), from one `INFO commandstats` on a fresh connection, and the server's
/// `run_id`, which a restart changes (so two counts of different runs are not subtracted).
pub async fn calls(
    login: &Login,
    commands: &[&str],
) -> Result<(Vec<u64>, Option<String>), LookupError> {
    let mut conn = login.open(false).await?;
    let run_id = match login
        .ask(&mut conn, &[b"INFO", b"server"], "INFO server")
        .await?
    {
        Answer::Bulk(info) => run_id_of(&info),
        _ => None,
    };
    let counts = match login
        .ask(&mut conn, &[b"INFO", b"commandstats"], "INFO commandstats")
        .await?
    {
        Answer::Bulk(info) => commands
            .iter()
            .map(|c| {
                calls_of(&info, c).ok_or_else(|| {
                    LookupError::protocol(format!(
                        "{}: INFO commandstats has a malformed cmdstat_{c} line",
                        login.addr
                    ))
                })
            })
            .collect(),
        Answer::Error(e) => Err(LookupError::server(format!(
            "{}: INFO commandstats: {e}",
            login.addr
        ))),
        other => Err(LookupError::protocol(format!(
            "{}: unexpected reply to INFO: {other:?}",
            login.addr
        ))),
    }?;
    Ok((counts, run_id))
}

/// `run_id` in an `INFO server` text: a new one at every start of the server.
pub fn run_id_of(info: &[u8]) -> Option<String> {
    String::from_utf8_lossy(info)
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|v| format!("run_id {}", v.trim()))
}

/// `calls` of `cmdstat_<command>` in an `INFO commandstats` text. Redis leaves out commands
/// never called, so no line is 0; a line without a number is `None`.
pub fn calls_of(info: &[u8], command: &str) -> Option<u64> {
    let text = String::from_utf8_lossy(info);
    let head = format!("cmdstat_{command}:");
    let Some(line) = text.lines().find_map(|l| l.strip_prefix(head.as_str())) else {
        return Some(0);
    };
    line.split(',')
        .find_map(|kv| kv.strip_prefix("calls="))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether the server is a master now (`role:master` in `INFO replication`): a replica counts
/// the writes its master sends it as calls of its own.
pub async fn is_master(login: &Login) -> Result<bool, LookupError> {
    let mut conn = login.open(false).await?;
    match login
        .ask(&mut conn, &[b"INFO", b"replication"], "INFO replication")
        .await?
    {
        Answer::Bulk(info) => Ok(String::from_utf8_lossy(&info)
            .lines()
            .any(|l| l.trim() == "role:master")),
        other => Err(LookupError::protocol(format!(
            "{}: unexpected reply to INFO replication: {other:?}",
            login.addr
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls() {
        let info = b"# Commandstats\r\ncmdstat_getex:calls=7,usec=1\r\ncmdstat_get:calls=20000,usec=9811,usec_per_call=0.49,rejected_calls=0,failed_calls=0\r\ncmdstat_info:calls=3\r\n";
        assert_eq!(calls_of(info, "get"), Some(20000));
        assert_eq!(calls_of(info, "info"), Some(3));
        assert_eq!(calls_of(info, "set"), Some(0));
        assert_eq!(calls_of(b"cmdstat_get:usec=1\r\n", "get"), None);
        assert_eq!(calls_of(b"cmdstat_get:calls=x\r\n", "get"), None);
    }

    #[test]
    fn reads_run_id() {
        let info = b"# Server\r\nredis_version:7.0.15\r\nrun_id:5f1d2c\r\ntcp_port:6379\r\n";
        assert_eq!(run_id_of(info).as_deref(), Some("run_id 5f1d2c"));
        assert_eq!(run_id_of(b"# Server\r\n"), None);
    }
}
