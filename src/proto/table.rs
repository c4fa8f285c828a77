//! The one table of protocols. Dispatch, `prepare`, the URL option check, error messages and
//! `--help` all read it; a new protocol is a folder under `proto/` and a row here.

use crate::error::SetupError;
use std::future::Future;
use std::pin::Pin;

use super::caps::{Caps, Counted, Sets};
use super::target::Target;
use super::{handlersocket, http, memcached, mysql, postgres, redis};
use crate::url::TargetUrl;

/// Which driver a row offers: dispatch matches on it (exhaustively, no catch-all) to build
/// the target, so a new driver is a compile error until dispatch knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    PgWire,
    PgTokio,
    MyWire,
    MyAsync,
    HsWire,
    McWire,
    RedisWire,
    HttpWire,
}

/// One way to drive a protocol, chosen with `?driver=`; the first that speaks the run's mode
/// is the default.
pub struct Driver {
    pub kind: DriverKind,
    pub name: &'static str,
    /// Speaks `--mode simple` (statements with the key inlined) as well as prepared.
    pub simple: bool,
    /// What it can do (`caps.rs`): its target's `Target::CAPS`, one declaration.
    pub caps: Caps,
    /// What it is, for messages.
    pub about: &'static str,
    /// The URL query options it reads; any other is refused (a typo would be ignored silently).
    pub options: Options,
}

#[derive(Clone, Copy)]
pub enum Options {
    Only(&'static [&'static str]),
    /// loadgen's own options are these; every other one belongs to the server (HTTP).
    ServerTakesTheRest(&'static [&'static str]),
}

/// Rows loaded, or a message.
pub type LoadFuture<'a> = Pin<Box<dyn Future<Output = Result<u64, SetupError>> + Send + 'a>>;

/// Loads ids `keys.0..=keys.1` into the server of a URL.
pub type Loader = for<'a> fn(&'a TargetUrl, (u64, u64)) -> LoadFuture<'a>;

/// How `prepare` loads the data set into this protocol's server, or why it does not.
pub enum Load {
    By(Loader),
    Not(&'static str),
}

pub struct Protocol {
    /// The name people write, for messages.
    pub name: &'static str,
    /// URL schemes, the usual one first.
    pub schemes: &'static [&'static str],
    /// The URL form, for `--help`.
    pub url: &'static str,
    /// The URL form of a Unix socket, in the ecosystem's own spelling (None: TCP only).
    pub socket_url: Option<&'static str>,
    /// How a URL asks for TLS, with the option names, for `--help` (None: no TLS).
    pub tls: Option<&'static str>,
    pub default_port: u16,
    pub drivers: &'static [Driver],
    pub load: Load,
}

