//! The status of deployment intent groups (`GET DIG/status`, EMCO.md section 7), read from their
//! AppContexts.
//!
//! [`Status::deployment`] reads the whole context of the group in one prefix listing and
//! answers every query option of EMCO:
//!
//! - the context: `instance=` (any context of the group's history), else the latest one its
//!   lifecycle record names (an update's new context, or the terminated one);
//! - `deployedStatus`: the context's status (`Instantiating`, `Instantiated`, `Terminated`, ...),
//!   always given, so that one query tells both what rsync did and what the clusters report;
//! - `status=deployed`: each resource's rsync status (`Pending` when rsync has not written one,
//!   as EMCO), counted in `deployedCounts`;
//! - `status=ready`: each resource's readiness from the cluster's collected status
//!   that rsync records as it observes the objects (`Ready`, `NotReady`, or `NotPresent` when
//!   never seen or deleted), counted in `readyCounts`, and `readyStatus` `Ready` when every
//!   counted resource is ready;
//! - `output=summary` leaves out `apps`; `output=detail` adds each resource's manifest
//!   (deployed) or its observed entry `{present, ready, reason}` (ready);
//! - filters `app=`, `cluster=`, `resource=` (the object's name) narrow the apps and the counts;
//!   clusters and apps left without resources are omitted;
//! - list modes `apps`, `clusters` (filtered by app), `resources` (filtered by app and cluster);
//! - without `status=`, the deprecated `type=rsync` (the default, as EMCO's) or `type=cluster`:
//!   the deployed or ready answer in the old names (`status`, `rsyncStatus` or `clusterStatus`
//!   counts and per resource, the connectivity as the cluster's `readyStatus`).
//!
//! A group never instantiated answers with its lifecycle record and nothing else, as EMCO.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use emco_appcontext::context::{ContextKey, ResourceStatusRecord};
use emco_appcontext::keys::Keyed;
use emco_appcontext::{AppContext, AppContextStore};
use emco_core::lifecycle::{RsyncStatus, StateInfo};
use emco_core::model::status::{
    AppStatus, AppsList, ClusterEntry, ClusterStatus, ClustersByApp, ClustersOfApp, DigStatus, Gvk,
    ResourceEntry, ResourceStatus, ResourcesByApp, ResourcesOfApp, StatusMode, StatusOutput,
    StatusQuery, StatusResponse, StatusType, Why,
};
use emco_core::{ContextId, DigRef, Error, Result};
use emco_rsync::connector::Resource;
use serde::Deserialize;
use serde_json::Value;

use crate::runtime::Core;
use crate::{ClusterNetworks, Deployments, LogicalClouds, load_state};

/// The ready status of a resource that is ready.
pub const READY: &str = "Ready";
/// The ready status of a resource that is present but not ready.
pub const NOT_READY: &str = "NotReady";
/// The ready status of a resource that is not on its cluster (not seen yet, or deleted).
pub const NOT_PRESENT: &str = "NotPresent";

/// The context a query reports on: `instance` when given (it must belong to the group's
/// history), else the latest context of the lifecycle record; `None` before any instantiate.
pub(crate) fn context_of(state: &StateInfo, instance: Option<&str>) -> Result<Option<u64>> {
    let parse = |id: &str| {
        id.parse::<ContextId>()
            .map(ContextId::get)
            .map_err(|e| e.with_field("instance"))
    };
    if let Some(instance) = instance {
        let id = parse(instance)?;
        let known =
            state.statusctxid == instance || state.actions.iter().any(|a| a.instance == instance);
        if !known {
            return Err(Error::not_found(format!(
                "instance {instance} is not a context of this deployment intent group"
            )));
        }
        return Ok(Some(id));
    }
    let latest = state
        .current_context()
        .or(Some(state.statusctxid.as_str()).filter(|s| !s.is_empty()));
    latest.map(parse).transpose()
}

/// One resource of a cluster as the context holds it.
#[derive(Debug, Default)]
struct ResourceSnap {
    yaml: Option<String>,
    status: Option<String>,
    warnings: Vec<String>,
    /// Why it failed or retries: rsync's `Reason` and `Message`.
    why: Option<(String, String)>,
    /// While it retries: the tries so far and when the next is due.
    retry: Option<(u32, String)>,
}

