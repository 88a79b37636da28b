//! The Kubernetes connector: talks to a cluster's API server through the `kube` crate.
//!
//! - The client is built from the kubeconfig stored with the cluster (its current context; token,
//!   client certificate and CA are all taken from it). [`KubePool`] keeps one connector, hence one
//!   client and one connection pool, per cluster, and replaces it when the kubeconfig changes.
//! - Manifests are dynamic objects: discovery maps `apiVersion`/`kind` to the REST resource and
//!   its scope. Results are cached per cluster and group-version, and a group-version is queried
//!   again when it lacks a kind (a CRD applied since).
//! - Apply is server-side apply with field manager `emco` and `force`: rsync owns the objects it
//!   deploys, so it takes over fields another manager set instead of failing with a conflict.
//!   A user who may not patch creates the object when it is new, as EMCO's rsync does.
//! - Namespaced resources without a namespace go to the scope's namespace (else `default`).
//! - Delete uses the given propagation policy; objects (and kinds) that do not exist count as
//!   deleted.
//!
//! - Readiness: [`KubeConnector::watcher`] is the connector's [`ClusterWatcher`] (created on
//!   first use, sharing the discovery cache), so readiness costs one watch per resource type.
//!
//! - Every request is bounded by a request timeout ([`DEFAULT_REQUEST_TIMEOUT`]), so a cluster
//!   that accepts connections but never answers fails like an unreachable one. The client's own
//!   retry layer is off: the engine decides when to retry.
//!
//! Errors: connection failures, timeouts, HTTP 429 and 5xx are [`ErrorKind::Unavailable`]
//! (retry); other API rejections map by status (400/422 invalid, 401/403 failed precondition,
//! 404 not found, 409 conflict or already exists).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use ::kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, PropagationPolicy,
};
use ::kube::config::{KubeConfigOptions, Kubeconfig};
use ::kube::core::GroupVersion;
use ::kube::discovery::{self, ApiCapabilities, ApiResource, Scope as KubeScope};
use ::kube::{Client, Config};
use async_trait::async_trait;
use emco_core::{Error, ErrorKind, Result};
use serde_json::Value;

mod transport;
mod watch;

use transport::Transports;
pub use transport::{Answer, Budget, MAX_STREAMS};
pub use watch::ClusterWatcher;

use super::{
    Batch, BatchError, Connector, Propagation, ReadinessSource, ResourceId, Scope, Warnings,
};

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "emco";

/// The default of [`KubeConnector::with_request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How many readiness changes a cluster's watcher buffers per subscriber. Small: the buffer is
/// allocated whole for every cluster (~200 bytes a slot: 128 slots were 257 MB of the heap at
/// 10,000 clusters), and a subscriber that falls behind loses nothing but looks again at
/// everything.
const WATCH_CAPACITY: usize = 32;

/// The kinds of one group-version: kind -> resource and capabilities.
type Kinds = HashMap<String, (ApiResource, ApiCapabilities)>;

/// Discovery results by `apiVersion`, shared by a connector and its watcher.
type DiscoveryCache = Arc<RwLock<HashMap<String, Arc<Kinds>>>>;

/// What discovery needs, shareable without the connector (the watcher holds one, and the
/// connector holds the watcher).
#[derive(Clone)]
pub(crate) struct Discovery {
    pub(crate) cluster: String,
    pub(crate) client: Client,
    pub(crate) timeout: Duration,
    cache: DiscoveryCache,
}

impl Discovery {
    /// See [`KubeConnector::resolve`].
    pub(crate) async fn resolve(
        &self,
        id: &ResourceId,
    ) -> Result<Option<(ApiResource, ApiCapabilities)>> {
        if let Some(found) = self.cached(id) {
            return Ok(Some(found));
        }
        let gv = GroupVersion::gv(id.group(), id.version());
        let what = format!("discovery of {}", id.api_version);
        let answer = tokio::time::timeout(self.timeout, discovery::pinned_group(&self.client, &gv))
            .await
            .map_err(|_| {
                Error::unavailable(format!(
                    "{what}: cluster {} did not answer within {:?}",
                    self.cluster, self.timeout
                ))
            })?;
        let kinds = match answer {
            Ok(group) => group
                .versioned_resources(id.version())
                .into_iter()
                .map(|(ar, caps)| (ar.kind.clone(), (ar, caps)))
                .collect(),
            // The group-version itself is not served.
            Err(::kube::Error::Api(status)) if status.code == 404 => Kinds::new(),
            Err(e) => return Err(map_error(e, &what)),
        };
        let found = kinds.get(&id.kind).cloned();
        if let Ok(mut cache) = self.cache.write() {
            cache.insert(id.api_version.clone(), Arc::new(kinds));
        }
        Ok(found)
    }

