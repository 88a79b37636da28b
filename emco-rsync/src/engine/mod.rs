//! The engine: one task per active AppContext processing its persisted event queue.
//!
//! [`Rsync`] is built with an [`AppContextStore`], a [`ClusterResolver`] that turns a cluster id
//! (`provider+cluster`) into a [`Connector`], concurrency limits and a [`Backoff`]. Calls such as
//! [`Rsync::instantiate`] append an event to the context's queue
//! (`/context/<id>/rsync/AppContextEventQueue/`), register the context under `/activecontext/`
//! and wake its task. The task takes the pending events in order, checks each against the allowed
//! states (an event not valid in the current status is marked `Error` and skipped), runs it and
//! marks it `Done` or `Error`. A pending `Terminate` makes every pending event before it
//! `Skip`; a `Terminate` arriving while an instantiate or update runs cancels that work first.
//! The stop flag ([`Rsync::stop`], or `stopflag/` written by anyone) ends all waiting and
//! retrying and the operation completes as failed. [`Rsync::start`] resumes every context of the
//! active registry, so work interrupted by a crash is finished by the next process; applied
//! resources are skipped when resuming (their statuses read in one listing of the context), and
//! server-side apply makes a repeated apply harmless.
//!
//! As EMCO's rsync, the engine keeps `rsync/state/CurrentState` equal to the context status,
//! sets `rsync/state/DesiredState` to where the running event leads (Instantiated,
//! Terminated, ...), and raises `rsync/state/PendingTerminateFlag` while a running instantiate
//! or update gives way to a terminate. A cluster's `readystatus/` is `Unknown` until a worker
//! reaches it (first contact, or first contact after a resume), then `Available` or `Retrying`.

pub mod deployer;
mod liveness;
mod owner;
mod replica;
mod run;
mod share;
mod status;

use emco_core::poison::{lock, read, write};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tracing::Instrument;

use async_trait::async_trait;
use emco_appcontext::AppContext;
use emco_appcontext::context::{CompositeAppMeta, QueueElement, QueueStatus, Registry};
use emco_core::lifecycle::{AppContextStatus, RsyncEvent, rsync_transition};
use emco_core::{ContextId, Error, Found, Result};
use emco_runtime::sync::StripedLocks;
use emco_store::AppContextStore;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;

use crate::connector::Connector;
use crate::metrics::RsyncMetrics;

pub use liveness::Liveness;
pub use owner::{HEARTBEATS as REPLICA_HEARTBEATS, ReplicaConfig};
pub use status::ContextStatusExt;

/// Helm's default `--timeout`: how long a hook may run.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(300);

/// How many clusters are probed at a time: by [`Rsync::unanswering`], and by the liveness
/// probes of the clusters followed ([`Liveness`]).
pub const PROBES_AT_ONCE: usize = 64;

/// Turns a cluster id (`provider+cluster`) into the connector that reaches it. The orchestrator
/// implements it by reading the cluster's kubeconfig from its resource store.
#[async_trait]
pub trait ClusterResolver: fmt::Debug + Send + Sync + 'static {
    /// The connector for `cluster`.
    ///
    /// # Errors
    ///
    /// `NotFound` when the cluster is unknown; `Unavailable` when its credentials cannot be read
    /// right now (the engine retries); other kinds fail the cluster's resources.
    async fn connector(&self, cluster: &str) -> Result<Arc<dyn Connector>>;

    /// The connector for `cluster` as the context described by `meta` reaches it: a context of
    /// a standard logical cloud (`meta.level == "1"`) uses that cloud's own credentials rather
    /// than the cluster's admin kubeconfig. The default ignores `meta`.
    ///
    /// # Errors
    ///
    /// As [`ClusterResolver::connector`].
    async fn connector_for(
        &self,
        cluster: &str,
        meta: &CompositeAppMeta,
    ) -> Result<Arc<dyn Connector>> {
        let _ = meta;
        self.connector(cluster).await
    }
}

/// A [`ClusterResolver`] over a map filled by the caller (tests, benchmarks, fixed fleets).
#[derive(Debug, Default)]
pub struct MapResolver {
    map: RwLock<HashMap<String, Arc<dyn Connector>>>,
}

impl MapResolver {
    /// An empty resolver.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces the connector of `cluster`.
    pub fn insert(&self, cluster: impl Into<String>, connector: Arc<dyn Connector>) {
        write(&self.map).insert(cluster.into(), connector);
    }
}

#[async_trait]
impl ClusterResolver for MapResolver {
    async fn connector(&self, cluster: &str) -> Result<Arc<dyn Connector>> {
        read(&self.map)
            .get(cluster)
            .cloned()
            .ok_or_else(|| Error::not_found(format!("cluster {cluster} is not known")))
    }
}

/// How an unreachable cluster is retried: exponential delays from `initial`, doubled per attempt
/// up to `max_delay`, each drawn at random from its upper half (jitter, so a fleet that went down
/// together does not come back in lockstep), for at most `max_retries` retries (`None`: keep
/// trying until the operation is stopped or cancelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The cap on one delay.
    pub max_delay: Duration,
    /// The number of retries before the resources fail; `None` retries forever.
    pub max_retries: Option<u32>,
}

impl Default for Backoff {
    /// 1 s doubling up to 30 s, forever (EMCO retries every 2 s forever).
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_retries: None,
        }
    }
}

impl Backoff {
    /// The delay before retry number `attempt` (1-based).
    #[must_use]
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        let full = self.initial.saturating_mul(factor).min(self.max_delay);
        let half = full / 2;
        half + full.mul_f64(rand::random::<f64>() / 2.0)
    }

    /// Whether retry number `attempt` (1-based) is still allowed.
    #[must_use]
    pub fn allows(&self, attempt: u32) -> bool {
        self.max_retries.is_none_or(|max| attempt <= max)
    }
}

/// All resources of one app became ready on one cluster (a `readyNotify` notification).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyNotification {
    /// The AppContext id.
    pub ctx_id: ContextId,
    /// The app.
    pub app: String,
    /// The cluster (`provider+cluster`).
    pub cluster: String,
}

