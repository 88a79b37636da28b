//! What the lifecycle operations run on: the AppContext store, the rsync engine and the
//! controller registry, built once per orchestrator and shared by its clones.
//!
//! [`OrchestratorBuilder`] wires them: rsync reaches clusters through a [`StoreClusterResolver`]
//! that reads each cluster's kubeconfig from the resource store (or, for contexts of a standard
//! logical cloud, the kubeconfig dcm generated for that cloud), and in-process controllers see
//! the same two stores as the orchestrator.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use emco_appcontext::context::CompositeAppMeta;
use emco_appcontext::{AppContextStore, InMemoryAppContextStore, ResourceKey, ResourceStore};
use emco_controller_sdk::client::ControllerRegistry;
use emco_controller_sdk::controller::Stores;
use emco_core::model::{Cluster, ClusterReference};
use emco_core::{Error, ErrorKind, Result};
use emco_rsync::connector::Connector;
use emco_rsync::connector::kube::KubePool;
use emco_rsync::engine::{ClusterResolver, Rsync, RsyncBuilder};
use futures::TryStreamExt;
use tokio_util::sync::CancellationToken;

use crate::upload::Limits;
use crate::{Orchestrator, diglock, keys};

/// The blob of a logical cloud's cluster reference holding the kubeconfig dcm generated for that
/// cloud on that cluster (standard and privileged logical clouds).
pub const LOGICAL_CLOUD_KUBECONFIG_BLOB: &str = "kubeconfig";

/// The run-time services of an orchestrator.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) contexts: Arc<dyn AppContextStore>,
    pub(crate) rsync: Rsync,
    pub(crate) controllers: Arc<ControllerRegistry>,
}

type RegistryFn = Box<dyn FnOnce(Stores) -> ControllerRegistry + Send>;
type RsyncFn = Box<dyn FnOnce(RsyncBuilder) -> RsyncBuilder + Send>;

/// Builds an [`Orchestrator`] with its run-time services.
pub struct OrchestratorBuilder {
    store: Arc<dyn ResourceStore>,
    contexts: Option<Arc<dyn AppContextStore>>,
    limits: Limits,
    registry: Option<RegistryFn>,
    rsync: Option<RsyncFn>,
    pool: Option<Arc<KubePool>>,
}

