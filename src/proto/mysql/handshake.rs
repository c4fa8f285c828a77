//! The MySQL / MariaDB connection handshake as pure functions over packet payloads: the
//! server's greeting (Handshake v10), the client's HandshakeResponse41, the
//! mysql_native_password scramble, and the COM_STMT_PREPARE reply. `target::mysqlwire` moves
//! the bytes; keeping the byte layout here lets it be tested without a server.

use sha1::{Digest, Sha1};

use crate::proto::mysql::codec::{
    CLIENT_CONNECT_WITH_DB, CLIENT_DEPRECATE_EOF, CLIENT_LONG_PASSWORD, CLIENT_MULTI_RESULTS,
    CLIENT_PLUGIN_AUTH, CLIENT_PROTOCOL_41, CLIENT_PS_MULTI_RESULTS, CLIENT_SECURE_CONNECTION,
    CLIENT_TRANSACTIONS, MARIADB_CLIENT_CACHE_METADATA,
};

pub const NATIVE_PASSWORD: &str = "mysql_native_password";

/// utf8mb4_general_ci: every server since MySQL 5.5 knows it.
const CHARSET: u8 = 45;

/// What the server's greeting says that the client needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Greeting {
    pub version: String,
    /// MySQL's 32 capability bits, and MariaDB's extended ones in the high 32 bits (only when
    /// the server clears CLIENT_MYSQL, bit 0, to say it is MariaDB).
    pub capabilities: u64,
    /// The auth challenge: 20 bytes for mysql_native_password.
    pub scramble: Vec<u8>,
    /// The server's default auth plugin.
    pub plugin: String,
}

/// Parses Handshake v10: protocol version, server version (NUL-terminated), connection id (4),
/// scramble part 1 (8), filler, capabilities low (2), charset, status (2), capabilities high
/// (2), scramble length, 6 reserved bytes, MariaDB capabilities (4), scramble part 2, plugin.
pub fn parse_greeting(p: &[u8]) -> Result<Greeting, String> {
    let not_mysql =
        || "the server's greeting is not MySQL protocol (is this a MySQL/MariaDB port?)";
    match p.first() {
        Some(10) => {}
        Some(v) => {
            return Err(format!(
                "the server speaks MySQL protocol version {v}; loadgen speaks version 10 (MySQL 4.1 and later)"
            ))
        }
        None => return Err(not_mysql().into()),
    }
    let nul = p[1..].iter().position(|&b| b == 0).ok_or_else(not_mysql)?;
    let version = String::from_utf8_lossy(&p[1..1 + nul]).into_owned();
    let f = &p[2 + nul..];
    if f.len() < 31 {
        return Err(not_mysql().into());
    }
    let mut scramble = f[4..12].to_vec();
    let low = u16::from_le_bytes([f[13], f[14]]) as u64;
    let high = u16::from_le_bytes([f[18], f[19]]) as u64;
    let mut capabilities = low | high << 16;
    let scramble_len = f[20] as usize;
    if capabilities & CLIENT_LONG_PASSWORD == 0 {
        let mariadb = u32::from_le_bytes([f[27], f[28], f[29], f[30]]) as u64;
        capabilities |= mariadb << 32;
    }
    let mut rest = &f[31..];
    if capabilities & CLIENT_SECURE_CONNECTION != 0 {
        // Part 2 is at least 13 bytes including a trailing NUL that is not part of it.
        let n = scramble_len.saturating_sub(8).max(13).min(rest.len());
        let part2 = &rest[..n];
        scramble.extend_from_slice(part2.strip_suffix(&[0]).unwrap_or(part2));
        rest = &rest[n..];
    }
    let plugin = if capabilities & CLIENT_PLUGIN_AUTH != 0 {
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).into_owned()
    } else {
        NATIVE_PASSWORD.into()
    };
    Ok(Greeting {
        version,
        capabilities,
        scramble,
        plugin,
    })
}

/// The capabilities to ask for: only what the server offers, and only what changes nothing
/// loadgen does not parse. CLIENT_DEPRECATE_EOF saves a packet per result set;
/// MARIADB_CLIENT_CACHE_METADATA (with `cache_metadata`) saves the column definitions on every
/// execute. CLIENT_LONG_PASSWORD only where the server sets it: to MariaDB that bit means
/// "a MySQL client" and turns the extended capabilities off.
pub fn client_capabilities(
    server: u64,
    with_db: bool,
    cache_metadata: bool,
) -> Result<u64, String> {
    let required = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION;
    if server & required != required {
        return Err("the server is older than MySQL 4.1 (no protocol 4.1 / secure connection): loadgen cannot talk to it".into());
    }
    let mut want = required
        | CLIENT_LONG_PASSWORD
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

/// HandshakeResponse41: capabilities (4), max packet (4), charset, 19 zero bytes, MariaDB
/// capabilities (4), user NUL, auth response (1-byte length), database NUL, plugin NUL.
pub fn handshake_response(
    capabilities: u64,
    user: &str,
    auth: &[u8],
    db: Option<&str>,
    plugin: &str,
) -> Result<Vec<u8>, String> {
    if user.contains('\0') || db.is_some_and(|d| d.contains('\0')) {
        return Err("the user or database name contains a NUL byte".into());
    }
    let mut p = Vec::with_capacity(64 + user.len());
    p.extend_from_slice(&(capabilities as u32).to_le_bytes());
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(CHARSET);
    p.extend_from_slice(&[0; 19]);
    p.extend_from_slice(&((capabilities >> 32) as u32).to_le_bytes());
    p.extend_from_slice(user.as_bytes());
    p.push(0);
    p.push(auth.len() as u8); // a SHA1: 20 bytes
    p.extend_from_slice(auth);
    if let Some(db) = db.filter(|_| capabilities & CLIENT_CONNECT_WITH_DB != 0) {
        p.extend_from_slice(db.as_bytes());
        p.push(0);
    }
    if capabilities & CLIENT_PLUGIN_AUTH != 0 {
        p.extend_from_slice(plugin.as_bytes());
        p.push(0);
    }
    Ok(p)
}

/// mysql_native_password: SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))).
/// The server stores SHA1(SHA1(password)) and can check this without the password itself.
/// No password: an empty response.
pub fn native_password(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password);
    let stage2 = Sha1::digest(stage1);
    let mask = Sha1::new()
        .chain_update(scramble.get(..20).unwrap_or(scramble))
        .chain_update(stage2)
        .finalize();
    stage1.iter().zip(mask.iter()).map(|(a, b)| a ^ b).collect()
}

