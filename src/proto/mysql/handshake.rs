//! The MySQL / MariaDB connection handshake over packet payloads: the server's greeting
//! (Handshake v10), the client's HandshakeResponse41, the mysql_native_password scramble, the
//! AuthSwitchRequest and the COM_STMT_PREPARE reply. The packet layouts and the scramble are
//! `mysql_common`'s (the crate under mysql_async); loadgen keeps only the choices: which
//! capabilities to ask for and which plugin to answer. `wire_driver` moves the bytes.

use crate::error::SetupError;
use mysql_common::constants::{CapabilityFlags, MariadbCapabilities};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse, SslRequest, StmtPacket,
};
use mysql_common::proto::MySerialize;
use mysql_common::scramble::scramble_native;

use crate::proto::mysql::codec::{
    CLIENT_CONNECT_WITH_DB, CLIENT_DEPRECATE_EOF, CLIENT_FOUND_ROWS, CLIENT_LONG_PASSWORD,
    CLIENT_MULTI_RESULTS, CLIENT_PLUGIN_AUTH, CLIENT_PROTOCOL_41, CLIENT_PS_MULTI_RESULTS,
    CLIENT_SECURE_CONNECTION, CLIENT_SSL, CLIENT_TRANSACTIONS, MARIADB_CLIENT_CACHE_METADATA,
};
use crate::proto::mysql::plugins::{speaker, Speaker, NATIVE_PASSWORD};

/// The server version mysql_common picks the connection's collation from: from 5.5.3 on it is
/// utf8mb4_general_ci, which every server since then knows.
const UTF8MB4_SERVER: (u16, u16, u16) = (5, 5, 3);

/// What the server's greeting says that the client needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Greeting {
    /// MySQL's 32 capability bits, and MariaDB's extended ones in the high 32 bits (only when
    /// the server clears CLIENT_MYSQL, bit 0, to say it is MariaDB).
    pub capabilities: u64,
    /// The auth challenge: 20 bytes for mysql_native_password.
    pub scramble: Vec<u8>,
    /// The server's default auth plugin (MySQL 8: caching_sha2_password). Not the user's: a
    /// user of another plugin gets an AuthSwitchRequest, so the wire driver answers
    /// mysql_native_password whatever this says and decides on the switch (`auth_step`).
    pub plugin: String,
}

/// Parses Handshake v10; any other protocol version, or bytes that are not a greeting, are
/// refused with a line saying so.
pub fn parse_greeting(p: &[u8]) -> Result<Greeting, SetupError> {
    let not_mysql = || {
        "the server's greeting is not MySQL protocol (is this a MySQL/MariaDB port?)".to_string()
    };
    match p.first() {
        Some(10) => {}
        Some(v) => {
            return Err(SetupError(format!(
                "the server speaks MySQL protocol version {v}; loadgen speaks version 10 (MySQL 4.1 and later)"
            )))
        }
        None => return Err(not_mysql().into()),
    }
    let hello: HandshakePacket<'_> = ParseBuf(p).parse(()).map_err(|_| not_mysql())?;
    let mut capabilities = u64::from(hello.capabilities().bits());
    if capabilities & CLIENT_LONG_PASSWORD == 0 {
        capabilities |= u64::from(hello.mariadb_ext_capabilities().bits()) << 32;
    }
    let plugin = hello
        .auth_plugin_name_str()
        .map_or_else(|| NATIVE_PASSWORD.to_string(), |p| p.into_owned());
    Ok(Greeting {
        capabilities,
        scramble: hello.nonce(),
        plugin,
    })
}

