//! rsync's gRPC services over a real gRPC connection: installapp, updateapp and readyNotify.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{AppSpec, Env, clusters, config_map, context, status, until};
use emco_core::lifecycle::AppContextStatus;
use emco_proto::installapp_client::InstallappClient;
use emco_proto::ready_notify_client::ReadyNotifyClient;
use emco_proto::updateapp_client::UpdateappClient;
use emco_proto::{
    InstallAppRequest, ReadAppContextRequest, RollbackAppRequest, Topic, UninstallAppRequest,
    UpdateAppRequest,
};
use emco_store::{AppContextStore, InMemoryAppContextStore};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;

#[tokio::test]
async fn installapp_updateapp_and_ready_notify_over_grpc() {
    let env = Env::start(2).await;
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let cs = clusters(2);
    let (v1, v2) = (config_map("cfg", "1"), config_map("cfg", "2"));
    let old = context(
        Arc::clone(&store),
        &[AppSpec::new("app", &cs, &[("cfg+ConfigMap", &v1)])],
    )
    .await;
    let new = context(
        Arc::clone(&store),
        &[AppSpec::new("app", &cs, &[("cfg+ConfigMap", &v2)])],
    )
    .await;
    let rsync = env.engine(Arc::clone(&store));
    let shutdown = CancellationToken::new();
    rsync.start(shutdown.clone()).await.unwrap();

    let services = rsync.grpc_services();
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let stop = shutdown.clone();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(services.installapp)
            .add_service(services.updateapp)
            .add_service(services.ready_notify)
            .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await }),
    );
    let url = format!("http://{addr}");
    let mut install = InstallappClient::connect(url.clone()).await.unwrap();
    let mut update = UpdateappClient::connect(url.clone()).await.unwrap();
    let mut notify = ReadyNotifyClient::connect(url).await.unwrap();

    let topic = Topic {
        client_name: "orchestrator".into(),
        app_context: old.id().to_string(),
    };
    let mut alerts = notify.alert(topic.clone()).await.unwrap().into_inner();

    let r = install
        .install_app(InstallAppRequest {
            app_context: old.id().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.app_context_installed, "{}", r.app_context_install_message);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let n = tokio::time::timeout(Duration::from_secs(30), alerts.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                n.client_name.as_str(),
                n.server_name.as_str(),
                n.app.as_str()
            ),
            ("orchestrator", "rsync", "app")
        );
        assert_eq!(n.app_context, old.id().to_string());
        seen.push(n.cluster);
    }
    seen.sort();
    assert_eq!(seen, cs);
    rsync.wait_idle(old.id()).await;
    assert_eq!(status(&old).await, AppContextStatus::Instantiated);

    // Unsubscribe ends the stream.
    notify.unsubscribe(topic).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), alerts.message())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none());

    let r = install
        .read_app_context(ReadAppContextRequest {
            app_context: old.id().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.app_context_read_successful);
    until("read collected", || async {
        old.cluster_status("app", &cs[0]).await.unwrap().is_some()
    })
    .await;
    let collected = old.cluster_status("app", &cs[0]).await.unwrap().unwrap();
    assert_eq!(collected["resources"]["cfg+ConfigMap"]["present"], true);

    let r = update
        .update_app(UpdateAppRequest {
            update_from_app_context: old.id().to_string(),
            update_to_app_context: new.id().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.app_context_updated, "{}", r.app_context_update_message);
    rsync.wait_idle(new.id()).await;
    rsync.wait_idle(old.id()).await;
    assert_eq!(status(&new).await, AppContextStatus::Updated);
    let live = env.get(0, new.id(), "app", &v2).await.unwrap();
    assert_eq!(live["data"]["value"], "2");

    let r = update
        .rollback_app(RollbackAppRequest {
            rollback_from_app_context: new.id().to_string(),
            rollback_to_app_context: old.id().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        r.app_context_rolledback,
        "{}",
        r.app_context_rollback_message
    );
    rsync.wait_idle(old.id()).await;
    rsync.wait_idle(new.id()).await;
    let live = env.get(0, old.id(), "app", &v1).await.unwrap();
    assert_eq!(live["data"]["value"], "1");

    let r = install
        .uninstall_app(UninstallAppRequest {
            app_context: old.id().to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.app_context_uninstalled);
    rsync.wait_idle(old.id()).await;
    assert_eq!(status(&old).await, AppContextStatus::Terminated);
    assert!(env.get(1, old.id(), "app", &v1).await.is_none());

    // An unknown context is answered with false; a malformed id is a gRPC error.
    let r = install
        .install_app(InstallAppRequest {
            app_context: "42".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!r.app_context_installed);
    assert!(r.app_context_install_message.contains("42"));
    let e = install
        .install_app(InstallAppRequest {
            app_context: "forty-two".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);

    shutdown.cancel();
    server.await.unwrap().unwrap();
}
