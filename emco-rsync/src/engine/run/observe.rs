//! Readiness: waiting for resources to be ready and following them once deployed, through the
//! connector's readiness source when it has one, else by polling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use emco_appcontext::context::Registry;
use emco_core::lifecycle::{ClusterReadiness, RsyncStatus};
use emco_core::{ErrorKind, Result};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::connector::{
    Connector, Door, Doorbell, Observation, ReadinessSource, Resource, ResourceId, Scope,
    WatchHealth, Watched,
};
use crate::engine::Abort;
use crate::engine::liveness::Contact;
use crate::engine::status::ContextStatusExt;
use crate::readiness::{Readiness, readiness};

use super::drift::Keeper;
use super::{Run, failures};

/// How a wait for readiness ended.
pub(super) enum Waited {
    Ready,
    /// Some resources failed for good or were not ready in time: (name, why).
    Failed(Vec<(String, String)>),
    /// The operation was cut short.
    Cut,
}

/// How often an observer whose watches are all set up looks again without being woken (the
/// watches wake it on every change; this only bounds the effect of a lost wake-up).
pub(super) const RESYNC: Duration = Duration::from_secs(30);

/// How long an observer woken by a change waits for the rest of a burst before it looks.
pub(super) const COALESCE: Duration = Duration::from_millis(50);

/// The entry of one resource in a cluster's collected status: `{"present", "ready", "reason"?}`.
pub(super) fn entry(observation: &Observation) -> Value {
    match observation {
        Observation::Present(obj) => seen_entry(&readiness(obj)),
        Observation::Absent => json!({"present": false, "ready": false}),
        Observation::Unknown(why) => not_known_entry(why, false),
    }
}

pub(super) fn watched_entry(watched: &Watched) -> Value {
    match watched {
        Watched::Seen(r) => seen_entry(r),
        Watched::Absent => json!({"present": false, "ready": false}),
        Watched::Unknown(why) => not_known_entry(why, false),
    }
}

/// The entry of a resource whose state is not known (its watch failing, or `unseen`: not listed
/// yet): `unknown`, never read as absent. A replica taking a dead one's work over starts its
/// watches afresh, and a wave's gate there must not judge what it has not seen yet.
fn not_known_entry(why: &str, unseen: bool) -> Value {
    let mut entry = json!({"present": false, "ready": false, "unknown": true, "reason": why});
    if unseen {
        entry["unseen"] = Value::Bool(true);
    }
    entry
}

/// The entry of a present object: `failed` marks one that will never be ready.
pub(super) fn seen_entry(r: &Readiness) -> Value {
    match r {
        Readiness::NotReady(why) => json!({"present": true, "ready": false, "reason": why}),
        Readiness::Failed(why) => {
            json!({"present": true, "ready": false, "failed": true, "reason": why})
        }
        Readiness::Ready | Readiness::NotApplicable => json!({"present": true, "ready": true}),
    }
}

pub(super) fn failed_entry(e: &emco_core::Error) -> Value {
    json!({"present": false, "ready": false, "reason": e.to_string()})
}

pub(super) fn entry_is_ready(entry: &Value) -> bool {
    entry.get("ready").and_then(Value::as_bool) == Some(true)
}

/// The entry of a resource whose cluster has not answered since `since`: not ready, `unknown`,
/// with the state `last` (its entry then) as `lastState` and since when.
fn unknown_entry(last: &Value, since: SystemTime, why: &str) -> Value {
    let present = last.get("present").and_then(Value::as_bool) == Some(true);
    let state = match (present, entry_is_ready(last)) {
        (true, true) => "Ready",
        (true, false) => "NotReady",
        (false, _) => "NotPresent",
    };
    let since = emco_core::time::rfc3339(since);
    json!({
        "present": present,
        "ready": false,
        "unknown": true,
        "lastState": state,
        "since": since,
        "reason": format!("cluster has not answered since {since}: {why}"),
    })
}

/// The collected status of a cluster (`status/`):
/// `{"readyStatus": "Available"|"Retrying"|"Unknown", "resources": {"<name+Kind>": entry}}`.
pub(super) fn collected_status(
    readiness: ClusterReadiness,
    resources: Map<String, Value>,
) -> Value {
    json!({"readyStatus": readiness, "resources": Value::Object(resources)})
}