/// One cluster of an app as the context holds it.
#[derive(Debug, Default)]
struct ClusterSnap {
    readystatus: Option<String>,
    collected: Option<Value>,
    order: Vec<String>,
    /// Hooks that run only when the app is deleted (`pre-delete`, `post-delete`).
    delete_hooks: BTreeSet<String>,
    resources: BTreeMap<String, ResourceSnap>,
}

/// What a status query needs of one AppContext, read in one prefix listing.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    status: Option<String>,
    app_order: Vec<String>,
    apps: BTreeMap<String, BTreeMap<String, ClusterSnap>>,
}

/// A context's status record (`{"Status": ...}`), read as text.
#[derive(Deserialize)]
struct StatusDoc {
    #[serde(rename = "Status")]
    status: String,
}

/// The resources that are only `pre-delete` / `post-delete` hooks, of a cluster's hook groups
/// (`resdependency`).
fn delete_only_hooks(groups: &BTreeMap<String, Vec<String>>) -> BTreeSet<String> {
    let is_delete = |g: &str| matches!(g, "pre-delete" | "post-delete");
    let other: BTreeSet<&String> = groups
        .iter()
        .filter(|(g, _)| !is_delete(g))
        .flat_map(|(_, names)| names)
        .collect();
    groups
        .iter()
        .filter(|(g, _)| is_delete(g))
        .flat_map(|(_, names)| names)
        .filter(|n| !other.contains(n))
        .cloned()
        .collect()
}

/// Decodes a JSON string whose text is JSON again (EMCO's instructions).
fn instruction<T: for<'de> Deserialize<'de>>(raw: &[u8]) -> Option<T> {
    let text: String = serde_json::from_slice(raw).ok()?;
    serde_json::from_str(&text).ok()
}

/// The snapshot of `cluster` of `app`, created on first sight.
fn cluster_of<'s>(
    apps: &'s mut BTreeMap<String, BTreeMap<String, ClusterSnap>>,
    app: &str,
    cluster: &str,
) -> &'s mut ClusterSnap {
    apps.entry(app.to_owned())
        .or_default()
        .entry(cluster.to_owned())
        .or_default()
}

impl Snapshot {
    /// Reads context `id`.
    ///
    /// # Errors
    /// NotFound when the context does not exist; the store's errors.
    pub(crate) async fn read(store: &Arc<dyn AppContextStore>, id: u64) -> Result<Self> {
        let root = AppContext::prefix(id);
        let kvs = store.list_all(&root, false).await?;
        if !kvs.iter().any(|kv| kv.key == root) {
            return Err(Error::not_found(format!("AppContext {id} does not exist")));
        }
        let mut snap = Self::default();
        for kv in &kvs {
            let Some(key) = ContextKey::parse(&root, &kv.key) else {
                continue;
            };
            let raw = kv.value.as_ref();
            let text = || serde_json::from_slice::<String>(raw).ok();
            match key {
                ContextKey::Status => {
                    snap.status = serde_json::from_slice::<StatusDoc>(raw)
                        .ok()
                        .map(|d| d.status);
                }
                ContextKey::AppOrder => {
                    #[derive(Deserialize)]
                    struct Order {
                        apporder: Vec<String>,
                    }
                    if let Some(o) = instruction::<Order>(raw) {
                        snap.app_order = o.apporder;
                    }
                }
                ContextKey::App(app) => {
                    snap.apps.entry(app.to_owned()).or_default();
                }
                ContextKey::ReadyStatus(a, c) => {
                    cluster_of(&mut snap.apps, a, c).readystatus = text()
                }
                ContextKey::ClusterStatus(a, c) => {
                    cluster_of(&mut snap.apps, a, c).collected = serde_json::from_slice(raw).ok();
                }
                ContextKey::ResourceOrder(a, c) => {
                    #[derive(Deserialize)]
                    struct Order {
                        resorder: Vec<String>,
                    }
                    if let Some(o) = instruction::<Order>(raw) {
                        cluster_of(&mut snap.apps, a, c).order = o.resorder;
                    }
                }
                ContextKey::HookGroups(a, c) => {
                    #[derive(Deserialize)]
                    struct Hooks {
                        resdependency: BTreeMap<String, Vec<String>>,
                    }
                    if let Some(h) = instruction::<Hooks>(raw) {
                        cluster_of(&mut snap.apps, a, c).delete_hooks =
                            delete_only_hooks(&h.resdependency);
                    }
                }
                ContextKey::Resource(a, c, name) => {
                    cluster_of(&mut snap.apps, a, c)
                        .resources
                        .entry(name.to_owned())
                        .or_default()
                        .yaml = text();
                }
                ContextKey::ResourceStatus(a, c, name) => {
                    let resource = cluster_of(&mut snap.apps, a, c)
                        .resources
                        .entry(name.to_owned())
                        .or_default();
                    if let Ok(doc) = serde_json::from_slice::<ResourceStatusRecord<String>>(raw) {
                        resource.status = Some(doc.status);
                        resource.warnings = doc.warnings;
                        resource.why = doc.reason.zip(doc.message);
                        resource.retry = doc.attempts.zip(doc.next_retry);
                    }
                }
                ContextKey::Root | ContextKey::Other => {}
            }
        }
        Ok(snap)
    }

