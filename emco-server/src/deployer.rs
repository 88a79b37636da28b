//! The resource synchronizer as a controller served alone (`--serve-controller`) reaches it:
//! the contexts it builds go to rsync's `InstallApp` at the address `rsync` is registered under
//! (`POST /v2/controllers`, as EMCO's controllers find rsync), and it reads clusters live with
//! their kubeconfigs from the shared store.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use emco_appcontext::collection::Collection;
use emco_appcontext::{Deployer, ObjectRef, ResourceKey, ResourceStore};
use emco_core::model::Controller;
use emco_core::{Error, ErrorKind, Result};
use emco_orchestrator::{StoreClusterResolver, keys};
use emco_proto::InstallAppRequest;
use emco_proto::installapp_client::InstallappClient;
use emco_rsync::connector::kube::KubePool;
use emco_rsync::engine::deployer::{live_get, live_list};
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
    async fn install(&self, id: u64) -> Result<()> {
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
        let url = format!("http://{}:{}", rsync.spec.host, rsync.spec.port);
        let unavailable = |e: &dyn std::fmt::Display| {
            Error::unavailable(format!("rsync at {url} cannot take context {id}: {e}"))
        };
        let channel = tonic::transport::Endpoint::from_shared(url.clone())
            .map_err(|e| Error::invalid(format!("rsync's address {url} is no URL: {e}")))?
            .connect_timeout(RSYNC_TIMEOUT)
            .timeout(RSYNC_TIMEOUT)
            .connect()
            .await
            .map_err(|e| unavailable(&e))?;
        let answer = InstallappClient::new(channel)
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
