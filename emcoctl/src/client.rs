//! A small HTTP/1.1 client for the EMCO REST API: JSON, empty and multipart bodies, an optional
//! bearer token, one connection per request.

use std::path::Path;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::error::{CtlError, Result};

/// A request body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// No body.
    Empty,
    /// A JSON document.
    Json(Vec<u8>),
    /// A multipart form: the `metadata` field, then (field, file name, content) parts.
    Multipart {
        /// The `metadata` field (JSON text).
        metadata: Vec<u8>,
        /// The file parts.
        files: Vec<(String, String, Vec<u8>)>,
    },
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// Whether the status is 2xx.
    #[must_use]
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// The server to talk to.
#[derive(Clone)]
pub struct Client {
    host: String,
    port: u16,
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

impl Client {
    /// A client for `server` (`http://host[:port][/prefix]`) sending `token` as bearer token.
    ///
    /// # Errors
    /// A usage error for an address that is not an `http` URL (TLS is not supported).
    pub fn new(server: &str, token: Option<String>) -> Result<Self> {
        let bad = |why: &str| CtlError::Usage(format!("bad server address {server:?}: {why}"));
        let rest = server
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// addresses are supported"))?;
        let (authority, base) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let port_of = |p: &str| p.parse::<u16>().map_err(|_| bad("bad port"));
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, rest) = v6.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            match rest.strip_prefix(':') {
                Some(p) => (h, port_of(p)?),
                None if rest.is_empty() => (h, 80),
                None => return Err(bad("bad port")),
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, port_of(p)?),
                None => (authority, 80),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            base: base.to_owned(),
            token,
        })
    }

    /// The full URL of `path` (which starts with `/`).
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}{}{path}", self.port, self.base)
    }

    /// Sends one request.
    ///
    /// # Errors
    /// A request error when the server cannot be reached or the exchange fails.
    pub async fn send(&self, method: Method, path: &str, body: Body) -> Result<Response> {
        let url = self.url(path);
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            CtlError::Request(format!("{method} {url}: {what}: {e}"))
        };
        let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| failed("cannot connect", &e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| failed("handshake", &e))?;
        let driver = tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base))
            .header(header::HOST, format!("{}:{}", self.host, self.port));
        if let Some(token) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let bytes = match body {
            Body::Empty => Vec::new(),
            Body::Json(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                b
            }
            Body::Multipart { metadata, files } => {
                let boundary = boundary(&metadata, &files);
                req = req.header(
                    header::CONTENT_TYPE,
                    format!("multipart/form-data; boundary={boundary}"),
                );
                multipart(&boundary, &metadata, &files)
            }
        };
        let req = req
            .header(header::CONTENT_LENGTH, bytes.len())
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| failed("bad request", &e))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| failed("no answer", &e))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| failed("reading the answer", &e))?
            .to_bytes()
            .to_vec();
        driver.abort();
        Ok(Response { status, body })
    }
}

/// A boundary that occurs in none of the parts.
fn boundary(metadata: &[u8], files: &[(String, String, Vec<u8>)]) -> String {
    let mut n: u64 = 0x9e37_79b9;
    loop {
        let b = format!("emcoctl-boundary-{n:016x}");
        let clash = |data: &[u8]| data.windows(b.len()).any(|w| w == b.as_bytes());
        if !clash(metadata) && !files.iter().any(|(_, _, d)| clash(d)) {
            return b;
        }
        n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    }
}

fn multipart(boundary: &str, metadata: &[u8], files: &[(String, String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n")
            .as_bytes(),
    );
    out.extend_from_slice(metadata);
    out.extend_from_slice(b"\r\n");
    for (field, name, data) in files {
        let name = name.replace(['"', '\r', '\n'], "_");
        out.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n")
                .as_bytes(),
        );
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    out
}

/// The file name part of `path`, for a multipart part.
#[must_use]
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned())
}
