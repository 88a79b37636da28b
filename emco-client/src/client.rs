//! A small HTTP/1.1 client for the EMCO REST API: JSON, empty and multipart bodies (files streamed
//! from disk), an optional bearer token, `http://` or `https://` (rustls), one connection per
//! request; or, for an orchestrator embedded in the same process, its router called directly
//! ([`Client::local`]), with the same requests and answers and no socket.

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::{CtlError, Result};

/// The largest chunk of an uploaded file held in memory at once.
pub const UPLOAD_CHUNK: usize = 64 * 1024;

/// A request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No body.
    Empty,
    /// A JSON document.
    Json(Vec<u8>),
    /// A multipart form: the `metadata` field, then one part per file, streamed from disk.
    Multipart {
        /// The `metadata` field (JSON text).
        metadata: Vec<u8>,
        /// The file parts.
        files: Vec<FilePart>,
    },
}

/// One file of a multipart form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePart {
    /// The form field (`file` or `files`).
    pub field: String,
    /// The file name sent in the part's header.
    pub name: String,
    /// The file read when the request is sent.
    pub path: PathBuf,
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
    /// The error kind of an error answer from emco-rs (its [`ERROR_KIND_HEADER`]); `None` from
    /// servers that do not send one (EMCO).
    pub error_kind: Option<String>,
}

/// The header naming the error kind (`NotFound`, `AlreadyExists`, `Conflict`, ...) of an emco-rs
/// error answer, which EMCO's status codes alone do not tell apart.
pub const ERROR_KIND_HEADER: &str = "x-emco-error-kind";

/// The body of a request as sent: JSON bytes, or a multipart form streamed from disk.
pub type RequestBody = BoxBody<Bytes, std::io::Error>;

/// A server in this process: takes a request and answers it, without a socket (an embedded
/// orchestrator's router). Errors are the server's failures to answer at all.
pub type LocalServer = Arc<
    dyn Fn(
            Request<RequestBody>,
        ) -> Pin<Box<dyn Future<Output = std::result::Result<Response, String>> + Send>>
        + Send
        + Sync,
>;

/// Where requests go.
#[derive(Clone)]
enum Target {
    /// A server over TCP, with TLS for `https`.
    Remote {
        host: String,
        port: u16,
        tls: Option<Arc<rustls::ClientConfig>>,
    },
    /// A server in this process.
    Local(LocalServer),
}

impl Response {
    /// Whether the status is 2xx.
    #[must_use]
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// How `https://` servers are verified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// A PEM file of CA certificates to trust instead of the system's (`--ca-cert`).
    pub ca_cert: Option<PathBuf>,
    /// Accept any server certificate (`--insecure`); the connection is still encrypted.
    pub insecure: bool,
}

/// The server to talk to.
#[derive(Clone)]
pub struct Client {
    target: Target,
    base: String,
    token: Option<String>,
}

// Written out so that the token never lands in a debug print.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url(""))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

type ReqBody = RequestBody;

impl Client {
    /// A client of `server`, a server in this process.
    #[must_use]
    pub fn local(server: LocalServer) -> Self {
        Self {
            target: Target::Local(server),
            base: String::new(),
            token: None,
        }
    }

    /// A client for `server` (`http[s]://host[:port][/prefix]`) sending `token` as bearer token;
    /// `https` servers are verified against the system's CA certificates.
    ///
    /// # Errors
    /// A usage error for an address that is not an `http` or `https` URL.
    pub fn new(server: &str, token: Option<String>) -> Result<Self> {
        Self::with_tls(server, token, &TlsOptions::default())
    }

