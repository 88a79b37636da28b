//! The resource synchronizer as a controller served alone (`--serve-controller`) reaches it:
//! the contexts it builds go to rsync's `InstallApp` at the address `rsync` is registered under
//! (`POST /v2/controllers`, as EMCO's controllers find rsync), and it reads clusters live with
//! their kubeconfigs from the shared store.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use emco_appcontext::collection::Collection;
use emco_appcontext::{Deployer, ObjectRef};
use emco_core::model::Controller;
use emco_core::{ContextId, Error, ErrorKind, Result};
use emco_orchestrator::{StoreClusterResolver, keys};
use emco_proto::InstallAppRequest;
use emco_proto::installapp_client::InstallappClient;
use emco_rsync::connector::kube::KubePool;
use emco_rsync::engine::deployer::{live_get, live_list};
use emco_store::{ResourceKey, ResourceStore};
use serde_json::Value;

/// The name rsync is registered under.
const RSYNC: &str = "rsync";
/// How long a call on rsync may take, connecting included.
const RSYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// rsync over gRPC, and the clusters through the store's kubeconfigs.
#[derive(Debug)]
pub(crate) struct RemoteRsync {
    store: Arc<dyn ResourceStore>,
    resolver: StoreClusterResolver,
}

impl RemoteRsync {
    pub(crate) fn new(store: Arc<dyn ResourceStore>) -> Self {
        let resolver = StoreClusterResolver::new(Arc::clone(&store), Arc::new(KubePool::new()));
        Self { store, resolver }
    }
}

#[async_trait]
impl Deployer for RemoteRsync {
    async fn install(&self, id: ContextId) -> Result<()> {
        let rsync = Collection::<Controller>::new(Arc::clone(&self.store), keys::CONTROLLER)
            .get(&ResourceKey::root(), RSYNC)
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::NotFound => Error::failed_precondition(format!(
                    "cannot deploy context {id}: no controller {RSYNC} is registered \
                     (POST /v2/controllers)"
                )),
                _ => e,
            })?;
        // TLS when the environment names the server's CA (EMCO_CA_CERT) or a client certificate.
        let tls = emco_controller_sdk::remote::ClientTls::from_env()?;
        let scheme = if tls.ca_pem.is_some() || tls.identity.is_some() {
            "https"
        } else {
            "http"
        };
        let url = format!("{scheme}://{}:{}", rsync.spec.host, rsync.spec.port);
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::unavailable(format!("rsync at {url} cannot take context {id}: {e}"))
        };
        let channel = emco_controller_sdk::remote::endpoint(&url, &tls)?
            .connect_timeout(RSYNC_TIMEOUT)
            .timeout(RSYNC_TIMEOUT)
            .connect()
            .await
            .map_err(|e| unavailable(&e))?;
        // The token of EMCO_TOKEN: the orchestrator's gRPC services need one when it
        // requires credentials.
        let token = emco_controller_sdk::remote::BearerToken::from_env()?;
        let answer = InstallappClient::with_interceptor(channel, token)
            .install_app(InstallAppRequest {
                app_context: id.to_string(),
            })
            .await
            .map_err(|e| unavailable(&e.message()))?
            .into_inner();
        if answer.app_context_installed {
            Ok(())
        } else {
            Err(unavailable(&answer.app_context_install_message))
        }
    }

    async fn get(&self, cluster: &str, what: &ObjectRef) -> Result<Option<Value>> {
        live_get(&self.resolver, cluster, what).await
    }

    async fn list(&self, cluster: &str, what: &ObjectRef) -> Result<Vec<Value>> {
        live_list(&self.resolver, cluster, what).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use emco_appcontext::{AppContext, CompositeAppMeta};
    use emco_core::Metadata;
    use emco_core::lifecycle::AppContextStatus;
    use emco_core::model::{Cluster, ClusterProvider, ControllerSpec};
    use emco_rsync::engine::Rsync;
    use emco_store::{InMemoryAppContextStore, InMemoryResourceStore};
    use serde_json::json;

    use super::*;

    /// A controller process reaches rsync where `rsync` is registered (refusing clearly when
    /// it is not, or does not answer) and reads a registered cluster live.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn installs_through_the_registered_rsync_and_reads_clusters() {
        let store: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
        let contexts: Arc<dyn emco_store::AppContextStore> =
            Arc::new(InMemoryAppContextStore::new());
        let orch = emco_orchestrator::Orchestrator::builder(Arc::clone(&store))
            .contexts(Arc::clone(&contexts))
            .build()
            .unwrap();
        let remote = RemoteRsync::new(Arc::clone(&store));
        let ctx = AppContext::create(Arc::clone(&contexts), &CompositeAppMeta::default())
            .await
            .unwrap();
        let e = remote.install(ctx.id()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition, "{e}");
        assert!(
            e.message().contains("no controller rsync is registered"),
            "{e}"
        );

        // rsync's gRPC service on a loopback port, registered as EMCO's files register it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let register = |port: u16| Controller {
            metadata: Metadata::named(RSYNC),
            spec: ControllerSpec {
                host: "127.0.0.1".into(),
                port: i64::from(port),
                ..ControllerSpec::default()
            },
        };
        let controllers = orch.onboarding().controllers();
        let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead_port = dead.local_addr().unwrap().port();
        drop(dead);
        controllers
            .create(&ResourceKey::root(), &register(dead_port))
            .await
            .unwrap();
        let e = remote.install(ctx.id()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        controllers
            .put(&ResourceKey::root(), RSYNC, &register(addr.port()))
            .await
            .unwrap();
        let rsync: &Rsync = orch.rsync();
        let service = rsync.grpc_services().installapp;
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        remote.install(ctx.id()).await.unwrap();
        let end = tokio::time::Instant::now() + Duration::from_secs(30);
        while ctx.status().await.unwrap() != Some(AppContextStatus::Instantiated) {
            assert!(
                tokio::time::Instant::now() < end,
                "{:?}",
                ctx.status().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // Live reads through the store's kubeconfig.
        let fleet = kubesim::Fleet::start(kubesim::FleetConfig {
            clusters: 1,
            ..kubesim::FleetConfig::default()
        })
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c1.kubeconfig");
        std::fs::write(&path, fleet.kubeconfig("c1").unwrap()).unwrap();
        orch.onboarding()
            .cluster_providers()
            .create(
                &ResourceKey::root(),
                &ClusterProvider {
                    metadata: Metadata::named("p"),
                },
            )
            .await
            .unwrap();
        let cluster = Cluster {
            metadata: Metadata::named("c1"),
            ..Cluster::default()
        };
        orch.onboarding()
            .create_cluster("p", &cluster, Some(&path))
            .await
            .unwrap();
        let namespace = ObjectRef::new("v1", "Namespace", None, "default");
        let got = remote.get("p+c1", &namespace).await.unwrap().unwrap();
        assert_eq!(got["metadata"]["name"], json!("default"));
        let listed = remote.list("p+c1", &namespace).await.unwrap();
        assert!(
            listed
                .iter()
                .any(|n| n["metadata"]["name"] == "kube-system")
        );
        let missing = remote
            .get(
                "p+c1",
                &ObjectRef::new("v1", "ConfigMap", Some("default"), "none"),
            )
            .await
            .unwrap();
        assert!(missing.is_none());
    }
}
