//! EMCO's REST API v2 for the orchestrator, clm and dcm objects, over an [`Orchestrator`].
//!
//! The lifecycle routes live beside their operations: [`crate::lifecycle`] (DIG instantiate,
//! terminate, ...), [`crate::status`] (DIG status) and [`crate::dcm`] (logical clouds).

use std::collections::{BTreeMap, HashMap};

use axum::Router;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use emco_appcontext::ResourceKey;
use emco_controller_sdk::rest::multipart::{MultipartForm, UploadedFile};
use emco_controller_sdk::rest::{ApiError, EmcoJson, Representation, Routes, json_response};
use emco_core::Error;
use emco_core::model::{App, AppProfile, Cluster, ClusterLabel, CompositeApp, DigIntent, KvPair};
use emco_core::placement::AppPlacementIntent;
use http::{HeaderMap, StatusCode};

use crate::{Orchestrator, keys, wording};

type Params = Path<HashMap<String, String>>;
type Answer = Result<Response, ApiError>;

/// `CA` of EMCO.md: a composite app's URL.
pub const CA: &str = "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}";
/// `DIG` of EMCO.md: a deployment intent group's URL.
pub const DIG: &str = "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}/deployment-intent-groups/{deploymentIntentGroup}";
const CLUSTERS: &str = "/v2/cluster-providers/{clusterProvider}/clusters";
const LC: &str = "/v2/projects/{project}/logical-clouds/{logicalCloud}";

