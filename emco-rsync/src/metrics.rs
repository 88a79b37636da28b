//! What rsync does, as Prometheus metrics: what it applied, deleted and failed on each cluster by
//! kind, how long each batch took, which clusters it can reach, how much work waits on each
//! context, and how many contexts are in each state. [`Rsync::metrics`](crate::engine::Rsync)
//! gives them; the server renders them on `/metrics`.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::sync::Mutex;

use emco_core::ContextId;
use emco_core::lifecycle::AppContextStatus;
use emco_runtime::metrics::{Counter, Family, Gauge, Histogram, LATENCY_BUCKETS};

/// rsync's metric families.
#[derive(Debug)]
pub struct RsyncMetrics {
    /// `emco_rsync_resources_applied_total{cluster,kind}`.
    pub applied: Counter,
    /// `emco_rsync_resources_deleted_total{cluster,kind}`.
    pub deleted: Counter,
    /// `emco_rsync_resource_failures_total{cluster,kind,reason}`.
    pub failures: Counter,
    /// `emco_rsync_retries_total{cluster}`: batches retried because the cluster was unreachable.
    pub retries: Counter,
    /// `emco_rsync_batch_duration_seconds{action}`: one apply or delete call to a cluster.
    pub batch_seconds: Histogram,
    /// `emco_rsync_cluster_reachable{cluster}`: 1 when the last call or watch reached it.
    pub reachable: Gauge,
    /// `emco_rsync_queue_depth{context}`: events waiting on a context's queue.
    pub queue_depth: Gauge,
    /// `emco_rsync_drift_detected_total{group,cluster,kind}`: objects found changed behind
    /// emco-rs's back (each time one drifts anew).
    pub drift_detected: Counter,
    /// `emco_rsync_drift_corrected_total{group,cluster,kind}`: drifted objects applied again.
    pub drift_corrected: Counter,
    /// `emco_rsync_readiness_wakeups_total{reason}`: readiness followers woken, by what woke
    /// them (`change`, `watch`, `contact`, `tick`): each wake-up is one look at its objects.
    pub readiness_wakeups: Counter,
    /// `emco_rsync_readiness_records_total`: collected statuses the followers wrote (one per
    /// change of what an app's resources on a cluster show).
    pub readiness_records: Counter,
    /// `emco_rsync_readiness_followers`: (context, app, cluster) whose readiness is followed.
    pub readiness_followers: Gauge,
    /// `emco_rsync_readiness_clusters`: the tasks that follow them, one per cluster (per
    /// connector: a logical cloud's credentials make their own).
    pub readiness_clusters: Gauge,
    /// `emco_rsync_shards{event}`: parts of operations shared among replicas that this one
    /// runs now, by event.
    pub shards: Gauge,
    /// `emco_rsync_shards_total{event, end}`: parts this replica ran, by event and how they
    /// ended (`done`, `failed`, `withdrawn`, `left`: to whoever holds it next).
    pub shards_run: Counter,
    /// `emco_rsync_contexts{state}`: the contexts this engine ran, by their last state.
    contexts: Gauge,
    states: Mutex<HashMap<ContextId, AppContextStatus>>,
}

impl Default for RsyncMetrics {
    fn default() -> Self {
        Self {
            applied: Counter::new(
                "emco_rsync_resources_applied_total",
                "Resources rsync applied, by cluster and kind.",
                &["cluster", "kind"],
            ),
            deleted: Counter::new(
                "emco_rsync_resources_deleted_total",
                "Resources rsync deleted, by cluster and kind.",
                &["cluster", "kind"],
            ),
            failures: Counter::new(
                "emco_rsync_resource_failures_total",
                "Resources rsync could not apply or delete, by cluster, kind and reason.",
                &["cluster", "kind", "reason"],
            ),
            retries: Counter::new(
                "emco_rsync_retries_total",
                "Batches retried because their cluster was unreachable, by cluster.",
                &["cluster"],
            ),
            batch_seconds: Histogram::new(
                "emco_rsync_batch_duration_seconds",
                "Duration of one apply or delete call to a cluster.",
                &["action"],
                LATENCY_BUCKETS,
            ),
            reachable: Gauge::new(
                "emco_rsync_cluster_reachable",
                "1 when rsync's last call or watch reached the cluster, 0 while it retries.",
                &["cluster"],
            ),
            queue_depth: Gauge::new(
                "emco_rsync_queue_depth",
                "Events waiting on an AppContext's queue, by context id.",
                &["context"],
            ),
            drift_detected: Counter::new(
                "emco_rsync_drift_detected_total",
                "Objects found changed behind emco-rs's back, by group, cluster and kind.",
                &["group", "cluster", "kind"],
            ),
            drift_corrected: Counter::new(
                "emco_rsync_drift_corrected_total",
                "Drifted objects applied again by a correct drift policy, by group, cluster and kind.",
                &["group", "cluster", "kind"],
            ),
            readiness_wakeups: Counter::new(
                "emco_rsync_readiness_wakeups_total",
                "Readiness followers woken to look at their objects, by what woke them.",
                &["reason"],
            ),
            readiness_records: Counter::new(
                "emco_rsync_readiness_records_total",
                "Collected statuses readiness followers wrote, one per change of what they see.",
                &[],
            ),
            readiness_followers: Gauge::new(
                "emco_rsync_readiness_followers",
                "Apps on clusters whose readiness is followed, per context.",
                &[],
            ),
            readiness_clusters: Gauge::new(
                "emco_rsync_readiness_clusters",
                "Tasks following readiness, one per cluster and credentials.",
                &[],
            ),
            shards: Gauge::new(
                "emco_rsync_shards",
                "Parts of operations shared among the replicas that this one runs now.",
                &["event"],
            ),
            shards_run: Counter::new(
                "emco_rsync_shards_total",
                "Parts of shared operations this replica ran, by how they ended.",
                &["event", "end"],
            ),
            contexts: Gauge::new(
                "emco_rsync_contexts",
                "AppContexts this engine ran, by their last state.",
                &["state"],
            ),
            states: Mutex::new(HashMap::new()),
        }
    }
}

impl RsyncMetrics {
    /// Records that context `id` is now in `state`.
    pub fn context_state(&self, id: ContextId, state: AppContextStatus) {
        let mut states = lock(&self.states);
        if let Some(old) = states.insert(id, state) {
            self.contexts.add(&[old.as_str()], -1.0);
        }
        self.contexts.add(&[state.as_str()], 1.0);
    }

    /// How many contexts are in `state`.
    #[must_use]
    pub fn contexts_in(&self, state: AppContextStatus) -> u64 {
        // The gauge holds whole counts.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = self.contexts.get(&[state.as_str()]).unwrap_or(0.0) as u64;
        n
    }

    /// The families, to render.
    #[must_use]
    pub fn families(&self) -> Vec<&dyn Family> {
        let own: [&dyn Family; 16] = [
            &self.applied,
            &self.deleted,
            &self.failures,
            &self.retries,
            &self.batch_seconds,
            &self.reachable,
            &self.queue_depth,
            &self.drift_detected,
            &self.drift_corrected,
            &self.readiness_wakeups,
            &self.readiness_records,
            &self.readiness_followers,
            &self.readiness_clusters,
            &self.shards,
            &self.shards_run,
            &self.contexts,
        ];
        own.into_iter()
            // The connections to clusters are the process's (one descriptor limit), not an engine's.
            .chain(crate::connector::kube::Budget::process().families())
            .collect()
    }
}
