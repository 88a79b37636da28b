//! The listeners of REST and gRPC: plain TCP, or TLS (rustls) with a certificate read again
//! when its files change, so a renewed certificate is served without a restart. With a client
//! CA, a client may prove who it is with a certificate that CA signed (its subject's CN the
//! user, its O entries the groups, as Kubernetes reads them); a client without one still
//! connects and may send a bearer token.
//!
//! Handshakes run in their own tasks: a slow or silent client holds up nobody else's accept.

use emco_core::poison::{read, write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use emco_core::Error;
use emco_core::x509::CertSubject;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;

/// How often the certificate files are checked for a change.
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// The longest a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections accepted and not yet taken by the server.
const BACKLOG: usize = 128;

/// The TLS files of a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, PEM, the server's own first.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates (PEM) whose client certificates authenticate; `None`: no client
    /// certificates asked for.
    pub client_ca: Option<PathBuf>,
}

/// Who is at the other end of a connection: its address, and the subject of the client
/// certificate it proved, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The remote address.
    pub addr: SocketAddr,
    /// The verified client certificate's subject.
    pub client: Option<Arc<CertSubject>>,
}

fn tls_error(what: &str, path: &Path) -> impl FnOnce(String) -> Error {
    let message = format!("{what} {}", path.display());
    move |e| Error::invalid(format!("{message}: {e}"))
}

/// The certificate and key of `files`, checked to belong together.
fn load_key(
    files: &TlsFiles,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<CertifiedKey>, Error> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(Iterator::collect)
        .map_err(|e| tls_error("cannot read the TLS certificate", &files.cert)(e.to_string()))?;
    if chain.is_empty() {
        return Err(tls_error("no certificate in", &files.cert)(
            "expected PEM CERTIFICATE blocks".to_owned(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| tls_error("cannot read the TLS key", &files.key)(e.to_string()))?;
    let certified = CertifiedKey::from_der(chain, key, provider)
        .map_err(|e| tls_error("the TLS key does not fit", &files.cert)(e.to_string()))?;
    Ok(Arc::new(certified))
}

pub(crate) fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The certificate served: the last one read whole from the files.
#[derive(Debug)]
struct Reloading {
    files: TlsFiles,
    provider: Arc<rustls::crypto::CryptoProvider>,
    current: RwLock<(Arc<CertifiedKey>, Option<SystemTime>, Option<SystemTime>)>,
}

impl Reloading {
    /// Reads the files again when either changed; a pair that does not load (half written,
    /// mismatched) is logged once per change of the files and the served certificate kept.
    fn check(&self) {
        // Taken before the read: a file that changes while it is read is read again next time.
        let stamps = (modified(&self.files.cert), modified(&self.files.key));
        let unchanged = {
            let current = read(&self.current);
            (current.1, current.2) == stamps
        };
        if unchanged {
            return;
        }
        // Read without the lock, which every handshake takes.
        let loaded = load_key(&self.files, &self.provider);
        let mut current = write(&self.current);
        (current.1, current.2) = stamps;
        match loaded {
            Ok(key) => {
                current.0 = key;
                tracing::info!(cert = %self.files.cert.display(), "serving the TLS certificate read again");
            }
            Err(e) => tracing::warn!(error = %e, "keeping the TLS certificate served"),
        }
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = read(&self.current);
        Some(Arc::clone(&current.0))
    }
}

/// Checks that `files` make a TLS configuration (what the server's start would refuse).
///
/// # Errors
/// InvalidArgument when a file cannot be read or the key does not fit the certificate.
pub fn check(files: &TlsFiles) -> Result<(), Error> {
    server_config(files, &[]).map(|_| ())
}

/// A TLS acceptor for `files` offering `alpn`, and the task that reloads its certificate
/// every [`RELOAD_EVERY`] until `cancel`.
///
/// # Errors
/// As [`check`].
pub fn acceptor(
    files: &TlsFiles,
    alpn: &[&[u8]],
    cancel: &CancellationToken,
) -> Result<tokio_rustls::TlsAcceptor, Error> {
    let (config, reloading) = server_config(files, alpn)?;
    recheck_every(cancel, move || reloading.check());
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Runs `check` every [`RELOAD_EVERY`] until `cancel`: how the files a server was started
/// with (its certificate, its auth config) are read again without a restart.
pub(crate) fn recheck_every(cancel: &CancellationToken, check: impl Fn() + Send + 'static) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RELOAD_EVERY);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                _ = tick.tick() => check(),
            }
        }
    });
}

