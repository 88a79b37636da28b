//! The lifecycle of deployment intent groups: instantiate, terminate, stop, update, migrate and
//! rollback (EMCO.md sections 4 and 6).
//!
//! Each operation reads the group's lifecycle record, does its work (rendering, controllers)
//! holding nothing, then records its outcome with a compare-and-set against the record it read
//! (the `state` module) and only then hands the work to rsync. Of two operations racing on one
//! group, in one process or in several replicas, one wins; the other deletes what it built and
//! answers with the refusal the winner's record gives (EMCO's words, a 409 for a second
//! instantiate), so rsync never gets a loser's work. When rsync refuses the work, the record is
//! put back. A group's record (`{statusctxid, actions}`, see [`StateInfo`]) names the AppContext of every
//! revision; `statusctxid` is the context currently deployed.
//!
//! | operation | AppContext | rsync | record |
//! |---|---|---|---|
//! | instantiate | new, from the current intents | instantiate | Instantiated, revision 1 |
//! | update | new, from the current intents | update old -> new | Updated, revision + 1 |
//! | rollback to r | the one of revision r | update current -> it | Updated, revision + 1 |
//! | migrate to DIG t | new, from t's intents | update current -> new | source Terminated, t Instantiated |
//! | terminate | current | terminate | Terminated |
//! | stop | current | stop flag | InstantiateStopped / TerminateStopped |
//!
//! A migrate leaves the source group Terminated: its deployment now belongs to the target, so
//! the source can be deleted. (EMCO records the source Updated at its old context instead,
//! src/orchestrator/pkg/module/update.go `Migrate`, so a later terminate of the source would
//! delete the objects the target now owns.) A group is not deployed again while the terminate
//! of its previous deployment still runs (EMCO leaves that as a TODO): that terminate would
//! delete the objects of the new one, which have the same names. Revisions only grow; a rollback
//! may go to any revision since the last instantiate but the current one.

mod build;
pub(crate) mod hold;
mod preview;
mod render;
mod rollout;

pub use emco_core::preview::{
    AppPlacement, Change, ChangeGroup, ClusterApp, ClusterPage, ClusterPreview, Detail, DryRun,
    ObjectChange, PickedBy, Preview, PreviewOptions, Refusal, Summary, Unchecked,
};
pub use rollout::{RolloutControl, RolloutMetrics};

use std::sync::Arc;
use std::time::Duration;

use emco_appcontext::AppContext;
use emco_appcontext::context::Registry;
use emco_appcontext::keys::Keyed;
use emco_core::lifecycle::{DigOperation, StateInfo, transition_named};
use emco_core::model::DeploymentIntentGroup;
use emco_core::{ContextId, DigRef, Error, ErrorKind, Found, Metadata, Result, Validate};
use emco_store::ResourceKey;
use serde::{Deserialize, Deserializer, Serialize};

use emco_controller_sdk::client::ControllerRegistry;
use emco_controller_sdk::controller::Event;
use emco_core::placement::AnyOfStrategy;

use crate::keys;
use crate::records::Records;
use crate::state::{
    OnCurrent, Record, decide_again, deploy_fresh, hand_over, load_state, now_rfc3339,
};

/// The body of `POST DIG/rollback`: `{metadata, spec:{revision}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollbackIntent {
    /// Name and descriptions (informational).
    #[serde(default)]
    pub metadata: Metadata,
    /// The revision to go back to.
    #[serde(default)]
    pub spec: RollbackSpec,
}

/// The `spec` of a [`RollbackIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollbackSpec {
    /// The revision, as `update` answered it; EMCO's OpenAPI sends it as a string (`"2"`), so
    /// both a number and a numeric string are accepted.
    #[serde(default, deserialize_with = "revision")]
    pub revision: i64,
}

impl Validate for RollbackIntent {
    fn validate(&self) -> Result<()> {
        if self.spec.revision < 1 {
            return Err(
                Error::invalid("spec.revision is required: a revision from 1 up")
                    .with_field("spec.revision"),
            );
        }
        Ok(())
    }
}