    fn cached(&self, id: &ResourceId) -> Option<(ApiResource, ApiCapabilities)> {
        let cache = self.cache.read().ok()?;
        cache.get(&id.api_version)?.get(&id.kind).cloned()
    }
}

/// A [`Connector`] for one cluster reached through its API server.
pub struct KubeConnector {
    cluster: String,
    client: Client,
    /// How long one API request may take.
    request_timeout: Duration,
    /// Discovery results by `apiVersion`.
    discovery: DiscoveryCache,
    /// The readiness watches, started on first use.
    watcher: OnceLock<Arc<ClusterWatcher>>,
    /// When a request last succeeded.
    answered: Answered,
}

/// An instant kept in an atomic: milliseconds after a process-wide base, 0 for never.
#[derive(Debug, Default)]
struct Answered(std::sync::atomic::AtomicU64);

impl Answered {
    fn base() -> tokio::time::Instant {
        static BASE: OnceLock<tokio::time::Instant> = OnceLock::new();
        *BASE.get_or_init(tokio::time::Instant::now)
    }

    fn mark(&self) {
        let since = Self::base().elapsed().as_millis();
        let ms = u64::try_from(since).unwrap_or(u64::MAX).max(1);
        self.0.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    fn get(&self) -> Option<tokio::time::Instant> {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            ms => Some(Self::base() + Duration::from_millis(ms)),
        }
    }
}

