//! The AppContext gRPC service: a remote store over it passes the same conformance suites as
//! the local backends, and a controller works through it.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;

use emco_controller_sdk::remote::{AppContextService, RemoteAppContextStore};
use emco_controller_sdk::{ActionRunner, Stores};
use emco_store::{AppContextStore, InMemoryAppContextStore, conformance};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;

/// Serves `store` on port 0; returns a remote store on it and the stop switch.
async fn remote(store: Arc<dyn AppContextStore>) -> (RemoteAppContextStore, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(AppContextService::server(store))
            .serve_with_incoming_shutdown(TcpIncoming::from(listener), async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    let client = RemoteAppContextStore::connect_lazy(&format!("http://{addr}")).unwrap();
    (client, tx)
}

#[tokio::test]
async fn remote_store_passes_the_conformance_suite() {
    let (client, _stop) = remote(Arc::new(InMemoryAppContextStore::new())).await;
    conformance::app_context_store(&client, "/conformance/")
        .await
        .unwrap();
}

#[tokio::test]
async fn remote_store_reports_compaction_like_a_local_one() {
    let (client, _stop) = remote(Arc::new(InMemoryAppContextStore::with_log_capacity(8))).await;
    conformance::compaction(&client, "/compaction/", 8)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_controller_works_through_the_remote_store() {
    let (local, id) = common::seeded().await;
    let (client, _stop) = remote(Arc::clone(&local)).await;
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let runner = ActionRunner::new(
        Arc::new(common::Labeler::new("team", &log)),
        Stores::new(Arc::new(client)),
    );
    runner.update(&id.to_string(), "far", "").await.unwrap();
    assert_eq!(
        common::labels(&local, id, "p+c2").await,
        serde_json::json!({"team": "far"})
    );
}

#[tokio::test]
async fn an_unreachable_service_is_unavailable() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let client = RemoteAppContextStore::connect_lazy(&format!("http://{addr}")).unwrap();
    let err = client.health().await.unwrap_err();
    assert_eq!(err.kind(), emco_core::ErrorKind::Unavailable);
}
