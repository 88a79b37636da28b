//! One large operation shared by the replicas, by cluster.
//!
//! A context's owner (its leader) runs an operation alone unless it acts on at least
//! [`ReplicaConfig::share_from`](super::ReplicaConfig::share_from) clusters and other replicas
//! are alive. Then it splits the clusters, in name order, into one shard per live replica and
//! publishes each under `/rsyncshard/<ctx>.<event>.<n>/` (`event`: the operation's place in the
//! context's queue), naming the replica meant to run it. A replica runs a shard once it holds
//! the shard's owner key `/rsyncowner/<ctx>.<event>.<n>/`, taken by the same compare-and-set and
//! takeover rules as a context's (see [`super::owner`]): the shards meant for it at once, another
//! replica's when that one is dead or has left it unclaimed for a whole time to live. A shard's
//! writes are fenced by its owner key and its outcome is recorded under
//! `/rsyncsharddone/<ctx>.<event>.<n>/`. So each cluster is worked on by one replica at a time,
//! and the shard of a replica that dies resumes on another as a context does: what was applied
//! is skipped, the rest is applied once (a shard started before runs resumed: what its clusters
//! recorded as applied is skipped; a fresh one runs as the operation would alone).
//!
//! The leader waits for every outcome, then finishes the operation as if it had run it alone
//! (the context's status, its queue) and follows the readiness of all its clusters; a shard's
//! runner stops following its clusters when the shard ends (its followers wrote through the
//! shard's fence). A leader that dies is replaced by the replica that takes its context over,
//! which finds the shards published and waits for them. An operation cut short (a terminate,
//! the stop flag), or one whose event is skipped or left behind in any way, has its shards
//! withdrawn before the context's next step: the leader goes on once no live replica holds one,
//! so that nothing of it is applied any more. A replica's round also stops its shards whose
//! record is gone or whose owner key another took, before its lapsed lease lets applies go on.
//!
//! Within a shard, an app waits for the apps it depends on on the shard's clusters only.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use emco_appcontext::AppContext;
use emco_appcontext::context::QueueElement;
use emco_core::lifecycle::RsyncEvent;
use emco_core::poison::lock;
use emco_core::{ContextId, Error, Result};
use emco_store::{AppContextStore, Compare, Op, Txn};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::owner::{OWNERS, Owners, owner_key_of};
use super::{Abort, OpCtl, Rsync, run};

const SHARDS: &str = "/rsyncshard/";
const OUTCOMES: &str = "/rsyncsharddone/";
/// A shard some replica started: whoever takes it next resumes it.
const STARTED: &str = "/rsyncshardrun/";

/// One replica's part of a shared operation, as published.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Shard {
    event: RsyncEvent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ucid: Option<String>,
    clusters: Vec<String>,
    /// The replica meant to run it.
    replica: String,
    /// Whether the operation resumes (what was recorded applied is skipped), as it would run
    /// alone; a shard taken again after a start resumes anyway.
    #[serde(default)]
    resume: bool,
    /// Withdrawn: whoever runs it stops, and nobody takes it. Kept until no live replica holds
    /// it, so that a withdrawal cut short (an error, a new owner) is finished by the next.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    withdrawn: bool,
}

/// How a shard ended.
#[derive(Debug, Serialize, Deserialize)]
struct Outcome {
    failed: bool,
    /// The replica that ran it.
    replica: String,
}

/// A shard running here.
#[derive(Debug)]
struct Running {
    ctx: ContextId,
    /// The owner key revision it was taken with.
    token: u64,
    op: OpCtl,
}

/// The shards of this replica: those running, and since when others were seen unclaimed.
#[derive(Debug, Default)]
pub(super) struct Shards {
    running: Mutex<HashMap<String, Running>>,
    unclaimed: Mutex<HashMap<String, Instant>>,
    /// One look for shards at a time (the rounds' and a waiting leader's): a shard that ends
    /// between two looks' checks is not started again.
    looking: tokio::sync::Mutex<()>,
}