/// The capabilities to ask for: only what the server offers, and only what changes nothing
/// loadgen does not parse. CLIENT_DEPRECATE_EOF saves a packet per result set;
/// MARIADB_CLIENT_CACHE_METADATA (with `cache_metadata`) saves the column definitions on every
/// execute. CLIENT_LONG_PASSWORD only where the server sets it: to MariaDB that bit means
/// "a MySQL client" and turns the extended capabilities off. CLIENT_FOUND_ROWS: an update
/// that finds its row is a hit even when it writes the value the row already has.
pub fn client_capabilities(
    server: u64,
    with_db: bool,
    cache_metadata: bool,
) -> Result<u64, SetupError> {
    let required = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION;
    if server & required != required {
        return Err(SetupError("the server is older than MySQL 4.1 (no protocol 4.1 / secure connection): loadgen cannot talk to it".into()));
    }
    let mut want = required
        | CLIENT_LONG_PASSWORD
        | CLIENT_FOUND_ROWS
        | CLIENT_PLUGIN_AUTH
        | CLIENT_TRANSACTIONS
        | CLIENT_MULTI_RESULTS
        | CLIENT_PS_MULTI_RESULTS
        | CLIENT_DEPRECATE_EOF;
    if with_db {
        want |= CLIENT_CONNECT_WITH_DB;
    }
    if cache_metadata {
        want |= MARIADB_CLIENT_CACHE_METADATA;
    }
    Ok(want & server)
}

/// HandshakeResponse41 for `capabilities` (from `client_capabilities`): the database only
/// with CLIENT_CONNECT_WITH_DB, the plugin name only with CLIENT_PLUGIN_AUTH.
pub fn handshake_response(
    capabilities: u64,
    user: &str,
    auth: &[u8],
    db: Option<&str>,
    plugin: &str,
) -> Result<Vec<u8>, SetupError> {
    // mysql_common would cut a name at its first NUL and log in as someone else.
    if user.contains('\0') || db.is_some_and(|d| d.contains('\0')) {
        return Err(SetupError(
            "the user or database name contains a NUL byte".into(),
        ));
    }
    let db = db.filter(|_| capabilities & CLIENT_CONNECT_WITH_DB != 0);
    let plugin = Some(AuthPlugin::from_bytes(plugin.as_bytes()))
        .filter(|_| capabilities & CLIENT_PLUGIN_AUTH != 0);
    let response = HandshakeResponse::new(
        Some(auth),
        UTF8MB4_SERVER,
        Some(user.as_bytes()),
        db.map(str::as_bytes),
        plugin,
        CapabilityFlags::from_bits_truncate(capabilities as u32),
        None,
        1 << 24,
    )
    .with_mariadb_ext_capabilities(MariadbCapabilities::from_bits_truncate(
        (capabilities >> 32) as u32,
    ));
    let mut p = Vec::with_capacity(64 + user.len());
    response.serialize(&mut p);
    Ok(p)
}

/// The SSLRequest that comes before the TLS handshake: the HandshakeResponse's first 32
/// bytes, CLIENT_SSL set; the HandshakeResponse follows over TLS with the same capabilities.
pub fn ssl_request(capabilities: u64) -> Vec<u8> {
    let capabilities = capabilities | CLIENT_SSL;
    let request = SslRequest::new(
        CapabilityFlags::from_bits_truncate(capabilities as u32),
        1 << 24,
        UTF8MB4_GENERAL_CI,
    )
    .with_mariadb_capabilities(MariadbCapabilities::from_bits_truncate(
        (capabilities >> 32) as u32,
    ));
    let mut p = Vec::with_capacity(32);
    request.serialize(&mut p);
    p
}

/// The collation HandshakeResponse picks for `UTF8MB4_SERVER`.
const UTF8MB4_GENERAL_CI: u8 = 45;

/// mysql_native_password over the first 20 bytes of the challenge (a challenge may carry its
/// trailing NUL). No password: an empty response.
pub fn native_password(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    scramble_native(scramble.get(..20).unwrap_or(scramble), password)
        .map_or_else(Vec::new, |r| r.to_vec())
}

/// An AuthSwitchRequest (0xFE, plugin NUL, data): the plugin and its challenge.
/// A bare 0xFE is the pre-4.1 switch to mysql_old_password.
pub fn auth_switch(p: &[u8]) -> Result<(String, Vec<u8>), SetupError> {
    if p == [0xFE] {
        return Ok(("mysql_old_password".into(), Vec::new()));
    }
    let switch: AuthSwitchRequest<'_> = ParseBuf(p)
        .parse(())
        .map_err(|_| "malformed AuthSwitchRequest from the server".to_string())?;
    let plugin = String::from_utf8_lossy(switch.auth_plugin().as_bytes()).into_owned();
    Ok((plugin, switch.plugin_data().to_vec()))
}

