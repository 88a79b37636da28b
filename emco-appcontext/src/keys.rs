//! The key schema of the resource store: the key of every EMCO object, the child type of each
//! kind (EMCO's path parameter name, which the SDK's generic routes derive keys from), and the
//! typed references ([`DigRef`], [`ClusterRef`], [`LogicalCloudRef`]) to and from keys. The
//! orchestrator, the REST edge, the SDK and controllers all use this one schema.

use emco_core::{ClusterRef, DigRef, Error, LogicalCloudRef, Result};

use emco_store::ResourceKey;

/// `/projects/{project}`.
#[must_use]
pub fn project(project: &str) -> ResourceKey {
    ResourceKey::root().child("project", project)
}

/// `.../composite-apps/{compositeApp}/{compositeAppVersion}`: one segment named `app/version`.
#[must_use]
pub fn composite_app(project_name: &str, composite_app: &str, version: &str) -> ResourceKey {
    project(project_name).child("compositeApp", format!("{composite_app}/{version}"))
}

/// `CA/deployment-intent-groups/{deploymentIntentGroup}`.
#[must_use]
pub fn dig(project_name: &str, composite_app_name: &str, version: &str, dig: &str) -> ResourceKey {
    composite_app(project_name, composite_app_name, version).child(DIG, dig)
}

/// `/cluster-providers/{clusterProvider}`.
#[must_use]
pub fn cluster_provider(provider: &str) -> ResourceKey {
    ResourceKey::root().child("clusterProvider", provider)
}

/// `/cluster-providers/{clusterProvider}/clusters/{cluster}`.
#[must_use]
pub fn cluster(provider: &str, cluster: &str) -> ResourceKey {
    cluster_provider(provider).child(CLUSTER, cluster)
}

/// `/projects/{project}/logical-clouds/{logicalCloud}`.
#[must_use]
pub fn logical_cloud(project_name: &str, logical_cloud: &str) -> ResourceKey {
    project(project_name).child(LOGICAL_CLOUD, logical_cloud)
}

/// Child type of projects.
pub const PROJECT: &str = "project";
/// Child type of composite apps.
pub const COMPOSITE_APP: &str = "compositeApp";
/// Child type of apps.
pub const APP: &str = "app";
/// Child type of app dependencies.
pub const DEPENDENCY: &str = "dependency";
/// Child type of composite profiles.
pub const COMPOSITE_PROFILE: &str = "compositeProfile";
/// Child type of app profiles.
pub const APP_PROFILE: &str = "appProfile";
/// Child type of deployment intent groups.
pub const DIG: &str = "deploymentIntentGroup";
/// Child type of DIG intents.
pub const GROUP_INTENT: &str = "groupIntent";
/// Child type of generic placement intents.
pub const GENERIC_PLACEMENT_INTENT: &str = "genericPlacementIntent";
/// Child type of app placement intents.
pub const APP_INTENT: &str = "appIntent";
/// Child type of rollout policies (under a deployment intent group).
pub const ROLLOUT_POLICY: &str = "rolloutPolicy";
/// A drift policy of a deployment intent group (ours).
pub const DRIFT_POLICY: &str = "driftPolicy";
/// Child type of registered controllers.
pub const CONTROLLER: &str = "controller";
/// Child type of registered clm controllers.
pub const CLM_CONTROLLER: &str = "clmController";
/// Child type of cluster providers.
pub const CLUSTER_PROVIDER: &str = "clusterProvider";
/// Child type of clusters.
pub const CLUSTER: &str = "cluster";
/// The kind of a cluster provider's cluster sync objects (GitOps repositories and their
/// credentials, as kv-pairs).
pub const CLUSTER_SYNC_OBJECT: &str = "clusterSyncObject";
/// Child type of cluster labels.
pub const CLUSTER_LABEL: &str = "clusterLabel";
/// Child type of kv-pairs (of clusters and of logical clouds).
pub const KV_PAIR: &str = "kvPair";
/// Child type of logical clouds.
pub const LOGICAL_CLOUD: &str = "logicalCloud";
/// Child type of logical cloud cluster references.
pub const CLUSTER_REFERENCE: &str = "clusterReference";
/// Child type of logical cloud user permissions.
pub const USER_PERMISSION: &str = "userPermission";
/// Child type of logical cloud cluster quotas.
pub const CLUSTER_QUOTA: &str = "clusterQuota";
/// The child type of an ncm network (parent: a cluster).
pub const NETWORK: &str = "network";
/// The child type of an ncm provider network (parent: a cluster).
pub const PROVIDER_NETWORK: &str = "providerNetwork";
/// ca-certs' CA certificate intent (under a cluster provider or a project).
pub const CA_CERT: &str = "caCert";
/// A cluster group of a CA certificate intent.
pub const CA_CERT_CLUSTER_GROUP: &str = "caCertClusterGroup";
/// A logical cloud of a project's CA certificate intent.
pub const CA_CERT_LOGICAL_CLOUD: &str = "caCertLogicalCloud";
/// The object holding a CA certificate's enrollment lifecycle record.
pub const CA_CERT_ENROLLMENT: &str = "caCertEnrollment";
/// The object holding a CA certificate's distribution lifecycle record.
pub const CA_CERT_DISTRIBUTION: &str = "caCertDistribution";

