//! MySQL TLS as the mysql client writes it: `ssl-mode` (DISABLED | PREFERRED, the default |
//! REQUIRED | VERIFY_CA | VERIFY_IDENTITY), `ssl-ca`, `ssl-cert`, `ssl-key`, mapped onto the
//! transport's TLS modes, for both drivers. A Unix socket stays plain (as mysql_async and
//! libpq do): a mode that demands TLS there is refused rather than ignored.

use crate::error::SetupError;
use std::path::PathBuf;

use crate::transport::{Endpoint, OptionNames, Roots, TlsInfo, TlsMode, TlsOptions, Verified};
use crate::url::TargetUrl;

pub const NAMES: OptionNames = OptionNames {
    mode: "ssl-mode",
    roots: "ssl-ca",
    cert: "ssl-cert",
    key: "ssl-key",
};

/// The TLS a URL asks for, None when the connection stays plain (DISABLED, or a Unix socket
/// under PREFERRED).
pub fn tls_options(url: &TargetUrl, endpoint: &Endpoint) -> Result<Option<TlsOptions>, SetupError> {
    let mode = match url.param("ssl-mode") {
        None => TlsMode::Prefer,
        Some(m) => TlsMode::mysql(m).ok_or_else(|| {
            format!(
                "ssl-mode={m} in the URL: use DISABLED, PREFERRED (the default), REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
            )
        })?,
    };
    if mode == TlsMode::Disable {
        return Ok(None);
    }
    if let Endpoint::Unix(path) = endpoint {
        if mode.requires_tls() {
            return Err(SetupError(format!(
                "ssl-mode={} with socket={}: loadgen does not run TLS over a Unix socket (it never leaves the machine): drop ssl-mode, or connect by TCP",
                url.param("ssl-mode").unwrap_or_default(),
                path.display()
            )));
        }
        return Ok(None);
    }
    let file = |name: &str| url.param(name).map(PathBuf::from);
    Ok(Some(TlsOptions {
        mode,
        roots: file("ssl-ca").map_or(Roots::Absent, Roots::File),
        cert: file("ssl-cert"),
        key: file("ssl-key"),
        names: NAMES,
    }))
}

/// What a connection negotiated, from the server's `Ssl_version` / `Ssl_cipher` (OpenSSL's
/// names: `TLSv1.3`, `TLS_AES_256_GCM_SHA384`), in the words rustls gives the wire driver.
pub fn server_said(version: &str, cipher: &str, verified: Verified) -> TlsInfo {
    let version = match version.strip_prefix("TLSv") {
        Some(v) => format!("TLS {v}"),
        None => version.to_string(),
    };
    let cipher = match cipher.strip_prefix("TLS_") {
        Some(rest) if version == "TLS 1.3" => format!("TLS13_{rest}"),
        _ => cipher.to_string(),
    };
    TlsInfo {
        version,
        cipher,
        verified,
    }
}

/// Whether the wire driver sends the SSLRequest: when the greeting offers TLS; a server
/// without it is plain under PREFERRED and refused under the stricter modes.
pub fn ask_tls(mode: TlsMode, server_offers: bool) -> Result<bool, SetupError> {
    match (server_offers, mode.requires_tls()) {
        (true, _) => Ok(true),
        (false, false) => Ok(false),
        (false, true) => Err(no_tls_on_server().into()),
    }
}

/// A server whose greeting offers no TLS, under a mode that demands it.
pub fn no_tls_on_server() -> String {
    "the server does not offer TLS (its greeting has no CLIENT_SSL; MariaDB: have_ssl is not YES), and ssl-mode demands it: configure ssl_cert and ssl_key on the server, or use ssl-mode=PREFERRED".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(url: &str) -> Result<Option<TlsOptions>, SetupError> {
        let url = TargetUrl::parse(url).unwrap();
        let ep = super::super::endpoint(&url)?;
        tls_options(&url, &ep)
    }

    #[test]
    fn modes_as_the_mysql_client_names_them() {
        let o = opts("mysql://u@h/db").unwrap().unwrap();
        assert_eq!((o.mode, o.roots), (TlsMode::Prefer, Roots::Absent));
        assert!(opts("mysql://u@h/db?ssl-mode=DISABLED").unwrap().is_none());
        let o =
            opts("mysql://u@h/db?ssl-mode=verify_identity&ssl-ca=/ca.pem&ssl-cert=/c&ssl-key=/k")
                .unwrap()
                .unwrap();
        assert_eq!(o.mode, TlsMode::VerifyFull);
        assert_eq!(o.roots, Roots::File("/ca.pem".into()));
        assert_eq!((o.cert, o.key), (Some("/c".into()), Some("/k".into())));
        let e = opts("mysql://u@h/db?ssl-mode=require").unwrap_err();
        assert!(
            e.contains("ssl-mode=require") && e.contains("REQUIRED"),
            "{e}"
        );
    }

    #[test]
    fn preferred_goes_plain_where_the_server_offers_no_tls() {
        assert_eq!(ask_tls(TlsMode::Prefer, true), Ok(true));
        assert_eq!(ask_tls(TlsMode::Prefer, false), Ok(false));
        for strict in [TlsMode::Require, TlsMode::VerifyCa, TlsMode::VerifyFull] {
            assert_eq!(ask_tls(strict, true), Ok(true));
            let e = ask_tls(strict, false).unwrap_err();
            assert!(
                e.contains("does not offer TLS") && e.contains("PREFERRED"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_servers_names_in_rustls_words() {
        let i = server_said("TLSv1.3", "TLS_AES_256_GCM_SHA384", Verified::Full);
        assert_eq!(i.to_string(), "TLS 1.3 TLS13_AES_256_GCM_SHA384");
        let i = server_said("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384", Verified::None);
        assert_eq!(i.to_string(), "TLS 1.2 ECDHE-RSA-AES256-GCM-SHA384");
    }

    #[test]
    fn a_socket_stays_plain_and_refuses_modes_that_demand_tls() {
        assert!(opts("mysql://u@localhost/db?socket=/run/m.sock")
            .unwrap()
            .is_none());
        let e = opts("mysql://u@localhost/db?socket=/run/m.sock&ssl-mode=REQUIRED").unwrap_err();
        assert!(
            e.contains("Unix socket") && e.contains("/run/m.sock"),
            "{e}"
        );
    }
}