/// A digest of `doc`'s JSON text: equal documents have equal digests.
fn digest(doc: &Value) -> u64 {
    use std::hash::Hasher as _;
    struct Digest(std::collections::hash_map::DefaultHasher);
    impl std::io::Write for Digest {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut d = Digest(std::collections::hash_map::DefaultHasher::new());
    // A Value always serializes, and the writer never fails.
    drop(serde_json::to_writer(&mut d, doc));
    d.0.finish()
}

/// The worse of two connectivity findings: Retrying over Unknown over Available.
pub(super) fn worse(a: ClusterReadiness, b: ClusterReadiness) -> ClusterReadiness {
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
struct Eyes {
    scope: Scope,
    /// Each resource by its EMCO name: only its identity (a follower may live as long as the
    /// deployment: its manifest is not kept).
    rs: Vec<(String, ResourceId)>,
    watch: Option<WatchEyes>,
    /// The last entries, kept while the cluster cannot be asked.
    last: Map<String, Value>,
}

struct WatchEyes {
    watcher: Arc<dyn ReadinessSource>,
    /// Rung by the watcher when one of the keyed objects changes (by object, not by
    /// deployment-id label: an update leaves unchanged objects with the label of the context
    /// that applied them).
    bell: Arc<Doorbell>,
    /// Per resource, its id as the watches key it once its type is watched.
    keyed: Vec<Option<ResourceId>>,
    /// Per resource, why its type could not be watched (the kind is not served, ...).
    refused: Vec<Option<Value>>,
}

impl Eyes {
    /// Eyes on `rs` through `conn`; with watches, their changes ring `bell`.
    fn new(
        conn: &Arc<dyn Connector>,
        scope: Scope,
        rs: Vec<(String, ResourceId)>,
        bell: Arc<Doorbell>,
    ) -> Self {
        let watch = conn.readiness_source().map(|watcher| WatchEyes {
            bell,
            keyed: vec![None; rs.len()],
            refused: vec![None; rs.len()],
            watcher,
        });
        Self {
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

    /// The entry of every resource and what they say of the cluster's connectivity, as `run`
    /// sees them on `cluster` (the context's name of it) through `conn`.
    async fn look(
        &mut self,
        run: &Run,
        conn: &Arc<dyn Connector>,
        cluster: &str,
    ) -> (Map<String, Value>, ClusterReadiness) {
        match &mut self.watch {
            Some(w) => {
                // What changed from here on rings again.
                w.bell.answer();
                let mut entries = Map::new();
                let mut seen = ClusterReadiness::Available;
                for (i, (name, id)) in self.rs.iter().enumerate() {
                    if w.keyed[i].is_none() && w.refused[i].is_none() {
                        match w.watcher.watch_in(self.scope.namespace_for(id), id).await {
                            Ok(k) => {
                                // Before the object is read below, so no change falls between.
                                w.watcher.ring_on_change(&k, &w.bell);
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
                        let health = w.watcher.health(k);
                        let listing = matches!(health, Some(WatchHealth::Syncing) | None);
                        seen = worse(
                            seen,
                            match health {
                                Some(WatchHealth::Synced) => ClusterReadiness::Available,
                                Some(WatchHealth::Failing(_)) => ClusterReadiness::Retrying,
                                Some(WatchHealth::Syncing) | None => ClusterReadiness::Unknown,
                            },
                        );
                        let mut entry = match w.watcher.watched(k) {
                            Watched::Unknown(why) if listing => not_known_entry(&why, true),
                            watched => watched_entry(&watched),
                        };
                        if w.watcher.unverified(k) {
                            // Rare (others held its fields when first seen): read its
                            // manifest once.
                            if let Ok(Some(r)) = run.load(&self.scope.app, cluster, name).await {
                                w.watcher.verify(k, r.manifest());
                            }
                        }
                        if let Some(drift) = w.watcher.drift(k) {
                            entry["drift"] = json!(drift.fields);
                        }
                        entries.insert(name.clone(), entry);
                    }
                }
                (entries, seen)
            }
            None => {
                let ids: Vec<ResourceId> = self.rs.iter().map(|(_, id)| id.clone()).collect();
                let got = {
                    let _permits = run.permits(conn.cluster()).await;
                    conn.observe(&self.scope, &ids).await
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
}

/// What woke a readiness follower; the label of `emco_rsync_readiness_wakeups_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Woken {
    /// One of its objects changed.
    Change,
    /// A watch of its cluster synced or failed.
    Health,
    /// The cluster's contact changed (it fell silent or answers again).
    Contact,
    /// Nothing did: the tick (polling, resync, a grace or drift deadline).
    Tick,
}

impl Woken {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Change => "change",
            Self::Health => "watch",
            Self::Contact => "contact",
            Self::Tick => "tick",
        }
    }
}

/// The readiness of an app's resources on one cluster, followed as long as its deployment
/// lives: what it recorded last, and what it needs to look again. The followers of a cluster
/// share one task ([`super::follow::Flocks`]).
pub(super) struct Follower {
    run: Run,
    app: String,
    /// The context's name of the cluster (its connector's may be a logical cloud's).
    cluster: String,
    pub(super) token: CancellationToken,
    eyes: Eyes,
    /// What was recorded last, as a digest: the document itself, per (app, cluster), held
    /// ~1 KiB each (110 MiB at 10,000 x 10).
    recorded: Option<u64>,
    /// The cluster's connectivity as recorded last.
    connectivity: ClusterReadiness,
    was_ready: bool,
    keeper: Keeper,
    /// When it looks again unless woken before.
    pub(super) due: tokio::time::Instant,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("ctx", &self.run.ctx.id())
            .field("app", &self.app)
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// The span of its looks (inside its cluster's).
    pub(super) fn span(&self) -> tracing::Span {
        tracing::info_span!("follower", ctx = %self.run.ctx.id(), app = %self.app)
    }

    /// Looks at the resources once through `conn` (whose cluster's contact is `contact`, unknown
    /// `grace` after it fell silent), records what changed, and sets when to look again;
    /// false when the follower is done (its token cancelled).
    pub(super) async fn step(
        &mut self,
        conn: &Arc<dyn Connector>,
        contact: &Contact,
        grace: Duration,
    ) -> bool {
        if self.token.is_cancelled() {
            return false;
        }
        let (run, app, cluster) = (&self.run, self.app.as_str(), self.cluster.as_str());
        let (mut entries, mut seen) = self.eyes.look(run, conn, cluster).await;
        if self.token.is_cancelled() {
            return false;
        }
        let judged = self.keeper.judge(app, &self.eyes.rs, &mut entries);
        if !judged.new_drift.is_empty() {
            let group = run.group_label();
            for kind in &judged.new_drift {
                run.inner
                    .metrics
                    .drift_detected
                    .inc(&[&group, cluster, kind]);
            }
        }
        if !judged.correct.is_empty() {
            run.correct_drift(conn, app, cluster, &judged.correct).await;
        }
        // A silent cluster's watches still hold what they saw last: past the grace that is
        // no longer known.
        let unknown_from = contact.unknown_from(grace);
        if let Contact::Silent { last, why } = contact {
            seen = worse(seen, ClusterReadiness::Retrying);
            if unknown_from.is_some_and(|t| SystemTime::now() >= t) {
                for entry in entries.values_mut() {
                    *entry = unknown_entry(entry, *last, why);
                }
            }
        }
        let ready = entries.values().all(entry_is_ready);
        let doc = collected_status(seen, entries);
        let digest = digest(&doc);
        if self.recorded != Some(digest) {
            match run.ctx.set_cluster_status(app, cluster, &doc).await {
                Ok(()) => {
                    self.recorded = Some(digest);
                    run.inner.metrics.readiness_records.inc(&[]);
                }
                // Recorded at the next change; readiness itself goes on.
                Err(e) => tracing::warn!(app, cluster, error = %e, "cannot record readiness"),
            }
        }
        // `Unknown` (a watch still listing) says nothing new about connectivity.
        if seen != ClusterReadiness::Unknown && seen != self.connectivity {
            match run.ctx.set_cluster_ready_status(app, cluster, seen).await {
                Ok(()) => self.connectivity = seen,
                Err(e) => {
                    tracing::warn!(app, cluster, error = %e, "cannot record connectivity")
                }
            }
        }
        if ready != self.was_ready {
            self.was_ready = ready;
            if ready {
                run.inner.mark_ready(run.ctx.id(), app, cluster);
            } else {
                run.inner.mark_not_ready(run.ctx.id(), app, cluster);
            }
        }
        let mut tick = if self.eyes.settled() {
            RESYNC
        } else {
            run.inner.poll
        };
        // Looks again when the grace ends, to turn the entries unknown.
        if let Some(left) = unknown_from.and_then(|t| t.duration_since(SystemTime::now()).ok()) {
            tick = tick.min(left);
        }
        // And when a drift correction falls due.
        if let Some(due) = judged.next {
            tick = tick.min(due);
        }
        self.due = tokio::time::Instant::now() + tick;
        true
    }
}

/// Waits for a change of `rx`: true, or false when its sender is gone; for ever without one.
pub(super) async fn changed<T>(rx: Option<&mut watch::Receiver<T>>) -> bool {
    match rx {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// Waits for something that may change what a hook's or CRD's [`Eyes::look`] sees: a ring of
/// `door`, a watch's health change, else `tick`; `None` when `token` is cancelled.
async fn wait_change(
    door: &Door,
    health: Option<&mut watch::Receiver<u64>>,
    token: &CancellationToken,
    tick: Duration,
) -> Option<()> {
    let health = async {
        if !changed(health).await {
            // The watcher is gone: only the tick is left.
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = door.rung() => {
            // Objects change in bursts: one look after the burst.
            tokio::select! {
                () = tokio::time::sleep(COALESCE) => {}
                () = token.cancelled() => return None,
            }
            drop(door.take_rung());
        }
        () = health => {}
        () = tokio::time::sleep(tick) => {}
        () = token.cancelled() => {}
    }
    (!token.is_cancelled()).then_some(())
}

impl Run {
    /// Waits until every resource is ready (CRDs established, hooks complete), at most the
    /// hook timeout; a resource that failed for good (a failed Job) ends the wait at once.
    pub(super) async fn wait_ready(
        &self,
        conn: &Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        resources: &[Resource],
        token: &CancellationToken,
    ) -> Waited {
        super::give_back_start_slot();
        let rs = resources
            .iter()
            .map(|r| (r.id().emco_name(), r.id().clone()))
            .collect();
        let timeout = self.inner.hook_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let door = Door::new();
        let mut eyes = Eyes::new(conn, self.scope(app), rs, door.bell(0));
        let mut health = conn.readiness_source().map(|w| w.health_changes());
        loop {
            let (entries, _) = eyes.look(self, conn, cluster).await;
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
            let tick = self.inner.poll.min(left);
            if wait_change(&door, health.as_mut(), token, tick)
                .await
                .is_none()
            {
                return Waited::Cut;
            }
            if token == &self.op.token && self.ctx.stop_flag().await.unwrap_or(false) {
                self.op.abort(Abort::Stop);
                return Waited::Cut;
            }
        }
    }

    /// Marks the resources a wait found failed as failed, saying why.
    pub(super) async fn fail_waited(
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
    /// the cluster's `readystatus/` when the observed connectivity changed, and publishes every
    /// transition to ready (readyNotify). `resumed` as for [`Run::follow`].
    pub(super) fn watch_readiness(
        &self,
        conn: Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        rs: Vec<(String, ResourceId)>,
        resumed: bool,
    ) {
        let run = self.clone();
        let (app, cluster) = (app.to_owned(), cluster.to_owned());
        let token = self.inner.observer_token(self.ctx.id(), &app, &cluster);
        tokio::spawn(async move {
            // As the deploy left it: Available after an apply, Unknown when a resume applied
            // nothing.
            let connectivity = run
                .ctx
                .cluster_ready_status(&app, &cluster)
                .await
                .unwrap_or(ClusterReadiness::Unknown);
            let applied = if resumed { rs.len() } else { 0 };
            let keeper = Keeper::new(run.drift_policy().await).applied_before(applied);
            let inner = Arc::clone(&run.inner);
            let on = cluster.clone();
            inner.flocks.add(&inner, &on, &conn, |bell| Follower {
                eyes: Eyes::new(&conn, run.scope(&app), rs, bell),
                run,
                app,
                cluster,
                token,
                recorded: None,
                connectivity,
                was_ready: false,
                keeper,
                due: tokio::time::Instant::now(),
            });
        });
    }

    /// Starts following the readiness of the resources `names` of `app` on `cluster`; those in
    /// `parsed` are not read and parsed again. `resumed`: started again after a restart, for
    /// objects applied before (one missing at the first look was deleted meanwhile).
    pub(super) async fn follow(
        &self,
        conn: Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        names: &[String],
        mut parsed: HashMap<String, Resource>,
        resumed: bool,
    ) -> Result<()> {
        let mut all = Vec::new();
        for n in names {
            let r = match parsed.remove(n) {
                Some(r) => Some(r),
                None => self.load(app, cluster, n).await?,
            };
            if let Some(r) = r {
                all.push((n.clone(), r.id().clone()));
            }
        }
        self.watch_readiness(conn, app, cluster, all, resumed);
        Ok(())
    }

    /// After a restart, or a shared operation: follows the readiness of every app on every
    /// cluster where all of its resources were applied, as the deploy that applied them did,
    /// unless it is followed here already.
    pub(in crate::engine) async fn follow_deployed(&self) -> Result<()> {
        let recorded = self.ctx.resource_statuses_listed().await?;
        for app in self.ordered_apps().await? {
            for cluster in self.clusters_of(&app).await? {
                if self.inner.was_forgotten(self.ctx.id(), &cluster)
                    || self.inner.is_followed(self.ctx.id(), &app, &cluster)
                {
                    continue;
                }
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
                    // Looked at again: resolving the cluster may have taken a while.
                    Ok(_) if self.inner.was_forgotten(self.ctx.id(), &cluster) => {}
                    Ok(conn) => {
                        self.follow(conn, &app, &cluster, &every, HashMap::new(), true)
                            .await?;
                    }
                    Err(e) => tracing::warn!(app, cluster, error = %e, "cannot follow readiness"),
                }
            }
        }
        Ok(())
    }

    /// Stops following the readiness of this context (on the clusters the operation is limited
    /// to): it is being removed or replaced there.
    pub(in crate::engine) async fn forget_readiness(&self) -> Result<()> {
        match &self.only {
            Some(only) => {
                self.inner.forget_readiness_on(self.ctx.id(), only);
                Ok(())
            }
            None => {
                self.inner.forget_readiness(self.ctx.id());
                self.ctx.unmark(Registry::Deployed).await.map(drop)
            }
        }
    }

    /// What `cluster` reports now of the resources `names` of `app` (`None`: absent), read
    /// with the credentials this context reaches it with.
    pub(in crate::engine) async fn live(
        &self,
        app: &str,
        cluster: &str,
        names: &[String],
    ) -> Result<Vec<Option<Value>>> {
        let conn = self
            .inner
            .resolver
            .connector_for(cluster, &self.meta)
            .await?;
        let scope = self.scope(app);
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            out.push(match self.load(app, cluster, n).await? {
                Some(r) => conn.get(&scope, r.id()).await?,
                None => None,
            });
        }
        Ok(out)
    }

    /// Whether `cluster` answers now with the credentials of this context, within `timeout`.
    pub(in crate::engine) async fn probe(&self, cluster: &str, timeout: Duration) -> Result<()> {
        let conn = self
            .inner
            .resolver
            .connector_for(cluster, &self.meta)
            .await?;
        tokio::time::timeout(timeout, conn.health())
            .await
            .map_err(|_| {
                emco_core::Error::unavailable(format!(
                    "cluster {cluster} did not answer within {timeout:?}"
                ))
            })?
    }

    /// Reads every resource back and stores each cluster's collected status:
    /// `{"readyStatus": "Available"|"Retrying"|"Unknown", "resources": {"<name+Kind>": {"present", "ready", "reason"?}}}`.
    pub(super) async fn read_all(&self) -> Result<()> {
        for app in self.ordered_apps().await? {
            let scope = self.scope(&app);
            for cluster in self.clusters_of(&app).await? {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_collected_statuses_digest_alike_and_changes_do_not() {
        let doc = |ready: ClusterReadiness, state: &str| {
            let mut m = Map::new();
            m.insert(
                "web".into(),
                json!({"ready": state == "ready", "state": state}),
            );
            collected_status(ready, m)
        };
        let a = doc(ClusterReadiness::Available, "ready");
        assert_eq!(digest(&a), digest(&a.clone()));
        assert_eq!(
            digest(&a),
            digest(&doc(ClusterReadiness::Available, "ready"))
        );
        assert_ne!(
            digest(&a),
            digest(&doc(ClusterReadiness::Available, "progressing"))
        );
        assert_ne!(
            digest(&a),
            digest(&doc(ClusterReadiness::Retrying, "ready"))
        );
    }
}
