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
//!   that rsync records as it observes the objects (`Ready`, `NotReady`, `NotPresent` when
//!   never seen or deleted, or `Unknown` when its cluster has not answered for the grace period,
//!   with `lastReadyStatus` and `lastSeen`), counted in `readyCounts`, and `readyStatus` `Ready`
//!   when every counted resource is ready, `Unknown` when the others are unknown, else
//!   `NotReady`;
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

use emco_core::poison::lock;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use emco_appcontext::AppContext;
use emco_appcontext::context::{ContextKey, ResourceStatusRecord};
use emco_appcontext::keys::Keyed;
use emco_core::lifecycle::{RsyncStatus, StateInfo};
use emco_core::model::status::{
    AppStatus, AppsList, ClusterEntry, ClusterStatus, ClustersByApp, ClustersOfApp, DigStatus,
    DriftedField, Gvk, ResourceEntry, ResourceStatus, ResourcesByApp, ResourcesOfApp, StatusMode,
    StatusOutput, StatusQuery, StatusResponse, StatusType, Why,
};
use emco_core::{ContextId, DigRef, Error, Result};
use emco_rsync::connector::Resource;
use emco_store::kv::{EventKind, WatchStream};
use emco_store::{AppContextStore, ListOptions};
use futures::{FutureExt as _, StreamExt as _};
use serde::Deserialize;
use serde_json::Value;

use crate::records::Records;
use crate::{ClusterNetworks, Deployments, LogicalClouds, load_state};

/// The ready status of a resource that is ready.
pub const READY: &str = "Ready";
/// The ready status of a resource that is present but not ready.
pub const NOT_READY: &str = "NotReady";
/// The ready status of a resource that is not on its cluster (not seen yet, or deleted).
pub const NOT_PRESENT: &str = "NotPresent";
/// The ready status of a resource whose cluster has not answered for the grace period.
pub const UNKNOWN: &str = "Unknown";

/// Every ready status [`readiness`] gives.
const READINESS: [&str; 4] = [READY, NOT_READY, NOT_PRESENT, UNKNOWN];

/// The context a query reports on: `instance` when given (it must belong to the group's
/// history), else the latest context of the lifecycle record; `None` before any instantiate.
pub(crate) fn context_of(state: &StateInfo, instance: Option<&str>) -> Result<Option<ContextId>> {
    let parse = |id: &str| {
        id.parse::<ContextId>()
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
    /// The manifest's `apiVersion` when its line is plain ([`top_level_api_version`]).
    api_version: Option<Box<str>>,
    status: Option<Box<str>>,
    /// What few resources have, apart: most of a large context's are applied without any
    /// (a followed context keeps one of these per resource).
    more: Option<Box<ResourceMore>>,
}

/// What a resource has beyond its status, when it has any.
#[derive(Debug, Default, PartialEq)]
struct ResourceMore {
    /// Its manifest, when kept.
    yaml: Option<String>,
    warnings: Vec<String>,
    /// Why it failed or retries: rsync's `Reason` and `Message`.
    why: Option<(String, String)>,
    /// While it retries: the tries so far and when the next is due.
    retry: Option<(u32, String)>,
}

/// A resource with nothing more.
const NOTHING_MORE: &ResourceMore = &ResourceMore {
    yaml: None,
    warnings: Vec::new(),
    why: None,
    retry: None,
};

/// A few values by name, in name order, in one vector: a cluster of an app usually has one or
/// two resources, and a BTreeMap's node keeps room for eleven (~0.4 KiB for one resource, 40
/// MiB at 10,000 clusters x 10 apps).
#[derive(Debug)]
struct Entries<V>(Vec<(Box<str>, V)>);

impl<V> Default for Entries<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> Entries<V> {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }

    fn get(&self, key: &str) -> Option<&V> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    /// The value of `key`, made on first sight.
    fn entry(&mut self, key: &str) -> &mut V
    where
        V: Default,
    {
        let i = self.find(key).unwrap_or_else(|i| {
            self.0.insert(i, (key.into(), V::default()));
            i
        });
        &mut self.0[i].1
    }

    /// The names, in order.
    fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }
}

impl<V> std::ops::Index<&str> for Entries<V> {
    type Output = V;

    /// # Panics
    /// When `key` is not there: the callers index with names the map gave.
    fn index(&self, key: &str) -> &V {
        self.get(key).unwrap_or_else(|| panic!("no entry {key}"))
    }
}

/// One cluster of an app as the context holds it.
#[derive(Debug, Default)]
struct ClusterSnap {
    readystatus: Option<String>,
    collected: Option<Collected>,
    order: Vec<String>,
    /// Hooks that run only when the app is deleted (`pre-delete`, `post-delete`).
    delete_hooks: BTreeSet<String>,
    resources: Entries<ResourceSnap>,
    /// Its counts, while the app is not being removed and while it is; reset at every change.
    counts: [OnceLock<ClusterCounts>; 2],
}

/// A cluster's collected status (`status/`), kept small: the ready status each resource's entry
/// says, which every count needs, and the document's text, parsed again only by the answers
/// that show more than counts. Kept as a parsed document it was ~2 KiB per (app, cluster) of a
/// followed context (200 MiB at 10,000 clusters x 10 apps).
#[derive(Debug)]
struct Collected {
    /// The ready status each resource's entry says, by resource key.
    seen: Entries<&'static str>,
    text: Box<str>,
}

impl Collected {
    /// The collected status whose JSON text is `raw`; None when it is not a JSON object.
    fn parse(raw: &[u8]) -> Option<Self> {
        let doc: Value = serde_json::from_slice(raw).ok()?;
        doc.as_object()?;
        let mut seen: Vec<(Box<str>, &'static str)> = doc
            .get("resources")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, entry)| (k.as_str().into(), observed_readiness(entry)))
            .collect();
        seen.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Some(Self {
            seen: Entries(seen),
            text: std::str::from_utf8(raw).ok()?.into(),
        })
    }

    /// The ready status the entry of resource `key` says, if it has one.
    fn seen(&self, key: &str) -> Option<&'static str> {
        self.seen.get(key).copied()
    }

    /// The whole document.
    fn doc(&self) -> Option<Value> {
        serde_json::from_str(&self.text).ok()
    }
}

/// What the resources of one cluster of an app count.
#[derive(Debug, Default)]
struct ClusterCounts {
    /// Per rsync status.
    deployed: Vec<(String, i64)>,
    /// Per ready status, in [`READINESS`] order.
    ready: [i64; 4],
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
    let c = apps
        .entry(app.to_owned())
        .or_default()
        .entry(cluster.to_owned())
        .or_default();
    c.counts = Default::default();
    c
}

