//! REST and gRPC over TLS: the server's certificate, read again when its files change (no
//! restart); client certificates of the configured CA as a way in (CN the user, O the groups
//! the auth config's bindings give roles), refused when another CA signed them; bearer tokens
//! over TLS as before.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use emco_service::Config;
use emco_service::tls::TlsFiles;
use emco_store::AppContextStore;
use emco_testkit::free_addr;
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

const ADMIN: &str = "admin-token-0123456789";

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `cn` (and organizations `o`), valid for 127.0.0.1: (cert PEM, key).
    fn sign(&self, cn: &str, o: &[&str]) -> (String, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in o {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        (params.signed_by(&key, &self.issuer).unwrap().pem(), key)
    }
}

fn der(pem: &str) -> CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject as _;
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

/// A client that trusts `ca` and shows `identity` if given.
fn client(
    ca: &Ca,
    identity: Option<&(String, KeyPair)>,
    alpn: &[u8],
) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(&ca.pem)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![der(cert)],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    // Each connection a full handshake: a resumed one shows the certificate of the first.
    config.resumption = rustls::client::Resumption::disabled();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn tls_connect(
    addr: SocketAddr,
    connector: &tokio_rustls::TlsConnector,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    connector
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
}

/// One HTTPS GET: the status and the CN of the certificate the server showed.
async fn get(
    addr: SocketAddr,
    connector: &tokio_rustls::TlsConnector,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let tls = tls_connect(addr, connector).await?;
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let cn = emco_core::x509::cert_subject(&served).unwrap().user;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let mut req = http::Request::get(path).header(http::header::HOST, "127.0.0.1");
    if let Some(t) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = sender
        .send_request(
            req.body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap(),
        )
        .await
        .map_err(std::io::Error::other)?;
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    Ok((status, cn))
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn rest_and_grpc_over_tls_with_client_certificates_and_a_reloaded_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("emco-test-ca");
    let (server_cert, server_key) = ca.sign("emco-server-1", &[]);
    let cert = write(dir.path(), "tls.crt", &server_cert);
    let key = write(dir.path(), "tls.key", &server_key.serialize_pem());
    let client_ca = write(dir.path(), "clients.crt", &ca.pem);
    let auth = write(
        dir.path(),
        "auth.yaml",
        &format!(
            "tokens:\n  - {{token: {ADMIN}, subject: admin, roles: [platform-admin]}}\n\
             bindings:\n  - {{group: ops, roles: [cluster-admin]}}\n  - {{subject: robot, roles: [platform-admin]}}\n"
        ),
    );
    let (rest, grpc) = (free_addr(), free_addr());
    let config = Config::from_args([
        "emco-server",
        "--backend",
        "memory",
        "--listen",
        &rest.to_string(),
        "--grpc-listen",
        &grpc.to_string(),
        "--auth-config",
        auth.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tls-client-ca",
        client_ca.to_str().unwrap(),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        config.tls,
        Some(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: Some(client_ca.clone()),
        })
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(emco_service::serve(config, async {
        let _ = stopped.await;
    }));
    let anonymous = client(&ca, None, b"http/1.1");
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(rest, &anonymous, "/healthz", None).await.is_err() {
        assert!(Instant::now() < deadline, "emco-server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Tokens over TLS; none: 401.
    assert_eq!(
        get(rest, &anonymous, "/v2/projects", None).await.unwrap().0,
        401
    );
    let (status, cn) = get(rest, &anonymous, "/v2/projects", Some(ADMIN))
        .await
        .unwrap();
    assert_eq!((status, cn.as_str()), (200, "emco-server-1"));
    // A certificate of the CA: carol of group ops is a cluster admin.
    let carol = ca.sign("carol", &["ops"]);
    let as_carol = client(&ca, Some(&carol), b"http/1.1");
    assert_eq!(
        get(rest, &as_carol, "/v2/cluster-providers", None)
            .await
            .unwrap()
            .0,
        200
    );
    assert_eq!(
        get(rest, &as_carol, "/v2/projects/p1", None)
            .await
            .unwrap()
            .0,
        403
    );
    // Another CA's certificate does not get through the handshake.
    let rogue_ca = Ca::new("rogue");
    let mallory = rogue_ca.sign("mallory", &["ops"]);
    let as_mallory = client(&ca, Some(&mallory), b"http/1.1");
    assert!(
        get(rest, &as_mallory, "/v2/cluster-providers", None)
            .await
            .is_err()
    );
    // Plain HTTP on the TLS port gets no answer.
    assert!(
        emco_test_plain_get(rest).await.is_none(),
        "a plain request was answered on the TLS port"
    );

    // gRPC over TLS: the robot's certificate makes it a platform admin.
    let robot = ca.sign("robot", &[]);
    for (who, allowed) in [(Some(&robot), true), (Some(&carol), false), (None, false)] {
        let connector = client(&ca, who, b"h2");
        let channel = tonic::transport::Endpoint::from_static("http://emco")
            .connect_with_connector(tower::service_fn(move |_: http::Uri| {
                let connector = connector.clone();
                async move { tls_connect(grpc, &connector).await.map(TokioIo::new) }
            }))
            .await
            .unwrap();
        let store = emco_controller_sdk::remote::RemoteAppContextStore::from_channel(channel);
        let answer = store.get("/context/1/").await;
        assert_eq!(answer.is_ok(), allowed, "{answer:?}");
    }

    // The SDK's client over https, with the robot's certificate.
    let sdk = emco_controller_sdk::remote::RemoteAppContextStore::connect_lazy_with(
        &format!("https://{grpc}"),
        emco_controller_sdk::remote::BearerToken::none(),
        &emco_controller_sdk::remote::ClientTls {
            ca_pem: Some(ca.pem.clone().into_bytes()),
            identity: Some((
                robot.0.clone().into_bytes(),
                robot.1.serialize_pem().into_bytes(),
            )),
        },
    )
    .unwrap();
    assert!(sdk.get("/context/1/").await.unwrap().is_none());

    // A renewed certificate written over the files is served without a restart.
    let (renewed, renewed_key) = ca.sign("emco-server-2", &[]);
    // The key first: a half-renewed pair (new key, old certificate) is not served.
    write(dir.path(), "tls.key", &renewed_key.serialize_pem());
    write(dir.path(), "tls.crt", &renewed);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, cn) = get(rest, &anonymous, "/healthz", None).await.unwrap();
        if cn == "emco-server-2" {
            break;
        }
        assert_eq!(cn, "emco-server-1");
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was not served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// A plain HTTP/1.1 GET of `/healthz`; `None` when no HTTP answer comes.
async fn emco_test_plain_get(addr: SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    (read.is_ok() && text.starts_with("HTTP/")).then_some(text)
}

#[test]
fn bad_tls_files_refuse_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("c");
    let (cert, key) = ca.sign("s", &[]);
    let (_, other_key) = ca.sign("t", &[]);
    let cert = write(dir.path(), "tls.crt", &cert);
    let key = write(dir.path(), "tls.key", &key.serialize_pem());
    let wrong_key = write(dir.path(), "wrong.key", &other_key.serialize_pem());
    let missing = dir.path().join("missing.pem");
    let garbage = write(dir.path(), "garbage.pem", "not a certificate");
    let args = |extra: &[&Path]| {
        let mut a = vec!["emco-server".to_owned()];
        for (flag, path) in ["--tls-cert", "--tls-key", "--tls-client-ca"]
            .iter()
            .zip(extra)
        {
            a.push((*flag).to_owned());
            a.push(path.display().to_string());
        }
        a
    };
    for (files, says) in [
        (vec![cert.as_path(), wrong_key.as_path()], "does not fit"),
        (
            vec![missing.as_path(), wrong_key.as_path()],
            "cannot read the TLS certificate",
        ),
        (
            vec![garbage.as_path(), wrong_key.as_path()],
            "no certificate in",
        ),
        (
            vec![cert.as_path(), key.as_path(), missing.as_path()],
            "cannot read the client CA",
        ),
        (
            vec![cert.as_path(), key.as_path(), garbage.as_path()],
            "no certificate in",
        ),
    ] {
        let e = Config::from_args(args(&files)).unwrap_err();
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    let e = Config::from_args(["emco-server", "--tls-cert", "x"]).unwrap_err();
    assert!(e.to_string().contains("--tls-key"), "{e}");
}
