//! One operation (instantiate, terminate, update, update-delete, read) of one context: apps in
//! order after their dependencies, one worker per app and cluster, hook phases, retries.

mod deploy;
mod drift;
mod follow;
mod observe;
mod plan;
mod remove;
use emco_core::poison::lock;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use emco_appcontext::AppContext;
use emco_appcontext::context::CompositeAppMeta;
use emco_core::lifecycle::{ClusterReadiness, RsyncEvent, RsyncStatus};
use emco_core::{ErrorKind, Result};
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::connector::{Batch, BatchError, Connector, Propagation, Resource, Scope, Warnings};
use crate::engine::status::ContextStatusExt;
use crate::engine::{Abort, Inner, OpCtl};

pub(super) use follow::Flocks;

tokio::task_local! {
    /// The start slot of the cluster worker this task runs ([`Run::spawn_worker`]).
    static START_SLOT: RefCell<Option<OwnedSemaphorePermit>>;
}

/// Start slots of an app's cluster workers per permit of the global limit.
const STARTS_PER_PERMIT: usize = 2;

/// Gives the start slot of the cluster worker running in this task back: it is about to wait
/// (a backoff, hooks); nothing outside a worker or the second time.
fn give_back_start_slot() {
    drop(START_SLOT.try_with(|slot| slot.borrow_mut().take()));
}

/// Apply or delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Apply,
    Delete,
}

/// A request abandoned because this replica's lease ran out: retried once it is back, by this
/// replica if it still owns the context.
fn lapsed() -> BatchError {
    BatchError::at(
        0,
        emco_core::Error::unavailable(
            "this replica's lease ran out before the cluster answered (the store did not take \
             its heartbeat)",
        ),
    )
}

/// The (name, reason) of the entries `pick` selects.
fn failures(entries: &Map<String, Value>, pick: impl Fn(&Value) -> bool) -> Vec<(String, String)> {
    entries
        .iter()
        .filter(|(_, e)| pick(e))
        .map(|(n, e)| {
            let why = e
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("not ready");
            (n.clone(), why.to_owned())
        })
        .collect()
}

/// The result of one phase on one cluster.
#[derive(Debug, Default)]
struct Phase {
    /// Resources applied or deleted.
    done: Vec<Resource>,
    /// Some resource failed.
    failed: bool,
    /// The operation was cut short; these resources were not finished.
    aborted: Option<Vec<String>>,
}

/// One operation on one context, shared by its workers: each worker and readiness follower
/// holds a clone, so a clone is one pointer (a follower lives as long as its deployment, and
/// the state inline with its metadata's strings was ~0.6 KiB of each).
#[derive(Debug, Clone)]
pub(super) struct Run(Arc<RunState>);

impl std::ops::Deref for Run {
    type Target = RunState;

    fn deref(&self) -> &RunState {
        &self.0
    }
}

/// What a [`Run`] shares.
#[derive(Debug, Clone)]
pub(super) struct RunState {
    inner: Arc<Inner>,
    ctx: AppContext,
    op: OpCtl,
    namespace: Option<String>,
    /// The context's metadata, for resolving per-logical-cloud credentials.
    meta: CompositeAppMeta,
    /// When resuming: the resource statuses recorded before the restart, read in one listing.
    recorded: Arc<HashMap<(String, String, String), RsyncStatus>>,
    /// The connectors resolved so far, by cluster: the apps of a context on one cluster share
    /// the first one's (resolving reads and unseals the cluster's credentials from the store).
    connectors: Arc<Mutex<HashMap<String, Arc<dyn Connector>>>>,
    /// The clusters the operation is limited to (a wave of a rollout); `None` for all.
    only: Option<Arc<HashSet<String>>>,
    /// The context's drift policy, read once ([`Run::drift_policy`]).
    drift: Arc<tokio::sync::OnceCell<Option<Arc<emco_core::drift::DriftSpec>>>>,
}

