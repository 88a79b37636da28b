//! Finishing hand-overs a crash cut short. An operation records its outcome in the lifecycle
//! record, then queues the work on the context for rsync; a process killed between the two
//! leaves a record naming a context whose queue never got the event, and nothing would ever
//! deploy (or remove) it. At start the orchestrator looks for such records among deployment
//! intent groups and logical clouds, waits a grace period (a live hand-over, here or in another
//! replica, completes within it), looks again, and queues what is still missing.
//!
//! A hand-over is missing when the record's last state is `Instantiated` or `Updated` and its
//! context, built fresh for that operation, has an empty event queue: it is queued an instantiate,
//! or an update from the context the record named before. A logical cloud's claim (the
//! operation recorded before its credentials and context are made) that never got its context is
//! dropped, so the cloud can be instantiated or updated again. A context that had events before
//! (the target of a rollback) and a terminate or stop cut short are not replayed: their work
//! cannot be told apart from a migrate's without reading every context.

use std::sync::Arc;
use std::time::Duration;

use emco_core::lifecycle::hold::Holds;
use emco_core::lifecycle::{DigState, RsyncEvent, StateInfo};
use emco_core::{ContextId, Found, Result};
use emco_store::ResourceKey;

use crate::state::Record;
use crate::{Orchestrator, keys};

/// What a record asks for and did not get.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Missing {
    key: ResourceKey,
    info: StateInfo,
    repair: Repair,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repair {
    /// Queue `event` on context `context`.
    Queue {
        context: ContextId,
        event: RsyncEvent,
    },
    /// Drop the last action, a claim whose operation died before naming its context.
    DropClaim,
}

impl Orchestrator {
    /// Queues the rsync work of records whose hand-over a crash cut short (see the module
    /// documentation), after `grace`; returns how many records were repaired.
    ///
    /// # Errors
    /// The stores' errors.
    pub async fn reconcile(&self, grace: Duration) -> Result<usize> {
        let first = self.missing_hand_overs().await?;
        if first.is_empty() {
            return Ok(0);
        }
        tokio::time::sleep(grace).await;
        let mut repaired = 0;
        for seen in first {
            // One record that cannot be repaired does not keep the others from it.
            match self.repair(&seen).await {
                Ok(true) => repaired += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(key = %seen.key, error = %e, "cannot repair a cut-short hand-over");
                }
            }
        }
        Ok(repaired)
    }

    /// Repairs what `seen` misses if the record is still as it was seen; returns whether it did.
    async fn repair(&self, seen: &Missing) -> Result<bool> {
        let _held = self.records.handover.lock(&seen.key).await;
        if self.missing_at(&seen.key).await?.as_ref() != Some(seen) {
            return Ok(false);
        }
        match seen.repair {
            Repair::Queue { context, event } => {
                let ctx =
                    emco_appcontext::AppContext::load(Arc::clone(self.records.contexts()), context)
                        .await?;
                let waves = ctx
                    .rollout::<emco_core::rollout::RolloutRun>()
                    .await?
                    .is_some();
                if let Some((holds, _)) = ctx.holds::<Holds>().await? {
                    if holds.failed().is_some() {
                        return Ok(false);
                    }
                    if holds.pending().next().is_some() {
                        tracing::warn!(key = %seen.key, ctx = %context, "waiting again for the holds of a context");
                        let from = match event {
                            RsyncEvent::Update => seen.info.previous_context(context),
                            _ => None,
                        };
                        let how = crate::lifecycle::hold::HandOver { from, waves };
                        // A crash may have come between the record and the registration.
                        ctx.mark(emco_appcontext::context::Registry::Held).await?;
                        self.deployments().release_later(&seen.key, context, how);
                        return Ok(true);
                    }
                }
                if waves {
                    tracing::warn!(key = %seen.key, ctx = %context, "resuming a rollout a crash left unstarted");
                    self.deployments().start_rollout(&ctx).await?;
                    return Ok(true);
                }
                tracing::warn!(key = %seen.key, ctx = %context, ?event,
                    "queuing the rsync work a crash left unqueued");
                match (event, seen.info.previous_context(context)) {
                    (RsyncEvent::Update, Some(from)) => {
                        let updated = self.records.rsync().update(from, context).await.found()?;
                        if updated.is_none() {
                            // The replaced context is gone: deploy the new one whole.
                            self.records.rsync().instantiate(context).await?;
                        }
                    }
                    _ => self.records.rsync().instantiate(context).await?,
                }
            }
            Repair::DropClaim => {
                tracing::warn!(key = %seen.key, "dropping a claim a crash left unfinished");
                let record = Record::load(self.records.store().as_ref(), &seen.key).await?;
                let mut info = record.info.clone();
                info.actions.pop();
                record
                    .swap(self.records.store().as_ref(), &seen.key, info)
                    .await?;
            }
        }
        Ok(true)
    }

    /// Every record with a missing hand-over: deployment intent groups and logical clouds.
    async fn missing_hand_overs(&self) -> Result<Vec<Missing>> {
        let store = self.records.store().as_ref();
        let mut found = Vec::new();
        for (project, _) in store.list(&ResourceKey::root(), keys::PROJECT, &[]).await? {
            let mut records = Vec::new();
            for (ca, _) in store.list(&project, keys::COMPOSITE_APP, &[]).await? {
                records.extend(store.list(&ca, keys::DIG, &[]).await?);
            }
            records.extend(store.list(&project, keys::LOGICAL_CLOUD, &[]).await?);
            for (key, _) in records {
                if let Some(missing) = self.missing_at(&key).await? {
                    found.push(missing);
                }
            }
        }
        Ok(found)
    }

    /// The hand-over the record at `key` misses, if any.
    async fn missing_at(&self, key: &ResourceKey) -> Result<Option<Missing>> {
        let Some(record) = Record::read(self.records.store().as_ref(), key).await? else {
            return Ok(None);
        };
        let event = match record.info.current_state() {
            DigState::Instantiated => RsyncEvent::Instantiate,
            DigState::Updated => RsyncEvent::Update,
            _ => return Ok(None),
        };
        // A claim still waiting for its context names none yet; an admin cloud's stays so.
        if record.claimed() {
            let repair =
                if key.kind() == Some(keys::LOGICAL_CLOUD) && !self.is_admin_cloud(key).await? {
                    Some(Missing {
                        key: key.clone(),
                        info: record.info,
                        repair: Repair::DropClaim,
                    })
                } else {
                    None
                };
            return Ok(repair);
        }
        let Some(ctx) = self.records.load_context(&record.info).await? else {
            return Ok(None);
        };
        if !ctx.event_queue().await?.is_empty() {
            return Ok(None);
        }
        Ok(Some(Missing {
            key: key.clone(),
            info: record.info,
            repair: Repair::Queue {
                context: ctx.id(),
                event,
            },
        }))
    }

    /// Whether the logical cloud at `key` is an admin one (its claims never get a context).
    async fn is_admin_cloud(&self, key: &ResourceKey) -> Result<bool> {
        let parent = key.parent().unwrap_or_default();
        let name = key.name().unwrap_or_default();
        Ok(self
            .records
            .objects
            .logical_clouds()
            .get(&parent, name)
            .await?
            .is_admin())
    }
}