impl Snapshot {
    /// Reads context `id`.
    ///
    /// # Errors
    /// NotFound when the context does not exist; the store's errors.
    pub(crate) async fn read(store: &Arc<dyn AppContextStore>, id: ContextId) -> Result<Self> {
        Self::read_keeping(store, id, true).await
    }

    /// [`Snapshot::read`]; without `manifests` only each manifest's `apiVersion` is kept (when
    /// its line is plain), which is all an answer without detail needs.
    async fn read_keeping(
        store: &Arc<dyn AppContextStore>,
        id: ContextId,
        manifests: bool,
    ) -> Result<Self> {
        let root = AppContext::prefix(id);
        let kvs = store.list_all(&root, false).await?;
        if !kvs.iter().any(|kv| kv.key == root) {
            return Err(Error::not_found(format!("AppContext {id} does not exist")));
        }
        let mut snap = Self::default();
        for kv in &kvs {
            snap.apply(&root, &kv.key, kv.value.as_ref(), manifests);
        }
        Ok(snap)
    }

    /// Takes in the value `raw` of `key` of the context under `root`.
    fn apply(&mut self, root: &str, key: &str, raw: &[u8], manifests: bool) {
        let Some(key) = ContextKey::parse(root, key) else {
            return;
        };
        let text = || serde_json::from_slice::<String>(raw).ok();
        match key {
            ContextKey::Status => {
                self.status = serde_json::from_slice::<StatusDoc>(raw)
                    .ok()
                    .map(|d| d.status);
            }
            ContextKey::AppOrder => {
                #[derive(Deserialize)]
                struct Order {
                    apporder: Vec<String>,
                }
                if let Some(o) = instruction::<Order>(raw) {
                    self.app_order = o.apporder;
                }
            }
            ContextKey::App(app) => {
                self.apps.entry(app.to_owned()).or_default();
            }
            ContextKey::ReadyStatus(a, c) => cluster_of(&mut self.apps, a, c).readystatus = text(),
            ContextKey::ClusterStatus(a, c) => {
                cluster_of(&mut self.apps, a, c).collected = Collected::parse(raw);
            }
            ContextKey::ResourceOrder(a, c) => {
                #[derive(Deserialize)]
                struct Order {
                    resorder: Vec<String>,
                }
                if let Some(o) = instruction::<Order>(raw) {
                    cluster_of(&mut self.apps, a, c).order = o.resorder;
                }
            }
            ContextKey::HookGroups(a, c) => {
                #[derive(Deserialize)]
                struct Hooks {
                    resdependency: BTreeMap<String, Vec<String>>,
                }
                if let Some(h) = instruction::<Hooks>(raw) {
                    cluster_of(&mut self.apps, a, c).delete_hooks =
                        delete_only_hooks(&h.resdependency);
                }
            }
            ContextKey::Resource(a, c, name) => {
                let resource = cluster_of(&mut self.apps, a, c).resources.entry(name);
                let yaml = text();
                resource.api_version = yaml
                    .as_deref()
                    .and_then(top_level_api_version)
                    .map(Into::into);
                // Kept when asked for, or when its apiVersion needs the YAML parser.
                let keep = manifests || resource.api_version.is_none();
                resource.edit_more(|m| m.yaml = yaml.filter(|_| keep));
            }
            ContextKey::ResourceStatus(a, c, name) => {
                let resource = cluster_of(&mut self.apps, a, c).resources.entry(name);
                if let Ok(doc) = serde_json::from_slice::<ResourceStatusRecord<String>>(raw) {
                    resource.status = Some(doc.status.into());
                    resource.edit_more(|m| {
                        m.warnings = doc.warnings;
                        m.why = doc.reason.zip(doc.message);
                        m.retry = doc.attempts.zip(doc.next_retry);
                    });
                }
            }
            ContextKey::Root | ContextKey::Cluster(..) | ContextKey::Other => {}
        }
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
        in_order(&self.app_order, self.apps.keys().map(String::as_str))
    }

    /// Whether the context is removing its apps: delete hooks exist on the clusters only then;
    /// before that they would count as never deployed and never ready.
    fn removing(&self) -> bool {
        matches!(
            self.status(),
            "PreTerminate" | "Terminating" | "Terminated" | "TerminateFailed"
        )
    }

    /// The clusters of `app` that the filters of `query` keep: `(provider, cluster, snap)`.
    fn clusters<'s>(
        &'s self,
        app: &str,
        query: &'s StatusQuery,
    ) -> impl Iterator<Item = (&'s str, &'s str, &'s ClusterSnap)> + 's {
        self.apps
            .get(app)
            .into_iter()
            .flatten()
            .map(|(id, c)| {
                let (provider, cluster) = emco_core::ClusterRef::split(id).unwrap_or(("", id));
                (provider, cluster, c)
            })
            .filter(|(provider, cluster, _)| query.matches_cluster(provider, cluster))
    }

    /// Every resource of every app and cluster that the filters of `query` keep, in app order
    /// and resource order.
    pub(crate) fn views(&self, query: &StatusQuery) -> Vec<AppView> {
        let detail = query.output == StatusOutput::Detail;
        let removing = self.removing();
        let mut apps = Vec::new();
        for app in self.ordered_apps() {
            if !query.matches_app(app) {
                continue;
            }
            let clusters = self
                .clusters(app, query)
                .map(|(provider, cluster, c)| {
                    let doc = c.collected.as_ref().and_then(Collected::doc);
                    ClusterView {
                        provider: provider.to_owned(),
                        cluster: cluster.to_owned(),
                        connectivity: c.readystatus.clone().unwrap_or_else(|| "Unknown".into()),
                        resources: c
                            .names(removing)
                            .into_iter()
                            .map(|n| ResourceView::new(n, &c.resources[n], doc.as_ref(), detail))
                            .filter(|r| query.matches_resource(&r.name))
                            .collect(),
                    }
                })
                .collect();
            apps.push(AppView {
                name: app.to_owned(),
                clusters,
            });
        }
        apps
    }

    /// Counts the resources that the app and cluster filters of `query` keep into `out`, from
    /// the counts of each cluster ([`ClusterSnap::counts`]).
    fn tally(&self, query: &StatusQuery, out: &mut DigStatus) {
        let removing = self.removing();
        let mut tally = Tally::default();
        for app in self.apps.keys().filter(|a| query.matches_app(a)) {
            for (_, _, c) in self.clusters(app, query) {
                let counts = c.counts(removing);
                match query.status {
                    StatusType::Deployed => {
                        for (deployed, n) in &counts.deployed {
                            tally.add_n(out, query.status, deployed, *n);
                        }
                    }
                    StatusType::Ready => {
                        for (ready, n) in READINESS.into_iter().zip(counts.ready) {
                            if n > 0 {
                                tally.add_n(out, query.status, ready, n);
                            }
                        }
                    }
                }
            }
        }
        tally.finish(out, query.status);
    }
}