/// What to do with a packet of the server's answer to the HandshakeResponse (ERR packets are
/// the caller's: they end the login with the server's message).
#[derive(Debug, PartialEq, Eq)]
pub enum AuthStep {
    /// OK: logged in.
    Done,
    /// A switch to mysql_native_password with a new challenge: send these bytes.
    Answer(Vec<u8>),
    /// The user's plugin is one the wire driver does not speak: its name.
    Unspoken(String),
}

/// The wire driver's login decision. It answered the greeting with mysql_native_password;
/// a user of another plugin makes the server switch (once: `switched`), and AuthMoreData
/// without a switch is the greeting's multi-round plugin (caching_sha2_password,
/// sha256_password) carrying on.
pub fn auth_step(
    p: &[u8],
    password: &[u8],
    switched: bool,
    greeting_plugin: &str,
) -> Result<AuthStep, SetupError> {
    match p.first() {
        Some(0x00) => Ok(AuthStep::Done),
        Some(0xFE) if !switched => {
            let (plugin, challenge) = auth_switch(p)?;
            Ok(match speaker(&plugin) {
                Speaker::Wire => AuthStep::Answer(native_password(password, &challenge)),
                _ => AuthStep::Unspoken(plugin),
            })
        }
        Some(0x01) if !switched && speaker(greeting_plugin) != Speaker::Wire => {
            Ok(AuthStep::Unspoken(greeting_plugin.to_string()))
        }
        _ => Err(SetupError(
            "unexpected reply from the server during authentication".into(),
        )),
    }
}

/// COM_STMT_PREPARE_OK: 0x00, statement id (4), columns (2), parameters (2), ...
#[derive(Debug, PartialEq, Eq)]
pub struct Prepared {
    pub statement_id: u32,
    pub columns: u16,
    pub params: u16,
}