    /// Whether the context has the app `app`.
    pub(crate) fn has_app(&self, app: &str) -> bool {
        self.apps.contains_key(app)
    }

    /// The context's status (`Created` when rsync never wrote one).
    pub(crate) fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("Created")
    }

    /// The apps in app order, then the others by name.
    fn ordered_apps(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .app_order
            .iter()
            .map(String::as_str)
            .filter(|a| self.apps.contains_key(*a))
            .collect();
        for a in self.apps.keys() {
            if !out.contains(&a.as_str()) {
                out.push(a);
            }
        }
        out
    }

    /// Every resource of every app and cluster that the filters of `query` keep, in app order
    /// and resource order.
    pub(crate) fn views(&self, query: &StatusQuery) -> Vec<AppView> {
        let mut apps = Vec::new();
        for app in self.ordered_apps() {
            if !query.matches_app(app) {
                continue;
            }
            let mut clusters = Vec::new();
            for (id, c) in &self.apps[app] {
                let (provider, cluster) = id.split_once('+').unwrap_or(("", id));
                if !query.matches_cluster(provider, cluster) {
                    continue;
                }
                let mut names: Vec<&str> = c
                    .order
                    .iter()
                    .map(String::as_str)
                    .filter(|n| c.resources.contains_key(*n))
                    .collect();
                for n in c.resources.keys() {
                    if !names.contains(&n.as_str()) {
                        names.push(n);
                    }
                }
                // Delete hooks exist on the cluster only while the app is being removed; before
                // that they would count as never deployed and never ready.
                let removing = matches!(
                    self.status(),
                    "PreTerminate" | "Terminating" | "Terminated" | "TerminateFailed"
                );
                names.retain(|n| {
                    removing || !c.delete_hooks.contains(*n) || c.order.iter().any(|o| o == n)
                });
                let resources: Vec<ResourceView> = names
                    .into_iter()
                    .map(|n| ResourceView::new(n, &c.resources[n], c.collected.as_ref()))
                    .filter(|r| query.matches_resource(&r.name))
                    .collect();
                clusters.push(ClusterView {
                    provider: provider.to_owned(),
                    cluster: cluster.to_owned(),
                    connectivity: c.readystatus.clone().unwrap_or_else(|| "Unknown".into()),
                    resources,
                });
            }
            apps.push(AppView {
                name: app.to_owned(),
                clusters,
            });
        }
        apps
    }
}

/// An app of a status answer.
#[derive(Debug)]
pub(crate) struct AppView {
    pub(crate) name: String,
    pub(crate) clusters: Vec<ClusterView>,
}

/// A cluster of an app in a status answer.
#[derive(Debug)]
pub(crate) struct ClusterView {
    pub(crate) provider: String,
    pub(crate) cluster: String,
    pub(crate) connectivity: String,
    pub(crate) resources: Vec<ResourceView>,
}

/// A resource of a cluster in a status answer.
#[derive(Debug)]
pub(crate) struct ResourceView {
    pub(crate) name: String,
    pub(crate) gvk: Gvk,
    manifest: Option<Value>,
    pub(crate) deployed: String,
    pub(crate) ready: &'static str,
    observed: Option<Value>,
    warnings: Vec<String>,
    why: Option<(String, String)>,
    retry: Option<(u32, String)>,
}

