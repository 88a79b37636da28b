//! The resource keys of every object, as the REST routes derive them from their path
//! parameters (see `emco_controller_sdk::rest::KeyPattern`): one place so that the typed API,
//! the routes and controllers agree.

use emco_appcontext::ResourceKey;

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
/// Child type of registered controllers.
pub const CONTROLLER: &str = "controller";
/// Child type of registered clm controllers.
pub const CLM_CONTROLLER: &str = "clmController";
/// Child type of cluster providers.
pub const CLUSTER_PROVIDER: &str = "clusterProvider";
/// Child type of clusters.
pub const CLUSTER: &str = "cluster";
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

/// The blob holding an object's uploaded file (chart, profile, kubeconfig).
pub const FILE_BLOB: &str = "file";
/// The blob holding a deployment intent group's lifecycle record.
pub const STATE_BLOB: &str = "state";

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
