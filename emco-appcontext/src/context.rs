//! The typed AppContext API: EMCO's run-time context of one deployment, laid out key for key and
//! value for value as EMCO's Go code does, so EMCO controllers pointed at the same etcd read our
//! contexts and write into them.
//!
//! Layout (`<id>` is a random positive int63 in decimal; every key ends with `/`):
//!
//! | key under `/context/<id>/` | value (JSON) |
//! |---|---|
//! | (the root itself) | `"<id>"` |
//! | `meta/` | [`CompositeAppMeta`] |
//! | `app/instruction/order/` | a string holding `{"apporder":[...]}` |
//! | `driftpolicy/` | the group's drift policy spec (ours), when it has one |
//! | `app/instruction/dependency/` | a string holding `{"appdependency":{"<app>":"go"}}` |
//! | `app/<app>/` | `"<app>"` |
//! | `app/<app>/instruction/dependency/` | a string holding `[{"app":..,"opStatus":..,"wait":..}]` |
//! | `app/<app>/cluster/<provider+cluster>/` | `"<provider+cluster>"` |
//! | `.../cluster/<c>/!@#metaGrp/` | the anyOf group number as a string |
//! | `.../cluster/<c>/resource/<name+Kind>/` | the resource YAML as a string |
//! | `.../cluster/<c>/resource/instruction/order/` | a string holding `{"resorder":[...]}` |
//! | `.../cluster/<c>/resource/instruction/dependency/` | a string holding `{"resdependency":{...}}` |
//! | `.../resource/<name+Kind>/status/` | `{"Status":"Pending"}` |
//! | `.../cluster/<c>/readystatus/` | `"Available"` / `"Retrying"` / `"Unknown"` |
//! | `.../cluster/<c>/status/` | the collected cluster status |
//! | `status/` | `{"Status":"Instantiating"}` |
//! | `stopflag/` | `true` / `false` |
//! | `rsync/AppContextEventQueue/` | `{"AcQueue":[{"event":"Instantiate","status":"Pending"}]}` |
//! | `rsync/state/CurrentState/`, `rsync/state/DesiredState/` | `{"Status":...}` |
//! | `rsync/state/PendingTerminateFlag/` | `true` / `false` |
//!
//! and `/activecontext/<id>/` -> `"<id>"` for the contexts rsync is working on. Instructions are
//! JSON strings whose text is JSON because EMCO's Go code formats them with `%v` before storing.
//! EMCO spells the update failure status `UpdatedFailed`; we write that and read both spellings.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
// The status types are emco-core's; re-exported so context users need one import.
pub use emco_core::lifecycle::{AppContextStatus, ClusterReadiness, RsyncEvent, RsyncStatus};
use emco_core::{ContextId, Error, ErrorKind, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use emco_store::kv::{AppContextStore, Op, Txn};

pub use emco_store::kv::{MAX_TXN_BYTES, MAX_TXN_OPS};

const CONTEXT_PREFIX: &str = "/context/";

/// A set of context ids kept beside the contexts, so that a restarted process finds the
/// contexts it must care for without listing every context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    /// Contexts with queued rsync events (EMCO's `/activecontext/`): resumed after a restart.
    Active,
    /// Contexts whose resources are deployed, whose readiness rsync follows.
    Deployed,
    /// Contexts being rolled out in waves: their rollout is resumed after a restart.
    Rollout,
    /// Contexts recorded but held from rsync by in-process controllers (ours): every process
    /// waits for their holds, so a dead one's wait is taken over.
    Held,
}

impl Registry {
    const fn prefix(self) -> &'static str {
        match self {
            Self::Active => "/activecontext/",
            Self::Deployed => "/deployedcontext/",
            Self::Rollout => "/rolloutcontext/",
            Self::Held => "/heldcontext/",
        }
    }
}
const META_GROUP: &str = "!@#metaGrp";
/// How often a read-modify-write of the event queue is retried when a writer races it.
const CAS_RETRIES: usize = 32;

/// The metadata of a context (`meta/`), field for field as EMCO's `CompositeAppMeta`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompositeAppMeta {
    /// The project.
    #[serde(rename = "Project", default)]
    pub project: String,
    /// The composite app.
    #[serde(rename = "CompositeApp", default)]
    pub composite_app: String,
    /// The composite app version.
    #[serde(rename = "Version", default)]
    pub version: String,
    /// The release name.
    #[serde(rename = "Release", default)]
    pub release: String,
    /// The deployment intent group.
    #[serde(rename = "DeploymentIntentGroup", default)]
    pub deployment_intent_group: String,
    /// The namespace resources are deployed into.
    #[serde(rename = "Namespace", default)]
    pub namespace: String,
    /// The logical cloud level (`"0"` admin, `"1"` user).
    #[serde(rename = "Level", default)]
    pub level: String,
    /// Child contexts (`null` when none, as Go writes a nil slice).
    #[serde(rename = "ChildContextIDs", default)]
    pub child_context_ids: Option<Vec<String>>,
    /// The logical cloud.
    #[serde(rename = "LogicalCloud", default)]
    pub logical_cloud: String,
    /// The logical cloud's namespace.
    #[serde(rename = "LogicalCloudNamespace", default)]
    pub logical_cloud_namespace: String,
}

impl CompositeAppMeta {
    /// The deployment intent group the context was made for.
    #[must_use]
    pub fn dig(self) -> emco_core::DigRef {
        emco_core::DigRef::new(
            self.project,
            self.composite_app,
            self.version,
            self.deployment_intent_group,
        )
    }
}

#[derive(Serialize, Deserialize)]
struct StatusDoc<T> {
    #[serde(rename = "Status")]
    status: T,
}

/// The record of a resource's deploy status (`.../resource/<name>/status/`): EMCO's
/// `{"Status": ...}`, and beside it what rsync adds (EMCO's readers ignore it): the cluster's
/// warnings, and while a resource fails or retries why, the tries so far and when the next is
/// due. `S` is the status's type: a reader that shows any word stored reads it as `String`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatusRecord<S = RsyncStatus> {
    /// The deploy status.
    #[serde(rename = "Status")]
    pub status: S,
    /// What the cluster warned about when it applied the resource.
    #[serde(rename = "Warnings", default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why it failed or retries, one CamelCase word.
    #[serde(rename = "Reason", default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last error's text.
    #[serde(rename = "Message", default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// While it retries: the tries so far.
    #[serde(rename = "Attempts", default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// While it retries: when the next try is due (RFC 3339).
    #[serde(rename = "NextRetry", default, skip_serializing_if = "Option::is_none")]
    pub next_retry: Option<String>,
}