impl fmt::Debug for OrchestratorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrchestratorBuilder")
            .field("contexts", &self.contexts.is_some())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl OrchestratorBuilder {
    pub(crate) fn new(store: Arc<dyn ResourceStore>) -> Self {
        Self {
            store,
            contexts: None,
            limits: Limits::default(),
            registry: None,
            rsync: None,
            pool: None,
        }
    }

    /// The AppContext store (default: in memory, which loses running deployments on restart).
    #[must_use]
    pub fn contexts(mut self, contexts: Arc<dyn AppContextStore>) -> Self {
        self.contexts = Some(contexts);
        self
    }

    /// The upload limits.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Builds the controller registry from the stores the orchestrator uses, e.g. to run
    /// controllers in-process (`ControllerRegistry::new(stores).with_action("gac", ...)`).
    /// Default: every registered controller is called over gRPC.
    #[must_use]
    pub fn controllers(
        mut self,
        build: impl FnOnce(Stores) -> ControllerRegistry + Send + 'static,
    ) -> Self {
        self.registry = Some(Box::new(build));
        self
    }

    /// Tunes the rsync engine (concurrency, backoff, poll interval); its store and cluster
    /// resolver are set by the orchestrator.
    #[must_use]
    pub fn rsync(
        mut self,
        tune: impl FnOnce(RsyncBuilder) -> RsyncBuilder + Send + 'static,
    ) -> Self {
        self.rsync = Some(Box::new(tune));
        self
    }

    /// The pool of Kubernetes connectors (shared with other users of the same clusters).
    #[must_use]
    pub fn kube_pool(mut self, pool: Arc<KubePool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The orchestrator. Call [`Orchestrator::start`] to resume the deployments an earlier
    /// process left running.
    ///
    /// # Errors
    /// As [`RsyncBuilder::build`].
    pub fn build(self) -> Result<Orchestrator> {
        let contexts = self
            .contexts
            .unwrap_or_else(|| Arc::new(InMemoryAppContextStore::new()));
        let resolver = Arc::new(StoreClusterResolver::new(
            Arc::clone(&self.store),
            self.pool.unwrap_or_default(),
        ));
        let mut rsync = Rsync::builder()
            .store(Arc::clone(&contexts))
            .connectors(resolver);
        if let Some(tune) = self.rsync {
            rsync = tune(rsync);
        }
        let rsync = rsync.build()?;
        let stores = Stores::new(Arc::clone(&contexts)).with_resources(Arc::clone(&self.store));
        let controllers = match self.registry {
            Some(build) => build(stores),
            None => ControllerRegistry::new(stores),
        };
        Ok(Orchestrator {
            store: self.store,
            limits: self.limits,
            dig_locks: diglock::DigLocks::default(),
            runtime: Arc::new(Runtime {
                contexts,
                rsync,
                controllers: Arc::new(controllers),
            }),
        })
    }
}

impl Orchestrator {
    /// The AppContext store.
    #[must_use]
    pub fn contexts(&self) -> &Arc<dyn AppContextStore> {
        &self.runtime.contexts
    }

    /// The rsync engine.
    #[must_use]
    pub fn rsync(&self) -> &Rsync {
        &self.runtime.rsync
    }

    /// The controller registry.
    #[must_use]
    pub fn controller_registry(&self) -> &Arc<ControllerRegistry> {
        &self.runtime.controllers
    }

    /// Resumes every deployment an earlier process left running; `cancel` shuts the engine down.
    ///
    /// # Errors
    /// The AppContext store's errors.
    pub async fn start(&self, cancel: CancellationToken) -> Result<()> {
        self.runtime.rsync.start(cancel).await
    }
}

/// Reaches clusters with the credentials kept in the resource store: the cluster's own
/// kubeconfig, or for a context of a standard or privileged logical cloud (level `"1"`) the
/// kubeconfig generated for that cloud. Connectors are cached in a [`KubePool`] and rebuilt when
/// the kubeconfig changes.
#[derive(Debug)]
pub struct StoreClusterResolver {
    store: Arc<dyn ResourceStore>,
    pool: Arc<KubePool>,
}

impl StoreClusterResolver {
    /// A resolver reading `store`, caching connectors in `pool`.
    #[must_use]
    pub fn new(store: Arc<dyn ResourceStore>, pool: Arc<KubePool>) -> Self {
        Self { store, pool }
    }

    async fn kube(&self, pool_key: &str, kubeconfig: &str) -> Result<Arc<dyn Connector>> {
        let conn: Arc<dyn Connector> = self.pool.connector(pool_key, kubeconfig).await?;
        Ok(conn)
    }
}

/// Splits a context's cluster id `provider+cluster`.
///
/// # Errors
/// InvalidArgument when there is no `+`.
pub fn split_cluster_id(id: &str) -> Result<(&str, &str)> {
    id.split_once('+')
        .filter(|(p, c)| !p.is_empty() && !c.is_empty())
        .ok_or_else(|| {
            Error::invalid(format!(
                "cluster id {id:?} is not of the form provider+cluster"
            ))
        })
}

/// Reads the whole blob `name` of `key` as UTF-8 text; `None` when there is none.
pub(crate) async fn read_text_blob(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
) -> Result<Option<String>> {
    let stream = match store.get_blob(key, name).await {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await?;
    String::from_utf8(chunks.concat())
        .map(Some)
        .map_err(|e| Error::invalid(format!("the {name} of {key} is not UTF-8")).with_source(e))
}

/// The kubeconfig generated for logical cloud `cloud` of `project` on `provider+cluster`, kept
/// on the cloud's cluster reference to that cluster.
///
/// # Errors
/// The store's errors.
pub(crate) async fn logical_cloud_kubeconfig(
    store: &dyn ResourceStore,
    project: &str,
    cloud: &str,
    provider: &str,
    cluster: &str,
) -> Result<Option<String>> {
    let lc = keys::logical_cloud(project, cloud);
    for (key, value) in store.list(&lc, keys::CLUSTER_REFERENCE, &[]).await? {
        let Ok(reference) = serde_json::from_value::<ClusterReference>(value) else {
            continue;
        };
        if reference.spec.cluster_provider == provider && reference.spec.cluster == cluster {
            return read_text_blob(store, &key, LOGICAL_CLOUD_KUBECONFIG_BLOB).await;
        }
    }
    Ok(None)
}

#[async_trait]
impl ClusterResolver for StoreClusterResolver {
    async fn connector(&self, id: &str) -> Result<Arc<dyn Connector>> {
        let (provider, name) = split_cluster_id(id)?;
        let key = keys::cluster(provider, name);
        let Some(value) = self.store.get(&key).await? else {
            return Err(Error::not_found(format!("cluster {id} is not registered")));
        };
        let cluster: Cluster = serde_json::from_value(value)
            .map_err(|e| Error::internal(format!("cluster {id} is corrupt")).with_source(e))?;
        if cluster.git_ops().is_some() {
            return Err(Error::failed_precondition(format!(
                "cluster {id} is a GitOps cluster, which this resolver cannot reach"
            )));
        }
        let kubeconfig = read_text_blob(self.store.as_ref(), &key, keys::FILE_BLOB)
            .await?
            .ok_or_else(|| Error::failed_precondition(format!("cluster {id} has no kubeconfig")))?;
        self.kube(id, &kubeconfig).await
    }

    async fn connector_for(&self, id: &str, meta: &CompositeAppMeta) -> Result<Arc<dyn Connector>> {
        if meta.level != "1" || meta.logical_cloud.is_empty() {
            return self.connector(id).await;
        }
        let (provider, name) = split_cluster_id(id)?;
        let kubeconfig = logical_cloud_kubeconfig(
            self.store.as_ref(),
            &meta.project,
            &meta.logical_cloud,
            provider,
            name,
        )
        .await?
        .ok_or_else(|| {
            Error::failed_precondition(format!(
                "logical cloud {:?} has no kubeconfig for cluster {id}; instantiate it first",
                meta.logical_cloud
            ))
        })?;
        let pool_key = format!("{}/{}/{id}", meta.project, meta.logical_cloud);
        self.kube(&pool_key, &kubeconfig).await
    }
}
