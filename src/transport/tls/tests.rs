use super::*;
use crate::test_dir::TempDir;
use std::process::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAMES: OptionNames = OptionNames {
    mode: "sslmode",
    roots: "sslrootcert",
    cert: "sslcert",
    key: "sslkey",
};

fn openssl(dir: &Path, args: &str) {
    let ok = Command::new("openssl")
        .args(args.split(' '))
        .current_dir(dir)
        .output()
        .expect("openssl (Debian package openssl) runs");
    assert!(ok.status.success(), "openssl {args}: {:?}", ok);
}

/// A CA, a second CA that signed nothing, and a server certificate for localhost and
/// 127.0.0.1, made with the openssl command as scripts/servers.sh makes them. Each test makes
/// its own, in a directory removed when the test ends.
fn certs() -> TempDir {
    let dir = TempDir::new("loadgen-tls");
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    for ca in ["ca", "wrong"] {
        openssl(
            &dir,
            &format!("req -x509 {ec} -keyout {ca}.key -out {ca}.crt -days 2 -subj /CN={ca}"),
        );
    }
    openssl(
        &dir,
        &format!("req {ec} -keyout server.key -out server.csr -subj /CN=localhost"),
    );
    std::fs::write(
        dir.join("san"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(&dir, "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san");
    dir
}

/// A TLS echo server on loopback with the certificate above; its address.
async fn server(dir: &Path) -> std::net::SocketAddr {
    let chain = read_certs(&dir.join("server.crt"), "t").unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut s) = acceptor.accept(s).await {
                    let mut b = [0u8; 5];
                    if s.read_exact(&mut b).await.is_ok() {
                        let _ = s.write_all(&b).await;
                        let _ = s.flush().await;
                    }
                }
            });
        }
    });
    addr
}

fn opts(mode: TlsMode, roots: Roots) -> TlsOptions {
    TlsOptions {
        mode,
        roots,
        cert: None,
        key: None,
        names: NAMES,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Connects to `addr` as `host` and echoes five bytes: the negotiated info, or the message.
async fn dial(
    addr: std::net::SocketAddr,
    host: &str,
    o: TlsOptions,
) -> Result<TlsInfo, ConnectError> {
    let tls = TlsClient::new(&o)?.unwrap();
    let sock = Stream::tcp(tokio::net::TcpStream::connect(addr).await.unwrap());
    let mut s = tls.upgrade(sock, host).await.map_err(|e| e.message)?;
    s.write_all(b"hello").await.unwrap();
    let mut b = [0u8; 5];
    s.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"hello");
    Ok(tls.negotiated().unwrap())
}

#[test]
fn modes_parse_as_libpq_and_mysql_write_them() {
    assert_eq!(TlsMode::libpq("verify-full"), Some(TlsMode::VerifyFull));
    assert_eq!(TlsMode::libpq("VERIFY-FULL"), None);
    assert_eq!(TlsMode::mysql("verify_identity"), Some(TlsMode::VerifyFull));
    assert_eq!(TlsMode::mysql("PREFERRED"), Some(TlsMode::Prefer));
    assert!(TlsMode::Require.requires_tls() && !TlsMode::Prefer.requires_tls());
    assert!(TlsMode::Prefer.asks_first() && !TlsMode::Allow.asks_first());
}

#[test]
fn each_mode_checks_what_libpq_checks() {
    let dir = certs();
    let ca = Roots::File(dir.join("ca.crt"));
    let wrong = Roots::File(dir.join("wrong.crt"));
    rt().block_on(async {
        let addr = server(&dir).await;
        // require without a CA: encrypted, nothing checked, even the wrong name.
        let i = dial(addr, "127.0.0.2", opts(TlsMode::Require, Roots::Absent))
            .await
            .unwrap();
        assert_eq!(
            (i.version.as_str(), i.verified),
            ("TLS 1.3", Verified::None)
        );
        assert!(i.to_string().starts_with("TLS 1.3 TLS13_"), "{i}");
        // require with a CA file is verify-ca: the chain counts, the name does not.
        let i = dial(addr, "127.0.0.2", opts(TlsMode::Require, ca.clone()))
            .await
            .unwrap();
        assert_eq!(i.verified, Verified::Ca);
        let e = dial(addr, "127.0.0.2", opts(TlsMode::VerifyCa, wrong.clone()))
            .await
            .unwrap_err();
        assert!(
            e.contains("unknown issuer") && e.contains("wrong.crt"),
            "{e}"
        );
        // verify-full: chain and name.
        for host in ["localhost", "127.0.0.1"] {
            let i = dial(addr, host, opts(TlsMode::VerifyFull, ca.clone()))
                .await
                .unwrap();
            assert_eq!(i.verified, Verified::Full);
        }
        let e = dial(addr, "127.0.0.2", opts(TlsMode::VerifyFull, ca.clone()))
            .await
            .unwrap_err();
        assert!(
            e.contains("does not match the host name 127.0.0.2")
                && e.contains("localhost, 127.0.0.1"),
            "{e}"
        );
        let e = dial(addr, "localhost", opts(TlsMode::VerifyFull, wrong))
            .await
            .unwrap_err();
        assert!(e.contains("unknown issuer"), "{e}");
    });
}

#[test]
fn a_plain_server_is_named_as_not_speaking_tls() {
    rt().block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let _ = s.write_all(b"-ERR unknown command\r\n").await;
            let mut b = [0u8; 512];
            let _ = s.read(&mut b).await;
        });
        let e = dial(addr, "localhost", opts(TlsMode::Require, Roots::Absent))
            .await
            .unwrap_err();
        assert!(e.contains("does not speak TLS"), "{e}");
    });
}

#[test]
fn file_problems_name_the_file_and_never_its_contents() {
    let dir = certs();
    let e =
        TlsClient::new(&opts(TlsMode::VerifyCa, Roots::File(dir.join("nope.crt")))).unwrap_err();
    assert!(
        e.contains("nope.crt (sslrootcert)") && e.contains("No such file"),
        "{e}"
    );
    // A key given as the CA: no certificate in it, and not one byte of it in the message.
    let e = TlsClient::new(&opts(
        TlsMode::VerifyCa,
        Roots::File(dir.join("server.key")),
    ))
    .unwrap_err();
    assert!(e.contains("holds no certificate"), "{e}");
    let key = std::fs::read_to_string(dir.join("server.key")).unwrap();
    let body: String = key.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(!e.contains(&body[..20]));
    let e = TlsClient::new(&opts(TlsMode::VerifyFull, Roots::Absent)).unwrap_err();
    assert!(
        e.contains("sslmode=verify-full needs") && e.contains("sslrootcert=PATH"),
        "{e}"
    );
    let mut o = opts(TlsMode::Require, Roots::Absent);
    o.cert = Some(dir.join("server.crt"));
    let e = TlsClient::new(&o).unwrap_err();
    assert!(e.contains("needs both sslcert and sslkey"), "{e}");
    o.key = Some(dir.join("server.key"));
    assert!(TlsClient::new(&o).unwrap().is_some());
    assert!(TlsClient::new(&opts(TlsMode::Disable, Roots::Absent))
        .unwrap()
        .is_none());
}