impl Shards {
    /// Whether no shard runs here.
    pub(super) fn is_idle(&self) -> bool {
        lock(&self.running).is_empty()
    }

    /// The contexts with a shard running here: their readiness is followed while it runs.
    pub(super) fn contexts(&self) -> HashSet<ContextId> {
        lock(&self.running).values().map(|r| r.ctx).collect()
    }
}

/// The name prefix of the shards of the operation at `index` in the queue of `ctx`.
fn family(ctx: ContextId, index: usize) -> String {
    format!("{ctx}.{index}.")
}

/// The prefix of the owner keys of the shards of `family`.
fn owners_prefix(family: &str) -> String {
    owner_key_of(family).trim_end_matches('/').to_owned()
}

/// The context a shard named `name` belongs to.
fn context_of(name: &str) -> Result<ContextId> {
    let id = name.split('.').next().unwrap_or_default();
    ContextId::from_record(id, format_args!("the shard {name}"))
}

/// `clusters` in one contiguous run per replica of `live`.
fn split(clusters: &[String], live: &[String]) -> Vec<(String, Vec<String>)> {
    let per = clusters.len().div_ceil(live.len().max(1)).max(1);
    live.iter()
        .zip(clusters.chunks(per))
        .map(|(replica, part)| (replica.clone(), part.to_vec()))
        .collect()
}

/// Gives up the owner key of shard `name` if this replica holds it.
async fn owners_release(engine: &Rsync, name: &str) -> Result<()> {
    match &engine.inner.owners {
        Some(owners) => {
            owners
                .release_key(engine.inner.store.as_ref(), &owner_key_of(name))
                .await
        }
        None => Ok(()),
    }
}

/// The name of `key` under `prefix`: what is between them and the trailing slash.
fn name_under(prefix: &str, key: &str) -> Option<String> {
    Some(key.strip_prefix(prefix)?.strip_suffix('/')?.to_owned())
}

/// Whether the record `value` of a shard says it is gone: absent, withdrawn, or not a record
/// (nobody can run it).
fn gone(value: Option<&[u8]>) -> bool {
    /// What of a record tells whether it is withdrawn.
    #[derive(Deserialize)]
    struct Mark {
        #[serde(default)]
        withdrawn: bool,
    }
    value.is_none_or(|v| serde_json::from_slice::<Mark>(v).map_or(true, |m| m.withdrawn))
}

/// The shards of `family` under `base` (records or outcomes): their names and values.
async fn named(
    store: &dyn AppContextStore,
    base: &str,
    family: &str,
) -> Result<Vec<(String, Vec<u8>)>> {
    Ok(store
        .list_all(&format!("{base}{family}"), false)
        .await?
        .into_iter()
        .filter_map(|kv| Some((name_under(base, &kv.key)?, kv.value.to_vec())))
        .collect())
}

/// The names of the keys under `prefix`.
async fn names(store: &dyn AppContextStore, prefix: &str) -> Result<Vec<String>> {
    Ok(store
        .list_all(prefix, true)
        .await?
        .into_iter()
        .filter_map(|kv| name_under(prefix, &kv.key))
        .collect())
}

fn decode<T: for<'de> Deserialize<'de>>(name: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::internal(format!("the shard record {name} cannot be read: {e}")))
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::internal(format!("cannot encode a shard: {e}")))
}

