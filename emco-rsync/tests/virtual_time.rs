//! The engine's timing, checked on tokio's paused clock: retries of an unreachable cluster follow
//! the backoff schedule, and readiness without a watcher is polled at the poll interval. The
//! cluster is a scripted in-process connector, so nothing waits on a socket and virtual time
//! runs as fast as the engine does: the delays asserted here are the engine's own, not the
//! machine's.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use emco_core::lifecycle::{AppContextStatus, RsyncStatus};
use emco_core::{Error, Result};
use emco_rsync::connector::{
    Batch, BatchError, Connector, Observation, Propagation, ResourceId, Scope, Warnings,
};
use emco_rsync::engine::{Backoff, MapResolver, Rsync};
use emco_store::{AppContextStore, InMemoryAppContextStore};
use serde_json::{Value, json};
use tokio::time::Instant;

use common::{AppSpec, DEPLOYMENT, context, status};

const CLUSTER: &str = "prov+c1";

/// A cluster that refuses the first `failures` applies as unreachable, then takes them, and
/// reports its Deployment available from the `ready_after`-th observation on. It notes when each
/// call came, on tokio's clock.
#[derive(Debug)]
struct Scripted {
    failures: AtomicUsize,
    ready_after: usize,
    applies: Mutex<Vec<Instant>>,
    observes: Mutex<Vec<Instant>>,
    applied: Mutex<Option<Value>>,
}

impl Scripted {
    fn new(failures: usize, ready_after: usize) -> Arc<Self> {
        Arc::new(Self {
            failures: AtomicUsize::new(failures),
            ready_after,
            applies: Mutex::default(),
            observes: Mutex::default(),
            applied: Mutex::default(),
        })
    }

    fn applies(&self) -> Vec<Instant> {
        self.applies.lock().unwrap().clone()
    }

    fn observes(&self) -> Vec<Instant> {
        self.observes.lock().unwrap().clone()
    }
}

#[async_trait]
impl Connector for Scripted {
    fn cluster(&self) -> &str {
        CLUSTER
    }

    fn observes_live_state(&self) -> bool {
        true
    }

    async fn apply(&self, batch: &Batch) -> std::result::Result<Warnings, BatchError> {
        self.applies.lock().unwrap().push(Instant::now());
        let refused = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refused {
            return Err(BatchError::at(0, Error::unavailable("connection refused")));
        }
        let deployment = batch.resources.iter().find(|r| r.id().kind == "Deployment");
        *self.applied.lock().unwrap() = deployment.map(|r| r.manifest().clone());
        Ok(Warnings::new())
    }

    async fn delete(&self, _: &Batch, _: Propagation) -> std::result::Result<(), BatchError> {
        *self.applied.lock().unwrap() = None;
        Ok(())
    }

    async fn get(&self, _: &Scope, _: &ResourceId) -> Result<Option<Value>> {
        Ok(self.applied.lock().unwrap().clone())
    }

    async fn health(&self) -> Result<()> {
        Ok(())
    }

    async fn observe(&self, _: &Scope, ids: &[ResourceId]) -> Result<Vec<Observation>> {
        let seen = {
            let mut observes = self.observes.lock().unwrap();
            observes.push(Instant::now());
            observes.len()
        };
        let Some(mut object) = self.applied.lock().unwrap().clone() else {
            return Ok(ids.iter().map(|_| Observation::Absent).collect());
        };
        object["metadata"]["generation"] = json!(1);
        object["status"] = if seen >= self.ready_after {
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                "readyReplicas": 1, "availableReplicas": 1,
                "conditions": [{"type": "Available", "status": "True"}]})
        } else {
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                "availableReplicas": 0})
        };
        Ok(ids
            .iter()
            .map(|_| Observation::Present(object.clone()))
            .collect())
    }
}