fn revision<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(i64),
        Text(String),
    }
    match NumberOrText::deserialize(d)? {
        NumberOrText::Number(n) => Ok(n),
        NumberOrText::Text(t) => t
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("revision {t:?} is not a whole number"))),
    }
}

/// The body of `POST DIG/migrate`: `{metadata, spec:{targetCompositeAppVersion,
/// targetDeploymentIntentGroup}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrateIntent {
    /// Name and descriptions (informational).
    #[serde(default)]
    pub metadata: Metadata,
    /// Where to migrate to.
    #[serde(default)]
    pub spec: MigrateSpec,
}

/// The `spec` of a [`MigrateIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrateSpec {
    /// The version of the same composite app to migrate to.
    #[serde(default)]
    pub target_composite_app_version: String,
    /// The deployment intent group of that version that takes over (approved, not deployed).
    #[serde(default)]
    pub target_deployment_intent_group: String,
}

impl Validate for MigrateIntent {
    fn validate(&self) -> Result<()> {
        let spec = &self.spec;
        for (field, value) in [
            (
                "spec.targetCompositeAppVersion",
                &spec.target_composite_app_version,
            ),
            (
                "spec.targetDeploymentIntentGroup",
                &spec.target_deployment_intent_group,
            ),
        ] {
            if value.is_empty() {
                return Err(Error::invalid(format!("{field} is required")).with_field(field));
            }
        }
        Ok(())
    }

    fn schema() -> Option<&'static emco_go::jsonschema::Schema> {
        Some(&emco_core::schemas::MIGRATE)
    }
}

/// The deployment service: the lifecycle of deployment intent groups. Cheap to clone; clones
/// share everything.
#[derive(Debug, Clone)]
pub struct Deployments {
    records: Records,
    /// The controllers the lifecycle calls (placement, action, hooks).
    controllers: Arc<ControllerRegistry>,
    /// Which cluster each anyOf group keeps.
    any_of: Arc<dyn AnyOfStrategy>,
    /// How many revisions' contexts a group keeps for rollback; `None`: all, as EMCO.
    history: Option<usize>,
    /// Which Helm release's rendering the apps get.
    helm: emco_helm::HelmCompat,
    /// The rollouts driven in this process.
    drivers: rollout::Drivers,
    /// The held contexts whose holds this process waits for.
    waiters: rollout::Drivers,
    /// The snapshots of the contexts being rolled out, followed for their gates.
    followed: crate::status::Followed,
    rollout_metrics: Arc<rollout::RolloutMetrics>,
}

impl Deployments {
    pub(crate) fn new(
        records: Records,
        controllers: Arc<ControllerRegistry>,
        any_of: Arc<dyn AnyOfStrategy>,
        history: Option<usize>,
        helm: emco_helm::HelmCompat,
    ) -> Self {
        Self {
            records,
            controllers,
            any_of,
            history,
            helm,
            drivers: rollout::Drivers::default(),
            waiters: rollout::Drivers::default(),
            followed: crate::status::Followed::default(),
            rollout_metrics: Arc::default(),
        }
    }

    /// What the rollouts driven here did, as Prometheus metrics.
    #[must_use]
    pub fn rollout_metrics(&self) -> &Arc<rollout::RolloutMetrics> {
        &self.rollout_metrics
    }

    /// Which Helm release's rendering the apps get.
    #[must_use]
    pub const fn helm(&self) -> emco_helm::HelmCompat {
        self.helm
    }

    /// The lifecycle record of the deployment intent group `dig`.
    ///
    /// # Errors
    /// NotFound when it does not exist.
    pub async fn state(&self, dig: &DigRef) -> Result<StateInfo> {
        let key = dig.key();
        self.load_dig(&key).await?;
        load_state(self.records.store().as_ref(), &key).await
    }

    /// Approves the deployment intent group `dig` (Created -> Approved).
    ///
    /// # Errors
    /// NotFound; FailedPrecondition when it is deployed.
    pub async fn approve(&self, dig: &DigRef) -> Result<()> {
        let key = dig.key();
        self.load_dig(&key).await?;
        crate::state::apply_operation(self.records.store().as_ref(), &key, DigOperation::Approve)
            .await
    }