/// One resource of a context on a cluster, as a rollout's gate reads it.
#[derive(Debug, Clone)]
pub(crate) struct ResourceState {
    pub(crate) app: String,
    /// The context's key of it, `name+Kind`.
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) api_version: String,
    /// Its rsync status.
    pub(crate) deployed: String,
    /// Its ready status.
    pub(crate) ready: &'static str,
    /// Why it failed, retries, is not ready or is not known.
    pub(crate) why: Option<String>,
    /// Not known because this server's watch has not listed it yet.
    pub(crate) unseen: bool,
}

/// The resources of a context on one cluster, as a rollout's gate reads them.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClusterResources {
    /// How many resources there are (every app), and how many of them are ready.
    pub(crate) total: i64,
    pub(crate) ready: i64,
    /// Whether every one is applied and ready.
    pub(crate) all_good: bool,
    /// The resources listed ([`Snapshot::resources_on`]).
    pub(crate) listed: Vec<ResourceState>,
}

impl Snapshot {
    /// The resources of every app on each of `clusters` (`provider+cluster`), by cluster, from
    /// the counts kept per cluster: with `all` each resource is listed, else only those of an
    /// app with a failed or retrying resource or one whose readiness is unknown (a gate over
    /// 5,000 clusters that deploy and get ready lists none).
    fn resources_on(
        &self,
        clusters: &HashSet<&str>,
        all: bool,
    ) -> HashMap<String, ClusterResources> {
        let removing = self.removing();
        let mut out: HashMap<String, ClusterResources> = HashMap::new();
        for (app, by_cluster) in &self.apps {
            // Looked up one by one: a rollout's gate asks for a wave of a fleet every tick.
            let wanted = clusters
                .iter()
                .filter_map(|id| by_cluster.get_key_value(*id));
            for (id, c) in wanted {
                let entry = out.entry(id.clone()).or_insert_with(|| ClusterResources {
                    all_good: true,
                    ..ClusterResources::default()
                });
                let counts = c.counts(removing);
                let total: i64 = counts.deployed.iter().map(|(_, n)| n).sum();
                let good = c.all_applied_and_ready(removing);
                entry.total += total;
                entry.ready += counts.ready[0];
                entry.all_good &= good;
                let troubled = counts.deployed.iter().any(|(s, n)| {
                    *n > 0
                        && (s == RsyncStatus::Failed.as_str()
                            || s == RsyncStatus::Retrying.as_str())
                }) || counts.ready[3] > 0;
                if !all && !troubled {
                    continue;
                }
                let list = &mut entry.listed;
                let doc = c.collected.as_ref().and_then(Collected::doc);
                let observed = doc.as_ref().and_then(|o| o.get("resources"));
                for n in c.names(removing) {
                    let v = ResourceView::new(n, &c.resources[n], doc.as_ref(), false);
                    let said = observed
                        .and_then(|o| o.get(n))
                        .and_then(|e| e.get("reason"))
                        .and_then(Value::as_str);
                    let why = match (&v.why, said) {
                        (Some((reason, message)), _) => Some(format!("{reason}: {message}")),
                        (None, Some(said)) => Some(said.to_owned()),
                        (None, None) => None,
                    };
                    let api_version = if v.gvk.group.is_empty() {
                        v.gvk.version.clone()
                    } else {
                        format!("{}/{}", v.gvk.group, v.gvk.version)
                    };
                    list.push(ResourceState {
                        app: app.clone(),
                        key: n.to_owned(),
                        name: v.name,
                        kind: v.gvk.kind,
                        api_version,
                        deployed: v.deployed,
                        ready: v.ready,
                        why,
                        unseen: v.unseen,
                    });
                }
            }
        }
        out
    }
}

/// Whether an answer is made of counts alone: a full summary not filtered by resource (whose
/// filter needs each resource's name from its manifest). Such an answer needs no views.
pub(crate) fn counts_only(query: &StatusQuery) -> bool {
    query.mode == StatusMode::Full
        && query.output == StatusOutput::Summary
        && query.resources.is_empty()
}