/// The readiness notifications of one context, from [`Rsync::subscribe_ready`].
#[derive(Debug)]
pub struct ReadySubscription {
    ctx_id: ContextId,
    rx: broadcast::Receiver<ReadyNotification>,
}

impl ReadySubscription {
    /// The next notification of the context; `None` once the engine is gone. Notifications
    /// missed because the subscriber fell too far behind are skipped.
    pub async fn next(&mut self) -> Option<ReadyNotification> {
        loop {
            match self.rx.recv().await {
                Ok(n) if n.ctx_id == self.ctx_id => return Some(n),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// Why a running operation was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abort {
    /// A terminate arrived: the instantiate or update gives way.
    Terminate,
    /// The stop flag: the operation completes as failed.
    Stop,
    /// The engine shuts down: the operation resumes after the restart.
    Shutdown,
}

/// The control of one running operation.
#[derive(Debug, Clone)]
struct OpCtl {
    event: RsyncEvent,
    token: CancellationToken,
    reason: Arc<Mutex<Option<Abort>>>,
}

impl OpCtl {
    fn new(event: RsyncEvent, parent: &CancellationToken) -> Self {
        Self {
            event,
            token: parent.child_token(),
            reason: Arc::new(Mutex::new(None)),
        }
    }

    fn abort(&self, why: Abort) {
        let mut reason = lock(&self.reason);
        reason.get_or_insert(why);
        self.token.cancel();
    }

    /// Why the operation was cut short; a cancelled parent token means shutdown.
    fn aborted(&self) -> Option<Abort> {
        if !self.token.is_cancelled() {
            return None;
        }
        let reason = lock(&self.reason);
        Some(reason.unwrap_or(Abort::Shutdown))
    }
}

/// The task of one context.
#[derive(Debug, Default)]
struct CtxTask {
    op: Mutex<Option<OpCtl>>,
    finished: CancellationToken,
    /// The owner key revision this replica took the context with (replicas only): the task's
    /// writes are fenced by it.
    fence: Option<u64>,
}

impl CtxTask {
    fn op(&self) -> Option<OpCtl> {
        lock(&self.op).clone()
    }

    fn set_op(&self, op: Option<OpCtl>) {
        *lock(&self.op) = op;
    }
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn AppContextStore>,
    resolver: Arc<dyn ClusterResolver>,
    global: Arc<Semaphore>,
    /// The permits of `global`.
    global_limit: usize,
    per_cluster: usize,
    cluster_limits: Mutex<HashMap<String, Arc<Semaphore>>>,
    backoff: Backoff,
    poll: Duration,
    /// How long CRDs may take to be established and hooks to complete.
    hook_timeout: Duration,
    root: Mutex<CancellationToken>,
    /// The running task of each context. Held only for the map itself: the store writes that
    /// must not interleave with a task's start or end hold the context's gate instead.
    tasks: tokio::sync::Mutex<HashMap<ContextId, Arc<CtxTask>>>,
    /// Per context (striped), orders an enqueue's writes with its task's decision to end, so
    /// that an event is never left queued without a task; contexts do not wait for each other.
    gates: StripedLocks,
    ready_tx: broadcast::Sender<ReadyNotification>,
    /// (ctx, app, cluster) whose resources were all seen ready.
    ready: Mutex<HashSet<(ContextId, String, String)>>,
    /// Cancels the readiness observers of a context (when it is terminated or updated away).
    readiness_tokens: Mutex<HashMap<ContextId, CancellationToken>>,
    /// The readiness observer of each (ctx, app, cluster), so a new deploy replaces the old one.
    observers: Mutex<HashMap<(ContextId, String, String), CancellationToken>>,
    /// While the readiness of deployed contexts is followed again after a start: the
    /// (context, cluster) pairs forgotten since (`None`: all of the context's), which that pass
    /// must not follow again (an update that replaced them raced with it).
    forgotten: Mutex<Option<HashSet<Forgotten>>>,
    /// With other replicas on the store: which contexts this one runs (see [`owner`]).
    owners: Option<owner::Owners>,
    /// The lease of each cluster followed: whether it still answers.
    leases: liveness::Leases,
    /// The readiness followers, one task per cluster.
    flocks: run::Flocks,
    /// The shards of shared operations this replica runs (see [`share`]).
    shards: share::Shards,
    /// The replica's heartbeat task: it ends, after a shutdown, once the work of this replica
    /// has stopped and the heartbeat is removed ([`Rsync::stopped`]).
    beating: Mutex<Option<tokio::task::JoinHandle<()>>>,
    metrics: Arc<RsyncMetrics>,
}

/// A context whose readiness stopped being followed, on one cluster or (`None`) all of them.
type Forgotten = (ContextId, Option<String>);

/// Builds an [`Rsync`].
#[derive(Debug, Default)]
pub struct RsyncBuilder {
    store: Option<Arc<dyn AppContextStore>>,
    resolver: Option<Arc<dyn ClusterResolver>>,
    global: Option<usize>,
    per_cluster: Option<usize>,
    backoff: Backoff,
    poll: Option<Duration>,
    hook_timeout: Option<Duration>,
    liveness: Liveness,
    replica: Option<ReplicaConfig>,
}

impl RsyncBuilder {
    /// The AppContext store (required).
    #[must_use]
    pub fn store(mut self, store: Arc<dyn AppContextStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The cluster resolver (required).
    #[must_use]
    pub fn connectors(mut self, resolver: Arc<dyn ClusterResolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// At most `global` cluster requests in flight in all, at most `per_cluster` per cluster
    /// (defaults 256 and 4; zeros are raised to 1).
    #[must_use]
    pub fn concurrency(mut self, global: usize, per_cluster: usize) -> Self {
        self.global = Some(global.max(1));
        self.per_cluster = Some(per_cluster.max(1));
        self
    }

    /// How unreachable clusters are retried.
    #[must_use]
    pub const fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// How often readiness is polled for connectors without a watcher (GitOps), how often a
    /// waiting hook or app `Ready` dependency checks the stop flag, and how soon a watch that
    /// could not be set up is tried again; default 1 s.
    #[must_use]
    pub const fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = Some(poll);
        self
    }

    /// How long CRDs may take to be established and a Helm hook to complete before it counts
    /// as failed, as `helm --timeout` (default 5 minutes, Helm's). A failed install hook fails
    /// what follows it; a failed delete hook fails the terminate, which still deletes the rest.
    #[must_use]
    pub const fn hook_timeout(mut self, timeout: Duration) -> Self {
        self.hook_timeout = Some(timeout);
        self
    }

    /// How often each cluster with followed resources is probed, and how long after its last
    /// answer its resources' readiness turns unknown (see [`Liveness`]).
    #[must_use]
    pub const fn liveness(mut self, liveness: Liveness) -> Self {
        self.liveness = liveness;
        self
    }

    /// Shares the store with other engines (replicas): each context with queued work is run by
    /// one of them, and the contexts of a replica that stops renewing its heartbeat are taken
    /// over by the others (see [`ReplicaConfig`]). Without it the engine runs every context it
    /// is given or finds, as the only one on its store.
    #[must_use]
    pub fn replica(mut self, replica: ReplicaConfig) -> Self {
        self.replica = Some(replica);
        self
    }

    /// The engine.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` when the store or the resolver is missing.
    pub fn build(self) -> Result<Rsync> {
        let store = self
            .store
            .ok_or_else(|| Error::invalid("rsync needs an AppContext store").with_field("store"))?;
        let resolver = self.resolver.ok_or_else(|| {
            Error::invalid("rsync needs a cluster resolver").with_field("connectors")
        })?;
        let (ready_tx, _) = broadcast::channel(4096);
        let global_limit = self.global.unwrap_or(256);
        let metrics = Arc::new(RsyncMetrics::default());
        Ok(Rsync {
            inner: Arc::new(Inner {
                store,
                resolver,
                global: Arc::new(Semaphore::new(global_limit)),
                global_limit,
                per_cluster: self.per_cluster.unwrap_or(4),
                cluster_limits: Mutex::new(HashMap::new()),
                backoff: self.backoff,
                poll: self.poll.unwrap_or(Duration::from_secs(1)),
                hook_timeout: self.hook_timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT),
                root: Mutex::new(CancellationToken::new()),
                tasks: tokio::sync::Mutex::new(HashMap::new()),
                gates: StripedLocks::default(),
                ready_tx,
                ready: Mutex::new(HashSet::new()),
                readiness_tokens: Mutex::new(HashMap::new()),
                observers: Mutex::new(HashMap::new()),
                forgotten: Mutex::new(None),
                owners: self.replica.map(owner::Owners::new),
                leases: liveness::Leases::new(self.liveness, Arc::clone(&metrics)),
                flocks: run::Flocks::default(),
                shards: share::Shards::default(),
                beating: Mutex::new(None),
                metrics,
            }),
        })
    }
}

/// The resource synchronizer. Cheap to clone; clones share the engine.
#[derive(Debug, Clone)]
pub struct Rsync {
    inner: Arc<Inner>,
}

impl Rsync {
    /// A builder.
    #[must_use]
    pub fn builder() -> RsyncBuilder {
        RsyncBuilder::default()
    }

    /// What the engine did and does, as Prometheus metrics.
    #[must_use]
    pub fn metrics(&self) -> &Arc<RsyncMetrics> {
        &self.inner.metrics
    }

    /// Adopts `cancel` as the engine's shutdown signal and resumes every context of the active
    /// registry. Cancelling it ends all tasks; their unfinished events stay queued for the next
    /// start.
    ///
    /// # Errors
    ///
    /// The store's errors reading the registry.
    pub async fn start(&self, cancel: CancellationToken) -> Result<()> {
        *lock(&self.inner.root) = cancel;
        if self.inner.owners.is_some() {
            return self.start_replica().await;
        }
        let ids = AppContext::active_contexts(self.inner.store.as_ref()).await?;
        let deployed =
            AppContext::registered(self.inner.store.as_ref(), Registry::Deployed).await?;
        let mut tasks = self.inner.tasks.lock().await;
        for &id in &ids {
            match AppContext::load(Arc::clone(&self.inner.store), id).await {
                Ok(ctx) => self.ensure_task(&mut tasks, ctx),
                Err(e) => tracing::warn!(ctx = %id, error = %e, "cannot resume an active context"),
            }
        }
        drop(tasks);
        // Deployed contexts with nothing queued only need their readiness followed again; an
        // active one gets its observers from the operation it resumes.
        // A set: with 10,000 contexts a linear search each would cost 10^8 comparisons.
        let active: HashSet<ContextId> = ids.into_iter().collect();
        let idle: Vec<ContextId> = deployed
            .into_iter()
            .filter(|id| !active.contains(id))
            .collect();
        if !idle.is_empty() {
            *lock(&self.inner.forgotten) = Some(HashSet::new());
            let engine = self.clone();
            tokio::spawn(async move {
                engine.follow_deployed(idle).await;
                *lock(&engine.inner.forgotten) = None;
            });
        }
        Ok(())
    }

    /// After the cancellation given to [`Rsync::start`]: waits until a replica has handed its
    /// work over (its operations ended, its heartbeat removed; at most about half its time to
    /// live), so that a process can exit without leaving the others to wait a whole time to
    /// live. At once for an engine alone on its store.
    pub async fn stopped(&self) {
        let beating = lock(&self.inner.beating).take();
        if let Some(beating) = beating
            && let Err(e) = beating.await
        {
            tracing::warn!(error = %e, "the replica's heartbeat task failed");
        }
    }

    /// Starts the readiness observers of deployed contexts after a restart, one context after
    /// the other so that a big fleet does not stampede the store; contexts no longer deployed
    /// (deleted, or left in another state) leave the registry.
    async fn follow_deployed(&self, ids: Vec<ContextId>) {
        let root = self.inner.root();
        for id in ids {
            if root.is_cancelled() {
                return;
            }
            let ctx = match AppContext::load(Arc::clone(&self.inner.store), id)
                .await
                .found()
            {
                Ok(Some(ctx)) => ctx,
                Ok(None) => {
                    let gone =
                        AppContext::unregister(self.inner.store.as_ref(), Registry::Deployed, id);
                    if let Err(e) = gone.await {
                        tracing::warn!(ctx = %id, error = %e, "cannot unregister a deleted context");
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(ctx = %id, error = %e, "cannot follow a deployed context");
                    continue;
                }
            };
            let op = OpCtl::new(RsyncEvent::Read, &root);
            let run = run::Run::new(Arc::clone(&self.inner), self.inner.fenced(ctx), op).await;
            if let Err(e) = run.follow_deployed().await {
                tracing::warn!(ctx = %id, error = %e, "cannot follow a deployed context");
            }
        }
    }

    /// Checks `resources` (`(name+Kind, YAML)`) of `app` on `cluster` as a context described by
    /// `meta` would apply them (its credentials, its namespace), changing nothing: per resource,
    /// in order, `None` when the cluster would take it and its refusal otherwise.
    ///
    /// # Errors
    ///
    /// The resolver's errors; `Unavailable` when the cluster cannot be reached;
    /// `FailedPrecondition` for a cluster whose connector cannot check (GitOps).
    pub async fn dry_run(
        &self,
        meta: &CompositeAppMeta,
        cluster: &str,
        app: &str,
        resources: &[(String, String)],
    ) -> Result<Vec<Option<String>>> {
        use crate::connector::{Batch, Resource, Scope};
        let mut scope = Scope::new("0", app);
        if !meta.namespace.is_empty() {
            scope = scope.with_namespace(meta.namespace.clone());
        }
        let mut batch = Batch::new(scope);
        let mut out: Vec<Option<String>> = Vec::with_capacity(resources.len());
        let mut checked = Vec::new();
        for (i, (name, yaml)) in resources.iter().enumerate() {
            match Resource::from_yaml(yaml) {
                Ok(r) => {
                    batch.resources.push(r);
                    checked.push(i);
                    out.push(None);
                }
                Err(e) => out.push(Some(format!("{name}: {e}"))),
            }
        }
        if batch.resources.is_empty() {
            return Ok(out);
        }
        let conn = self.inner.resolver.connector_for(cluster, meta).await?;
        for (i, answer) in checked.into_iter().zip(conn.dry_run(&batch).await?) {
            out[i] = answer;
        }
        Ok(out)
    }

    /// Queues an instantiate of context `ctx_id`.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; the store's errors.
    pub async fn instantiate(&self, ctx_id: ContextId) -> Result<()> {
        self.instantiate_on(ctx_id, None).await
    }

    /// Queues an instantiate of context `ctx_id` limited to `clusters` (`provider+cluster`; all
    /// of the context's with `None`): a wave of a rollout. Instantiating it again on other
    /// clusters later deploys there; what was deployed stays.
    ///
    /// # Errors
    ///
    /// As [`Rsync::instantiate`].
    pub async fn instantiate_on(
        &self,
        ctx_id: ContextId,
        clusters: Option<Vec<String>>,
    ) -> Result<()> {
        self.enqueue(ctx_id, RsyncEvent::Instantiate, None, clusters, None)
            .await
    }

    /// [`Rsync::instantiate_on`] queued once per `origin`: asked again with the same origin
    /// (by a process that cannot know whether the one before it asked), it queues nothing; an
    /// ask still pending is marked active and run here if this replica owns the context (its
    /// asker may have died before), one that ran is left as it ended.
    ///
    /// # Errors
    ///
    /// As [`Rsync::instantiate`].
    pub async fn instantiate_on_once(
        &self,
        ctx_id: ContextId,
        clusters: Vec<String>,
        origin: &str,
    ) -> Result<()> {
        let origin = Some(origin.to_owned());
        self.enqueue(
            ctx_id,
            RsyncEvent::Instantiate,
            None,
            Some(clusters),
            origin,
        )
        .await
    }

    /// Queues a terminate of context `ctx_id`; a running instantiate or update is cancelled and
    /// the events queued before the terminate are skipped.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; the store's errors.
    pub async fn terminate(&self, ctx_id: ContextId) -> Result<()> {
        self.enqueue(ctx_id, RsyncEvent::Terminate, None, None, None)
            .await?;
        let running = self
            .inner
            .tasks
            .lock()
            .await
            .get(&ctx_id)
            .and_then(|t| t.op());
        if let Some(op) = running
            && matches!(op.event, RsyncEvent::Instantiate | RsyncEvent::Update)
        {
            // As EMCO: the flag tells that the running operation gives way to a terminate.
            AppContext::load(Arc::clone(&self.inner.store), ctx_id)
                .await?
                .set_pending_terminate(true)
                .await?;
            op.abort(Abort::Terminate);
        }
        Ok(())
    }

    /// Queues a terminate of context `ctx_id` on `clusters` only: its resources are removed
    /// from them (a rollout that takes a first instantiate back). Unlike [`Rsync::terminate`] it
    /// waits for a running operation instead of cancelling it.
    ///
    /// # Errors
    ///
    /// As [`Rsync::terminate`].
    pub async fn terminate_on(&self, ctx_id: ContextId, clusters: Vec<String>) -> Result<()> {
        self.enqueue(ctx_id, RsyncEvent::Terminate, None, Some(clusters), None)
            .await
    }

    /// Queues an update from context `from` to context `to`: `to` applies what is new or changed,
    /// then `from` deletes what `to` no longer has.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; the store's errors.
    pub async fn update(&self, from: ContextId, to: ContextId) -> Result<()> {
        self.update_on(from, to, None).await
    }

    /// [`Rsync::update`] limited to `clusters` (all with `None`), the delete half included: the
    /// other clusters keep `from`'s resources (a wave of a rollout).
    ///
    /// # Errors
    ///
    /// As [`Rsync::update`].
    pub async fn update_on(
        &self,
        from: ContextId,
        to: ContextId,
        clusters: Option<Vec<String>>,
    ) -> Result<()> {
        AppContext::load(Arc::clone(&self.inner.store), from).await?;
        self.enqueue(to, RsyncEvent::Update, Some(from), clusters, None)
            .await
    }

    /// [`Rsync::update_on`] queued once per `origin` (see [`Rsync::instantiate_on_once`]).
    ///
    /// # Errors
    ///
    /// As [`Rsync::update`].
    pub async fn update_on_once(
        &self,
        from: ContextId,
        to: ContextId,
        clusters: Vec<String>,
        origin: &str,
    ) -> Result<()> {
        AppContext::load(Arc::clone(&self.inner.store), from).await?;
        let origin = Some(origin.to_owned());
        self.enqueue(to, RsyncEvent::Update, Some(from), Some(clusters), origin)
            .await
    }

    /// Rolls back from context `from` to an earlier context `to`: an update to `to`. An earlier
    /// context that was instantiated (not itself an update) is marked `Updated` first, as it
    /// becomes the live revision again through the update path.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; `FailedPrecondition` when `to` is in a status no update
    /// can start from; the store's errors.
    pub async fn rollback(&self, from: ContextId, to: ContextId) -> Result<()> {
        self.rollback_on(from, to, None).await
    }

    /// [`Rsync::rollback`] limited to `clusters` (all with `None`): the clusters a rollout had
    /// changed go back.
    ///
    /// # Errors
    ///
    /// As [`Rsync::rollback`].
    pub async fn rollback_on(
        &self,
        from: ContextId,
        to: ContextId,
        clusters: Option<Vec<String>>,
    ) -> Result<()> {
        let target = AppContext::load(Arc::clone(&self.inner.store), to).await?;
        AppContext::load(Arc::clone(&self.inner.store), from).await?;
        let status = target.status().await?.unwrap_or(AppContextStatus::Created);
        match status {
            AppContextStatus::Instantiated => {
                self.inner
                    .set_state(&target, AppContextStatus::Updated)
                    .await?
            }
            AppContextStatus::Updated | AppContextStatus::Created => {}
            other => {
                return Err(Error::failed_precondition(format!(
                    "cannot roll back to context {to} in status {other}"
                )));
            }
        }
        self.enqueue(to, RsyncEvent::Update, Some(from), clusters, None)
            .await
    }

    /// Queues a read of context `ctx_id`: every resource is read back and the collected status
    /// of each cluster is stored.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; the store's errors.
    pub async fn read(&self, ctx_id: ContextId) -> Result<()> {
        self.enqueue(ctx_id, RsyncEvent::Read, None, None, None)
            .await
    }

    /// Sets the stop flag of `ctx_id`: the running operation ends its waiting and retrying and
    /// completes as failed.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; the store's errors.
    pub async fn stop(&self, ctx_id: ContextId) -> Result<()> {
        let ctx = AppContext::load(Arc::clone(&self.inner.store), ctx_id).await?;
        ctx.set_stop_flag(true).await?;
        let tasks = self.inner.tasks.lock().await;
        if let Some(op) = tasks.get(&ctx_id).and_then(|t| t.op()) {
            op.abort(Abort::Stop);
        }
        Ok(())
    }

    /// The readiness notifications of `ctx_id` from now on.
    #[must_use]
    pub fn subscribe_ready(&self, ctx_id: ContextId) -> ReadySubscription {
        ReadySubscription {
            ctx_id,
            rx: self.inner.ready_tx.subscribe(),
        }
    }

    /// A run of context `ctx_id` that only reads.
    async fn reader(&self, ctx_id: ContextId) -> Result<run::Run> {
        let ctx = AppContext::load(Arc::clone(&self.inner.store), ctx_id).await?;
        let op = OpCtl::new(RsyncEvent::Read, &self.inner.root());
        Ok(run::Run::new(Arc::clone(&self.inner), ctx, op).await)
    }

    /// What `cluster` reports now of the resources `names` (`name+Kind`) of `app` in context
    /// `ctx_id`, read with the credentials the context reaches it with; `None` for one that is
    /// absent.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; `Unavailable` when the cluster does not answer; the
    /// cluster's other refusals.
    pub async fn live_objects(
        &self,
        ctx_id: ContextId,
        app: &str,
        cluster: &str,
        names: &[String],
    ) -> Result<Vec<Option<serde_json::Value>>> {
        self.reader(ctx_id).await?.live(app, cluster, names).await
    }

    /// Those of `clusters` that do not answer now, reached as context `ctx_id` reaches them,
    /// each with why (`Unavailable` when it did not answer within `timeout`), in the order
    /// given. Up to [`PROBES_AT_ONCE`] are asked at a time, so that a wave of thousands with
    /// some down takes about one timeout, not one per silent cluster.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown context; the store's errors.
    pub async fn unanswering(
        &self,
        ctx_id: ContextId,
        clusters: &[String],
        timeout: Duration,
    ) -> Result<Vec<(String, emco_core::Error)>> {
        use futures::StreamExt as _;
        let reader = self.reader(ctx_id).await?;
        let reader = &reader;
        // Made before they are streamed: a closure inside the stream would make the future
        // not `Send` for every lifetime, as a spawned driver needs.
        let probes: Vec<_> = clusters
            .iter()
            .map(|c| async move { (c, reader.probe(c, timeout).await) })
            .collect();
        let answers: Vec<(&String, Result<()>)> = futures::stream::iter(probes)
            .buffered(PROBES_AT_ONCE)
            .collect()
            .await;
        Ok(answers
            .into_iter()
            .filter_map(|(c, answer)| answer.err().map(|e| (c.clone(), e)))
            .collect())
    }

    /// Waits until context `ctx_id` has no task (its queue is processed), or the engine shuts
    /// down.
    pub async fn wait_idle(&self, ctx_id: ContextId) {
        let task = self.inner.tasks.lock().await.get(&ctx_id).cloned();
        if let Some(task) = task {
            let root = self.inner.root();
            tokio::select! {
                () = task.finished.cancelled() => {}
                () = root.cancelled() => {}
            }
        }
    }

    async fn enqueue(
        &self,
        ctx_id: ContextId,
        event: RsyncEvent,
        ucid: Option<ContextId>,
        clusters: Option<Vec<String>>,
        origin: Option<String>,
    ) -> Result<()> {
        let ctx = AppContext::load(Arc::clone(&self.inner.store), ctx_id).await?;
        let _gate = self.inner.gates.lock(&ctx_id).await;
        // Asked before with this origin: whether that ask is still to run.
        let asked = match &origin {
            Some(_) => ctx
                .event_queue()
                .await?
                .iter()
                .find(|e| e.origin == origin)
                .map(|e| e.status == QueueStatus::Pending),
            None => None,
        };
        if asked == Some(false) {
            return Ok(());
        }
        // Claimed before the event is visible, so that no other replica takes a context that
        // its enqueuer is about to run.
        let mine = match &self.inner.owners {
            Some(owners) => owners
                .claim(self.inner.store.as_ref(), ctx_id)
                .await?
                .is_some(),
            None => true,
        };
        // Queued already: not queued again, nor a stop set since (a rollback's) cleared; but
        // marked active and run below, as the asker before may have died before it could.
        if asked.is_none() {
            if event != RsyncEvent::Read {
                // A new operation is not stopped by an earlier stop.
                ctx.set_stop_flag(false).await?;
            }
            // Once per origin also when two processes ask at the same moment.
            ctx.enqueue_event_once(QueueElement {
                event,
                ucid: ucid.map(|u| u.to_string()),
                clusters,
                status: QueueStatus::Pending,
                origin,
            })
            .await?;
        }
        ctx.mark_active().await?;
        // Otherwise its owner runs it: it finds the event when its task reads the queue next,
        // or in its next round.
        if mine {
            self.ensure_task(&mut *self.inner.tasks.lock().await, ctx);
        }
        Ok(())
    }

    /// Starts the task of `ctx` unless it runs; with replicas its writes are fenced by the
    /// token this replica claimed the context with.
    fn ensure_task(&self, tasks: &mut HashMap<ContextId, Arc<CtxTask>>, ctx: AppContext) {
        if tasks.contains_key(&ctx.id()) {
            return;
        }
        let fence = self.inner.owners.as_ref().and_then(|o| o.token(ctx.id()));
        let ctx = self.inner.fenced(ctx);
        let task = Arc::new(CtxTask {
            fence,
            ..CtxTask::default()
        });
        tasks.insert(ctx.id(), Arc::clone(&task));
        let engine = self.clone();
        // Every log line of the context's work names it (and, below, the app and cluster).
        let span = tracing::info_span!(parent: None, "context", ctx = %ctx.id());
        tokio::spawn(async move { engine.run_context(ctx, task).await }.instrument(span));
    }

    /// The loop of one context's task.
    async fn run_context(self, ctx: AppContext, task: Arc<CtxTask>) {
        let root = self.inner.root();
        let mut failures = 0;
        loop {
            if root.is_cancelled() {
                break;
            }
            match self.step(&ctx, &task).await {
                Ok(true) => failures = 0,
                Ok(false) => break,
                Err(e) => {
                    // The store is unreachable: the queue is intact, try again later.
                    failures += 1;
                    tracing::warn!(ctx = %ctx.id(), error = %e, "rsync context task failed a step");
                    tokio::select! {
                        () = tokio::time::sleep(self.inner.backoff.delay(failures)) => {}
                        () = root.cancelled() => break,
                    }
                }
            }
        }
        let mut tasks = self.inner.tasks.lock().await;
        if tasks.get(&ctx.id()).is_some_and(|t| Arc::ptr_eq(t, &task)) {
            tasks.remove(&ctx.id());
        }
        task.finished.cancel();
    }

    /// Processes one pending event; `false` when the queue is empty and the task has ended.
    async fn step(&self, ctx: &AppContext, task: &CtxTask) -> Result<bool> {
        if let Some(owners) = &self.inner.owners
            && !match task.fence {
                Some(token) => {
                    owners
                        .holds(self.inner.store.as_ref(), ctx.id(), token)
                        .await?
                }
                None => false,
            }
        {
            // Taken over while this replica was taken for dead: the new owner runs it.
            tracing::warn!(ctx = %ctx.id(), "another replica took this context over");
            self.inner.tasks.lock().await.remove(&ctx.id());
            self.inner
                .metrics
                .queue_depth
                .remove(&[&ctx.id().to_string()]);
            task.finished.cancel();
            return Ok(false);
        }
        let queue = ctx.event_queue().await?;
        let pending: Vec<usize> = (0..queue.len())
            .filter(|&i| queue[i].status == QueueStatus::Pending)
            .collect();
        let context = ctx.id().to_string();
        #[allow(clippy::cast_precision_loss)] // a queue holds far fewer than 2^52 events
        self.inner
            .metrics
            .queue_depth
            .set(&[&context], pending.len() as f64);
        // Shards of any other operation (skipped, failed, left by an earlier owner) stop first.
        self.withdraw_others(ctx, pending.first().copied()).await?;
        let Some(&first) = pending.first() else {
            // Decide and deregister under the context's gate so that an event enqueued meanwhile
            // is not lost: the enqueuer either sees this task gone and starts another, or is
            // seen here.
            let _gate = self.inner.gates.lock(&ctx.id()).await;
            if ctx
                .event_queue()
                .await?
                .iter()
                .any(|e| e.status == QueueStatus::Pending)
            {
                return Ok(true);
            }
            ctx.unmark_active().await?;
            if let Some(owners) = &self.inner.owners {
                // Another replica may have queued an event (and marked the context active) since
                // the look above: it is not lost, this task goes on with it.
                if ctx
                    .event_queue()
                    .await?
                    .iter()
                    .any(|e| e.status == QueueStatus::Pending)
                {
                    ctx.mark_active().await?;
                    return Ok(true);
                }
                // A deployed context stays with its owner, which follows its readiness.
                if !ctx.is_marked(Registry::Deployed).await? {
                    owners.release(self.inner.store.as_ref(), ctx.id()).await?;
                }
            }
            self.inner.tasks.lock().await.remove(&ctx.id());
            task.finished.cancel();
            self.inner.metrics.queue_depth.remove(&[&context]);
            return Ok(false);
        };
        // A terminate supersedes every event queued before it.
        if let Some(&last_terminate) = pending
            .iter()
            .rev()
            .find(|&&i| queue[i].event == RsyncEvent::Terminate)
            && last_terminate != first
        {
            for &i in pending.iter().take_while(|&&i| i != last_terminate) {
                ctx.set_event_status(i, QueueStatus::Skip).await?;
                // An update that never ran leaves the context it replaces deployed.
                if queue[i].event == RsyncEvent::Update
                    && let Some(old) = &queue[i].ucid
                {
                    self.terminate_replaced(ctx, old).await?;
                }
            }
            // The skipped instantiate or update never ran: nothing of this context is deployed,
            // so the terminate is done at once (a bare terminate of a Created context is still
            // refused, as in EMCO).
            if ctx.status().await?.unwrap_or(AppContextStatus::Created) == AppContextStatus::Created
            {
                ctx.set_desired_state(AppContextStatus::Terminated).await?;
                ctx.set_pending_terminate(false).await?;
                self.inner
                    .set_state(ctx, AppContextStatus::Terminated)
                    .await?;
                ctx.set_event_status(last_terminate, QueueStatus::Done)
                    .await?;
            }
            return Ok(true);
        }
        self.process(ctx, task, first, &queue[first]).await?;
        Ok(true)
    }

    async fn process(
        &self,
        ctx: &AppContext,
        task: &CtxTask,
        index: usize,
        element: &QueueElement,
    ) -> Result<()> {
        let current = ctx.status().await?.unwrap_or(AppContextStatus::Created);
        let statuses = match rsync_transition(current, element.event) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(ctx = %ctx.id(), error = %e, "rsync event rejected");
                return ctx.set_event_status(index, QueueStatus::Error).await;
            }
        };
        let other = match &element.ucid {
            Some(u) => Some(Self::other_context(ctx, u).await?),
            None => None,
        };
        if matches!(element.event, RsyncEvent::Update | RsyncEvent::UpdateDelete) && other.is_none()
        {
            tracing::warn!(
                ctx = %ctx.id(),
                "update event without the other context; skipped"
            );
            return ctx.set_event_status(index, QueueStatus::Error).await;
        }
        // Resuming after a restart: the status is already the running one.
        let resume = current == statuses.running && current.is_running();
        if element.event == RsyncEvent::Terminate && ctx.pending_terminate().await? {
            ctx.set_pending_terminate(false).await?;
        }
        if element.event != RsyncEvent::Read {
            ctx.set_desired_state(statuses.done).await?;
        }
        if statuses.entry != current {
            self.inner.set_state(ctx, statuses.entry).await?;
        }
        if statuses.running != statuses.entry {
            self.inner.set_state(ctx, statuses.running).await?;
        }
        tracing::info!(event = ?element.event, status = %current, resume, "rsync operation");
        let op = OpCtl::new(element.event, &self.inner.root());
        task.set_op(Some(op.clone()));
        if ctx.stop_flag().await? {
            op.abort(Abort::Stop);
        }
        let run = run::Run::new(Arc::clone(&self.inner), ctx.clone(), op.clone())
            .await
            .limited_to(element.clusters.as_deref());
        let outcome = match self.shared(ctx, index, element, &run, &op, resume).await {
            Ok(Some(failed)) => Ok(failed),
            Ok(None) => run.execute(element.event, other.as_ref(), resume).await,
            Err(e) => Err(e),
        };
        task.set_op(None);
        let failed = match outcome {
            Ok(failed) => failed,
            Err(e) => {
                tracing::warn!(ctx = %ctx.id(), error = %e, "rsync operation failed");
                if op.aborted() == Some(Abort::Shutdown) {
                    return Ok(());
                }
                true
            }
        };
        match op.aborted() {
            // Left as is: the next start resumes the event.
            Some(Abort::Shutdown) => Ok(()),
            Some(Abort::Terminate) => {
                self.inner
                    .set_state(ctx, AppContextStatus::PreTerminate)
                    .await?;
                ctx.set_event_status(index, QueueStatus::Skip).await?;
                // The cut-short update never deleted what only the replaced context has.
                if element.event == RsyncEvent::Update
                    && let Some(old) = &element.ucid
                {
                    self.terminate_replaced(ctx, old).await?;
                }
                Ok(())
            }
            Some(Abort::Stop) | None => {
                let stopped = op.aborted() == Some(Abort::Stop);
                let (status, queue) = if failed || stopped {
                    (statuses.failed, QueueStatus::Error)
                } else {
                    (statuses.done, QueueStatus::Done)
                };
                if element.event != RsyncEvent::Read {
                    self.inner.set_state(ctx, status).await?;
                }
                tracing::info!(event = ?element.event, %status, stopped, "rsync operation done");
                // Observers follow what was applied, failed or not; a restart starts them again.
                if matches!(element.event, RsyncEvent::Instantiate | RsyncEvent::Update) {
                    ctx.mark(Registry::Deployed).await?;
                }
                // Queued before the update is marked done: a crash in between runs the update
                // again at the next start (it applies nothing new) and queues this again (a
                // second UpdateDelete deletes nothing), where the other order would lose it
                // and leave the replaced context's objects on clusters no longer placed.
                if element.event == RsyncEvent::Update
                    && queue == QueueStatus::Done
                    && let Some(old) = other
                {
                    self.enqueue(
                        old.id(),
                        RsyncEvent::UpdateDelete,
                        Some(ctx.id()),
                        element.clusters.clone(),
                        None,
                    )
                    .await?;
                }
                ctx.set_event_status(index, queue).await
            }
        }
    }

    /// Terminates the context `old` that an update of `ctx` was to replace: the terminate of
    /// `ctx` came before that update finished, so `old`'s resources are still deployed.
    async fn terminate_replaced(&self, ctx: &AppContext, old: &str) -> Result<()> {
        let Some(old) = Self::other_context(ctx, old).await.found()? else {
            return Ok(());
        };
        tracing::info!(
            ctx = %ctx.id(),
            replaced = %old.id(),
            "terminate before the update finished: terminating the replaced context too"
        );
        Box::pin(self.terminate(old.id())).await
    }

    /// The other context `ucid` of an event of `ctx`, reached as `ctx` is: an update's writes
    /// to the context it replaces are fenced by the ownership of the one it runs for.
    async fn other_context(ctx: &AppContext, ucid: &str) -> Result<AppContext> {
        let id = ContextId::from_record(ucid, format_args!("the queue of context {}", ctx.id()))?;
        AppContext::load(Arc::clone(ctx.store()), id).await
    }
}

impl Inner {
    /// `ctx` with its writes fenced by this replica's ownership (see [`owner`]); as it is
    /// alone on its store, or for a context it does not own.
    fn fenced(&self, ctx: AppContext) -> AppContext {
        match self.owners.as_ref().and_then(|o| o.token(ctx.id())) {
            Some(token) => ctx.through(owner::Owners::fence(&self.store, ctx.id(), token)),
            None => ctx,
        }
    }

    /// Sets the status of `ctx` and, as EMCO's rsync keeps them equal, its
    /// `rsync/state/CurrentState`.
    async fn set_state(&self, ctx: &AppContext, status: AppContextStatus) -> Result<()> {
        ctx.set_status(status).await?;
        ctx.set_current_state(status).await?;
        self.metrics.context_state(ctx.id(), status);
        Ok(())
    }

    fn root(&self) -> CancellationToken {
        lock(&self.root).clone()
    }

    fn cluster_limit(&self, cluster: &str) -> Arc<Semaphore> {
        let mut limits = lock(&self.cluster_limits);
        Arc::clone(
            limits
                .entry(cluster.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_cluster))),
        )
    }

