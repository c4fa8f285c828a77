//! `loadgen prepare URL --rows N`: create the `usr` table from `schemas/` and load the rows that
//! `--verify` expects, fast (COPY for PostgreSQL).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::SinkExt;
use tokio_postgres::NoTls;

use crate::target::postgres::{explain, pg_config};
use crate::target::{SetupError, TargetUrl};

pub const POSTGRES_SCHEMA: &str = include_str!("../schemas/postgres.sql");
pub const MYSQL_SCHEMA: &str = include_str!("../schemas/mysql.sql");

/// Rows per multi-row INSERT for MySQL (about 350 KB a statement, under max_allowed_packet).
const MYSQL_BATCH: u64 = 5000;

/// Rows are written in chunks of about this many bytes.
const CHUNK: usize = 1 << 20;

pub struct Prepared {
    pub rows: u64,
    pub seconds: f64,
}

#[derive(Clone, Copy)]
enum Store {
    Postgres,
    Mysql,
    Memcached,
    Redis,
}

/// What `prepare` loads, by scheme: the one list its dispatch and its messages are made from.
const STORES: &[(&str, Store)] = &[
    ("postgres", Store::Postgres),
    ("postgresql", Store::Postgres),
    ("mysql", Store::Mysql),
    ("mariadb", Store::Mysql),
    ("memcache", Store::Memcached),
    ("memcached", Store::Memcached),
    ("redis", Store::Redis),
];

/// The schemes `prepare` accepts, for messages: `postgres://, postgresql://, ...`.
pub fn schemes() -> String {
    let all: Vec<String> = STORES.iter().map(|(s, _)| format!("{s}://")).collect();
    all.join(", ")
}

pub async fn prepare(target: &str, keys: (u64, u64)) -> Result<Prepared, SetupError> {
    let url = TargetUrl::parse(target)?;
    let label = url.redacted();
    let start = Instant::now();
    let Some(&(_, store)) = STORES.iter().find(|(s, _)| *s == url.scheme) else {
        let why = match url.scheme.as_str() {
            "hs" | "handlersocket" => {
                " (HandlerSocket reads the MariaDB table: prepare the mysql:// URL of that server)"
            }
            "http" | "https" => " (an HTTP endpoint serves its own data)",
            _ => "",
        };
        return Err(SetupError(format!(
            "cannot prepare '{}://' targets: use one of {}{why}",
            url.scheme,
            schemes()
        )));
    };
    let rows = match store {
        Store::Postgres => prepare_postgres(&url, keys).await,
        Store::Mysql => prepare_mysql(&url, keys).await,
        Store::Memcached => prepare_memcached(&url, keys).await,
        Store::Redis => crate::proto::redis::prepare::prepare(&url, keys).await,
    }
    .map_err(|e| SetupError(format!("{label}: {}", crate::target::url::redact_text(&e))))?;
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

async fn prepare_mysql(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, String> {
    use mysql_async::prelude::Queryable;
    let opts = crate::target::mysql::mysql_opts(url, Duration::from_secs(10), 1);
    let addr = url.host_port(3306);
    let err = |e: mysql_async::Error| crate::target::mysql::explain(&e, &addr);
    let mut c = mysql_async::Conn::new(opts).await.map_err(err)?;
    for stmt in MYSQL_SCHEMA
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
        let last = (id + MYSQL_BATCH - 1).min(keys.1);
        sql.clear();
        sql.push_str("INSERT INTO usr (user_id, user_name, user_email, created) VALUES ");
        let mut created = Vec::with_capacity(20);
        for k in id..=last {
            created.clear();
            crate::row::write_created(&mut created, k);
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

/// Pipelined `set ... noreply` in 1 MiB writes, then a `get` of the last key, whose reply proves
/// memcached has processed every set before it (replies and commands are in order).
async fn prepare_memcached(url: &TargetUrl, keys: (u64, u64)) -> Result<u64, String> {
    use crate::target::memcached::McTarget;
    use crate::target::Conn;
    use crate::wire::memcached::encode_set_noreply;
    use tokio::io::AsyncWriteExt;

    let plan = crate::plan::Plan::default();
    let target = McTarget::new(url, &plan).map_err(|e| e.0)?;
    let codec = target.codec();
    let mut sock = tokio::net::TcpStream::connect(target.addr())
        .await
        .map_err(|e| crate::target::stream::connect_error(target.addr(), &e).message)?;
    let (mut key, mut value, mut buf) = (Vec::new(), Vec::new(), Vec::with_capacity(CHUNK + 256));
    for id in keys.0..=keys.1 {
        key.clear();
        codec.key_into(id, &mut key);
        value.clear();
        crate::row::write_tsv(&mut value, id);
        encode_set_noreply(&key, &value, &mut buf);
        if buf.len() >= CHUNK {
            sock.write_all(&buf).await.map_err(|e| e.to_string())?;
            buf.clear();
        }
    }
    sock.write_all(&buf).await.map_err(|e| e.to_string())?;
    let mut conn = crate::target::stream::StreamConn::new(sock, codec, true);
    conn.send(keys.1);
    match conn.recv(keys.1).await {
        Ok(crate::outcome::Outcome::Hit) => Ok(keys.1 - keys.0 + 1),
        Ok(crate::outcome::Outcome::Miss) => {
            Err("memcached did not keep the rows: is it out of memory (-m)?".into())
        }
        Err(e) => Err(e.message),
    }
}