    /// A client for `server` with the TLS options `tls` (used only for `https` addresses).
    ///
    /// # Errors
    /// A usage error for a bad address, an input error for an unreadable or empty CA file.
    pub fn with_tls(server: &str, token: Option<String>, tls: &TlsOptions) -> Result<Self> {
        let bad = |why: &str| CtlError::Usage(format!("bad server address {server:?}: {why}"));
        let (rest, default_port, secure) = if let Some(r) = server.strip_prefix("http://") {
            (r, 80, false)
        } else if let Some(r) = server.strip_prefix("https://") {
            (r, 443, true)
        } else {
            return Err(bad("want http:// or https://"));
        };
        let (authority, base) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let port_of = |p: &str| p.parse::<u16>().map_err(|_| bad("bad port"));
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, rest) = v6.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            match rest.strip_prefix(':') {
                Some(p) => (h, port_of(p)?),
                None if rest.is_empty() => (h, default_port),
                None => return Err(bad("bad port")),
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, port_of(p)?),
                None => (authority, default_port),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let tls = if secure {
            Some(Arc::new(tls_config(tls)?))
        } else {
            None
        };
        Ok(Self {
            target: Target::Remote {
                host: host.to_owned(),
                port,
                tls,
            },
            base: base.to_owned(),
            token,
        })
    }

    /// The full URL of `path` (which starts with `/`).
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        let Target::Remote { host, port, tls } = &self.target else {
            return format!("embedded:{path}");
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{host}:{port}{}{path}", self.base)
    }

    /// Sends one request. Uploaded files are read while the request is sent, a chunk at a time.
    ///
    /// # Errors
    /// A request error when the server cannot be reached, the TLS handshake fails, an uploaded
    /// file cannot be read or the exchange fails.
    pub async fn send(&self, method: Method, path: &str, body: Body) -> Result<Response> {
        let url = self.url(path);
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            CtlError::Request(format!("{method} {url}: {what}: {e}"))
        };
        let mut req = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base));
        if let Target::Remote { host, port, .. } = &self.target {
            req = req.header(header::HOST, format!("{host}:{port}"));
        }
        if let Some(token) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let (len, body): (u64, ReqBody) = match body {
            Body::Empty => (0, full(Vec::new())),
            Body::Json(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                (b.len() as u64, full(b))
            }
            Body::Multipart { metadata, files } => {
                let boundary = format!("emcoctl-{:032x}", rand::random::<u128>());
                req = req.header(
                    header::CONTENT_TYPE,
                    format!("multipart/form-data; boundary={boundary}"),
                );
                let body = MultipartBody::open(&boundary, &metadata, &files)
                    .map_err(|e| failed("cannot read an upload", &e))?;
                (body.remaining, body.boxed())
            }
        };
        let req = req
            .header(header::CONTENT_LENGTH, len)
            .body(body)
            .map_err(|e| failed("bad request", &e))?;
        let (host, port, tls) = match &self.target {
            Target::Local(server) => {
                return server(req).await.map_err(|e| failed("no answer", &e));
            }
            Target::Remote { host, port, tls } => (host, *port, tls),
        };
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| failed("cannot connect", &e))?;
        let _ = tcp.set_nodelay(true);
        match tls {
            None => exchange(tcp, req).await,
            Some(config) => {
                let name = ServerName::try_from(host.clone())
                    .map_err(|e| failed("bad TLS server name", &e))?;
                let stream = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| failed("TLS handshake", &e))?;
                exchange(stream, req).await
            }
        }
        .map_err(|(what, e)| failed(what, &e))
    }
}

fn full(bytes: Vec<u8>) -> ReqBody {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed()
}

/// One request and its answer over `io`.
async fn exchange<IO>(
    io: IO,
    req: Request<ReqBody>,
) -> std::result::Result<Response, (&'static str, hyper::Error)>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| ("handshake", e))?;
    let driver = tokio::spawn(conn);
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| ("no answer", e))?;
    let status = resp.status().as_u16();
    let error_kind = error_kind(resp.headers());
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| ("reading the answer", e))?
        .to_bytes()
        .to_vec();
    driver.abort();
    Ok(Response {
        status,
        body,
        error_kind,
    })
}

