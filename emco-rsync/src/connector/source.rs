//! What a connector that can watch tells the engine about readiness, whatever the backend: a
//! [`ReadinessSource`] keeps watches per resource type, answers from memory what they know of an
//! object, and pushes changes. The Kubernetes connector's is
//! [`ClusterWatcher`](super::kube::ClusterWatcher); a connector without one is polled through
//! [`Connector::observe`](super::Connector::observe).

use async_trait::async_trait;
use emco_core::Result;
use emco_core::poison::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, broadcast, watch};

use super::ResourceId;
use crate::readiness::Readiness;

/// A change of readiness (or of drift) of one labelled object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadinessChange {
    /// The cluster the object lives on.
    pub cluster: String,
    /// The value of its [`DEPLOYMENT_ID_LABEL`](super::DEPLOYMENT_ID_LABEL) (`<ctx>-<app>`).
    pub deployment_id: String,
    /// The object (with its namespace, when namespaced).
    pub id: ResourceId,
    /// Its readiness now, or `None` if it was deleted.
    pub readiness: Option<Readiness>,
}

/// What the watches know of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// Listed or changed, with its readiness.
    Seen(Readiness),
    /// Its watch has listed the objects of its type and this one is not among them.
    Absent,
    /// Its watch has not listed yet, is failing, or does not exist; the reason.
    Unknown(String),
}

/// The state of one watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchHealth {
    /// Started, first listing not complete.
    Syncing,
    /// Listed; following changes.
    Synced,
    /// The last request failed (the watch retries with backoff); the error.
    Failing(String),
}

/// Where the [`Doorbell`]s of the followers of one task hang: a ring wakes the task and
/// queues the bell's number, so that the task looks only at the followers whose objects changed
/// (one task follows every app of a cluster).
#[derive(Debug, Default)]
pub struct Door {
    wake: Notify,
    rung: Mutex<Vec<u64>>,
}

impl Door {
    /// A door nobody rang yet.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// A bell on this door that queues `number` when rung.
    #[must_use]
    pub fn bell(self: &Arc<Self>, number: u64) -> Arc<Doorbell> {
        Arc::new(Doorbell {
            number,
            rung: AtomicBool::new(false),
            door: Arc::clone(self),
        })
    }

    /// Waits for a ring (at once when one came since the last wait).
    pub async fn rung(&self) {
        self.wake.notified().await;
    }

    /// The numbers of the bells rung since the last call, each once.
    pub fn take_rung(&self) -> Vec<u64> {
        std::mem::take(&mut *lock(&self.rung))
    }
}

/// What a [`ReadinessSource`] rings when an object it watches changes
/// ([`ReadinessSource::ring_on_change`]).
#[derive(Debug)]
pub struct Doorbell {
    number: u64,
    rung: AtomicBool,
    door: Arc<Door>,
}

impl Doorbell {
    /// Marks the bell rung and wakes its door's task; rings before [`Doorbell::answer`] are
    /// one.
    pub fn ring(&self) {
        if !self.rung.swap(true, Ordering::AcqRel) {
            lock(&self.door.rung).push(self.number);
            self.door.wake.notify_one();
        }
    }

    /// Takes the ring in, before looking at what changed: a change after this rings again.
    pub fn answer(&self) {
        self.rung.store(false, Ordering::Release);
    }
}

/// The readiness watches of one cluster, shared by every user of its connector.
#[async_trait]
pub trait ReadinessSource: std::fmt::Debug + Send + Sync {
    /// The readiness changes of every watched object from now on. A subscriber that falls
    /// behind gets [`broadcast::error::RecvError::Lagged`] and resyncs with
    /// [`ReadinessSource::watched`].
    fn subscribe(&self) -> broadcast::Receiver<ReadinessChange>;

    /// Rings `bell` whenever the readiness or drift of `id` (an id
    /// [`ReadinessSource::watch_in`] returned) changes, for as long as the bell lives. A
    /// follower of a few objects among a cluster's many is woken only by its own, where a
    /// [`ReadinessSource::subscribe`]r sees every change.
    fn ring_on_change(&self, id: &ResourceId, bell: &Arc<Doorbell>);

    /// A counter bumped whenever a watch syncs or fails.
    fn health_changes(&self) -> watch::Receiver<u64>;

    /// The drift of `id` (as [`ReadinessSource::watch_in`] returned it): fields emco-rs applied
    /// that another client changed since; `None` when there is none, or the source cannot tell.
    fn drift(&self, id: &ResourceId) -> Option<std::sync::Arc<crate::drift::Drift>> {
        let _ = id;
        None
    }

    /// Whether `id` waits for its manifest before its drift can be told: first seen (after a
    /// restart) with fields that other managers hold, some of which may have been emco-rs's.
    fn unverified(&self, id: &ResourceId) -> bool {
        let _ = id;
        false
    }

    /// Judges an [`ReadinessSource::unverified`] object against `manifest`, what emco-rs last
    /// applied to it; [`ReadinessSource::drift`] tells the outcome.
    fn verify(&self, id: &ResourceId, manifest: &serde_json::Value) {
        let _ = (id, manifest);
    }

    /// Makes sure the type of `id` is watched where an object of namespace `namespace` lives,
    /// and returns the id the watches know the object by. Asking again is a no-op.
    ///
    /// # Errors
    /// [`emco_core::ErrorKind::Unavailable`] while the cluster cannot be reached; other kinds
    /// when the type cannot be watched (not served, not allowed).
    async fn watch_in(&self, namespace: &str, id: &ResourceId) -> Result<ResourceId>;

    /// The health of the watch covering `id` (an id [`ReadinessSource::watch_in`] returned);
    /// `None` when none covers it.
    fn health(&self, id: &ResourceId) -> Option<WatchHealth>;

    /// What the watches know of the object `id`, from memory.
    fn watched(&self, id: &ResourceId) -> Watched;
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    /// Rings before the answer are one; a ring after it queues the bell again; the door's
    /// task is woken by the first ring.
    #[test]
    fn a_bell_queues_once_until_answered() {
        let door = Door::new();
        let (a, b) = (door.bell(7), door.bell(8));
        a.ring();
        a.ring();
        b.ring();
        assert!(door.rung().now_or_never().is_some());
        assert_eq!(door.take_rung(), [7, 8]);
        a.ring();
        assert!(door.take_rung().is_empty(), "not answered yet");
        a.answer();
        a.ring();
        assert_eq!(door.take_rung(), [7]);
    }
}