    /// The deployment intent group at `dig` (NotFound naming it otherwise).
    async fn load_dig(&self, dig: &ResourceKey) -> Result<DeploymentIntentGroup> {
        self.records
            .objects
            .deployment_intent_groups()
            .get(
                &dig.parent().unwrap_or_default(),
                dig.name().unwrap_or_default(),
            )
            .await
    }

    /// The AppContext id an operation acts on: the group's current one.
    fn current_context(dig: &ResourceKey, state: &StateInfo) -> Result<ContextId> {
        state
            .current_context_id()?
            .ok_or_else(|| Error::internal(format!("the state of {dig} records no AppContext")))
    }

    /// Records `op` (deploying context `ctx`) over `record` of `dig`, already checked: the
    /// compare-and-set that decides a race. Returns the record as written.
    ///
    /// # Errors
    /// The refusal of the record that won a race (see [`Self::lost`]); the store's errors.
    async fn record(
        &self,
        dig: &ResourceKey,
        record: &Record,
        op: DigOperation,
        ctx: ContextId,
    ) -> Result<Record> {
        let mut state = record.info.clone();
        state.apply(op, ctx.to_string(), now_rfc3339())?;
        if !matches!(op, DigOperation::Terminate | DigOperation::Stop) {
            state.statusctxid = ctx.to_string();
        }
        match record.swap(self.records.store().as_ref(), dig, state).await {
            Err(e) if e.kind() == ErrorKind::Conflict => Err(self.lost(dig, op, e).await),
            written => written,
        }
    }

    /// Why `op` lost a race on the record of `dig`: the refusal the winner's record gives, in
    /// EMCO's words (`already been instantiated` for a second instantiate), or `lost` itself
    /// when the record still allows `op`.
    async fn lost(&self, dig: &ResourceKey, op: DigOperation, lost: Error) -> Error {
        match load_state(self.records.store().as_ref(), dig).await {
            Ok(now) => transition_named(dig_name(dig), now.current_state(), op)
                .err()
                .unwrap_or(lost),
            Err(e) => e,
        }
    }

    /// Instantiates the deployment intent group at `dig` (EMCO.md section 4): renders its apps,
    /// places them, writes a new AppContext, runs the placement then action controllers,
    /// records the group Instantiated and hands the context to rsync. Returns once rsync has
    /// the work queued; follow the progress in the AppContext's status.
    ///
    /// # Errors
    /// NotFound (the group or a piece it names); FailedPrecondition when it is not approved or
    /// its logical cloud is not instantiated; Conflict when it is already instantiated (also
    /// by a concurrent instantiate that won) or the terminate of its previous deployment still
    /// runs; InvalidArgument for a bad chart, profile or placement; a controller's failure,
    /// naming it (the group's state is then unchanged).
    pub async fn instantiate(&self, dig: &DigRef) -> Result<()> {
        let named = dig;
        let dig = &dig.key();
        let group = self.load_dig(dig).await?;
        let record = Record::load(self.records.store().as_ref(), dig).await?;
        transition_named(
            dig_name(dig),
            record.info.current_state(),
            DigOperation::Instantiate,
        )?;
        self.check_terminated(dig, &record.info).await?;
        let ctx = build::build_context(self, dig, &group, None).await?;
        let waves = self.plan_if_rolled_out(named, None, &ctx).await?;
        let _held = self.records.handover.lock(dig).await;
        // Again, now that no other operation of this process can queue work meanwhile.
        if let Err(e) = self.check_terminated(dig, &record.info).await {
            ctx.discard().await;
            return Err(e);
        }
        let held = hold::is_held(&ctx).await?;
        let how = hold::HandOver { from: None, waves };
        let queued = self.queue_fresh(dig, &ctx, how, held);
        self.deploy(dig, &record, DigOperation::Instantiate, &ctx, queued)
            .await?;
        // A held context's event follows its hand-over, once released.
        if !held {
            self.post_event(dig, ctx.id(), Event::Instantiate);
        }
        Ok(())
    }

