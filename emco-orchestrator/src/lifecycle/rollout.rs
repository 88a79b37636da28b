//! Progressive delivery: a deployment intent group with a rollout policy
//! ([`emco_core::rollout`]) is instantiated or updated wave by wave.
//!
//! The operation builds its context as usual; before the group's record names it, the rollout's
//! plan (its waves over the placed clusters) is recorded beside the context
//! ([`AppContext::put_rollout`]); once the record names it, the context is registered
//! ([`Registry::Rollout`]) and driven. A driver looks every [`TICK`]: it changes the next wave's
//! clusters through rsync (an instantiate or update limited to them), judges the wave's gate
//! from the context's statuses (and, for kinds given custom health, the live objects), bakes,
//! waits for approval, and on a failed wave pauses or rolls every changed cluster back (to the
//! revision it had; for a first instantiate, the app is removed from them) and records that in
//! the group's lifecycle record.
//!
//! Every step is recorded (compare-and-set on the rollout record) before it acts, and what it
//! asks of rsync is harmless when asked twice, so a process killed at any point resumes where
//! it was: every process drives the registered rollouts it finds (at start and every
//! [`SUPERVISE`]), a rollout whose driver died is taken over, and of two drivers of one
//! rollout only the one whose record write wins acts. A person approves, pauses, resumes or
//! aborts through the same record. While a rollout runs, update, rollback and migrate of the
//! group are refused with a 409 saying so; terminate is not (the rollout ends as Failed, and
//! the replaced context is terminated too: clusters not yet changed still run it).

use emco_core::poison::lock;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use emco_appcontext::AppContext;
use emco_appcontext::context::Registry;
use emco_appcontext::keys::Keyed;
use emco_core::lifecycle::{DigOperation, DigState};
use emco_core::rollout::{
    ClusterHealth, CustomHealth, OnFailure, PlacedCluster, RolloutPolicy, RolloutRun, RolloutState,
    UnreachablePolicy, Verdict, WaveFailure, WaveRun, judge, plan_waves,
};
use emco_core::time::{parse_rfc3339, rfc3339, unix_seconds};
use emco_core::{ContextId, DigRef, Error, ErrorKind, Found, Result};
use emco_runtime::metrics::{Counter, Family, Histogram};
use emco_store::ResourceKey;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Deployments;
use crate::keys;
use crate::state::{Record, load_state, now_rfc3339};
use crate::status::{ClusterResources, READY, ResourceState, UNKNOWN};

/// How often a driver looks at its rollout.
pub(crate) const TICK: Duration = Duration::from_millis(500);
/// How often a process looks for registered rollouts nobody drives here.
pub(crate) const SUPERVISE: Duration = Duration::from_secs(2);
/// How long a wave start waits for a cluster's answer before leaving it out
/// (`unreachable: skip`).
const PROBE: Duration = Duration::from_secs(5);

/// What the rollouts driven here did, as Prometheus metrics.
#[derive(Debug)]
pub struct RolloutMetrics {
    /// `emco_rollout_waves_started_total`.
    pub waves_started: Counter,
    /// `emco_rollout_waves_ended_total{result}`: `succeeded` or `failed`.
    pub waves_ended: Counter,
    /// `emco_rollout_duration_seconds{result}`: from its start to its end, by how it ended.
    pub duration: Histogram,
    /// `emco_rollout_rollbacks_total`: rollouts that took their changed clusters back.
    pub rollbacks: Counter,
}

/// Rollouts last minutes to hours.
const ROLLOUT_BUCKETS: &[f64] = &[
    10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0,
];

impl Default for RolloutMetrics {
    fn default() -> Self {
        Self {
            waves_started: Counter::new(
                "emco_rollout_waves_started_total",
                "Waves of rollouts started.",
                &[],
            ),
            waves_ended: Counter::new(
                "emco_rollout_waves_ended_total",
                "Waves of rollouts ended, by result (succeeded, failed).",
                &["result"],
            ),
            duration: Histogram::new(
                "emco_rollout_duration_seconds",
                "Duration of rollouts, by how they ended (Succeeded, RolledBack, Failed).",
                &["result"],
                ROLLOUT_BUCKETS,
            ),
            rollbacks: Counter::new(
                "emco_rollout_rollbacks_total",
                "Rollouts that rolled their changed clusters back.",
                &[],
            ),
        }
    }
}

impl RolloutMetrics {
    /// The families, to render.
    #[must_use]
    pub fn families(&self) -> Vec<&dyn Family> {
        vec![
            &self.waves_started,
            &self.waves_ended,
            &self.duration,
            &self.rollbacks,
        ]
    }

    /// Records that `run` ended (as its state says).
    fn ended(&self, run: &RolloutRun) {
        if let Some(s) = seconds_since(&run.started) {
            #[allow(clippy::cast_precision_loss)] // Seconds of a rollout fit an f64.
            self.duration
                .observe(&[run.state.as_str()], s.max(0) as f64);
        }
    }
}

/// The contexts a task of this process works on: the rollouts it drives, the holds it waits
/// for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Drivers(Arc<Mutex<HashSet<ContextId>>>);

impl Drivers {
    /// Claims `id` for a task of this process; false when one has it.
    pub(crate) fn claim(&self, id: ContextId) -> bool {
        lock(&self.0).insert(id)
    }

    /// Whether a task of this process has `id`.
    pub(crate) fn has(&self, id: ContextId) -> bool {
        lock(&self.0).contains(&id)
    }

    /// Gives `id` up.
    pub(crate) fn release(&self, id: ContextId) {
        lock(&self.0).remove(&id);
    }
}

