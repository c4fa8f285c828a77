//! HandlerSocket: MariaDB's NoSQL protocol straight into InnoDB, the path that served 750,000
//! lookups/s in 2010. `hs://host:port/db/table` opens the PRIMARY index once per connection
//! (auth first when a secret is set) and issues `=` finds; replies come in order, so
//! `--pipeline D` keeps D finds in flight on one connection.
//!
//! URL options: `index` (default PRIMARY), `columns` (default user_name,user_email,created),
//! `secret` (or LOADGEN_HS_SECRET), `mysql` (a mysql:// URL of the same server, to read
//! Handler_read_key as the server-side count).

use crate::mix::{Mix, Op};
use crate::outcome::{ErrorKind, LookupError};
use crate::plan::Plan;
use crate::proto::caps::{Caps, Counted, Sets};
use crate::proto::handlersocket::codec::{
    check_ok, encode_auth, encode_open_index, parse_line, HsCodec,
};
use crate::proto::pipelined::StreamConn;
use crate::proto::sniff::{closed_after, not_the_protocol, Hello, Kind};
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
    /// Keys per request (`--batch`; 1 without).
    batch: usize,
    mix: Mix,
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
            batch: plan.multi_get().max(1),
            mix: plan.mix.clone(),
            timeouts: plan.timeouts(),
            status,
        })
    }

    /// With writes: index 1 is the key column before the row's, for inserts (`+`).
    async fn open_insert_index(&self, conn: &mut StreamConn<HsCodec>) -> Result<(), LookupError> {
        let fail = |msg: String| LookupError::new(ErrorKind::Connect, true, msg);
        let cols: Vec<&str> = std::iter::once("user_id")
            .chain(self.columns.iter().map(String::as_str))
            .collect();
        let mut req = Vec::new();
        encode_open_index(1, &self.db, &self.table, &self.index, &cols, &mut req)
            .map_err(|e| fail(format!("{e:?}")))?;
        let line = tokio::time::timeout(self.timeouts.connect, conn.round_trip_line(&req))
            .await
            .map_err(|_| fail(format!("{}: no reply to open_index", self.addr)))??;
        let resp = parse_line(&line).map_err(|_| self.not_hs(&line))?;
        check_ok(&resp).map_err(|e| fail(format!("{}: {}", self.addr, e.describe())))
    }

    /// A handshake reply line that is not HandlerSocket's, named by what sent it.
    fn not_hs(&self, line: &[u8]) -> LookupError {
        let mut reply = line.to_vec();
        reply.push(b'\n');
        let m = not_the_protocol(Kind::HandlerSocket, &reply);
        LookupError::new(ErrorKind::Connect, true, format!("{}: {m}", self.addr))
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
            // Closed with no reply: what PostgreSQL does to a line (the preflight names it).
            Ok(Err(e)) if e.message.starts_with("the server closed the connection") => Err(fail(
                format!("{}: {what}: {}", self.addr, closed_after(Kind::HandlerSocket)),
            )),
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
            let resp = parse_line(&line).map_err(|_| self.not_hs(&line))?;
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
        let resp = parse_line(&line).map_err(|_| self.not_hs(&line))?;
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

    /// A line HandlerSocket answers with an error (`2\t1\tcmd`), the connection kept.
    fn hello(&self) -> Option<Hello> {
        Some(Hello::new(Kind::HandlerSocket, &b"loadgen-hello\n"[..]))
    }

    async fn connect(&self) -> Result<Self::Conn, LookupError> {
        let t = &self.timeouts;
        let open = async {
            let codec = match self.mix.writes() {
                false => HsCodec::new(0),
                true => HsCodec::writing(0),
            };
            let mut conn =
                StreamConn::connect(&self.endpoint, t.connect, None, codec, self.verify).await?;
            self.handshake(&mut conn).await?;
            if self.mix.writes() {
                self.open_insert_index(&mut conn).await?;
            }
            Ok(conn)
        };
        // Each step has its own bound and message; the whole gets `setup`, as for MySQL.
        tokio::time::timeout(t.setup, open)
            .await
            .unwrap_or_else(|_| Err(no_connection(&self.endpoint)))
    }

    /// A multi-get is a find with an IN list (`multi_get.rs`), a key read per key; the write
    /// port takes every op but upsert (HandlerSocket has none).
    const CAPS: Caps = Caps {
        multi_get: Some(Counted::Keys),
        pipeline: usize::MAX,
        writes: &[Op::Update, Op::Insert, Op::Delete],
        sets: Sets::Shards,
        ..Caps::READS
    };

    /// The read port writes nothing (known by its answer to a write, asked here: `D` of
    /// user_id 0, never a loaded key), and writes fill the usr row's own columns.
    fn refuse(&self, plan: &Plan) -> Result<(), SetupError> {
        let mix = &plan.mix;
        let Some(op) = mix.ops().find(|o| o.writes()) else {
            return Ok(());
        };
        if self.columns.join(",") != DEFAULT_COLUMNS {
            return Err(SetupError(format!("--mix {}: HandlerSocket writes the usr row ({DEFAULT_COLUMNS}): drop columns= from the URL", mix.name())));
        }
        match read_only_port(self) {
            Ok(false) => Ok(()),
            Ok(true) => Err(SetupError(format!(
                "--mix {}: {} is HandlerSocket's read-only port, which cannot {}; use its write port (handlersocket_port_wr, 9999 by default)",
                mix.name(), self.addr, op.name()
            ))),
            Err(e) => Err(SetupError(format!("--mix {}: {}: {e}", mix.name(), self.addr))),
        }
    }

    /// Reads, updates and deletes each read a key (Handler_read_key); inserts write a row
    /// (Handler_write, a duplicate too). The key reads are one op's count when the mix has
    /// one of the three.
    async fn server_count(&self) -> Result<Option<ServerCount>, SetupError> {
        // Without ?mysql= there is nothing to read: say so rather than print no server line.
        let Some(opts) = &self.status else {
            return Err(SetupError(
                "no counter source: add ?mysql=URL to read Handler_read_key".into(),
            ));
        };
        use crate::proto::mysql::async_driver::{global_statuses, uptime_epoch};
        let names = ["Handler_read_key", "Handler_write", "Uptime"];
        let [reads, writes, uptime] = global_statuses(opts, &names).await?[..] else {
            return Err("global status: not the values asked for".into());
        };
        let epoch = Some(uptime_epoch(uptime));
        if self.mix.read_only() {
            let mut count = ServerCount::reads(reads, "global status Handler_read_key");
            count.epoch = epoch;
            // An IN list reads the index once per key.
            count.per_request = self.batch as u64;
            return Ok(Some(count));
        }
        let finds = [Op::Read, Op::Update, Op::Delete, Op::Mget];
        let one = match finds.iter().filter(|&&o| self.mix.has(o)).count() {
            1 => reads,
            _ => ServerCount::UNCOUNTED,
        };
        let mut ops = vec![one; Op::COUNT];
        ops[Op::Insert.index()] = writes;
        Ok(Some(ServerCount {
            epoch,
            value: reads + writes,
            source: "global status Handler_read_key, Handler_write".into(),
            ops,
            members: Vec::new(),
            // An IN list reads the index once per key.
            per_request: self.batch as u64,
            redirects: None,
            parts: None,
        }))
    }
}

