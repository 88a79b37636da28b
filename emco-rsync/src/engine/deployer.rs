//! The engine as the [`Deployer`] of the controllers run in the same process: contexts they
//! build are instantiated like any other, and their live reads go through the connectors rsync
//! deploys with (the cluster's admin credentials, as EMCO's sds reads clusters). [`live_get`]
//! and [`live_list`] are the same reads for a controller process with its own resolver.

use async_trait::async_trait;
use emco_appcontext::{Deployer, ObjectRef};
use emco_core::{ContextId, Result};
use serde_json::Value;

use super::{ClusterResolver, Rsync};
use crate::connector::{ResourceId, Scope};

/// The scope and id `what` is read under.
fn scoped(what: &ObjectRef) -> (Scope, ResourceId) {
    let id = ResourceId {
        api_version: what.api_version.clone(),
        kind: what.kind.clone(),
        namespace: what.namespace.clone(),
        name: what.name.clone(),
    };
    (Scope::new("0", "live-read"), id)
}

/// The object `what` as `cluster` reports it now, through `resolver`'s admin connector.
///
/// # Errors
/// The resolver's and the cluster's errors.
pub async fn live_get(
    resolver: &dyn ClusterResolver,
    cluster: &str,
    what: &ObjectRef,
) -> Result<Option<Value>> {
    let (scope, id) = scoped(what);
    resolver.connector(cluster).await?.get(&scope, &id).await
}

/// Every object of `what`'s kind on `cluster` (in its namespace, for a namespaced kind).
///
/// # Errors
/// The resolver's and the cluster's errors; FailedPrecondition for a cluster that cannot be
/// read live.
pub async fn live_list(
    resolver: &dyn ClusterResolver,
    cluster: &str,
    what: &ObjectRef,
) -> Result<Vec<Value>> {
    let (scope, id) = scoped(what);
    resolver.connector(cluster).await?.list(&scope, &id).await
}

#[async_trait]
impl Deployer for Rsync {
    async fn install(&self, id: ContextId) -> Result<()> {
        self.instantiate(id).await
    }

    async fn get(&self, cluster: &str, what: &ObjectRef) -> Result<Option<Value>> {
        live_get(self.inner.resolver.as_ref(), cluster, what).await
    }

    async fn list(&self, cluster: &str, what: &ObjectRef) -> Result<Vec<Value>> {
        live_list(self.inner.resolver.as_ref(), cluster, what).await
    }
}