/// What a driver remembers between two looks at a progressing wave: the clusters last found
/// healthy, so that a look asks only about the others (a wave of thousands is mostly healthy long
/// before it passes, and the look runs every [`TICK`]). A pass or a failure is only ever decided
/// on a look at every cluster, and one is taken at least every [`FULL_LOOK`], so that one that
/// turns bad after it was healthy fails the wave as soon as before.
#[derive(Debug, Default)]
struct Seen {
    /// The wave this is about: its index and origin (a resume keeps it).
    wave: Option<(usize, String)>,
    healthy: HashSet<String>,
    /// When every cluster was last looked at.
    full: Option<tokio::time::Instant>,
}

/// How long a progressing wave's look may leave out the clusters already seen healthy.
const FULL_LOOK: Duration = Duration::from_secs(5);

/// What a driver does after a step.
enum Step {
    /// Look again at once: the step changed something.
    Again,
    /// Look again after a tick.
    Wait,
    /// The rollout is over.
    Done,
}

/// A control a person applies to a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutControl {
    /// Let the wave that waits for approval go.
    Approve,
    /// Hold the rollout where it is.
    Pause,
    /// Go on from a pause (a failed wave is tried again).
    Resume,
    /// Roll every changed cluster back and end the rollout.
    Abort,
}

fn seconds_since(rfc: &str) -> Option<i64> {
    parse_rfc3339(rfc).map(|t| unix_seconds(SystemTime::now()) - t)
}

/// The time `d` from now, rounded up to the whole second RFC 3339 keeps: a bake never ends
/// early.
fn in_seconds(d: Duration) -> String {
    rfc3339(SystemTime::now() + d + Duration::from_millis(999))
}

impl Deployments {
    /// The rollout policy of the group at `dig`, if it has one.
    pub(super) async fn rollout_policy(&self, dig: &ResourceKey) -> Result<Option<RolloutPolicy>> {
        Ok(self
            .records
            .objects
            .rollout_policies()
            .list(dig, &[])
            .await?
            .pop())
    }

    /// Records the plan of rolling `to` out in waves beside it (replacing `from`, for an
    /// update), before the group's record names it: a crash after that record finds the plan.
    ///
    /// # Errors
    /// InvalidArgument when a wave matches no placed cluster; the stores' errors.
    pub(super) async fn plan_rollout(
        &self,
        dig: &DigRef,
        policy: &RolloutPolicy,
        from: Option<ContextId>,
        to: &AppContext,
    ) -> Result<()> {
        let placed = placed_clusters(to).await?;
        let with_labels = policy.spec.waves.iter().any(|w| !w.labels.is_empty());
        let mut clusters = Vec::with_capacity(placed.len());
        for id in &placed {
            let labels = match emco_core::ClusterRef::split(id) {
                Some((provider, name)) if with_labels => self
                    .records
                    .objects
                    .cluster_labels()
                    .list(&keys::cluster(provider, name), &[])
                    .await?
                    .into_iter()
                    .map(|l| l.cluster_label)
                    .collect(),
                _ => Vec::new(),
            };
            clusters.push(PlacedCluster::new(id.clone(), labels));
        }
        let waves = plan_waves(&policy.spec, &clusters)?;
        let leaving = match from {
            Some(old) => {
                let old = AppContext::load(Arc::clone(self.records.contexts()), old).await?;
                placed_clusters(&old)
                    .await?
                    .into_iter()
                    .filter(|c| !placed.contains(c))
                    .collect()
            }
            None => Vec::new(),
        };
        let run = RolloutRun {
            dig: dig.clone(),
            from,
            to: to.id(),
            policy: policy.spec.clone(),
            state: RolloutState::Progressing,
            waves: waves
                .into_iter()
                .map(|w| WaveRun {
                    name: w.name,
                    clusters: w.clusters,
                    ..WaveRun::default()
                })
                .collect(),
            current: 0,
            leaving,
            catch_up: Vec::new(),
            reason: String::new(),
            started: now_rfc3339(),
            finished: String::new(),
        };
        to.put_rollout(&run, 0).await.map(drop)
    }

    /// Records the plan of rolling `ctx` out when the group has a rollout policy; whether it
    /// has one. `ctx` is discarded when the plan is refused.
    ///
    /// # Errors
    /// As [`Self::plan_rollout`].
    pub(super) async fn plan_if_rolled_out(
        &self,
        dig: &DigRef,
        from: Option<ContextId>,
        ctx: &AppContext,
    ) -> Result<bool> {
        let planned = async {
            let Some(policy) = self.rollout_policy(&dig.key()).await? else {
                return Ok(false);
            };
            self.plan_rollout(dig, &policy, from, ctx)
                .await
                .map(|()| true)
        };
        match planned.await {
            Ok(planned) => Ok(planned),
            Err(e) => {
                ctx.discard().await;
                Err(e)
            }
        }
    }