impl<S> ResourceStatusRecord<S> {
    /// A record of `status` alone.
    #[must_use]
    pub const fn new(status: S) -> Self {
        Self {
            status,
            warnings: Vec::new(),
            reason: None,
            message: None,
            attempts: None,
            next_retry: None,
        }
    }

    /// The record with why it failed or retries.
    #[must_use]
    pub fn because(mut self, reason: &str, message: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self.message = Some(message.to_owned());
        self
    }
}

/// The processing status of a queued event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QueueStatus {
    /// Waiting.
    Pending,
    /// Processed.
    Done,
    /// Processing failed.
    Error,
    /// Skipped (invalid in the context's state, or superseded by a terminate).
    #[serde(alias = "skip")]
    Skip,
}

/// One element of the event queue (`rsync/AppContextEventQueue/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueElement {
    /// The event.
    pub event: RsyncEvent,
    /// The other context of an update event.
    #[serde(rename = "uCID", default, skip_serializing_if = "Option::is_none")]
    pub ucid: Option<String>,
    /// The clusters (`provider+cluster`) the event is limited to (a wave of a rollout); absent
    /// for all of the context's clusters, as EMCO's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    /// Pending, Done, Error or Skip.
    pub status: QueueStatus,
    /// What asked for it, when an ask must be queued once however often it is made (a
    /// rollout's wave, asked again by a driver that cannot know whether the one before asked);
    /// ours, not EMCO's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct EventQueue {
    #[serde(rename = "AcQueue", default)]
    ac_queue: Option<Vec<QueueElement>>,
}

/// A dependency of an app on another app (`app/<app>/instruction/dependency/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppDependency {
    /// The app depended on.
    pub app: String,
    /// What the other app must reach: `Deployed` or `Ready`.
    #[serde(rename = "opStatus")]
    pub op_status: String,
    /// Seconds to wait after that.
    #[serde(default)]
    pub wait: u64,
}

/// The Helm hook groups of a cluster's resources (`resource/instruction/dependency/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookGroups {
    /// CRDs installed first.
    #[serde(rename = "crd-install", default)]
    pub crd_install: Vec<String>,
    /// Run (and awaited) before the resources.
    #[serde(rename = "pre-install", default)]
    pub pre_install: Vec<String>,
    /// Run after the resources.
    #[serde(rename = "post-install", default)]
    pub post_install: Vec<String>,
    /// Run before terminate deletes the resources.
    #[serde(rename = "pre-delete", default)]
    pub pre_delete: Vec<String>,
    /// Run after terminate.
    #[serde(rename = "post-delete", default)]
    pub post_delete: Vec<String>,
}

fn json<T: Serialize + ?Sized>(v: &T) -> Result<Bytes> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| Error::internal("cannot encode an AppContext value").with_source(e))
}

/// A JSON string whose text is the JSON of `v`: how EMCO stores instructions.
fn json_in_string<T: Serialize + ?Sized>(v: &T) -> Result<Bytes> {
    let inner = serde_json::to_string(v)
        .map_err(|e| Error::internal("cannot encode an instruction").with_source(e))?;
    json(&inner)
}

fn parse<T: DeserializeOwned>(key: &str, raw: &[u8]) -> Result<T> {
    serde_json::from_slice(raw).map_err(|e| {
        Error::internal(format!("AppContext value at {key} is malformed")).with_source(e)
    })
}

fn parse_in_string<T: DeserializeOwned>(key: &str, raw: &[u8]) -> Result<T> {
    let inner: String = parse(key, raw)?;
    parse(key, inner.as_bytes())
}

fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') {
        return Err(Error::invalid(format!(
            "{what} name {name:?} must be non-empty and contain no '/'"
        ))
        .with_field(what));
    }
    Ok(())
}

