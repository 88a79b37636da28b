//! Readiness watches: one watch per cluster and resource type, filtered by the deployment-id
//! label, publishing readiness changes to subscribers.
//!
//! A [`ClusterWatcher`] belongs to one cluster: the [`ReadinessSource`] of a [`KubeConnector`]
//! ([`KubeConnector::watcher`]). [`ClusterWatcher::watch_in`] makes sure the resource type of an
//! applied object is watched, selecting only objects that carry [`DEPLOYMENT_ID_LABEL`]; asking
//! again for the same type is a no-op, so the number of watches grows with the kinds deployed,
//! never with the objects. A type is watched across all namespaces, unless the credentials may
//! not list it cluster-wide (HTTP 403, as with the namespaced Role of a standard logical cloud):
//! it is then watched in each namespace asked for. Each event is judged with [`readiness`] and
//! published through a broadcast channel only when an object's readiness changes. The `kube`
//! watcher behind each watch relists after a disconnect (with backoff while the cluster is
//! unreachable); objects missing from a relist are published as deleted.
//!
//! [`ClusterWatcher::watched`] answers from memory what the watches know of an object: seen
//! (with its readiness), absent (its watch has listed and not found it) or unknown (its watch has
//! not listed yet, or is failing). [`ClusterWatcher::health_changes`] signals when a watch
//! synced or failed.
//!
//! Each event also measures the object's drift (fields emco-rs applied that another client
//! changed since, [`crate::drift`]); a change of drift is published like a change of readiness,
//! and [`ClusterWatcher::drift`] answers it from memory.
//!
//! Subscribers that fall behind get [`broadcast::error::RecvError::Lagged`] and should resync from
//! [`ClusterWatcher::current`] or [`ClusterWatcher::watched`].

use emco_core::poison::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use ::kube::api::{Api, DynamicObject, ListParams};
use ::kube::discovery::{ApiResource, Scope as KubeScope};
use ::kube::runtime::WatchStreamExt as _;
use ::kube::runtime::watcher::{self, Event};
use async_trait::async_trait;
use emco_core::{Error, Result};
use futures::StreamExt as _;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use super::{Discovery, FIELD_MANAGER, KubeConnector, map_error};
use crate::connector::{
    DEPLOYMENT_ID_LABEL, Doorbell, ReadinessChange, ReadinessSource, ResourceId, WatchHealth,
    Watched,
};
use crate::drift::{Drift, Follower, Interner, Observed};
use crate::readiness::{Readiness, readiness};

/// What the watches last saw of one object.
#[derive(Debug)]
struct SeenObject {
    deployment_id: String,
    readiness: Readiness,
    /// What emco-rs owned of it at its last write, and its drift from that.
    follower: Follower,
    drift: Option<Arc<Drift>>,
}

/// What the watches last saw of each object.
type Seen = HashMap<ResourceId, SeenObject>;

/// One watch: `apiVersion`, kind, and the namespace (`None`: all namespaces).
type WatchKey = (String, String, Option<String>);

/// State shared between the watcher and its watch tasks.
#[derive(Debug)]
struct Shared {
    seen: Mutex<Seen>,
    /// The field sets emco-rs owns, shared by the objects that own the same.
    sets: Interner,
    health: Mutex<HashMap<WatchKey, WatchHealth>>,
    /// Bumped whenever a watch's health changes.
    health_tx: watch::Sender<u64>,
    /// Per object, the bells of its followers ([`ReadinessSource::ring_on_change`]); dead
    /// ones are dropped when the object changes or gains a follower.
    bells: Mutex<HashMap<ResourceId, Vec<Weak<Doorbell>>>>,
}