impl ResourceView {
    fn new(key: &str, snap: &ResourceSnap, collected: Option<&Value>) -> Self {
        let parsed = snap
            .yaml
            .as_deref()
            .and_then(|y| Resource::from_yaml(y).ok());
        let (name, gvk) = match &parsed {
            Some(r) => (
                r.id().name.clone(),
                Gvk {
                    group: r.id().group().to_owned(),
                    version: r.id().version().to_owned(),
                    kind: r.id().kind.clone(),
                },
            ),
            // The key still names the object: `name+Kind`.
            None => {
                let (name, kind) = key.split_once('+').unwrap_or((key, ""));
                let gvk = Gvk {
                    kind: kind.to_owned(),
                    ..Gvk::default()
                };
                (name.to_owned(), gvk)
            }
        };
        let deployed = snap
            .status
            .clone()
            .unwrap_or_else(|| RsyncStatus::Pending.to_string());
        let observed = collected
            .and_then(|c| c.get("resources"))
            .and_then(|r| r.get(key))
            .cloned();
        let flag = |o: &Value, f: &str| o.get(f).and_then(Value::as_bool) == Some(true);
        let ready = match &observed {
            // Whatever was seen before, a deleted object is gone.
            _ if deployed == RsyncStatus::Deleted.to_string() => NOT_PRESENT,
            Some(o) if flag(o, "present") && flag(o, "ready") => READY,
            Some(o) if flag(o, "present") => NOT_READY,
            _ => NOT_PRESENT,
        };
        Self {
            name,
            gvk,
            manifest: parsed.map(|r| r.manifest().clone()),
            deployed,
            ready,
            observed,
            warnings: snap.warnings.clone(),
            why: snap.why.clone(),
            retry: snap.retry.clone(),
        }
    }
}

/// The status service: the status of deployment intent groups, logical clouds and cluster
/// networks, once ([`Status::deployment`], [`Status::logical_cloud`],
/// [`Status::cluster_networks`]) or followed as it changes ([`Status::watch`], the
/// StatusNotify gRPC service). Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Status {
    pub(crate) core: Core,
    /// The lifecycle records of the three kinds of target.
    pub(crate) deployments: Deployments,
    pub(crate) clouds: LogicalClouds,
    pub(crate) networks: ClusterNetworks,
}

impl Status {
    pub(crate) fn new(
        core: Core,
        deployments: Deployments,
        clouds: LogicalClouds,
        networks: ClusterNetworks,
    ) -> Self {
        Self {
            core,
            deployments,
            clouds,
            networks,
        }
    }

    /// The status of the deployment intent group `dig` as `query` asks
    /// (EMCO.md section 7; the module documentation lists the semantics).
    ///
    /// # Errors
    /// NotFound when the group, or the context `instance=` names, does not exist or is not the
    /// group's; InvalidArgument for an `instance` that is not a context id or an `app` filter
    /// naming no app of the deployment; the stores' errors.
    pub async fn deployment(&self, dig: &DigRef, query: &StatusQuery) -> Result<StatusResponse> {
        let key = dig.key();
        let group = self
            .core
            .objects
            .deployment_intent_groups()
            .get(&key.parent().unwrap_or_default(), &dig.dig)
            .await?;
        let state = load_state(self.core.store().as_ref(), &key).await?;
        let DigRef {
            project,
            composite_app,
            version,
            dig: name,
        } = dig.clone();
        let snapshot = match context_of(&state, query.instance.as_deref())? {
            Some(id) => Some(Snapshot::read(self.core.contexts(), id).await?),
            None => None,
        };
        // Only the full status refuses an app filter naming no app of the deployment; the list
        // queries drop it (src/orchestrator/pkg/status/status_helper.go).
        if let Some(snap) = &snapshot
            && query.mode == StatusMode::Full
        {
            for app in &query.apps {
                if !snap.has_app(app) {
                    return Err(Error::invalid(format!(
                        "Filter app {app} not in list of apps for composite app {composite_app}"
                    )));
                }
            }
        }
        let views = snapshot
            .as_ref()
            .map(|s| s.views(query))
            .unwrap_or_default();
        let full = DigStatus {
            project,
            composite_app,
            composite_app_version: version,
            composite_profile: group.spec.composite_profile,
            name,
            states: state,
            ..DigStatus::default()
        };
        Ok(respond(query, full, snapshot.as_ref(), views))
    }
}