/// What one key of a context is, from its path below the context's root: lets a reader take a
/// whole context from one prefix listing without knowing the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextKey<'a> {
    /// The context's own key (`""`).
    Root,
    /// `status/`.
    Status,
    /// `app/instruction/order/`.
    AppOrder,
    /// `app/<app>/`.
    App(&'a str),
    /// `app/<app>/cluster/<cluster>/` (the cluster is placed, whatever its resources).
    Cluster(&'a str, &'a str),
    /// `app/<app>/cluster/<cluster>/readystatus/`.
    ReadyStatus(&'a str, &'a str),
    /// `app/<app>/cluster/<cluster>/status/` (the collected status).
    ClusterStatus(&'a str, &'a str),
    /// `app/<app>/cluster/<cluster>/resource/instruction/order/`.
    ResourceOrder(&'a str, &'a str),
    /// `app/<app>/cluster/<cluster>/resource/instruction/dependency/` (hook groups).
    HookGroups(&'a str, &'a str),
    /// `app/<app>/cluster/<cluster>/resource/<name>/` (the manifest): app, cluster, name.
    Resource(&'a str, &'a str, &'a str),
    /// `app/<app>/cluster/<cluster>/resource/<name>/status/`: app, cluster, name.
    ResourceStatus(&'a str, &'a str, &'a str),
    /// Any other key (meta, instructions, cluster groups, rsync state, ...).
    Other,
}

impl<'a> ContextKey<'a> {
    /// The kind of `key`, a key of the context whose root key is `root`; `None` outside it.
    #[must_use]
    pub fn parse(root: &str, key: &'a str) -> Option<Self> {
        let rest = key.strip_prefix(root)?;
        // Split into a fixed array, not a vector: readers parse every key of whole contexts.
        // No known key has more than 8 parts.
        let mut parts = [""; 9];
        let mut n = 0;
        for part in rest.split('/') {
            let Some(slot) = parts.get_mut(n) else {
                return Some(Self::Other);
            };
            *slot = part;
            n += 1;
        }
        Some(match &parts[..n] {
            [""] => Self::Root,
            ["status", ""] => Self::Status,
            ["app", "instruction", "order", ""] => Self::AppOrder,
            ["app", "instruction", ..] => Self::Other,
            ["app", app, ""] => Self::App(app),
            ["app", app, "cluster", cluster, tail @ ..] => match tail {
                [""] => Self::Cluster(app, cluster),
                ["readystatus", ""] => Self::ReadyStatus(app, cluster),
                ["status", ""] => Self::ClusterStatus(app, cluster),
                ["resource", "instruction", "order", ""] => Self::ResourceOrder(app, cluster),
                ["resource", "instruction", "dependency", ""] => Self::HookGroups(app, cluster),
                ["resource", "instruction", ..] => Self::Other,
                ["resource", name, ""] => Self::Resource(app, cluster, name),
                ["resource", name, "status", ""] => Self::ResourceStatus(app, cluster, name),
                _ => Self::Other,
            },
            _ => Self::Other,
        })
    }
}

/// A new context's id: a positive int63 as EMCO's (`rand.Int63`), made of the creation time in
/// milliseconds above 20 random bits. Ids of one length sort by time, so a new context's keys
/// (`/context/<id>/...`) go to the end of the store's key order, where a B-tree's writes touch
/// few pages, instead of anywhere in it: with random ids each commit dirtied pages all over a
/// store that grows with every context, and onboarding slowed as contexts accumulated.
fn fresh_id(now: std::time::SystemTime) -> ContextId {
    let millis = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let random = rand::random::<u64>() & ((1 << 20) - 1);
    // Below 2^63 for some millions of years; never 0.
    ContextId::new((((millis << 20) | random) & (u64::MAX >> 1)).max(1))
}

/// A handle on one context in an [`AppContextStore`].
#[derive(Debug, Clone)]
pub struct AppContext {
    store: Arc<dyn AppContextStore>,
    id: ContextId,
    root: String,
}

impl AppContext {
    /// Creates a context with a fresh id, its root key and its metadata.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn create(store: Arc<dyn AppContextStore>, meta: &CompositeAppMeta) -> Result<Self> {
        loop {
            let id = fresh_id(std::time::SystemTime::now());
            let ctx = Self::handle(Arc::clone(&store), id);
            let txn = Txn::new()
                .when(emco_store::kv::Compare::absent(ctx.root.clone()))
                .op(Op::put(ctx.root.clone(), json(&id.to_string())?))
                .op(Op::put(ctx.key("meta/"), json(meta)?));
            // A clash with an existing id is astronomically rare; pick another.
            if store.txn(txn).await?.succeeded {
                return Ok(ctx);
            }
        }
    }

    /// Opens the existing context `id`.
    ///
    /// # Errors
    /// `NotFound` when there is no such context.
    pub async fn load(store: Arc<dyn AppContextStore>, id: ContextId) -> Result<Self> {
        let ctx = Self::handle(store, id);
        if ctx.store.get(&ctx.root).await?.is_none() {
            return Err(Error::not_found(format!("AppContext {id} does not exist")));
        }
        Ok(ctx)
    }

    /// The same context reached through `store` (a [`crate::FencedStore`] over its own).
    #[must_use]
    pub fn through(&self, store: Arc<dyn AppContextStore>) -> Self {
        Self::handle(store, self.id)
    }

    fn handle(store: Arc<dyn AppContextStore>, id: ContextId) -> Self {
        Self {
            store,
            id,
            root: Self::prefix(id),
        }
    }

    /// The context id.
    #[must_use]
    pub fn id(&self) -> ContextId {
        self.id
    }

    /// The prefix of every key of context `id` (`/context/<id>/`, also the key of its root).
    #[must_use]
    pub fn prefix(id: ContextId) -> String {
        format!("{CONTEXT_PREFIX}{id}/")
    }

    /// The root key, `/context/<id>/`.
    #[must_use]
    pub fn root_key(&self) -> &str {
        &self.root
    }

    /// The store the context lives in.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn AppContextStore> {
        &self.store
    }

    fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.root)
    }

    fn cluster_key(&self, app: &str, cluster: &str, rest: &str) -> String {
        self.key(&format!("app/{app}/cluster/{cluster}/{rest}"))
    }

    fn ready_status_key(&self, app: &str, cluster: &str) -> String {
        self.cluster_key(app, cluster, "readystatus/")
    }

    /// A writer that batches many keys into few transactions.
    #[must_use]
    pub fn writer(&self) -> ContextWriter {
        ContextWriter {
            ctx: self.clone(),
            ops: Vec::new(),
            resources: HashSet::new(),
        }
    }

    async fn get_raw(&self, key: &str) -> Result<Option<Bytes>> {
        Ok(self.store.get(key).await?.map(|kv| kv.value))
    }

    async fn get_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        self.get_raw(key)
            .await?
            .map(|raw| parse(key, &raw))
            .transpose()
    }

    async fn get_instruction<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        self.get_raw(key)
            .await?
            .map(|raw| parse_in_string(key, &raw))
            .transpose()
    }

    async fn put_json<T: Serialize + ?Sized>(&self, key: &str, v: &T) -> Result<()> {
        self.store.put(key, json(v)?).await.map(drop)
    }

    async fn child_names(&self, base: &str) -> Result<Vec<String>> {
        self.store.child_names(base).await
    }

    /// The metadata.
    ///
    /// # Errors
    /// `NotFound` when the context has none.
    pub async fn meta(&self) -> Result<CompositeAppMeta> {
        let key = self.key("meta/");
        self.get_json(&key)
            .await?
            .ok_or_else(|| Error::not_found(format!("{key} is missing")))
    }

    /// Records context `child` in the metadata's `ChildContextIDs` (EMCO's sds does so for the
    /// contexts it deploys for a group): the orchestrator terminates the children with their
    /// parent. Recording one twice records it once. A compare-and-set, so two writers cannot
    /// lose each other's child.
    ///
    /// # Errors
    /// `NotFound` when the context has no metadata; the store's errors.
    pub async fn add_child_context(&self, child: ContextId) -> Result<()> {
        let key = self.key("meta/");
        loop {
            let kv = self
                .store
                .get(&key)
                .await?
                .ok_or_else(|| Error::not_found(format!("{key} is missing")))?;
            let mut meta: CompositeAppMeta = parse(&key, &kv.value)?;
            let ids = meta.child_context_ids.get_or_insert_with(Vec::new);
            let child = child.to_string();
            if ids.contains(&child) {
                return Ok(());
            }
            ids.push(child);
            let txn = Txn::new()
                .when(emco_store::kv::Compare::mod_revision(
                    key.clone(),
                    kv.mod_revision,
                ))
                .op(Op::put(key.clone(), json(&meta)?));
            if self.store.txn(txn).await?.succeeded {
                return Ok(());
            }
        }
    }

    /// The contexts recorded as children of this one ([`Self::add_child_context`]).
    ///
    /// # Errors
    /// `NotFound` when the context has no metadata; `Internal` for an id that is not a number.
    pub async fn child_contexts(&self) -> Result<Vec<ContextId>> {
        let meta = self.meta().await?;
        meta.child_context_ids
            .unwrap_or_default()
            .iter()
            .map(|id| {
                ContextId::from_record(id, format_args!("the children of context {}", self.id))
            })
            .collect()
    }

    /// The apps.
    pub async fn apps(&self) -> Result<Vec<String>> {
        self.child_names(&self.key("app/")).await
    }

    /// The clusters of `app`.
    pub async fn clusters(&self, app: &str) -> Result<Vec<String>> {
        self.child_names(&self.key(&format!("app/{app}/cluster/")))
            .await
    }

    /// Those of `candidates` that are clusters of `app`, in the order of [`Self::clusters`]:
    /// a point read each, so a wave of a rollout costs its own size, not the fleet's.
    pub async fn clusters_among(
        &self,
        app: &str,
        candidates: impl IntoIterator<Item = &str>,
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for c in candidates {
            if self
                .store
                .get(&self.cluster_key(app, c, ""))
                .await?
                .is_some()
            {
                out.push(c.to_owned());
            }
        }
        // Key order, as a listing gives them.
        out.sort_unstable();
        Ok(out)
    }

    /// The anyOf group of a cluster of `app`, if it has one.
    pub async fn cluster_group(&self, app: &str, cluster: &str) -> Result<Option<String>> {
        self.get_json(&self.cluster_key(app, cluster, &format!("{META_GROUP}/")))
            .await
    }

    /// The clusters of `app` by anyOf group (clusters without a group are left out).
    pub async fn cluster_groups(&self, app: &str) -> Result<BTreeMap<String, Vec<String>>> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in self.clusters(app).await? {
            if let Some(g) = self.cluster_group(app, &c).await? {
                groups.entry(g).or_default().push(c);
            }
        }
        Ok(groups)
    }

    /// The resources (`name+Kind`) of `app` on `cluster`.
    pub async fn resources(&self, app: &str, cluster: &str) -> Result<Vec<String>> {
        let base = self.cluster_key(app, cluster, "resource/");
        let mut names = self.child_names(&base).await?;
        names.retain(|n| n != "instruction");
        Ok(names)
    }

    /// The YAML text of a resource.
    pub async fn resource(&self, app: &str, cluster: &str, name: &str) -> Result<Option<String>> {
        self.get_json(&self.cluster_key(app, cluster, &format!("resource/{name}/")))
            .await
    }

    /// The app order.
    pub async fn app_order(&self) -> Result<Option<Vec<String>>> {
        #[derive(Deserialize)]
        struct Order {
            apporder: Vec<String>,
        }
        let order: Option<Order> = self
            .get_instruction(&self.key("app/instruction/order/"))
            .await?;
        Ok(order.map(|o| o.apporder))
    }

    /// The composite-level app dependency instruction (`{"<app>":"go"}`).
    pub async fn app_dependency_instruction(&self) -> Result<Option<BTreeMap<String, String>>> {
        #[derive(Deserialize)]
        struct Dep {
            appdependency: BTreeMap<String, String>,
        }
        let dep: Option<Dep> = self
            .get_instruction(&self.key("app/instruction/dependency/"))
            .await?;
        Ok(dep.map(|d| d.appdependency))
    }

    /// What `app` depends on.
    pub async fn app_dependencies(&self, app: &str) -> Result<Option<Vec<AppDependency>>> {
        self.get_instruction(&self.key(&format!("app/{app}/instruction/dependency/")))
            .await
    }

    /// The resource order of `app` on `cluster`.
    pub async fn resource_order(&self, app: &str, cluster: &str) -> Result<Option<Vec<String>>> {
        #[derive(Deserialize)]
        struct Order {
            resorder: Vec<String>,
        }
        let key = self.cluster_key(app, cluster, "resource/instruction/order/");
        Ok(self
            .get_instruction::<Order>(&key)
            .await?
            .map(|o| o.resorder))
    }

    /// The hook groups of `app` on `cluster`.
    pub async fn hook_groups(&self, app: &str, cluster: &str) -> Result<Option<HookGroups>> {
        #[derive(Deserialize)]
        struct Dep {
            resdependency: HookGroups,
        }
        let key = self.cluster_key(app, cluster, "resource/instruction/dependency/");
        Ok(self
            .get_instruction::<Dep>(&key)
            .await?
            .map(|d| d.resdependency))
    }

    /// Sets the deploy status of a resource.
    pub async fn set_resource_status(
        &self,
        app: &str,
        cluster: &str,
        resource: &str,
        status: RsyncStatus,
    ) -> Result<()> {
        let key = self.cluster_key(app, cluster, &format!("resource/{resource}/status/"));
        self.put_json(&key, &ResourceStatusRecord::new(status))
            .await
    }

    /// The deploy status of a resource.
    pub async fn resource_status(
        &self,
        app: &str,
        cluster: &str,
        resource: &str,
    ) -> Result<Option<RsyncStatus>> {
        let key = self.cluster_key(app, cluster, &format!("resource/{resource}/status/"));
        Ok(self
            .get_json::<ResourceStatusRecord>(&key)
            .await?
            .map(|d| d.status))
    }

    /// Sets whether rsync can reach a cluster.
    pub async fn set_cluster_ready_status(
        &self,
        app: &str,
        cluster: &str,
        s: ClusterReadiness,
    ) -> Result<()> {
        self.put_json(&self.ready_status_key(app, cluster), &s)
            .await
    }

    /// The write [`Self::set_cluster_ready_status`] makes, as an operation for a transaction
    /// that records more.
    ///
    /// # Errors
    /// None in practice: the value always encodes.
    pub fn cluster_ready_status_op(
        &self,
        app: &str,
        cluster: &str,
        s: ClusterReadiness,
    ) -> Result<Op> {
        Ok(Op::put(self.ready_status_key(app, cluster), json(&s)?))
    }

    /// Whether rsync can reach a cluster (`Unknown` when never set).
    pub async fn cluster_ready_status(&self, app: &str, cluster: &str) -> Result<ClusterReadiness> {
        let s = self.get_json(&self.ready_status_key(app, cluster)).await?;
        Ok(s.unwrap_or(ClusterReadiness::Unknown))
    }

    /// Stores the collected status of a cluster.
    pub async fn set_cluster_status(&self, app: &str, cluster: &str, status: &Value) -> Result<()> {
        self.put_json(&self.cluster_key(app, cluster, "status/"), status)
            .await
    }

    /// The collected status of a cluster.
    pub async fn cluster_status(&self, app: &str, cluster: &str) -> Result<Option<Value>> {
        self.get_json(&self.cluster_key(app, cluster, "status/"))
            .await
    }

    /// Sets the context status.
    pub async fn set_status(&self, status: AppContextStatus) -> Result<()> {
        self.put_json(&self.key("status/"), &StatusDoc { status })
            .await
    }

    /// The context status.
    pub async fn status(&self) -> Result<Option<AppContextStatus>> {
        Ok(self
            .get_json::<StatusDoc<AppContextStatus>>(&self.key("status/"))
            .await?
            .map(|d| d.status))
    }

    /// Sets rsync's current state.
    pub async fn set_current_state(&self, status: AppContextStatus) -> Result<()> {
        self.put_json(
            &self.key("rsync/state/CurrentState/"),
            &StatusDoc { status },
        )
        .await
    }

    /// Rsync's current state.
    pub async fn current_state(&self) -> Result<Option<AppContextStatus>> {
        let key = self.key("rsync/state/CurrentState/");
        Ok(self
            .get_json::<StatusDoc<AppContextStatus>>(&key)
            .await?
            .map(|d| d.status))
    }

    /// Sets rsync's desired state.
    pub async fn set_desired_state(&self, status: AppContextStatus) -> Result<()> {
        self.put_json(
            &self.key("rsync/state/DesiredState/"),
            &StatusDoc { status },
        )
        .await
    }

    /// Rsync's desired state.
    pub async fn desired_state(&self) -> Result<Option<AppContextStatus>> {
        let key = self.key("rsync/state/DesiredState/");
        Ok(self
            .get_json::<StatusDoc<AppContextStatus>>(&key)
            .await?
            .map(|d| d.status))
    }

    /// Sets the pending-terminate flag.
    pub async fn set_pending_terminate(&self, on: bool) -> Result<()> {
        self.put_json(&self.key("rsync/state/PendingTerminateFlag/"), &on)
            .await
    }

    /// The pending-terminate flag (false when never set).
    pub async fn pending_terminate(&self) -> Result<bool> {
        let key = self.key("rsync/state/PendingTerminateFlag/");
        Ok(self.get_json(&key).await?.unwrap_or(false))
    }

    /// Sets the stop flag.
    pub async fn set_stop_flag(&self, stop: bool) -> Result<()> {
        self.put_json(&self.key("stopflag/"), &stop).await
    }

    /// The stop flag (false when never set).
    pub async fn stop_flag(&self) -> Result<bool> {
        Ok(self
            .get_json(&self.key("stopflag/"))
            .await?
            .unwrap_or(false))
    }

    /// The drift policy the deployment follows (`driftpolicy/`, ours), when its group had one.
    ///
    /// # Errors
    /// The store's errors; InvalidArgument when it does not parse.
    pub async fn drift_policy<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        self.get_json(&self.key("driftpolicy/")).await
    }

    /// The record of the rollout that deploys this context in waves (`rollout/`), with its
    /// revision for [`AppContext::put_rollout`]; `None` when it is deployed at once.
    pub async fn rollout<T: DeserializeOwned>(&self) -> Result<Option<(T, u64)>> {
        self.versioned("rollout/").await
    }

    /// Writes the rollout record if it is still at `revision` (0: there is none yet); returns
    /// the new revision.
    ///
    /// # Errors
    /// `Conflict` when another writer changed it since; the store's errors.
    pub async fn put_rollout<T: Serialize>(&self, record: &T, revision: u64) -> Result<u64> {
        self.put_versioned("rollout/", record, revision).await
    }

    /// The JSON record at `suffix` of this context with its revision.
    async fn versioned<T: DeserializeOwned>(&self, suffix: &str) -> Result<Option<(T, u64)>> {
        let key = self.key(suffix);
        match self.store.get(&key).await? {
            Some(kv) => Ok(Some((parse(&key, &kv.value)?, kv.mod_revision))),
            None => Ok(None),
        }
    }

    /// Writes the JSON record at `suffix` if it is still at `revision`; the new revision.
    async fn put_versioned<T: Serialize>(
        &self,
        suffix: &str,
        record: &T,
        revision: u64,
    ) -> Result<u64> {
        self.store
            .compare_and_set(&self.key(suffix), json(record)?, revision)
            .await
    }

    /// The holds in-process controllers took on this context's hand-over to rsync (`holds/`,
    /// ours), with the record's revision for [`AppContext::put_holds`].
    ///
    /// # Errors
    /// The store's errors; InvalidArgument when it does not parse.
    pub async fn holds<T: DeserializeOwned>(&self) -> Result<Option<(T, u64)>> {
        self.versioned("holds/").await
    }

    /// Writes the holds record if it is still at `revision` (0: there is none yet); returns the
    /// new revision.
    ///
    /// # Errors
    /// `Conflict` when another writer changed it since; the store's errors.
    pub async fn put_holds<T: Serialize>(&self, record: &T, revision: u64) -> Result<u64> {
        self.put_versioned("holds/", record, revision).await
    }

    /// What the controller `controller` noted on this context for a later call on it (ours,
    /// `notes/{controller}/`: tac's workers to terminate after the operation), with the
    /// record's revision for [`AppContext::put_note`].
    ///
    /// # Errors
    /// The store's errors; InvalidArgument when it does not parse.
    pub async fn note<T: DeserializeOwned>(&self, controller: &str) -> Result<Option<(T, u64)>> {
        self.versioned(&format!("notes/{controller}/")).await
    }

    /// Writes `controller`'s note if it is still at `revision` (0: there is none yet); returns
    /// the new revision.
    ///
    /// # Errors
    /// `Conflict` when another writer changed it since; the store's errors.
    pub async fn put_note<T: Serialize>(
        &self,
        controller: &str,
        record: &T,
        revision: u64,
    ) -> Result<u64> {
        self.put_versioned(&format!("notes/{controller}/"), record, revision)
            .await
    }

    /// The event queue, oldest first.
    pub async fn event_queue(&self) -> Result<Vec<QueueElement>> {
        let key = self.key("rsync/AppContextEventQueue/");
        let q: Option<EventQueue> = self.get_json(&key).await?;
        Ok(q.and_then(|q| q.ac_queue).unwrap_or_default())
    }

    /// Read-modify-write of the event queue with compare-and-set, retried when raced.
    async fn update_queue<T>(
        &self,
        mut f: impl FnMut(&mut Vec<QueueElement>) -> Result<T>,
    ) -> Result<T> {
        let key = self.key("rsync/AppContextEventQueue/");
        for _ in 0..CAS_RETRIES {
            let current = self.store.get(&key).await?;
            let (mut queue, rev) = match &current {
                Some(kv) => {
                    let q: EventQueue = parse(&key, &kv.value)?;
                    (q.ac_queue.unwrap_or_default(), kv.mod_revision)
                }
                None => (Vec::new(), 0),
            };
            let out = f(&mut queue)?;
            let value = json(&EventQueue {
                ac_queue: Some(queue),
            })?;
            match self.store.compare_and_set(&key, value, rev).await {
                Ok(_) => return Ok(out),
                Err(e) if e.kind() == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!(
            "the event queue of context {} kept changing",
            self.id
        )))
    }

    /// Appends an event to the queue; returns its index.
    pub async fn enqueue_event(&self, element: QueueElement) -> Result<usize> {
        self.update_queue(|q| {
            q.push(element.clone());
            Ok(q.len() - 1)
        })
        .await
    }

    /// Appends an event unless one of the same `origin` was ever queued (in one
    /// compare-and-set with the look); returns whether it was appended.
    pub async fn enqueue_event_once(&self, element: QueueElement) -> Result<bool> {
        self.update_queue(|q| {
            let queued = element.origin.is_some() && q.iter().any(|e| e.origin == element.origin);
            if !queued {
                q.push(element.clone());
            }
            Ok(!queued)
        })
        .await
    }

    /// Sets the status of the queued event at `index`.
    ///
    /// # Errors
    /// `InvalidArgument` when there is no such element.
    pub async fn set_event_status(&self, index: usize, status: QueueStatus) -> Result<()> {
        self.update_queue(|q| match q.get_mut(index) {
            Some(e) => {
                e.status = status;
                Ok(())
            }
            None => Err(Error::invalid(format!(
                "no event at index {index} of the queue"
            ))),
        })
        .await
    }

    /// Records this context as active (rsync is working on it).
    pub async fn mark_active(&self) -> Result<()> {
        self.mark(Registry::Active).await
    }

    /// Removes this context from the active registry; returns whether it was there.
    pub async fn unmark_active(&self) -> Result<bool> {
        self.unmark(Registry::Active).await
    }

    /// The ids of the active contexts (the ones rsync resumes after a restart).
    pub async fn active_contexts(store: &dyn AppContextStore) -> Result<Vec<ContextId>> {
        Self::registered(store, Registry::Active).await
    }

    /// Records this context in `registry`.
    pub async fn mark(&self, registry: Registry) -> Result<()> {
        self.put_json(
            &format!("{}{}/", registry.prefix(), self.id),
            &self.id.to_string(),
        )
        .await
    }

    /// Whether rsync is working on this context or has work queued for it: its status is a
    /// running one, or an event waits in its queue.
    pub async fn is_busy(&self) -> Result<bool> {
        if self
            .status()
            .await?
            .is_some_and(AppContextStatus::is_running)
        {
            return Ok(true);
        }
        Ok(self
            .event_queue()
            .await?
            .iter()
            .any(|e| e.status == QueueStatus::Pending))
    }

    /// Whether this context is in `registry`.
    pub async fn is_marked(&self, registry: Registry) -> Result<bool> {
        let key = format!("{}{}/", registry.prefix(), self.id);
        Ok(self.store.get(&key).await?.is_some())
    }

    /// Removes this context from `registry`; returns whether it was there.
    pub async fn unmark(&self, registry: Registry) -> Result<bool> {
        Self::unregister(self.store.as_ref(), registry, self.id).await
    }

    /// Removes context `id` from `registry` (also when the context itself is gone); returns
    /// whether it was there.
    pub async fn unregister(
        store: &dyn AppContextStore,
        registry: Registry,
        id: ContextId,
    ) -> Result<bool> {
        store.delete(&format!("{}{id}/", registry.prefix())).await
    }

    /// The ids of the contexts in `registry`, read with one keys-only listing.
    pub async fn registered(
        store: &dyn AppContextStore,
        registry: Registry,
    ) -> Result<Vec<ContextId>> {
        let prefix = registry.prefix();
        store
            .child_names(prefix)
            .await?
            .into_iter()
            .map(|id| ContextId::from_record(&id, format_args!("registry {prefix}")))
            .collect()
    }

    /// Deletes the context and every key under it (not its active-registry entry).
    pub async fn delete(&self) -> Result<()> {
        self.store.delete_prefix(&self.root).await.map(drop)
    }

    /// Deletes a context that was never handed to rsync (its operation failed before): a
    /// failure only leaves unused keys behind, so it is logged, not answered.
    pub async fn discard(&self) {
        if let Err(e) = self.delete().await {
            tracing::warn!(ctx = %self.id(), error = %e, "cannot delete an unused AppContext");
        }
    }
}

