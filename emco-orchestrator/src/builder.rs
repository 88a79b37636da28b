//! How an orchestrator is built: [`OrchestratorBuilder`] makes the AppContext store, the rsync
//! engine and the controller registry once per orchestrator, shared by its clones, and gives
//! each service what it uses. It wires them: rsync reaches clusters through a [`StoreClusterResolver`]
//! that reads each cluster's kubeconfig from the resource store (or, for contexts of a standard
//! logical cloud, the kubeconfig dcm generated for that cloud), and in-process controllers see
//! the same two stores as the orchestrator.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use emco_appcontext::context::CompositeAppMeta;
use emco_controller_sdk::client::ControllerRegistry;
use emco_controller_sdk::controller::Stores;
use emco_core::model::{Cluster, ClusterReference, GitOpsSpec, KvPair};
use emco_core::placement::{AnyOfStrategy, FirstLexicographic};
use emco_core::{Error, Result};
use emco_helm::HelmCompat;
use emco_rsync::connector::Connector;
use emco_rsync::connector::gitops::{GitOpsConfig, GitOpsConnector};
use emco_rsync::connector::kube::KubePool;
use emco_rsync::engine::{ClusterResolver, Rsync, RsyncBuilder};
use emco_store::{AppContextStore, InMemoryAppContextStore, ResourceKey, ResourceStore};

use crate::records::Records;
use crate::upload::Limits;
use crate::{Onboarding, Orchestrator, keys};

/// The blob of a logical cloud's cluster reference holding the kubeconfig dcm generated for that
/// cloud on that cluster (standard and privileged logical clouds).
pub const LOGICAL_CLOUD_KUBECONFIG_BLOB: &str = keys::LOGICAL_CLOUD_KUBECONFIG_BLOB;

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
    any_of: Option<Arc<dyn AnyOfStrategy>>,
    gitops_dir: Option<PathBuf>,
    helm: HelmCompat,
    reconcile_grace: Duration,
    history: Option<usize>,
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
            any_of: None,
            gitops_dir: None,
            helm: HelmCompat::default(),
            reconcile_grace: Duration::from_secs(10),
            history: None,
        }
    }

    /// Keeps the contexts of a group's `revisions` most recent revisions (the current one
    /// among them) and deletes older ones as updates come: each is a whole copy of the
    /// deployment, so a group updated every minute would otherwise grow its store without end.
    /// A rollback to a revision no longer kept is refused. Default: every revision, as EMCO
    /// (like Helm's `--history-max`, Argo CD's `revisionHistoryLimit`); fewer than 2 keeps 2,
    /// the current revision and the one an update or a failed rollout goes back to.
    #[must_use]
    pub fn revision_history_limit(mut self, revisions: usize) -> Self {
        self.history = Some(revisions.max(2));
        self
    }

    /// How long [`Orchestrator::start`] waits before it queues the rsync work of records a crash
    /// left unqueued (default 10 s: far longer than a hand-over takes in any replica).
    #[must_use]
    pub fn reconcile_grace(mut self, grace: Duration) -> Self {
        self.reconcile_grace = grace;
        self
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

    /// Which Helm release's rendering to match (default: the current one). EMCO's own
    /// services render like Helm 3 ([`HelmCompat::V3`]).
    #[must_use]
    pub const fn helm(mut self, helm: HelmCompat) -> Self {
        self.helm = helm;
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

    /// Where the local clones of GitOps clusters' repositories live, one directory per cluster
    /// (default: `emco-gitops-<pid>` in the system's temp directory).
    #[must_use]
    pub fn gitops_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.gitops_dir = Some(dir.into());
        self
    }

    /// How an anyOf group's cluster is chosen among the candidates the placement controllers
    /// left (default: [`FirstLexicographic`], EMCO's choice).
    #[must_use]
    pub fn any_of_strategy(mut self, strategy: Arc<dyn AnyOfStrategy>) -> Self {
        self.any_of = Some(strategy);
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
        let mut resolver =
            StoreClusterResolver::new(Arc::clone(&self.store), self.pool.unwrap_or_default());
        if let Some(dir) = self.gitops_dir {
            resolver = resolver.with_gitops_dir(dir);
        }
        let resolver = Arc::new(resolver);
        let mut rsync = Rsync::builder()
            .store(Arc::clone(&contexts))
            .connectors(resolver);
        if let Some(tune) = self.rsync {
            rsync = tune(rsync);
        }
        let rsync = rsync.build()?;
        // In-process controllers deploy the contexts they build with this same engine.
        let stores = Stores::new(Arc::clone(&contexts))
            .with_resources(Arc::clone(&self.store))
            .with_deployer(Arc::new(rsync.clone()));
        let controllers = match self.registry {
            Some(build) => build(stores),
            None => ControllerRegistry::new(stores),
        };
        let records = Records::new(
            Onboarding::new(self.store, Arc::clone(&contexts), self.limits),
            contexts,
            rsync,
        );
        Ok(Orchestrator::assemble(
            records,
            Arc::new(controllers),
            self.any_of.unwrap_or_else(|| Arc::new(FirstLexicographic)),
            self.history,
            self.reconcile_grace,
            self.helm,
        ))
    }
}