/// The answer `query.mode` asks for, from the views of a context (`snapshot` is `None` before
/// any instantiate): the list modes take the name of `full`; the full answer is `full` (its
/// names and lifecycle record) with the context's status, the counts and the resources.
pub(crate) fn respond(
    query: &StatusQuery,
    full: DigStatus,
    snapshot: Option<&Snapshot>,
    views: Vec<AppView>,
) -> StatusResponse {
    let name = full.name.clone();
    match query.mode {
        StatusMode::Apps => StatusResponse::Apps(AppsList {
            name,
            apps: snapshot
                .map(|s| s.ordered_apps().into_iter().map(str::to_owned).collect())
                .unwrap_or_default(),
        }),
        StatusMode::Clusters => StatusResponse::Clusters(ClustersByApp {
            name,
            clusters_by_app: views
                .into_iter()
                .map(|a| ClustersOfApp {
                    app: a.name,
                    clusters: a
                        .clusters
                        .into_iter()
                        .map(|c| ClusterEntry {
                            cluster_provider: c.provider,
                            cluster: c.cluster,
                        })
                        .collect(),
                })
                .collect(),
        }),
        StatusMode::Resources => StatusResponse::Resources(ResourcesByApp {
            name,
            resources_by_app: views
                .into_iter()
                .flat_map(|a| {
                    let app = a.name;
                    a.clusters.into_iter().map(move |c| ResourcesOfApp {
                        app: app.clone(),
                        cluster_provider: c.provider,
                        cluster: c.cluster,
                        resources: c
                            .resources
                            .into_iter()
                            .map(|r| ResourceEntry {
                                name: r.name,
                                gvk: r.gvk,
                            })
                            .collect(),
                    })
                })
                .collect(),
        }),
        StatusMode::Full => {
            StatusResponse::Full(Box::new(full_answer(query, full, snapshot, views)))
        }
    }
}

/// The full answer for a lifecycle of its own contexts (ncm's cluster networks, ca-certs'
/// enrollment and distribution): the record `states` under `name`, with what its context (or
/// the `instance` the query names) holds.
///
/// # Errors
/// NotFound for an unknown `instance`; the store's errors.
pub(crate) async fn record_answer(
    contexts: &Arc<dyn AppContextStore>,
    name: String,
    states: StateInfo,
    query: &StatusQuery,
) -> Result<DigStatus> {
    let snapshot = match context_of(&states, query.instance.as_deref())? {
        Some(id) => Some(Snapshot::read(contexts, id).await?),
        None => None,
    };
    let views = snapshot
        .as_ref()
        .map(|s| s.views(query))
        .unwrap_or_default();
    let full = DigStatus {
        name,
        states,
        ..DigStatus::default()
    };
    Ok(full_answer(query, full, snapshot.as_ref(), views))
}

/// The full answer: `full` (names and lifecycle record) with the context's status, the counts
/// and, unless the query asks for a summary, the resources; in the legacy shape if asked.
pub(crate) fn full_answer(
    query: &StatusQuery,
    mut full: DigStatus,
    snapshot: Option<&Snapshot>,
    views: Vec<AppView>,
) -> DigStatus {
    if let Some(snap) = snapshot {
        full.deployed_status = snap.status().to_owned();
        full_status(&mut full, views, query);
    }
    match query.legacy {
        Some(legacy) => full.into_legacy(legacy),
        None => full,
    }
}

/// Fills the counts and, unless the query asks for a summary, the apps of `out`.
fn full_status(out: &mut DigStatus, views: Vec<AppView>, query: &StatusQuery) {
    let mut total = 0;
    let mut ready = 0;
    for app in views {
        let mut clusters = Vec::new();
        for c in app.clusters {
            let mut resources = Vec::new();
            for r in c.resources {
                total += 1;
                let (reason, message) = r.why.unzip();
                let (attempts, next_retry) = r.retry.unzip();
                let mut status = ResourceStatus {
                    gvk: r.gvk,
                    name: r.name,
                    warnings: r.warnings,
                    why: Why {
                        reason,
                        message,
                        attempts,
                        next_retry,
                    },
                    ..ResourceStatus::default()
                };
                match query.status {
                    StatusType::Deployed => {
                        *out.deployed_counts.entry(r.deployed.clone()).or_default() += 1;
                        status.deployed_status = r.deployed;
                        if query.output == StatusOutput::Detail {
                            status.detail = r.manifest;
                        }
                    }
                    StatusType::Ready => {
                        *out.ready_counts.entry(r.ready.to_owned()).or_default() += 1;
                        ready += usize::from(r.ready == READY);
                        status.ready_status = r.ready.to_owned();
                        if query.output == StatusOutput::Detail {
                            status.detail = r.observed;
                        }
                    }
                }
                resources.push(status);
            }
            if !resources.is_empty() {
                let mut cluster = ClusterStatus {
                    cluster_provider: c.provider,
                    cluster: c.cluster,
                    connectivity: c.connectivity,
                    resources,
                    ..ClusterStatus::default()
                };
                cluster.explain_retry();
                clusters.push(cluster);
            }
        }
        if !clusters.is_empty() && query.output != StatusOutput::Summary {
            out.apps.push(AppStatus {
                name: app.name,
                clusters,
            });
        }
    }
    if query.status == StatusType::Ready && total > 0 {
        out.ready_status = if ready == total { READY } else { NOT_READY }.to_owned();
    }
}

