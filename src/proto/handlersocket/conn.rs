//! HandlerSocket: MariaDB's NoSQL protocol straight into InnoDB, the path that served 750,000
//! lookups/s in 2010. `hs://host:port/db/table` opens the PRIMARY index once per connection
//! (auth first when a secret is set) and issues `=` finds; replies come in order, so
//! `--pipeline D` keeps D finds in flight on one connection.
//!
//! URL options: `index` (default PRIMARY), `columns` (default user_name,user_email,created),
//! `secret` (or LOADGEN_HS_SECRET), `mysql` (a mysql:// URL of the same server, to read
//! Handler_read_key as the server-side count).

use crate::outcome::{ErrorKind, LookupError};
use crate::plan::Plan;
use crate::proto::handlersocket::codec::{
    check_ok, encode_auth, encode_open_index, parse_line, HsCodec,
};
use crate::proto::stream::StreamConn;
use crate::proto::target::{ServerCount, SetupError, Target};
use crate::timeouts::Timeouts;
use crate::transport::{no_connection, Endpoint};
use crate::url::TargetUrl;

/// The usr row's value columns, in the order the data set writes them.
const DEFAULT_COLUMNS: &str = "user_name,user_email,created";

pub struct HsTarget {
    endpoint: Endpoint,
    /// The endpoint as messages name it.
    addr: String,
    db: String,
    table: String,
    index: String,
    columns: Vec<String>,
    secret: Option<String>,
    verify: bool,
    /// Handshake steps get `connect` each: a port that is not HandlerSocket (MariaDB's SQL port
    /// sends a binary greeting and then waits) must not hang the preflight.
    timeouts: Timeouts,
    status: Option<crate::proto::mysql::async_driver::MyOpts>,
}

impl HsTarget {
    /// The options this target reads from its URL's query (dispatch refuses any other).
    pub const OPTIONS: &'static [&'static str] = &["index", "columns", "secret", "mysql"];

    pub fn new(url: &TargetUrl, plan: &Plan) -> Result<HsTarget, SetupError> {
        let mut parts = url.path.split('/').filter(|p| !p.is_empty());
        let (Some(db), Some(table), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(SetupError(format!(
                "bad HandlerSocket target {}: use hs://host:port/DATABASE/TABLE",
                url.redacted()
            )));
        };
        let columns: Vec<String> = url
            .param("columns")
            .unwrap_or(DEFAULT_COLUMNS)
            .split(',')
            .map(|c| c.trim().to_string())
            .collect();
        if columns.iter().any(|c| c.is_empty()) {
            return Err(SetupError(
                "bad HandlerSocket columns: use columns=a,b,c".into(),
            ));
        }
        // A find returns the listed columns as they are; --verify knows only the usr row.
        if plan.verify && columns.join(",") != DEFAULT_COLUMNS {
            return Err(SetupError(format!(
                "--verify checks the usr row ({DEFAULT_COLUMNS}) and cannot check columns={}: drop --verify, or columns= from the URL",
                columns.join(",")
            )));
        }
        let status = match url.param("mysql") {
            Some(m) => {
                let mu = TargetUrl::parse(m)?;
                Some(crate::proto::mysql::async_driver::mysql_opts(
                    &mu,
                    plan.timeouts().connect,
                    1,
                )?)
            }
            None => None,
        };
        let endpoint = super::endpoint(url)?;
        Ok(HsTarget {
            addr: endpoint.to_string(),
            endpoint,
            db: crate::url::decode(db)?,
            table: crate::url::decode(table)?,
            index: url.param("index").unwrap_or("PRIMARY").to_string(),
            columns,
            secret: url
                .param("secret")
                .map(str::to_string)
                .or_else(|| std::env::var("LOADGEN_HS_SECRET").ok()),
            verify: plan.verify,
            timeouts: plan.timeouts(),
            status,
        })
    }

    async fn handshake(&self, conn: &mut StreamConn<HsCodec>) -> Result<(), LookupError> {
        let fail = |msg: String| LookupError::new(ErrorKind::Connect, true, msg);
        let step =
            |what: &'static str,
             line: Result<Result<Vec<u8>, LookupError>, tokio::time::error::Elapsed>| {
                match line {
            Err(_) => Err(fail(format!(
                "{}: no HandlerSocket reply to {what} within --timeout: is this the HandlerSocket port (handlersocket_port)?",
                self.addr
            ))),
            Ok(Err(e)) => Err(fail(format!("{}: {what}: {}", self.addr, e.message))),
            Ok(Ok(l)) => Ok(l),
        }
            };
        let mut req = Vec::new();
        if let Some(secret) = &self.secret {
            encode_auth(secret.as_bytes(), &mut req);
            let line = step(
                "auth",
                tokio::time::timeout(self.timeouts.connect, conn.round_trip_line(&req)).await,
            )?;
            let resp = parse_line(&line).map_err(|_| {
                fail(format!(
                    "{}: not a HandlerSocket reply: is this the HandlerSocket port?",
                    self.addr
                ))
            })?;
            check_ok(&resp).map_err(|e| {
                fail(format!(
                    "{}: auth failed: {} (check secret= or LOADGEN_HS_SECRET)",
                    self.addr,
                    e.describe()
                ))
            })?;
            req.clear();
        }
        let cols: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        encode_open_index(0, &self.db, &self.table, &self.index, &cols, &mut req)
            .map_err(|e| fail(format!("{e:?}")))?;
        let line = step(
            "open_index",
            tokio::time::timeout(self.timeouts.connect, conn.round_trip_line(&req)).await,
        )?;
        let resp = parse_line(&line).map_err(|_| {
            fail(format!(
                "{}: not a HandlerSocket reply: is this the HandlerSocket port?",
                self.addr
            ))
        })?;
        check_ok(&resp).map_err(|e| {
            let hint = if e.is_auth() {
                " (secret= in the URL or LOADGEN_HS_SECRET)".to_string()
            } else if e.code == 1 {
                format!(
                    " opening {}.{}: to create the usr table run `loadgen prepare mysql://...`",
                    self.db, self.table
                )
            } else {
                format!(" opening {}.{} index {}", self.db, self.table, self.index)
            };
            fail(format!("{}: {}{hint}", self.addr, e.describe()))
        })
    }
}

