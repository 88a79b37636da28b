//! The HTTP edge: EMCO's REST API v2 over an [`Orchestrator`], every route in this module and
//! nothing else of the crate knowing HTTP. Handlers take typed paths (`Path<DigRef>`,
//! `CaPath`, ...), call one service method and map its answer to EMCO's status codes; the
//! plain object types are served by the SDK's generic [`Routes`] over the orchestrator's
//! collections.
//!
//! - `objects`: composite apps, apps, app profiles and clusters (JSON and multipart), and the
//!   query views of intents and kv-pairs;
//! - `lifecycle`: approve, instantiate, terminate, stop, update, rollback, migrate and status of
//!   deployment intent groups;
//! - `dcm`: the logical cloud lifecycle; `ncm`: cluster networks.

mod cacerts;
mod dcm;
mod lifecycle;
mod ncm;
mod objects;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::response::Response;
use axum::routing::get;
use emco_core::model::ClusterLabel;
use emco_rest::{ApiError, FileRoutes, Routes};
use emco_store::ResourceKey;
use serde::Deserialize;

use crate::auth::{Access, Scope, Target};
use crate::{Orchestrator, keys};

/// A handler's answer.
type Answer = Result<Response, ApiError>;

/// `CA` of EMCO.md: a composite app's URL.
pub const CA: &str = "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}";
/// `DIG` of EMCO.md: a deployment intent group's URL.
pub const DIG: &str = "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}/deployment-intent-groups/{deploymentIntentGroup}";
/// A cluster provider's clusters.
const CLUSTERS: &str = "/v2/cluster-providers/{clusterProvider}/clusters";
/// A logical cloud's URL.
const LC: &str = "/v2/projects/{project}/logical-clouds/{logicalCloud}";

/// The names of a route under a project.
#[derive(Debug, Deserialize)]
struct ProjectPath {
    project: String,
}

/// The names of a route under `CA`.
#[derive(Debug, Deserialize)]
struct CaPath {
    project: String,
    #[serde(rename = "compositeApp")]
    composite_app: String,
    #[serde(rename = "compositeAppVersion")]
    version: String,
}

impl CaPath {
    fn key(&self) -> ResourceKey {
        keys::composite_app(&self.project, &self.composite_app, &self.version)
    }
}

/// The names of a route under a cluster provider.
#[derive(Debug, Deserialize)]
struct ProviderPath {
    #[serde(rename = "clusterProvider")]
    provider: String,
}

/// The names of a route under a cluster.
#[derive(Debug, Deserialize)]
struct ClusterPath {
    #[serde(rename = "clusterProvider")]
    provider: String,
    cluster: String,
}

impl ClusterPath {
    fn cluster_ref(&self) -> emco_core::placement::ClusterRef {
        emco_core::placement::ClusterRef::new(&self.provider, &self.cluster)
    }
}

/// What a request of `method` on `path` touches, for [`Principal::authorize`](crate::auth::Principal::authorize):
/// the REST API's URL layout (`/v2/...`, and the dashboard's `/ui/api/...` mirror of it) read
/// as the scopes of [`crate::auth`]. Reads are GET, HEAD and OPTIONS; a logical cloud's
/// kubeconfig is a credential and reads as a change. Paths this layout does not name belong to
/// the platform admin.
#[must_use]
pub fn target_of(method: &http::Method, path: &str) -> Target {
    let read = matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    let access = if read { Access::Read } else { Access::Write };
    let path = path.strip_suffix('/').unwrap_or(path);
    // Decoded as the router decodes path parameters, so the project checked is the one served.
    let segments: Vec<String> = path.split('/').skip(1).map(percent_decoded).collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let scope = match segments.as_slice() {
        ["healthz" | "readyz"] | ["v2", "openapi.yaml"] => Scope::Public,
        ["ui"] | ["ui", "app.js" | "app.css" | "login" | "logout"] => Scope::Public,
        ["metrics"] | ["ui", "api", "deployments" | "me"] => Scope::Shared,
        ["ui", "api", "fleet"] => Scope::Clusters,
        ["v2", rest @ ..] | ["ui", "api", rest @ ..] => match rest {
            ["projects"] => Scope::Shared,
            [
                "projects",
                project,
                ..,
                "cluster-references",
                _,
                "kubeconfig",
            ] => {
                return Target::new(Scope::Project((*project).to_owned()), Access::Write);
            }
            ["projects", project, ..] => Scope::Project((*project).to_owned()),
            ["cluster-providers", ..] => Scope::Clusters,
            ["controllers" | "clm-controllers" | "dtc-controllers", ..] => Scope::Shared,
            _ => Scope::Platform,
        },
        _ => Scope::Platform,
    };
    Target::new(scope, access)
}

