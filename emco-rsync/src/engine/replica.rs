//! The engine as one of several replicas on a shared store (see [`super::owner`]).
//!
//! A heartbeat task renews this replica's heartbeat. A round, every third of the time to live,
//! reads the owners, the active and the deployed registries in three listings and:
//! - stops here what another replica took over (this one was taken for dead meanwhile);
//! - forgets the readiness of contexts no longer deployed, and releases them;
//! - removes the owner keys of contexts that no longer exist;
//! - claims active contexts with no live owner and runs them (a dead replica's work resumes);
//! - claims deployed contexts with no live owner and follows their readiness;
//! - claims the shards of shared operations it may run (see [`super::share`]);
//! - cuts short an instantiate or update running here when a terminate for it was queued
//!   through another replica.

use emco_core::poison::lock;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use emco_appcontext::AppContext;
use emco_appcontext::context::{QueueStatus, Registry};
use emco_core::lifecycle::RsyncEvent;
use emco_core::{ContextId, Found, Result};

use super::{Abort, OpCtl, Rsync};

impl Rsync {
    /// Starts as a replica: a first round at once, then the heartbeat and the rounds.
    pub(super) async fn start_replica(&self) -> Result<()> {
        let Some(owners) = &self.inner.owners else {
            return Ok(());
        };
        owners.beat(self.inner.store.as_ref()).await?;
        let engine = self.clone();
        let beating = tokio::spawn(async move { engine.heartbeat().await });
        *lock(&self.inner.beating) = Some(beating);
        self.replica_round().await?;
        let engine = self.clone();
        tokio::spawn(async move { engine.replica_loop().await });
        Ok(())
    }

