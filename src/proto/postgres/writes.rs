//! PostgreSQL writes (`--mix`): one prepared statement per write op, bound with text
//! parameters (the server casts them to the columns' types), and the server's own count of
//! each from pg_stat_statements. Parameters, by op: update ($1 key, $2 user_name), insert and
//! upsert ($1 key, $2 user_name, $3 user_email, $4 created), delete ($1 key).

use crate::error::{ConfigError, SetupError};
use std::io::Write;

use crate::proto::postgres::tls::PgTls;

use crate::dataset;
use crate::mix::Op;
use crate::plan::Plan;
use crate::proto::postgres::count::{calls, PgCounter};
use crate::proto::postgres::error::explain;
use crate::proto::target::ServerCount;

const UPDATE: &str = "UPDATE usr SET user_name = $2 WHERE user_id = $1";
const INSERT: &str =
    "INSERT INTO usr (user_id, user_name, user_email, created) VALUES ($1, $2, $3, $4)";
const DELETE: &str = "DELETE FROM usr WHERE user_id = $1";
const UPSERT: &str =
    "INSERT INTO usr (user_id, user_name, user_email, created) VALUES ($1, $2, $3, $4) \
ON CONFLICT (user_id) DO UPDATE SET user_name = EXCLUDED.user_name";

/// The statement of a write op: the default, or the user's (`--query-update` ...).
pub fn default_sql(op: Op) -> &'static str {
    match op {
        Op::Update => UPDATE,
        Op::Insert => INSERT,
        Op::Delete => DELETE,
        Op::Upsert | Op::Read | Op::Mget => UPSERT,
    }
}

/// The statement of every write op of the plan's mix: the user's where given (checked), else
/// the default.
pub fn statements(plan: &Plan) -> Result<Vec<(Op, String)>, SetupError> {
    Ok(plan.write_statements(default_sql, check)?)
}

/// The server's count per op (`Op::index` order): `reads` for reads, and each write statement's
/// pg_stat_statements calls, over a connection of its own.
pub async fn counts(
    config: &tokio_postgres::Config,
    tls: &PgTls,
    reads: u64,
    statements: &[(Op, String)],
) -> Result<Vec<u64>, SetupError> {
    with_client(config, tls, "counter query", |client| async move {
        let mut ops = vec![0; Op::COUNT];
        ops[Op::Read.index()] = reads;
        for (op, sql) in statements {
            ops[op.index()] = calls(&client, sql, None).await?.value;
        }
        Ok(ops)
    })
    .await
}

/// The server's count for `Target::server_count`, both drivers: the lookup counter, and with a
/// mix that writes each op's count beside it (their sum is the total).
pub async fn server_count(
    counter: &PgCounter,
    config: &tokio_postgres::Config,
    tls: &PgTls,
    sql: &str,
    label: &str,
    statements: &[(Op, String)],
) -> Result<Option<ServerCount>, SetupError> {
    match counter.read(config, tls, sql, label).await? {
        Some(mut c) if !statements.is_empty() => {
            c.ops = counts(config, tls, c.value, statements).await?;
            c.value = c.ops.iter().sum();
            Ok(Some(c))
        }
        other => Ok(other),
    }
}

/// Where inserts start (`Target::insert_from`), both drivers: above the table's highest
/// user_id; None for the user's own insert, whose table is not known here.
pub async fn insert_from(
    config: &tokio_postgres::Config,
    tls: &PgTls,
    statements: &[(Op, String)],
) -> Result<Option<u64>, SetupError> {
    if statements
        .iter()
        .any(|(op, sql)| *op == Op::Insert && sql != default_sql(*op))
    {
        return Ok(None);
    }
    next_id(config, tls).await.map(Some)
}

/// `f` with a connection of its own, closed after.
async fn with_client<T, F>(
    config: &tokio_postgres::Config,
    tls: &PgTls,
    what: &str,
    f: impl FnOnce(tokio_postgres::Client) -> F,
) -> Result<T, SetupError>
where
    F: std::future::Future<Output = Result<T, SetupError>>,
{
    let (client, task) = tls.connect(config).await.map_err(|e| explain(&e, what))?;
    let r = f(client).await;
    let _ = task.await;
    r
}

/// Above the table's highest user_id.
async fn next_id(config: &tokio_postgres::Config, tls: &PgTls) -> Result<u64, SetupError> {
    const WHAT: &str = "max(user_id) query";
    with_client(config, tls, WHAT, |client| async move {
        client
            .query_one("SELECT (coalesce(max(user_id), 0) + 1)::int8 FROM usr", &[])
            .await
            .map(|row| row.get::<_, i64>(0) as u64)
            .map_err(|e| explain(&e, WHAT).into())
    })
    .await
}

/// The settings that decide what a write costs; a setting that cannot be read says why.
pub async fn durability(config: &tokio_postgres::Config, tls: &PgTls) -> Vec<(String, String)> {
    const NAMES: [&str; 3] = ["synchronous_commit", "fsync", "wal_sync_method"];
    let read = with_client(config, tls, "SHOW query", |client| async move {
        let mut out = Vec::new();
        for name in NAMES {
            let v = match client.query_one(&format!("SHOW {name}"), &[]).await {
                Ok(row) => row.get::<_, String>(0),
                Err(e) => format!("unknown ({})", explain(&e, "SHOW query")),
            };
            out.push((name.to_string(), v));
        }
        Ok(out)
    })
    .await;
    read.unwrap_or_else(|e| vec![("unknown".into(), e.0)])
}

/// Parameters the statement of `op` takes.
pub fn params(op: Op) -> usize {
    match op {
        Op::Update => 2,
        Op::Insert | Op::Upsert => 4,
        Op::Delete | Op::Read | Op::Mget => 1,
    }
}