/// `%XX` escapes of a path segment decoded; a malformed escape stays as it is.
fn percent_decoded(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_owned();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every route of the orchestrator, clm and dcm (CRUD, label and kv queries, approve).
pub fn router(orch: Orchestrator) -> Router {
    let limits = orch.onboarding().limits();
    let max_file = limits.max_archive.max(limits.max_kubeconfig);
    // The form's framing and metadata come on top of the file.
    let upload_limit = usize::try_from(max_file)
        .unwrap_or(usize::MAX)
        .saturating_add(1024 * 1024);
    let uploads = Router::new()
        .merge(
            FileRoutes::new(format!("{CA}/apps"), keys::APP, orch.onboarding().apps())
                .writer(objects::AppForms(orch.clone()))
                .max_file(max_file)
                .download_name(|name| format!("{name}.tgz"))
                .serve(),
        )
        .merge(
            FileRoutes::new(
                format!("{CA}/composite-profiles/{{compositeProfile}}/profiles"),
                keys::APP_PROFILE,
                orch.onboarding().app_profiles(),
            )
            .writer(objects::ProfileForms(orch.clone()))
            .max_file(max_file)
            .download_name(|name| format!("{name}.tar.gz"))
            .without_list()
            .serve(),
        )
        .route(
            &format!("{CA}/composite-profiles/{{compositeProfile}}/profiles"),
            get(objects::list_profiles),
        )
        .merge(
            FileRoutes::new(CLUSTERS, keys::CLUSTER, orch.onboarding().clusters())
                .writer(objects::ClusterForms(orch.clone()))
                .max_file(max_file)
                .download_name(|_| "kubeconfig".to_owned())
                .without_list()
                .serve(),
        )
        .route(CLUSTERS, get(objects::list_clusters))
        .layer(DefaultBodyLimit::max(upload_limit));
    let custom = Router::new()
        .route(
            "/v2/projects/{project}/composite-apps",
            get(objects::list_composite_apps).post(objects::create_composite_app),
        )
        .route(
            CA,
            get(objects::get_composite_app)
                .put(objects::put_composite_app)
                .delete(objects::delete_composite_app),
        )
        .merge(lifecycle::routes())
        .merge(dcm::routes())
        .merge(ncm::routes())
        .merge(cacerts::routes())
        .merge(uploads)
        .with_state(orch.clone());

    custom
        .merge(Routes::new("/v2/projects", keys::PROJECT).serve(orch.onboarding().projects()))
        .merge(
            Routes::new(format!("{CA}/apps/{{app}}/dependency"), keys::DEPENDENCY)
                .serve(orch.onboarding().app_dependencies()),
        )
        .merge(
            Routes::new(format!("{CA}/composite-profiles"), keys::COMPOSITE_PROFILE)
                .serve(orch.onboarding().composite_profiles()),
        )
        .merge(
            Routes::new(format!("{CA}/deployment-intent-groups"), keys::DIG)
                .serve(orch.onboarding().deployment_intent_groups()),
        )
        .merge(
            Routes::new(format!("{DIG}/intents"), keys::GROUP_INTENT)
                .list_view(objects::intent_maps)
                .collection_view("intent", objects::intent_by_name)
                .serve(orch.onboarding().dig_intents()),
        )
        .merge(
            Routes::new(
                format!("{DIG}/generic-placement-intents"),
                keys::GENERIC_PLACEMENT_INTENT,
            )
            .serve(orch.onboarding().generic_placement_intents()),
        )
        .merge(
            Routes::new(format!("{DIG}/rollout-policies"), keys::ROLLOUT_POLICY)
                .serve(orch.onboarding().rollout_policies()),
        )
        .merge(
            Routes::new(format!("{DIG}/drift-policies"), keys::DRIFT_POLICY)
                .serve(orch.onboarding().drift_policies()),
        )
        .merge(
            Routes::new(
                format!("{DIG}/generic-placement-intents/{{genericPlacementIntent}}/app-intents"),
                keys::APP_INTENT,
            )
            .collection_view("app", objects::app_intent_for_app)
            .serve(orch.onboarding().app_placement_intents()),
        )
        .merge(
            Routes::new("/v2/controllers", keys::CONTROLLER).serve(orch.onboarding().controllers()),
        )
        .merge(
            Routes::new(format!("{CLUSTERS}/{{cluster}}/networks"), keys::NETWORK)
                .serve(orch.onboarding().networks()),
        )
        .merge(
            Routes::new(
                format!("{CLUSTERS}/{{cluster}}/provider-networks"),
                keys::PROVIDER_NETWORK,
            )
            .serve(orch.onboarding().provider_networks()),
        )
        .merge(
            Routes::new("/v2/clm-controllers", keys::CLM_CONTROLLER)
                .serve(orch.onboarding().clm_controllers()),
        )
        .merge(
            Routes::new("/v2/cluster-providers", keys::CLUSTER_PROVIDER)
                .serve(orch.onboarding().cluster_providers()),
        )
        .merge(
            Routes::new(
                "/v2/cluster-providers/{clusterProvider}/cluster-sync-objects",
                crate::CLUSTER_SYNC_OBJECT,
            )
            .list_view(objects::sync_objects_masked)
            .serve(orch.onboarding().cluster_sync_objects()),
        )
        .merge(
            Routes::<ClusterLabel>::new(
                format!("{CLUSTERS}/{{cluster}}/labels"),
                keys::CLUSTER_LABEL,
            )
            .serve(orch.onboarding().cluster_labels()),
        )
        .merge(
            Routes::new(format!("{CLUSTERS}/{{cluster}}/kv-pairs"), keys::KV_PAIR)
                .item_view("key", objects::cluster_kv_value)
                .serve(orch.onboarding().kv_pairs()),
        )
        .merge(
            Routes::new("/v2/projects/{project}/logical-clouds", keys::LOGICAL_CLOUD)
                .serve(orch.onboarding().logical_clouds()),
        )
        .merge(
            Routes::new(format!("{LC}/cluster-references"), keys::CLUSTER_REFERENCE)
                .serve(orch.onboarding().cluster_references()),
        )
        .merge(
            Routes::new(format!("{LC}/user-permissions"), keys::USER_PERMISSION)
                .serve(orch.onboarding().user_permissions()),
        )
        .merge(
            Routes::new(format!("{LC}/cluster-quotas"), keys::CLUSTER_QUOTA)
                .serve(orch.onboarding().cluster_quotas()),
        )
        .merge(
            Routes::new(format!("{LC}/kv-pairs"), keys::KV_PAIR)
                .item_view("key", objects::cloud_kv_value)
                .serve(orch.onboarding().logical_cloud_kv_pairs()),
        )
        .merge(ca_cert_routes(&orch))
}

/// ca-certs' objects, at the cluster-provider and the project level.
fn ca_cert_routes(orch: &Orchestrator) -> Router {
    const CP: &str = "/v2/cluster-providers/{clusterProvider}/ca-certs";
    const PROJECT: &str = "/v2/projects/{project}/ca-certs";
    let o = orch.onboarding();
    Router::new()
        .merge(Routes::new(CP, keys::CA_CERT).serve(o.ca_certs()))
        .merge(
            Routes::new(
                format!("{CP}/{{caCert}}/clusters"),
                keys::CA_CERT_CLUSTER_GROUP,
            )
            .serve(o.ca_cert_cluster_groups()),
        )
        .merge(Routes::new(PROJECT, keys::CA_CERT).serve(o.ca_certs()))
        .merge(
            Routes::new(
                format!("{PROJECT}/{{caCert}}/logical-clouds"),
                keys::CA_CERT_LOGICAL_CLOUD,
            )
            .serve(o.ca_cert_logical_clouds()),
        )
        .merge(
            Routes::new(
                format!("{PROJECT}/{{caCert}}/logical-clouds/{{caCertLogicalCloud}}/clusters"),
                keys::CA_CERT_CLUSTER_GROUP,
            )
            .serve(o.ca_cert_cluster_groups()),
        )
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;

    #[test]
    fn urls_read_as_their_scopes() {
        let project = |p: &str| Scope::Project(p.to_owned());
        let cases = [
            (Method::GET, "/healthz", Scope::Public, Access::Read),
            (Method::GET, "/ui/", Scope::Public, Access::Read),
            (Method::POST, "/ui/login", Scope::Public, Access::Write),
            (Method::GET, "/v2/openapi.yaml", Scope::Public, Access::Read),
            (Method::GET, "/v2/projects", Scope::Shared, Access::Read),
            (Method::POST, "/v2/projects/", Scope::Shared, Access::Write),
            (
                Method::DELETE,
                "/v2/projects/p1",
                project("p1"),
                Access::Write,
            ),
            (
                Method::GET,
                "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/d/status",
                project("p1"),
                Access::Read,
            ),
            // The router decodes escapes in names; so does the check.
            (
                Method::GET,
                "/v2/projects/p%31/composite-apps",
                project("p1"),
                Access::Read,
            ),
            (
                Method::GET,
                "/v2/projects/p1/logical-clouds/lc/cluster-references/r/kubeconfig",
                project("p1"),
                Access::Write,
            ),
            (
                Method::GET,
                "/v2/cluster-providers/cp/clusters/c1",
                Scope::Clusters,
                Access::Read,
            ),
            (
                Method::POST,
                "/v2/controllers",
                Scope::Shared,
                Access::Write,
            ),
            (
                Method::GET,
                "/v2/dtc-controllers/nps",
                Scope::Shared,
                Access::Read,
            ),
            (Method::GET, "/metrics", Scope::Shared, Access::Read),
            (Method::GET, "/ui/api/fleet", Scope::Clusters, Access::Read),
            (
                Method::GET,
                "/ui/api/deployments",
                Scope::Shared,
                Access::Read,
            ),
            (Method::GET, "/ui/api/me", Scope::Shared, Access::Read),
            (
                Method::GET,
                "/ui/api/projects/p2/composite-apps/ca/v1/deployment-intent-groups/d/stream",
                project("p2"),
                Access::Read,
            ),
            (
                Method::GET,
                "/ui/api/cluster-providers/cp/clusters/c1",
                Scope::Clusters,
                Access::Read,
            ),
            (
                Method::GET,
                "/v2/something-new",
                Scope::Platform,
                Access::Read,
            ),
            (Method::GET, "/ui/other", Scope::Platform, Access::Read),
            (
                Method::GET,
                "//v2/projects/p1",
                Scope::Platform,
                Access::Read,
            ),
        ];
        for (method, path, scope, access) in cases {
            assert_eq!(
                target_of(&method, path),
                Target::new(scope, access),
                "{method} {path}"
            );
        }
        assert_eq!(percent_decoded("a%2Fb%zz%4"), "a/b%zz%4");
    }
}
