//! What the orchestrator's REST tests share: a request to the router, and YAML applied to a
//! cluster as its admin would.

#![allow(dead_code, clippy::unwrap_used)] // Each test binary uses a different subset.

use axum::body::Body;
use emco_orchestrator::{Orchestrator, rest};
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{Batch, Connector, Resource, Scope};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// Sends `method path` (with the JSON `body`, if any) to the REST router of `orch`; the status
/// and the body text.
pub async fn call(
    orch: &Orchestrator,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = rest::router(orch.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// Applies the YAML documents `docs` (separated by `---`) through `conn`.
pub async fn apply_yaml(conn: &KubeConnector, docs: &str) {
    let mut batch = Batch::new(Scope::new("setup", "admin"));
    for doc in docs.split("\n---\n") {
        batch = batch.with_resource(Resource::from_yaml(doc).unwrap());
    }
    conn.apply(&batch).await.unwrap();
}