impl Rsync {
    /// Runs `element`, the event at `index` of `ctx`'s queue, shared among the replicas when it
    /// is large enough (see the module): `Some(failed)`, or `None` when `run` must run it alone.
    pub(super) async fn shared(
        &self,
        ctx: &AppContext,
        index: usize,
        element: &QueueElement,
        run: &run::Run,
        op: &OpCtl,
        resume: bool,
    ) -> Result<Option<bool>> {
        let Some(owners) = &self.inner.owners else {
            return Ok(None);
        };
        if element.event == RsyncEvent::Read {
            return Ok(None);
        }
        let family = family(ctx.id(), index);
        // Through the context's fenced store: a leader that lost the context publishes nothing.
        let store = ctx.store();
        let mut shards: Vec<(String, Shard)> = Vec::new();
        for (name, bytes) in named(store.as_ref(), SHARDS, &family).await? {
            shards.push((name.clone(), decode(&name, &bytes)?));
        }
        if op.aborted() == Some(Abort::Shutdown) {
            // Left as it is for the next start or owner.
            return Ok(Some(true));
        }
        if shards.iter().any(|(_, s)| s.withdrawn) {
            // A withdrawal cut short: finished before the names are used again.
            self.withdraw(store, &family).await?;
            shards.clear();
        }
        let Some(from) = owners.share_from().filter(|_| !op.token.is_cancelled()) else {
            // Run alone (or cut short at once): nobody else may still work on it.
            if !shards.is_empty() {
                self.withdraw(store, &family).await?;
            }
            return Ok(None);
        };
        if shards.is_empty() {
            let clusters = run.all_clusters().await?;
            let live = owners.live();
            if clusters.len() < from || live.len() < 2 {
                return Ok(None);
            }
            // Anything left under these names (outcomes, keys) must not count for the new shards.
            self.withdraw(store, &family).await?;
            let mut txn = Txn::new();
            for (n, (replica, part)) in split(&clusters, &live).into_iter().enumerate() {
                let shard = Shard {
                    event: element.event,
                    ucid: element.ucid.clone(),
                    clusters: part,
                    replica,
                    resume,
                    withdrawn: false,
                };
                let name = format!("{family}{n}");
                txn = txn.op(Op::put(format!("{SHARDS}{name}/"), encode(&shard)?));
                shards.push((name, shard));
            }
            store.txn(txn).await?;
            tracing::info!(
                clusters = clusters.len(),
                replicas = ?live,
                "operation shared among the replicas"
            );
        }
        // The readiness of what goes is followed here, where others cannot stop it.
        if matches!(
            element.event,
            RsyncEvent::Terminate | RsyncEvent::UpdateDelete
        ) {
            run.forget_readiness().await?;
        }
        let failed = loop {
            if let Err(e) = self.take_shards().await {
                tracing::warn!(error = %e, "cannot look for shards to run");
            }
            // A store that fails a look is asked again: leaving would leave the shards running.
            match named(store.as_ref(), OUTCOMES, &family).await {
                Ok(outcomes)
                    if shards
                        .iter()
                        .all(|(n, _)| outcomes.iter().any(|(o, _)| o == n)) =>
                {
                    let mut failed = false;
                    for (name, bytes) in &outcomes {
                        let outcome: Outcome = decode(name, bytes)?;
                        tracing::debug!(shard = %name, replica = %outcome.replica, failed = outcome.failed, "shard outcome");
                        failed |= outcome.failed;
                    }
                    if let Err(e) = self.clear(store, &family).await {
                        tracing::warn!(error = %e, "cannot clear the shards; the context's next step does");
                    }
                    break failed;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read the shards' outcomes"),
            }
            if op.token.is_cancelled() {
                tokio::time::sleep(owners.tick() / 4).await;
            } else {
                tokio::select! {
                    () = tokio::time::sleep(owners.tick() / 4) => {}
                    () = op.token.cancelled() => {}
                }
            }
            match op.aborted() {
                // Stopped: the shards stop by the context's stop flag, and their outcomes say
                // failed; the operation ends with them.
                None | Some(Abort::Stop) => {}
                // The next owner of the context finds the shards and waits for them.
                Some(Abort::Shutdown) => return Ok(Some(true)),
                Some(Abort::Terminate) => {
                    self.withdraw(store, &family).await?;
                    return Ok(Some(true));
                }
            }
        };
        // The clusters others ran (or this replica, through a shard's fence) are followed here
        // from now on, as a deploy's are, failed or not.
        if matches!(element.event, RsyncEvent::Instantiate | RsyncEvent::Update) {
            let follow = OpCtl::new(RsyncEvent::Read, &self.inner.root());
            run::Run::new(Arc::clone(&self.inner), ctx.clone(), follow)
                .await
                .limited_to(element.clusters.as_deref())
                .follow_deployed()
                .await?;
        }
        Ok(Some(failed))
    }

    /// Withdraws the shards of every operation of `ctx` but the one at `keep` in its queue:
    /// their events were skipped, failed or left behind, and nothing of them may go on.
    pub(super) async fn withdraw_others(
        &self,
        ctx: &AppContext,
        keep: Option<usize>,
    ) -> Result<()> {
        if self.inner.owners.is_none() {
            return Ok(());
        }
        let store = ctx.store();
        // Work goes on only while a record is published (a shard's run stops when it is gone);
        // what a withdrawal cut short leaves besides is cleared before its names are used again.
        let prefix = format!("{SHARDS}{}.", ctx.id());
        let mut families = std::collections::BTreeSet::new();
        for kv in store.list_all(&prefix, true).await? {
            let index = kv
                .key
                .strip_prefix(&prefix)
                .and_then(|rest| rest.split('.').next()?.parse::<usize>().ok());
            families.extend(index.filter(|i| Some(*i) != keep));
        }
        for index in families {
            tracing::info!(
                event = index,
                "withdrawing the shards of an operation left behind"
            );
            self.withdraw(store, &family(ctx.id(), index)).await?;
        }
        Ok(())
    }

    /// Withdraws the shards of `family` and waits until no live replica holds one.
    async fn withdraw(&self, store: &Arc<dyn AppContextStore>, family: &str) -> Result<()> {
        let Some(owners) = &self.inner.owners else {
            return Ok(());
        };
        let mut txn = Txn::new();
        for (name, bytes) in named(store.as_ref(), SHARDS, family).await? {
            if !gone(Some(&bytes)) {
                // Whatever else it says (one that cannot be read is gone already).
                let mut record: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| Error::internal(format!("shard {name}: {e}")))?;
                record["withdrawn"] = serde_json::Value::Bool(true);
                txn = txn.op(Op::put(format!("{SHARDS}{name}/"), encode(&record)?));
            }
        }
        store.txn(txn).await?;
        let root = self.inner.root();
        let prefix = owners_prefix(family);
        loop {
            let mut busy = false;
            // Not while a look is between its claim and its run: a key it holds would be let go
            // here and the shard started there after all.
            let looking = self.inner.shards.looking.lock().await;
            for kv in store.list_all(&prefix, false).await? {
                let holder = String::from_utf8_lossy(&kv.value).into_owned();
                let name = name_under(OWNERS, &kv.key).unwrap_or_default();
                if holder == owners.id() {
                    // Held here without a run (a release that failed, a restart under the same
                    // name): let go; a run here lets go when it ends.
                    if lock(&self.inner.shards.running).contains_key(&name) {
                        busy = true;
                    } else {
                        owners.release_key(store.as_ref(), &kv.key).await?;
                    }
                } else if owners.dead_beat(store.as_ref(), &holder).await?.is_none() {
                    // Alive, or not seen yet (then alive from now).
                    busy = true;
                }
            }
            drop(looking);
            if !busy {
                break;
            }
            if root.is_cancelled() {
                // Cleared by the next owner: a live holder may still be at work.
                return Err(Error::unavailable("shutting down"));
            }
            tokio::time::sleep(owners.tick() / 4).await;
        }
        self.clear(store, family).await
    }