/// Every route of the orchestrator, clm and dcm (CRUD, label and kv queries, approve).
pub fn router(orch: Orchestrator) -> Router {
    let upload_limit = usize::try_from(orch.limits().max_archive.max(orch.limits().max_kubeconfig))
        .unwrap_or(usize::MAX)
        .saturating_add(1024 * 1024);
    let uploads = Router::new()
        .route(&format!("{CA}/apps"), get(list_apps).post(create_app))
        .route(
            &format!("{CA}/apps/{{app}}"),
            get(get_app).put(put_app).delete(delete_app),
        )
        .route(
            &format!("{CA}/composite-profiles/{{compositeProfile}}/profiles"),
            get(list_profiles).post(create_profile),
        )
        .route(
            &format!("{CA}/composite-profiles/{{compositeProfile}}/profiles/{{appProfile}}"),
            get(get_profile).put(put_profile).delete(delete_profile),
        )
        .route(CLUSTERS, get(list_clusters).post(create_cluster))
        .route(
            &format!("{CLUSTERS}/{{cluster}}"),
            get(get_cluster).put(put_cluster).delete(delete_cluster),
        )
        .layer(DefaultBodyLimit::max(upload_limit));
    let custom = Router::new()
        .route(
            "/v2/projects/{project}/composite-apps",
            get(list_composite_apps).post(create_composite_app),
        )
        .route(
            CA,
            get(get_composite_app)
                .put(put_composite_app)
                .delete(delete_composite_app),
        )
        .route(&format!("{DIG}/approve"), post(approve))
        .merge(crate::lifecycle::routes())
        .merge(crate::status::routes())
        .merge(crate::dcm::routes())
        .merge(crate::ncm::routes())
        .merge(uploads)
        .with_state(orch.clone());

    custom
        .merge(Routes::new("/v2/projects", keys::PROJECT).serve(orch.projects()))
        .merge(
            Routes::new(format!("{CA}/apps/{{app}}/dependency"), keys::DEPENDENCY)
                .serve(orch.app_dependencies()),
        )
        .merge(
            Routes::new(format!("{CA}/composite-profiles"), keys::COMPOSITE_PROFILE)
                .serve(orch.composite_profiles()),
        )
        .merge(
            Routes::new(format!("{CA}/deployment-intent-groups"), keys::DIG)
                .serve(orch.deployment_intent_groups()),
        )
        .merge(
            Routes::new(format!("{DIG}/intents"), keys::GROUP_INTENT)
                .list_view(intent_maps)
                .collection_view("intent", intent_by_name)
                .serve(orch.dig_intents()),
        )
        .merge(
            Routes::new(
                format!("{DIG}/generic-placement-intents"),
                keys::GENERIC_PLACEMENT_INTENT,
            )
            .serve(orch.generic_placement_intents()),
        )
        .merge(
            Routes::new(
                format!("{DIG}/generic-placement-intents/{{genericPlacementIntent}}/app-intents"),
                keys::APP_INTENT,
            )
            .collection_view("app", app_intent_for_app)
            .serve(orch.app_placement_intents()),
        )
        .merge(Routes::new("/v2/controllers", keys::CONTROLLER).serve(orch.controllers()))
        .merge(
            Routes::new(format!("{CLUSTERS}/{{cluster}}/networks"), keys::NETWORK)
                .serve(orch.networks()),
        )
        .merge(
            Routes::new(
                format!("{CLUSTERS}/{{cluster}}/provider-networks"),
                keys::PROVIDER_NETWORK,
            )
            .serve(orch.provider_networks()),
        )
        .merge(
            Routes::new("/v2/clm-controllers", keys::CLM_CONTROLLER).serve(orch.clm_controllers()),
        )
        .merge(
            Routes::new("/v2/cluster-providers", keys::CLUSTER_PROVIDER)
                .serve(orch.cluster_providers()),
        )
        .merge(
            Routes::new(
                "/v2/cluster-providers/{clusterProvider}/cluster-sync-objects",
                crate::CLUSTER_SYNC_OBJECT,
            )
            .serve(orch.cluster_sync_objects()),
        )
        .merge(
            Routes::<ClusterLabel>::new(
                format!("{CLUSTERS}/{{cluster}}/labels"),
                keys::CLUSTER_LABEL,
            )
            .serve(orch.cluster_labels()),
        )
        .merge(
            Routes::new(format!("{CLUSTERS}/{{cluster}}/kv-pairs"), keys::KV_PAIR)
                .item_view("key", cluster_kv_value)
                .serve(orch.kv_pairs()),
        )
        .merge(
            Routes::new("/v2/projects/{project}/logical-clouds", keys::LOGICAL_CLOUD)
                .serve(orch.logical_clouds()),
        )
        .merge(
            Routes::new(format!("{LC}/cluster-references"), keys::CLUSTER_REFERENCE)
                .serve(orch.cluster_references()),
        )
        .merge(
            Routes::new(format!("{LC}/user-permissions"), keys::USER_PERMISSION)
                .serve(orch.user_permissions()),
        )
        .merge(
            Routes::new(format!("{LC}/cluster-quotas"), keys::CLUSTER_QUOTA)
                .serve(orch.cluster_quotas()),
        )
        .merge(
            Routes::new(format!("{LC}/kv-pairs"), keys::KV_PAIR)
                .item_view("key", cloud_kv_value)
                .serve(orch.logical_cloud_kv_pairs()),
        )
}

/// `GET .../intents`: only the intents' maps, `{"intent": [...]}`, with `null` for none
/// (src/orchestrator/pkg/module/add_intents.go `GetAllIntents`).
fn intent_maps(items: &[DigIntent]) -> serde_json::Value {
    let maps: Vec<&BTreeMap<String, String>> = items.iter().map(|i| &i.spec.intent).collect();
    if maps.is_empty() {
        serde_json::json!({ "intent": null })
    } else {
        serde_json::json!({ "intent": maps })
    }
}

/// `GET .../intents/?intent=NAME`: that intent's spec
/// (src/orchestrator/api/add_intents_handler.go `getIntentByNameHandler`, whose empty-name text
/// says appName).
fn intent_by_name(
    items: &[DigIntent],
    query: &HashMap<String, String>,
) -> emco_core::Result<serde_json::Value> {
    let name = query.get("intent").map_or("", String::as_str);
    if name.is_empty() {
        return Err(Error::invalid("Missing appName in GET request"));
    }
    let found = items
        .iter()
        .find(|i| i.metadata.name == name)
        .ok_or_else(|| Error::not_found("Intent not found"))?;
    Ok(serde_json::json!({ "intent": found.spec.intent }))
}