    /// Renews the heartbeat until shutdown, then removes it so that the others take over at
    /// once. Its own task: a long round must not delay it.
    async fn heartbeat(self) {
        let Some(owners) = &self.inner.owners else {
            return;
        };
        let root = self.inner.root();
        let store = self.inner.store.as_ref();
        let mut next = tokio::time::Instant::now() + owners.tick();
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = root.cancelled() => break,
            }
            // Counted from the start of this beat: a beat the store took long to answer is
            // followed by the next at once, not a whole tick later.
            next = tokio::time::Instant::now() + owners.tick();
            if let Err(e) = owners.beat(store).await {
                tracing::warn!(replica = owners.id(), error = %e, "cannot renew the heartbeat");
            }
        }
        // Others take this replica's work over as soon as its heartbeat is gone: not while its
        // operations and shards still end (a request they sent may still be under way).
        let deadline = tokio::time::Instant::now() + owners.ttl() / 2;
        while tokio::time::Instant::now() < deadline
            && !(self.inner.tasks.lock().await.is_empty() && self.inner.shards.is_idle())
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if let Err(e) = owners.leave(store).await {
            tracing::warn!(replica = owners.id(), error = %e, "cannot remove the heartbeat");
        }
    }

    async fn replica_loop(self) {
        let Some(owners) = &self.inner.owners else {
            return;
        };
        let root = self.inner.root();
        loop {
            // A round every tick, and at once when a lapsed lease was renewed: applies wait
            // for it.
            let due = tokio::time::Instant::now() + owners.tick();
            loop {
                let renewal = owners.renewal();
                if owners.needs_check() {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(due) => break,
                    () = renewal => {}
                    () = root.cancelled() => return,
                }
            }
            if let Err(e) = self.replica_round().await {
                tracing::warn!(replica = owners.id(), error = %e, "a replica round failed");
            }
        }
    }

    /// One round (see the module).
    async fn replica_round(&self) -> Result<()> {
        let Some(owners) = &self.inner.owners else {
            return Ok(());
        };
        let store = self.inner.store.as_ref();
        // Taken before the owners are read: this round vouches for the beats acknowledged so
        // far (see `owner`'s fencing).
        let beats = owners.beats();
        owners.observe(store).await?;
        // What runs here first: a context claimed after this snapshot is not mistaken for one
        // another replica took.
        let running: HashMap<ContextId, (Option<OpCtl>, Option<u64>)> = self
            .inner
            .tasks
            .lock()
            .await
            .iter()
            .map(|(id, t)| (*id, (t.op(), t.fence)))
            .collect();
        let held = owners.holders(store).await?;
        let mine = |id: &ContextId| owners.is_me(*id, held.get(id));
        let active: HashSet<ContextId> = AppContext::active_contexts(store)
            .await?
            .into_iter()
            .collect();
        let deployed: HashSet<ContextId> = AppContext::registered(store, Registry::Deployed)
            .await?
            .into_iter()
            .collect();
        let followed: Vec<ContextId> = lock(&self.inner.readiness_tokens).keys().copied().collect();

        for (id, (op, fence)) in &running {
            let holder = held.get(id);
            if holder.is_none_or(|h| h.replica != owners.id() || Some(h.token) != *fence) {
                tracing::warn!(ctx = %id, "another replica took this context over");
                if let Some(op) = op {
                    op.abort(Abort::Shutdown);
                }
            }
        }
        // A shard running here follows its clusters until it ends.
        let sharing = self.inner.shards.contexts();
        for id in followed
            .iter()
            .filter(|id| !running.contains_key(id) && !sharing.contains(id))
        {
            if !mine(id) {
                self.inner.forget_readiness(*id);
            } else if !deployed.contains(id) && !active.contains(id) {
                self.inner.forget_readiness(*id);
                owners.release(store, *id).await?;
            }
        }
        // Before a lapsed lease lets applies go on: shards taken over or withdrawn meanwhile.
        self.check_shards().await?;
        owners.checked(beats);

        // Owner keys of contexts that are gone would pile up: nothing runs or follows them.
        for &id in held.keys() {
            if active.contains(&id) || deployed.contains(&id) || running.contains_key(&id) {
                continue;
            }
            let ctx = AppContext::load(Arc::clone(&self.inner.store), id).await;
            if ctx.found()?.is_none() {
                owners.forget(store, id).await?;
            }
        }

        for &id in &active {
            if running.contains_key(&id) || !owners.claimable(held.get(&id)) {
                continue;
            }
            if owners.claim(store, id).await?.is_some() {
                match AppContext::load(Arc::clone(&self.inner.store), id).await {
                    Ok(ctx) => self.ensure_task(&mut *self.inner.tasks.lock().await, ctx),
                    Err(e) => tracing::warn!(ctx = %id, error = %e, "cannot resume a context"),
                }
            }
        }
        let followed: HashSet<ContextId> = followed.into_iter().collect();
        let mut follow = Vec::new();
        for &id in &deployed {
            if active.contains(&id) || followed.contains(&id) || !owners.claimable(held.get(&id)) {
                continue;
            }
            if owners.claim(store, id).await?.is_some() {
                follow.push(id);
            }
        }
        if !follow.is_empty() {
            // Marked followed now, so that the next round does not follow them again, and
            // followed in a task of their own, so that the rounds go on.
            for &id in &follow {
                self.inner.readiness_token(id);
            }
            let engine = self.clone();
            tokio::spawn(async move { engine.follow_deployed(follow).await });
        }

        self.take_shards().await?;

        for (id, (op, _)) in running {
            let Some(op) = op.filter(|op| {
                matches!(op.event, RsyncEvent::Instantiate | RsyncEvent::Update) && mine(&id)
            }) else {
                continue;
            };
            let ctx = self
                .inner
                .fenced(AppContext::load(Arc::clone(&self.inner.store), id).await?);
            let queued = ctx
                .event_queue()
                .await?
                .iter()
                .any(|e| e.status == QueueStatus::Pending && e.event == RsyncEvent::Terminate);
            if queued {
                ctx.set_pending_terminate(true).await?;
                op.abort(Abort::Terminate);
            }
        }
        Ok(())
    }
}