    /// Removes what the shards of `family` left: their records, outcomes and owner keys.
    async fn clear(&self, store: &Arc<dyn AppContextStore>, family: &str) -> Result<()> {
        let txn = Txn::new()
            .op(Op::delete_prefix(format!("{SHARDS}{family}")))
            .op(Op::delete_prefix(format!("{OUTCOMES}{family}")))
            .op(Op::delete_prefix(format!("{STARTED}{family}")))
            .op(Op::delete_prefix(owners_prefix(family)));
        store.txn(txn).await.map(drop)
    }

    /// Claims and starts the shards this replica may run (see the module).
    pub(super) async fn take_shards(&self) -> Result<()> {
        let Some(owners) = &self.inner.owners else {
            return Ok(());
        };
        let _one = self.inner.shards.looking.lock().await;
        let store = self.inner.store.as_ref();
        // Names first: a shard's record (its clusters) is read only when it may be taken.
        let published = names(store, SHARDS).await?;
        let done: HashSet<String> = names(store, OUTCOMES).await?.into_iter().collect();
        lock(&self.inner.shards.unclaimed).retain(|name, _| published.contains(name));
        for name in published {
            if lock(&self.inner.shards.running).contains_key(&name) {
                continue;
            }
            let (record_key, outcome_key) =
                (format!("{SHARDS}{name}/"), format!("{OUTCOMES}{name}/"));
            let Some(record) = store.get(&record_key).await? else {
                continue;
            };
            let shard: Shard = match decode(&name, &record.value) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "a shard left alone");
                    continue;
                }
            };
            let key = owner_key_of(&name);
            if shard.withdrawn {
                // Nobody runs it any more; a key of this replica's left on it (a release that
                // failed, a restart under the same name) would hold the withdrawal up.
                owners.release_key(store, &key).await?;
                continue;
            }
            if done.contains(&name) {
                continue;
            }
            match owners.holder(store, &key).await? {
                // This replica's and not running (its run ended without an outcome), or a
                // dead replica's.
                Some(h) if h.replica == owners.id() || owners.claimable(Some(&h)) => {}
                Some(_) => continue,
                None => {
                    let meant = shard.replica == owners.id();
                    if !meant && owners.alive(&shard.replica) && !self.long_unclaimed(&name) {
                        continue;
                    }
                }
            }
            // Taken only while it is published and has no outcome: a shard that ended (its
            // operation finished and cleared since) is never run again.
            let still = vec![
                Compare::mod_revision(record_key.as_str(), record.mod_revision),
                Compare::absent(outcome_key.as_str()),
            ];
            let Some(token) = owners.claim_key(store, &key, still).await? else {
                continue;
            };
            // Held by this replica already (the claim above asked nothing): looked at again.
            let record = store.get(&record_key).await?;
            if gone(record.as_ref().map(|kv| kv.value.as_ref()))
                || store.get(&outcome_key).await?.is_some()
            {
                owners.release_key(store, &key).await?;
                continue;
            }
            // Still this replica's as claimed: a look that stalled past the time to live may
            // have lost it meanwhile.
            if !owners.holds_key(store, &key, token).await? {
                continue;
            }
            let ctx = context_of(&name)?;
            let op = OpCtl::new(shard.event, &self.inner.root());
            let running = Running {
                ctx,
                token,
                op: op.clone(),
            };
            lock(&self.inner.shards.running).insert(name.clone(), running);
            let engine = self.clone();
            let span = tracing::info_span!(parent: None, "shard", shard = %name);
            let event = format!("{:?}", shard.event);
            self.inner.metrics.shards.add(&[&event], 1.0);
            tokio::spawn(
                async move {
                    let end = match engine.run_shard(&name, &shard, token, &op).await {
                        Ok(end) => end,
                        Err(e) => {
                            tracing::warn!(error = %e, "a shard failed; another look runs it again");
                            "left"
                        }
                    };
                    let metrics = &engine.inner.metrics;
                    metrics.shards.add(&[&event], -1.0);
                    metrics.shards_run.inc(&[&event, end]);
                    // Let go on every end: a withdrawal waits for it, another look may run it.
                    if let Err(e) = owners_release(&engine, &name).await {
                        tracing::warn!(error = %e, "cannot let a shard go");
                    }
                    lock(&engine.inner.shards.running).remove(&name);
                }
                .instrument(span),
            );
        }
        Ok(())
    }

    /// Whether the shard `name`, unclaimed, was first seen so a whole time to live ago.
    fn long_unclaimed(&self, name: &str) -> bool {
        let Some(owners) = &self.inner.owners else {
            return false;
        };
        let mut unclaimed = lock(&self.inner.shards.unclaimed);
        let since = *unclaimed
            .entry(name.to_owned())
            .or_insert_with(Instant::now);
        since.elapsed() >= owners.ttl()
    }

    /// Runs the shard `name` this replica holds at `token` under `op`, and records its
    /// outcome; how it ended: `done`, `failed`, `withdrawn` or `left` (to its next holder).
    async fn run_shard(
        &self,
        name: &str,
        shard: &Shard,
        token: u64,
        op: &OpCtl,
    ) -> Result<&'static str> {
        let Some(owners) = &self.inner.owners else {
            return Ok("left");
        };
        let id = context_of(name)?;
        let key = owner_key_of(name);
        let fenced = Owners::fence_key(&self.inner.store, key.clone(), token);
        let ctx = AppContext::load(Arc::clone(&self.inner.store), id)
            .await?
            .through(Arc::clone(&fenced));
        if ctx.stop_flag().await? {
            op.abort(Abort::Stop);
        }
        let other = match &shard.ucid {
            Some(u) => Some(Self::other_context(&ctx, u).await?),
            None => None,
        };
        tracing::info!(
            event = ?shard.event,
            clusters = shard.clusters.len(),
            "running a shard of a shared operation"
        );
        // Resumed when asked or when another run of it started before: what that one applied
        // is skipped, not applied again.
        let started = format!("{STARTED}{name}/");
        let resume = shard.resume || self.inner.store.get(&started).await?.is_some();
        fenced.put(&started, bytes::Bytes::new()).await?;
        let run = run::Run::new(Arc::clone(&self.inner), ctx.clone(), op.clone())
            .await
            .limited_to(Some(&shard.clusters));
        let ended = CancellationToken::new();
        let (outcome, ()) = tokio::join!(
            async {
                let outcome = run.execute(shard.event, other.as_ref(), resume).await;
                ended.cancel();
                outcome
            },
            self.watch_shard(name, &ctx, token, op, &ended)
        );
        let failed = outcome.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the shard's operation failed");
            true
        });
        // Its followers write through the shard's fence, which goes with it: the context's
        // owner follows these clusters from now on (before the outcome, which it waits for).
        let clusters: HashSet<String> = shard.clusters.iter().cloned().collect();
        self.inner.forget_readiness_on(id, &clusters);
        match op.aborted() {
            // Resumed by whoever holds it next.
            Some(Abort::Shutdown) => Ok("left"),
            // Nobody waits for it.
            Some(Abort::Terminate) => Ok("withdrawn"),
            None | Some(Abort::Stop) => {
                let outcome = Outcome {
                    failed: failed || op.aborted().is_some(),
                    replica: owners.id().to_owned(),
                };
                fenced
                    .put(&format!("{OUTCOMES}{name}/"), encode(&outcome)?.into())
                    .await?;
                tracing::info!(failed = outcome.failed, "shard done");
                Ok(if outcome.failed { "failed" } else { "done" })
            }
        }
    }

    /// Stops the shards running here whose record is gone (`Terminate`: withdrawn) or whose
    /// owner key another replica holds (`Shutdown`): a round calls it before a lapsed lease
    /// lets applies go on, so a replica taken for dead does not go on with a shard.
    pub(super) async fn check_shards(&self) -> Result<()> {
        // Not while a look claims one: a claim it has not recorded as running yet is checked by
        // the look itself.
        let _one = self.inner.shards.looking.lock().await;
        let running: Vec<(String, u64, OpCtl)> = lock(&self.inner.shards.running)
            .iter()
            .map(|(name, r)| (name.clone(), r.token, r.op.clone()))
            .collect();
        for (name, token, op) in running {
            if let Some(why) = self.cut_short(&name, token).await? {
                op.abort(why);
            }
        }
        Ok(())
    }

    /// Until `ended`: cuts the shard's operation short when the shard is withdrawn
    /// (`Terminate`), another replica took it over (`Shutdown`: nothing more of it here) or the
    /// context's stop flag is set (`Stop`).
    async fn watch_shard(
        &self,
        name: &str,
        ctx: &AppContext,
        token: u64,
        op: &OpCtl,
        ended: &CancellationToken,
    ) {
        let Some(owners) = &self.inner.owners else {
            return;
        };
        loop {
            tokio::select! {
                () = tokio::time::sleep(owners.tick() / 4) => {}
                () = ended.cancelled() => return,
            }
            // A look the store fails is made again at the next tick.
            if let Ok(Some(why)) = self.cut_short(name, token).await {
                return op.abort(why);
            }
            if ctx.stop_flag().await.unwrap_or(false) {
                return op.abort(Abort::Stop);
            }
        }
    }

    /// Why the shard `name` run here at `token` must stop, if it must: withdrawn (`Terminate`)
    /// or taken over by another replica (`Shutdown`: nothing more of it here).
    async fn cut_short(&self, name: &str, token: u64) -> Result<Option<Abort>> {
        let Some(owners) = &self.inner.owners else {
            return Ok(None);
        };
        let store = self.inner.store.as_ref();
        let record = store.get(&format!("{SHARDS}{name}/")).await?;
        if gone(record.as_ref().map(|kv| kv.value.as_ref())) {
            return Ok(Some(Abort::Terminate));
        }
        if !owners.holds_key(store, &owner_key_of(name), token).await? {
            tracing::warn!(shard = %name, "another replica took this shard over");
            return Ok(Some(Abort::Shutdown));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_are_split_in_one_run_per_replica() {
        let clusters: Vec<String> = (0..7).map(|i| format!("p+c{i}")).collect();
        let live = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let parts = split(&clusters, &live);
        let sizes: Vec<(&str, usize)> = parts.iter().map(|(r, p)| (r.as_str(), p.len())).collect();
        assert_eq!(sizes, [("a", 3), ("b", 3), ("c", 1)]);
        let all: Vec<String> = parts.into_iter().flat_map(|(_, p)| p).collect();
        assert_eq!(all, clusters, "every cluster once, in order");
        // Fewer clusters than replicas: the last replicas get none.
        assert_eq!(split(&clusters[..2], &live).len(), 2);
    }

    #[test]
    fn a_record_is_gone_when_absent_withdrawn_or_unreadable() {
        let live = Shard {
            event: RsyncEvent::Instantiate,
            ucid: None,
            clusters: vec!["p+c1".into()],
            replica: "a".into(),
            resume: false,
            withdrawn: false,
        };
        let bytes = encode(&live).unwrap();
        assert!(!gone(Some(&bytes)));
        assert!(!String::from_utf8_lossy(&bytes).contains("withdrawn"));
        let withdrawn = encode(&Shard {
            withdrawn: true,
            ..live
        })
        .unwrap();
        assert!(gone(Some(&withdrawn)));
        assert!(gone(None));
        assert!(gone(Some(b"not json")), "nobody can run it");
    }

    #[test]
    fn a_shard_names_its_context() {
        assert_eq!(context_of("42.3.1").unwrap(), ContextId::new(42));
        assert!(context_of("x.3.1").is_err());
    }
}