pub const PROTOCOLS: &[Protocol] = &[
    Protocol {
        name: "PostgreSQL",
        schemes: &["postgres", "postgresql"],
        url: "postgres://user@host:port/db",
        socket_url: Some(postgres::SOCKET_URL),
        tls: Some("?sslmode=verify-full&sslrootcert=ca.pem (libpq's sslmode, sslrootcert, sslcert, sslkey; default prefer)"),
        default_port: postgres::DEFAULT_PORT,
        drivers: &[
            Driver {
                kind: DriverKind::PgWire,
                name: "wire",
                simple: false,
                caps: postgres::wire_driver::PgWireTarget::CAPS,
                about: "loadgen's own pipelined extended-protocol driver",
                options: Options::Only(postgres::wire_driver::PgWireTarget::OPTIONS),
            },
            Driver {
                kind: DriverKind::PgTokio,
                name: "tokio",
                simple: true,
                caps: postgres::tokio_driver::PgTarget::CAPS,
                about: "tokio-postgres via deadpool",
                options: Options::Only(postgres::tokio_driver::PgTarget::OPTIONS),
            },
        ],
        load: Load::By(|url, keys| Box::pin(postgres::prepare::load(url, keys))),
    },
    Protocol {
        name: "MySQL",
        schemes: &["mysql", "mariadb"],
        url: "mysql://user@host:port/db",
        socket_url: Some(mysql::SOCKET_URL),
        tls: Some("?ssl-mode=VERIFY_IDENTITY&ssl-ca=ca.pem (the mysql client's ssl-mode, ssl-ca, ssl-cert, ssl-key; default PREFERRED)"),
        default_port: mysql::DEFAULT_PORT,
        drivers: &[
            Driver {
                kind: DriverKind::MyWire,
                name: "wire",
                simple: false,
                caps: mysql::wire_driver::MyWireTarget::CAPS,
                about: "loadgen's own pipelined binary-protocol driver",
                options: Options::Only(mysql::wire_driver::MyWireTarget::OPTIONS),
            },
            Driver {
                kind: DriverKind::MyAsync,
                name: "mysql_async",
                simple: true,
                caps: mysql::async_driver::MysqlTarget::CAPS,
                about: "the mysql_async crate",
                options: Options::Only(mysql::async_driver::MysqlTarget::OPTIONS),
            },
        ],
        load: Load::By(|url, keys| Box::pin(mysql::prepare::load(url, keys))),
    },
    Protocol {
        name: "HandlerSocket",
        schemes: &["hs", "handlersocket"],
        url: "hs://host:port/db/table",
        socket_url: None,
        tls: None,
        default_port: handlersocket::DEFAULT_PORT,
        drivers: &[Driver {
            kind: DriverKind::HsWire,
            name: "wire",
            simple: false,
            caps: handlersocket::conn::HsTarget::CAPS,
            about: "loadgen's own pipelined HandlerSocket codec",
            options: Options::Only(handlersocket::conn::HsTarget::OPTIONS),
        }],
        load: Load::Not(
            "HandlerSocket reads the MariaDB table: prepare the mysql:// URL of that server",
        ),
    },
    Protocol {
        name: "memcached",
        schemes: &["memcache", "memcached"],
        url: "memcache://host:port",
        socket_url: Some(memcached::SOCKET_URL),
        tls: None,
        default_port: memcached::DEFAULT_PORT,
        drivers: &[Driver {
            kind: DriverKind::McWire,
            name: "wire",
            simple: false,
            caps: memcached::conn::McTarget::CAPS,
            about: "loadgen's own pipelined text-protocol codec",
            options: Options::Only(memcached::conn::McTarget::OPTIONS),
        }],
        load: Load::By(|url, keys| Box::pin(memcached::prepare::load(url, keys))),
    },
    Protocol {
        name: "Redis",
        schemes: &["redis", "rediss", "redis+unix", "unix"],
        url: "redis://[user:pass@]host:port[/db]",
        socket_url: Some(redis::SOCKET_URL),
        tls: Some("rediss://...?cacert=ca.pem (also cert, key; default: the system's CAs)"),
        default_port: redis::DEFAULT_PORT,
        drivers: &[Driver {
            kind: DriverKind::RedisWire,
            name: "wire",
            simple: false,
            caps: redis::conn::RedisTarget::CAPS,
            about: "loadgen's own pipelined RESP codec",
            options: Options::Only(redis::conn::RedisTarget::OPTIONS),
        }],
        load: Load::By(|url, keys| Box::pin(redis::prepare::load(url, keys))),
    },
    Protocol {
        name: "HTTP",
        schemes: &["http", "https", "http+unix"],
        url: "http://host:port/path/{key}",
        socket_url: Some(http::SOCKET_URL),
        tls: Some("https://...?cacert=ca.pem (also cert, key; default: the system's CAs)"),
        default_port: http::DEFAULT_PORT,
        drivers: &[Driver {
            kind: DriverKind::HttpWire,
            name: "wire",
            simple: false,
            caps: http::conn::HttpTarget::CAPS,
            about: "loadgen's own pipelined HTTP/1.1 client",
            options: Options::ServerTakesTheRest(http::conn::HttpTarget::OPTIONS),
        }],
        load: Load::Not("an HTTP endpoint serves its own data"),
    },
];

/// The target that is not a URL: loadgen's own server, started in-process.
pub const EMBEDDED: &str = "embedded";

pub fn find(scheme: &str) -> Option<&'static Protocol> {
    PROTOCOLS.iter().find(|p| p.schemes.contains(&scheme))
}