impl Shared {
    fn set_health(&self, key: &WatchKey, health: WatchHealth) {
        let changed = {
            let mut all = lock(&self.health);
            all.insert(key.clone(), health.clone()) != Some(health)
        };
        if changed {
            self.health_tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Hangs `bell` on `id` for as long as it lives.
    fn hang(&self, id: &ResourceId, bell: &Arc<Doorbell>) {
        let mut bells = lock(&self.bells);
        let of = bells.entry(id.clone()).or_default();
        of.retain(|b| b.strong_count() > 0);
        of.push(Arc::downgrade(bell));
    }

    /// Rings the live bells of `id`, forgetting the dead ones.
    fn ring(&self, id: &ResourceId) {
        let mut bells = lock(&self.bells);
        if let Some(of) = bells.get_mut(id) {
            of.retain(|b| b.upgrade().map(|b| b.ring()).is_some());
            if of.is_empty() {
                bells.remove(id);
            }
        }
    }
}

/// Where readiness changes are published for subscribers: the channel is made at the first
/// subscription, since a broadcast channel allocates all its slots up front (kilobytes per
/// cluster) and the engine's own followers listen through bells instead.
#[derive(Debug)]
struct Changes {
    capacity: usize,
    tx: OnceLock<broadcast::Sender<ReadinessChange>>,
}

impl Changes {
    fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity: capacity.max(1),
            tx: OnceLock::new(),
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<ReadinessChange> {
        self.tx
            .get_or_init(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    /// The channel, when someone listens.
    fn listened(&self) -> Option<&broadcast::Sender<ReadinessChange>> {
        self.tx.get().filter(|tx| tx.receiver_count() > 0)
    }
}

/// The readiness watches of one cluster. Dropping it stops them.
pub struct ClusterWatcher {
    discovery: Discovery,
    changes: Arc<Changes>,
    shared: Arc<Shared>,
    watches: Mutex<HashMap<WatchKey, JoinHandle<()>>>,
    /// Types (`apiVersion`, kind) the credentials may not list across namespaces.
    per_namespace: Mutex<HashSet<(String, String)>>,
}

impl std::fmt::Debug for ClusterWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterWatcher")
            .field("cluster", &self.discovery.cluster)
            .field("watches", &self.watch_count())
            .finish_non_exhaustive()
    }
}

impl ClusterWatcher {
    /// A watcher for the cluster of `connector`, whose subscribers can fall `capacity` changes
    /// behind before they lag. (The connector's own watcher, shared by all its users, is
    /// [`KubeConnector::watcher`].)
    #[must_use]
    pub fn new(connector: Arc<KubeConnector>, capacity: usize) -> Self {
        Self::from_discovery(connector.discovery_handle(), capacity)
    }

    pub(crate) fn from_discovery(discovery: Discovery, capacity: usize) -> Self {
        let (health_tx, _) = watch::channel(0);
        Self {
            discovery,
            changes: Changes::new(capacity),
            shared: Arc::new(Shared {
                seen: Mutex::default(),
                sets: Interner::default(),
                health: Mutex::default(),
                health_tx,
                bells: Mutex::default(),
            }),
            watches: Mutex::default(),
            per_namespace: Mutex::default(),
        }
    }

    /// The cluster watched.
    #[must_use]
    pub fn cluster(&self) -> &str {
        &self.discovery.cluster
    }

    /// Makes sure the resource type of `id` (its `apiVersion` and kind) is watched, in the
    /// namespace of `id` (else `default`) when the type cannot be watched across namespaces.
    ///
    /// # Errors
    ///
    /// As [`ClusterWatcher::watch_in`].
    pub async fn watch(&self, id: &ResourceId) -> Result<()> {
        let namespace = id.namespace.as_deref().unwrap_or("default");
        self.watch_in(namespace, id).await.map(drop)
    }

    fn lock_per_namespace(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        lock(&self.per_namespace)
    }

    /// Whether the credentials may list `resource` across namespaces: one labelled list of at
    /// most one object; `false` on 403.
    async fn may_list_all(&self, resource: &ApiResource) -> Result<bool> {
        let api: Api<DynamicObject> = Api::all_with(self.discovery.client.clone(), resource);
        let params = ListParams::default().labels(DEPLOYMENT_ID_LABEL).limit(1);
        let what = format!("list of {} across namespaces", resource.kind);
        match tokio::time::timeout(self.discovery.timeout, api.list(&params)).await {
            Err(_) => Err(Error::unavailable(format!(
                "{what}: cluster {} did not answer within {:?}",
                self.discovery.cluster, self.discovery.timeout
            ))),
            Ok(Ok(_)) => Ok(true),
            Ok(Err(::kube::Error::Api(status))) if status.code == 403 => Ok(false),
            Ok(Err(e)) => Err(map_error(e, &what)),
        }
    }

    /// Starts the watch `key` unless it runs.
    fn ensure(&self, key: WatchKey, resource: &ApiResource) {
        let mut watches = lock(&self.watches);
        if watches.contains_key(&key) {
            return;
        }
        self.shared.set_health(&key, WatchHealth::Syncing);
        let api: Api<DynamicObject> = match &key.2 {
            Some(ns) => Api::namespaced_with(self.discovery.client.clone(), ns, resource),
            None => Api::all_with(self.discovery.client.clone(), resource),
        };
        let publisher = Publisher {
            cluster: self.discovery.cluster.clone(),
            resource: resource.clone(),
            namespace: key.2.clone(),
            changes: Arc::clone(&self.changes),
            shared: Arc::clone(&self.shared),
            key: key.clone(),
        };
        watches.insert(key, tokio::spawn(run_watch(api, publisher)));
    }

    fn is_watched(&self, key: &WatchKey) -> bool {
        self.watches.lock().is_ok_and(|w| w.contains_key(key))
    }

    /// How many watches run (one per resource type, or per type and namespace for types the
    /// credentials cannot list across namespaces).
    #[must_use]
    pub fn watch_count(&self) -> usize {
        self.watches.lock().map_or(0, |w| w.len())
    }

    /// The last readiness seen of `id` (with its namespace), or `None` if it was not seen or is
    /// deleted.
    #[must_use]
    pub fn current(&self, id: &ResourceId) -> Option<Readiness> {
        self.shared
            .seen
            .lock()
            .ok()?
            .get(id)
            .map(|o| o.readiness.clone())
    }
}

#[async_trait]
impl ReadinessSource for ClusterWatcher {
    /// Receives every readiness change from now on.
    fn subscribe(&self) -> broadcast::Receiver<ReadinessChange> {
        self.changes.subscribe()
    }

    fn ring_on_change(&self, id: &ResourceId, bell: &Arc<Doorbell>) {
        self.shared.hang(id, bell);
    }

    /// Changes whenever a watch syncs or fails (the value is a counter; only its changes matter).
    fn health_changes(&self) -> watch::Receiver<u64> {
        self.shared.health_tx.subscribe()
    }

    /// Makes sure the resource type of `id` is watched so that `id` is seen, where a namespaced
    /// `id` without a namespace lives in `namespace`; returns `id` as the watches key it (with
    /// its namespace when the kind is namespaced, without one otherwise), for
    /// [`ClusterWatcher::watched`]. The first call for a namespaced type checks whether the
    /// credentials may list it across namespaces (one request); if they may not, the type is
    /// watched per namespace from then on.
    ///
    /// # Errors
    ///
    /// [`emco_core::ErrorKind::NotFound`] if the cluster does not serve the kind;
    /// [`emco_core::ErrorKind::Unavailable`] if discovery or the check cannot reach the cluster;
    /// other kinds if they are rejected.
    async fn watch_in(&self, namespace: &str, id: &ResourceId) -> Result<ResourceId> {
        let Some((resource, caps)) = self.discovery.resolve(id).await? else {
            return Err(Error::not_found(format!(
                "cluster {} does not serve kind {} of {}",
                self.discovery.cluster, id.kind, id.api_version
            )));
        };
        let mut keyed = id.clone();
        let all = (id.api_version.clone(), id.kind.clone(), None);
        if caps.scope == KubeScope::Cluster {
            keyed.namespace = None;
            self.ensure(all, &resource);
            return Ok(keyed);
        }
        let ns = id.namespace.clone().unwrap_or_else(|| namespace.to_owned());
        keyed.namespace = Some(ns.clone());
        let type_key = (id.api_version.clone(), id.kind.clone());
        if self.is_watched(&all) {
            return Ok(keyed);
        }
        if !self.lock_per_namespace().contains(&type_key) {
            if self.may_list_all(&resource).await? {
                self.ensure(all, &resource);
                return Ok(keyed);
            }
            tracing::debug!(cluster = %self.discovery.cluster, kind = %id.kind,
                "credentials cannot list across namespaces; watching per namespace");
            self.lock_per_namespace().insert(type_key);
        }
        self.ensure(
            (id.api_version.clone(), id.kind.clone(), Some(ns)),
            &resource,
        );
        Ok(keyed)
    }

    /// The health of the watch that covers `id` (as [`ClusterWatcher::watch_in`] returned it),
    /// or `None` if no watch covers it.
    fn health(&self, id: &ResourceId) -> Option<WatchHealth> {
        let health = lock(&self.shared.health);
        let all = (id.api_version.clone(), id.kind.clone(), None);
        health.get(&all).cloned().or_else(|| {
            let ns = id.namespace.clone()?;
            health
                .get(&(id.api_version.clone(), id.kind.clone(), Some(ns)))
                .cloned()
        })
    }

    /// The drift of `id` (as [`ClusterWatcher::watch_in`] returned it) when it has drifted.
    fn drift(&self, id: &ResourceId) -> Option<Arc<Drift>> {
        self.shared.seen.lock().ok()?.get(id)?.drift.clone()
    }

    fn unverified(&self, id: &ResourceId) -> bool {
        let seen = lock(&self.shared.seen);
        seen.get(id).is_some_and(|o| o.follower.is_unverified())
    }

    fn verify(&self, id: &ResourceId, manifest: &serde_json::Value) {
        let mut seen = lock(&self.shared.seen);
        if let Some(o) = seen.get_mut(id).filter(|o| o.follower.is_unverified()) {
            o.drift = o
                .follower
                .verify(manifest, FIELD_MANAGER, &self.shared.sets)
                .map(Arc::new);
        }
    }

    /// What the watches know of `id` (as [`ClusterWatcher::watch_in`] returned it).
    fn watched(&self, id: &ResourceId) -> Watched {
        if let Some(r) = self.current(id) {
            return Watched::Seen(r);
        }
        match self.health(id) {
            Some(WatchHealth::Synced) => Watched::Absent,
            Some(WatchHealth::Syncing) => Watched::Unknown("not listed yet".to_owned()),
            Some(WatchHealth::Failing(e)) => Watched::Unknown(e),
            None => Watched::Unknown("not watched".to_owned()),
        }
    }
}

impl Drop for ClusterWatcher {
    fn drop(&mut self) {
        if let Ok(watches) = self.watches.lock() {
            for task in watches.values() {
                task.abort();
            }
        }
    }
}

/// Runs one watch until aborted.
async fn run_watch(api: Api<DynamicObject>, publisher: Publisher) {
    let config = watcher::Config::default().labels(DEPLOYMENT_ID_LABEL);
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    // Objects listed since the last `Init`; those not relisted were deleted meanwhile.
    let mut relisted: HashSet<ResourceId> = HashSet::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => relisted.clear(),
            Ok(Event::InitApply(obj)) => {
                if let Some(id) = publisher.apply(&obj) {
                    relisted.insert(id);
                }
            }
            Ok(Event::InitDone) => {
                publisher.forget_except(&relisted);
                publisher.healthy();
            }
            Ok(Event::Apply(obj)) => {
                publisher.apply(&obj);
                publisher.healthy();
            }
            Ok(Event::Delete(obj)) => {
                publisher.delete(&obj);
                publisher.healthy();
            }
            // The watcher backs off and retries by itself; readers see the watch failing.
            Err(e) => {
                tracing::debug!(cluster = %publisher.cluster, kind = %publisher.resource.kind, error = %e, "watch interrupted");
                publisher
                    .shared
                    .set_health(&publisher.key, WatchHealth::Failing(e.to_string()));
            }
        }
    }
}