/// `GET .../app-intents/?app=...`: EMCO's route needs `app` but its handler reads `app-name`,
/// and answers an empty spec when no intent places that app
/// (src/orchestrator/api/app_intent_handler.go `getAllIntentsByAppHandler`).
fn app_intent_for_app(
    items: &[AppPlacementIntent],
    query: &HashMap<String, String>,
) -> emco_core::Result<serde_json::Value> {
    let app = query.get("app-name").map_or("", String::as_str);
    if app.is_empty() {
        return Err(Error::invalid("Missing appName in GET request"));
    }
    match items.iter().find(|i| i.spec.app == app) {
        Some(found) => serde_json::to_value(&found.spec)
            .map_err(|e| Error::internal("cannot serialize an intent").with_source(e)),
        None => Ok(serde_json::json!({ "intent": {} })),
    }
}

/// `GET .../kv-pairs/{kvPair}?key=K`: `{"value": V}`.
fn kv_value(kv: &KvPair, key: &str) -> Option<serde_json::Value> {
    serde_json::to_value(kv.value_of(key)?).ok()
}

/// A cluster kv-pair's `?key=` (src/clm/pkg/cluster/cluster.go `GetClusterKvPairsValue`, clm's
/// `Cluster KV pair key value not found`).
fn cluster_kv_value(kv: &KvPair, key: &str) -> emco_core::Result<serde_json::Value> {
    kv_value(kv, key).ok_or_else(|| Error::not_found("Cluster KV pair key value not found"))
}

/// A logical cloud kv-pair's `?key=` (ours: dcm serves no such query).
fn cloud_kv_value(kv: &KvPair, key: &str) -> emco_core::Result<serde_json::Value> {
    kv_value(kv, key).ok_or_else(|| {
        Error::not_found(format!("kvPair {:?} has no key {key:?}", kv.metadata.name))
    })
}

fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, ApiError> {
    params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| Error::invalid(format!("path parameter {name} is missing")).into())
}

fn ca_key(p: &HashMap<String, String>) -> Result<ResourceKey, ApiError> {
    Ok(keys::composite_app(
        param(p, "project")?,
        param(p, "compositeApp")?,
        param(p, "compositeAppVersion")?,
    ))
}

fn cp_key(p: &HashMap<String, String>) -> Result<ResourceKey, ApiError> {
    Ok(ca_key(p)?.child(keys::COMPOSITE_PROFILE, param(p, "compositeProfile")?))
}

async fn read_form(
    orch: &Orchestrator,
    form: Result<Multipart, MultipartRejection>,
) -> Result<MultipartForm, ApiError> {
    let form = form.map_err(|r| ApiError::with_status(StatusCode::BAD_REQUEST, r.body_text()))?;
    let max = orch.limits().max_archive.max(orch.limits().max_kubeconfig);
    MultipartForm::read(form, max).await
}

/// EMCO's answer to a form without its `file` part: `r.FormFile("file")` fails
/// (src/orchestrator/api/apphandler.go, app_profilehandler.go, src/clm/api/clusterhandler.go).
fn no_file() -> ApiError {
    ApiError::with_status(StatusCode::UNPROCESSABLE_ENTITY, "Unable to process file")
}

fn required_file(form: &MultipartForm) -> Result<&UploadedFile, ApiError> {
    form.file().ok_or_else(no_file)
}

/// A cluster's kubeconfig: required unless the cluster is a GitOps one (clm's
/// `createClusterHandler` reads the file only when `spec.gitOps.gitOpsType` is empty).
fn cluster_file<'a>(
    form: &'a MultipartForm,
    cluster: &Cluster,
) -> Result<Option<&'a UploadedFile>, ApiError> {
    match form.file() {
        None if cluster.needs_kubeconfig() => Err(no_file()),
        file => Ok(file),
    }
}