/// Whether the HandlerSocket port answers a write with `readonly` (blocking: preflight only).
fn read_only_port(t: &HsTarget) -> Result<bool, SetupError> {
    use std::io::{BufRead, BufReader, Write};
    let addr = match &t.endpoint {
        Endpoint::Tcp { host, port } => (host.as_str(), *port),
        other => return Err(SetupError(format!("{other} is not a TCP endpoint"))),
    };
    let sock = std::net::TcpStream::connect_timeout(
        &std::net::ToSocketAddrs::to_socket_addrs(&addr)
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no address")?,
        t.timeouts.connect,
    )
    .map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(t.timeouts.connect))
        .map_err(|e| e.to_string())?;
    let mut req = Vec::new();
    if let Some(secret) = &t.secret {
        encode_auth(secret.as_bytes(), &mut req);
    }
    let cols: Vec<&str> = t.columns.iter().map(String::as_str).collect();
    encode_open_index(0, &t.db, &t.table, &t.index, &cols, &mut req)
        .map_err(|e| format!("{e:?}"))?;
    req.extend_from_slice(b"0\t=\t1\t0\t1\t0\tD\n");
    (&sock).write_all(&req).map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(&sock);
    let mut last = String::new();
    for _ in 0..(1 + usize::from(t.secret.is_some()) + 1) {
        last.clear();
        lines.read_line(&mut last).map_err(|e| e.to_string())?;
    }
    Ok(last.trim_end() == "2\t1\treadonly")
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