/// Every scheme `run` accepts, aliases included, for messages: `postgres://, ..., embedded`.
pub fn schemes() -> String {
    let mut all: Vec<String> = PROTOCOLS
        .iter()
        .flat_map(|p| p.schemes.iter().map(|s| format!("{s}://")))
        .collect();
    all.push(EMBEDDED.to_string());
    all.join(", ")
}

/// The schemes `prepare` can load.
pub fn loadable_schemes() -> String {
    let all: Vec<String> = PROTOCOLS
        .iter()
        .filter(|p| matches!(p.load, Load::By(_)))
        .flat_map(|p| p.schemes.iter().map(|s| format!("{s}://")))
        .collect();
    all.join(", ")
}

/// For `-p`'s help: the protocols with a driver that pipelines, and the drivers that do not.
pub fn pipelining() -> (String, String) {
    let yes: Vec<&str> = PROTOCOLS
        .iter()
        .filter(|p| p.drivers.iter().any(|d| d.caps.pipeline > 1))
        .map(|p| p.name)
        .collect();
    let no: Vec<String> = PROTOCOLS
        .iter()
        .flat_map(|p| p.drivers.iter().filter(|d| d.caps.pipeline == 1))
        .map(|d| format!("?driver={}", d.name))
        .collect();
    (yes.join(", "), no.join(", "))
}

/// The URL forms, for `--help`, one protocol each: `postgres://user@host:port/db or
/// postgres://user@/db?host=/var/run/postgresql (also postgresql://)` and how it asks for TLS;
/// only those `prepare` loads when `loadable`.
pub fn url_forms(loadable: bool) -> Vec<(String, Option<&'static str>)> {
    PROTOCOLS
        .iter()
        .filter(|p| !loadable || matches!(p.load, Load::By(_)))
        .map(|p| {
            let forms = match p.socket_url {
                Some(socket) => format!("{} or {socket}", p.url),
                None => p.url.to_string(),
            };
            // Schemes the forms above, and the TLS one, do not already start with.
            let also: Vec<String> = p.schemes[1..]
                .iter()
                .map(|s| format!("{s}://"))
                .filter(|s| !forms.split(" or ").any(|f| f.starts_with(s.as_str())))
                .filter(|s| !p.tls.is_some_and(|t| t.starts_with(s.as_str())))
                .collect();
            if also.is_empty() {
                (forms, p.tls)
            } else {
                (format!("{forms} (also {})", also.join(", ")), p.tls)
            }
        })
        .collect()
}

/// The protocols with a driver that can do what `can` asks, for a refusal's "memcached and
/// Redis have one" (`caps::refuse`).
pub fn who(can: &dyn Fn(&Caps) -> bool) -> String {
    let names: Vec<&str> = PROTOCOLS
        .iter()
        .filter(|p| p.drivers.iter().any(|d| can(&d.caps)))
        .map(|p| p.name)
        .collect();
    match names.split_last() {
        None => "none".into(),
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// What every driver can do, as the Markdown table README.md's "Targets" section holds (a
/// unit test keeps the two the same): made from the rows, so it cannot fall behind them.
pub fn capabilities_md() -> String {
    let yes = |b: bool| if b { "yes" } else { "-" };
    let mut out = String::from(
        "| target | driver | `-p` above 1 | writes | `--txn` | multi-get, counted per | `--ttl` | named keys (`--key-format`, `--value-size`, trace keys) | sets of servers |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for p in PROTOCOLS {
        for d in p.drivers {
            let c = &d.caps;
            let writes: Vec<&str> = c.writes.iter().map(|o| o.name()).collect();
            let multi = match c.multi_get {
                None => "-",
                Some(Counted::Requests) => "request",
                Some(Counted::Keys) => "key",
                Some(Counted::Commands) => "command",
            };
            let sets = match c.sets {
                Sets::None => "-",
                Sets::Shards => "`?keys=` shards",
                Sets::Pool => "ketama pool",
                Sets::Cluster => "Redis Cluster",
            };
            let named = match (c.named_keys, c.max_key) {
                (true, Some(n)) => format!("yes (keys up to {n} bytes)"),
                (named, _) => yes(named).to_string(),
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {multi} | {} | {named} | {sets} |\n",
                p.name,
                d.name,
                yes(c.pipeline > 1),
                if writes.is_empty() {
                    "-".into()
                } else {
                    writes.join(", ")
                },
                yes(c.txn),
                yes(c.ttl),
            ));
        }
    }
    out
}

/// Every target kind results and metrics name (`RunResult::kind`, the `kind` label): each row's
/// kind, then the embedded server.
pub fn kinds() -> Vec<&'static str> {
    let mut all: Vec<&str> = PROTOCOLS.iter().map(Protocol::kind).collect();
    all.push(EMBEDDED);
    all
}