fn server_config(
    files: &TlsFiles,
    alpn: &[&[u8]],
) -> Result<(rustls::ServerConfig, Arc<Reloading>), Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = load_key(files, &provider)?;
    let reloading = Arc::new(Reloading {
        files: files.clone(),
        provider: Arc::clone(&provider),
        current: RwLock::new((key, modified(&files.cert), modified(&files.key))),
    });
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal(format!("TLS protocol versions: {e}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path)
                .map_err(|e| tls_error("cannot read the client CA", path)(e.to_string()))?
            {
                let cert =
                    cert.map_err(|e| tls_error("cannot read the client CA", path)(e.to_string()))?;
                roots.add(cert).map_err(|e| {
                    tls_error("a bad client CA certificate in", path)(e.to_string())
                })?;
            }
            if roots.is_empty() {
                return Err(tls_error("no certificate in", path)(
                    "expected PEM CERTIFICATE blocks of the client CA".to_owned(),
                ));
            }
            // Optional: token clients send no certificate; one sent must chain to the CA.
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| tls_error("the client CA cannot be used", path)(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config =
        builder.with_cert_resolver(Arc::clone(&reloading) as Arc<dyn ResolvesServerCert>);
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok((config, reloading))
}

/// A connection: plain or TLS.
pub type Conn = Either<TcpStream, tokio_rustls::server::TlsStream<TcpStream>>;

/// The connections of a listener, TLS handshakes done, with who is at the other end.
#[derive(Debug)]
pub struct Incoming {
    local: SocketAddr,
    rx: mpsc::Receiver<(Conn, Peer)>,
}

impl Incoming {
    /// Accepts on `listener` until `cancel`, with TLS when `tls` is given.
    #[must_use]
    pub fn new(
        listener: TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
        cancel: &CancellationToken,
    ) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, rx) = mpsc::channel(BACKLOG);
        let cancel = cancel.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = cancel.cancelled() => return,
                    a = listener.accept() => a,
                };
                let (tcp, addr) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors, mostly: wait rather than spin.
                        tracing::warn!(error = %e, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let Some(acceptor) = tls.clone() else {
                    if tx
                        .send((Either::Left(tcp), Peer { addr, client: None }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    continue;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            // The verifier accepted the chain; its subject says who it is.
                            let client = tls
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(|certs| certs.first())
                                .and_then(|c| emco_core::x509::cert_subject(c))
                                .map(Arc::new);
                            let _ = tx.send((Either::Right(tls), Peer { addr, client })).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                });
            }
        });
        Self { local, rx }
    }

    /// The next connection; `None` once the listener stopped.
    pub async fn next(&mut self) -> Option<(Conn, Peer)> {
        self.rx.recv().await
    }
}

impl axum::serve::Listener for Incoming {
    type Io = Conn;
    type Addr = Peer;

    async fn accept(&mut self) -> (Conn, Peer) {
        match self.rx.recv().await {
            Some(c) => c,
            // Stopped: the server's graceful shutdown ends the accept loop before this.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Peer> {
        Ok(Peer {
            addr: self.local,
            client: None,
        })
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Incoming>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, Incoming>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A connection handed to tonic, which puts its [`Peer`] in every request's extensions.
#[derive(Debug)]
pub struct GrpcConn(pub Conn, pub Peer);

impl tonic::transport::server::Connected for GrpcConn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.1.clone()
    }
}

impl tokio::io::AsyncRead for GrpcConn {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for GrpcConn {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The connections of `incoming` as the stream tonic serves.
pub fn grpc_stream(
    incoming: Incoming,
) -> impl futures::Stream<Item = Result<GrpcConn, std::io::Error>> + Send + 'static {
    futures::stream::unfold(incoming, |mut incoming| async move {
        let (conn, peer) = incoming.next().await?;
        Some((Ok(GrpcConn(conn, peer)), incoming))
    })
}