/// `keys` (in name order): those `order` names first, in its order, then the others by name.
fn in_order<'m>(order: &'m [String], keys: impl Iterator<Item = &'m str>) -> Vec<&'m str> {
    let keys: Vec<&str> = keys.collect();
    let mut out: Vec<&str> = order
        .iter()
        .map(String::as_str)
        .filter(|k| keys.binary_search(k).is_ok())
        .collect();
    for k in keys {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

impl ClusterSnap {
    /// Its resources in resource order (then the others by name), without the delete hooks
    /// unless the app is being `removing`.
    fn names(&self, removing: bool) -> Vec<&str> {
        let mut names = in_order(&self.order, self.resources.keys());
        names.retain(|n| {
            removing || !self.delete_hooks.contains(*n) || self.order.iter().any(|o| o == n)
        });
        names
    }

    /// Whether every one of its resources is applied and ready ([`READINESS`] counts `Ready`
    /// first and `Unknown` last).
    fn all_applied_and_ready(&self, removing: bool) -> bool {
        let counts = self.counts(removing);
        let total: i64 = counts.deployed.iter().map(|(_, n)| n).sum();
        counts
            .deployed
            .iter()
            .all(|(s, _)| s == RsyncStatus::Applied.as_str())
            && counts.ready[0] == total
    }

    /// What its resources count, kept until it changes: a summary of a context of 100,000
    /// resources then adds up the counts of its clusters instead of looking at every resource.
    fn counts(&self, removing: bool) -> &ClusterCounts {
        self.counts[usize::from(removing)].get_or_init(|| {
            let mut counts = ClusterCounts::default();
            for n in self.names(removing) {
                let deployed = self.resources[n].deployed();
                match counts.deployed.iter_mut().find(|(k, _)| k == deployed) {
                    Some((_, count)) => *count += 1,
                    None => counts.deployed.push((deployed.to_owned(), 1)),
                }
                let ready = readiness(deployed, self.collected.as_ref().and_then(|c| c.seen(n)));
                if let Some(slot) = READINESS.iter().position(|r| *r == ready) {
                    counts.ready[slot] += 1;
                }
            }
            counts
        })
    }
}

impl ResourceSnap {
    /// rsync's status of the resource (`Pending` until rsync writes one, as EMCO).
    fn deployed(&self) -> &str {
        self.status
            .as_deref()
            .unwrap_or(const { RsyncStatus::Pending.as_str() })
    }

    /// What it has beyond its status.
    fn more(&self) -> &ResourceMore {
        self.more.as_deref().unwrap_or(NOTHING_MORE)
    }

    /// Changes what it has beyond its status with `edit`, keeping none when that leaves nothing.
    fn edit_more(&mut self, edit: impl FnOnce(&mut ResourceMore)) {
        let mut more = self.more.take().unwrap_or_default();
        edit(&mut more);
        self.more = (*more != *NOTHING_MORE).then_some(more);
    }
}

/// The ready status of a resource whose rsync status is `deployed` and whose entry in its
/// cluster's collected status says `observed` ([`observed_readiness`]).
fn readiness(deployed: &str, observed: Option<&'static str>) -> &'static str {
    match observed {
        // Whatever was seen before, a deleted object is gone.
        _ if deployed == RsyncStatus::Deleted.as_str() => NOT_PRESENT,
        Some(observed) => observed,
        None => NOT_PRESENT,
    }
}

/// The ready status an entry of a cluster's collected status says.
fn observed_readiness(entry: &Value) -> &'static str {
    let flag = |f: &str| entry.get(f).and_then(Value::as_bool) == Some(true);
    if flag("unknown") {
        UNKNOWN
    } else if flag("present") && flag("ready") {
        READY
    } else if flag("present") {
        NOT_READY
    } else {
        NOT_PRESENT
    }
}

/// The counts of an answer, taken in resource by resource or cluster by cluster.
#[derive(Default)]
struct Tally {
    total: i64,
    ready: i64,
    unknown: i64,
}

impl Tally {
    /// One resource whose rsync status is `deployed` and ready status `ready`.
    fn add(&mut self, out: &mut DigStatus, status: StatusType, deployed: &str, ready: &str) {
        let key = match status {
            StatusType::Deployed => deployed,
            StatusType::Ready => ready,
        };
        self.add_n(out, status, key, 1);
    }

    /// `n` resources whose status of the kind `status` asks is `key`.
    fn add_n(&mut self, out: &mut DigStatus, status: StatusType, key: &str, n: i64) {
        self.total += n;
        let counts = match status {
            StatusType::Deployed => &mut out.totals.deployed_counts,
            StatusType::Ready => {
                match key {
                    READY => self.ready += n,
                    UNKNOWN => self.unknown += n,
                    _ => {}
                }
                &mut out.totals.ready_counts
            }
        };
        match counts.get_mut(key) {
            Some(count) => *count += n,
            None => {
                counts.insert(key.to_owned(), n);
            }
        }
    }

    /// Sets the answer's `readyStatus` for a ready query with resources: `Unknown` when what
    /// is not ready is on clusters that do not answer.
    fn finish(self, out: &mut DigStatus, status: StatusType) {
        if status == StatusType::Ready && self.total > 0 {
            out.totals.ready_status = if self.ready == self.total {
                READY
            } else if self.ready + self.unknown == self.total {
                UNKNOWN
            } else {
                NOT_READY
            }
            .to_owned();
        }
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
    /// While its readiness is unknown: the state seen last, since when, and why.
    unknown: Option<Unknown>,
    /// Unknown because the server's watch has not listed it yet.
    pub(crate) unseen: bool,
    /// Fields another client changed since emco-rs applied them, the corrections made and why
    /// they stopped.
    drift: Vec<DriftedField>,
    drift_corrections: u32,
    drift_gave_up: String,
}

/// What the entry of a resource whose cluster is silent says: `lastState`, `since`, `reason`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Unknown {
    #[serde(default)]
    last_state: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    reason: String,
}

impl ResourceView {
    /// The view of resource `key` (`name+Kind`); its manifest and observed entry are kept only
    /// for a `detail` answer. Without one the manifest is not parsed: its `apiVersion` line is
    /// enough, and parsing every manifest of a large context cost most of a status answer.
    fn new(key: &str, snap: &ResourceSnap, collected: Option<&Value>, detail: bool) -> Self {
        let (key_name, key_kind) = emco_core::ResourceName::split(key).unwrap_or((key, ""));
        let api_version = snap
            .api_version
            .as_deref()
            .or_else(|| snap.more().yaml.as_deref().and_then(top_level_api_version));
        let parsed = match api_version {
            Some(_) if !detail && !key_kind.is_empty() => None,
            _ => snap
                .more()
                .yaml
                .as_deref()
                .and_then(|y| Resource::from_yaml(y).ok()),
        };
        let (name, gvk) = match (&parsed, api_version) {
            (Some(r), _) => (
                r.id().name.clone(),
                Gvk {
                    group: r.id().group().to_owned(),
                    version: r.id().version().to_owned(),
                    kind: r.id().kind.clone(),
                },
            ),
            (None, Some(api_version)) => {
                let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
                let gvk = Gvk {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    kind: key_kind.to_owned(),
                };
                (key_name.to_owned(), gvk)
            }
            // The key still names the object.
            (None, None) => {
                let gvk = Gvk {
                    kind: key_kind.to_owned(),
                    ..Gvk::default()
                };
                (key_name.to_owned(), gvk)
            }
        };
        let observed = collected
            .and_then(|c| c.get("resources"))
            .and_then(|r| r.get(key));
        let ready = readiness(snap.deployed(), observed.map(observed_readiness));
        let unknown = observed
            .filter(|_| ready == UNKNOWN)
            .and_then(|o| Unknown::deserialize(o).ok());
        let unseen = ready == UNKNOWN
            && observed
                .and_then(|o| o.get("unseen"))
                .and_then(Value::as_bool)
                == Some(true);
        let drift = observed
            .and_then(|o| o.get("drift"))
            .and_then(|d| Vec::<DriftedField>::deserialize(d).ok())
            .unwrap_or_default();
        let said = |k: &str| observed.and_then(|o| o.get(k));
        Self {
            drift,
            drift_corrections: said("driftCorrections")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
            drift_gave_up: said("driftGaveUp")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            name,
            gvk,
            manifest: parsed.map(|r| r.manifest().clone()),
            deployed: snap.deployed().to_owned(),
            ready,
            observed: observed.filter(|_| detail).cloned(),
            warnings: snap.more().warnings.clone(),
            why: snap.more().why.clone(),
            retry: snap.more().retry.clone(),
            unknown,
            unseen,
        }
    }
}

/// The `apiVersion` of a manifest from its top-level line (`apiVersion: apps/v1` at the start
/// of a line), when that line is plain: no quotes other than a pair around the value, no
/// comment, no flow syntax. None sends the caller to a full parse.
fn top_level_api_version(yaml: &str) -> Option<&str> {
    let value = yaml
        .lines()
        .find_map(|l| l.strip_prefix("apiVersion:"))?
        .trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '/'));
    plain.then_some(value)
}