/// Turns watch events into published changes.
struct Publisher {
    cluster: String,
    resource: ApiResource,
    /// The namespace of a per-namespace watch.
    namespace: Option<String>,
    changes: Arc<Changes>,
    shared: Arc<Shared>,
    key: WatchKey,
}

impl Publisher {
    fn id(&self, obj: &DynamicObject) -> Option<ResourceId> {
        Some(ResourceId {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
            namespace: obj.metadata.namespace.clone(),
            name: obj.metadata.name.clone()?,
        })
    }

    fn healthy(&self) {
        self.shared.set_health(&self.key, WatchHealth::Synced);
    }

    /// Records and publishes the readiness of `obj` if it changed; returns its id.
    fn apply(&self, obj: &DynamicObject) -> Option<ResourceId> {
        let id = self.id(obj)?;
        let deployment_id = obj
            .metadata
            .labels
            .as_ref()?
            .get(DEPLOYMENT_ID_LABEL)?
            .clone();
        let mut value = serde_json::to_value(obj).ok()?;
        // Watch events of dynamic objects carry the type; keep it for `readiness` either way.
        value["apiVersion"] = serde_json::Value::String(id.api_version.clone());
        value["kind"] = serde_json::Value::String(id.kind.clone());
        let now = readiness(&value);
        let changed = {
            let mut seen = self.shared.seen.lock().ok()?;
            let object = seen.entry(id.clone()).or_insert_with(|| SeenObject {
                deployment_id: String::new(),
                readiness: Readiness::NotApplicable,
                follower: Follower::default(),
                drift: None,
            });
            let drift = match object
                .follower
                .observe(&value, FIELD_MANAGER, &self.shared.sets)
            {
                Observed::Unchanged => object.drift.clone(),
                Observed::Now(d) => d.map(Arc::new),
            };
            let changed = object.deployment_id != deployment_id
                || object.readiness != now
                || object.drift != drift;
            object.deployment_id.clone_from(&deployment_id);
            object.readiness = now.clone();
            object.drift = drift;
            changed
        };
        if changed {
            self.publish(id.clone(), deployment_id, Some(now));
        }
        Some(id)
    }