/// Collects the keys of a context and writes them in transactions of at most [`MAX_TXN_OPS`]
/// operations and [`MAX_TXN_BYTES`] bytes, so a context of 100,000 keys costs about 800 round
/// trips, not 100,000. Nothing is written before [`ContextWriter::flush`].
#[derive(Debug)]
pub struct ContextWriter {
    ctx: AppContext,
    ops: Vec<Op>,
    /// (app, cluster, resource) added by this writer, to reject `name+Kind` collisions.
    resources: HashSet<(String, String, String)>,
}

impl ContextWriter {
    fn push(&mut self, key: String, value: Bytes) {
        self.ops.push(Op::put(key, value));
    }

    /// Adds an app.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty name or one with `/`.
    pub fn add_app(&mut self, app: &str) -> Result<()> {
        check_name("app", app)?;
        let v = json(app)?;
        self.push(self.ctx.key(&format!("app/{app}/")), v);
        Ok(())
    }

    /// Adds a cluster (`provider+cluster`) to `app`, with its anyOf group number if any.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad name.
    pub fn add_cluster(&mut self, app: &str, cluster: &str, group: Option<&str>) -> Result<()> {
        check_name("app", app)?;
        check_name("cluster", cluster)?;
        self.push(self.ctx.cluster_key(app, cluster, ""), json(cluster)?);
        if let Some(g) = group {
            self.push(
                self.ctx
                    .cluster_key(app, cluster, &format!("{META_GROUP}/")),
                json(g)?,
            );
        }
        Ok(())
    }

