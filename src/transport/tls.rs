//! TLS as an upgrade of a connected stream (rustls with the ring provider: no OpenSSL). The modes
//! are libpq's; MySQL's ssl-mode and the `https://`/`rediss://` schemes map onto them, so every
//! protocol verifies, and says why it could not, in the same words.

use crate::error::ConnectError;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, WebPkiServerVerifier};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, InconsistentKeys, RootCertStore,
    SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::client::TlsStream;

use super::stream::Stream;
use crate::outcome::{ErrorKind, LookupError};

/// libpq's `sslmode` values, in order of strictness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsMode {
    Disable,
    /// Plain first, TLS only if the server insists (libpq's order).
    Allow,
    /// TLS if the server speaks it, else plain.
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    pub const LIBPQ: &'static [&'static str] = &[
        "disable",
        "allow",
        "prefer",
        "require",
        "verify-ca",
        "verify-full",
    ];

    /// A libpq `sslmode` value.
    pub fn libpq(s: &str) -> Option<TlsMode> {
        use TlsMode::*;
        let i = Self::LIBPQ.iter().position(|m| *m == s)?;
        Some([Disable, Allow, Prefer, Require, VerifyCa, VerifyFull][i])
    }

    /// A MySQL client `ssl-mode` value (any case, as the mysql client takes it).
    pub fn mysql(s: &str) -> Option<TlsMode> {
        use TlsMode::*;
        Some(match s.to_ascii_uppercase().as_str() {
            "DISABLED" => Disable,
            "PREFERRED" => Prefer,
            "REQUIRED" => Require,
            "VERIFY_CA" => VerifyCa,
            "VERIFY_IDENTITY" => VerifyFull,
            _ => return None,
        })
    }

    /// The connection fails rather than going on in plain text.
    pub fn requires_tls(self) -> bool {
        self >= TlsMode::Require
    }

    /// TLS is asked for first (allow asks only when the server refuses plain text).
    pub fn asks_first(self) -> bool {
        self >= TlsMode::Prefer
    }
}

/// How much of the server's certificate was checked, as results record it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verified {
    /// Encrypted, certificate not checked.
    None,
    /// Chain checked against the CA, host name not.
    Ca,
    /// Chain and host name.
    Full,
}

impl Verified {
    pub fn name(self) -> &'static str {
        match self {
            Verified::None => "none",
            Verified::Ca => "ca",
            Verified::Full => "full",
        }
    }
}

/// Which certificates a server's chain must end in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Roots {
    /// The PEM file named in the URL.
    File(PathBuf),
    /// The system's trusted roots (`https://`, `rediss://`, libpq's `sslrootcert=system`).
    System,
    /// None given: only modes that do not verify can run.
    Absent,
}

/// What a URL asked for, whatever the protocol calls it.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    pub mode: TlsMode,
    pub roots: Roots,
    /// Client certificate and key files (PEM), both or neither.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// The option names, for messages: ("sslmode", "sslrootcert") for libpq, and so on.
    pub names: OptionNames,
}

#[derive(Clone, Copy, Debug)]
pub struct OptionNames {
    pub mode: &'static str,
    pub roots: &'static str,
    pub cert: &'static str,
    pub key: &'static str,
}

/// The version and cipher suite a connection negotiated, and how far the certificate was checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsInfo {
    /// "TLS 1.3"
    pub version: String,
    /// "TLS13_AES_256_GCM_SHA384"
    pub cipher: String,
    pub verified: Verified,
}

impl fmt::Display for TlsInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.version, self.cipher)
    }
}

/// A client configuration built once per run and shared by every connection.
#[derive(Clone)]
pub struct TlsClient {
    pub mode: TlsMode,
    pub verified: Verified,
    config: Arc<ClientConfig>,
    /// What the chain was checked against, for the unknown-issuer message.
    roots: String,
    /// What the first handshake negotiated (every connection of a run asks for the same).
    seen: Arc<OnceLock<TlsInfo>>,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TlsClient({:?}, {:?})", self.mode, self.verified)
    }
}

