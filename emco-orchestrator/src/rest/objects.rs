//! Composite apps, apps, app profiles and clusters (the objects with their own handlers: JSON
//! keyed by name and version, or multipart with a file), and the query views of intents and
//! kv-pairs that the generic routes serve.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use emco_appcontext::collection::Collection;
use emco_core::Error;
use emco_core::model::{App, AppProfile, Cluster, CompositeApp, DigIntent, KvPair};
use emco_core::placement::AppPlacementIntent;
use emco_rest::multipart::{MultipartForm, UploadedFile};
use emco_rest::{
    ApiError, EmcoJson, FormWriter, Representation, json_response, list_response, put_status,
};
use emco_store::ResourceKey;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;

use super::{Answer, CaPath, ProjectPath, ProviderPath};
use crate::{Orchestrator, keys, wording};

/// A composite profile's URL (its app profiles' collection).
#[derive(Debug, Deserialize)]
pub(super) struct ProfilesPath {
    #[serde(flatten)]
    ca: CaPath,
    #[serde(rename = "compositeProfile")]
    composite_profile: String,
}

impl ProfilesPath {
    fn key(&self) -> ResourceKey {
        self.ca
            .key()
            .child(keys::COMPOSITE_PROFILE, &self.composite_profile)
    }
}

/// `GET .../intents`: only the intents' maps, `{"intent": [...]}`, with `null` for none
/// (src/orchestrator/pkg/module/add_intents.go `GetAllIntents`).
pub(super) fn intent_maps(items: &[DigIntent]) -> serde_json::Value {
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
pub(super) fn intent_by_name(
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
pub(super) fn app_intent_for_app(
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

/// `GET .../cluster-sync-objects`: the objects with their credentials (tokens, passwords,
/// URLs with user info) masked; a GET of one object answers them whole, as EMCO does.
pub(super) fn sync_objects_masked(items: &[KvPair]) -> serde_json::Value {
    let mut list = serde_json::to_value(items).unwrap_or_else(|_| serde_json::json!([]));
    for item in list.as_array_mut().into_iter().flatten() {
        emco_appcontext::sealed::mask_secret_fields(item);
    }
    list
}

/// `GET .../kv-pairs/{kvPair}?key=K`: `{"value": V}`.
fn kv_value(kv: &KvPair, key: &str) -> Option<serde_json::Value> {
    serde_json::to_value(kv.value_of(key)?).ok()
}

/// A cluster kv-pair's `?key=` (src/clm/pkg/cluster/cluster.go `GetClusterKvPairsValue`, clm's
/// `Cluster KV pair key value not found`).
pub(super) fn cluster_kv_value(kv: &KvPair, key: &str) -> emco_core::Result<serde_json::Value> {
    kv_value(kv, key).ok_or_else(|| Error::not_found("Cluster KV pair key value not found"))
}

/// A logical cloud kv-pair's `?key=` (ours: dcm serves no such query).
pub(super) fn cloud_kv_value(kv: &KvPair, key: &str) -> emco_core::Result<serde_json::Value> {
    kv_value(kv, key).ok_or_else(|| {
        Error::not_found(format!("kvPair {:?} has no key {key:?}", kv.metadata.name))
    })
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

pub(super) async fn create_composite_app(
    State(orch): State<Orchestrator>,
    Path(p): Path<ProjectPath>,
    EmcoJson(ca): EmcoJson<CompositeApp>,
) -> Answer {
    orch.onboarding()
        .create_composite_app(&p.project, &ca)
        .await?;
    Ok(json_response(StatusCode::CREATED, &ca))
}

pub(super) async fn list_composite_apps(
    State(orch): State<Orchestrator>,
    Path(p): Path<ProjectPath>,
) -> Answer {
    let items = orch.onboarding().list_composite_apps(&p.project).await?;
    list_response(&wording::composite_app(), &items)
}

pub(super) async fn get_composite_app(
    State(orch): State<Orchestrator>,
    Path(p): Path<CaPath>,
) -> Answer {
    let ca = orch
        .onboarding()
        .get_composite_app(&p.project, &p.composite_app, &p.version)
        .await?;
    Ok(json_response(StatusCode::OK, &ca))
}

pub(super) async fn put_composite_app(
    State(orch): State<Orchestrator>,
    Path(p): Path<CaPath>,
    EmcoJson(ca): EmcoJson<CompositeApp>,
) -> Answer {
    let created = orch
        .onboarding()
        .put_composite_app(&p.project, &p.composite_app, &p.version, &ca)
        .await?;
    Ok(json_response(
        put_status(&wording::composite_app(), created),
        &ca,
    ))
}

pub(super) async fn delete_composite_app(
    State(orch): State<Orchestrator>,
    Path(p): Path<CaPath>,
) -> Answer {
    orch.onboarding()
        .delete_composite_app(&p.project, &p.composite_app, &p.version)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- apps, app profiles and clusters: multipart, one upload path ----

/// Apps: the chart is required and checked (src/orchestrator/api/apphandler.go).
pub(super) struct AppForms(pub(super) Orchestrator);

#[async_trait]
impl FormWriter<App> for AppForms {
    async fn write(
        &self,
        _: &Collection<App>,
        ca: &ResourceKey,
        url_name: Option<&str>,
        app: &App,
        form: &MultipartForm,
    ) -> Result<bool, ApiError> {
        let chart = required_file(form)?.path();
        Ok(match url_name {
            None => self
                .0
                .onboarding()
                .create_app(ca, app, chart)
                .await
                .map(|()| true)?,
            Some(name) => self.0.onboarding().put_app(ca, name, app, chart).await?,
        })
    }
}

/// App profiles: the profile archive is required and checked
/// (src/orchestrator/api/app_profilehandler.go).
pub(super) struct ProfileForms(pub(super) Orchestrator);

#[async_trait]
impl FormWriter<AppProfile> for ProfileForms {
    async fn write(
        &self,
        _: &Collection<AppProfile>,
        cp: &ResourceKey,
        url_name: Option<&str>,
        profile: &AppProfile,
        form: &MultipartForm,
    ) -> Result<bool, ApiError> {
        let file = required_file(form)?.path();
        Ok(match url_name {
            None => self
                .0
                .onboarding()
                .create_app_profile(cp, profile, file)
                .await
                .map(|()| true)?,
            Some(name) => {
                self.0
                    .onboarding()
                    .put_app_profile(cp, name, profile, file)
                    .await?
            }
        })
    }
}

/// Clusters: the kubeconfig is required unless the cluster is a GitOps one
/// (src/clm/api/clusterhandler.go).
pub(super) struct ClusterForms(pub(super) Orchestrator);

#[async_trait]
impl FormWriter<Cluster> for ClusterForms {
    async fn write(
        &self,
        _: &Collection<Cluster>,
        provider: &ResourceKey,
        url_name: Option<&str>,
        cluster: &Cluster,
        form: &MultipartForm,
    ) -> Result<bool, ApiError> {
        let file = cluster_file(form, cluster)?.map(UploadedFile::path);
        let provider = provider.name().unwrap_or_default();
        Ok(match url_name {
            None => self
                .0
                .onboarding()
                .create_cluster(provider, cluster, file)
                .await
                .map(|()| true)?,
            Some(name) => {
                self.0
                    .onboarding()
                    .put_cluster(provider, name, cluster, file)
                    .await?
            }
        })
    }
}

pub(super) async fn list_profiles(
    State(orch): State<Orchestrator>,
    Path(p): Path<ProfilesPath>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Answer {
    let cp = p.key();
    if let Some(app) = q.get("app") {
        let rep = Representation::from_headers(&headers)?;
        let profile = orch.onboarding().profile_for_app(&cp, app).await?;
        let key = orch
            .onboarding()
            .app_profiles()
            .key(&cp, &profile.metadata.name);
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
    let profiles = orch.onboarding().app_profiles();
    list_response(profiles.wording(), &profiles.list(&cp, &[]).await?)
}

pub(super) async fn list_clusters(
    State(orch): State<Orchestrator>,
    Path(p): Path<ProviderPath>,
    Query(q): Query<HashMap<String, String>>,
) -> Answer {
    let provider = &p.provider;
    if let Some(label) = q.get("label") {
        return Ok(json_response(
            StatusCode::OK,
            &orch
                .onboarding()
                .clusters_with_label(provider, label)
                .await?,
        ));
    }
    if q.get("withLabels")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Ok(json_response(
            StatusCode::OK,
            &orch.onboarding().clusters_with_labels(provider).await?,
        ));
    }
    let clusters = orch.onboarding().clusters();
    list_response(
        clusters.wording(),
        &clusters
            .list(&keys::cluster_provider(provider), &[])
            .await?,
    )
}