    /// Registers the rollout of `to` and drives it here: the hand-over of an operation that
    /// rolls out.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn start_rollout(&self, to: &AppContext) -> Result<()> {
        to.mark(Registry::Rollout).await?;
        self.drive_rollout(to.id());
        Ok(())
    }

    /// Refuses `what` while the rollout of context `id` runs.
    ///
    /// # Errors
    /// Conflict naming the rollout's wave and state.
    pub(super) async fn refuse_during_rollout(&self, id: ContextId, what: &str) -> Result<()> {
        let Some(ctx) = AppContext::load(Arc::clone(self.records.contexts()), id)
            .await
            .found()?
        else {
            return Ok(());
        };
        match ctx.rollout::<RolloutRun>().await? {
            Some((run, _)) if !run.state.is_final() => {
                let wave = run.waves.get(run.current).map_or_else(String::new, |w| {
                    format!(
                        ", wave {} of {} ({}) {}",
                        run.current + 1,
                        run.waves.len(),
                        w.name,
                        w.state
                    )
                });
                Err(Error::conflict(format!(
                    "cannot {what} while the rollout of this deployment intent group runs \
                     ({}{wave}); wait for it, or abort it",
                    run.state
                )))
            }
            _ => Ok(()),
        }
    }

    /// The latest rollout of the group at `dig` (also one that was rolled back, whose context
    /// the group no longer runs).
    ///
    /// # Errors
    /// NotFound when the group has none (never rolled out in waves since its instantiate).
    pub async fn rollout(&self, dig: &DigRef) -> Result<RolloutRun> {
        self.latest_rollout(dig).await.map(|(_, run, _)| run)
    }

    /// The context of the latest rollout of the group at `dig`, the rollout and its revision:
    /// of the contexts its record names since the last instantiate, the one whose rollout
    /// began last.
    async fn latest_rollout(&self, dig: &DigRef) -> Result<(AppContext, RolloutRun, u64)> {
        let key = dig.key();
        self.load_dig(&key).await?;
        let state = load_state(self.records.store().as_ref(), &key).await?;
        self.latest_rollout_of(&state).await?.ok_or_else(|| {
            Error::not_found(format!(
                "deployment intent group {:?} has no rollout",
                dig.dig
            ))
        })
    }

    /// [`Self::latest_rollout`] of the group whose lifecycle record is `state`.
    pub(crate) async fn latest_rollout_of(
        &self,
        state: &emco_core::lifecycle::StateInfo,
    ) -> Result<Option<(AppContext, RolloutRun, u64)>> {
        let mut latest: Option<(AppContext, RolloutRun, u64)> = None;
        let ids: BTreeSet<&str> = state.contexts_by_revision().into_values().collect();
        for id in ids {
            let Ok(id) = id.parse::<ContextId>() else {
                continue;
            };
            let Some(ctx) = AppContext::load(Arc::clone(self.records.contexts()), id)
                .await
                .found()?
            else {
                continue;
            };
            if let Some((run, revision)) = ctx.rollout::<RolloutRun>().await?
                && latest
                    .as_ref()
                    .is_none_or(|(_, l, _)| run.started >= l.started)
            {
                latest = Some((ctx, run, revision));
            }
        }
        Ok(latest)
    }

    /// Applies a person's `control` to the rollout of the group at `dig`.
    ///
    /// # Errors
    /// NotFound when it has no rollout; Conflict when the rollout is not in a state the
    /// control applies to (approve: waiting for approval; resume: paused; pause and abort: not
    /// over).
    pub async fn control_rollout(&self, dig: &DigRef, control: RolloutControl) -> Result<()> {
        let (ctx, mut run, mut revision) = self.latest_rollout(dig).await?;
        let key = dig.key();
        loop {
            let bake = run.policy.gates.bake_time()?;
            apply_control(&mut run, control, bake)?;
            match ctx.put_rollout(&run, revision).await {
                Ok(_) => {
                    tracing::info!(dig = %key, ?control, state = %run.state, "rollout control");
                    self.drive_rollout(ctx.id());
                    return Ok(());
                }
                // The driver moved it meanwhile: decide again on what it wrote.
                Err(e) if e.kind() == ErrorKind::Conflict => {
                    (run, revision) = ctx.rollout::<RolloutRun>().await?.ok_or_else(|| {
                        Error::not_found(format!(
                            "deployment intent group {:?} has no rollout",
                            dig.dig
                        ))
                    })?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Drives the rollout of context `id` in a task of its own, unless one runs here.
    pub(crate) fn drive_rollout(&self, id: ContextId) {
        if !self.drivers.claim(id) {
            return;
        }
        let me = self.clone();
        let token = self.records.shutdown_token();
        let span = tracing::info_span!(parent: None, "rollout", ctx = %id);
        tokio::spawn(
            async move {
                me.drive(id, &token).await;
                me.drivers.release(id);
            }
            .instrument(span),
        );
    }

    /// Drives the registered rollouts nobody drives here, now and every [`SUPERVISE`] until
    /// `token` is cancelled: rollouts an earlier process left, or a dead replica's.
    pub(crate) async fn supervise_rollouts(&self, token: CancellationToken) {
        loop {
            match AppContext::registered(self.records.contexts().as_ref(), Registry::Rollout).await
            {
                Ok(ids) => {
                    for id in ids {
                        self.drive_rollout(id);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot list the rollouts"),
            }
            tokio::select! {
                () = tokio::time::sleep(SUPERVISE) => {}
                () = token.cancelled() => return,
            }
        }
    }

    async fn drive(&self, id: ContextId, token: &CancellationToken) {
        let mut seen = Seen::default();
        loop {
            if token.is_cancelled() {
                return;
            }
            let wait = match self.step_rollout(id, &mut seen).await.found() {
                Ok(Some(Step::Again)) => continue,
                Ok(Some(Step::Wait)) => TICK,
                Ok(Some(Step::Done)) => {
                    self.followed.forget(id);
                    if let Err(e) = AppContext::unregister(
                        self.records.contexts().as_ref(),
                        Registry::Rollout,
                        id,
                    )
                    .await
                    {
                        tracing::warn!(error = %e, "cannot unregister a finished rollout");
                    }
                    return;
                }
                Ok(None) => {
                    // The context or the group is gone: so is the rollout.
                    drop(
                        AppContext::unregister(
                            self.records.contexts().as_ref(),
                            Registry::Rollout,
                            id,
                        )
                        .await,
                    );
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "rollout step failed; trying again");
                    TICK * 4
                }
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = token.cancelled() => return,
            }
        }
    }

    /// One look at the rollout of context `id`, and what it leads to.
    async fn step_rollout(&self, id: ContextId, seen: &mut Seen) -> Result<Step> {
        let ctx = AppContext::load(Arc::clone(self.records.contexts()), id).await?;
        let Some((mut run, revision)) = ctx.rollout::<RolloutRun>().await? else {
            return Ok(Step::Done);
        };
        if run.state.is_final() && (run.state != RolloutState::Succeeded || run.catch_up.is_empty())
        {
            return Ok(Step::Done);
        }
        let dig = run.dig.key();
        if run.reason.starts_with("rolling back") {
            return self.roll_back(&ctx, run, revision, &dig).await;
        }
        let record = Record::load(self.records.store().as_ref(), &dig).await?;
        if !names_live(&record, id)? {
            if run.state == RolloutState::Succeeded {
                // Clusters left out are the group's next operation's to change now.
                run.catch_up.clear();
            } else {
                run.state = RolloutState::Failed;
                run.reason = format!(
                    "the deployment intent group went on without it ({})",
                    record.info.current_state()
                );
                run.finished = now_rfc3339();
            }
            ctx.put_rollout(&run, revision).await?;
            if run.state == RolloutState::Failed {
                self.rollout_metrics.ended(&run);
            }
            return Ok(Step::Done);
        }
        match run.state {
            RolloutState::Paused | RolloutState::WaitingForApproval => Ok(Step::Wait),
            RolloutState::Succeeded => self.catch_up(&ctx, run, revision, &dig).await,
            _ => self.step_wave(&ctx, run, revision, &dig, seen).await,
        }
    }

    /// Changes the clusters a succeeded rollout left out once they answer.
    async fn catch_up(
        &self,
        ctx: &AppContext,
        mut run: RolloutRun,
        revision: u64,
        dig: &ResourceKey,
    ) -> Result<Step> {
        let silent = self
            .records
            .rsync()
            .unanswering(ctx.id(), &run.catch_up, PROBE)
            .await?;
        let silent: HashSet<String> = silent.into_iter().map(|(c, _)| c).collect();
        let back: Vec<String> = run
            .catch_up
            .iter()
            .filter(|c| !silent.contains(*c))
            .cloned()
            .collect();
        if back.is_empty() {
            return Ok(Step::Wait);
        }
        run.catch_up.retain(|c| !back.contains(c));
        tracing::info!(%dig, clusters = ?back, "clusters left out answer again: changed now");
        // Asked before it is recorded, once per record revision and clusters: a driver that
        // dies in between (or loses the record to another) leaves the record as it was, and
        // the next look asking for the same clusters asks with the same origin, which rsync
        // has queued already; another set of clusters is another ask.
        let origin = format!("rollout catch-up at {revision}: {}", back.join(","));
        self.change(ctx.id(), run.from, back, &origin).await?;
        ctx.put_rollout(&run, revision).await?;
        Ok(Step::Again)
    }

    /// Asks rsync to change `clusters` to context `to` (from `from`, for an update), once per
    /// `origin`.
    async fn change(
        &self,
        to: ContextId,
        from: Option<ContextId>,
        clusters: Vec<String>,
        origin: &str,
    ) -> Result<()> {
        let rsync = self.records.rsync();
        match from {
            Some(from) => rsync.update_on_once(from, to, clusters, origin).await,
            None => rsync.instantiate_on_once(to, clusters, origin).await,
        }
    }

    /// The context a rollout of context `id` replaces while some clusters still run it (the
    /// rollout has not finished, or clusters it left out wait to be changed).
    pub(super) async fn replaced_by_rollout(&self, id: ContextId) -> Result<Option<ContextId>> {
        let Some(ctx) = AppContext::load(Arc::clone(self.records.contexts()), id)
            .await
            .found()?
        else {
            return Ok(None);
        };
        Ok(ctx.rollout::<RolloutRun>().await?.and_then(|(run, _)| {
            let running = !run.state.is_final()
                || (run.state == RolloutState::Succeeded && !run.catch_up.is_empty());
            run.from.filter(|_| running)
        }))
    }

    /// The step of the current wave of a progressing rollout.
    async fn step_wave(
        &self,
        ctx: &AppContext,
        mut run: RolloutRun,
        revision: u64,
        dig: &ResourceKey,
        seen: &mut Seen,
    ) -> Result<Step> {
        let Some(wave) = run.waves.get(run.current).cloned() else {
            run.state = RolloutState::Succeeded;
            run.finished = now_rfc3339();
            ctx.put_rollout(&run, revision).await?;
            self.rollout_metrics.ended(&run);
            tracing::info!(%dig, "rollout succeeded");
            // Clusters left out are still to be changed once they answer.
            return Ok(if run.catch_up.is_empty() {
                Step::Done
            } else {
                Step::Wait
            });
        };
        let gates = run.policy.gates.clone();
        match wave.state {
            RolloutState::Pending if run.current > 0 && gates.approval && !wave.approved => {
                let w = &mut run.waves[run.current];
                w.state = RolloutState::WaitingForApproval;
                run.state = RolloutState::WaitingForApproval;
                ctx.put_rollout(&run, revision).await?;
                tracing::info!(%dig, wave = %wave.name, "rollout waits for approval");
                Ok(Step::Wait)
            }
            RolloutState::Pending | RolloutState::WaitingForApproval => {
                let left = self.deregistered(&wave.clusters).await?;
                for c in &left {
                    tracing::warn!(%dig, cluster = %c, "left out of its wave: it is no longer registered");
                }
                let mut skipped = Vec::new();
                if run.policy.unreachable == UnreachablePolicy::Skip {
                    let asked: Vec<String> = wave
                        .clusters
                        .iter()
                        .filter(|c| !left.contains(c))
                        .cloned()
                        .collect();
                    let silent = self
                        .records
                        .rsync()
                        .unanswering(ctx.id(), &asked, PROBE)
                        .await?;
                    for (c, e) in silent {
                        tracing::warn!(%dig, cluster = %c, error = %e, "left out of its wave: it does not answer");
                        skipped.push(c);
                    }
                }
                let w = &mut run.waves[run.current];
                w.state = RolloutState::Progressing;
                w.started = now_rfc3339();
                w.failures.clear();
                w.skipped = skipped;
                w.left = left;
                // Unique by the record's compare-and-set, whatever the clocks say.
                w.origin = format!("rollout wave {} at {revision}", run.current);
                let origin = w.origin.clone();
                let clusters = changed_by_wave(&run);
                // Recorded first: a driver that dies here asks at the first look of the driver
                // after it (see Progressing), and rsync queues the wave's ask once.
                ctx.put_rollout(&run, revision).await?;
                self.rollout_metrics.waves_started.inc(&[]);
                tracing::info!(%dig, wave = %wave.name, clusters = clusters.len(), "wave starts");
                if !clusters.is_empty() {
                    self.change(ctx.id(), run.from, clusters, &origin).await?;
                }
                *seen = Seen {
                    wave: Some((run.current, origin)),
                    ..Seen::default()
                };
                Ok(Step::Again)
            }
            RolloutState::Progressing => {
                let deadline = gates.progress_deadline()?;
                let late = seconds_since(&wave.started)
                    .is_some_and(|s| s >= i64::try_from(deadline.as_secs()).unwrap_or(i64::MAX));
                let this = Some((run.current, wave.origin.clone()));
                if seen.wave != this && !wave.origin.is_empty() {
                    // This driver did not start the wave: the one that did may have died
                    // between recording it and asking rsync (or be another replica's). The ask
                    // is queued once per origin, so asking again adds nothing when it was.
                    let clusters = changed_by_wave(&run);
                    if !clusters.is_empty() {
                        self.change(ctx.id(), run.from, clusters, &wave.origin)
                            .await?;
                    }
                }
                if seen.wave != this || seen.full.is_none_or(|t| t.elapsed() >= FULL_LOOK) {
                    *seen = Seen {
                        wave: this,
                        healthy: HashSet::new(),
                        full: Some(tokio::time::Instant::now()),
                    };
                }
                let judged = |health: &[(String, ClusterHealth)]| {
                    judge(health, gates.max_failures, run.policy.unreachable, late)
                };
                let custom = &gates.custom_health;
                let mut health = self.wave_health(ctx, &wave, custom, &seen.healthy).await?;
                let mut verdict = judged(&health);
                if verdict != Verdict::Wait && !seen.healthy.is_empty() {
                    // Those seen healthy before must still be so: decided on a full look.
                    health = self
                        .wave_health(ctx, &wave, custom, &HashSet::new())
                        .await?;
                    seen.healthy.clear();
                    seen.full = Some(tokio::time::Instant::now());
                    verdict = judged(&health);
                }
                seen.healthy.extend(
                    health
                        .into_iter()
                        .filter(|(_, h)| *h == ClusterHealth::Healthy)
                        .map(|(c, _)| c),
                );
                match verdict {
                    Verdict::Wait => Ok(Step::Wait),
                    Verdict::Fail(failures) => {
                        if self
                            .leave_deregistered(ctx, &mut run, revision, &failures)
                            .await?
                        {
                            return Ok(Step::Again);
                        }
                        let failures = self.explain(ctx, failures).await;
                        self.fail_wave(ctx, run, revision, dig, failures).await
                    }
                    Verdict::Pass => {
                        let bake = gates.bake_time()?;
                        let w = &mut run.waves[run.current];
                        if bake.is_zero() {
                            pass_wave(&mut run);
                        } else {
                            w.state = RolloutState::Baking;
                            w.bake_until = in_seconds(bake);
                        }
                        ctx.put_rollout(&run, revision).await?;
                        if bake.is_zero() {
                            self.rollout_metrics.waves_ended.inc(&["succeeded"]);
                        }
                        tracing::info!(%dig, wave = %wave.name, "wave ready");
                        Ok(Step::Again)
                    }
                }
            }
            RolloutState::Baking => {
                // Whatever was ready must stay so: one that turns not ready has failed.
                let health: Vec<(String, ClusterHealth)> = self
                    .wave_health(ctx, &wave, &gates.custom_health, &HashSet::new())
                    .await?
                    .into_iter()
                    .map(|(c, h)| match h {
                        ClusterHealth::Progressing(why) => (
                            c,
                            ClusterHealth::Failed(format!(
                                "not ready any more while baking: {why}"
                            )),
                        ),
                        h => (c, h),
                    })
                    .collect();
                match judge(&health, gates.max_failures, run.policy.unreachable, false) {
                    Verdict::Fail(failures) => {
                        if self
                            .leave_deregistered(ctx, &mut run, revision, &failures)
                            .await?
                        {
                            return Ok(Step::Again);
                        }
                        let failures = self.explain(ctx, failures).await;
                        self.fail_wave(ctx, run, revision, dig, failures).await
                    }
                    Verdict::Wait => Ok(Step::Wait),
                    Verdict::Pass if seconds_since(&wave.bake_until).is_some_and(|s| s >= 0) => {
                        pass_wave(&mut run);
                        ctx.put_rollout(&run, revision).await?;
                        self.rollout_metrics.waves_ended.inc(&["succeeded"]);
                        tracing::info!(%dig, wave = %wave.name, "wave baked");
                        Ok(Step::Again)
                    }
                    Verdict::Pass => Ok(Step::Wait),
                }
            }
            // A failed wave of a rollout that was resumed: tried again.
            RolloutState::Failed => {
                run.waves[run.current].state = RolloutState::Pending;
                ctx.put_rollout(&run, revision).await?;
                Ok(Step::Again)
            }
            RolloutState::Succeeded => {
                run.current += 1;
                ctx.put_rollout(&run, revision).await?;
                Ok(Step::Again)
            }
            RolloutState::Paused | RolloutState::RolledBack => Ok(Step::Wait),
        }
    }

    /// Records that the current wave failed with `failures`, then pauses or rolls back as the
    /// policy says.
    async fn fail_wave(
        &self,
        ctx: &AppContext,
        mut run: RolloutRun,
        revision: u64,
        dig: &ResourceKey,
        failures: Vec<(String, String)>,
    ) -> Result<Step> {
        let w = &mut run.waves[run.current];
        w.state = RolloutState::Failed;
        w.finished = now_rfc3339();
        w.failures = failures
            .into_iter()
            .map(|(cluster, reason)| WaveFailure { cluster, reason })
            .collect();
        let why = format!(
            "wave {} failed: {}",
            w.name,
            w.failures
                .iter()
                .map(|f| format!("{}: {}", f.cluster, f.reason))
                .collect::<Vec<_>>()
                .join("; ")
        );
        tracing::warn!(%dig, reason = %why, "rollout wave failed");
        if run.policy.on_failure == OnFailure::Rollback {
            run.reason = format!("rolling back: {why}");
        } else {
            run.state = RolloutState::Paused;
            run.reason = why;
        }
        ctx.put_rollout(&run, revision).await?;
        self.rollout_metrics.waves_ended.inc(&["failed"]);
        Ok(Step::Again)
    }

    /// Takes every changed cluster back (the rollout's reason says `rolling back`): rsync
    /// stops what it still does for `to`, the changed clusters get the replaced context again
    /// (or, for a first instantiate, lose the app), the group's record says so, and the
    /// rollout ends RolledBack. Each part is harmless when done again after a crash.
    async fn roll_back(
        &self,
        ctx: &AppContext,
        mut run: RolloutRun,
        revision: u64,
        dig: &ResourceKey,
    ) -> Result<Step> {
        let changed = run.changed();
        let rsync = self.records.rsync();
        if ctx.is_busy().await? {
            rsync.stop(ctx.id()).await?;
        }
        let record = Record::load(self.records.store().as_ref(), dig).await?;
        // Unless a crash came after this was done, or the group was terminated meanwhile.
        if names_live(&record, ctx.id())? {
            match run.from {
                Some(from) => {
                    if !changed.is_empty() {
                        rsync.rollback_on(ctx.id(), from, Some(changed)).await?;
                    }
                    self.record(dig, &record, DigOperation::Rollback, from)
                        .await?;
                }
                None => {
                    if !changed.is_empty() {
                        rsync.terminate_on(ctx.id(), changed).await?;
                    }
                    self.record(dig, &record, DigOperation::Terminate, ctx.id())
                        .await?;
                }
            }
        }
        for w in &mut run.waves {
            if matches!(
                w.state,
                RolloutState::Progressing
                    | RolloutState::Baking
                    | RolloutState::Succeeded
                    | RolloutState::Failed
            ) {
                w.state = RolloutState::RolledBack;
            }
        }
        run.state = RolloutState::RolledBack;
        run.reason = run
            .reason
            .strip_prefix("rolling back: ")
            .unwrap_or(&run.reason)
            .to_owned();
        run.finished = now_rfc3339();
        ctx.put_rollout(&run, revision).await?;
        self.rollout_metrics.rollbacks.inc(&[]);
        self.rollout_metrics.ended(&run);
        tracing::warn!(%dig, reason = %run.reason, "rollout rolled back");
        Ok(Step::Done)
    }

    /// Those of `clusters` (`provider+cluster`) that are no longer registered, in their order:
    /// one listing per provider.
    async fn deregistered(&self, clusters: &[String]) -> Result<Vec<String>> {
        let mut registered: HashMap<&str, HashSet<String>> = HashMap::new();
        let mut out = Vec::new();
        for id in clusters {
            let Some((provider, name)) = emco_core::ClusterRef::split(id) else {
                continue;
            };
            if !registered.contains_key(provider) {
                let names = match self
                    .records
                    .objects
                    .clusters()
                    .list(&keys::cluster_provider(provider), &[])
                    .await
                    .found()?
                {
                    Some(list) => list.into_iter().map(|c| c.metadata.name).collect(),
                    None => HashSet::new(),
                };
                registered.insert(provider, names);
            }
            if !registered[provider].contains(name) {
                out.push(id.clone());
            }
        }
        Ok(out)
    }

    /// Records the clusters among `failures` that are no longer registered as having left the
    /// current wave (their failure is that nobody can reach them any more, not the change);
    /// whether there were any: the wave is then judged again without them.
    async fn leave_deregistered(
        &self,
        ctx: &AppContext,
        run: &mut RolloutRun,
        revision: u64,
        failures: &[(String, String)],
    ) -> Result<bool> {
        let failed: Vec<String> = failures.iter().map(|(c, _)| c.clone()).collect();
        let gone = self.deregistered(&failed).await?;
        if gone.is_empty() {
            return Ok(false);
        }
        tracing::warn!(dig = %run.dig.key(), clusters = ?gone, "deregistered clusters leave their wave");
        run.waves[run.current].left.extend(gone);
        ctx.put_rollout(run, revision).await?;
        Ok(true)
    }

    /// How each cluster of `wave` stands, from the context's statuses (and custom health); those
    /// in `healthy` are not looked at and count as healthy.
    async fn wave_health(
        &self,
        ctx: &AppContext,
        wave: &WaveRun,
        custom: &[CustomHealth],
        healthy: &HashSet<String>,
    ) -> Result<Vec<(String, ClusterHealth)>> {
        let wanted: HashSet<&str> = wave
            .changing()
            .map(String::as_str)
            .filter(|c| !healthy.contains(*c))
            .collect();
        // Custom health reads the resources of healthy clusters too.
        let mut states = self
            .followed
            .resources_on(
                self.records.contexts(),
                ctx.id(),
                &wanted,
                !custom.is_empty(),
            )
            .await?;
        let mut out = Vec::with_capacity(wave.clusters.len());
        for c in wave.changing() {
            if !wanted.contains(c.as_str()) {
                out.push((c.clone(), ClusterHealth::Healthy));
                continue;
            }
            let resources = states.remove(c.as_str()).unwrap_or(ClusterResources {
                all_good: true,
                ..ClusterResources::default()
            });
            let mut health = cluster_health(&resources);
            if health == ClusterHealth::Healthy && !custom.is_empty() {
                health = self.custom_health(ctx, c, &resources.listed, custom).await;
            }
            out.push((c.clone(), health));
        }
        Ok(out)
    }

    /// `failures` of a wave with each cluster's first resource that is not ready named (the
    /// gate only counted them; the first [`EXPLAINED`] clusters are read in full).
    async fn explain(
        &self,
        ctx: &AppContext,
        failures: Vec<(String, String)>,
    ) -> Vec<(String, String)> {
        let wanted: HashSet<&str> = failures
            .iter()
            .take(EXPLAINED)
            .map(|(c, _)| c.as_str())
            .collect();
        let Ok(states) = self
            .followed
            .resources_on(self.records.contexts(), ctx.id(), &wanted, true)
            .await
        else {
            return failures;
        };
        failures
            .iter()
            .map(|(c, why)| {
                let detail = states
                    .get(c.as_str())
                    .and_then(|r| first_not_ready(&r.listed));
                match detail {
                    Some(d) if !why.contains(&d) => (c.clone(), format!("{why}; {d}")),
                    _ => (c.clone(), why.clone()),
                }
            })
            .collect()
    }

    /// The custom health of a cluster whose resources are all ready: each resource of a kind
    /// the policy checks, read live.
    async fn custom_health(
        &self,
        ctx: &AppContext,
        cluster: &str,
        resources: &[ResourceState],
        custom: &[CustomHealth],
    ) -> ClusterHealth {
        let mut by_app: HashMap<&str, Vec<(&ResourceState, &CustomHealth)>> = HashMap::new();
        for r in resources {
            if let Some(check) = custom
                .iter()
                .find(|h| h.applies_to(&r.api_version, &r.kind))
            {
                by_app.entry(r.app.as_str()).or_default().push((r, check));
            }
        }
        for (app, checks) in by_app {
            let names: Vec<String> = checks.iter().map(|(r, _)| r.key.clone()).collect();
            let live = match self
                .records
                .rsync()
                .live_objects(ctx.id(), app, cluster, &names)
                .await
            {
                Ok(live) => live,
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    return ClusterHealth::Unreachable(e.to_string());
                }
                Err(e) => return ClusterHealth::Progressing(e.to_string()),
            };
            for ((r, check), obj) in checks.iter().zip(live) {
                let verdict = match obj {
                    Some(obj) => check.judge(&obj),
                    None => Err("absent".to_owned()),
                };
                if let Err(why) = verdict {
                    return ClusterHealth::Progressing(format!(
                        "{app} {}/{}: {why}",
                        r.kind, r.name
                    ));
                }
            }
        }
        ClusterHealth::Healthy
    }
}

/// Whether the lifecycle record names context `id` as its deployment, Instantiated or Updated.
fn names_live(record: &Record, id: ContextId) -> Result<bool> {
    Ok(record.info.current_context_id()? == Some(id)
        && matches!(
            record.info.current_state(),
            DigState::Instantiated | DigState::Updated
        ))
}

/// The clusters the current wave of `run` changes: its own but those skipped or left out, and
/// for the last wave also those the group leaves.
fn changed_by_wave(run: &RolloutRun) -> Vec<String> {
    let mut clusters: Vec<String> = run.waves[run.current].changing().cloned().collect();
    if run.current + 1 == run.waves.len() {
        clusters.extend(run.leaving.iter().cloned());
    }
    clusters
}

/// Marks the current wave of `run` passed and moves on.
fn pass_wave(run: &mut RolloutRun) {
    let w = &mut run.waves[run.current];
    w.state = RolloutState::Succeeded;
    w.finished = now_rfc3339();
    w.bake_until.clear();
    run.catch_up.extend(w.skipped.iter().cloned());
    run.current += 1;
}

/// Changes `run` as `control` asks.
fn apply_control(run: &mut RolloutRun, control: RolloutControl, bake: Duration) -> Result<()> {
    let refuse = |what: &str| {
        Err(Error::conflict(format!(
            "cannot {what} a rollout that is {}",
            if run.reason.starts_with("rolling back") {
                "rolling back".to_owned()
            } else {
                run.state.to_string()
            }
        )))
    };
    if run.state.is_final() || run.reason.starts_with("rolling back") {
        return refuse(match control {
            RolloutControl::Approve => "approve",
            RolloutControl::Pause => "pause",
            RolloutControl::Resume => "resume",
            RolloutControl::Abort => "abort",
        });
    }
    match control {
        RolloutControl::Approve => {
            if run.state != RolloutState::WaitingForApproval {
                return refuse("approve the next wave of");
            }
            if let Some(w) = run.waves.get_mut(run.current) {
                w.approved = true;
                w.state = RolloutState::Pending;
            }
            run.state = RolloutState::Progressing;
        }
        RolloutControl::Pause => {
            if run.state == RolloutState::Paused {
                return refuse("pause");
            }
            run.state = RolloutState::Paused;
            run.reason = "paused by a person".to_owned();
        }
        RolloutControl::Resume => {
            if run.state != RolloutState::Paused {
                return refuse("resume");
            }
            if let Some(w) = run.waves.get_mut(run.current) {
                match w.state {
                    // The deadline and the bake time count from the resume.
                    RolloutState::Progressing => w.started = now_rfc3339(),
                    RolloutState::Baking => w.bake_until = in_seconds(bake),
                    _ => {}
                }
                run.state = if w.state == RolloutState::WaitingForApproval {
                    RolloutState::WaitingForApproval
                } else {
                    RolloutState::Progressing
                };
            } else {
                run.state = RolloutState::Progressing;
            }
            run.reason.clear();
        }
        RolloutControl::Abort => {
            run.reason = "rolling back: aborted by a person".to_owned();
            run.state = RolloutState::Progressing;
        }
    }
    Ok(())
}

/// Every cluster of every app of `ctx`.
async fn placed_clusters(ctx: &AppContext) -> Result<BTreeSet<String>> {
    let mut placed = BTreeSet::new();
    for app in ctx.apps().await? {
        placed.extend(ctx.clusters(&app).await?);
    }
    Ok(placed)
}

/// How many failed clusters of a wave [`Deployments::explain`] reads in full.
const EXPLAINED: usize = 20;

fn resource_name(r: &ResourceState) -> String {
    format!("{} {}/{}", r.app, r.kind, r.name)
}

/// The first of `resources` that is not applied and ready, said in a few words.
fn first_not_ready(resources: &[ResourceState]) -> Option<String> {
    resources
        .iter()
        .filter(|r| r.deployed != "Deleted")
        .find(|r| !(r.deployed == "Applied" && r.ready == READY))
        .map(|r| format!("{} is {} and {}", resource_name(r), r.deployed, r.ready))
}

/// How a cluster stands: failed when a resource failed, unreachable when rsync retries or a
/// readiness is unknown, healthy when every one is applied and ready, else progressing.
fn cluster_health(resources: &ClusterResources) -> ClusterHealth {
    let why_of = |r: &ResourceState| r.why.clone().unwrap_or_default();
    let listed = &resources.listed;
    if let Some(r) = listed.iter().find(|r| r.deployed == "Failed") {
        return ClusterHealth::Failed(format!("{} failed: {}", resource_name(r), why_of(r)));
    }
    if let Some(r) = listed
        .iter()
        .find(|r| r.deployed == "Retrying" || (r.ready == UNKNOWN && !r.unseen))
    {
        return ClusterHealth::Unreachable(format!("{}: {}", resource_name(r), why_of(r)));
    }
    if let Some(r) = listed.iter().find(|r| r.unseen) {
        return ClusterHealth::Unseen(format!("{}: {}", resource_name(r), why_of(r)));
    }
    if resources.all_good {
        return ClusterHealth::Healthy;
    }
    let first = first_not_ready(listed)
        .map(|d| format!("; {d}"))
        .unwrap_or_default();
    ClusterHealth::Progressing(format!(
        "{}/{} ready{first}",
        resources.ready, resources.total
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(ready: &'static str, unseen: bool) -> ResourceState {
        ResourceState {
            app: "a".into(),
            key: "cm+ConfigMap".into(),
            name: "cm".into(),
            kind: "ConfigMap".into(),
            api_version: "v1".into(),
            deployed: "Applied".into(),
            ready,
            why: Some("not listed yet".into()),
            unseen,
        }
    }

    /// A replica that took a dead one's rollout over judges nothing its watches have not listed
    /// yet; a cluster that is silent stays unreachable.
    #[test]
    fn what_this_server_has_not_listed_yet_is_unseen() {
        let on = |listed| ClusterResources {
            total: 2,
            ready: 0,
            all_good: false,
            listed,
        };
        let unseen = cluster_health(&on(vec![state(UNKNOWN, true)]));
        assert!(matches!(unseen, ClusterHealth::Unseen(_)), "{unseen:?}");
        let silent = cluster_health(&on(vec![state(UNKNOWN, true), state(UNKNOWN, false)]));
        assert!(
            matches!(silent, ClusterHealth::Unreachable(_)),
            "{silent:?}"
        );
        let progressing = cluster_health(&on(vec![state("NotReady", false)]));
        assert!(
            matches!(progressing, ClusterHealth::Progressing(_)),
            "{progressing:?}"
        );
    }
}