    fn readiness_token(&self, ctx_id: ContextId) -> CancellationToken {
        let mut tokens = lock(&self.readiness_tokens);
        let root = self.root();
        tokens
            .entry(ctx_id)
            .or_insert_with(|| root.child_token())
            .clone()
    }

    /// Whether a readiness observer of `app` on `cluster` runs here.
    fn is_followed(&self, ctx_id: ContextId, app: &str, cluster: &str) -> bool {
        lock(&self.observers)
            .get(&(ctx_id, app.to_owned(), cluster.to_owned()))
            .is_some_and(|t| !t.is_cancelled())
    }

    /// The token of a new readiness observer of `app` on `cluster`, cancelling the one it
    /// replaces; what the old one saw is forgotten, so the new one notifies its first ready.
    fn observer_token(&self, ctx_id: ContextId, app: &str, cluster: &str) -> CancellationToken {
        let token = self.readiness_token(ctx_id).child_token();
        let key = (ctx_id, app.to_owned(), cluster.to_owned());
        let old = lock(&self.observers).insert(key.clone(), token.clone());
        if let Some(old) = old {
            old.cancel();
            self.flocks.sweep(Some(cluster));
        }
        lock(&self.ready).remove(&key);
        token
    }

    /// Stops the readiness observers of a context on `clusters` and forgets what they saw.
    fn forget_readiness_on(&self, ctx_id: ContextId, clusters: &HashSet<String>) {
        self.record_forgotten(clusters.iter().map(|c| (ctx_id, Some(c.clone()))));
        let on = |c: &ContextId, cluster: &String| *c == ctx_id && clusters.contains(cluster);
        lock(&self.observers).retain(|(c, _, cluster), token| {
            if on(c, cluster) {
                token.cancel();
            }
            !on(c, cluster)
        });
        for cluster in clusters {
            self.flocks.sweep(Some(cluster));
        }
        lock(&self.ready).retain(|(c, _, cluster)| !on(c, cluster));
    }