/// An engine reaching only `cluster`, over an in-memory AppContext store.
fn engine(
    cluster: &Arc<Scripted>,
    backoff: Backoff,
    poll: Duration,
) -> (Rsync, Arc<dyn AppContextStore>) {
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let resolver = MapResolver::new();
    resolver.insert(CLUSTER, Arc::clone(cluster) as Arc<dyn Connector>);
    let rsync = Rsync::builder()
        .store(Arc::clone(&store))
        .connectors(Arc::new(resolver))
        .backoff(backoff)
        .poll_interval(poll)
        .build()
        .unwrap();
    (rsync, store)
}

fn web() -> AppSpec {
    AppSpec::new(
        "web",
        &[CLUSTER.to_owned()],
        &[("web+Deployment", DEPLOYMENT)],
    )
}

/// The gaps between consecutive instants.
fn gaps(at: &[Instant]) -> Vec<Duration> {
    at.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Whether `gap` is a delay the backoff may draw for its `full` delay: in its upper half (jitter),
/// plus the little virtual time the engine's own work between two tries takes.
fn drawn_from(gap: Duration, full: Duration) -> bool {
    gap >= full / 2 && gap <= full + Duration::from_millis(50)
}

#[tokio::test(start_paused = true)]
async fn retries_follow_the_backoff_schedule_then_fail() {
    let cluster = Scripted::new(usize::MAX, 1);
    let backoff = Backoff {
        initial: Duration::from_secs(10),
        max_delay: Duration::from_secs(30),
        max_retries: Some(3),
    };
    let (rsync, store) = engine(&cluster, backoff, Duration::from_secs(1));
    let ctx = context(store, &[web()]).await;
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;

    assert_eq!(status(&ctx).await, AppContextStatus::InstantiateFailed);
    let applies = cluster.applies();
    assert_eq!(applies.len(), 4, "one try and three retries");
    // 10 s, then 20 s, then 40 s capped at 30 s: each drawn from its upper half.
    let expected = [10, 20, 30].map(Duration::from_secs);
    for (gap, full) in gaps(&applies).into_iter().zip(expected) {
        assert!(
            drawn_from(gap, full),
            "a retry after {gap:?}, not within {full:?}"
        );
    }
    let name = &ctx.resources("web", CLUSTER).await.unwrap()[0];
    assert_eq!(
        ctx.resource_status("web", CLUSTER, name).await.unwrap(),
        Some(RsyncStatus::Failed)
    );
}

#[tokio::test(start_paused = true)]
async fn a_cluster_back_within_the_retries_is_applied_and_polled_to_ready() {
    let cluster = Scripted::new(2, 3);
    let backoff = Backoff {
        initial: Duration::from_secs(4),
        max_delay: Duration::from_secs(60),
        max_retries: None,
    };
    let poll = Duration::from_secs(5);
    let (rsync, store) = engine(&cluster, backoff, poll);
    let ctx = context(store, &[web()]).await;
    let mut ready = rsync.subscribe_ready(ctx.id());
    rsync.instantiate(ctx.id()).await.unwrap();
    let note = tokio::time::timeout(Duration::from_secs(3600), ready.next())
        .await
        .expect("ready within an hour of virtual time")
        .unwrap();
    assert_eq!((note.app.as_str(), note.cluster.as_str()), ("web", CLUSTER));

    // Two refusals, retried after 4 s and 8 s (upper halves), then taken.
    let applies = cluster.applies();
    assert_eq!(applies.len(), 3);
    for (gap, full) in gaps(&applies)
        .into_iter()
        .zip([4, 8].map(Duration::from_secs))
    {
        assert!(
            drawn_from(gap, full),
            "a retry after {gap:?}, not within {full:?}"
        );
    }
    // Not available on the first two looks: looked at again once per poll interval.
    let observes = cluster.observes();
    assert!(observes.len() >= 3, "{} observations", observes.len());
    assert!(observes[0] >= applies[2], "observed before it was applied");
    for gap in &gaps(&observes)[..2] {
        assert!(
            *gap >= poll && *gap <= poll + Duration::from_millis(50),
            "polled after {gap:?}, not every {poll:?}"
        );
    }
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
}