    /// Adds a resource (`name+Kind`) with its YAML text.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad name; `AlreadyExists` when this writer already added the same
    /// `name+Kind` for the app and cluster (EMCO's key cannot tell two namespaces apart).
    pub fn add_resource(&mut self, app: &str, cluster: &str, name: &str, yaml: &str) -> Result<()> {
        check_name("app", app)?;
        check_name("cluster", cluster)?;
        check_name("resource", name)?;
        if name == "instruction" {
            return Err(Error::invalid("\"instruction\" is reserved").with_field("resource"));
        }
        if !self
            .resources
            .insert((app.to_owned(), cluster.to_owned(), name.to_owned()))
        {
            return Err(Error::already_exists(format!(
                "resource {name} is added twice to app {app} on cluster {cluster}; \
                 resources are identified by name+Kind, so same-named resources of one kind \
                 in two namespaces collide"
            )));
        }
        self.push(
            self.ctx
                .cluster_key(app, cluster, &format!("resource/{name}/")),
            json(yaml)?,
        );
        Ok(())
    }

    /// Sets the app order.
    pub fn set_app_order(&mut self, apps: &[&str]) -> Result<()> {
        let v = json_in_string(&serde_json::json!({ "apporder": apps }))?;
        self.push(self.ctx.key("app/instruction/order/"), v);
        Ok(())
    }

