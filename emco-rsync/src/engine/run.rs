//! One operation (instantiate, terminate, update, update-delete, read) of one context: apps in
//! order after their dependencies, one worker per app and cluster, hook phases, retries.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use emco_appcontext::AppContext;
use emco_appcontext::context::{AppDependency, CompositeAppMeta, Registry};
use emco_core::lifecycle::{ClusterReadiness, RsyncEvent, RsyncStatus};
use emco_core::{ErrorKind, Result};
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, broadcast, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::status::ContextStatusExt;
use super::{Abort, Inner, OpCtl};
use crate::connector::{
    Batch, Connector, Observation, Propagation, Resource, ResourceId, Scope, Warnings,
};
use crate::readiness::{Readiness, readiness};
use crate::watch::{ClusterWatcher, ReadinessChange, WatchHealth, Watched};

/// The resources of one app on one cluster by phase, each list in the order it is applied.
#[derive(Debug, Default)]
struct ClusterPlan {
    crd: Vec<String>,
    pre: Vec<String>,
    main: Vec<String>,
    post: Vec<String>,
    pre_delete: Vec<String>,
    post_delete: Vec<String>,
}

impl ClusterPlan {
    /// What instantiate applies, in order.
    fn installed(&self) -> Vec<String> {
        [&self.crd, &self.pre, &self.main, &self.post]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }
}

/// Where an app is in a deploy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppState {
    Running,
    Deployed,
    Ready,
    Failed,
}

/// Apply or delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Apply,
    Delete,
}