    fn delete(&self, obj: &DynamicObject) {
        if let Some(id) = self.id(obj) {
            self.remove(&id);
        }
    }

    fn remove(&self, id: &ResourceId) {
        let removed = self.shared.seen.lock().ok().and_then(|mut s| s.remove(id));
        if let Some(object) = removed {
            drop(object.follower);
            self.shared.sets.prune();
            self.publish(id.clone(), object.deployment_id, None);
        }
    }

    /// Publishes as deleted every object of this watch's type (and namespace) that the relist
    /// did not return.
    fn forget_except(&self, relisted: &HashSet<ResourceId>) {
        let gone: Vec<ResourceId> = match self.shared.seen.lock() {
            Ok(seen) => seen
                .keys()
                .filter(|id| {
                    id.api_version == self.resource.api_version
                        && id.kind == self.resource.kind
                        && (self.namespace.is_none() || id.namespace == self.namespace)
                        && !relisted.contains(*id)
                })
                .cloned()
                .collect(),
            Err(_) => return,
        };
        for id in gone {
            self.remove(&id);
        }
    }

    fn publish(&self, id: ResourceId, deployment_id: String, readiness: Option<Readiness>) {
        self.shared.ring(&id);
        // Without listeners the state is only kept in `seen`, for `current`.
        let Some(changes) = self.changes.listened() else {
            return;
        };
        let _ = changes.send(ReadinessChange {
            cluster: self.cluster.clone(),
            deployment_id,
            id,
            readiness,
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn publisher() -> (Publisher, broadcast::Receiver<ReadinessChange>) {
        let changes = Changes::new(16);
        let rx = changes.subscribe();
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let (health_tx, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            seen: Mutex::default(),
            sets: Interner::default(),
            health: Mutex::default(),
            health_tx,
            bells: Mutex::default(),
        });
        (
            Publisher {
                cluster: "p+c1".to_owned(),
                resource,
                namespace: None,
                changes,
                shared,
                key: ("v1".to_owned(), "Pod".to_owned(), None),
            },
            rx,
        )
    }

    fn pod(name: &str, ready: &str, labelled: bool) -> DynamicObject {
        let labels = if labelled {
            json!({DEPLOYMENT_ID_LABEL: "1-a"})
        } else {
            json!({})
        };
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}}))
        .unwrap()
    }

    #[test]
    fn only_changes_are_published() {
        let (p, mut rx) = publisher();
        p.apply(&pod("x", "False", true));
        p.apply(&pod("x", "False", true));
        p.apply(&pod("x", "True", true));
        p.apply(&pod("unlabelled", "True", false));
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            got[0].readiness,
            Some(Readiness::NotReady("not ready".to_owned()))
        );
        assert_eq!(got[1].readiness, Some(Readiness::Ready));
        assert_eq!(
            (got[1].cluster.as_str(), got[1].deployment_id.as_str()),
            ("p+c1", "1-a")
        );
        assert_eq!(got[1].id.to_string(), "v1 Pod ns/x");
    }

    #[test]
    fn objects_missing_from_a_relist_are_deleted() {
        let (p, mut rx) = publisher();
        let kept = p.apply(&pod("kept", "True", true)).unwrap();
        p.apply(&pod("gone", "True", true));
        p.delete(&pod("never-seen", "True", true));
        while rx.try_recv().is_ok() {}
        p.forget_except(&HashSet::from([kept]));
        let change = rx.try_recv().unwrap();
        assert_eq!((change.id.name.as_str(), change.readiness), ("gone", None));
        assert!(
            rx.try_recv().is_err(),
            "kept and never-seen objects publish nothing"
        );
    }

    #[test]
    fn a_change_rings_only_the_bells_of_its_object() {
        let (p, _rx) = publisher();
        let x = p.apply(&pod("x", "False", true)).unwrap();
        let y = p.apply(&pod("y", "False", true)).unwrap();
        let door = crate::connector::Door::new();
        let (of_x, of_y, dropped) = (door.bell(1), door.bell(2), door.bell(3));
        p.shared.hang(&x, &of_x);
        p.shared.hang(&y, &of_y);
        p.shared.hang(&x, &dropped);
        drop(dropped);
        p.apply(&pod("x", "True", true));
        assert_eq!(door.take_rung(), [1], "x changed, y did not");
        assert_eq!(
            p.shared.bells.lock().unwrap()[&x].len(),
            1,
            "the dead bell is gone"
        );
        p.delete(&pod("y", "True", true));
        assert_eq!(door.take_rung(), [2], "a deletion rings");
        drop((of_x, of_y));
        p.apply(&pod("x", "False", true));
        p.delete(&pod("y", "True", true));
        assert!(
            p.shared.bells.lock().unwrap().get(&x).is_none(),
            "no bell left on x"
        );
    }
}
