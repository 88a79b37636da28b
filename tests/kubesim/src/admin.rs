//! The admin endpoint (plain HTTP, meant for loopback) that switches faults of a running fleet,
//! and the client `kubesim fault` uses.
//!
//! Routes: `GET /clusters`, `GET|PUT|DELETE /clusters/{name}/fault` (body and answer: a
//! [`Fault`] as JSON), `GET /clusters/{name}/kubeconfig`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use emco_core::Error;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::cluster::FleetInner;
use crate::fault::Fault;
use crate::fleet::{Fleet, summary};

fn respond(code: StatusCode, ct: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(ct));
    r
}

fn error(e: &Error) -> Response<Full<Bytes>> {
    let code = StatusCode::from_u16(emco_core::HasKind::kind(e).http_status())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    respond(
        code,
        "application/json",
        json!({"error": e.to_string()}).to_string(),
    )
}

async fn handle(inner: Arc<FleetInner>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error(&Error::invalid("cannot read the body").with_source(e)),
    };
    let segs: Vec<&str> = parts
        .uri
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let result: emco_core::Result<Response<Full<Bytes>>> =
        (|| match (&parts.method, segs.as_slice()) {
            (&Method::GET, ["clusters"]) => Ok(respond(
                StatusCode::OK,
                "application/json",
                summary(&inner).to_string(),
            )),
            (&Method::GET, ["clusters", c, "fault"]) => {
                let f = inner.cluster(c)?.fault_state().fault;
                Ok(respond(
                    StatusCode::OK,
                    "application/json",
                    json!(f).to_string(),
                ))
            }
            (&Method::PUT, ["clusters", c, "fault"]) => {
                let f: Fault = serde_json::from_slice(&body)
                    .map_err(|e| Error::invalid("the body is not a fault").with_source(e))?;
                inner.set_fault(c, f.clone())?;
                Ok(respond(
                    StatusCode::OK,
                    "application/json",
                    json!(f).to_string(),
                ))
            }
            (&Method::DELETE, ["clusters", c, "fault"]) => {
                inner.set_fault(c, Fault::none())?;
                Ok(respond(
                    StatusCode::OK,
                    "application/json",
                    json!(Fault::none()).to_string(),
                ))
            }
            (&Method::GET, ["clusters", c, "kubeconfig"]) => {
                let kc = inner.cluster(c)?.kubeconfig_text()?;
                Ok(respond(StatusCode::OK, "application/yaml", kc))
            }
            _ => Err(Error::not_found(format!(
                "no route {} {}",
                parts.method,
                parts.uri.path()
            ))),
        })();
    result.unwrap_or_else(|e| error(&e))
}

/// Serves the admin endpoint of `fleet` on `addr` until the fleet shuts down; returns the bound
/// address.
///
/// # Errors
///
/// `Unavailable` when the address cannot be bound.
pub async fn serve_admin(fleet: &Fleet, addr: SocketAddr) -> emco_core::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| Error::unavailable(format!("cannot listen on {addr}")).with_source(e))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::unavailable("admin listener has no address").with_source(e))?;
    let inner = fleet.inner.clone();
    let cancel = fleet.cancel.clone();
    let tasks = fleet.tasks.clone();
    fleet.tasks.spawn(async move {
        loop {
            let (tcp, _) = tokio::select! {
                () = cancel.cancelled() => return,
                res = listener.accept() => match res {
                    Ok(x) => x,
                    Err(_) => continue,
                },
            };
            let inner = inner.clone();
            let cancel = cancel.clone();
            tasks.spawn(async move {
                let svc = service_fn(move |req| {
                    let inner = inner.clone();
                    async move { Ok::<_, Infallible>(handle(inner, req).await) }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                tokio::select! {
                    _ = builder.serve_connection(TokioIo::new(tcp), svc) => {}
                    () = cancel.cancelled() => {}
                }
            });
        }
    });
    Ok(local)
}

/// A client of the admin endpoint.
#[derive(Debug, Clone)]
pub struct AdminClient {
    base: String,
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
}

impl AdminClient {
    /// A client for the endpoint at `base` (`http://127.0.0.1:PORT`).
    #[must_use]
    pub fn new(base: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            client: hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> emco_core::Result<Value> {
        let uri = format!("{}{path}", self.base);
        let req = Request::builder()
            .method(method)
            .uri(&uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| Error::invalid(format!("bad admin URL {uri:?}")).with_source(e))?;
        let resp = self.client.request(req).await.map_err(|e| {
            Error::unavailable(format!("cannot reach the kubesim admin endpoint {uri}"))
                .with_source(e)
        })?;
        let code = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| Error::unavailable("admin answer cut off").with_source(e))?
            .to_bytes();
        let v: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| json!({"error": String::from_utf8_lossy(&bytes)}));
        if code.is_success() {
            return Ok(v);
        }
        let msg = v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("admin request failed")
            .to_owned();
        Err(match code {
            StatusCode::NOT_FOUND => Error::not_found(msg),
            StatusCode::BAD_REQUEST => Error::invalid(msg),
            _ => Error::internal(msg),
        })
    }

    /// Sets a cluster's fault.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown cluster, `InvalidArgument` for a bad fault, `Unavailable` when
    /// the endpoint cannot be reached.
    pub async fn set_fault(&self, cluster: &str, fault: &Fault) -> emco_core::Result<()> {
        self.call(
            Method::PUT,
            &format!("/clusters/{cluster}/fault"),
            Some(json!(fault).to_string()),
        )
        .await
        .map(drop)
    }

    /// Reads a cluster's fault.
    ///
    /// # Errors
    ///
    /// As [`AdminClient::set_fault`].
    pub async fn fault(&self, cluster: &str) -> emco_core::Result<Fault> {
        let v = self
            .call(Method::GET, &format!("/clusters/{cluster}/fault"), None)
            .await?;
        serde_json::from_value(v)
            .map_err(|e| Error::internal("the admin endpoint answered no fault").with_source(e))
    }

    /// Lists the clusters with their servers and faults.
    ///
    /// # Errors
    ///
    /// `Unavailable` when the endpoint cannot be reached.
    pub async fn clusters(&self) -> emco_core::Result<Value> {
        self.call(Method::GET, "/clusters", None).await
    }
}