    /// Stops the readiness observers of a context and forgets what they saw.
    fn forget_readiness(&self, ctx_id: ContextId) {
        self.record_forgotten([(ctx_id, None)]);
        if let Some(t) = lock(&self.readiness_tokens).remove(&ctx_id) {
            t.cancel();
            self.flocks.sweep(None);
        }
        lock(&self.ready).retain(|(c, _, _)| *c != ctx_id);
        lock(&self.observers).retain(|(c, _, _), _| *c != ctx_id);
    }

    /// Records `forgotten` for the pass that follows deployed contexts again, while it runs.
    fn record_forgotten(&self, forgotten: impl IntoIterator<Item = Forgotten>) {
        if let Some(during) = lock(&self.forgotten).as_mut() {
            during.extend(forgotten);
        }
    }

    /// Whether the readiness of context `ctx_id` on `cluster` was forgotten since the pass that
    /// follows deployed contexts again started.
    fn was_forgotten(&self, ctx_id: ContextId, cluster: &str) -> bool {
        lock(&self.forgotten).as_ref().is_some_and(|f| {
            f.contains(&(ctx_id, None)) || f.contains(&(ctx_id, Some(cluster.to_owned())))
        })
    }

    fn is_ready(&self, ctx_id: ContextId, app: &str, cluster: &str) -> bool {
        lock(&self.ready).contains(&(ctx_id, app.to_owned(), cluster.to_owned()))
    }