impl TlsClient {
    /// Reads the CA, certificate and key files and builds the configuration. None for
    /// `disable`. As libpq: a CA file given makes every TLS mode check the chain, and
    /// verify-full adds the host name.
    pub fn new(opts: &TlsOptions) -> Result<Option<TlsClient>, ConnectError> {
        if opts.mode == TlsMode::Disable {
            return Ok(None);
        }
        let n = opts.names;
        let provider = Arc::new(ring::default_provider());
        let keys = provider.clone();
        let (store, roots) = match &opts.roots {
            Roots::File(path) => (read_roots(path, n.roots)?, path.display().to_string()),
            Roots::System => (system_roots()?, "the system's trusted CAs".to_string()),
            Roots::Absent if opts.mode >= TlsMode::VerifyCa => {
                return Err(ConnectError(format!(
                "{}={} needs the CA that signed the server's certificate: add {}=PATH (a PEM file)",
                n.mode,
                mode_name(opts),
                n.roots
            )))
            }
            Roots::Absent => (RootCertStore::empty(), String::new()),
        };
        let verified = match (&opts.roots, opts.mode) {
            (_, TlsMode::VerifyFull) => Verified::Full,
            (Roots::Absent, _) => Verified::None,
            _ => Verified::Ca,
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?;
        let builder = if verified == Verified::Full {
            let v = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
                .build()
                .map_err(|e| format!("{}: {e}", n.roots))?;
            builder.with_webpki_verifier(v)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly {
                    roots: (verified == Verified::Ca).then_some(store),
                    provider,
                }))
        };
        let config = match (&opts.cert, &opts.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = read_certs(cert, n.cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    if encrypted_pem(key) {
                        return format!(
                            "the client key file {k} ({}) is encrypted (a passphrase-protected key), which loadgen cannot read: decrypt it with `openssl pkey -in {k} -out KEY` and pass KEY",
                            n.key,
                            k = key.display(),
                        );
                    }
                    format!(
                        "cannot read the client key file {} ({}): {}",
                        key.display(),
                        n.key,
                        pem_cause(&e)
                    )
                })?;
                let mismatch = |e: rustls::Error| {
                    format!(
                        "the client certificate {} and key ({}, {}) do not go together: {e}",
                        cert.display(),
                        n.cert,
                        n.key
                    )
                };
                let signer = keys
                    .key_provider
                    .load_private_key(key)
                    .map_err(|e| format!("the client key ({}) cannot sign: {e}", n.key))?;
                let certified = CertifiedKey::new(chain, signer);
                // Only a key of another certificate is refused here. A certificate rustls
                // cannot parse (an X.509 v1 one, as `openssl x509 -req` makes) is only sent,
                // as libpq and the mysql client send it: the server judges it.
                match certified.keys_match() {
                    Err(e @ rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch)) => {
                        return Err(mismatch(e).into())
                    }
                    _ => builder
                        .with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified))),
                }
            }
            (Some(_), None) | (None, Some(_)) => {
                return Err(ConnectError(format!(
                    "a client certificate needs both {} and {}: give both or neither",
                    n.cert, n.key
                )))
            }
        };
        Ok(Some(TlsClient {
            mode: opts.mode,
            verified,
            config: Arc::new(config),
            roots,
            seen: Arc::default(),
        }))
    }

    /// The handshake over a connected stream, as `host` (the name the URL gave: the certificate
    /// must carry it under verify-full). Errors are one line that names the cause.
    pub async fn upgrade(&self, sock: Stream, host: &str) -> Result<Stream, LookupError> {
        match self.handshake(sock, host).await {
            Ok(s) => Ok(Stream::Tls(Box::new(s))),
            Err(e) => Err(LookupError::new(ErrorKind::Connect, true, e)),
        }
    }

    /// `upgrade` over any byte stream (tokio-postgres's socket): the message is the one line.
    pub async fn handshake<IO>(&self, io: IO, host: &str) -> Result<TlsStream<IO>, ConnectError>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let name = server_name(host)?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let s = connector
            .connect(name, io)
            .await
            .map_err(|e| self.explain(host, &e))?;
        if self.seen.get().is_none() {
            if let Some(info) = negotiated(s.get_ref().1, self.verified) {
                let _ = self.seen.set(info);
            }
        }
        Ok(s)
    }

    /// What the run's TLS connections negotiated, for the report; None if none was TLS.
    pub fn negotiated(&self) -> Option<TlsInfo> {
        self.seen.get().cloned()
    }

    /// Why a handshake with `host` failed, in one line.
    pub fn explain(&self, host: &str, e: &std::io::Error) -> String {
        use rustls::Error as E;
        let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<E>()) else {
            return match e.kind() {
                std::io::ErrorKind::UnexpectedEof => format!(
                    "{host} closed the connection during the TLS handshake (does the server speak TLS on this port?)"
                ),
                _ => format!("TLS handshake with {host} failed: {e}"),
            };
        };
        match tls {
            E::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected,
                presented,
            }) => format!(
                "the server's certificate does not match the host name {}: it is for {} (connect by one of those names)",
                expected.to_str(),
                cert_names(presented)
            ),
            E::InvalidCertificate(CertificateError::NotValidForName) => format!(
                "the server's certificate does not match the host name {host}"
            ),
            E::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
                "the server's certificate has an unknown issuer: it is not signed by {} (is that the CA of {host}? pass the CA that signed the server's certificate)",
                self.roots
            ),
            E::InvalidCertificate(c) => {
                format!("the server's certificate for {host} is not valid: {c:?}")
            }
            E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::InappropriateHandshakeMessage { .. } => {
                format!("{host} does not speak TLS on this port (its reply is not a TLS handshake)")
            }
            E::AlertReceived(alert) => refused_by(host, *alert),
            other => format!("TLS handshake with {host} failed: {other}"),
        }
    }
}