impl Target for HsTarget {
    type Conn = StreamConn<HsCodec>;

    fn kind(&self) -> &'static str {
        "hs"
    }

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        let t = &self.timeouts;
        let open = async {
            let mut conn = StreamConn::connect(
                &self.endpoint,
                t.connect,
                None,
                HsCodec::new(0),
                self.verify,
            )
            .await?;
            self.handshake(&mut conn).await?;
            Ok(conn)
        };
        // Each step has its own bound and message; the whole gets `setup`, as for MySQL.
        tokio::time::timeout(t.setup, open)
            .await
            .unwrap_or_else(|_| Err(no_connection(&self.endpoint)))
    }

    fn max_pipeline(&self) -> usize {
        usize::MAX
    }

    async fn server_count(&self) -> Result<Option<ServerCount>, String> {
        let Some(opts) = &self.status else {
            return Ok(None);
        };
        let v = crate::proto::mysql::async_driver::global_status(opts, "Handler_read_key").await?;
        Ok(Some(ServerCount {
            ops: Vec::new(),
            value: v,
            source: "global status Handler_read_key".into(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str, verify: bool) -> Result<HsTarget, SetupError> {
        let plan = Plan {
            verify,
            ..Plan::default()
        };
        HsTarget::new(&TargetUrl::parse(url).unwrap(), &plan)
    }

    #[test]
    fn verify_takes_only_the_usr_columns() {
        let hs = "hs://127.0.0.1:9998/loadgen/usr";
        for url in [
            hs.to_string(),
            format!("{hs}?columns=user_name,user_email,created"),
            format!("{hs}?columns=user_name, user_email ,created"),
        ] {
            assert!(target(&url, true).is_ok(), "{url}");
        }
        for columns in [
            "user_name",
            "user_email,user_name,created",
            "user_name,user_email,created,user_id",
        ] {
            let url = format!("{hs}?columns={columns}");
            assert!(target(&url, false).is_ok(), "{url}");
            let e = target(&url, true).err().expect("refused").0;
            assert!(e.contains("--verify") && e.contains(columns), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
