//! Instantiate and update: apps in order after their dependencies, one worker per app and
//! cluster, hook phases, then following readiness.

use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tracing::Instrument;

use emco_appcontext::AppContext;
use emco_appcontext::context::AppDependency;
use emco_core::Result;
use emco_core::lifecycle::{ClusterReadiness, RsyncStatus};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::connector::Resource;
use crate::engine::Abort;
use crate::engine::status::ContextStatusExt;

use super::observe::Waited;
use super::{Action, Run};

/// Where an app is in a deploy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AppState {
    Running,
    Deployed,
    Ready,
    Failed,
}

impl Run {
    /// Deploys every app; with `old`, resources identical to the old context's applied ones are
    /// not applied again (update).
    pub(super) async fn deploy_all(&self, old: Option<AppContext>, resume: bool) -> Result<bool> {
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
            let span = tracing::info_span!("app", app = %a);
            set.spawn(
                async move {
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
                }
                .instrument(span),
            );
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

    pub(super) async fn deploy_app(
        &self,
        app: &str,
        deps: Vec<(AppDependency, watch::Receiver<AppState>)>,
        old: Option<AppContext>,
        resume: bool,
        then_ready: bool,
    ) -> Result<bool> {
        let clusters = self.clusters_of(app).await?;
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
        let work = |run: Self, c: String| {
            let (app, old) = (app.to_owned(), old.clone());
            async move { run.deploy_cluster(&app, &c, old.as_ref(), resume).await }
        };
        let failed = self
            .on_every_cluster(app, clusters.clone(), "cluster worker failed", work)
            .await;
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

    pub(super) async fn deploy_cluster(
        &self,
        app: &str,
        cluster: &str,
        old: Option<&AppContext>,
        resume: bool,
    ) -> Result<bool> {
        let plan = self.plan(app, cluster).await?;
        let every = plan.installed();
        // Until this worker reaches the cluster, its state is not known: never reached yet, or
        // last seen before a restart. Recorded with the pending statuses, in one transaction.
        let unknown = (resume
            || self.ctx.cluster_ready_status(app, cluster).await? == ClusterReadiness::Unknown)
            .then_some(ClusterReadiness::Unknown);
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
            .set_statuses_and_readiness(app, cluster, &todo, RsyncStatus::Pending, unknown)
            .await?;
        self.ctx
            .set_resource_statuses(app, cluster, &skipped, RsyncStatus::Applied)
            .await?;
        let Some(conn) = self.connector(app, cluster, &todo).await? else {
            return Ok(true);
        };
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
                match self
                    .wait_ready(&conn, app, cluster, &phase.done, &token)
                    .await
                {
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
            self.follow(conn, app, cluster, &every, applied, false)
                .await?;
        }
        Ok(failed)
    }
}