/// A TLS alert the server sent after the handshake (TLS 1.3 judges the client's certificate
/// then), found anywhere in `e`'s chain, in one line; None when `e` holds none.
pub fn alert_line(e: &(dyn std::error::Error + 'static), host: &str) -> Option<String> {
    let mut at = Some(e);
    while let Some(x) = at {
        // io::Error's source() skips the error it wraps: look inside it too.
        let inner = x
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref());
        for y in [
            Some(x),
            inner.map(|i| i as &(dyn std::error::Error + 'static)),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(rustls::Error::AlertReceived(alert)) = y.downcast_ref::<rustls::Error>() {
                return Some(refused_by(host, *alert));
            }
        }
        at = x.source();
    }
    None
}

/// The server's TLS alert, said as what it means for this client's certificate.
fn refused_by(host: &str, alert: rustls::AlertDescription) -> String {
    use rustls::AlertDescription as A;
    match alert {
        A::CertificateRequired => format!(
            "{host} needs a client certificate (TLS alert {alert:?}): pass one and its key (sslcert/sslkey, ssl-cert/ssl-key, cert/key)"
        ),
        A::UnknownCA => format!(
            "{host} refused the client certificate: it is not signed by a CA the server trusts (TLS alert {alert:?}): use one signed by the server's client CA"
        ),
        A::BadCertificate | A::UnsupportedCertificate | A::CertificateExpired | A::CertificateRevoked | A::CertificateUnknown => format!(
            "{host} refused the client certificate (TLS alert {alert:?}): check that it is current and made for client authentication"
        ),
        _ => format!("{host} refused the TLS handshake (TLS alert {alert:?}; does it need a client certificate?)"),
    }
}

/// The URL options of TLS from the first byte (`rediss://`, `https://`), named as redis-cli's and
/// curl's flags: the CA file, and a client certificate and key.
pub const DIRECT_OPTIONS: &[&str] = &["cacert", "cert", "key"];

/// TLS from the first byte: certificate and host name verified against `?cacert=` or the
/// system's trusted CAs, as redis-cli and curl do.
pub fn direct(url: &crate::url::TargetUrl) -> Result<TlsClient, ConnectError> {
    let path = |k: &str| url.param(k).map(PathBuf::from);
    let opts = TlsOptions {
        mode: TlsMode::VerifyFull,
        roots: path("cacert").map_or(Roots::System, Roots::File),
        cert: path("cert"),
        key: path("key"),
        names: OptionNames {
            mode: "the scheme",
            roots: "cacert",
            cert: "cert",
            key: "key",
        },
    };
    TlsClient::new(&opts)
        .map_err(|e| format!("{}: {e}", url.redacted()))?
        .ok_or_else(|| "TLS is on for this scheme".into())
}

/// The version and cipher suite of a finished handshake.
fn negotiated(c: &rustls::ClientConnection, verified: Verified) -> Option<TlsInfo> {
    let version = match c.protocol_version()? {
        rustls::ProtocolVersion::TLSv1_3 => "TLS 1.3".to_string(),
        rustls::ProtocolVersion::TLSv1_2 => "TLS 1.2".to_string(),
        v => format!("{v:?}"),
    };
    let cipher = c.negotiated_cipher_suite()?.suite();
    let cipher = cipher
        .as_str()
        .map(str::to_string)
        .unwrap_or(format!("{cipher:?}"));
    Some(TlsInfo {
        version,
        cipher,
        verified,
    })
}

/// The certificate's names as rustls gives them (`DnsName("localhost")`, `IpAddress(::1)`),
/// without the wrapping.
fn cert_names(presented: &[String]) -> String {
    let bare = presented.iter().map(|n| {
        let inner = n.find('(').map_or(n.as_str(), |i| &n[i + 1..]);
        let inner = inner.trim_end_matches(')').trim_matches('"');
        // An address as people write it (rustls shows ::1 as 0::1).
        inner
            .parse::<std::net::IpAddr>()
            .map_or(inner.to_string(), |ip| ip.to_string())
    });
    let all: Vec<String> = bare.collect();
    if all.is_empty() {
        "no name at all".to_string()
    } else {
        all.join(", ")
    }
}

fn mode_name(opts: &TlsOptions) -> &'static str {
    match (opts.names.mode, opts.mode) {
        ("ssl-mode", TlsMode::VerifyCa) => "VERIFY_CA",
        ("ssl-mode", _) => "VERIFY_IDENTITY",
        (_, TlsMode::VerifyCa) => "verify-ca",
        _ => "verify-full",
    }
}

