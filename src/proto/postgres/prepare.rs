//! `prepare postgres://...`: the `usr` table from `schemas/postgres.sql`, loaded with COPY.

use crate::error::SetupError;
use bytes::Bytes;
use futures_util::SinkExt;

use super::error::{explain, explain_connect};
use super::tls::PgTls;
use super::tokio_driver::pg_config;
use crate::url::TargetUrl;

pub const SCHEMA: &str = include_str!("../../../schemas/postgres.sql");

/// Rows are written in chunks of about this many bytes.
const CHUNK: usize = 1 << 20;

/// Creates the table and loads ids `keys.0..=keys.1`; the rows COPY reports.
pub async fn load(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, SetupError> {
    let endpoint = super::endpoint(url)?;
    let config = pg_config(url, &endpoint, crate::timeouts::PREPARE_CONNECT);
    // The connect's own bound covers only the TCP connect, not a server that never answers.
    let limit = crate::timeouts::PREPARE_CONNECT;
    let (client, task) = tokio::time::timeout(limit, PgTls::new(url, &endpoint)?.connect(&config))
        .await
        .map_err(|_| no_answer(&endpoint, limit))?
        .map_err(|e| explain_connect(&e, &endpoint, "schema"))?;
    tokio::time::timeout(limit, client.batch_execute(SCHEMA))
        .await
        .map_err(|_| no_answer(&endpoint, limit))?
        .map_err(|e| explain(&e, "schema"))?;
    let sink = client
        .copy_in("COPY usr (user_id, user_name, user_email, created) FROM STDIN")
        .await
        .map_err(|e| explain(&e, "COPY"))?;
    futures_util::pin_mut!(sink);
    let mut buf = Vec::with_capacity(CHUNK + 256);
    for id in keys.0..=keys.1 {
        crate::dataset::write_copy_line(&mut buf, id);
        if buf.len() >= CHUNK {
            sink.send(Bytes::from(std::mem::replace(
                &mut buf,
                Vec::with_capacity(CHUNK + 256),
            )))
            .await
            .map_err(|e| explain(&e, "COPY"))?;
        }
    }
    if !buf.is_empty() {
        sink.send(Bytes::from(buf))
            .await
            .map_err(|e| explain(&e, "COPY"))?;
    }
    let n = sink.finish().await.map_err(|e| explain(&e, "COPY"))?;
    client
        .batch_execute("ANALYZE usr")
        .await
        .map_err(|e| explain(&e, "ANALYZE"))?;
    drop(client);
    let _ = task.await;
    Ok(n)
}

fn no_answer(endpoint: &crate::transport::Endpoint, limit: std::time::Duration) -> String {
    format!("{endpoint} did not answer within {limit:?}: is this a PostgreSQL port, and is the server up?")
}