/// How a wait for readiness ended.
enum Waited {
    Ready,
    /// Some resources failed for good or were not ready in time: (name, why).
    Failed(Vec<(String, String)>),
    /// The operation was cut short.
    Cut,
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

fn unfinished(rest: &[(String, Resource)]) -> Vec<String> {
    rest.iter().map(|(n, _)| n.clone()).collect()
}

/// One operation on one context, shared by its workers.
#[derive(Debug, Clone)]
pub(super) struct Run {
    inner: Arc<Inner>,
    ctx: AppContext,
    op: OpCtl,
    namespace: Option<String>,
    /// The context's metadata, for resolving per-logical-cloud credentials.
    meta: CompositeAppMeta,
    /// When resuming: the resource statuses recorded before the restart, read in one listing.
    recorded: Arc<HashMap<(String, String, String), RsyncStatus>>,
}

impl Run {
    pub(super) async fn new(inner: Arc<Inner>, ctx: AppContext, op: OpCtl) -> Self {
        let meta = ctx.meta().await.unwrap_or_default();
        let namespace = Some(meta.namespace.clone()).filter(|ns| !ns.is_empty());
        Self {
            inner,
            ctx,
            op,
            namespace,
            meta,
            recorded: Arc::default(),
        }
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
            this.recorded = Arc::new(self.ctx.resource_statuses_listed().await?);
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

    /// The apps in `apporder`, then any others by name.
    async fn ordered_apps(&self) -> Result<Vec<String>> {
        let mut apps = self.ctx.apps().await?;
        apps.retain(|a| a != "instruction");
        apps.sort();
        let order = self.ctx.app_order().await?.unwrap_or_default();
        let mut ordered: Vec<String> = order.into_iter().filter(|a| apps.contains(a)).collect();
        for a in apps {
            if !ordered.contains(&a) {
                ordered.push(a);
            }
        }
        Ok(ordered)
    }

    async fn plan(&self, app: &str, cluster: &str) -> Result<ClusterPlan> {
        let mut all = self.ctx.resources(app, cluster).await?;
        all.sort();
        let order = self
            .ctx
            .resource_order(app, cluster)
            .await?
            .unwrap_or_default();
        let hooks = self
            .ctx
            .hook_groups(app, cluster)
            .await?
            .unwrap_or_default();
        let present = |list: &[String]| -> Vec<String> {
            list.iter().filter(|n| all.contains(n)).cloned().collect()
        };
        let hook_names: HashSet<&String> = [
            &hooks.crd_install,
            &hooks.pre_install,
            &hooks.post_install,
            &hooks.pre_delete,
            &hooks.post_delete,
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut main: Vec<String> = Vec::new();
        for n in order.iter().chain(all.iter()) {
            if all.contains(n) && !hook_names.contains(n) && !main.contains(n) {
                main.push(n.clone());
            }
        }
        Ok(ClusterPlan {
            crd: present(&hooks.crd_install),
            pre: present(&hooks.pre_install),
            main,
            post: present(&hooks.post_install),
            pre_delete: present(&hooks.pre_delete),
            post_delete: present(&hooks.post_delete),
        })
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

    /// Sleeps, or returns false when the operation is cut short (also by a stop flag written by
    /// another process, checked after each sleep).
    async fn pause(&self, d: Duration) -> bool {
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
        let mut attempt = 0;
        loop {
            let e = match self.inner.resolver.connector_for(cluster, &self.meta).await {
                Ok(c) => return Ok(Some(c)),
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
    async fn sync(
        &self,
        conn: &Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        names: &[String],
        action: Action,
    ) -> Result<Phase> {
        let mut out = Phase::default();
        let mut rest: Vec<(String, Resource)> = Vec::new();
        for n in names {
            match self.load(app, cluster, n).await? {
                Some(r) => rest.push((n.clone(), r)),
                None => {
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
        let scope = self.scope(app);
        let (ok, ok_status) = match action {
            Action::Apply => ("applied", RsyncStatus::Applied),
            Action::Delete => ("deleted", RsyncStatus::Deleted),
        };
        let mut attempt = 0;
        let mut retrying = false;
        while !rest.is_empty() {
            let batch = Batch {
                scope: scope.clone(),
                resources: rest.iter().map(|(_, r)| r.clone()).collect(),
            };
            let result = tokio::select! {
                r = async {
                    let _permits = self.permits(cluster).await;
                    match action {
                        Action::Apply => conn.apply(&batch).await,
                        Action::Delete => conn
                            .delete(&batch, Propagation::Background)
                            .await
                            .map(|()| Warnings::new()),
                    }
                } => r,
                () = self.op.token.cancelled() => {
                    out.aborted = Some(unfinished(&rest));
                    return Ok(out);
                }
            };
            let (done, err, warnings) = match result {
                Ok(warnings) => (rest.len(), None, warnings),
                Err(e) => (e.done.min(rest.len()), Some(e.error), Warnings::new()),
            };
            let finished: Vec<(String, Resource)> = rest.drain(..done).collect();
            if !finished.is_empty() {
                let names: Vec<String> = finished.iter().map(|(n, _)| n.clone()).collect();
                self.ctx
                    .set_resource_statuses(app, cluster, &names, ok_status)
                    .await?;
                for (i, name) in names.iter().enumerate() {
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
                out.done.extend(finished.into_iter().map(|(_, r)| r));
            }
            match err {
                None => {
                    if retrying || attempt == 0 {
                        self.ctx
                            .set_cluster_ready_status(app, cluster, ClusterReadiness::Available)
                            .await?;
                    }
                    break;
                }
                Some(e) if e.kind() == ErrorKind::Unavailable => {
                    attempt += 1;
                    tracing::debug!(cluster, attempt, error = %e, "cluster unreachable, retrying");
                    if !retrying {
                        retrying = true;
                        self.ctx
                            .set_cluster_ready_status(app, cluster, ClusterReadiness::Retrying)
                            .await?;
                    }
                    if !self.inner.backoff.allows(attempt) {
                        let names: Vec<String> = unfinished(&rest);
                        self.ctx
                            .set_resource_failures(
                                app,
                                cluster,
                                &names,
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
                            &unfinished(&rest),
                            ("Unreachable", &e.to_string()),
                            attempt,
                            &emco_core::time::rfc3339(SystemTime::now() + delay),
                        )
                        .await?;
                    if !self.pause(delay).await {
                        out.aborted = Some(unfinished(&rest));
                        return Ok(out);
                    }
                }
                Some(e) => {
                    let (name, _) = rest.remove(0);
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

    /// Waits until every resource is ready (CRDs established, hooks complete), at most the
    /// hook timeout; a resource that failed for good (a failed Job) ends the wait at once.
    async fn wait_ready(
        &self,
        conn: &Arc<dyn Connector>,
        scope: &Scope,
        resources: &[Resource],
        token: &CancellationToken,
    ) -> Waited {
        let rs: Vec<(String, Resource)> = resources
            .iter()
            .map(|r| (r.id().emco_name(), r.clone()))
            .collect();
        let timeout = self.inner.hook_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut eyes = Eyes::new(self, conn, scope.clone(), rs);
        loop {
            let (entries, _) = eyes.look().await;
            if entries.values().all(entry_is_ready) {
                return Waited::Ready;
            }
            let failed = failures(&entries, |e| e.get("failed") == Some(&Value::Bool(true)));
            if !failed.is_empty() {
                return Waited::Failed(failed);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                let late = failures(&entries, |e| !entry_is_ready(e));
                let late = late
                    .into_iter()
                    .map(|(n, why)| (n, format!("not ready after {timeout:?}: {why}")))
                    .collect();
                return Waited::Failed(late);
            }
            if !eyes.wait_change(token, self.inner.poll.min(left)).await {
                return Waited::Cut;
            }
            if token == &self.op.token && self.ctx.stop_flag().await.unwrap_or(false) {
                self.op.abort(Abort::Stop);
                return Waited::Cut;
            }
        }
    }

    /// Marks the resources a wait found failed as failed, saying why.
    async fn fail_waited(
        &self,
        app: &str,
        cluster: &str,
        which: &[(String, String)],
    ) -> Result<()> {
        for (name, why) in which {
            tracing::warn!(app, cluster, resource = %name, reason = %why, "hook or CRD failed");
            self.fail(app, cluster, name, "NotReady", why).await?;
        }
        Ok(())
    }

    /// Follows the readiness of an app's resources on a cluster in the background until the
    /// context is terminated or updated away, or the app is deployed again on the cluster:
    /// records each change of what it sees in the cluster's collected status (`status/`, the
    /// shape the Read event writes) so that status queries read readiness from the AppContext,
    /// and publishes every transition to ready (readyNotify).
    fn watch_readiness(
        &self,
        conn: Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        rs: Vec<(String, Resource)>,
    ) {
        let run = self.clone();
        let (app, cluster) = (app.to_owned(), cluster.to_owned());
        let token = self.inner.observer_token(self.ctx.id(), &app, &cluster);
        tokio::spawn(async move {
            run.observe_ready(&conn, &app, &cluster, rs, &token).await;
        });
    }

    /// Follows `rs` until `token` is cancelled, writing the collected status of the cluster
    /// whenever it changed (one write per change, covering all resources of the app on the
    /// cluster), the cluster's `readystatus/` when the observed connectivity changed, and
    /// marking the app ready or not ready on the cluster at each transition.
    async fn observe_ready(
        &self,
        conn: &Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        rs: Vec<(String, Resource)>,
        token: &CancellationToken,
    ) {
        let ctx_id = self.ctx.id();
        let mut eyes = Eyes::new(self, conn, self.scope(app), rs);
        let mut recorded: Option<Value> = None;
        // As the deploy left it: Available after an apply, Unknown when a resume applied nothing.
        let mut connectivity = self
            .ctx
            .cluster_ready_status(app, cluster)
            .await
            .unwrap_or(ClusterReadiness::Unknown);
        let mut was_ready = false;
        loop {
            let (entries, seen) = eyes.look().await;
            if token.is_cancelled() {
                return;
            }
            let ready = entries.values().all(entry_is_ready);
            let doc = collected_status(seen, entries);
            if recorded.as_ref() != Some(&doc) {
                match self.ctx.set_cluster_status(app, cluster, &doc).await {
                    Ok(()) => recorded = Some(doc),
                    // Recorded at the next change; readiness itself goes on.
                    Err(e) => tracing::warn!(app, cluster, error = %e, "cannot record readiness"),
                }
            }
            // `Unknown` (a watch still listing) says nothing new about connectivity.
            if seen != ClusterReadiness::Unknown && seen != connectivity {
                match self.ctx.set_cluster_ready_status(app, cluster, seen).await {
                    Ok(()) => connectivity = seen,
                    Err(e) => {
                        tracing::warn!(app, cluster, error = %e, "cannot record connectivity")
                    }
                }
            }
            if ready != was_ready {
                was_ready = ready;
                if ready {
                    self.inner.mark_ready(ctx_id, app, cluster);
                } else {
                    self.inner.mark_not_ready(ctx_id, app, cluster);
                }
            }
            let tick = if eyes.settled() {
                RESYNC
            } else {
                self.inner.poll
            };
            if !eyes.wait_change(token, tick).await {
                return;
            }
        }
    }

    /// Records in the collected status of a cluster that the resources `names` are gone.
    async fn record_removed(&self, app: &str, cluster: &str, names: &[String]) -> Result<()> {
        let mut doc = self
            .ctx
            .cluster_status(app, cluster)
            .await?
            .filter(Value::is_object)
            .unwrap_or_else(|| collected_status(ClusterReadiness::Available, Map::new()));
        if !doc.get("resources").is_some_and(Value::is_object) {
            doc["resources"] = Value::Object(Map::new());
        }
        if let Some(resources) = doc.get_mut("resources").and_then(Value::as_object_mut) {
            for n in names {
                resources.insert(n.clone(), json!({"present": false, "ready": false}));
            }
        }
        self.ctx.set_cluster_status(app, cluster, &doc).await
    }

    // ---- instantiate and update ----

    /// Deploys every app; with `old`, resources identical to the old context's applied ones are
    /// not applied again (update).
    async fn deploy_all(&self, old: Option<AppContext>, resume: bool) -> Result<bool> {
        let apps = self.ordered_apps().await?;
        let mut deps: HashMap<String, Vec<AppDependency>> = HashMap::new();
        for a in &apps {
            let d = self.ctx.app_dependencies(a).await?.unwrap_or_default();
            deps.insert(a.clone(), d);
        }
        let needs_ready: HashSet<String> = deps
            .values()
            .flatten()
            .filter(|d| d.op_status.eq_ignore_ascii_case("ready"))
            .map(|d| d.app.clone())
            .collect();
        let mut senders = HashMap::new();
        let mut receivers = HashMap::new();
        for a in &apps {
            let (tx, rx) = watch::channel(AppState::Running);
            senders.insert(a.clone(), tx);
            receivers.insert(a.clone(), rx);
        }
        let mut set = JoinSet::new();
        for a in &apps {
            let run = self.clone();
            let my_deps: Vec<(AppDependency, watch::Receiver<AppState>)> = deps[a]
                .iter()
                .filter_map(|d| receivers.get(&d.app).map(|rx| (d.clone(), rx.clone())))
                .collect();
            let tx = senders.remove(a);
            let (app, old, ready) = (a.clone(), old.clone(), needs_ready.contains(a));
            set.spawn(async move {
                let failed = run.deploy_app(&app, my_deps, old, resume, ready).await;
                let state = match &failed {
                    Ok(false) if ready => AppState::Ready,
                    Ok(false) => AppState::Deployed,
                    _ => AppState::Failed,
                };
                if let Some(tx) = tx {
                    tx.send_replace(state);
                }
                failed
            });
        }
        let mut failed = false;
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(f)) => failed |= f,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "app deployment failed");
                    failed = true;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "app worker panicked");
                    failed = true;
                }
            }
        }
        Ok(failed)
    }

    async fn deploy_app(
        &self,
        app: &str,
        deps: Vec<(AppDependency, watch::Receiver<AppState>)>,
        old: Option<AppContext>,
        resume: bool,
        then_ready: bool,
    ) -> Result<bool> {
        let clusters = self.ctx.clusters(app).await?;
        for (dep, mut rx) in deps {
            let want_ready = dep.op_status.eq_ignore_ascii_case("ready");
            let reached = loop {
                let state = *rx.borrow_and_update();
                match state {
                    AppState::Failed => break false,
                    AppState::Ready => break true,
                    AppState::Deployed if !want_ready => break true,
                    AppState::Deployed | AppState::Running => {}
                }
                tokio::select! {
                    r = rx.changed() => if r.is_err() { break false },
                    () = self.op.token.cancelled() => break false,
                }
            };
            let waited =
                reached && (dep.wait == 0 || self.pause(Duration::from_secs(dep.wait)).await);
            if !waited {
                if !self.op.token.is_cancelled() {
                    tracing::warn!(app, dependency = %dep.app, "dependency failed");
                }
                // Stopped, or the dependency failed: nothing of this app is applied.
                let stopped = self.op.aborted() == Some(Abort::Stop);
                if stopped || !self.op.token.is_cancelled() {
                    let (reason, message) = if stopped {
                        (
                            "Stopped",
                            "the operation was stopped before this app was deployed",
                        )
                    } else {
                        ("DependencyFailed", "an app this app depends on failed")
                    };
                    for c in &clusters {
                        let names = self.plan(app, c).await?.installed();
                        self.ctx
                            .set_resource_failures(
                                app,
                                c,
                                &names,
                                RsyncStatus::Failed,
                                reason,
                                message,
                            )
                            .await?;
                    }
                }
                return Ok(true);
            }
        }
        let mut set = JoinSet::new();
        for c in &clusters {
            let run = self.clone();
            let (app, c, old) = (app.to_owned(), c.clone(), old.clone());
            set.spawn(async move { run.deploy_cluster(&app, &c, old.as_ref(), resume).await });
        }
        let mut failed = false;
        while let Some(r) = set.join_next().await {
            failed |= !matches!(r, Ok(Ok(false)));
            if let Ok(Err(e)) = r {
                tracing::warn!(app, error = %e, "cluster worker failed");
            }
        }
        if failed || !then_ready {
            return Ok(failed);
        }
        // Dependents wait for this app to be ready on every cluster.
        loop {
            if clusters
                .iter()
                .all(|c| self.inner.is_ready(self.ctx.id(), app, c))
            {
                return Ok(false);
            }
            if !self.pause(self.inner.poll).await {
                return Ok(true);
            }
        }
    }

    async fn deploy_cluster(
        &self,
        app: &str,
        cluster: &str,
        old: Option<&AppContext>,
        resume: bool,
    ) -> Result<bool> {
        let plan = self.plan(app, cluster).await?;
        let every = plan.installed();
        // Until this worker reaches the cluster, its state is not known: never reached yet, or
        // last seen before a restart.
        if resume || self.ctx.cluster_ready_status(app, cluster).await? == ClusterReadiness::Unknown
        {
            self.ctx
                .set_cluster_ready_status(app, cluster, ClusterReadiness::Unknown)
                .await?;
        }
        let mut skip: HashSet<String> = HashSet::new();
        for n in &every {
            let applied = |s: Option<RsyncStatus>| s == Some(RsyncStatus::Applied);
            let key = (app.to_owned(), cluster.to_owned(), n.clone());
            if resume && applied(self.recorded.get(&key).copied()) {
                skip.insert(n.clone());
            } else if let Some(old) = old
                && applied(old.resource_status(app, cluster, n).await?)
                && old.resource(app, cluster, n).await?
                    == self.ctx.resource(app, cluster, n).await?
            {
                skip.insert(n.clone());
            }
        }
        let todo: Vec<String> = every
            .iter()
            .filter(|n| !skip.contains(*n))
            .cloned()
            .collect();
        let skipped: Vec<String> = every
            .iter()
            .filter(|n| skip.contains(*n))
            .cloned()
            .collect();
        self.ctx
            .set_resource_statuses(app, cluster, &todo, RsyncStatus::Pending)
            .await?;
        self.ctx
            .set_resource_statuses(app, cluster, &skipped, RsyncStatus::Applied)
            .await?;
        let Some(conn) = self.connector(app, cluster, &todo).await? else {
            return Ok(true);
        };
        let scope = self.scope(app);
        let phases = [
            (&plan.crd, true),
            (&plan.pre, true),
            (&plan.main, false),
            (&plan.post, false),
        ];
        let mut failed = false;
        // What was applied, parsed once, for the readiness observer.
        let mut applied: HashMap<String, Resource> = HashMap::new();
        for (i, (names, wait)) in phases.iter().enumerate() {
            let names: Vec<String> = names
                .iter()
                .filter(|n| !skip.contains(*n))
                .cloned()
                .collect();
            let later: Vec<String> = phases[i + 1..]
                .iter()
                .flat_map(|(n, _)| n.iter())
                .filter(|n| !skip.contains(*n))
                .cloned()
                .collect();
            let phase = self
                .sync(&conn, app, cluster, &names, Action::Apply)
                .await?;
            if let Some(mut unfinished) = phase.aborted {
                unfinished.extend(later);
                self.abandon(app, cluster, &unfinished).await?;
                return Ok(true);
            }
            let mut phase_failed = phase.failed;
            // CRDs must be established and pre-install hooks complete before what follows.
            if *wait && !phase.done.is_empty() {
                let token = self.op.token.clone();
                match self.wait_ready(&conn, &scope, &phase.done, &token).await {
                    Waited::Ready => {}
                    Waited::Failed(which) => {
                        self.fail_waited(app, cluster, &which).await?;
                        phase_failed = true;
                    }
                    Waited::Cut => {
                        self.abandon(app, cluster, &later).await?;
                        return Ok(true);
                    }
                }
            }
            failed |= phase_failed;
            applied.extend(phase.done.into_iter().map(|r| (r.id().emco_name(), r)));
            if *wait && phase_failed {
                self.ctx
                    .set_resource_failures(
                        app,
                        cluster,
                        &later,
                        RsyncStatus::Failed,
                        "NotApplied",
                        "a CRD or pre-install hook of the app failed on this cluster",
                    )
                    .await?;
                return Ok(true);
            }
        }
        if !failed {
            self.follow(conn, app, cluster, &every, applied).await?;
        }
        Ok(failed)
    }

    /// Starts following the readiness of the resources `names` of `app` on `cluster`; those in
    /// `parsed` are not read and parsed again.
    async fn follow(
        &self,
        conn: Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        names: &[String],
        mut parsed: HashMap<String, Resource>,
    ) -> Result<()> {
        let mut all = Vec::new();
        for n in names {
            let r = match parsed.remove(n) {
                Some(r) => Some(r),
                None => self.load(app, cluster, n).await?,
            };
            if let Some(r) = r {
                all.push((n.clone(), r));
            }
        }
        self.watch_readiness(conn, app, cluster, all);
        Ok(())
    }

    /// After a restart: follows again the readiness of every app on every cluster where all of
    /// its resources were applied, as the deploy that applied them did.
    pub(super) async fn follow_deployed(&self) -> Result<()> {
        let recorded = self.ctx.resource_statuses_listed().await?;
        for app in self.ordered_apps().await? {
            for cluster in self.ctx.clusters(&app).await? {
                let every = self.plan(&app, &cluster).await?.installed();
                let applied = every.iter().all(|n| {
                    recorded.get(&(app.clone(), cluster.clone(), n.clone()))
                        == Some(&RsyncStatus::Applied)
                });
                if !applied {
                    continue;
                }
                match self
                    .inner
                    .resolver
                    .connector_for(&cluster, &self.meta)
                    .await
                {
                    Ok(conn) => {
                        self.follow(conn, &app, &cluster, &every, HashMap::new())
                            .await?;
                    }
                    Err(e) => tracing::warn!(app, cluster, error = %e, "cannot follow readiness"),
                }
            }
        }
        Ok(())
    }

    /// Stops following the readiness of this context: it is being removed or replaced.
    async fn forget_readiness(&self) -> Result<()> {
        self.inner.forget_readiness(self.ctx.id());
        self.ctx.unmark(Registry::Deployed).await.map(drop)
    }

    // ---- terminate and update-delete ----

    /// Removes every app (terminate), or with `keep` only what `keep` no longer has
    /// (update-delete). An app is removed after the apps that depend on it.
    async fn remove_all(&self, keep: Option<AppContext>) -> Result<bool> {
        let apps = self.ordered_apps().await?;
        let mut dependents: HashMap<String, Vec<String>> = HashMap::new();
        for a in &apps {
            for d in self.ctx.app_dependencies(a).await?.unwrap_or_default() {
                dependents.entry(d.app).or_default().push(a.clone());
            }
        }
        let mut senders = HashMap::new();
        let mut receivers = HashMap::new();
        for a in &apps {
            let (tx, rx) = watch::channel(false);
            senders.insert(a.clone(), tx);
            receivers.insert(a.clone(), rx);
        }
        let mut set = JoinSet::new();
        for a in &apps {
            let waits: Vec<watch::Receiver<bool>> = dependents
                .get(a)
                .into_iter()
                .flatten()
                .filter_map(|d| receivers.get(d).cloned())
                .collect();
            let run = self.clone();
            let (app, keep, tx) = (a.clone(), keep.clone(), senders.remove(a));
            set.spawn(async move {
                for mut rx in waits {
                    // A dropped sender means the dependent finished too.
                    let _ = rx.wait_for(|done| *done).await;
                }
                let r = run.remove_app(&app, keep.as_ref()).await;
                if let Some(tx) = tx {
                    tx.send_replace(true);
                }
                r
            });
        }
        let mut failed = false;
        while let Some(r) = set.join_next().await {
            failed |= !matches!(r, Ok(Ok(false)));
            if let Ok(Err(e)) = r {
                tracing::warn!(error = %e, "app removal failed");
            }
        }
        Ok(failed)
    }

    async fn remove_app(&self, app: &str, keep: Option<&AppContext>) -> Result<bool> {
        let mut set = JoinSet::new();
        for c in self.ctx.clusters(app).await? {
            let run = self.clone();
            let (app, keep) = (app.to_owned(), keep.cloned());
            set.spawn(async move { run.remove_cluster(&app, &c, keep.as_ref()).await });
        }
        let mut failed = false;
        while let Some(r) = set.join_next().await {
            failed |= !matches!(r, Ok(Ok(false)));
            if let Ok(Err(e)) = r {
                tracing::warn!(app, error = %e, "cluster removal failed");
            }
        }
        Ok(failed)
    }

    async fn remove_cluster(
        &self,
        app: &str,
        cluster: &str,
        keep: Option<&AppContext>,
    ) -> Result<bool> {
        let plan = self.plan(app, cluster).await?;
        let mut gone = plan.installed();
        if let Some(keep) = keep {
            let kept: HashSet<String> = keep.resources(app, cluster).await?.into_iter().collect();
            gone.retain(|n| !kept.contains(n));
        }
        // Delete in the reverse of the install order.
        gone.reverse();
        let (pre, post) = if keep.is_some() {
            (Vec::new(), Vec::new())
        } else {
            (plan.pre_delete.clone(), plan.post_delete.clone())
        };
        let all: Vec<String> = pre.iter().chain(&gone).chain(&post).cloned().collect();
        if all.is_empty() {
            return Ok(false);
        }
        self.ctx
            .set_resource_statuses(app, cluster, &all, RsyncStatus::Pending)
            .await?;
        let Some(conn) = self.connector(app, cluster, &all).await? else {
            return Ok(true);
        };
        let mut failed = false;
        let steps = [(&pre, true), (&gone, false), (&post, true)];
        for (i, (names, hook)) in steps.iter().enumerate() {
            let later: Vec<String> = steps[i + 1..]
                .iter()
                .flat_map(|(n, _)| n.iter().cloned())
                .collect();
            let outcome = self.remove_step(&conn, app, cluster, names, *hook).await?;
            match outcome {
                Err(mut unfinished) => {
                    unfinished.extend(later);
                    self.abandon(app, cluster, &unfinished).await?;
                    return Ok(true);
                }
                Ok(f) => failed |= f,
            }
        }
        let mut removed = all;
        if failed {
            let mut deleted = Vec::new();
            for n in removed {
                if self.ctx.resource_status(app, cluster, &n).await? == Some(RsyncStatus::Deleted) {
                    deleted.push(n);
                }
            }
            removed = deleted;
        }
        self.record_removed(app, cluster, &removed).await?;
        Ok(failed)
    }

    /// Deletes `names`; a hook step first applies them and waits for their completion.
    /// `Err(unfinished)` when the operation is cut short.
    async fn remove_step(
        &self,
        conn: &Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        names: &[String],
        hook: bool,
    ) -> Result<std::result::Result<bool, Vec<String>>> {
        if names.is_empty() {
            return Ok(Ok(false));
        }
        let mut failed = false;
        if hook {
            let ran = self.sync(conn, app, cluster, names, Action::Apply).await?;
            if let Some(unfinished) = ran.aborted {
                return Ok(Err(unfinished));
            }
            failed |= ran.failed;
            let token = self.op.token.clone();
            match self
                .wait_ready(conn, &self.scope(app), &ran.done, &token)
                .await
            {
                Waited::Ready => {}
                // As `helm uninstall` the terminate fails, but what the hook was to clean up
                // before is deleted all the same: a terminate never leaves the app running.
                Waited::Failed(which) => {
                    self.fail_waited(app, cluster, &which).await?;
                    failed = true;
                }
                Waited::Cut => return Ok(Err(names.to_vec())),
            }
        }
        let removed = self.sync(conn, app, cluster, names, Action::Delete).await?;
        if let Some(unfinished) = removed.aborted {
            return Ok(Err(unfinished));
        }
        Ok(Ok(failed || removed.failed))
    }

    // ---- read ----

    /// Reads every resource back and stores each cluster's collected status:
    /// `{"readyStatus": "Available"|"Retrying"|"Unknown", "resources": {"<name+Kind>": {"present", "ready", "reason"?}}}`.
    async fn read_all(&self) -> Result<()> {
        for app in self.ordered_apps().await? {
            let scope = self.scope(&app);
            for cluster in self.ctx.clusters(&app).await? {
                let names = self.plan(&app, &cluster).await?.installed();
                let conn = self
                    .inner
                    .resolver
                    .connector_for(&cluster, &self.meta)
                    .await?;
                let mut rs = Vec::new();
                for n in &names {
                    if let Some(r) = self.load(&app, &cluster, n).await? {
                        rs.push((n.clone(), r));
                    }
                }
                // A read asks the cluster itself, never the watches' memory.
                let ids: Vec<ResourceId> = rs.iter().map(|(_, r)| r.id().clone()).collect();
                let (seen, resources) = match conn.observe(&scope, &ids).await {
                    Ok(observations) => {
                        let unknown = observations
                            .iter()
                            .any(|o| matches!(o, Observation::Unknown(_)));
                        let entries = rs
                            .iter()
                            .zip(&observations)
                            .map(|((n, _), o)| (n.clone(), entry(o)))
                            .collect();
                        let seen = if unknown {
                            ClusterReadiness::Unknown
                        } else {
                            ClusterReadiness::Available
                        };
                        (seen, entries)
                    }
                    Err(e) => {
                        let seen = if e.kind() == ErrorKind::Unavailable {
                            ClusterReadiness::Retrying
                        } else {
                            ClusterReadiness::Available
                        };
                        let entries = rs.iter().map(|(n, _)| (n.clone(), failed_entry(&e)));
                        (seen, entries.collect())
                    }
                };
                let status = collected_status(seen, resources);
                self.ctx.set_cluster_status(&app, &cluster, &status).await?;
            }
        }
        Ok(())
    }
}

/// How often an observer whose watches are all set up looks again without being woken (the
/// watches wake it on every change; this only bounds the effect of a lost wake-up).
const RESYNC: Duration = Duration::from_secs(30);

/// How long an observer woken by a change waits for the rest of a burst before it looks.
const COALESCE: Duration = Duration::from_millis(50);

/// The entry of one resource in a cluster's collected status: `{"present", "ready", "reason"?}`.
fn entry(observation: &Observation) -> Value {
    match observation {
        Observation::Present(obj) => seen_entry(&readiness(obj)),
        Observation::Absent => json!({"present": false, "ready": false}),
        Observation::Unknown(why) => json!({"present": false, "ready": false, "reason": why}),
    }
}

fn watched_entry(watched: &Watched) -> Value {
    match watched {
        Watched::Seen(r) => seen_entry(r),
        Watched::Absent => json!({"present": false, "ready": false}),
        Watched::Unknown(why) => json!({"present": false, "ready": false, "reason": why}),
    }
}

/// The entry of a present object: `failed` marks one that will never be ready.
fn seen_entry(r: &Readiness) -> Value {
    match r {
        Readiness::NotReady(why) => json!({"present": true, "ready": false, "reason": why}),
        Readiness::Failed(why) => {
            json!({"present": true, "ready": false, "failed": true, "reason": why})
        }
        Readiness::Ready | Readiness::NotApplicable => json!({"present": true, "ready": true}),
    }
}

fn failed_entry(e: &emco_core::Error) -> Value {
    json!({"present": false, "ready": false, "reason": e.to_string()})
}

fn entry_is_ready(entry: &Value) -> bool {
    entry.get("ready").and_then(Value::as_bool) == Some(true)
}

/// The collected status of a cluster (`status/`):
/// `{"readyStatus": "Available"|"Retrying"|"Unknown", "resources": {"<name+Kind>": entry}}`.
fn collected_status(readiness: ClusterReadiness, resources: Map<String, Value>) -> Value {
    json!({"readyStatus": readiness, "resources": Value::Object(resources)})
}

/// The worse of two connectivity findings: Retrying over Unknown over Available.
fn worse(a: ClusterReadiness, b: ClusterReadiness) -> ClusterReadiness {
    let rank = |r| match r {
        ClusterReadiness::Available => 0,
        ClusterReadiness::Unknown => 1,
        ClusterReadiness::Retrying => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// How a worker sees the resources of an app on one cluster: through the cluster's watches when
/// the connector has them (no request per object: the watches were listed once and follow
/// changes), else by asking the connector ([`Connector::observe`]) at each look.
struct Eyes<'a> {
    run: &'a Run,
    conn: &'a Arc<dyn Connector>,
    scope: Scope,
    rs: Vec<(String, Resource)>,
    watch: Option<WatchEyes>,
    /// The last entries, kept while the cluster cannot be asked.
    last: Map<String, Value>,
}

struct WatchEyes {
    watcher: Arc<ClusterWatcher>,
    changes: broadcast::Receiver<ReadinessChange>,
    health: watch::Receiver<u64>,
    /// Per resource, its id as the watches key it once its type is watched.
    keyed: Vec<Option<ResourceId>>,
    /// The same ids, to pick the changes that concern them (by object, not by deployment-id
    /// label: an update leaves unchanged objects with the label of the context that applied
    /// them).
    ids: HashSet<ResourceId>,
    /// Per resource, why its type could not be watched (the kind is not served, ...).
    refused: Vec<Option<Value>>,
}

impl<'a> Eyes<'a> {
    fn new(
        run: &'a Run,
        conn: &'a Arc<dyn Connector>,
        scope: Scope,
        rs: Vec<(String, Resource)>,
    ) -> Self {
        let watch = conn.watcher().map(|watcher| WatchEyes {
            // Subscribed before the first look, so no change falls between the two.
            changes: watcher.subscribe(),
            health: watcher.health_changes(),
            keyed: vec![None; rs.len()],
            ids: HashSet::new(),
            refused: vec![None; rs.len()],
            watcher,
        });
        Self {
            run,
            conn,
            scope,
            rs,
            watch,
            last: Map::new(),
        }
    }

    /// Whether the watches cover every resource (or refused its type), so that only their
    /// changes matter; false when polling.
    fn settled(&self) -> bool {
        self.watch.as_ref().is_some_and(|w| {
            w.keyed
                .iter()
                .zip(&w.refused)
                .all(|(k, r)| k.is_some() || r.is_some())
        })
    }

    /// The entry of every resource and what they say of the cluster's connectivity.
    async fn look(&mut self) -> (Map<String, Value>, ClusterReadiness) {
        match &mut self.watch {
            Some(w) => {
                let mut entries = Map::new();
                let mut seen = ClusterReadiness::Available;
                for (i, (name, r)) in self.rs.iter().enumerate() {
                    if w.keyed[i].is_none() && w.refused[i].is_none() {
                        match w
                            .watcher
                            .watch_in(self.scope.namespace_for(r.id()), r.id())
                            .await
                        {
                            Ok(k) => {
                                w.ids.insert(k.clone());
                                w.keyed[i] = Some(k);
                            }
                            Err(e) if e.kind() == ErrorKind::Unavailable => {
                                seen = worse(seen, ClusterReadiness::Retrying);
                                entries.insert(name.clone(), failed_entry(&e));
                                continue;
                            }
                            Err(e) => w.refused[i] = Some(failed_entry(&e)),
                        }
                    }
                    if let Some(refused) = &w.refused[i] {
                        entries.insert(name.clone(), refused.clone());
                    } else if let Some(k) = &w.keyed[i] {
                        seen = worse(
                            seen,
                            match w.watcher.health(k) {
                                Some(WatchHealth::Synced) => ClusterReadiness::Available,
                                Some(WatchHealth::Failing(_)) => ClusterReadiness::Retrying,
                                Some(WatchHealth::Syncing) | None => ClusterReadiness::Unknown,
                            },
                        );
                        entries.insert(name.clone(), watched_entry(&w.watcher.watched(k)));
                    }
                }
                (entries, seen)
            }
            None => {
                let ids: Vec<ResourceId> = self.rs.iter().map(|(_, r)| r.id().clone()).collect();
                let got = {
                    let _permits = self.run.permits(self.conn.cluster()).await;
                    self.conn.observe(&self.scope, &ids).await
                };
                let mut seen = ClusterReadiness::Available;
                match got {
                    Ok(observations) => {
                        for ((name, _), o) in self.rs.iter().zip(&observations) {
                            if matches!(o, Observation::Unknown(_)) {
                                seen = ClusterReadiness::Unknown;
                            }
                            self.last.insert(name.clone(), entry(o));
                        }
                    }
                    Err(e) => {
                        seen = if e.kind() == ErrorKind::Unavailable {
                            ClusterReadiness::Retrying
                        } else {
                            ClusterReadiness::Available
                        };
                        for (name, _) in &self.rs {
                            // What was seen before stays the best knowledge.
                            if !self.last.contains_key(name) || seen == ClusterReadiness::Available
                            {
                                self.last.insert(name.clone(), failed_entry(&e));
                            }
                        }
                    }
                }
                (self.last.clone(), seen)
            }
        }
    }

    /// Waits for something that may change what [`Eyes::look`] sees: a readiness change of this
    /// app or a watch's health change (watches), else `tick`; false when `token` is cancelled.
    async fn wait_change(&mut self, token: &CancellationToken, tick: Duration) -> bool {
        let Some(w) = &mut self.watch else {
            return tokio::select! {
                () = tokio::time::sleep(tick) => true,
                () = token.cancelled() => false,
            };
        };
        let sleep = tokio::time::sleep(tick);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                got = w.changes.recv() => match got {
                    Ok(change) if w.ids.contains(&change.id) => {
                        // Objects of one app change in bursts (a rollout, a relist): one look
                        // after the burst instead of one per change, which would cost
                        // O(resources) per change.
                        tokio::select! {
                            () = tokio::time::sleep(COALESCE) => {}
                            () = token.cancelled() => return false,
                        }
                        // The look that follows sees what the burst changed.
                        while !matches!(
                            w.changes.try_recv(),
                            Err(broadcast::error::TryRecvError::Empty
                                | broadcast::error::TryRecvError::Closed)
                        ) {}
                        return true;
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return true,
                    // The watcher is gone: only the tick is left.
                    Err(broadcast::error::RecvError::Closed) => {
                        (&mut sleep).await;
                        return !token.is_cancelled();
                    }
                },
                r = w.health.changed() => {
                    if r.is_err() {
                        (&mut sleep).await;
                    }
                    return !token.is_cancelled();
                }
                () = &mut sleep => return true,
                () = token.cancelled() => return false,
            }
        }
    }
}