/// Reaches clusters with the credentials kept in the resource store: the cluster's own
/// kubeconfig, or for a context of a standard or privileged logical cloud (level `"1"`) the
/// kubeconfig generated for that cloud. Connectors are cached in a [`KubePool`] and rebuilt when
/// the kubeconfig changes.
///
/// A GitOps cluster (`spec.gitOps`) is reached through its repository instead: the cluster sync
/// object its `gitOpsResourceObject` names (under the cluster's provider, see
/// [`CLUSTER_SYNC_OBJECT`]) gives it as kv-pairs: `url` (any remote `git clone` takes, a local
/// path included), or EMCO's `gitType: github` with `userName`, `repoName` and `gitToken`; and
/// `branch` (default `main`).
#[derive(Debug)]
pub struct StoreClusterResolver {
    store: Arc<dyn ResourceStore>,
    pool: Arc<KubePool>,
    gitops_dir: PathBuf,
    gitops: tokio::sync::Mutex<HashMap<String, Arc<GitOpsConnector>>>,
}

/// The kind of the cluster sync objects of a cluster provider
/// (`/cluster-providers/{clusterProvider}/cluster-sync-objects/{name}`, kv-pairs).
pub use emco_appcontext::keys::CLUSTER_SYNC_OBJECT;

impl StoreClusterResolver {
    /// A resolver reading `store`, caching connectors in `pool`.
    #[must_use]
    pub fn new(store: Arc<dyn ResourceStore>, pool: Arc<KubePool>) -> Self {
        Self {
            store,
            pool,
            gitops_dir: std::env::temp_dir().join(format!("emco-gitops-{}", std::process::id())),
            gitops: tokio::sync::Mutex::default(),
        }
    }

    /// Keeps the local clones of GitOps repositories under `dir`.
    #[must_use]
    pub fn with_gitops_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.gitops_dir = dir.into();
        self
    }

    async fn kube(&self, pool_key: &str, kubeconfig: &str) -> Result<Arc<dyn Connector>> {
        let conn: Arc<dyn Connector> = self.pool.connector(pool_key, kubeconfig).await?;
        Ok(conn)
    }

    /// The GitOps connector of cluster `id`, reopened when its repository settings change.
    async fn gitops(
        &self,
        id: &str,
        provider: &str,
        spec: &GitOpsSpec,
    ) -> Result<Arc<dyn Connector>> {
        let name = if spec.git_ops_resource_object.is_empty() {
            &spec.git_ops_reference_object
        } else {
            &spec.git_ops_resource_object
        };
        let key = keys::cluster_provider(provider).child(CLUSTER_SYNC_OBJECT, name.as_str());
        let Some(value) = self.store.get(&key).await? else {
            return Err(Error::failed_precondition(format!(
                "GitOps cluster {id} names cluster sync object {name:?}, which does not exist"
            )));
        };
        let sync: KvPair = serde_json::from_value(value).map_err(|e| {
            Error::internal(format!("cluster sync object {name:?} is corrupt")).with_source(e)
        })?;
        let remote = git_remote(&sync).ok_or_else(|| {
            Error::failed_precondition(format!(
                "cluster sync object {name:?} has no url, nor gitType github with userName and repoName"
            ))
        })?;
        let branch = sync.get_str("branch").unwrap_or("main");
        let config = GitOpsConfig::new(id, remote, self.gitops_dir.join(id)).with_branch(branch);
        let mut cache = self.gitops.lock().await;
        if let Some(conn) = cache.get(id).filter(|c| *c.config() == config) {
            let conn: Arc<dyn Connector> = Arc::clone(conn) as Arc<dyn Connector>;
            return Ok(conn);
        }
        let conn = Arc::new(GitOpsConnector::open(config).await?);
        cache.insert(id.to_owned(), Arc::clone(&conn));
        Ok(conn)
    }
}

/// The remote of a cluster sync object: its `url`, or the GitHub repository EMCO's kv-pairs
/// (`gitType: github`, `userName`, `repoName`, `gitToken`) describe.
fn git_remote(sync: &KvPair) -> Option<String> {
    if let Some(url) = sync.get_str("url").filter(|u| !u.is_empty()) {
        return Some(url.to_owned());
    }
    if !sync.get_str("gitType")?.eq_ignore_ascii_case("github") {
        return None;
    }
    let (user, repo) = (sync.get_str("userName")?, sync.get_str("repoName")?);
    Some(match sync.get_str("gitToken").filter(|t| !t.is_empty()) {
        Some(token) => format!("https://{user}:{token}@github.com/{user}/{repo}.git"),
        None => format!("https://github.com/{user}/{repo}.git"),
    })
}

/// Splits a context's cluster id `provider+cluster`.
///
/// # Errors
/// InvalidArgument when there is no `+`.
pub fn split_cluster_id(id: &str) -> Result<(&str, &str)> {
    emco_core::ClusterRef::split(id)
        .filter(|(p, c)| !p.is_empty() && !c.is_empty())
        .ok_or_else(|| {
            Error::invalid(format!(
                "cluster id {id:?} is not of the form provider+cluster"
            ))
        })
}

pub(crate) use emco_store::resource::read_blob;

/// Reads the whole blob `name` of `key` as UTF-8 text; `None` when there is none.
pub(crate) async fn read_text_blob(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
) -> Result<Option<String>> {
    let Some(bytes) = read_blob(store, key, name).await? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
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
        if let Some(spec) = cluster.git_ops() {
            return self.gitops(id, provider, spec).await;
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
            // dcm completes a cloud's kubeconfigs after its instantiate returned (the user's
            // certificate must be approved on each cluster): rsync retries until it is there.
            Error::unavailable(format!(
                "logical cloud {:?} has no kubeconfig for cluster {id} yet",
                meta.logical_cloud
            ))
        })?;
        let pool_key = format!("{}/{}/{id}", meta.project, meta.logical_cloud);
        self.kube(&pool_key, &kubeconfig).await
    }
}