impl Protocol {
    /// The kind its targets report: the usual scheme (`Target::kind`, tested in dispatch).
    pub fn kind(&self) -> &'static str {
        self.schemes[0]
    }

    /// The driver `?driver=` names, or the default for the mode.
    pub fn driver(&self, url: &TargetUrl, simple: bool) -> Result<&'static Driver, SetupError> {
        match url.param("driver") {
            None => self
                .drivers
                .iter()
                .find(|d| d.simple || !simple)
                .ok_or_else(|| format!("no {} driver speaks --mode simple", self.name).into()),
            Some(name) => self.drivers.iter().find(|d| d.name == name).ok_or_else(|| {
                let known: Vec<String> = self
                    .drivers
                    .iter()
                    .map(|d| format!("driver={} ({})", d.name, d.about))
                    .collect();
                SetupError(format!(
                    "unknown {} driver '{name}' in {}: use {}",
                    self.name,
                    url.redacted(),
                    known.join(" or ")
                ))
            }),
        }
    }
}

impl Driver {
    /// Refuses query options this driver does not read.
    pub fn check_options(&self, url: &TargetUrl) -> Result<(), SetupError> {
        let known = match self.options {
            Options::Only(known) => known,
            Options::ServerTakesTheRest(_) => return Ok(()),
        };
        match url.query.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some((k, _)) if known.is_empty() => Err(SetupError(format!(
                "unknown option '{k}' in {}: this target takes no options",
                url.redacted()
            ))),
            Some((k, _)) => Err(SetupError(format!(
                "unknown option '{k}' in {}: this target takes {}",
                url.redacted(),
                known.join(", ")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// README.md's capability table is the one the rows make.
    #[test]
    fn the_readme_shows_what_the_rows_say() {
        let readme = include_str!("../../README.md");
        let table = capabilities_md();
        assert!(
            readme.contains(&table),
            "README.md's capability table differs from the protocol table's rows; put this one in its place:\n{table}"
        );
    }

    #[test]
    fn every_scheme_is_in_one_row_only() {
        let mut seen = std::collections::HashSet::new();
        for p in PROTOCOLS {
            assert!(!p.drivers.is_empty());
            for s in p.schemes {
                assert!(seen.insert(*s), "{s} in two rows");
                assert_eq!(find(s).map(|f| f.name), Some(p.name));
            }
        }
        assert!(schemes().ends_with("embedded"));
        assert!(!loadable_schemes().contains("hs://"));
    }

    /// The result schema's `kind` enum is the table's kinds.
    #[test]
    fn schema_kinds_are_the_tables() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../schemas/result.schema.json")).expect("json");
        let found = find_key(&schema, "kind").expect("a kind enum in the schema");
        let listed: Vec<&str> = found["enum"]
            .as_array()
            .expect("enum")
            .iter()
            .map(|v| v.as_str().expect("string"))
            .collect();
        assert_eq!(listed, kinds());
    }

    /// The first `"key": {"enum": [...]}` in the document.
    fn find_key<'a>(v: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
        match v {
            serde_json::Value::Object(m) => m
                .get(key)
                .filter(|k| k.get("enum").is_some())
                .or_else(|| m.values().find_map(|c| find_key(c, key))),
            serde_json::Value::Array(a) => a.iter().find_map(|c| find_key(c, key)),
            _ => None,
        }
    }

    /// The package description names every protocol in the table.
    #[test]
    fn cargo_description_names_every_protocol() {
        let description = env!("CARGO_PKG_DESCRIPTION");
        for p in PROTOCOLS {
            assert!(
                description.contains(p.name),
                "{} missing from {description}",
                p.name
            );
        }
    }
}
