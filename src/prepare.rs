//! `loadgen prepare URL --rows N`: create the `usr` table from `schemas/` and load the rows that
//! `--verify` expects, fast (COPY for PostgreSQL).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::SinkExt;
use tokio_postgres::NoTls;

use crate::target::postgres::{explain, pg_config};
use crate::target::{SetupError, TargetUrl, SCHEMES};

pub const POSTGRES_SCHEMA: &str = include_str!("../schemas/postgres.sql");

/// Rows are written in chunks of about this many bytes.
const CHUNK: usize = 1 << 20;

pub struct Prepared {
    pub rows: u64,
    pub seconds: f64,
}

pub async fn prepare(target: &str, keys: (u64, u64)) -> Result<Prepared, SetupError> {
    let url = TargetUrl::parse(target)?;
    let label = url.redacted();
    let start = Instant::now();
    let rows = match url.scheme.as_str() {
        "postgres" | "postgresql" => prepare_postgres(&url, keys)
            .await
            .map_err(|e| SetupError(format!("{label}: {e}")))?,
        other => return Err(SetupError(format!(
            "cannot prepare '{other}://' targets: use one of {SCHEMES} (http serves its own data)"
        ))),
    };
    Ok(Prepared {
        rows,
        seconds: start.elapsed().as_secs_f64(),
    })
}

async fn prepare_postgres(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, String> {
    let config = pg_config(url, Duration::from_secs(10));
    let (client, conn) = config
        .connect(NoTls)
        .await
        .map_err(|e| explain(&e, "schema"))?;
    let task = tokio::spawn(conn);
    client
        .batch_execute(POSTGRES_SCHEMA)
        .await
        .map_err(|e| explain(&e, "schema"))?;
    let sink = client
        .copy_in("COPY usr (user_id, user_name, user_email, created) FROM STDIN")
        .await
        .map_err(|e| explain(&e, "COPY"))?;
    futures_util::pin_mut!(sink);
    let mut buf = Vec::with_capacity(CHUNK + 256);
    for id in keys.0..=keys.1 {
        crate::row::write_copy_line(&mut buf, id);
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
