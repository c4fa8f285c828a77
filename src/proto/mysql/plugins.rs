//! The auth plugins a server may ask a user to log in with, and which of loadgen's MySQL
//! drivers answers each. The wire driver speaks mysql_native_password only; for the others it
//! hands the run to mysql_async (`dispatch`), and a plugin neither speaks is one line naming
//! it and what to do.
use crate::error::SetupError;

pub const NATIVE_PASSWORD: &str = "mysql_native_password";

/// What mysql_async answers beyond the wire driver (ed25519 and parsec through its
/// `client_ed25519` / `client_parsec` features: without them it panics on such a user).
/// caching_sha2_password's full authentication (an empty server cache) goes over TLS, the Unix
/// socket or the server's RSA key, all inside mysql_async.
pub const ASYNC_ONLY: &[&str] = &["caching_sha2_password", "client_ed25519", "parsec"];

/// Which driver can log in with a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    Wire,
    MysqlAsync,
    Neither,
}

pub fn speaker(plugin: &str) -> Speaker {
    if plugin == NATIVE_PASSWORD {
        Speaker::Wire
    } else if ASYNC_ONLY.contains(&plugin) {
        Speaker::MysqlAsync
    } else {
        Speaker::Neither
    }
}

/// A user whose plugin the wire driver does not speak: the line to print when mysql_async
/// takes the run over, or the one-line refusal when it cannot (the plugin, or `-p`).
pub fn fallback(label: &str, plugin: &str, depth: usize) -> Result<String, SetupError> {
    match speaker(plugin) {
        Speaker::MysqlAsync if depth > 1 => Err(no_pipelining(label, plugin, depth).into()),
        Speaker::MysqlAsync => Ok(fallback_note(label, plugin)),
        _ => Err(SetupError(format!("{label}: {}", unspoken(plugin)))),
    }
}

/// The line the wire driver prints when it hands the run to mysql_async.
pub fn fallback_note(label: &str, plugin: &str) -> String {
    format!(
        "{label}: the server asks for auth plugin '{plugin}', which the wire driver does not speak; using driver mysql_async"
    )
}

/// The fallback is impossible when the run pipelines: mysql_async cannot.
pub fn no_pipelining(label: &str, plugin: &str, depth: usize) -> String {
    format!(
        "{label}: the server asks for auth plugin '{plugin}', which only driver mysql_async speaks, and mysql_async cannot pipeline (-p {depth}): use -p 1 with more connections (-c), or a user IDENTIFIED WITH {NATIVE_PASSWORD} for the wire driver"
    )
}

/// Why a wire connection cannot log in (its first login hands over to mysql_async, so this
/// is only met when the user's plugin changed during the run).
pub fn not_wire(plugin: &str) -> String {
    match speaker(plugin) {
        Speaker::MysqlAsync => format!(
            "the server asks for auth plugin '{plugin}', which the wire driver does not speak: use ?driver=mysql_async"
        ),
        _ => unspoken(plugin),
    }
}

/// Why no driver logs in with `plugin`, and what to do instead (one line, no label).
pub fn unspoken(plugin: &str) -> String {
    let instead = format!("log in as a user IDENTIFIED WITH {NATIVE_PASSWORD} (or caching_sha2_password, client_ed25519)");
    match plugin {
        "mysql_old_password" => format!(
            "the user's password is in the pre-4.1 mysql_old_password format, which is insecure and which loadgen refuses: set it again (ALTER USER ... IDENTIFIED BY ...) or {instead}"
        ),
        "mysql_clear_password" => format!(
            "the server asks for auth plugin 'mysql_clear_password', which sends the password unencrypted; loadgen does not: {instead}"
        ),
        _ => format!(
            "the server asks for auth plugin '{plugin}', which neither MySQL driver of loadgen speaks (wire: {NATIVE_PASSWORD}; mysql_async: also {}): {instead}",
            ASYNC_ONLY.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_speaks_what() {
        assert_eq!(speaker(NATIVE_PASSWORD), Speaker::Wire);
        // MySQL 8's default, MariaDB's ed25519 and parsec: mysql_async.
        for p in ["caching_sha2_password", "client_ed25519", "parsec"] {
            assert_eq!(speaker(p), Speaker::MysqlAsync, "{p}");
        }
        for p in [
            "sha256_password",
            "mysql_old_password",
            "mysql_clear_password",
            "dialog",
            "auth_gssapi_client",
            "",
        ] {
            assert_eq!(speaker(p), Speaker::Neither, "{p}");
        }
    }

    #[test]
    fn lines_name_the_plugin_and_what_to_do() {
        let l = fallback_note("mysql://u@h:1/db", "client_ed25519");
        assert!(l.contains("'client_ed25519'") && l.ends_with("using driver mysql_async"));
        for p in [
            "sha256_password",
            "mysql_old_password",
            "mysql_clear_password",
        ] {
            let l = unspoken(p);
            assert!(l.contains(p), "{l}");
            assert!(l.contains("IDENTIFIED WITH mysql_native_password"), "{l}");
            assert!(!l.contains('\n'));
        }
        assert!(no_pipelining("x", "parsec", 8).contains("-p 1"));
        assert_eq!(
            fallback("x", "client_ed25519", 1),
            Ok(fallback_note("x", "client_ed25519"))
        );
        assert!(fallback("x", "client_ed25519", 2)
            .unwrap_err()
            .contains("-p 2"));
        assert_eq!(
            fallback("x", "dialog", 1),
            Err(SetupError(format!("x: {}", unspoken("dialog"))))
        );
    }
}