    /// Records `op` deploying `ctx`, a context built for it, over `record` of `dig`, then hands
    /// `queued` to rsync (see [`deploy_fresh`]). Returns the record as written.
    async fn deploy(
        &self,
        dig: &ResourceKey,
        record: &Record,
        op: DigOperation,
        ctx: &AppContext,
        queued: impl Future<Output = Result<()>>,
    ) -> Result<Record> {
        let written = self.record(dig, record, op, ctx.id()).await;
        deploy_fresh(
            self.records.store().as_ref(),
            dig,
            written,
            record,
            ctx,
            queued,
        )
        .await
    }

    /// Refuses to deploy a group again while the terminate of its previous deployment still
    /// runs: that terminate would delete the objects the new deployment applies, which share
    /// their names.
    ///
    /// # Errors
    /// Conflict while the previous context is still terminating (stop it or wait).
    async fn check_terminated(&self, dig: &ResourceKey, state: &StateInfo) -> Result<()> {
        let Some(id) = state.current_context_id()? else {
            return Ok(());
        };
        let ctx = AppContext::load(Arc::clone(self.records.contexts()), id).await;
        let busy = match ctx.found()? {
            Some(ctx) => ctx.is_busy().await?,
            None => false,
        };
        if busy {
            return Err(Error::conflict(format!(
                "deployment intent group {:?} is still being terminated; wait, or stop it",
                dig.name().unwrap_or_default()
            )));
        }
        Ok(())
    }

