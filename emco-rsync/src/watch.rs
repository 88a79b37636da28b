//! Readiness watches: one watch per cluster and resource type, filtered by the deployment-id
//! label, publishing readiness changes to subscribers.
//!
//! A [`ClusterWatcher`] belongs to one cluster. [`ClusterWatcher::watch`] makes sure the
//! resource type of an applied object is watched (across all namespaces, selecting only objects
//! that carry [`DEPLOYMENT_ID_LABEL`]); asking again for the same type is a no-op, so the number of
//! watches grows with the kinds deployed, never with the objects. Each event is judged with
//! [`readiness`] and published through a broadcast channel only when an object's readiness
//! changes. The `kube` watcher behind each watch relists after a disconnect (with backoff while
//! the cluster is unreachable); objects missing from a relist are published as deleted.
//!
//! Subscribers that fall behind get [`broadcast::error::RecvError::Lagged`] and should resync from
//! [`ClusterWatcher::current`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ::kube::api::{Api, DynamicObject};
use ::kube::discovery::ApiResource;
use ::kube::runtime::WatchStreamExt as _;
use ::kube::runtime::watcher::{self, Event};
use emco_core::{Error, Result};
use futures::StreamExt as _;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::connector::kube::KubeConnector;
use crate::connector::{DEPLOYMENT_ID_LABEL, ResourceId};
use crate::readiness::{Readiness, readiness};

/// A change of readiness of one labelled object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadinessChange {
    /// The cluster the object lives on.
    pub cluster: String,
    /// The value of its [`DEPLOYMENT_ID_LABEL`] (`<ctx>-<app>`).
    pub deployment_id: String,
    /// The object (with its namespace, when namespaced).
    pub id: ResourceId,
    /// Its readiness now, or `None` if it was deleted.
    pub readiness: Option<Readiness>,
}

/// What the watches last saw of each object: deployment id and readiness.
type Seen = HashMap<ResourceId, (String, Readiness)>;

/// The readiness watches of one cluster. Dropping it stops them.
#[derive(Debug)]
pub struct ClusterWatcher {
    connector: Arc<KubeConnector>,
    changes: broadcast::Sender<ReadinessChange>,
    seen: Arc<Mutex<Seen>>,
    /// Watches by `apiVersion` and kind.
    watches: Mutex<HashMap<(String, String), JoinHandle<()>>>,
}

impl ClusterWatcher {
    /// A watcher for the cluster of `connector`, whose subscribers can fall `capacity` changes
    /// behind before they lag.
    #[must_use]
    pub fn new(connector: Arc<KubeConnector>, capacity: usize) -> Self {
        let (changes, _) = broadcast::channel(capacity.max(1));
        Self {
            connector,
            changes,
            seen: Arc::default(),
            watches: Mutex::default(),
        }
    }

    /// Receives every readiness change from now on.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<ReadinessChange> {
        self.changes.subscribe()
    }

    /// Makes sure the resource type of `id` (its `apiVersion` and kind) is watched.
    ///
    /// # Errors
    ///
    /// [`emco_core::ErrorKind::NotFound`] if the cluster does not serve the kind;
    /// [`emco_core::ErrorKind::Unavailable`] if discovery cannot reach the cluster.
    pub async fn watch(&self, id: &ResourceId) -> Result<()> {
        let key = (id.api_version.clone(), id.kind.clone());
        if self.is_watched(&key) {
            return Ok(());
        }
        let Some((resource, _)) = self.connector.resolve(id).await? else {
            return Err(Error::not_found(format!(
                "cluster {} does not serve kind {} of {}",
                crate::connector::Connector::cluster(self.connector.as_ref()),
                id.kind,
                id.api_version
            )));
        };
        let mut watches = self
            .watches
            .lock()
            .map_err(|_| Error::internal("watch table lock poisoned"))?;
        // Another caller may have started it while discovery ran.
        watches.entry(key).or_insert_with(|| {
            tokio::spawn(run_watch(
                Arc::clone(&self.connector),
                resource,
                self.changes.clone(),
                Arc::clone(&self.seen),
            ))
        });
        Ok(())
    }

    fn is_watched(&self, key: &(String, String)) -> bool {
        self.watches.lock().is_ok_and(|w| w.contains_key(key))
    }

    /// How many resource types are watched.
    #[must_use]
    pub fn watch_count(&self) -> usize {
        self.watches.lock().map_or(0, |w| w.len())
    }

    /// The last readiness seen of `id` (with its namespace), or `None` if it was not seen or is
    /// deleted.
    #[must_use]
    pub fn current(&self, id: &ResourceId) -> Option<Readiness> {
        self.seen.lock().ok()?.get(id).map(|(_, r)| r.clone())
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
async fn run_watch(
    connector: Arc<KubeConnector>,
    resource: ApiResource,
    changes: broadcast::Sender<ReadinessChange>,
    seen: Arc<Mutex<Seen>>,
) {
    let cluster = crate::connector::Connector::cluster(connector.as_ref()).to_owned();
    let api: Api<DynamicObject> = Api::all_with(connector.client().clone(), &resource);
    let config = watcher::Config::default().labels(DEPLOYMENT_ID_LABEL);
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let publisher = Publisher {
        cluster,
        resource,
        changes,
        seen,
    };
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
            Ok(Event::InitDone) => publisher.forget_except(&relisted),
            Ok(Event::Apply(obj)) => {
                publisher.apply(&obj);
            }
            Ok(Event::Delete(obj)) => publisher.delete(&obj),
            // The watcher backs off and retries by itself; the cluster's reachability is
            // reported by the engine's health checks, not from here.
            Err(e) => {
                tracing::debug!(cluster = %publisher.cluster, kind = %publisher.resource.kind, error = %e, "watch interrupted")
            }
        }
    }
}

/// Turns watch events into published changes.
struct Publisher {
    cluster: String,
    resource: ApiResource,
    changes: broadcast::Sender<ReadinessChange>,
    seen: Arc<Mutex<Seen>>,
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
            let mut seen = self.seen.lock().ok()?;
            let entry = (deployment_id.clone(), now.clone());
            seen.insert(id.clone(), entry.clone()) != Some(entry)
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
        let removed = self.seen.lock().ok().and_then(|mut s| s.remove(id));
        if let Some((deployment_id, _)) = removed {
            self.publish(id.clone(), deployment_id, None);
        }
    }

    /// Publishes as deleted every object of this watch's type that the relist did not return.
    fn forget_except(&self, relisted: &HashSet<ResourceId>) {
        let gone: Vec<ResourceId> = match self.seen.lock() {
            Ok(seen) => seen
                .keys()
                .filter(|id| {
                    id.api_version == self.resource.api_version
                        && id.kind == self.resource.kind
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
        // No subscriber is not an error: the state is kept in `seen` for `current`.
        let _ = self.changes.send(ReadinessChange {
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
        let (changes, rx) = broadcast::channel(16);
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        (
            Publisher {
                cluster: "p+c1".to_owned(),
                resource,
                changes,
                seen: Arc::default(),
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
}
