//! One-line, actionable messages for PostgreSQL errors, shared by both drivers, the server
//! counter and `prepare`.

use tokio_postgres::error::SqlState;

use crate::outcome::ErrorKind;
use crate::transport::{self, Endpoint};

/// A one-line, actionable message for a tokio-postgres error. Never contains the password
/// (tokio-postgres does not put it in errors; we do not add it).
pub fn explain(e: &tokio_postgres::Error, what: &str) -> String {
    if let Some(db) = e.as_db_error() {
        return explain_db(db.code(), db.message(), what);
    }
    if let Some(line) = transport::alert_line(e, "the server") {
        return line;
    }
    let s = e.to_string();
    let mut cause = String::new();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        cause = x.to_string();
        src = x.source();
    }
    if cause.is_empty() || s.contains(&cause) {
        s
    } else {
        format!("{s}: {cause}")
    }
}

/// `explain` for an error from opening a connection: a failed connect is said in the
/// transport's words (which socket, and what is wrong with it), as the wire driver says it.
pub fn explain_connect(e: &tokio_postgres::Error, ep: &Endpoint, what: &str) -> String {
    let io = std::error::Error::source(e).and_then(|s| s.downcast_ref::<std::io::Error>());
    match io {
        Some(io) if e.to_string().starts_with("error connecting to server") => {
            transport::explain(ep, io)
        }
        // The TLS handshake's own line (transport::TlsClient), or tokio-postgres's 'N' answer.
        Some(io) if e.to_string().starts_with("error performing TLS") => io.to_string(),
        _ if e.to_string().contains("server does not support TLS") => {
            "the server does not accept TLS, and the sslmode requires it: use sslmode=prefer or disable".into()
        }
        _ => explain(e, what),
    }
}

/// The one-line message for a server error (SQLSTATE and message), shared with `pgwire`.
pub fn explain_db(code: &SqlState, message: &str, what: &str) -> String {
    if message.contains("no encryption") {
        // pg_hba.conf takes this user over TLS only (hostssl).
        return format!("{message}: the server takes this user only over TLS: use sslmode=require or stronger (or leave sslmode out)");
    }
    // pg_hba.conf's `cert` method or `clientcert=verify-full`: the certificate, not a password.
    if message.contains("requires a valid client certificate") {
        return format!("{message}: the server logs this user in by client certificate: pass sslcert=<file>&sslkey=<file>, a certificate signed by the server's ssl_ca_file");
    }
    if message.contains("certificate authentication failed") {
        return format!("{message}: the client certificate's CN must be the user name (or the server's pg_ident.conf map must allow it): pass sslcert= with one made for this user");
    }
    if *code == SqlState::INVALID_PASSWORD || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    {
        return format!("{message}: check the user and password (in the URL or PGPASSWORD)");
    }
    if *code == SqlState::UNDEFINED_TABLE {
        return format!("{message} while preparing the {what}: run `loadgen prepare <url>` to create and load the table");
    }
    if *code == SqlState::INVALID_CATALOG_NAME {
        return format!("{message}: create it or name another database in the URL path");
    }
    format!("{message} ({}) while preparing the {what}", code.code())
}

/// The kind a request's server error is counted as, from its SQLSTATE: the classes a write
/// mix meets are told apart, everything else is a plain `server` error.
pub fn kind(code: &str) -> ErrorKind {
    match code {
        "23505" => ErrorKind::Duplicate,
        // deadlock_detected; lock_not_available (lock_timeout, NOWAIT)
        "40P01" | "55P03" => ErrorKind::Deadlock,
        "40001" => ErrorKind::Serialization,
        // read_only_sql_transaction: a standby, or default_transaction_read_only
        "25006" => ErrorKind::Readonly,
        _ => ErrorKind::Server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_a_write_mix_meets_have_their_own_kind() {
        for (code, want) in [
            ("23505", ErrorKind::Duplicate),
            ("40P01", ErrorKind::Deadlock),
            ("55P03", ErrorKind::Deadlock),
            ("40001", ErrorKind::Serialization),
            ("25006", ErrorKind::Readonly),
            ("42P01", ErrorKind::Server),
            ("", ErrorKind::Server),
        ] {
            assert_eq!(kind(code), want, "{code}");
        }
    }
}