/// The [`ERROR_KIND_HEADER`] of an answer.
#[must_use]
pub fn error_kind(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(ERROR_KIND_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The rustls configuration for `opts`, with the ring provider named explicitly so that the
/// choice does not depend on which providers other crates enable.
fn tls_config(opts: &TlsOptions) -> Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| CtlError::Usage(format!("TLS: {e}")))?;
    if opts.insecure {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
            .with_no_client_auth());
    }
    let mut roots = rustls::RootCertStore::empty();
    match &opts.ca_cert {
        Some(path) => {
            let bad = |m: String| CtlError::input(path, None, None, m);
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect::<std::result::Result<Vec<_>, _>>)
                .map_err(|e| bad(format!("cannot read CA certificates: {e}")))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(bad("no CA certificate in the file".to_owned()));
            }
        }
        None => {
            // Unreadable system certificates are skipped; an empty store fails the handshake
            // with "unknown issuer", which names the problem.
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// `--insecure`: accepts every certificate but still checks the handshake signatures.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A piece of a multipart body: bytes in memory, or a file read as the body is sent.
#[derive(Debug)]
enum Segment {
    Bytes(Bytes),
    File {
        file: tokio::fs::File,
        path: PathBuf,
        remaining: u64,
    },
}

/// A `multipart/form-data` body whose files are read from disk a chunk at a time while hyper
/// writes the request, so that uploads of any size use [`UPLOAD_CHUNK`] bytes of memory.
#[derive(Debug)]
pub struct MultipartBody {
    segments: VecDeque<Segment>,
    remaining: u64,
}

impl MultipartBody {
    /// Opens the files of the form (their sizes fix the Content-Length).
    ///
    /// # Errors
    /// When a file cannot be opened or its size read.
    pub fn open(boundary: &str, metadata: &[u8], files: &[FilePart]) -> std::io::Result<Self> {
        let mut segments = VecDeque::new();
        let mut head = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n"
        )
        .into_bytes();
        head.extend_from_slice(metadata);
        segments.push_back(Segment::Bytes(Bytes::from(head)));
        for part in files {
            let name = part.name.replace(['"', '\r', '\n'], "_");
            let field = part.field.replace(['"', '\r', '\n'], "_");
            segments.push_back(Segment::Bytes(Bytes::from(format!(
                "\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            ))));
            let file = std::fs::File::open(&part.path).map_err(|e| named(&part.path, e))?;
            let size = file.metadata().map_err(|e| named(&part.path, e))?.len();
            segments.push_back(Segment::File {
                file: tokio::fs::File::from_std(file),
                path: part.path.clone(),
                remaining: size,
            });
        }
        segments.push_back(Segment::Bytes(Bytes::from(format!(
            "\r\n--{boundary}--\r\n"
        ))));
        let remaining = segments
            .iter()
            .map(|s| match s {
                Segment::Bytes(b) => b.len() as u64,
                Segment::File { remaining, .. } => *remaining,
            })
            .sum();
        Ok(Self {
            segments,
            remaining,
        })
    }

    /// The bytes still to send.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.remaining
    }

    /// Whether everything was sent.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

fn named(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

impl hyper::body::Body for MultipartBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        loop {
            let data = match this.segments.front_mut() {
                None => return Poll::Ready(None),
                Some(Segment::Bytes(b)) => {
                    let b = std::mem::take(b);
                    this.segments.pop_front();
                    b
                }
                Some(Segment::File { remaining: 0, .. }) => {
                    this.segments.pop_front();
                    continue;
                }
                Some(Segment::File {
                    file,
                    path,
                    remaining,
                }) => {
                    let want =
                        usize::try_from(*remaining).map_or(UPLOAD_CHUNK, |r| r.min(UPLOAD_CHUNK));
                    let mut buf = vec![0; want];
                    let mut read = ReadBuf::new(&mut buf);
                    match Pin::new(file).poll_read(cx, &mut read) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(named(path, e)))),
                        Poll::Ready(Ok(())) => {}
                    }
                    let n = read.filled().len();
                    if n == 0 {
                        // The Content-Length is already sent: a shrunk file cannot be completed.
                        return Poll::Ready(Some(Err(named(
                            path,
                            std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                "the file shrank while it was uploaded",
                            ),
                        ))));
                    }
                    *remaining -= n as u64;
                    buf.truncate(n);
                    Bytes::from(buf)
                }
            };
            this.remaining -= data.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// The file name part of `path`, for a multipart part.
#[must_use]
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn a_local_server_gets_the_request_as_sent_and_its_answer_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.tgz");
        std::fs::write(&path, b"CHART").unwrap();
        let server: LocalServer = Arc::new(|req: Request<RequestBody>| {
            Box::pin(async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
                let text = String::from_utf8_lossy(&body).into_owned();
                let kind = parts.headers[header::CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .to_owned();
                // No Host header: nothing was dialled.
                assert!(!parts.headers.contains_key(header::HOST));
                Ok(Response {
                    status: 409,
                    body: format!("{} {} {kind} {text}", parts.method, parts.uri).into_bytes(),
                    error_kind: Some("AlreadyExists".to_owned()),
                })
            })
        });
        let client = Client::local(server);
        assert_eq!(client.url("/v2/projects"), "embedded:/v2/projects");
        let got = client
            .send(
                Method::POST,
                "/v2/projects/p/apps",
                Body::Multipart {
                    metadata: b"{}".to_vec(),
                    files: vec![FilePart {
                        field: "file".into(),
                        name: "chart.tgz".into(),
                        path,
                    }],
                },
            )
            .await
            .unwrap();
        assert_eq!(got.status, 409);
        assert_eq!(got.error_kind.as_deref(), Some("AlreadyExists"));
        let text = String::from_utf8(got.body).unwrap();
        assert!(
            text.starts_with("POST /v2/projects/p/apps multipart/form-data; boundary="),
            "{text}"
        );
        assert!(
            text.contains("filename=\"chart.tgz\"") && text.contains("CHART"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn multipart_body_streams_files_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..(3 * UPLOAD_CHUNK + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        let path = dir.path().join("chart.tgz");
        std::fs::write(&path, &big).unwrap();
        let parts = [FilePart {
            field: "file".into(),
            name: "chart.tgz".into(),
            path: path.clone(),
        }];
        let mut body = MultipartBody::open("B", b"{}", &parts).unwrap();
        let total = body.len();
        let mut sent = Vec::new();
        let mut frames = 0;
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() <= UPLOAD_CHUNK, "a frame of {}", data.len());
            sent.extend_from_slice(&data);
            frames += 1;
        }
        assert!(frames >= 6, "{frames} frames");
        assert_eq!(sent.len() as u64, total);
        let mut want = b"--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n{}\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"chart.tgz\"\r\nContent-Type: application/octet-stream\r\n\r\n".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"\r\n--B--\r\n");
        assert_eq!(sent, want);
        assert!(
            MultipartBody::open(
                "B",
                b"{}",
                &[FilePart {
                    path: dir.path().join("missing"),
                    ..parts[0].clone()
                }]
            )
            .is_err()
        );
    }

    #[test]
    fn addresses() {
        let c = Client::new("https://emco.example:8443/api/", None).unwrap();
        assert_eq!(
            c.url("/v2/projects"),
            "https://emco.example:8443/api/v2/projects"
        );
        let c = Client::new("http://[::1]", None).unwrap();
        assert_eq!(c.url("/x"), "http://[::1]:80/x");
        assert!(Client::new("ftp://x", None).is_err());
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = Client::with_tls(
            "https://x",
            None,
            &TlsOptions {
                ca_cert: Some(empty),
                insecure: false,
            },
        )
        .unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_BAD_INPUT, "{err}");
    }
}