    /// Waits (a bounded time) until context `id` is not in the middle of an rsync operation:
    /// a rollback target may still be deleting what the update after it replaced.
    ///
    /// # Errors
    /// Conflict when it is still busy after [`SETTLE_TIMEOUT`].
    async fn settle(&self, id: ContextId) -> Result<()> {
        let ctx = AppContext::load(Arc::clone(self.records.contexts()), id).await?;
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        loop {
            match ctx.status().await? {
                Some(s) if s.is_running() => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(Error::conflict(format!(
                            "the context of that revision is still {s}; retry once it is done"
                        )));
                    }
                    tokio::time::sleep(SETTLE_POLL).await;
                }
                _ => return Ok(()),
            }
        }
    }

    /// The record of `dig` checked for `op`, with the context `op` acts on (the current one).
    async fn checked(&self, dig: &ResourceKey, op: DigOperation) -> Result<(Record, ContextId)> {
        self.load_dig(dig).await?;
        let record = Record::load(self.records.store().as_ref(), dig).await?;
        transition_named(dig_name(dig), record.info.current_state(), op)?;
        let ctx = Self::current_context(dig, &record.info)?;
        Ok((record, ctx))
    }

    /// Terminates the deployment intent group at `dig`: rsync removes its resources from the
    /// clusters, then its action controllers are told. A stopped terminate may be repeated.
    ///
    /// # Errors
    /// NotFound; FailedPrecondition when it was never instantiated; Conflict when it is
    /// already terminated.
    pub async fn terminate(&self, dig: &DigRef) -> Result<()> {
        let dig = &dig.key();
        decide_again(|| self.terminate_once(dig)).await
    }

    async fn terminate_once(&self, dig: &ResourceKey) -> Result<()> {
        // What in-process controllers do before a terminate (tac's pre-termination hooks) runs
        // while the deployment is still there; a refusal keeps it.
        let (_, current) = self.checked(dig, DigOperation::Terminate).await?;
        let (controllers, intents) = self.dig_controllers(dig).await?;
        self.controllers
            .before_terminate(&controllers, &intents, current)
            .await?;
        let ctx = self
            .record_on_current(dig, DigOperation::Terminate, OnCurrent::Terminate)
            .await?;
        // Clusters a rollout has not changed yet still run the context it replaces.
        if let Some(replaced) = self.replaced_by_rollout(ctx).await? {
            self.records.rsync().terminate(replaced).await?;
        }
        self.terminate_children(dig).await;
        // Controllers are told after the fact: the deployment is going whatever they answer,
        // and a controller that is down must not keep it on the clusters.
        if let Err(e) = self
            .controllers
            .terminate(&controllers, &intents, ctx)
            .await
        {
            tracing::warn!(%dig, %ctx, error = %e, "a controller failed to take a terminate");
        }
        self.post_event(dig, ctx, Event::Terminate);
        Ok(())
    }

    /// The registered controllers and the group's intents (controller name -> intent name).
    async fn dig_controllers(
        &self,
        dig: &ResourceKey,
    ) -> Result<(
        Vec<emco_core::model::Controller>,
        std::collections::BTreeMap<String, String>,
    )> {
        let intents = build::dig_intents(self, dig).await?;
        Ok((self.registered_controllers().await?, intents.intents))
    }

    /// The controllers registered at `/v2/controllers`, in registration order.
    async fn registered_controllers(&self) -> Result<Vec<emco_core::model::Controller>> {
        self.records
            .objects
            .controllers()
            .list(&ResourceKey::root(), &[])
            .await
    }

    /// Posts `event` of context `ctx` to the group's action controllers (EMCO's `PostEvent`:
    /// tac's post hooks) in the background, once the operation has been handed over; what they
    /// answer changes nothing, as in EMCO, so a failure is only logged.
    pub(crate) fn post_event(&self, dig: &ResourceKey, ctx: ContextId, event: Event) {
        let (me, dig) = (self.clone(), dig.clone());
        tokio::spawn(async move {
            let told = async {
                let (controllers, intents) = me.dig_controllers(&dig).await?;
                me.controllers
                    .post_event(&controllers, &intents, ctx, event)
                    .await
            };
            if let Err(e) = told.await {
                tracing::warn!(%dig, %ctx, ?event, error = %e, "a controller failed to take an event");
            }
        });
    }

    /// Terminates the contexts controllers deployed for the group's contexts (EMCO's
    /// `ChildContextIDs`, which sds records): those of every revision of the deployment, as an
    /// update leaves the replaced context's children deployed. One that fails is logged and the
    /// rest still go: the group is terminated whatever they answer.
    async fn terminate_children(&self, dig: &ResourceKey) {
        let contexts = match load_state(self.records.store().as_ref(), dig).await {
            Ok(state) => state
                .contexts_by_revision()
                .into_values()
                .filter_map(|id| id.parse::<ContextId>().ok())
                .collect::<std::collections::BTreeSet<_>>(),
            Err(e) => {
                tracing::warn!(%dig, error = %e, "cannot read which contexts to terminate the children of");
                return;
            }
        };
        for parent in contexts {
            let children = match AppContext::load(Arc::clone(self.records.contexts()), parent).await
            {
                Ok(ctx) => ctx.child_contexts().await,
                Err(e) => Err(e),
            };
            let children = match children.found() {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(%dig, %parent, error = %e, "cannot read the child contexts");
                    continue;
                }
            };
            for child in children {
                if let Err(e) = self.records.rsync().terminate(child).await {
                    tracing::warn!(%dig, %parent, %child, error = %e, "cannot terminate a child context");
                }
            }
        }
    }

    /// Stops the running instantiate, update or terminate of the group at `dig`: rsync ends its
    /// waiting and retrying and the operation completes as failed (InstantiateStopped or
    /// TerminateStopped). Stopping twice is harmless.
    ///
    /// # Errors
    /// NotFound; FailedPrecondition when nothing was ever instantiated.
    pub async fn stop(&self, dig: &DigRef) -> Result<()> {
        let dig = &dig.key();
        decide_again(|| self.stop_once(dig)).await
    }

    async fn stop_once(&self, dig: &ResourceKey) -> Result<()> {
        self.record_on_current(dig, DigOperation::Stop, OnCurrent::Stop)
            .await
            .map(drop)
    }

    /// Checks and records `op` on the group's current context, then tells rsync `on` it, under
    /// the group's hand-over lock; the record is put back when rsync refuses. Returns the
    /// context.
    async fn record_on_current(
        &self,
        dig: &ResourceKey,
        op: DigOperation,
        on: OnCurrent,
    ) -> Result<ContextId> {
        let (record, ctx) = self.checked(dig, op).await?;
        let _held = self.records.handover.lock(dig).await;
        let written = self.record(dig, &record, op, ctx).await?;
        let queued = on.send(self.records.rsync(), ctx);
        hand_over(
            self.records.store().as_ref(),
            queued,
            &[(dig, &written, &record)],
            None,
        )
        .await?;
        Ok(ctx)
    }

    /// Deploys the current intents of the instantiated group at `dig` as a new revision: a new
    /// AppContext (controllers see the replaced one), and rsync applies what changed and
    /// deletes what is gone. Returns the new revision number.
    ///
    /// # Errors
    /// As [`Self::instantiate`]; FailedPrecondition unless it is Instantiated or Updated.
    pub async fn update(&self, dig: &DigRef) -> Result<i64> {
        let named = dig;
        let dig = &dig.key();
        let group = self.load_dig(dig).await?;
        let (record, old) = self.checked(dig, DigOperation::Update).await?;
        self.refuse_during_rollout(old, "update").await?;
        let ctx = build::build_context(self, dig, &group, Some(old)).await?;
        let waves = self.plan_if_rolled_out(named, Some(old), &ctx).await?;
        let _held = self.records.handover.lock(dig).await;
        let held = hold::is_held(&ctx).await?;
        let how = hold::HandOver {
            from: Some(old),
            waves,
        };
        let queued = self.queue_fresh(dig, &ctx, how, held);
        let written = self
            .deploy(dig, &record, DigOperation::Update, &ctx, queued)
            .await?;
        if !held {
            self.post_event(dig, ctx.id(), Event::Update);
        }
        self.prune_history(dig, &written.info).await;
        Ok(written.info.latest_revision())
    }

    /// Deletes the contexts of the group's revisions beyond the history limit (see
    /// [`crate::OrchestratorBuilder::revision_history_limit`]), but any rsync still works on: a
    /// later update takes those. Best effort: the update stands whatever happens here.
    /// ([`Self::rollback`] refuses a revision whose context is gone.)
    async fn prune_history(&self, dig: &ResourceKey, state: &StateInfo) {
        let Some(keep) = self.history else {
            return;
        };
        let pruned = async {
            let mut deleted = 0;
            for id in state.contexts_beyond(keep)? {
                let ctx = AppContext::load(Arc::clone(self.records.contexts()), id).await;
                let Some(ctx) = ctx.found()? else { continue };
                // Still worked on, deployed somewhere (a wave of a rollout) or held.
                let mut in_use = ctx.is_busy().await?;
                for registry in [
                    Registry::Active,
                    Registry::Deployed,
                    Registry::Rollout,
                    Registry::Held,
                ] {
                    in_use = in_use || ctx.is_marked(registry).await?;
                }
                if in_use {
                    continue;
                }
                ctx.delete().await?;
                deleted += 1;
            }
            Ok::<_, Error>(deleted)
        };
        match pruned.await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(dig = %dig, contexts = n, keep, "deleted the contexts of revisions beyond the history")
            }
            Err(e) => {
                tracing::warn!(dig = %dig, error = %e, "cannot delete the contexts of old revisions")
            }
        }
    }

    /// Rolls the group at `dig` back to `revision`, an earlier revision of its current
    /// deployment: rsync updates from the current context to that revision's. The rollback is
    /// recorded as a new revision (revisions only grow); returns it.
    ///
    /// # Errors
    /// NotFound; FailedPrecondition unless it is Instantiated or Updated; InvalidArgument when
    /// `revision` is not an earlier revision of the current deployment.
    pub async fn rollback(&self, dig: &DigRef, revision: i64) -> Result<i64> {
        let dig = &dig.key();
        let (record, current) = self.checked(dig, DigOperation::Rollback).await?;
        self.refuse_during_rollout(current, "roll back").await?;
        let state = &record.info;
        // The revision deployed now: the last action's (revisions before a re-instantiate
        // can be higher, but they are not part of this deployment).
        let current_revision = state.actions.last().map_or(0, |a| a.revision);
        let target = state
            .contexts_by_revision()
            .get(&revision)
            .filter(|_| revision != current_revision)
            .map(|id| (*id).to_owned())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "revision {revision} is not an earlier revision of the deployment \
                     (it is at revision {current_revision})"
                ))
                .with_field("spec.revision")
            })?;
        let target = ContextId::from_record(&target, format_args!("the state of {dig}"))?;
        if target != current {
            let kept = AppContext::load(Arc::clone(self.records.contexts()), target).await;
            if kept.found()?.is_none() {
                return Err(Error::invalid(format!(
                    "revision {revision} is no longer kept: the server keeps the contexts of \
                     the last {} revisions (--revision-history-limit)",
                    self.history.unwrap_or_default()
                ))
                .with_field("spec.revision"));
            }
            self.settle(target).await?;
        }
        let _held = self.records.handover.lock(dig).await;
        let written = self
            .record(dig, &record, DigOperation::Rollback, target)
            .await?;
        if target != current {
            hand_over(
                self.records.store().as_ref(),
                self.records.rsync().rollback(current, target),
                &[(dig, &written, &record)],
                None,
            )
            .await?;
        }
        Ok(written.info.latest_revision())
    }

    /// Migrates the deployment of the group at `dig` to another version of its composite app:
    /// the target group (`intent.spec`, approved and not deployed) gets a new AppContext built
    /// from its own intents, rsync updates from the current context to it, the target becomes
    /// Instantiated and the source Terminated.
    ///
    /// # Errors
    /// NotFound (either group or a piece the target names); InvalidArgument when the target is
    /// the source itself; FailedPrecondition / Conflict when either is in the wrong state; as
    /// [`Self::instantiate`] for the target's context.
    pub async fn migrate(&self, source: &DigRef, intent: &MigrateIntent) -> Result<()> {
        intent.validate()?;
        let spec = &intent.spec;
        let dig = &source.key();
        let target = keys::dig(
            &source.project,
            &source.composite_app,
            &spec.target_composite_app_version,
            &spec.target_deployment_intent_group,
        );
        if target == *dig {
            return Err(Error::invalid(
                "a deployment intent group cannot migrate to itself",
            ));
        }
        let (source_record, old) = self.checked(dig, DigOperation::Migrate).await?;
        self.refuse_during_rollout(old, "migrate").await?;
        let target_group = self.load_dig(&target).await?;
        let target_record = Record::load(self.records.store().as_ref(), &target).await?;
        transition_named(
            dig_name(&target),
            target_record.info.current_state(),
            DigOperation::Instantiate,
        )
        .map_err(|e| Error::new(e.kind(), format!("migrate target: {}", e.message())))?;
        self.check_terminated(&target, &target_record.info).await?;
        let ctx = build::build_context(self, &target, &target_group, Some(old)).await?;
        let _held = self.records.handover.lock_pair(dig, &target).await;
        if let Err(e) = self.check_terminated(&target, &target_record.info).await {
            ctx.discard().await;
            return Err(e);
        }
        let target_written = match self
            .record(&target, &target_record, DigOperation::Instantiate, ctx.id())
            .await
        {
            Ok(w) => w,
            Err(e) => {
                ctx.discard().await;
                return Err(e);
            }
        };
        let source_written = match self
            .record(dig, &source_record, DigOperation::Terminate, old)
            .await
        {
            Ok(w) => w,
            Err(e) => {
                target_written
                    .revert(self.records.store().as_ref(), &target, &target_record)
                    .await;
                ctx.discard().await;
                return Err(e);
            }
        };
        hand_over(
            self.records.store().as_ref(),
            self.records.rsync().update(old, ctx.id()),
            &[
                (&target, &target_written, &target_record),
                (dig, &source_written, &source_record),
            ],
            Some(&ctx),
        )
        .await
    }
}

/// How long a rollback waits for the target revision's context to finish its rsync work.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often it looks.
const SETTLE_POLL: Duration = Duration::from_millis(50);

/// The name of the group at `dig`, for EMCO's refusal texts.
fn dig_name(dig: &ResourceKey) -> &str {
    dig.name().unwrap_or_default()
}