// ---- composite apps ----

async fn create_composite_app(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    EmcoJson(ca): EmcoJson<CompositeApp>,
) -> Answer {
    orch.create_composite_app(param(&p, "project")?, &ca)
        .await?;
    Ok(json_response(StatusCode::CREATED, &ca))
}

async fn list_composite_apps(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let items = orch.list_composite_apps(param(&p, "project")?).await?;
    wording::composite_app().list_response(&items)
}

async fn get_composite_app(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let ca = orch
        .get_composite_app(
            param(&p, "project")?,
            param(&p, "compositeApp")?,
            param(&p, "compositeAppVersion")?,
        )
        .await?;
    Ok(json_response(StatusCode::OK, &ca))
}

async fn put_composite_app(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    EmcoJson(ca): EmcoJson<CompositeApp>,
) -> Answer {
    let created = orch
        .put_composite_app(
            param(&p, "project")?,
            param(&p, "compositeApp")?,
            param(&p, "compositeAppVersion")?,
            &ca,
        )
        .await?;
    Ok(json_response(
        wording::composite_app().put_status(created),
        &ca,
    ))
}

async fn delete_composite_app(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    orch.delete_composite_app(
        param(&p, "project")?,
        param(&p, "compositeApp")?,
        param(&p, "compositeAppVersion")?,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- apps ----

async fn create_app(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    form: Result<Multipart, MultipartRejection>,
) -> Answer {
    let ca = ca_key(&p)?;
    let form = read_form(&orch, form).await?;
    let app: App = form.metadata()?;
    orch.create_app(&ca, &app, required_file(&form)?.path())
        .await?;
    Ok(json_response(StatusCode::CREATED, &app))
}

async fn put_app(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    form: Result<Multipart, MultipartRejection>,
) -> Answer {
    let ca = ca_key(&p)?;
    let form = read_form(&orch, form).await?;
    let app: App = form.metadata()?;
    let created = orch
        .put_app(&ca, param(&p, "app")?, &app, required_file(&form)?.path())
        .await?;
    Ok(json_response(
        orch.apps().wording().put_status(created),
        &app,
    ))
}

async fn list_apps(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let apps = orch.apps();
    apps.wording()
        .list_response(&apps.list(&ca_key(&p)?, &[]).await?)
}

async fn get_app(State(orch): State<Orchestrator>, Path(p): Params, headers: HeaderMap) -> Answer {
    let rep = Representation::from_headers(&headers)?;
    let ca = ca_key(&p)?;
    let name = param(&p, "app")?;
    let app = orch.apps().get(&ca, name).await?;
    let key = orch.apps().key(&ca, name);
    rep.respond(
        &app,
        orch.store().as_ref(),
        &key,
        keys::FILE_BLOB,
        &format!("{name}.tgz"),
    )
    .await
}

async fn delete_app(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    orch.apps().delete(&ca_key(&p)?, param(&p, "app")?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- app profiles ----

async fn create_profile(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    form: Result<Multipart, MultipartRejection>,
) -> Answer {
    let cp = cp_key(&p)?;
    let form = read_form(&orch, form).await?;
    let profile: AppProfile = form.metadata()?;
    orch.create_app_profile(&cp, &profile, required_file(&form)?.path())
        .await?;
    Ok(json_response(StatusCode::CREATED, &profile))
}

async fn put_profile(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    form: Result<Multipart, MultipartRejection>,
) -> Answer {
    let cp = cp_key(&p)?;
    let form = read_form(&orch, form).await?;
    let profile: AppProfile = form.metadata()?;
    let created = orch
        .put_app_profile(
            &cp,
            param(&p, "appProfile")?,
            &profile,
            required_file(&form)?.path(),
        )
        .await?;
    Ok(json_response(
        orch.app_profiles().wording().put_status(created),
        &profile,
    ))
}

async fn list_profiles(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Answer {
    let cp = cp_key(&p)?;
    if let Some(app) = q.get("app") {
        let rep = Representation::from_headers(&headers)?;
        let profile = orch.profile_for_app(&cp, app).await?;
        let key = orch.app_profiles().key(&cp, &profile.metadata.name);
        let file = format!("{}.tar.gz", profile.metadata.name);
        return rep
            .respond(
                &profile,
                orch.store().as_ref(),
                &key,
                keys::FILE_BLOB,
                &file,
            )
            .await;
    }
    let profiles = orch.app_profiles();
    profiles
        .wording()
        .list_response(&profiles.list(&cp, &[]).await?)
}

async fn get_profile(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    headers: HeaderMap,
) -> Answer {
    let rep = Representation::from_headers(&headers)?;
    let cp = cp_key(&p)?;
    let name = param(&p, "appProfile")?;
    let profile = orch.app_profiles().get(&cp, name).await?;
    let key = orch.app_profiles().key(&cp, name);
    rep.respond(
        &profile,
        orch.store().as_ref(),
        &key,
        keys::FILE_BLOB,
        &format!("{name}.tar.gz"),
    )
    .await
}

async fn delete_profile(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    orch.app_profiles()
        .delete(&cp_key(&p)?, param(&p, "appProfile")?)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- clusters ----

async fn create_cluster(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    form: Result<Multipart, MultipartRejection>,
) -> Answer {
    let form = read_form(&orch, form).await?;
    let cluster: Cluster = form.metadata()?;
    let file = cluster_file(&form, &cluster)?;
    orch.create_cluster(
        param(&p, "clusterProvider")?,
        &cluster,
        file.map(UploadedFile::path),
    )
    .await?;
    Ok(json_response(StatusCode::CREATED, &cluster))
}

async fn put_cluster(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    form: Result<Multipart, MultipartRejection>,
) -> Answer {
    let form = read_form(&orch, form).await?;
    let cluster: Cluster = form.metadata()?;
    let file = cluster_file(&form, &cluster)?;
    let created = orch
        .put_cluster(
            param(&p, "clusterProvider")?,
            param(&p, "cluster")?,
            &cluster,
            file.map(UploadedFile::path),
        )
        .await?;
    Ok(json_response(
        orch.clusters().wording().put_status(created),
        &cluster,
    ))
}

async fn list_clusters(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    Query(q): Query<HashMap<String, String>>,
) -> Answer {
    let provider = param(&p, "clusterProvider")?;
    if let Some(label) = q.get("label") {
        return Ok(json_response(
            StatusCode::OK,
            &orch.clusters_with_label(provider, label).await?,
        ));
    }
    if q.get("withLabels")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Ok(json_response(
            StatusCode::OK,
            &orch.clusters_with_labels(provider).await?,
        ));
    }
    let clusters = orch.clusters();
    clusters.wording().list_response(
        &clusters
            .list(&keys::cluster_provider(provider), &[])
            .await?,
    )
}

async fn get_cluster(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    headers: HeaderMap,
) -> Answer {
    let rep = Representation::from_headers(&headers)?;
    let provider = keys::cluster_provider(param(&p, "clusterProvider")?);
    let name = param(&p, "cluster")?;
    let cluster = orch.clusters().get(&provider, name).await?;
    let key = orch.clusters().key(&provider, name);
    rep.respond(
        &cluster,
        orch.store().as_ref(),
        &key,
        keys::FILE_BLOB,
        "kubeconfig",
    )
    .await
}

async fn delete_cluster(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let (provider, cluster) = (param(&p, "clusterProvider")?, param(&p, "cluster")?);
    crate::ncm::check_cluster_delete(&orch, &keys::cluster(provider, cluster)).await?;
    orch.clusters()
        .delete(&keys::cluster_provider(provider), cluster)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- lifecycle ----

async fn approve(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let dig = ca_key(&p)?.child(keys::DIG, param(&p, "deploymentIntentGroup")?);
    orch.approve(&dig).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}
