//! What a controller may ask of the resource synchronizer beyond changing the context it is
//! given: deploy a context it built itself, and read live objects on a cluster. EMCO's service
//! discovery (sds) does both: it reads the server's Service and the cluster's Nodes, then builds a
//! child context for the clients' clusters and hands it to rsync's `InstallApp`.

use async_trait::async_trait;
use emco_core::{ContextId, Result};
use serde_json::Value;

/// A Kubernetes object by its identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// `v1`, `apps/v1`, `example.com/v1alpha1`.
    pub api_version: String,
    /// `Service`, `Node`, ...
    pub kind: String,
    /// The namespace of a namespaced object; `None` for a cluster-scoped one, or `default`.
    pub namespace: Option<String>,
    /// `metadata.name`; empty for a list.
    pub name: String,
}

impl ObjectRef {
    /// The object `api_version`/`kind` named `name`, in `namespace` when it is namespaced.
    #[must_use]
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.filter(|n| !n.is_empty()).map(str::to_owned),
            name: name.into(),
        }
    }
}

/// The resource synchronizer as a controller sees it. The orchestrator gives its own engine to
/// the controllers it runs in-process; a controller process is given one that reaches rsync
/// over gRPC.
#[async_trait]
pub trait Deployer: std::fmt::Debug + Send + Sync + 'static {
    /// Deploys context `id` (complete, and deployed by nobody yet) to the clusters it names, as
    /// rsync's `InstallApp`: returns once the work is queued; the context's status follows it.
    ///
    /// # Errors
    /// `NotFound` for an unknown context; the store's errors.
    async fn install(&self, id: ContextId) -> Result<()>;

    /// The object `what` as cluster `cluster` reports it now (with `status`); `None` when it
    /// does not exist.
    ///
    /// # Errors
    /// `NotFound` for an unknown cluster; `Unavailable` when the cluster cannot be reached.
    async fn get(&self, cluster: &str, what: &ObjectRef) -> Result<Option<Value>>;

    /// Every object of `what`'s kind on `cluster` (in `what`'s namespace for a namespaced kind;
    /// `what.name` is ignored), as the cluster reports them now.
    ///
    /// # Errors
    /// As [`Deployer::get`]; `FailedPrecondition` where the cluster cannot be read live (a
    /// GitOps cluster).
    async fn list(&self, cluster: &str, what: &ObjectRef) -> Result<Vec<Value>>;

    /// Whether it deploys nothing (a preview's): a controller then changes nothing outside the
    /// context either.
    fn read_only(&self) -> bool {
        false
    }
}