impl Run {
    pub(super) async fn new(inner: Arc<Inner>, ctx: AppContext, op: OpCtl) -> Self {
        let meta = ctx.meta().await.unwrap_or_default();
        let namespace = Some(meta.namespace.clone()).filter(|ns| !ns.is_empty());
        Self(Arc::new(RunState {
            inner,
            ctx,
            op,
            namespace,
            meta,
            recorded: Arc::default(),
            connectors: Arc::default(),
            only: None,
            drift: Arc::default(),
        }))
    }

    /// The same operation limited to `clusters` (all when `None`).
    pub(super) fn limited_to(mut self, clusters: Option<&[String]>) -> Self {
        Arc::make_mut(&mut self.0).only = clusters.map(|c| Arc::new(c.iter().cloned().collect()));
        self
    }

    /// The clusters of `app` this operation acts on.
    async fn clusters_of(&self, app: &str) -> Result<Vec<String>> {
        match &self.only {
            Some(only) => {
                self.ctx
                    .clusters_among(app, only.iter().map(String::as_str))
                    .await
            }
            None => self.ctx.clusters(app).await,
        }
    }

    /// Every cluster this operation acts on, of any app, in name order.
    pub(super) async fn all_clusters(&self) -> Result<Vec<String>> {
        let mut all = std::collections::BTreeSet::new();
        for app in self.ordered_apps().await? {
            all.extend(self.clusters_of(&app).await?);
        }
        Ok(all.into_iter().collect())
    }

    /// Runs `event`; `Ok(true)` when some resource failed.
    pub(super) async fn execute(
        &self,
        event: RsyncEvent,
        other: Option<&AppContext>,
        resume: bool,
    ) -> Result<bool> {
        let mut this = self.clone();
        if resume && matches!(event, RsyncEvent::Instantiate | RsyncEvent::Update) {
            Arc::make_mut(&mut this.0).recorded =
                Arc::new(self.ctx.resource_statuses_listed().await?);
        }
        this.execute_event(event, other, resume).await
    }

    async fn execute_event(
        &self,
        event: RsyncEvent,
        other: Option<&AppContext>,
        resume: bool,
    ) -> Result<bool> {
        match event {
            RsyncEvent::Instantiate => self.deploy_all(None, resume).await,
            RsyncEvent::Update => self.deploy_all(other.cloned(), resume).await,
            RsyncEvent::Terminate => {
                self.forget_readiness().await?;
                self.remove_all(None).await
            }
            RsyncEvent::UpdateDelete => {
                self.forget_readiness().await?;
                self.remove_all(other.cloned()).await
            }
            RsyncEvent::Read => self.read_all().await.map(|()| false),
        }
    }

    fn scope(&self, app: &str) -> Scope {
        let scope = Scope::new(self.ctx.id().to_string(), app);
        match &self.namespace {
            Some(ns) => scope.with_namespace(ns.clone()),
            None => scope,
        }
    }

