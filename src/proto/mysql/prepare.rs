//! `prepare mysql://...`: the `usr` table from `schemas/mysql.sql`, loaded with multi-row
//! INSERTs (HandlerSocket reads this table).

use crate::error::SetupError;
use crate::url::TargetUrl;

pub const SCHEMA: &str = include_str!("../../../schemas/mysql.sql");

/// Rows per multi-row INSERT (about 350 KB a statement, under max_allowed_packet).
const BATCH: u64 = 5000;

/// Creates the table and loads ids `keys.0..=keys.1`.
pub async fn load(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, SetupError> {
    use crate::proto::mysql::async_driver::mysql_opts;
    use mysql_async::prelude::Queryable;
    let opts = mysql_opts(url, crate::timeouts::PREPARE_CONNECT)?;
    let err = |e: mysql_async::Error| opts.explain(&e);
    // The connect's own bound covers only the TCP connect, not a server that never answers.
    let limit = crate::timeouts::PREPARE_CONNECT;
    let mut c = tokio::time::timeout(limit, opts.conn()).await.map_err(|_| {
        format!("no MySQL answer within {limit:?}: is this a MySQL/MariaDB port, and is the server up?")
    })??;
    for stmt in SCHEMA
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty() && !s.lines().all(|l| l.starts_with("--")))
    {
        c.query_drop(stmt).await.map_err(err)?;
    }
    c.query_drop("SET unique_checks = 0, foreign_key_checks = 0, autocommit = 0")
        .await
        .map_err(err)?;
    let mut sql = String::with_capacity(400_000);
    let mut id = keys.0;
    while id <= keys.1 {
        let last = (id + BATCH - 1).min(keys.1);
        sql.clear();
        sql.push_str("INSERT INTO usr (user_id, user_name, user_email, created) VALUES ");
        let mut created = Vec::with_capacity(20);
        for k in id..=last {
            created.clear();
            crate::dataset::write_created(&mut created, k);
            if k > id {
                sql.push(',');
            }
            sql.push_str(&format!(
                "({k},'user{k}','user{k}@example.com','{}')",
                std::str::from_utf8(&created).expect("ascii")
            ));
        }
        c.query_drop(&sql).await.map_err(err)?;
        id = last + 1;
    }
    c.query_drop("COMMIT").await.map_err(err)?;
    c.query_drop("ANALYZE TABLE usr").await.map_err(err)?;
    let _ = c.disconnect().await;
    Ok(keys.1 - keys.0 + 1)
}
