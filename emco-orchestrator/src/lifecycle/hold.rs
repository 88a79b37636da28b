//! Holds (ours): a new context that an in-process action controller holds (tac's pre-install
//! and pre-update hooks, see [`emco_core::lifecycle::hold`]) is recorded like any other, but
//! handed to rsync only once every hold is released, by a task that waits for them through the
//! controllers that took them. A hold that fails keeps the context from the clusters and marks
//! it failed. The holds are in the context: a process that dies while waiting leaves them to
//! the next, whose reconcile ([`crate::reconcile`]) waits again.

use std::sync::Arc;

use emco_appcontext::AppContext;
use emco_appcontext::context::Registry;
use emco_appcontext::keys::Keyed;
use emco_controller_sdk::controller::Event;
use emco_core::lifecycle::hold::{HoldState, Holds};
use emco_core::lifecycle::{AppContextStatus, DigState};
use emco_core::{ContextId, ErrorKind, Found, Result};
use emco_store::ResourceKey;
use tokio_util::sync::CancellationToken;

use super::Deployments;
use super::rollout::SUPERVISE;
use crate::state::Record;

/// How a released context is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HandOver {
    /// The context it replaces (an update).
    pub(crate) from: Option<ContextId>,
    /// It is rolled out in waves.
    pub(crate) waves: bool,
}

/// Whether `ctx` has a hold still waited for.
pub(crate) async fn is_held(ctx: &AppContext) -> Result<bool> {
    Ok(ctx
        .holds::<Holds>()
        .await?
        .is_some_and(|(h, _)| h.pending().next().is_some()))
}

impl Deployments {
    /// Waits for the holds of context `ctx` of `dig` in the background, then hands it over
    /// (see the module documentation), unless a task of this process waits for them already;
    /// stops with the process. The caller has put the context in [`Registry::Held`], for other
    /// processes to wait too.
    pub(crate) fn release_later(&self, dig: &ResourceKey, ctx: ContextId, how: HandOver) {
        if !self.waiters.claim(ctx) {
            return;
        }
        let (me, dig) = (self.clone(), dig.clone());
        let shutdown = self.records.shutdown_token();
        tokio::spawn(async move {
            tokio::select! {
                // The next process waits again.
                () = shutdown.cancelled() => {}
                done = me.release(&dig, ctx, how) => if let Err(e) = done {
                    tracing::warn!(%dig, %ctx, error = %e, "cannot release a held context");
                },
            }
            me.waiters.release(ctx);
        });
    }