pub fn parse_prepare_ok(p: &[u8]) -> Option<Prepared> {
    let ok: StmtPacket = ParseBuf(p).parse(()).ok()?;
    Some(Prepared {
        statement_id: ok.statement_id(),
        columns: ok.num_columns(),
        params: ok.num_params(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB 10.11's greeting as seen on the wire (scramble replaced).
    fn mariadb_greeting() -> Vec<u8> {
        greeting_with("mysql_native_password")
    }

    /// That greeting with another default plugin.
    fn greeting_with(plugin: &str) -> Vec<u8> {
        let mut p = vec![10];
        p.extend_from_slice(b"5.5.5-10.11.19-MariaDB-0+deb12u1\0");
        p.extend_from_slice(&7u32.to_le_bytes());
        p.extend_from_slice(b"abcdefgh\0");
        let caps: u32 = 0x81ff_f7fe;
        p.extend_from_slice(&(caps as u16).to_le_bytes());
        p.push(45);
        p.extend_from_slice(&[2, 0]);
        p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
        p.push(21);
        p.extend_from_slice(&[0; 6]);
        p.extend_from_slice(&0x1du32.to_le_bytes());
        p.extend_from_slice(b"ijklmnopqrst\0");
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
        p
    }

    #[test]
    fn greeting_of_mariadb() {
        let g = parse_greeting(&mariadb_greeting()).unwrap();
        assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(g.plugin, NATIVE_PASSWORD);
        assert_eq!(g.capabilities >> 32, 0x1d);
        assert_ne!(g.capabilities & CLIENT_DEPRECATE_EOF, 0);
        let caps = client_capabilities(g.capabilities, true, true).unwrap();
        assert_eq!(caps & CLIENT_LONG_PASSWORD, 0, "MariaDB extensions stay on");
        assert_ne!(caps & MARIADB_CLIENT_CACHE_METADATA, 0);
        assert_ne!(caps & CLIENT_DEPRECATE_EOF, 0);
        let caps = client_capabilities(g.capabilities, false, false).unwrap();
        assert_eq!(
            caps & (MARIADB_CLIENT_CACHE_METADATA | CLIENT_CONNECT_WITH_DB),
            0
        );
    }

    #[test]
    fn greeting_of_mysql_has_no_mariadb_capabilities() {
        let mut p = mariadb_greeting();
        let at = 1 + 33 + 4 + 9;
        p[at] |= 1; // CLIENT_LONG_PASSWORD: a MySQL server
        let g = parse_greeting(&p).unwrap();
        assert_eq!(g.capabilities >> 32, 0);
        let caps = client_capabilities(g.capabilities, true, true).unwrap();
        assert_ne!(caps & CLIENT_LONG_PASSWORD, 0);
        assert_eq!(caps & MARIADB_CLIENT_CACHE_METADATA, 0);
    }

    #[test]
    fn bad_greetings_are_refused_without_panic() {
        assert!(parse_greeting(&[9, 0]).unwrap_err().contains("version 9"));
        for bad in [
            &b""[..],
            b"\x0a",
            b"\x0a5.5\0",
            b"\x0aHTTP/1.1 400 Bad Request\r\n",
        ] {
            assert!(
                parse_greeting(bad).unwrap_err().contains("not MySQL"),
                "{bad:?}"
            );
        }
        let g = mariadb_greeting();
        for cut in 0..g.len() {
            let _ = parse_greeting(&g[..cut]);
        }
        let old = CLIENT_PROTOCOL_41; // no secure connection
        assert!(client_capabilities(old, true, true).is_err());
    }

    #[test]
    fn response_layout() {
        let caps = CLIENT_PROTOCOL_41
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH
            | CLIENT_CONNECT_WITH_DB
            | MARIADB_CLIENT_CACHE_METADATA;
        let p = handshake_response(caps, "bob", &[7; 20], Some("db"), NATIVE_PASSWORD).unwrap();
        assert_eq!(&p[..4], &(caps as u32).to_le_bytes());
        assert_eq!(p[8], 45);
        assert_eq!(&p[28..32], &16u32.to_le_bytes());
        let mut tail = b"bob\0\x14".to_vec();
        tail.extend_from_slice(&[7; 20]);
        tail.extend_from_slice(b"db\0mysql_native_password\0");
        assert_eq!(&p[32..], &tail[..]);
        // Without CONNECT_WITH_DB the database is not sent.
        let p = handshake_response(CLIENT_PLUGIN_AUTH, "bob", &[], Some("db"), "x").unwrap();
        assert_eq!(&p[32..], b"bob\0\0x\0");
        assert!(handshake_response(caps, "b\0b", &[], None, "x").is_err());
    }

    #[test]
    fn ssl_request_is_the_response_head_with_client_ssl() {
        let caps = CLIENT_PROTOCOL_41
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH
            | MARIADB_CLIENT_CACHE_METADATA;
        let p = ssl_request(caps);
        assert_eq!(p.len(), 32);
        let response = handshake_response(caps | CLIENT_SSL, "bob", &[], None, "x").unwrap();
        assert_eq!(&p[..], &response[..32]);
        assert_eq!(&p[..4], &((caps | CLIENT_SSL) as u32).to_le_bytes());
        assert_eq!(&p[28..32], &((caps >> 32) as u32).to_le_bytes());
    }

    #[test]
    fn native_password_is_what_the_server_checks() {
        // SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))) for "password", worked out
        // apart from loadgen (Python's hashlib); the server stores only the inner SHA1(SHA1()).
        let want = "bfdd49584b917d42c758edd2a7a541f721843041";
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let scramble = b"abcdefghijklmnopqrst";
        let r = native_password(b"password", scramble);
        assert_eq!(hex(&r), want);
        assert_ne!(hex(&native_password(b"Password", scramble)), want);
        // A challenge with its trailing NUL still uses only the 20 bytes.
        assert_eq!(native_password(b"password", b"abcdefghijklmnopqrst\0"), r);
        assert!(native_password(b"", scramble).is_empty());
    }

    #[test]
    fn auth_switch_and_prepare_ok() {
        let (plugin, data) =
            auth_switch(b"\xfemysql_native_password\0abcdefghijklmnopqrst\0").unwrap();
        assert_eq!(
            (plugin.as_str(), &data[..]),
            (NATIVE_PASSWORD, &b"abcdefghijklmnopqrst"[..])
        );
        assert_eq!(auth_switch(b"\xfe").unwrap().0, "mysql_old_password");
        assert_eq!(
            auth_switch(b"\xfeclient_ed25519\0").unwrap().0,
            "client_ed25519"
        );
        for bad in [&b"\xfeclient_ed25519"[..], b"", b"\x00x\0"] {
            assert!(auth_switch(bad).unwrap_err().contains("AuthSwitchRequest"));
        }
        let ok = [0, 1, 0, 0, 0, 3, 0, 1, 0, 0, 0, 0];
        let want = Prepared {
            statement_id: 1,
            columns: 3,
            params: 1,
        };
        assert_eq!(parse_prepare_ok(&ok), Some(want));
        assert_eq!(parse_prepare_ok(&ok[..11]), None);
        assert_eq!(
            parse_prepare_ok(&[0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None
        );
    }

    /// MySQL 8's greeting names caching_sha2_password: the wire driver still answers
    /// mysql_native_password (a native user logs in, on the fast path), and a caching_sha2
    /// user's AuthSwitchRequest, or AuthMoreData of the greeting's plugin, hands over.
    #[test]
    fn mysql8_caching_sha2_switches_to_mysql_async() {
        let mut p = greeting_with("caching_sha2_password");
        p[1 + 33 + 4 + 9] |= 1; // CLIENT_LONG_PASSWORD: a MySQL server
        let g = parse_greeting(&p).unwrap();
        assert_eq!(g.plugin, "caching_sha2_password");
        let pw = b"password";
        let step = |p: &[u8], switched| auth_step(p, pw, switched, &g.plugin);
        // A mysql_native_password user: OK at once.
        assert_eq!(
            step(b"\x00\x00\x00\x02\x00\x00\x00", false),
            Ok(AuthStep::Done)
        );
        // A caching_sha2_password user: the server switches to it.
        let switch = b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0";
        assert_eq!(
            step(switch, false),
            Ok(AuthStep::Unspoken("caching_sha2_password".into()))
        );
        // AuthMoreData (fast-auth result, or "perform full authentication") before a switch.
        for more in [&b"\x01\x03"[..], b"\x01\x04"] {
            assert_eq!(
                step(more, false),
                Ok(AuthStep::Unspoken("caching_sha2_password".into()))
            );
        }
        // A second switch is not MySQL protocol.
        assert!(step(switch, true).is_err());
    }

    #[test]
    fn auth_step_decides_by_the_plugin_asked_for() {
        let step = |p: &[u8]| auth_step(p, b"password", false, NATIVE_PASSWORD);
        let native = b"\xfemysql_native_password\0abcdefghijklmnopqrst\0";
        assert_eq!(
            step(native),
            Ok(AuthStep::Answer(native_password(
                b"password",
                b"abcdefghijklmnopqrst"
            )))
        );
        for plugin in ["client_ed25519", "parsec", "sha256_password", "dialog"] {
            let mut p = vec![0xFE];
            p.extend_from_slice(plugin.as_bytes());
            p.extend_from_slice(b"\0nonce");
            assert_eq!(step(&p), Ok(AuthStep::Unspoken(plugin.into())), "{plugin}");
        }
        assert_eq!(
            step(b"\xfe"),
            Ok(AuthStep::Unspoken("mysql_old_password".into()))
        );
        // AuthMoreData after a native greeting, garbage, nothing: errors, no panic.
        for bad in [&b"\x01\x03"[..], b"\x07", b""] {
            assert!(step(bad).is_err(), "{bad:?}");
        }
    }
}