    async fn permits(&self, cluster: &str) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let global = Arc::clone(&self.inner.global).acquire_owned().await.ok()?;
        let local = self
            .inner
            .cluster_limit(cluster)
            .acquire_owned()
            .await
            .ok()?;
        Some((global, local))
    }

    /// Runs `request`, an apply or delete, under this replica's lease (see
    /// [`crate::engine::owner`]): once the lease allows one to start, and abandoned as
    /// `Unavailable` when it runs out before the cluster answered. `None` when the operation
    /// was cut short while waiting. Alone on its store the engine has no lease to wait for.
    async fn leased<F>(&self, request: F) -> Option<std::result::Result<Warnings, BatchError>>
    where
        F: Future<Output = std::result::Result<Warnings, BatchError>>,
    {
        let Some(owners) = &self.inner.owners else {
            return Some(request.await);
        };
        if !owners.leased(&self.op.token).await {
            return None;
        }
        tokio::pin!(request);
        // The lease is renewed while the request runs (a batch can take longer than a lease);
        // it is abandoned only when no beat renewed it in time.
        while let Some(end) = owners.running_end() {
            tokio::select! {
                r = &mut request => return Some(r),
                () = tokio::time::sleep_until(end) => {}
            }
        }
        Some(Err(lapsed()))
    }

    /// The start slots of one app's cluster workers: how many may have started and not yet
    /// ended or paused.
    fn start_slots(&self) -> Arc<Semaphore> {
        Arc::new(Semaphore::new(self.inner.global_limit * STARTS_PER_PERMIT))
    }

    /// Spawns the cluster worker `work` into `set` once one of `slots` is free; the worker gives
    /// its slot back when it ends or first pauses (a retry's backoff, a wait for hooks), so
    /// unreachable clusters never hold back the others. Starting every worker of a large fleet
    /// at once cost a few KiB per (app, cluster) of workers that only waited for a permit
    /// (231 MiB at 10,000 clusters x 10 apps).
    async fn spawn_worker<T: Send + 'static>(
        set: &mut JoinSet<T>,
        slots: &Arc<Semaphore>,
        work: impl Future<Output = T> + Send + 'static,
    ) {
        let slot = Arc::clone(slots).acquire_owned().await.ok();
        set.spawn(START_SLOT.scope(RefCell::new(slot), work));
    }

    /// Runs `work` on every cluster of `clusters` as cluster workers ([`Self::spawn_worker`]);
    /// `true` when some worker failed or erred (`what` says what erred in the log). Each
    /// worker's outcome is taken as soon as it ends: a finished task keeps its whole cell (the
    /// size of its future, a few KiB) until joined, which at 10,000 clusters x 10 apps held
    /// about 290 MiB of finished workers while the last ones started.
    async fn on_every_cluster<F, Fut>(
        &self,
        app: &str,
        clusters: Vec<String>,
        what: &str,
        work: F,
    ) -> bool
    where
        F: Fn(Self, String) -> Fut,
        Fut: Future<Output = Result<bool>> + Send + 'static,
    {
        let mut set = JoinSet::new();
        let slots = self.start_slots();
        let mut failed = false;
        let mut settle = |r: std::result::Result<Result<bool>, tokio::task::JoinError>| {
            failed |= !matches!(r, Ok(Ok(false)));
            if let Ok(Err(e)) = r {
                tracing::warn!(app, error = %e, "{what}");
            }
        };
        for c in clusters {
            let span = tracing::info_span!("cluster", cluster = %c);
            Self::spawn_worker(&mut set, &slots, work(self.clone(), c).instrument(span)).await;
            while let Some(r) = set.try_join_next() {
                settle(r);
            }
        }
        while let Some(r) = set.join_next().await {
            settle(r);
        }
        failed
    }

    /// Sleeps, or returns false when the operation is cut short (also by a stop flag written by
    /// another process, checked after each sleep). A cluster worker gives its start slot back.
    async fn pause(&self, d: Duration) -> bool {
        give_back_start_slot();
        tokio::select! {
            () = tokio::time::sleep(d) => {}
            () = self.op.token.cancelled() => return false,
        }
        if self.ctx.stop_flag().await.unwrap_or(false) {
            self.op.abort(Abort::Stop);
            return false;
        }
        true
    }

    /// Marks unfinished resources Failed when the operation was stopped (a terminate leaves them
    /// for the terminate to clean up).
    async fn abandon(&self, app: &str, cluster: &str, names: &[String]) -> Result<()> {
        if self.op.aborted() == Some(Abort::Stop) && !names.is_empty() {
            self.ctx
                .set_resource_failures(
                    app,
                    cluster,
                    names,
                    RsyncStatus::Failed,
                    "Stopped",
                    "the operation was stopped before this resource was done",
                )
                .await?;
        }
        Ok(())
    }

    /// The connector of `cluster`, retrying a resolver that is unavailable; `None` when the
    /// operation is cut short or the cluster cannot be resolved (its resources are then failed).
    async fn connector(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
    ) -> Result<Option<Arc<dyn Connector>>> {
        let known = lock(&self.connectors).get(cluster).cloned();
        if known.is_some() {
            return Ok(known);
        }
        let mut attempt = 0;
        loop {
            let e = match self.inner.resolver.connector_for(cluster, &self.meta).await {
                Ok(c) => {
                    lock(&self.connectors).insert(cluster.to_owned(), Arc::clone(&c));
                    return Ok(Some(c));
                }
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    attempt += 1;
                    if !self.inner.backoff.allows(attempt) {
                        e
                    } else if self.pause(self.inner.backoff.delay(attempt)).await {
                        continue;
                    } else {
                        self.abandon(app, cluster, names).await?;
                        return Ok(None);
                    }
                }
                Err(e) => e,
            };
            tracing::warn!(cluster, error = %e, "cluster cannot be resolved");
            self.ctx
                .set_resource_failures(
                    app,
                    cluster,
                    names,
                    RsyncStatus::Failed,
                    "ClusterUnresolved",
                    &e.to_string(),
                )
                .await?;
            return Ok(None);
        }
    }

    /// Applies or deletes `names` in order, retrying while the cluster is unreachable.
    ///
    /// The manifests are read and parsed once the worker first has its permits: at 10,000
    /// clusters nearly every worker waits for one, and each holding its parsed resources (and a
    /// batch copy of them) while it waited was most of the server's memory.
    async fn sync(
        &self,
        conn: &Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        names: &[String],
        action: Action,
    ) -> Result<Phase> {
        let mut out = Phase::default();
        if names.is_empty() {
            return Ok(out);
        }
        let (ok, ok_status) = match action {
            Action::Apply => ("applied", RsyncStatus::Applied),
            Action::Delete => ("deleted", RsyncStatus::Deleted),
        };
        // The names of the resources of `batch` not done yet, in the same order.
        let mut rest: Vec<String> = names.to_vec();
        let mut batch: Option<Batch> = None;
        let mut attempt = 0;
        let mut retrying = false;
        loop {
            let permits = tokio::select! {
                p = self.permits(cluster) => p,
                () = self.op.token.cancelled() => {
                    out.aborted = Some(rest);
                    return Ok(out);
                }
            };
            let batch = match &mut batch {
                Some(b) => b,
                None => {
                    let (valid, resources) = self.load_all(app, cluster, names, &mut out).await?;
                    rest = valid;
                    batch.insert(Batch {
                        scope: self.scope(app),
                        resources,
                    })
                }
            };
            if rest.is_empty() {
                break;
            }
            let started = std::time::Instant::now();
            let request = self.leased(async {
                match action {
                    Action::Apply => conn.apply(batch).await,
                    Action::Delete => conn
                        .delete(batch, Propagation::Background)
                        .await
                        .map(|()| Warnings::new()),
                }
            });
            let result = tokio::select! {
                // A cut-short operation starts no request.
                biased;
                () = self.op.token.cancelled() => {
                    out.aborted = Some(rest);
                    return Ok(out);
                }
                Some(r) = request => r,
            };
            drop(permits);
            let metrics = &self.inner.metrics;
            metrics
                .batch_seconds
                .observe(&[ok], started.elapsed().as_secs_f64());
            let (done, err, warnings) = match result {
                Ok(warnings) => (rest.len(), None, warnings),
                Err(e) => (e.done.min(rest.len()), Some(e.error), Warnings::new()),
            };
            let finished: Vec<Resource> = batch.resources.drain(..done).collect();
            let finished_names: Vec<String> = rest.drain(..done).collect();
            let counter = match action {
                Action::Apply => &metrics.applied,
                Action::Delete => &metrics.deleted,
            };
            for r in &finished {
                counter.inc(&[cluster, &r.id().kind]);
            }
            let reached = err
                .as_ref()
                .is_none_or(|e| e.kind() != ErrorKind::Unavailable);
            metrics
                .reachable
                .set(&[cluster], if reached { 1.0 } else { 0.0 });
            // The cluster answered: Available, recorded with what it took when it took some.
            let available = (err.is_none() && (retrying || attempt == 0))
                .then_some(ClusterReadiness::Available);
            let took_some = !finished.is_empty();
            if took_some {
                self.ctx
                    .set_statuses_and_readiness(app, cluster, &finished_names, ok_status, available)
                    .await?;
                for (i, name) in finished_names.iter().enumerate() {
                    let texts: Vec<String> = warnings
                        .iter()
                        .filter(|(at, _)| *at == i)
                        .map(|(_, w)| w.clone())
                        .collect();
                    if !texts.is_empty() {
                        tracing::warn!(cluster, app, resource = %name, warnings = ?texts, "applied with warnings");
                        self.ctx
                            .set_resource_warnings(app, cluster, name, ok_status, &texts)
                            .await?;
                    }
                }
                out.done.extend(finished);
            }
            match err {
                None => {
                    if !took_some && let Some(available) = available {
                        self.ctx
                            .set_cluster_ready_status(app, cluster, available)
                            .await?;
                    }
                    break;
                }
                Some(e) if e.kind() == ErrorKind::Unavailable => {
                    attempt += 1;
                    metrics.retries.inc(&[cluster]);
                    tracing::debug!(cluster, attempt, error = %e, "cluster unreachable, retrying");
                    if !retrying {
                        retrying = true;
                        self.ctx
                            .set_cluster_ready_status(app, cluster, ClusterReadiness::Retrying)
                            .await?;
                    }
                    if !self.inner.backoff.allows(attempt) {
                        for r in &batch.resources {
                            metrics
                                .failures
                                .inc(&[cluster, &r.id().kind, "Unreachable"]);
                        }
                        self.ctx
                            .set_resource_failures(
                                app,
                                cluster,
                                &rest,
                                RsyncStatus::Failed,
                                "Unreachable",
                                &format!("gave up after {attempt} attempts: {e}"),
                            )
                            .await?;
                        out.failed = true;
                        break;
                    }
                    // Each retry says how many tries so far and when the next is due.
                    let delay = self.inner.backoff.delay(attempt);
                    self.ctx
                        .set_resource_retrying(
                            app,
                            cluster,
                            &rest,
                            ("Unreachable", &e.to_string()),
                            attempt,
                            &emco_core::time::rfc3339(SystemTime::now() + delay),
                        )
                        .await?;
                    if !self.pause(delay).await {
                        out.aborted = Some(rest);
                        return Ok(out);
                    }
                }
                Some(e) => {
                    let name = rest.remove(0);
                    let r = batch.resources.remove(0);
                    metrics
                        .failures
                        .inc(&[cluster, &r.id().kind, e.kind().as_str()]);
                    tracing::warn!(cluster, resource = %name, error = %e, "resource not {ok}");
                    self.fail(app, cluster, &name, e.kind().as_str(), &e.to_string())
                        .await?;
                    out.failed = true;
                    attempt = 0;
                }
            }
        }
        Ok(out)
    }

    /// The parsed resources of `names` that have a valid manifest, with their names; the others
    /// are marked failed (and `out` failed).
    async fn load_all(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
        out: &mut Phase,
    ) -> Result<(Vec<String>, Vec<Resource>)> {
        let mut valid = Vec::with_capacity(names.len());
        let mut resources = Vec::with_capacity(names.len());
        for n in names {
            match self.load(app, cluster, n).await? {
                Some(r) => {
                    valid.push(n.clone());
                    resources.push(r);
                }
                None => {
                    let kind = emco_core::ResourceName::split(n).map_or("", |(_, kind)| kind);
                    self.inner
                        .metrics
                        .failures
                        .inc(&[cluster, kind, "InvalidManifest"]);
                    self.fail(
                        app,
                        cluster,
                        n,
                        "InvalidManifest",
                        "its YAML is missing or invalid",
                    )
                    .await?;
                    out.failed = true;
                }
            }
        }
        Ok((valid, resources))
    }

    /// Marks one resource failed, saying why.
    async fn fail(
        &self,
        app: &str,
        cluster: &str,
        name: &str,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        let names = [name.to_owned()];
        self.ctx
            .set_resource_failures(app, cluster, &names, RsyncStatus::Failed, reason, message)
            .await
    }

    /// The parsed resource; `None` (logged) when its YAML is missing or invalid.
    async fn load(&self, app: &str, cluster: &str, name: &str) -> Result<Option<Resource>> {
        let Some(text) = self.ctx.resource(app, cluster, name).await? else {
            tracing::warn!(app, cluster, resource = name, "resource has no manifest");
            return Ok(None);
        };
        match Resource::from_yaml(&text) {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                tracing::warn!(app, cluster, resource = name, error = %e, "bad manifest");
                Ok(None)
            }
        }
    }
}
