//! Finishing hand-overs a crash cut short. An operation records its outcome in the lifecycle
//! record, then queues the work on the context for rsync; a process killed between the two
//! leaves a record naming a context whose queue never got the event, and nothing would ever
//! deploy (or remove) it. At start the orchestrator looks for such records among deployment
//! intent groups and logical clouds, waits a grace period (a live hand-over, here or in another
//! replica, completes within it), looks again, and queues what is still missing.
//!
//! A hand-over is missing when the record's last state is `Instantiated` or `Updated` and its
//! context, built fresh for that operation, has an empty event queue: it is queued an instantiate,
//! or an update from the context the record named before. A context that had events before
//! (the target of a rollback) and a terminate or stop cut short are not replayed: their work
//! cannot be told apart from a migrate's without reading every context.

use std::time::Duration;

use emco_appcontext::{AppContext, ResourceKey};
use emco_core::lifecycle::{DigState, RsyncEvent, StateInfo};
use emco_core::{ErrorKind, Result};

use crate::state::Record;
use crate::{Orchestrator, keys};

/// What a record asks rsync for and did not get.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Missing {
    key: ResourceKey,
    info: StateInfo,
    context: u64,
    event: RsyncEvent,
}

impl Orchestrator {
    /// Queues the rsync work of records whose hand-over a crash cut short (see the module
    /// documentation), after `grace`; returns how many were queued.
    ///
    /// # Errors
    /// The stores' errors.
    pub async fn reconcile(&self, grace: Duration) -> Result<usize> {
        let first = self.missing_hand_overs().await?;
        if first.is_empty() {
            return Ok(0);
        }
        tokio::time::sleep(grace).await;
        let mut queued = 0;
        for seen in first {
            let _held = self.handover.lock(&seen.key).await;
            // Only what is still missing and unchanged since it was seen.
            if self.missing_at(&seen.key).await?.as_ref() != Some(&seen) {
                continue;
            }
            let id = seen.context;
            tracing::warn!(key = %seen.key, ctx = id, event = ?seen.event,
                "queuing the rsync work a crash left unqueued");
            match (seen.event, previous_context(&seen.info, id)) {
                (RsyncEvent::Update, Some(from)) => self.rsync().update(from, id).await?,
                _ => self.rsync().instantiate(id).await?,
            }
            queued += 1;
        }
        Ok(queued)
    }

    /// Every record with a missing hand-over: deployment intent groups and logical clouds.
    async fn missing_hand_overs(&self) -> Result<Vec<Missing>> {
        let store = self.store().as_ref();
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
        let Some(record) = Record::read(self.store().as_ref(), key).await? else {
            return Ok(None);
        };
        let event = match record.info.current_state() {
            DigState::Instantiated => RsyncEvent::Instantiate,
            DigState::Updated => RsyncEvent::Update,
            _ => return Ok(None),
        };
        // A claim still waiting for its context names none yet.
        if record.claimed() {
            return Ok(None);
        }
        let Some(id) = record.info.current_context_id()? else {
            return Ok(None);
        };
        let ctx = match AppContext::load(std::sync::Arc::clone(self.contexts()), id.get()).await {
            Ok(ctx) => ctx,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if !ctx.event_queue().await?.is_empty() {
            return Ok(None);
        }
        Ok(Some(Missing {
            key: key.clone(),
            info: record.info,
            context: id.get(),
            event,
        }))
    }
}

/// The context `current` replaced: the latest other one the record names.
fn previous_context(info: &StateInfo, current: u64) -> Option<u64> {
    let current = current.to_string();
    info.actions
        .iter()
        .rev()
        .map(|a| a.instance.as_str())
        .find(|i| !i.is_empty() && *i != current)
        .and_then(|i| i.parse().ok())
}