/// A user's statement for `op` must use $1..$N, N the op's parameters, and nothing above.
pub fn check(op: Op, sql: &str) -> Result<(), ConfigError> {
    let n = params(op);
    let missing = (1..=n).find(|i| !has_param(sql, *i));
    if let Some(i) = missing {
        return Err(ConfigError(format!(
            "--query-{} must use ${i}: its parameters are {}",
            op.name(),
            describe(op)
        )));
    }
    if has_param(sql, n + 1) {
        return Err(ConfigError(format!(
            "--query-{} takes only {}",
            op.name(),
            describe(op)
        )));
    }
    Ok(())
}

fn describe(op: Op) -> &'static str {
    match op {
        Op::Update => "$1 the key, $2 user_name",
        Op::Delete | Op::Read | Op::Mget => "$1 the key",
        Op::Insert | Op::Upsert => "$1 the key, $2 user_name, $3 user_email, $4 created",
    }
}

/// `$i` appears not followed by another digit.
fn has_param(sql: &str, i: usize) -> bool {
    let p = format!("${i}");
    sql.match_indices(&p)
        .any(|(at, _)| !sql[at + p.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// Name of the prepared statement of a write op.
pub fn statement(op: Op) -> &'static str {
    match op {
        Op::Update => "lg_update",
        Op::Insert => "lg_insert",
        Op::Delete => "lg_delete",
        Op::Upsert | Op::Read | Op::Mget => "lg_upsert",
    }
}

/// Appends Bind (text parameters, no result columns asked in binary) and Execute of the write
/// `op` of (key, version).
pub fn encode(op: Op, key: u64, version: u64, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[b'B', 0, 0, 0, 0, 0]); // length patched below; unnamed portal
    out.extend_from_slice(statement(op).as_bytes());
    out.push(0);
    out.extend_from_slice(&[0, 1, 0, 0]); // one parameter format: text, for all
    out.extend_from_slice(&(params(op) as i16).to_be_bytes());
    for i in 0..params(op) {
        param(out, |o| value(i, key, version, o));
    }
    out.extend_from_slice(&[0, 0]); // result formats: default
    let len = (out.len() - start - 1) as i32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
}

/// The text of parameter `i` (from 0: $1) of a write of (key, version): the key, user_name,
/// user_email, created, as the statements take them (`params`).
pub fn value(i: usize, key: u64, version: u64, out: &mut Vec<u8>) {
    match i {
        0 => {
            let _ = write!(out, "{key}");
        }
        1 => dataset::write_name(out, key, version),
        2 => dataset::write_email(out, key),
        _ => dataset::write_created(out, key),
    }
}

/// One parameter: its i32 length, then what `write` appends.
fn param(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    write(out);
    let n = (out.len() - at - 4) as i32;
    out[at..at + 4].copy_from_slice(&n.to_be_bytes());
}

/// Rows a write's CommandComplete tag says it changed (`UPDATE 3`, `INSERT 0 1`, `DELETE 0`,
/// `MERGE 1`); None for any other tag (a SELECT's).
pub fn written(tag: &[u8]) -> Option<u64> {
    let tag = tag.strip_suffix(b"\0").unwrap_or(tag);
    let (first, _) = tag.split_at(tag.iter().position(|&b| b == b' ')?);
    if !matches!(first, b"UPDATE" | b"INSERT" | b"DELETE" | b"MERGE") {
        return None;
    }
    let last = tag.rsplit(|&b| b == b' ').next()?;
    std::str::from_utf8(last).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags() {
        assert_eq!(written(b"UPDATE 3\0"), Some(3));
        assert_eq!(written(b"INSERT 0 1\0"), Some(1));
        assert_eq!(written(b"DELETE 0\0"), Some(0));
        assert_eq!(written(b"SELECT 1\0"), None);
        assert_eq!(written(b"UPDATE\0"), None);
    }

    #[test]
    fn binds_text_parameters() {
        let mut out = Vec::new();
        encode(Op::Update, 42, 7, &mut out);
        let bind_len = i32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
        assert_eq!(out.len(), 1 + bind_len + 10);
        let body = &out[5..1 + bind_len];
        let want = [
            &b"\0lg_update\0\0\x01\0\0\0\x02"[..],
            &2i32.to_be_bytes(),
            b"42",
            &8i32.to_be_bytes(),
            b"user42v7",
            b"\0\0",
        ]
        .concat();
        assert_eq!(body, &want[..]);
        assert!(out.ends_with(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]));
        let mut out = Vec::new();
        encode(Op::Insert, 5, 1, &mut out);
        let s = String::from_utf8_lossy(&out);
        assert!(s.contains("user5v1") && s.contains("user5@example.com"));
        assert!(s.contains("2010-02-03 11:22:38"));
    }

    #[test]
    fn user_statements_need_their_parameters() {
        assert!(check(Op::Update, UPDATE).is_ok());
        assert!(check(Op::Insert, INSERT).is_ok());
        assert!(check(Op::Delete, DELETE).is_ok());
        assert!(check(Op::Upsert, UPSERT).is_ok());
        let e = check(Op::Update, "UPDATE t SET a = 1 WHERE id = $1").unwrap_err();
        assert!(e.contains("--query-update must use $2"), "{e}");
        let e = check(Op::Delete, "DELETE FROM t WHERE id = $1 AND a = $2").unwrap_err();
        assert!(e.contains("takes only $1"), "{e}");
        assert!(check(Op::Delete, "DELETE FROM t WHERE id = $10").is_err());
    }
}
