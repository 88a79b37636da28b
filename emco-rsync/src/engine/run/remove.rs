//! Terminate and the delete half of an update: apps in reverse order, hooks, what an update keeps.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tracing::Instrument;

use emco_appcontext::AppContext;
use emco_core::Result;
use emco_core::lifecycle::{ClusterReadiness, RsyncStatus};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::connector::Connector;
use crate::engine::status::ContextStatusExt;

use super::observe::{Waited, collected_status};
use super::{Action, Run};

impl Run {
    /// Records in the collected status of a cluster that the resources `names` are gone.
    pub(super) async fn record_removed(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
    ) -> Result<()> {
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

    /// Removes every app (terminate), or with `keep` only what `keep` no longer has
    /// (update-delete). An app is removed after the apps that depend on it.
    pub(super) async fn remove_all(&self, keep: Option<AppContext>) -> Result<bool> {
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
            let span = tracing::info_span!("app", app = %a);
            set.spawn(
                async move {
                    for mut rx in waits {
                        // A dropped sender means the dependent finished too.
                        let _ = rx.wait_for(|done| *done).await;
                    }
                    let r = run.remove_app(&app, keep.as_ref()).await;
                    if let Some(tx) = tx {
                        tx.send_replace(true);
                    }
                    r
                }
                .instrument(span),
            );
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

    pub(super) async fn remove_app(&self, app: &str, keep: Option<&AppContext>) -> Result<bool> {
        let clusters = self.clusters_of(app).await?;
        let work = |run: Self, c: String| {
            let (app, keep) = (app.to_owned(), keep.cloned());
            async move { run.remove_cluster(&app, &c, keep.as_ref()).await }
        };
        Ok(self
            .on_every_cluster(app, clusters, "cluster removal failed", work)
            .await)
    }

    pub(super) async fn remove_cluster(
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
    pub(super) async fn remove_step(
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
            match self.wait_ready(conn, app, cluster, &ran.done, &token).await {
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
}
