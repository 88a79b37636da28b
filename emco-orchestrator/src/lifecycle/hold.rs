//! Holds (ours): a new context that an in-process action controller holds (tac's pre-install
//! and pre-update hooks, see [`emco_core::lifecycle::hold`]) is recorded like any other, but
//! handed to rsync only once every hold is released, by a task that waits for them through the
//! controllers that took them. A hold that fails keeps the context from the clusters and marks
//! it failed. The holds are in the context: a process that dies while waiting leaves them to
//! the next, whose reconcile ([`crate::reconcile`]) waits again.

use std::sync::Arc;

use emco_appcontext::{AppContext, ResourceKey};
use emco_controller_sdk::controller::Event;
use emco_core::lifecycle::hold::{HoldState, Holds};
use emco_core::lifecycle::{AppContextStatus, DigState};
use emco_core::{ContextId, ErrorKind, Result};

use super::Deployments;
use crate::state::Record;

/// How a released context is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HandOver {
    /// The context it replaces (an update).
    pub(crate) from: Option<u64>,
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
    /// (see the module documentation); stops with the process.
    pub(crate) fn release_later(&self, dig: &ResourceKey, ctx: u64, how: HandOver) {
        let (me, dig) = (self.clone(), dig.clone());
        let shutdown = self.core.shutdown_token();
        tokio::spawn(async move {
            tokio::select! {
                // The next process waits again.
                () = shutdown.cancelled() => {}
                done = me.release(&dig, ctx, how) => if let Err(e) = done {
                    tracing::warn!(%dig, ctx, error = %e, "cannot release a held context");
                },
            }
        });
    }

    /// Waits for each hold of `ctx` in turn, recording each outcome; once all are released,
    /// hands the context over if the group's record still deploys it and nobody did yet, then
    /// posts the operation's event to the group's action controllers.
    async fn release(&self, dig: &ResourceKey, id: u64, how: HandOver) -> Result<()> {
        let ctx = AppContext::load(Arc::clone(self.core.contexts()), id).await?;
        loop {
            let Some((holds, revision)) = ctx.holds::<Holds>().await? else {
                break;
            };
            if let Some(failed) = holds.failed() {
                tracing::info!(%dig, ctx = id, hold = %failed.description, "a failed hold keeps the context");
                return Ok(());
            }
            let Some((i, hold)) = holds.pending().next().map(|(i, h)| (i, h.clone())) else {
                break;
            };
            tracing::info!(%dig, ctx = id, hold = %hold.description, "waiting for a hold");
            let outcome = self.core.controller_registry().await_hold(id, &hold).await;
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
                tracing::warn!(%dig, ctx = id, hold = %hold.description, error = %e, "a hold failed");
                let failed = if how.from.is_some() {
                    AppContextStatus::UpdateFailed
                } else {
                    AppContextStatus::InstantiateFailed
                };
                ctx.set_status(failed).await?;
                return Ok(());
            }
        }
        let _held = self.core.handover.lock(dig).await;
        let record = Record::load(self.core.store().as_ref(), dig).await?;
        let current = record.info.current_context_id()?.map(ContextId::get);
        let deploys = matches!(
            record.info.current_state(),
            DigState::Instantiated | DigState::Updated
        );
        // Terminated, stopped or replaced while held; or handed over by another process.
        if current != Some(id) || !deploys || !ctx.event_queue().await?.is_empty() {
            return Ok(());
        }
        tracing::info!(%dig, ctx = id, "every hold released: handing the context over");
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
            self.core.rsync().update(from, ctx.id()).await
        } else {
            self.core.rsync().instantiate(ctx.id()).await
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
            self.release_later(dig, ctx.id(), how);
            Ok(())
        } else {
            self.hand_over_fresh(ctx, how).await
        }
    }
}