    /// Sets the composite-level app dependency instruction; EMCO writes `"go"` for every app.
    pub fn set_app_dependency_instruction(
        &mut self,
        deps: &BTreeMap<String, String>,
    ) -> Result<()> {
        let v = json_in_string(&serde_json::json!({ "appdependency": deps }))?;
        self.push(self.ctx.key("app/instruction/dependency/"), v);
        Ok(())
    }

    /// Sets what `app` depends on.
    pub fn set_app_dependencies(&mut self, app: &str, deps: &[AppDependency]) -> Result<()> {
        check_name("app", app)?;
        let v = json_in_string(deps)?;
        self.push(
            self.ctx.key(&format!("app/{app}/instruction/dependency/")),
            v,
        );
        Ok(())
    }

    /// Sets the resource order of `app` on `cluster`.
    pub fn set_resource_order(&mut self, app: &str, cluster: &str, order: &[&str]) -> Result<()> {
        check_name("app", app)?;
        check_name("cluster", cluster)?;
        let v = json_in_string(&serde_json::json!({ "resorder": order }))?;
        self.push(
            self.ctx
                .cluster_key(app, cluster, "resource/instruction/order/"),
            v,
        );
        Ok(())
    }

    /// Sets the hook groups of `app` on `cluster`.
    pub fn set_hook_groups(&mut self, app: &str, cluster: &str, hooks: &HookGroups) -> Result<()> {
        check_name("app", app)?;
        check_name("cluster", cluster)?;
        let v = json_in_string(&serde_json::json!({ "resdependency": hooks }))?;
        self.push(
            self.ctx
                .cluster_key(app, cluster, "resource/instruction/dependency/"),
            v,
        );
        Ok(())
    }