/// The blob holding an object's uploaded file (chart, profile, kubeconfig).
pub const FILE_BLOB: &str = "file";
/// The blob holding a deployment intent group's lifecycle record.
pub const STATE_BLOB: &str = "state";
/// The blob of a logical cloud's cluster reference holding the cloud user's kubeconfig there.
pub const LOGICAL_CLOUD_KUBECONFIG_BLOB: &str = "kubeconfig";
/// The blob of a logical cloud's cluster reference holding the user key awaiting its certificate.
pub const PENDING_KEY_BLOB: &str = "pendingkey";
/// The prefix of a CA certificate enrollment's key blobs (`keys-<context id>`).
pub const CA_KEYS_BLOB_PREFIX: &str = "keys-";

/// The deployment intent group that `key` is or lies under.
#[must_use]
pub fn enclosing_dig(key: &ResourceKey) -> Option<ResourceKey> {
    let at = key.segments().iter().position(|(kind, _)| kind == DIG)?;
    Some(ResourceKey::from_segments(
        key.segments()[..=at].iter().cloned(),
    ))
}

/// The composite app that `key` lies under.
#[must_use]
pub fn enclosing_composite_app(key: &ResourceKey) -> Option<ResourceKey> {
    let at = key
        .segments()
        .iter()
        .position(|(kind, _)| kind == COMPOSITE_APP)?;
    Some(ResourceKey::from_segments(
        key.segments()[..=at].iter().cloned(),
    ))
}

/// An object a [`ResourceKey`] names.
pub trait Keyed {
    /// Its key in the resource store.
    fn key(&self) -> ResourceKey;
}

impl Keyed for DigRef {
    fn key(&self) -> ResourceKey {
        dig(&self.project, &self.composite_app, &self.version, &self.dig)
    }
}

impl Keyed for ClusterRef {
    fn key(&self) -> ResourceKey {
        cluster(self.provider(), self.cluster())
    }
}

impl Keyed for LogicalCloudRef {
    fn key(&self) -> ResourceKey {
        logical_cloud(&self.project, &self.logical_cloud)
    }
}

/// The group a deployment intent group's key names.
///
/// # Errors
/// InvalidArgument when `key` is not a deployment intent group's.
pub fn dig_ref(key: &ResourceKey) -> Result<DigRef> {
    let bad = || Error::invalid(format!("{key} is not a deployment intent group"));
    match key.segments() {
        [(p, project), (c, ca), (d, dig)] if p == PROJECT && c == COMPOSITE_APP && d == DIG => {
            let (composite_app, version) = ca.split_once('/').ok_or_else(bad)?;
            Ok(DigRef::new(project, composite_app, version, dig))
        }
        _ => Err(bad()),
    }
}

/// The cluster a cluster's key names.
///
/// # Errors
/// InvalidArgument when `key` is not a cluster's.
pub fn cluster_ref(key: &ResourceKey) -> Result<ClusterRef> {
    match key.segments() {
        [(p, provider), (c, name)] if p == CLUSTER_PROVIDER && c == CLUSTER => {
            Ok(ClusterRef::new(provider, name))
        }
        _ => Err(Error::invalid(format!("{key} is not a cluster"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_keys_round_trip() {
        let d = DigRef::new("p", "ca", "v1", "d");
        assert_eq!(d.key(), dig("p", "ca", "v1", "d"));
        assert_eq!(dig_ref(&d.key()).unwrap(), d);
        assert!(dig_ref(&project("p")).is_err());
        assert!(
            dig_ref(
                &project("p")
                    .child(COMPOSITE_APP, "noversion")
                    .child(DIG, "d")
            )
            .is_err()
        );
        let c = ClusterRef::new("edge", "c1");
        assert_eq!(cluster_ref(&c.key()).unwrap(), c);
        assert!(cluster_ref(&cluster_provider("edge")).is_err());
        assert_eq!(
            LogicalCloudRef::new("p", "lc").key(),
            logical_cloud("p", "lc")
        );
    }
}