    /// Records that some resource of `app` on `cluster` is no longer ready.
    fn mark_not_ready(&self, ctx_id: ContextId, app: &str, cluster: &str) {
        lock(&self.ready).remove(&(ctx_id, app.to_owned(), cluster.to_owned()));
    }

    /// Records that every resource of `app` on `cluster` is ready, notifying subscribers when it
    /// was not (each transition to ready notifies once).
    fn mark_ready(&self, ctx_id: ContextId, app: &str, cluster: &str) {
        let new = lock(&self.ready).insert((ctx_id, app.to_owned(), cluster.to_owned()));
        if new {
            // Nobody listening is fine.
            let _ = self.ready_tx.send(ReadyNotification {
                ctx_id,
                app: app.to_owned(),
                cluster: cluster.to_owned(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_the_cap_with_jitter() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            max_retries: Some(3),
        };
        for _ in 0..50 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            let d20 = b.delay(20);
            assert!(d20 >= Duration::from_millis(500) && d20 <= Duration::from_secs(1));
        }
        assert!(b.allows(3) && !b.allows(4));
        assert!(Backoff::default().allows(u32::MAX));
    }

    #[test]
    fn abort_keeps_the_first_reason() {
        let root = CancellationToken::new();
        let op = OpCtl::new(RsyncEvent::Instantiate, &root);
        assert_eq!(op.aborted(), None);
        op.abort(Abort::Terminate);
        op.abort(Abort::Stop);
        assert_eq!(op.aborted(), Some(Abort::Terminate));
        let op = OpCtl::new(RsyncEvent::Instantiate, &root);
        root.cancel();
        assert_eq!(op.aborted(), Some(Abort::Shutdown));
    }

    #[tokio::test]
    async fn builder_requires_store_and_resolver() {
        assert!(Rsync::builder().build().is_err());
        let r = Rsync::builder()
            .store(Arc::new(emco_store::InMemoryAppContextStore::new()))
            .build();
        assert!(r.is_err());
    }
}