    /// Sets the drift policy the deployment follows (`driftpolicy/`, ours).
    ///
    /// # Errors
    /// When it does not serialize.
    pub fn set_drift_policy<T: Serialize>(&mut self, policy: &T) -> Result<()> {
        let v = json(policy)?;
        self.push(self.ctx.key("driftpolicy/"), v);
        Ok(())
    }

    /// Sets the initial context status.
    pub fn set_status(&mut self, status: AppContextStatus) -> Result<()> {
        let v = json(&StatusDoc { status })?;
        self.push(self.ctx.key("status/"), v);
        Ok(())
    }

    /// How many keys wait to be written.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.ops.len()
    }

    /// Writes everything collected, in as few transactions as the limits allow; returns how many
    /// transactions it took. A key written twice keeps its last value.
    ///
    /// # Errors
    /// The store's errors; keys of the batches before the failing one are written.
    pub async fn flush(&mut self) -> Result<usize> {
        let ops = dedup_last(std::mem::take(&mut self.ops));
        let mut txns = 0;
        for batch in batches(ops) {
            self.ctx
                .store
                .txn(Txn {
                    compares: Vec::new(),
                    ops: batch,
                })
                .await?;
            txns += 1;
        }
        Ok(txns)
    }
}

/// Keeps the last put of every key (a transaction may write a key once), in first-seen order.
fn dedup_last(ops: Vec<Op>) -> Vec<Op> {
    // Which operations a later put of the same key replaces; keys are borrowed, not copied
    // (a context of 10,000 clusters is hundreds of thousands of them).
    let mut replaced = vec![false; ops.len()];
    {
        let mut last: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            if let Op::Put { key, .. } = op
                && let Some(earlier) = last.insert(key.as_str(), i)
            {
                replaced[earlier] = true;
            }
        }
    }
    if !replaced.contains(&true) {
        return ops;
    }
    ops.into_iter()
        .zip(replaced)
        .filter_map(|(op, replaced)| (!replaced).then_some(op))
        .collect()
}

