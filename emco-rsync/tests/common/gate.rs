//! A client middleware for tests and benchmarks: counts the requests a `kube` client sends
//! (watches, other reads, writes) and answers 403 Forbidden for chosen paths, standing in for
//! credentials limited to some namespaces (kubesim itself does not authorize).

#![allow(dead_code)] // Each user takes a different part.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt as _, Full};
use kube::client::{Body, DynBody};
use tower::{BoxError, Layer, Service};

/// Request counters.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// Watch requests (`?watch=true`).
    pub watches: Arc<AtomicUsize>,
    /// Other GETs: object reads, lists, discovery.
    pub reads: Arc<AtomicUsize>,
    /// Everything else: applies, deletes.
    pub writes: Arc<AtomicUsize>,
}

impl Counts {
    /// (watches, reads, writes) so far.
    pub fn get(&self) -> (usize, usize, usize) {
        (
            self.watches.load(Ordering::Relaxed),
            self.reads.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
        )
    }
}

/// The layer: counts into `counts`, forbids the exact paths of `forbidden`.
#[derive(Debug, Clone, Default)]
pub struct GateLayer {
    pub counts: Counts,
    pub forbidden: Arc<Vec<String>>,
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;
    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`GateLayer`].
pub struct Gate<S> {
    inner: S,
    layer: GateLayer,
}

type Answer = Response<Box<DynBody>>;

impl<S> Service<Request<Body>> for Gate<S>
where
    S: Service<Request<Body>, Response = Answer, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let counts = &self.layer.counts;
        let counter = if req.uri().query().is_some_and(|q| q.contains("watch=true")) {
            &counts.watches
        } else if req.method() == http::Method::GET {
            &counts.reads
        } else {
            &counts.writes
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if self.layer.forbidden.iter().any(|p| p == req.uri().path()) {
            let status = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "Forbidden", "code": 403,
                "message": format!("{} is forbidden for these credentials", req.uri().path())});
            let body: Box<DynBody> = Box::new(
                Full::new(Bytes::from(status.to_string())).map_err(|never| match never {}),
            );
            return Box::pin(async move {
                Ok(Response::builder()
                    .status(403)
                    .header("content-type", "application/json")
                    .body(body)?)
            });
        }
        Box::pin(self.inner.call(req))
    }
}

/// A client for `kubeconfig` whose requests pass through `gate`.
pub async fn client(kubeconfig: &str, gate: &GateLayer) -> kube::Client {
    let parsed = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(parsed, &Default::default())
        .await
        .unwrap();
    // As `KubeConnector::from_kubeconfig`: the engine, not the client, retries.
    config.default_retry = false;
    kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(gate)
        .build()
}