/// An IP address or a DNS name, as the URL wrote it (IPv6 without brackets).
fn server_name(host: &str) -> Result<ServerName<'static>, ConnectError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string()).map_err(|_| {
        format!("'{host}' is not a host name TLS can check a certificate against").into()
    })
}

fn read_roots(path: &Path, option: &str) -> Result<RootCertStore, ConnectError> {
    let mut store = RootCertStore::empty();
    for cert in read_certs(path, option)? {
        store.add(cert).map_err(|e| {
            format!(
                "the CA file {} ({option}) holds a certificate that is not a CA: {e}",
                path.display()
            )
        })?;
    }
    Ok(store)
}

/// The certificates in a PEM file. Messages name the file, never what is in it.
fn read_certs(path: &Path, option: &str) -> Result<Vec<CertificateDer<'static>>, ConnectError> {
    let shown = path.display();
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {shown} ({option}): {}", pem_cause(&e)))?
        .collect();
    let certs = certs.map_err(|e| format!("cannot read {shown} ({option}): {}", pem_cause(&e)))?;
    if certs.is_empty() {
        return Err(ConnectError(format!(
            "{shown} ({option}) holds no certificate: name a PEM file with -----BEGIN CERTIFICATE-----"
        )));
    }
    Ok(certs)
}

/// A PEM reading error without the bytes it choked on.
/// Whether `path` holds a passphrase-protected key: PKCS#8 `ENCRYPTED PRIVATE KEY`, or a
/// traditional PEM key with a `Proc-Type: 4,ENCRYPTED` header.
fn encrypted_pem(path: &std::path::Path) -> bool {
    std::fs::read(path).is_ok_and(|b| {
        let has = |w: &[u8]| b.windows(w.len()).any(|x| x == w);
        has(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || has(b"Proc-Type: 4,ENCRYPTED")
    })
}

fn pem_cause(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as P;
    match e {
        P::Io(io) => io.to_string(),
        P::NoItemsFound => "no PEM item of the right kind in it".to_string(),
        _ => "it is not a valid PEM file".to_string(),
    }
}

fn system_roots() -> Result<RootCertStore, ConnectError> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "no trusted CA certificates found on this system (install ca-certificates, or name a CA file)"
                .into(),
        );
    }
    Ok(store)
}

/// The verifier for the modes that skip the host name: the chain against `roots` (verify-ca,
/// or a CA file under require), or nothing (require without a CA). The handshake signatures are
/// always checked, by the provider's algorithms.
#[derive(Debug)]
struct ChainOnly {
    roots: Option<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests;