impl std::fmt::Debug for KubeConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client holds credentials: print only what identifies the connector.
        f.debug_struct("KubeConnector")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl KubeConnector {
    /// A connector for `cluster` from the text of its kubeconfig (YAML), using its current
    /// context. No request is made until the first operation.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] if the kubeconfig cannot be parsed or names no usable
    /// context, cluster or credentials.
    pub async fn from_kubeconfig(cluster: impl Into<String>, kubeconfig: &str) -> Result<Self> {
        Self::from_kubeconfig_in(cluster, kubeconfig, None).await
    }

    /// [`KubeConnector::from_kubeconfig`] whose connections come from `transports` when the
    /// kubeconfig lets them be shared.
    async fn from_kubeconfig_in(
        cluster: impl Into<String>,
        kubeconfig: &str,
        transports: Option<&Transports>,
    ) -> Result<Self> {
        let cluster = cluster.into();
        let invalid = |e: &dyn std::fmt::Display| {
            Error::invalid(format!("kubeconfig of cluster {cluster}: {e}")).with_field("kubeconfig")
        };
        let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(|e| invalid(&e).with_source(e))?;
        let mut config = Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .map_err(|e| invalid(&e).with_source(e))?;
        // The engine owns the retry policy (per cluster, with backoff, cancellable); a retry layer
        // inside the client would only hide an overloaded cluster and delay the status change.
        config.default_retry = false;
        let client = match transports {
            Some(t) => t.client(config),
            None => Transports::default().client(config),
        }
        .map_err(|e| invalid(&e).with_source(e))?;
        Ok(Self::from_client(cluster, client))
    }

    /// A connector for `cluster` using an existing client.
    pub fn from_client(cluster: impl Into<String>, client: Client) -> Self {
        Self {
            cluster: cluster.into(),
            client,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            discovery: Arc::default(),
            watcher: OnceLock::new(),
            answered: Answered::default(),
        }
    }

    /// Sets how long one API request (apply, delete, get, discovery, health) may take before it
    /// fails as [`ErrorKind::Unavailable`]. The client has no read timeout of its own, so without
    /// this a cluster that accepts connections but never answers would hang its worker.
    #[must_use]
    pub const fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Runs one API request within the request timeout; the inner result is the request's own.
    async fn timed<T>(
        &self,
        what: &str,
        request: impl Future<Output = Result<T, ::kube::Error>>,
    ) -> Result<Result<T, ::kube::Error>> {
        let answer = tokio::time::timeout(self.request_timeout, request)
            .await
            .map_err(|_| {
                Error::unavailable(format!(
                    "{what}: cluster {} did not answer within {:?}",
                    self.cluster, self.request_timeout
                ))
            })?;
        if answer.is_ok() {
            self.answered.mark();
        }
        Ok(answer)
    }

    /// The client, for callers that need more than the connector offers (watches).
    #[must_use]
    pub const fn client(&self) -> &Client {
        &self.client
    }

    /// The REST resource and capabilities serving `id`'s kind, or `None` if the cluster does not
    /// serve it. Cached; a miss queries the group-version again.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] if discovery cannot reach the cluster; other kinds if it is
    /// rejected.
    pub async fn resolve(&self, id: &ResourceId) -> Result<Option<(ApiResource, ApiCapabilities)>> {
        self.discovery_handle().resolve(id).await
    }

    /// The readiness watches of this cluster, created on first use and shared by every user of
    /// this connector (its [`Connector::readiness_source`]).
    #[must_use]
    pub fn watcher(&self) -> Arc<ClusterWatcher> {
        let watcher = self.watcher.get_or_init(|| {
            Arc::new(ClusterWatcher::from_discovery(
                self.discovery_handle(),
                WATCH_CAPACITY,
            ))
        });
        Arc::clone(watcher)
    }

    /// The discovery of this connector, sharing its cache.
    pub(crate) fn discovery_handle(&self) -> Discovery {
        Discovery {
            cluster: self.cluster.clone(),
            client: self.client.clone(),
            timeout: self.request_timeout,
            cache: Arc::clone(&self.discovery),
        }
    }

    /// The API for `id`'s kind and namespace, or `None` if the kind is not served.
    async fn api_for(
        &self,
        scope: &Scope,
        id: &ResourceId,
    ) -> Result<Option<(Api<DynamicObject>, Option<String>)>> {
        let Some((ar, caps)) = self.resolve(id).await? else {
            return Ok(None);
        };
        Ok(Some(match caps.scope {
            KubeScope::Namespaced => {
                let ns = scope.namespace_for(id);
                (
                    Api::namespaced_with(self.client.clone(), ns, &ar),
                    Some(ns.to_owned()),
                )
            }
            KubeScope::Cluster => (Api::all_with(self.client.clone(), &ar), None),
        }))
    }

    /// Applies one object; returns the fields dropped because the cluster's schema lacks them.
    async fn apply_one(
        &self,
        scope: &Scope,
        id: &ResourceId,
        mut manifest: Value,
    ) -> Result<Vec<String>> {
        let Some((api, namespace)) = self.api_for(scope, id).await? else {
            return Err(Error::not_found(format!(
                "cluster {} does not serve kind {} of {}",
                self.cluster, id.kind, id.api_version
            )));
        };
        manifest = with_namespace(manifest, namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let what = format!("apply of {id}");
        let mut dropped = Vec::new();
        loop {
            let answer = self
                .timed(
                    &what,
                    api.patch(&id.name, &params, &Patch::Apply(&manifest)),
                )
                .await?;
            let Err(e) = answer else {
                return Ok(dropped);
            };
            if matches!(&e, ::kube::Error::Api(status) if status.code == 403) {
                return self
                    .create_instead(&api, &manifest, &what, e)
                    .await
                    .map(|()| dropped);
            }
            // Server-side apply refuses a field the kind's schema lacks (a 500 naming it, which
            // `fieldValidation` does not change), where `kubectl apply` drops it with a warning:
            // drop it too, say so, and apply again.
            let fields = match &e {
                ::kube::Error::Api(status) if dropped.len() < MAX_DROPPED_FIELDS => {
                    undeclared_fields(&status.message)
                }
                _ => None,
            };
            match fields {
                Some(paths) if paths.iter().all(|p| drop_field(&mut manifest, p)) => {
                    dropped.extend(
                        paths
                            .into_iter()
                            .map(|p| format!("{p}: field not declared in schema; dropped")),
                    );
                }
                _ => return Err(map_error(e, &what)),
            }
        }
    }

    /// A user who may create but not patch (EMCO's examples grant logical-cloud users `get`,
    /// `list`, `create`, `delete`) can still deploy a new object: EMCO's rsync creates what is
    /// not there yet and patches only what is. So a forbidden apply becomes a create; when that
    /// is refused too, or the object already exists, the apply's own refusal stands.
    async fn create_instead(
        &self,
        api: &Api<DynamicObject>,
        manifest: &Value,
        what: &str,
        forbidden: ::kube::Error,
    ) -> Result<()> {
        let object: DynamicObject = serde_json::from_value(manifest.clone())
            .map_err(|e| Error::invalid(format!("{what}: {e}")))?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match self.timed(what, api.create(&params, &object)).await? {
            Ok(_) => Ok(()),
            Err(::kube::Error::Api(status)) if status.code == 409 || status.code == 403 => {
                Err(map_error(forbidden, what))
            }
            Err(e) => Err(map_error(e, what)),
        }
    }

    async fn delete_one(
        &self,
        scope: &Scope,
        id: &ResourceId,
        propagation: Propagation,
    ) -> Result<()> {
        let Some((api, _)) = self.api_for(scope, id).await? else {
            return Ok(()); // The kind is gone (its CRD was deleted), and its objects with it.
        };
        let params = DeleteParams {
            propagation_policy: Some(match propagation {
                Propagation::Background => PropagationPolicy::Background,
                Propagation::Foreground => PropagationPolicy::Foreground,
                Propagation::Orphan => PropagationPolicy::Orphan,
            }),
            ..DeleteParams::default()
        };
        let what = format!("delete of {id}");
        match self.timed(&what, api.delete(&id.name, &params)).await? {
            Ok(_) => Ok(()),
            Err(::kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(map_error(e, &what)),
        }
    }
}

/// `manifest` with the namespace of the URL it is sent to: the body's must match, and
/// cluster-scoped objects have none.
fn with_namespace(mut manifest: Value, namespace: Option<String>) -> Value {
    if let Some(metadata) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        match namespace {
            Some(ns) => metadata.insert("namespace".to_owned(), Value::String(ns)),
            None => metadata.remove("namespace"),
        };
    }
    manifest
}

#[async_trait]
impl Connector for KubeConnector {
    fn cluster(&self) -> &str {
        &self.cluster
    }

    fn observes_live_state(&self) -> bool {
        true
    }

    async fn apply(&self, batch: &Batch) -> Result<Warnings, BatchError> {
        let manifests = batch
            .labelled_manifests()
            .map_err(|e| BatchError::at(0, e))?;
        let mut warnings = Warnings::new();
        for (i, (resource, manifest)) in batch.resources.iter().zip(manifests).enumerate() {
            let dropped = self
                .apply_one(&batch.scope, resource.id(), manifest)
                .await
                .map_err(|e| BatchError::at(i, e))?;
            warnings.extend(dropped.into_iter().map(|w| (i, w)));
        }
        Ok(warnings)
    }

    async fn dry_run(&self, batch: &Batch) -> Result<Vec<Option<String>>> {
        let manifests = batch.labelled_manifests()?;
        let mut out = Vec::with_capacity(manifests.len());
        for (resource, manifest) in batch.resources.iter().zip(manifests) {
            let id = resource.id();
            match self.api_for(&batch.scope, id).await? {
                None => out.push(Some(format!(
                    "the cluster does not serve kind {} of {}",
                    id.kind, id.api_version
                ))),
                Some((api, namespace)) => {
                    let manifest = with_namespace(manifest, namespace);
                    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
                    let what = format!("dry run of {id}");
                    let answer = self
                        .timed(
                            &what,
                            api.patch(&id.name, &params, &Patch::Apply(&manifest)),
                        )
                        .await?;
                    out.push(match answer {
                        Ok(_) => None,
                        Err(e) => {
                            let e = map_error(e, &what);
                            if e.kind() == emco_core::ErrorKind::Unavailable {
                                return Err(e);
                            }
                            Some(e.message().to_owned())
                        }
                    });
                }
            }
        }
        Ok(out)
    }

    async fn delete(&self, batch: &Batch, propagation: Propagation) -> Result<(), BatchError> {
        for (i, resource) in batch.resources.iter().enumerate() {
            self.delete_one(&batch.scope, resource.id(), propagation)
                .await
                .map_err(|e| BatchError::at(i, e))?;
        }
        Ok(())
    }

    async fn get(&self, scope: &Scope, id: &ResourceId) -> Result<Option<Value>> {
        let Some((api, _)) = self.api_for(scope, id).await? else {
            return Ok(None);
        };
        let what = format!("get of {id}");
        let object = self
            .timed(&what, api.get_opt(&id.name))
            .await?
            .map_err(|e| map_error(e, &what))?;
        object
            .map(|o| {
                serde_json::to_value(o)
                    .map_err(|e| Error::internal(format!("cannot encode {id}: {e}")).with_source(e))
            })
            .transpose()
    }

    async fn list(&self, scope: &Scope, id: &ResourceId) -> Result<Vec<Value>> {
        let Some((api, _)) = self.api_for(scope, id).await? else {
            return Ok(Vec::new());
        };
        let what = format!("list of {} {}", id.api_version, id.kind);
        let list = self
            .timed(&what, api.list(&::kube::api::ListParams::default()))
            .await?
            .map_err(|e| map_error(e, &what))?;
        list.items
            .into_iter()
            .map(|o| {
                serde_json::to_value(o).map_err(|e| {
                    Error::internal(format!("cannot encode a listed {}: {e}", id.kind))
                        .with_source(e)
                })
            })
            .collect()
    }

    fn readiness_source(&self) -> Option<Arc<dyn ReadinessSource>> {
        Some(self.watcher())
    }

    fn last_answer(&self) -> Option<tokio::time::Instant> {
        self.answered.get()
    }

    async fn health(&self) -> Result<()> {
        // Core discovery rather than `/version`: API servers answer `/version` without checking
        // credentials, and a rejected token must show here.
        let what = "health check";
        self.timed(what, self.client.list_core_api_versions())
            .await?
            .map(drop)
            .map_err(|e| map_error(e, what))
    }
}

/// Maps a kube error onto an [`ErrorKind`] that tells the engine whether to retry; `what` names
/// the operation in the message.
pub(crate) fn map_error(err: ::kube::Error, what: &str) -> Error {
    let kind = match &err {
        ::kube::Error::Api(status) => match status.code {
            429 | 500..=599 => ErrorKind::Unavailable,
            401 | 403 => ErrorKind::FailedPrecondition,
            404 => ErrorKind::NotFound,
            409 if status.reason == "AlreadyExists" => ErrorKind::AlreadyExists,
            409 | 410 => ErrorKind::Conflict,
            400..=499 => ErrorKind::InvalidArgument,
            _ => ErrorKind::Internal,
        },
        ::kube::Error::HyperError(_) | ::kube::Error::Service(_) | ::kube::Error::ReadEvents(_) => {
            ErrorKind::Unavailable
        }
        ::kube::Error::Auth(_) => ErrorKind::FailedPrecondition,
        ::kube::Error::BuildRequest(_)
        | ::kube::Error::InferConfig(_)
        | ::kube::Error::InferKubeconfig(_)
        | ::kube::Error::RustlsTls(_)
        | ::kube::Error::TlsRequired => ErrorKind::InvalidArgument,
        ::kube::Error::Discovery(_) => ErrorKind::NotFound,
        _ => ErrorKind::Internal,
    };
    Error::new(kind, format!("{what}: {err}")).with_source(err)
}

/// One [`KubeConnector`] per cluster, shared by all the contexts deploying to it, so each cluster
/// has one client and one discovery cache; clusters with the same TLS settings share pooled
/// connections.
#[derive(Debug)]
pub struct KubePool {
    /// Cluster -> (kubeconfig it was built from, connector).
    connectors: Mutex<HashMap<String, (String, Arc<KubeConnector>)>>,
    transports: Transports,
    request_timeout: Duration,
}

impl Default for KubePool {
    fn default() -> Self {
        Self {
            connectors: Mutex::default(),
            transports: Transports::default(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl KubePool {
    /// An empty pool.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the request timeout of the connectors built from now on
    /// (see [`KubeConnector::with_request_timeout`]).
    #[must_use]
    pub const fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Counts the connections of the connectors built from now on against `budget` instead of
    /// the process's ([`Budget::process`]).
    #[must_use]
    pub fn with_connection_budget(mut self, budget: Arc<Budget>) -> Self {
        self.transports = Transports::with_budget(budget);
        self
    }

    /// The connector of `cluster`, built from `kubeconfig` on first use and rebuilt when the
    /// kubeconfig differs from the one it was built from.
    ///
    /// # Errors
    ///
    /// See [`KubeConnector::from_kubeconfig`].
    pub async fn connector(&self, cluster: &str, kubeconfig: &str) -> Result<Arc<KubeConnector>> {
        if let Some(found) = self.lookup(cluster, kubeconfig) {
            return Ok(found);
        }
        let built = Arc::new(
            KubeConnector::from_kubeconfig_in(cluster, kubeconfig, Some(&self.transports))
                .await?
                .with_request_timeout(self.request_timeout),
        );
        let mut map = self
            .connectors
            .lock()
            .map_err(|_| Error::internal("connector pool lock poisoned"))?;
        // Another task may have built one meanwhile; keep the first so all share one pool.
        let entry = map
            .entry(cluster.to_owned())
            .or_insert_with(|| (kubeconfig.to_owned(), Arc::clone(&built)));
        if entry.0 != kubeconfig {
            *entry = (kubeconfig.to_owned(), Arc::clone(&built));
        }
        Ok(Arc::clone(&entry.1))
    }

    fn lookup(&self, cluster: &str, kubeconfig: &str) -> Option<Arc<KubeConnector>> {
        let map = self.connectors.lock().ok()?;
        map.get(cluster)
            .filter(|(k, _)| k == kubeconfig)
            .map(|(_, c)| Arc::clone(c))
    }

    /// Drops the connector of `cluster` (the cluster was deleted); returns whether there was one.
    pub fn remove(&self, cluster: &str) -> bool {
        self.connectors
            .lock()
            .is_ok_and(|mut m| m.remove(cluster).is_some())
    }

    /// How many clusters have a connector.
    #[must_use]
    pub fn len(&self) -> usize {
        self.connectors.lock().map_or(0, |m| m.len())
    }

    /// How many connection pools the clusters share (one per distinct CA and server name
    /// among the clusters without client certificates).
    #[must_use]
    pub fn shared_transports(&self) -> usize {
        self.transports.shared()
    }

    /// Whether no cluster has a connector.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Most fields dropped from one object before its apply counts as failed.
const MAX_DROPPED_FIELDS: usize = 32;

/// The field paths of kube-apiserver's `failed to create typed patch object (ns/name;
/// group/v, Kind=K): .spec.replicas: field not declared in schema` (several as `errors:` and
/// one per line); None when any error of the answer is of another sort.
fn undeclared_fields(message: &str) -> Option<Vec<String>> {
    let rest = message.strip_prefix("failed to create typed patch object (")?;
    let (_, after) = rest.split_once("): ")?;
    let lines: Vec<&str> = match after.strip_prefix("errors:\n") {
        Some(list) => list.lines().map(str::trim_start).collect(),
        None => vec![after],
    };
    lines
        .into_iter()
        .map(|line| {
            let path = line.strip_suffix(": field not declared in schema")?;
            path.starts_with('.').then(|| path.to_owned())
        })
        .collect()
}

/// Removes the field at a structured-merge-diff path (`.spec.template.spec.containers[name="c"].x`,
/// `[0]` for an index, `[=v]` for a set member) from `manifest`; false when it is not there.
fn drop_field(manifest: &mut Value, path: &str) -> bool {
    let Some(steps) = parse_path(path) else {
        return false;
    };
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut at = manifest;
    for step in parents {
        let next = match step {
            Step::Field(f) => at.get_mut(f.as_str()),
            Step::Index(i) => at.get_mut(*i),
            Step::Keys(keys) => at
                .as_array_mut()
                .and_then(|items| items.iter_mut().find(|item| matches_keys(item, keys))),
        };
        let Some(next) = next else { return false };
        at = next;
    }
    match last {
        Step::Field(f) => at
            .as_object_mut()
            .is_some_and(|o| o.remove(f.as_str()).is_some()),
        Step::Index(i) => at
            .as_array_mut()
            .is_some_and(|a| (*i < a.len()).then(|| a.remove(*i)).is_some()),
        Step::Keys(keys) => at.as_array_mut().is_some_and(|a| {
            let before = a.len();
            a.retain(|item| !matches_keys(item, keys));
            a.len() != before
        }),
    }
}

enum Step {
    Field(String),
    Index(usize),
    /// `[k="v",...]`, or `[=v]` (key empty) for a set member.
    Keys(Vec<(String, Value)>),
}

fn matches_keys(item: &Value, keys: &[(String, Value)]) -> bool {
    keys.iter().all(|(k, v)| {
        if k.is_empty() {
            item == v
        } else {
            // A key the item leaves out is one the server filled from its default.
            item.get(k.as_str()).is_none_or(|x| x == v)
        }
    })
}

fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            steps.push(Step::Field(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Ok(i) = inner.parse::<usize>() {
                steps.push(Step::Index(i));
                continue;
            }
            let mut keys = Vec::new();
            for pair in split_keys(inner) {
                let (k, v) = pair.split_once('=')?;
                keys.push((k.to_owned(), serde_json::from_str(v).ok()?));
            }
            steps.push(Step::Keys(keys));
        } else {
            return None;
        }
    }
    Some(steps)
}

/// `a="x,y",b=2` split on the commas outside quotes.
fn split_keys(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::transport::TransportKey;
    use super::*;

    /// kube-apiserver v1.32's words for a server-side apply with a field the schema lacks.
    #[test]
    fn undeclared_fields_are_read_and_dropped() {
        let message = "failed to create typed patch object (default/ds1; apps/v1, Kind=DaemonSet): \
                       .spec.replicas: field not declared in schema";
        assert_eq!(
            undeclared_fields(message),
            Some(vec![".spec.replicas".to_owned()])
        );
        assert_eq!(undeclared_fields("the server could not find it"), None);
        let several = "failed to create typed patch object (default/d; apps/v1, Kind=Deployment): \
                       errors:\n  .spec.template.spec.containers[name=\"c\"].foo: field not declared in schema\n  \
                       .spec.template.spec.zzz: field not declared in schema";
        assert_eq!(
            undeclared_fields(several),
            Some(vec![
                ".spec.template.spec.containers[name=\"c\"].foo".to_owned(),
                ".spec.template.spec.zzz".to_owned()
            ])
        );
        let mixed = "failed to create typed patch object (default/d; apps/v1, Kind=Deployment): \
                     errors:\n  .spec.replicas: expected numeric (int or float), got string\n  \
                     .spec.zzz: field not declared in schema";
        assert_eq!(
            undeclared_fields(mixed),
            None,
            "a type error is not dropped"
        );
        let mut m = serde_json::json!({"spec": {"replicas": 2, "template": {"spec": {
            "containers": [{"name": "a", "x": 1}, {"name": "b", "x": 2}],
            "tolerations": ["t1", "t2"]}}}});
        assert!(drop_field(&mut m, ".spec.replicas"));
        assert!(drop_field(
            &mut m,
            ".spec.template.spec.containers[name=\"b\"].x"
        ));
        assert!(drop_field(&mut m, ".spec.template.spec.tolerations[0]"));
        assert!(!drop_field(&mut m, ".spec.replicas"), "already gone");
        assert!(!drop_field(
            &mut m,
            ".spec.template.spec.containers[name=\"zz\"].x"
        ));
        assert!(!drop_field(&mut m, "spec"), "not a path");
        assert_eq!(
            m,
            serde_json::json!({"spec": {"template": {"spec": {
                "containers": [{"name": "a", "x": 1}, {"name": "b"}],
                "tolerations": ["t2"]}}}})
        );
        let mut set = serde_json::json!({"a": {"finalizers": ["x", "y"]}});
        assert!(drop_field(&mut set, ".a.finalizers[=\"y\"]"));
        assert_eq!(set, serde_json::json!({"a": {"finalizers": ["x"]}}));
        let mut defaulted = serde_json::json!({"ports": [{"containerPort": 80, "x": 1}]});
        assert!(
            drop_field(
                &mut defaulted,
                ".ports[containerPort=80,protocol=\"TCP\"].x"
            ),
            "the server fills the protocol key from its default"
        );
        assert_eq!(
            defaulted,
            serde_json::json!({"ports": [{"containerPort": 80}]})
        );
        let mut keyed = serde_json::json!({"ports": [{"port": 80, "protocol": "TCP", "x": 1}]});
        assert!(drop_field(&mut keyed, ".ports[port=80,protocol=\"TCP\"].x"));
        assert_eq!(
            keyed,
            serde_json::json!({"ports": [{"port": 80, "protocol": "TCP"}]})
        );
    }

    const KUBECONFIG: &str = "
apiVersion: v1
kind: Config
current-context: c1
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: secret-token
contexts:
- name: c1
  context: {cluster: c1, user: admin}
";

    fn api_error(code: u16, reason: &str) -> ::kube::Error {
        ::kube::Error::Api(
            ::kube::core::Status::failure("rejected", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn api_errors_map_to_kinds() {
        let table = [
            (400, "BadRequest", ErrorKind::InvalidArgument),
            (422, "Invalid", ErrorKind::InvalidArgument),
            (401, "Unauthorized", ErrorKind::FailedPrecondition),
            (403, "Forbidden", ErrorKind::FailedPrecondition),
            (404, "NotFound", ErrorKind::NotFound),
            (409, "AlreadyExists", ErrorKind::AlreadyExists),
            (409, "Conflict", ErrorKind::Conflict),
            (429, "TooManyRequests", ErrorKind::Unavailable),
            (500, "InternalError", ErrorKind::Unavailable),
            (503, "ServiceUnavailable", ErrorKind::Unavailable),
        ];
        for (code, reason, kind) in table {
            let e = map_error(api_error(code, reason), "apply of x");
            assert_eq!(e.kind(), kind, "{code} {reason}");
            assert!(e.message().starts_with("apply of x: "), "{}", e.message());
            assert!(std::error::Error::source(&e).is_some());
        }
    }

    #[tokio::test]
    async fn bad_kubeconfigs_are_invalid() {
        for text in [
            "not: [yaml",
            "apiVersion: v1\nkind: Config\ncurrent-context: missing\n",
        ] {
            let e = KubeConnector::from_kubeconfig("p+c", text)
                .await
                .unwrap_err();
            assert_eq!(
                (e.kind(), e.field()),
                (ErrorKind::InvalidArgument, Some("kubeconfig")),
                "{text}"
            );
        }
    }

    #[tokio::test]
    async fn unreachable_cluster_is_unavailable() {
        // Port 1 on loopback refuses connections.
        let c = KubeConnector::from_kubeconfig("p+c", KUBECONFIG)
            .await
            .unwrap();
        assert_eq!(c.health().await.unwrap_err().kind(), ErrorKind::Unavailable);
        let batch = Batch::new(Scope::new("1", "a")).with_resource(
            super::super::Resource::from_yaml(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            )
            .unwrap(),
        );
        let e = c.apply(&batch).await.unwrap_err();
        assert_eq!((e.done, e.error.kind()), (0, ErrorKind::Unavailable));
        assert!(!format!("{c:?}").contains("secret-token"));
    }

    #[tokio::test]
    async fn pool_shares_one_connector_per_cluster() {
        let pool = KubePool::new();
        let a = pool.connector("p+c1", KUBECONFIG).await.unwrap();
        let b = pool.connector("p+c1", KUBECONFIG).await.unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let other = pool.connector("p+c2", KUBECONFIG).await.unwrap();
        assert!(!Arc::ptr_eq(&a, &other));
        assert_eq!(pool.len(), 2);
        let changed = KUBECONFIG.replace("secret-token", "rotated-token");
        let c = pool.connector("p+c1", &changed).await.unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "a new kubeconfig gets a new client");
        assert!(Arc::ptr_eq(
            &c,
            &pool.connector("p+c1", &changed).await.unwrap()
        ));
        assert!(pool.remove("p+c1"));
        assert!(!pool.remove("p+c1"));
        assert_eq!(pool.len(), 1);
        // The same CA and no client certificate: one pool of connections for all of them.
        assert_eq!(pool.shared_transports(), 1);
    }

    #[tokio::test]
    async fn clusters_with_client_certificates_keep_their_own_connections() {
        async fn config(kubeconfig: &str) -> Config {
            Config::from_custom_kubeconfig(
                Kubeconfig::from_yaml(kubeconfig).unwrap(),
                &KubeConfigOptions::default(),
            )
            .await
            .unwrap()
        }
        let token = config(KUBECONFIG).await;
        assert!(TransportKey::of(&token).is_some());
        // Another server with the same TLS settings: the same pool (hyper keys it by host).
        let elsewhere = config(&KUBECONFIG.replace("127.0.0.1:1", "127.0.0.2:6443")).await;
        assert_eq!(TransportKey::of(&token), TransportKey::of(&elsewhere));
        let mut cert = token.clone();
        cert.auth_info.client_certificate_data = Some("Y2VydA==".into());
        assert!(TransportKey::of(&cert).is_none());
        let mut proxied = token;
        proxied.proxy_url = Some("http://proxy:3128".parse().unwrap());
        assert!(TransportKey::of(&proxied).is_none());
    }
}