/// Splits `ops` into transactions within [`MAX_TXN_OPS`] and [`MAX_TXN_BYTES`]. An operation
/// bigger than the byte limit goes alone (the store then decides).
pub(crate) fn batches(ops: Vec<Op>) -> Vec<Vec<Op>> {
    let mut out = Vec::new();
    let mut current: Vec<Op> = Vec::new();
    let mut bytes = 0;
    for op in ops {
        let size = op.request_bytes();
        if !current.is_empty() && (current.len() == MAX_TXN_OPS || bytes + size > MAX_TXN_BYTES) {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += size;
        current.push(op);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_sort_by_creation_time_as_numbers_and_as_text() {
        let t0 = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_000_000);
        let ids: Vec<ContextId> = (0..50)
            .map(|ms| fresh_id(t0 + std::time::Duration::from_millis(ms)))
            .collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{pair:?}");
            assert!(pair[0].to_string() < pair[1].to_string(), "{pair:?}");
        }
        for id in &ids {
            assert!(id.get() > 0 && id.get() < 1 << 63);
            assert_eq!(id.to_string().len(), 19, "{id}");
        }
        // Within one millisecond the random bits tell ids apart.
        let same: std::collections::HashSet<ContextId> = (0..100).map(|_| fresh_id(t0)).collect();
        assert!(same.len() > 90);
    }

    #[test]
    fn batches_respect_both_limits() {
        let small: Vec<Op> = (0..300).map(|i| Op::put(format!("k{i}"), "v")).collect();
        let b = batches(small);
        assert_eq!(
            b.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![128, 128, 44]
        );
        let big: Vec<Op> = (0..5)
            .map(|i| Op::put(format!("k{i}"), vec![0u8; 600_000]))
            .collect();
        let b = batches(big);
        assert!(
            b.iter()
                .all(|t| t.iter().map(Op::request_bytes).sum::<usize>() <= MAX_TXN_BYTES)
        );
        assert_eq!(b.iter().map(Vec::len).sum::<usize>(), 5);
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn context_keys_are_told_apart() {
        fn parse(key: &str) -> Option<ContextKey<'_>> {
            ContextKey::parse("/context/9/", key)
        }
        assert_eq!(parse("/context/9/"), Some(ContextKey::Root));
        assert_eq!(parse("/context/9/status/"), Some(ContextKey::Status));
        assert_eq!(parse("/context/9/meta/"), Some(ContextKey::Other));
        assert_eq!(
            parse("/context/9/app/instruction/order/"),
            Some(ContextKey::AppOrder)
        );
        assert_eq!(
            parse("/context/9/app/instruction/dependency/"),
            Some(ContextKey::Other)
        );
        assert_eq!(parse("/context/9/app/web/"), Some(ContextKey::App("web")));
        let c = "/context/9/app/web/cluster/p+c1/";
        assert_eq!(
            parse(&format!("{c}readystatus/")),
            Some(ContextKey::ReadyStatus("web", "p+c1"))
        );
        assert_eq!(
            parse(&format!("{c}status/")),
            Some(ContextKey::ClusterStatus("web", "p+c1"))
        );
        assert_eq!(
            parse(&format!("{c}resource/instruction/order/")),
            Some(ContextKey::ResourceOrder("web", "p+c1"))
        );
        assert_eq!(
            parse(&format!("{c}resource/instruction/dependency/")),
            Some(ContextKey::HookGroups("web", "p+c1"))
        );
        assert_eq!(
            parse(&format!("{c}resource/cm+ConfigMap/")),
            Some(ContextKey::Resource("web", "p+c1", "cm+ConfigMap"))
        );
        assert_eq!(
            parse(&format!("{c}resource/cm+ConfigMap/status/")),
            Some(ContextKey::ResourceStatus("web", "p+c1", "cm+ConfigMap"))
        );
        assert_eq!(
            parse(&format!("{c}resource/cm+ConfigMap/x/")),
            Some(ContextKey::Other)
        );
        assert_eq!(parse(c), Some(ContextKey::Cluster("web", "p+c1")));
        assert_eq!(parse("/context/10/status/"), None);
        // Deeper than any known key: past the parts parsed, still told apart.
        assert_eq!(
            parse(&format!("{c}resource/cm+ConfigMap/status/a/b/c/")),
            Some(ContextKey::Other)
        );
    }

    #[test]
    fn a_key_written_twice_keeps_its_last_value_in_its_first_place() {
        let ops = vec![
            Op::put("a".to_owned(), "1"),
            Op::put("b".to_owned(), "1"),
            Op::Delete {
                key: "c".to_owned(),
            },
            Op::put("a".to_owned(), "2"),
            Op::put("b".to_owned(), "2"),
            Op::put("b".to_owned(), "3"),
        ];
        let kept: Vec<String> = dedup_last(ops)
            .iter()
            .map(|op| match op {
                Op::Put { key, value } => format!("{key}={}", String::from_utf8_lossy(value)),
                Op::Delete { key } => format!("-{key}"),
                Op::DeletePrefix { prefix } => format!("-{prefix}*"),
            })
            .collect();
        assert_eq!(kept, ["-c", "a=2", "b=3"]);
    }

    #[test]
    fn update_failed_reads_both_spellings() {
        let s = serde_json::to_string(&StatusDoc {
            status: AppContextStatus::UpdateFailed,
        })
        .unwrap();
        assert_eq!(s, r#"{"Status":"UpdateFailed"}"#);
        for spelling in ["UpdateFailed", "UpdatedFailed"] {
            let d: StatusDoc<AppContextStatus> =
                serde_json::from_str(&format!(r#"{{"Status":"{spelling}"}}"#)).unwrap();
            assert_eq!(d.status, AppContextStatus::UpdateFailed);
        }
    }
}
