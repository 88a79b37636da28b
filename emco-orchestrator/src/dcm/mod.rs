//! dcm: the lifecycle of logical clouds (instantiate, terminate, stop, update, status) and the
//! kubeconfigs generated for standard and privileged logical clouds.
//!
//! A logical cloud's lifecycle record is kept beside it like a deployment intent group's: the
//! blob `state` holding a [`StateInfo`](emco_core::lifecycle::StateInfo).

use axum::Router;
use emco_core::lifecycle::DigState;
use emco_core::model::{ClusterReference, LogicalCloud};
use emco_core::{Error, ErrorKind, Result};

use crate::{Orchestrator, from_value, hooks, keys};

/// Where the deployment intent groups of one logical cloud deploy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployCloud {
    /// The logical cloud's name.
    pub name: String,
    /// The namespace its apps go into (`default` for an admin cloud without one).
    pub namespace: String,
    /// `"0"` (admin: the clusters' own credentials) or `"1"` (standard or privileged: the
    /// credentials dcm generated for the cloud).
    pub level: String,
    /// Its clusters as `(provider, cluster)`, in the order of their references' names.
    pub clusters: Vec<(String, String)>,
}

/// The logical cloud `cloud` of `project`, which deployments may use only once it is
/// instantiated.
///
/// # Errors
/// NotFound when it does not exist; FailedPrecondition when it is not instantiated.
pub async fn cloud_for_deployment(
    orch: &Orchestrator,
    project: &str,
    cloud: &str,
) -> Result<DeployCloud> {
    let key = keys::logical_cloud(project, cloud);
    let lc: LogicalCloud = match orch.store().get(&key).await? {
        Some(v) => from_value(&key, v)?,
        None => {
            return Err(Error::not_found(format!(
                "logical cloud {cloud:?} does not exist"
            )));
        }
    };
    let state = match hooks::load_state(orch.store().as_ref(), &key).await {
        Ok(s) => s.current_state(),
        Err(e) if e.kind() == ErrorKind::NotFound => DigState::Created,
        Err(e) => return Err(e),
    };
    if state != DigState::Instantiated {
        return Err(Error::failed_precondition(format!(
            "logical cloud {cloud:?} is {state}, not instantiated; instantiate it first"
        )));
    }
    let mut clusters = Vec::new();
    for (k, v) in orch
        .store()
        .list(&key, keys::CLUSTER_REFERENCE, &[])
        .await?
    {
        let r: ClusterReference = from_value(&k, v)?;
        clusters.push((r.spec.cluster_provider, r.spec.cluster));
    }
    let namespace = if lc.spec.namespace.is_empty() {
        "default".to_owned()
    } else {
        lc.spec.namespace.clone()
    };
    Ok(DeployCloud {
        name: cloud.to_owned(),
        namespace,
        level: lc.spec.level,
        clusters,
    })
}

/// The lifecycle routes of logical clouds.
pub(crate) fn routes() -> Router<Orchestrator> {
    Router::new()
}