/// How many contexts [`Followed`] keeps current at most, and for how long one nobody asks
/// about.
const FOLLOWED: usize = 16;
const FOLLOWED_IDLE: Duration = Duration::from_secs(300);

/// The snapshots (without manifests) of the contexts asked about lately, each kept current by
/// draining a watch of the context's keys at every question: an answer costs the changes since
/// the last one instead of a read of the whole context (a second and more at 100,000
/// resources, most of it while rsync deploys). Only on stores whose watches hold a change once
/// its transaction returned ([`AppContextStore::watches_are_immediate`]); elsewhere, and for
/// answers with manifests, the context is read whole.
#[derive(Clone, Default)]
pub(crate) struct Followed(Arc<std::sync::Mutex<HashMap<ContextId, (Instant, FollowSlot)>>>);

type FollowSlot = Arc<tokio::sync::Mutex<Option<Follow>>>;

impl std::fmt::Debug for Followed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        f.debug_struct("Followed").field("contexts", &n).finish()
    }
}

/// One followed context.
struct Follow {
    snap: Snapshot,
    watch: WatchStream,
}

impl Follow {
    /// Takes in the changes the watch holds, up to the first at or after revision `upto` (the
    /// store's when the question came: a context changing all the time would otherwise keep it
    /// taking in); false when the snapshot cannot follow: a key was deleted, or the watch
    /// failed (it fell behind the store's history).
    fn catch_up(&mut self, root: &str, upto: u64) -> bool {
        loop {
            match self.watch.next().now_or_never() {
                None => return true,
                Some(Some(Ok(e))) if e.kind == EventKind::Put => {
                    self.snap.apply(root, &e.key, &e.value, false);
                    if e.mod_revision >= upto {
                        return true;
                    }
                }
                Some(_) => return false,
            }
        }
    }
}

/// The store's current revision, from the page of a one-key listing under `root`.
pub(crate) async fn revision_now(store: &Arc<dyn AppContextStore>, root: &str) -> Result<u64> {
    let options = ListOptions {
        limit: Some(1),
        keys_only: true,
        start_after: None,
    };
    Ok(store.list(root, options).await?.revision)
}

impl Followed {
    /// The resources of context `id` on each of `clusters` (`provider+cluster`), by cluster, as
    /// [`Snapshot::resources_on`] gives them, from the followed snapshot where the store's
    /// watches allow it.
    ///
    /// # Errors
    /// As [`Snapshot::read`].
    pub(crate) async fn resources_on(
        &self,
        store: &Arc<dyn AppContextStore>,
        id: ContextId,
        clusters: &HashSet<&str>,
        all: bool,
    ) -> Result<HashMap<String, ClusterResources>> {
        if store.watches_are_immediate() {
            self.with(store, id, |s| s.resources_on(clusters, all))
                .await
        } else {
            Ok(Snapshot::read_keeping(store, id, false)
                .await?
                .resources_on(clusters, all))
        }
    }

    /// The slot of context `id`, made on first use; drops the slots idle too long and, past
    /// [`FOLLOWED`], the least recently used.
    fn slot(&self, id: ContextId) -> FollowSlot {
        let mut map = lock(&self.0);
        let now = Instant::now();
        map.retain(|_, (used, _)| now.duration_since(*used) < FOLLOWED_IDLE);
        if !map.contains_key(&id)
            && map.len() >= FOLLOWED
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        let entry = map
            .entry(id)
            .or_insert_with(|| (now, FollowSlot::default()));
        entry.0 = now;
        Arc::clone(&entry.1)
    }

    /// Stops following context `id` (its watch would keep what it sees until the next question).
    pub(crate) fn forget(&self, id: ContextId) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(&id);
        }
    }

    /// `answer` of the current snapshot (without manifests) of context `id`.
    ///
    /// # Errors
    /// As [`Snapshot::read`].
    async fn with<T>(
        &self,
        store: &Arc<dyn AppContextStore>,
        id: ContextId,
        answer: impl FnOnce(&Snapshot) -> T,
    ) -> Result<T> {
        let root = AppContext::prefix(id);
        let slot = self.slot(id);
        let mut followed = slot.lock().await;
        // The answer includes every change up to the store's revision now.
        let revision = revision_now(store, &root).await?;
        let kept = followed
            .take()
            .and_then(|mut f| f.catch_up(&root, revision).then_some(f));
        if kept.is_none() {
            tracing::debug!(context = %id, "status snapshot read whole");
        }
        let current = match kept {
            Some(f) => f,
            None => {
                // The watch first, from that revision: every change after it is in the watch,
                // whether the read below saw it or not; taking it in again in order ends at the
                // same state.
                let watch = store.watch(&root, revision).await;
                let snap = match Snapshot::read_keeping(store, id, false).await {
                    Ok(snap) => snap,
                    Err(e) => {
                        drop(followed);
                        self.forget(id);
                        return Err(e);
                    }
                };
                let mut fresh = match watch {
                    Ok(watch) => Follow { snap, watch },
                    // History gone already: answer from the read alone.
                    Err(e) => {
                        tracing::debug!(context = %id, error = %e, "status read whole, not followed");
                        return Ok(answer(&snap));
                    }
                };
                // Up to the revision after the read, so that no change the read saw is undone
                // by an older one taken in again.
                if !fresh.catch_up(&root, revision_now(store, &root).await?) {
                    tracing::debug!(
                        context = %id,
                        "status read whole; changing too fast to follow"
                    );
                    // Deleted, or changing faster than the watch's history reaches back: answer
                    // from the read, follow nothing.
                    let out = answer(&fresh.snap);
                    drop(followed);
                    self.forget(id);
                    return Ok(out);
                }
                fresh
            }
        };
        let out = answer(&current.snap);
        *followed = Some(current);
        Ok(out)
    }
}

/// The status service: the status of deployment intent groups, logical clouds and cluster
/// networks, once ([`Status::deployment`], [`Status::logical_cloud`],
/// [`Status::cluster_networks`]) or followed as it changes ([`Status::watch`], the
/// StatusNotify gRPC service). Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Status {
    pub(crate) records: Records,
    /// The lifecycle records of the three kinds of target.
    pub(crate) deployments: Deployments,
    pub(crate) clouds: LogicalClouds,
    pub(crate) networks: ClusterNetworks,
    followed: Followed,
}