    /// Waits for the holds of every context in [`Registry::Held`], now and every
    /// [`SUPERVISE`] until `token` is cancelled: another replica's, also one that died.
    pub(crate) async fn supervise_holds(&self, token: CancellationToken) {
        loop {
            match AppContext::registered(self.records.contexts().as_ref(), Registry::Held).await {
                Ok(ids) => {
                    for id in ids {
                        if let Err(e) = self.wait_registered(id).await {
                            tracing::warn!(ctx = %id, error = %e, "cannot wait for a held context");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot list the held contexts"),
            }
            tokio::select! {
                () = tokio::time::sleep(SUPERVISE) => {}
                () = token.cancelled() => return,
            }
        }
    }

    /// Waits for the held context `id` found in the registry, its group and hand-over read
    /// from the context and the group's record; unregisters one that is gone.
    async fn wait_registered(&self, id: ContextId) -> Result<()> {
        if self.waiters.has(id) {
            return Ok(());
        }
        let found = async {
            let ctx = AppContext::load(Arc::clone(self.records.contexts()), id).await?;
            let dig = ctx.meta().await?.dig().key();
            let record = Record::load(self.records.store().as_ref(), &dig).await?;
            Ok::<_, emco_core::Error>((ctx, dig, record))
        };
        let Some((ctx, dig, record)) = found.await.found()? else {
            // The context or its group is gone: nothing to hand over.
            AppContext::unregister(self.records.contexts().as_ref(), Registry::Held, id).await?;
            return Ok(());
        };
        let from = match record.info.current_state() {
            DigState::Updated => record.info.previous_context(id),
            _ => None,
        };
        let waves = ctx
            .rollout::<emco_core::rollout::RolloutRun>()
            .await?
            .is_some();
        self.release_later(&dig, id, HandOver { from, waves });
        Ok(())
    }

    /// Waits for each hold of `ctx` in turn, recording each outcome; once all are released,
    /// hands the context over if the group's record still deploys it and no process did yet,
    /// then posts the operation's event to the group's action controllers.
    async fn release(&self, dig: &ResourceKey, id: ContextId, how: HandOver) -> Result<()> {
        let ctx = AppContext::load(Arc::clone(self.records.contexts()), id).await?;
        loop {
            let Some((holds, revision)) = ctx.holds::<Holds>().await? else {
                break;
            };
            if let Some(failed) = holds.failed() {
                tracing::info!(%dig, ctx = %id, hold = %failed.description, "a failed hold keeps the context");
                ctx.unmark(Registry::Held).await?;
                return Ok(());
            }
            let Some((i, hold)) = holds.pending().next().map(|(i, h)| (i, h.clone())) else {
                break;
            };
            tracing::info!(%dig, ctx = %id, hold = %hold.description, "waiting for a hold");
            let outcome = self.controllers.await_hold(id, &hold).await;
            let mut next = holds.clone();
            match &outcome {
                Ok(()) => next.holds[i].state = HoldState::Released,
                Err(e) => {
                    next.holds[i].state = HoldState::Failed;
                    e.message().clone_into(&mut next.holds[i].message);
                }
            }
            match ctx.put_holds(&next, revision).await {
                // Another process recorded it first: read again.
                Err(e) if e.kind() == ErrorKind::Conflict => continue,
                written => written?,
            };
            if let Err(e) = outcome {
                tracing::warn!(%dig, ctx = %id, hold = %hold.description, error = %e, "a hold failed");
                let failed = if how.from.is_some() {
                    AppContextStatus::UpdateFailed
                } else {
                    AppContextStatus::InstantiateFailed
                };
                ctx.set_status(failed).await?;
                ctx.unmark(Registry::Held).await?;
                return Ok(());
            }
        }
        let _held = self.records.handover.lock(dig).await;
        let record = Record::load(self.records.store().as_ref(), dig).await?;
        let current = record.info.current_context_id()?;
        let deploys = matches!(
            record.info.current_state(),
            DigState::Instantiated | DigState::Updated
        );
        // Of the processes waiting, the one that takes it off the registry hands it over.
        if !ctx.unmark(Registry::Held).await? {
            return Ok(());
        }
        // Terminated, stopped or replaced while held; or handed over already.
        if current != Some(id) || !deploys || !ctx.event_queue().await?.is_empty() {
            return Ok(());
        }
        tracing::info!(%dig, ctx = %id, "every hold released: handing the context over");
        self.hand_over_fresh(&ctx, how).await?;
        let event = if how.from.is_some() {
            Event::Update
        } else {
            Event::Instantiate
        };
        self.post_event(dig, id, event);
        Ok(())
    }

    /// Hands a freshly built context `ctx` to rsync as `how` says: a rollout in waves, an
    /// update of the context it replaces, or an instantiate.
    pub(crate) async fn hand_over_fresh(&self, ctx: &AppContext, how: HandOver) -> Result<()> {
        if how.waves {
            self.start_rollout(ctx).await
        } else if let Some(from) = how.from {
            self.records.rsync().update(from, ctx.id()).await
        } else {
            self.records.rsync().instantiate(ctx.id()).await
        }
    }

    /// What `queued` of an operation deploying the fresh context `ctx` of `dig` does: hands it
    /// over, or, while it is held, leaves that to a task that waits for its holds.
    pub(crate) async fn queue_fresh(
        &self,
        dig: &ResourceKey,
        ctx: &AppContext,
        how: HandOver,
        held: bool,
    ) -> Result<()> {
        if held {
            // Registered before the answer: from then on every process waits for it.
            ctx.mark(Registry::Held).await?;
            self.release_later(dig, ctx.id(), how);
            Ok(())
        } else {
            self.hand_over_fresh(ctx, how).await
        }
    }
}