#[cfg(test)]
mod tests {
    use emco_core::lifecycle::{DigState, StateAction};

    use super::*;

    fn state(instances: &[&str]) -> StateInfo {
        StateInfo {
            statusctxid: String::new(),
            actions: instances
                .iter()
                .map(|i| StateAction {
                    state: DigState::Instantiated,
                    instance: (*i).to_owned(),
                    time: String::new(),
                    revision: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn context_choice() {
        assert_eq!(context_of(&state(&[""]), None).unwrap(), None);
        assert_eq!(
            context_of(&state(&["", "12", "34"]), None).unwrap(),
            Some(34)
        );
        assert_eq!(
            context_of(&state(&["12", "34"]), Some("12")).unwrap(),
            Some(12)
        );
        let err = context_of(&state(&["12"]), Some("99")).unwrap_err();
        assert_eq!(err.kind(), emco_core::ErrorKind::NotFound);
        let err = context_of(&state(&["12"]), Some("x")).unwrap_err();
        assert_eq!(err.field(), Some("instance"));
    }

    #[test]
    fn delete_hooks_are_counted_only_while_removing() {
        let mut snap = Snapshot::default();
        let cluster = ClusterSnap {
            order: vec!["web+Deployment".into()],
            delete_hooks: delete_only_hooks(&BTreeMap::from([
                ("pre-install".to_owned(), vec!["both+Job".to_owned()]),
                (
                    "pre-delete".to_owned(),
                    vec!["cleanup+Job".to_owned(), "both+Job".to_owned()],
                ),
                ("post-delete".to_owned(), vec!["after+Job".to_owned()]),
            ])),
            resources: ["web+Deployment", "both+Job", "cleanup+Job", "after+Job"]
                .into_iter()
                .map(|n| (n.to_owned(), ResourceSnap::default()))
                .collect(),
            ..ClusterSnap::default()
        };
        assert_eq!(
            cluster.delete_hooks,
            BTreeSet::from(["after+Job".to_owned(), "cleanup+Job".to_owned()])
        );
        snap.apps
            .entry("app".into())
            .or_default()
            .insert("p+c".into(), cluster);
        let names = |snap: &Snapshot| -> Vec<String> {
            snap.views(&StatusQuery::default())[0].clusters[0]
                .resources
                .iter()
                .map(|r| format!("{}+{}", r.name, r.gvk.kind))
                .collect()
        };
        snap.status = Some("Instantiated".into());
        assert_eq!(names(&snap), ["web+Deployment", "both+Job"]);
        snap.status = Some("Terminating".into());
        assert_eq!(names(&snap).len(), 4);
    }

    #[test]
    fn resource_view_from_manifest_and_observation() {
        let snap = ResourceSnap {
            yaml: Some("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n".into()),
            status: Some("Applied".into()),
            warnings: vec![".spec.replicas: field not declared in schema; dropped".into()],
            why: None,
            retry: None,
        };
        let collected = serde_json::json!({"resources": {"web+Deployment": {"present": true, "ready": false, "reason": "0/1"}}});
        let v = ResourceView::new("web+Deployment", &snap, Some(&collected));
        assert_eq!(
            (
                v.name.as_str(),
                v.gvk.group.as_str(),
                v.gvk.version.as_str()
            ),
            ("web", "apps", "v1")
        );
        assert_eq!((v.deployed.as_str(), v.ready), ("Applied", NOT_READY));
        assert_eq!(v.warnings.len(), 1);
        let gone = ResourceSnap {
            yaml: None,
            status: Some("Deleted".into()),
            warnings: Vec::new(),
            why: None,
            retry: None,
        };
        let v = ResourceView::new("web+Deployment", &gone, Some(&collected));
        assert_eq!(
            (v.name.as_str(), v.gvk.kind.as_str(), v.ready),
            ("web", "Deployment", NOT_PRESENT)
        );
        let v = ResourceView::new("x+ConfigMap", &ResourceSnap::default(), None);
        assert_eq!((v.deployed.as_str(), v.ready), ("Pending", NOT_PRESENT));
    }
}