/// An AuthSwitchRequest (0xFE, plugin NUL, data): the plugin and its challenge.
/// A bare 0xFE is the pre-4.1 switch to mysql_old_password.
pub fn auth_switch(p: &[u8]) -> (String, &[u8]) {
    let body = &p[1..];
    if body.is_empty() {
        return ("mysql_old_password".into(), body);
    }
    let end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
    let data = body.get(end + 1..).unwrap_or_default();
    (
        String::from_utf8_lossy(&body[..end]).into_owned(),
        data.strip_suffix(&[0]).unwrap_or(data),
    )
}

/// COM_STMT_PREPARE_OK: 0x00, statement id (4), columns (2), parameters (2), ...
#[derive(Debug, PartialEq, Eq)]
pub struct Prepared {
    pub statement_id: u32,
    pub columns: u16,
    pub params: u16,
}

pub fn parse_prepare_ok(p: &[u8]) -> Option<Prepared> {
    match p {
        [0x00, a, b, c, d, c0, c1, p0, p1, ..] => Some(Prepared {
            statement_id: u32::from_le_bytes([*a, *b, *c, *d]),
            columns: u16::from_le_bytes([*c0, *c1]),
            params: u16::from_le_bytes([*p0, *p1]),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MariaDB 10.11's greeting as seen on the wire (scramble replaced).
    fn mariadb_greeting() -> Vec<u8> {
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
        p.extend_from_slice(b"mysql_native_password\0");
        p
    }

    #[test]
    fn greeting_of_mariadb() {
        let g = parse_greeting(&mariadb_greeting()).unwrap();
        assert_eq!(g.version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
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

    /// Checks a response the way the server does, from SHA1(SHA1(password)) alone.
    fn server_accepts(response: &[u8], scramble: &[u8], stage2: &[u8]) -> bool {
        let mask = Sha1::new()
            .chain_update(scramble)
            .chain_update(stage2)
            .finalize();
        let stage1: Vec<u8> = response
            .iter()
            .zip(mask.iter())
            .map(|(a, b)| a ^ b)
            .collect();
        Sha1::digest(&stage1).as_slice() == stage2
    }

    #[test]
    fn native_password_is_what_the_server_checks() {
        // The well-known PASSWORD('password') = *2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19.
        let stage2: Vec<u8> = (0..20)
            .map(|i| {
                u8::from_str_radix(
                    &"2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"[2 * i..2 * i + 2],
                    16,
                )
                .unwrap()
            })
            .collect();
        let scramble = b"abcdefghijklmnopqrst";
        let r = native_password(b"password", scramble);
        assert_eq!(r.len(), 20);
        assert!(server_accepts(&r, scramble, &stage2));
        assert!(!server_accepts(
            &native_password(b"Password", scramble),
            scramble,
            &stage2
        ));
        // A challenge with its trailing NUL still uses only the 20 bytes.
        assert_eq!(native_password(b"password", b"abcdefghijklmnopqrst\0"), r);
        assert!(native_password(b"", scramble).is_empty());
    }

    #[test]
    fn auth_switch_and_prepare_ok() {
        let (plugin, data) = auth_switch(b"\xfemysql_native_password\0abcdefghijklmnopqrst\0");
        assert_eq!(
            (plugin.as_str(), data),
            (NATIVE_PASSWORD, &b"abcdefghijklmnopqrst"[..])
        );
        assert_eq!(auth_switch(b"\xfe").0, "mysql_old_password");
        assert_eq!(auth_switch(b"\xfeclient_ed25519").0, "client_ed25519");
        let ok = [0, 1, 0, 0, 0, 3, 0, 1, 0, 0, 0, 0];
        let want = Prepared {
            statement_id: 1,
            columns: 3,
            params: 1,
        };
        assert_eq!(parse_prepare_ok(&ok), Some(want));
        assert_eq!(parse_prepare_ok(&ok[..8]), None);
        assert_eq!(parse_prepare_ok(&[0xFF, 0, 0, 0, 0, 0, 0, 0, 0]), None);
    }
}