impl Status {
    pub(crate) fn new(
        records: Records,
        deployments: Deployments,
        clouds: LogicalClouds,
        networks: ClusterNetworks,
    ) -> Self {
        Self {
            records,
            deployments,
            clouds,
            networks,
            followed: Followed::default(),
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
            .records
            .objects
            .deployment_intent_groups()
            .get(&key.parent().unwrap_or_default(), &dig.dig)
            .await?;
        let state = load_state(self.records.store().as_ref(), &key).await?;
        let DigRef {
            project,
            composite_app,
            version,
            dig: name,
        } = dig.clone();
        let full = DigStatus {
            project,
            composite_app: composite_app.clone(),
            composite_app_version: version,
            composite_profile: group.spec.composite_profile,
            name,
            states: state,
            ..DigStatus::default()
        };
        let context = context_of(&full.states, query.instance.as_deref())?;
        let answer = |snapshot: Option<&Snapshot>| {
            // Only the full status refuses an app filter naming no app of the deployment; the
            // list queries drop it (src/orchestrator/pkg/status/status_helper.go).
            if let Some(snap) = snapshot
                && query.mode == StatusMode::Full
                && let Some(app) = query.apps.iter().find(|a| !snap.has_app(a))
            {
                return Err(Error::invalid(format!(
                    "Filter app {app} not in list of apps for composite app {composite_app}"
                )));
            }
            let views =
                (!counts_only(query)).then(|| snapshot.map(|s| s.views(query)).unwrap_or_default());
            Ok(respond(query, full, snapshot, views))
        };
        let contexts = self.records.contexts();
        let mut out = match context {
            Some(id)
                if query.output != StatusOutput::Detail && contexts.watches_are_immediate() =>
            {
                self.followed
                    .with(contexts, id, |s| answer(Some(s)))
                    .await?
            }
            Some(id) => answer(Some(&Snapshot::read(contexts, id).await?)),
            None => answer(None),
        }?;
        if let StatusResponse::Full(full) = &mut out {
            full.rollout = self
                .deployments
                .latest_rollout_of(&full.states)
                .await?
                .map(|(_, run, _)| Box::new(run));
            if let Some(ctx) = self.records.load_context(&full.states).await? {
                full.holds = ctx
                    .holds::<emco_core::lifecycle::hold::Holds>()
                    .await?
                    .map(|(h, _)| h.holds)
                    .unwrap_or_default();
            }
        }
        Ok(out)
    }
}

/// The answer `query.mode` asks for, from the views of a context (`snapshot` is `None` before
/// any instantiate; `views` is `None` for an answer of counts alone, [`counts_only`]): the list
/// modes take the name of `full`; the full answer is `full` (its names and lifecycle record)
/// with the context's status, the counts and the resources.
pub(crate) fn respond(
    query: &StatusQuery,
    full: DigStatus,
    snapshot: Option<&Snapshot>,
    views: Option<Vec<AppView>>,
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
                .unwrap_or_default()
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
                .unwrap_or_default()
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
    Ok(full_answer(query, full, snapshot.as_ref(), Some(views)))
}

/// The full answer: `full` (names and lifecycle record) with the context's status, the counts
/// and, unless the query asks for a summary, the resources; in the legacy shape if asked. The
/// counts come from `views`, or straight from the snapshot without them ([`counts_only`]).
pub(crate) fn full_answer(
    query: &StatusQuery,
    mut full: DigStatus,
    snapshot: Option<&Snapshot>,
    views: Option<Vec<AppView>>,
) -> DigStatus {
    if let Some(snap) = snapshot {
        full.totals.deployed_status = snap.status().to_owned();
        match views {
            Some(views) => full_status(&mut full, views, query),
            None => snap.tally(query, &mut full),
        }
    }
    match query.legacy {
        Some(legacy) => full.into_legacy(legacy),
        None => full,
    }
}

/// Fills the counts and, unless the query asks for a summary, the apps of `out`.
fn full_status(out: &mut DigStatus, views: Vec<AppView>, query: &StatusQuery) {
    let mut tally = Tally::default();
    for app in views {
        let mut clusters = Vec::new();
        for c in app.clusters {
            let mut resources = Vec::new();
            for r in c.resources {
                tally.add(out, query.status, &r.deployed, r.ready);
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
                        status.deployed_status = r.deployed;
                        if query.output == StatusOutput::Detail {
                            status.detail = r.manifest;
                        }
                    }
                    StatusType::Ready => {
                        status.ready_status = r.ready.to_owned();
                        status.drift = r.drift;
                        status.drift_corrections = r.drift_corrections;
                        status.drift_gave_up = r.drift_gave_up;
                        if let Some(u) = r.unknown {
                            status.last_ready_status = u.last_state;
                            status.last_seen = u.since;
                            if status.why.reason.is_none() {
                                status.why.reason = Some("Unreachable".to_owned());
                                status.why.message = Some(u.reason);
                            }
                        }
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
    tally.finish(out, query.status);
}

#[cfg(test)]
mod tests {
    use emco_core::lifecycle::{DigState, StateAction};
    use emco_core::placement::ClusterRef;

    use serde_json::json;

    use super::*;

    impl Collected {
        fn of(doc: &Value) -> Option<Self> {
            Self::parse(&serde_json::to_vec(doc).unwrap())
        }
    }

    /// The context the snapshot tests read.
    const SEVEN: ContextId = ContextId::new(7);

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
            Some(ContextId::new(34))
        );
        assert_eq!(
            context_of(&state(&["12", "34"]), Some("12")).unwrap(),
            Some(ContextId::new(12))
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
            resources: Entries(
                ["after+Job", "both+Job", "cleanup+Job", "web+Deployment"]
                    .into_iter()
                    .map(|n| (n.into(), ResourceSnap::default()))
                    .collect(),
            ),
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
                .map(|r| emco_core::ResourceName::new(&r.name, &r.gvk.kind).to_string())
                .collect()
        };
        snap.status = Some("Instantiated".into());
        assert_eq!(names(&snap), ["web+Deployment", "both+Job"]);
        snap.status = Some("Terminating".into());
        assert_eq!(names(&snap).len(), 4);
    }

    /// A resource keeps room for more than its status only while it has more.
    #[test]
    fn a_resource_with_nothing_more_keeps_none() {
        let mut r = ResourceSnap::default();
        r.edit_more(|m| m.why = Some(("Failed".into(), "denied".into())));
        assert_eq!(r.more().why.as_ref().map(|w| w.0.as_str()), Some("Failed"));
        r.edit_more(|m| m.yaml = Some("kind: X".into()));
        r.edit_more(|m| m.why = None);
        assert!(r.more.is_some(), "the manifest is still kept");
        r.edit_more(|m| m.yaml = None);
        assert!(r.more.is_none());
        assert_eq!(r.more(), NOTHING_MORE);
    }

    #[test]
    fn resource_view_from_manifest_and_observation() {
        let snap = ResourceSnap {
            api_version: None,
            status: Some("Applied".into()),
            more: Some(Box::new(ResourceMore {
                yaml: Some(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n".into(),
                ),
                warnings: vec![".spec.replicas: field not declared in schema; dropped".into()],
                ..ResourceMore::default()
            })),
        };
        let collected = serde_json::json!({"resources": {"web+Deployment": {"present": true, "ready": false, "reason": "0/1"}}});
        let v = ResourceView::new("web+Deployment", &snap, Some(&collected), false);
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
            status: Some("Deleted".into()),
            ..ResourceSnap::default()
        };
        let v = ResourceView::new("web+Deployment", &gone, Some(&collected), false);
        assert_eq!(
            (v.name.as_str(), v.gvk.kind.as_str(), v.ready),
            ("web", "Deployment", NOT_PRESENT)
        );
        let v = ResourceView::new("x+ConfigMap", &ResourceSnap::default(), None, false);
        assert_eq!((v.deployed.as_str(), v.ready), ("Pending", NOT_PRESENT));
        // With detail the manifest is parsed and kept; without, its apiVersion line is read.
        let v = ResourceView::new("web+Deployment", &snap, Some(&collected), true);
        assert!(v.manifest.is_some() && v.observed.is_some());
        assert_eq!(
            (v.gvk.group.as_str(), v.gvk.version.as_str()),
            ("apps", "v1")
        );
        let v = ResourceView::new("web+Deployment", &snap, Some(&collected), false);
        assert!(v.manifest.is_none() && v.observed.is_none());
    }

    /// A summary counted straight from the snapshot equals the counts of the full answer, for
    /// every status, filter and state (hooks, deleted, never written, observed or not).
    #[test]
    fn a_summary_counts_as_the_full_answer() {
        let statuses = [
            None,
            Some("Applied"),
            Some("Retrying"),
            Some("Deleted"),
            Some("Failed"),
        ];
        let observed = [
            json!({"present": true, "ready": true}),
            json!({"present": true, "ready": false}),
            json!({"present": false}),
            json!({"present": true, "ready": false, "unknown": true, "lastState": "Ready",
                "since": "2026-12-05T10:00:00Z", "reason": "cluster has not answered"}),
        ];
        let mut snap = Snapshot::default();
        for (a, app) in ["a", "b", "c"].into_iter().enumerate() {
            for c in 0..4 {
                let mut cluster = ClusterSnap {
                    order: vec!["r0+Deployment".into(), "r1+Service".into()],
                    delete_hooks: BTreeSet::from(["hook+Job".to_owned()]),
                    ..ClusterSnap::default()
                };
                let mut seen = serde_json::Map::new();
                for r in 0..5 {
                    let name = if r == 4 {
                        "hook+Job".to_owned()
                    } else {
                        format!("r{r}+Deployment")
                    };
                    let n = a * 20 + c * 5 + r;
                    if n % 4 != 0 {
                        seen.insert(name.clone(), observed[(n / 2) % 4].clone());
                    }
                    let resource = ResourceSnap {
                        status: statuses[n % 5].map(Into::into),
                        ..ResourceSnap::default()
                    };
                    *cluster.resources.entry(&name) = resource;
                }
                cluster.collected = Collected::of(&json!({ "resources": seen }));
                snap.apps
                    .entry(app.to_owned())
                    .or_default()
                    .insert(format!("p+c{c}"), cluster);
            }
        }
        let counts = |out: &DigStatus| {
            (
                out.totals.deployed_counts.clone(),
                out.totals.ready_counts.clone(),
                out.totals.ready_status.clone(),
            )
        };
        for state in ["Instantiated", "Terminating"] {
            snap.status = Some(state.to_owned());
            for status in [StatusType::Deployed, StatusType::Ready] {
                for (apps, clusters) in [
                    (vec![], vec![]),
                    (vec!["b".to_owned()], vec![]),
                    (vec![], vec![ClusterRef::new("p", "c2")]),
                    (
                        vec!["a".to_owned(), "c".to_owned()],
                        vec![ClusterRef::new("p", "c1")],
                    ),
                ] {
                    let query = StatusQuery {
                        status,
                        output: StatusOutput::Summary,
                        apps,
                        clusters,
                        ..StatusQuery::default()
                    };
                    assert!(counts_only(&query));
                    let mut viewed = DigStatus::default();
                    full_status(&mut viewed, snap.views(&query), &query);
                    let mut tallied = DigStatus::default();
                    snap.tally(&query, &mut tallied);
                    assert_eq!(counts(&tallied), counts(&viewed), "{state} {query:?}");
                    assert!(tallied.apps.is_empty());
                }
            }
        }
        // Every kind of answer was counted at least once.
        let query = StatusQuery {
            status: StatusType::Ready,
            output: StatusOutput::Summary,
            ..StatusQuery::default()
        };
        let mut out = DigStatus::default();
        snap.tally(&query, &mut out);
        assert_eq!(
            out.totals.ready_counts.len(),
            4,
            "{:?}",
            out.totals.ready_counts
        );
        assert_eq!(out.totals.ready_status, NOT_READY);
    }

    /// A resource whose cluster is silent counts as `Unknown`, says what it was and since when,
    /// and keeps the group from Ready: `Unknown` when the rest is ready, `NotReady` otherwise.
    #[test]
    fn unknown_readiness_keeps_a_group_from_ready() {
        let applied = ResourceSnap {
            status: Some("Applied".into()),
            ..ResourceSnap::default()
        };
        let silent = json!({"resources": {"web+Deployment": {"present": true, "ready": false,
            "unknown": true, "lastState": "Ready", "since": "2026-12-05T10:00:00Z",
            "reason": "cluster has not answered since 2026-12-05T10:00:00Z: refused"}}});
        let v = ResourceView::new("web+Deployment", &applied, Some(&silent), false);
        assert_eq!(v.ready, UNKNOWN);
        let u = v.unknown.as_ref().unwrap();
        assert_eq!(
            (u.last_state.as_str(), u.since.as_str()),
            ("Ready", "2026-12-05T10:00:00Z")
        );
        let query = StatusQuery {
            status: StatusType::Ready,
            ..StatusQuery::default()
        };
        let answer = |collected: [&Value; 2]| {
            let mut snap = Snapshot {
                status: Some("Instantiated".into()),
                ..Snapshot::default()
            };
            for (c, collected) in collected.into_iter().enumerate() {
                let mut cluster = ClusterSnap {
                    collected: Collected::of(collected),
                    ..ClusterSnap::default()
                };
                *cluster.resources.entry("web+Deployment") = ResourceSnap {
                    status: Some("Applied".into()),
                    ..ResourceSnap::default()
                };
                snap.apps
                    .entry("web".into())
                    .or_default()
                    .insert(format!("p+c{c}"), cluster);
            }
            let mut out = DigStatus::default();
            full_status(&mut out, snap.views(&query), &query);
            out
        };
        let ready = json!({"resources": {"web+Deployment": {"present": true, "ready": true}}});
        let not_ready = json!({"resources": {"web+Deployment": {"present": true, "ready": false}}});
        assert_eq!(answer([&ready, &ready]).totals.ready_status, READY);
        let out = answer([&ready, &silent]);
        assert_eq!(out.totals.ready_status, UNKNOWN);
        assert_eq!(out.totals.ready_counts.get(UNKNOWN), Some(&1));
        let r = &out.apps[0].clusters[1].resources[0];
        assert_eq!(
            (
                r.ready_status.as_str(),
                r.last_ready_status.as_str(),
                r.last_seen.as_str()
            ),
            (UNKNOWN, "Ready", "2026-12-05T10:00:00Z")
        );
        assert_eq!(r.why.reason.as_deref(), Some("Unreachable"));
        assert!(
            r.why
                .message
                .as_deref()
                .is_some_and(|m| m.contains("refused"))
        );
        assert_eq!(answer([&not_ready, &silent]).totals.ready_status, NOT_READY);
    }

    /// The answers from a followed snapshot are those of a fresh read, through changes of
    /// statuses, the context's state and new resources; a deleted context is NotFound.
    #[tokio::test]
    async fn a_followed_snapshot_answers_as_a_fresh_read() {
        use emco_store::InMemoryAppContextStore;
        let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
        assert!(store.watches_are_immediate());
        let root = AppContext::prefix(SEVEN);
        let put = |key: String, value: Value| {
            let store = Arc::clone(&store);
            async move {
                store
                    .put(&key, serde_json::to_vec(&value).unwrap().into())
                    .await
                    .unwrap();
            }
        };
        let resource = |app: &str, cluster: &str, name: &str| {
            format!("{root}app/{app}/cluster/{cluster}/resource/{name}/")
        };
        put(root.clone(), json!("")).await;
        put(format!("{root}status/"), json!({"Status": "Instantiating"})).await;
        for app in ["a", "b"] {
            put(format!("{root}app/{app}/"), json!("")).await;
            for c in ["p+c1", "p+c2"] {
                let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n";
                put(resource(app, c, "web+Deployment"), json!(yaml)).await;
            }
        }
        let followed = Followed::default();
        let summary = StatusQuery {
            output: StatusOutput::Summary,
            ..StatusQuery::default()
        };
        let all = StatusQuery::default();
        // A summary from the counts kept per cluster, the rest from the views.
        let answer = |snap: &Snapshot, query: &StatusQuery| {
            let views = (!counts_only(query)).then(|| snap.views(query));
            let out = full_answer(query, DigStatus::default(), Some(snap), views);
            serde_json::to_value(&out).unwrap()
        };
        let check = |followed: Followed| {
            let store = Arc::clone(&store);
            let (summary, all) = (summary.clone(), all.clone());
            let other = StatusQuery {
                status: match summary.status {
                    StatusType::Ready => StatusType::Deployed,
                    StatusType::Deployed => StatusType::Ready,
                },
                ..summary.clone()
            };
            async move {
                for query in [&summary, &other, &all] {
                    let got = followed
                        .with(&store, SEVEN, |s| answer(s, query))
                        .await
                        .unwrap();
                    let read = Snapshot::read(&store, SEVEN).await.unwrap();
                    assert_eq!(got, answer(&read, query));
                }
            }
        };
        check(followed.clone()).await;
        // Statuses arrive, the state changes, a cluster's observations and a resource come.
        for (i, c) in ["p+c1", "p+c2"].into_iter().enumerate() {
            let status = if i == 0 { "Applied" } else { "Failed" };
            put(
                format!("{}status/", resource("a", c, "web+Deployment")),
                json!({"Status": status}),
            )
            .await;
            check(followed.clone()).await;
        }
        put(
            format!("{root}app/a/cluster/p+c1/status/"),
            json!({"resources": {"web+Deployment": {"present": true, "ready": true}}}),
        )
        .await;
        put(format!("{root}status/"), json!({"Status": "Instantiated"})).await;
        put(
            resource("b", "p+c1", "cfg+ConfigMap"),
            json!("apiVersion: v1\nkind: ConfigMap\n"),
        )
        .await;
        check(followed.clone()).await;
        let ready = followed
            .with(&store, SEVEN, |s| {
                answer(
                    s,
                    &StatusQuery {
                        status: StatusType::Ready,
                        ..summary.clone()
                    },
                )
            })
            .await
            .unwrap();
        assert_eq!(ready["readyCounts"]["Ready"], 1, "{ready}");
        // Deleted: NotFound, and nothing is kept of it.
        store.delete_prefix(&root).await.unwrap();
        let err = followed.with(&store, SEVEN, |_| ()).await.unwrap_err();
        assert_eq!(err.kind(), emco_core::ErrorKind::NotFound);
        assert_eq!(followed.0.lock().unwrap().len(), 0);
    }

    #[test]
    fn api_version_from_the_top_level_line() {
        let of = top_level_api_version;
        assert_eq!(
            of("apiVersion: apps/v1\nkind: Deployment\n"),
            Some("apps/v1")
        );
        assert_eq!(of("kind: ConfigMap\napiVersion: \"v1\"\n"), Some("v1"));
        assert_eq!(
            of("apiVersion: example.com/v1alpha1\n"),
            Some("example.com/v1alpha1")
        );
        // Anything but a plain value is left to the YAML parser.
        assert_eq!(of("apiVersion: v1 # core\n"), None);
        assert_eq!(of("apiVersion: &a v1\n"), None);
        assert_eq!(of("{\"apiVersion\": \"v1\"}"), None);
        assert_eq!(of("metadata:\n  apiVersion: v1\n"), None);
    }
}
