//! Which replica works on which context when several engines share one AppContext store.
//!
//! Each replica renews its heartbeat key `/rsyncreplica/<id>/` every third of its time to live.
//! A context with queued work has an owner key `/rsyncowner/<ctx>/` naming the one replica that
//! runs its task; the others leave it alone. A replica takes another for dead when that one's
//! heartbeat key has not changed for a whole time to live *as measured by its own monotonic
//! clock* since it first saw that version (how Kubernetes' leader election judges a lease:
//! never by comparing the clocks of two machines), or when the key is gone. Its contexts are
//! then claimed by compare-and-set on their owner keys, so exactly one survivor takes each, and
//! resumed as after a restart: what was applied is skipped, the rest is applied once.
//!
//! This needs nothing of the store but revisions and compare-and-set, so it works on every
//! backend; for several processes the store is etcd.
//!
//! ## Fencing
//!
//! A replica cut off from the store (alive, its requests stalled or refused) is taken for dead
//! and its contexts are taken over; it must not act on them any more, even with requests that
//! were in flight or that it sends once it is reachable again:
//! - a takeover is conditioned on the dead replica's heartbeat being still the version judged
//!   dead, so a beat that lands first keeps the context with its owner;
//! - every write of a context's work goes through a [`FencedStore`](emco_store::FencedStore)
//!   whose token is the owner key's revision when this replica took it: after a takeover the
//!   store refuses them, however late they arrive;
//! - the clusters cannot check a token, so this replica holds a lease on its own clock: half the
//!   time to live from the moment it *sent* its last acknowledged beat (others wait a whole time
//!   to live from when they *saw* it). Past that, no apply or delete starts and one in flight is
//!   abandoned at three quarters; and a lease that lapsed is taken up again only after a round
//!   read the owner keys after the beat that renewed it, and stopped what others took meanwhile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use emco_core::poison::lock;
use emco_core::{ContextId, Result};
use emco_store::{AppContextStore, Compare, FencedStore, ListOptions, Op, Txn};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Where replicas keep their heartbeats, one key per replica id under it.
pub const HEARTBEATS: &str = "/rsyncreplica/";
/// Where owner keys are, one per context or shard (see [`owner_key_of`]).
pub(crate) const OWNERS: &str = "/rsyncowner/";
/// A heartbeat unchanged this many times the time to live is a replica gone for good (crashed,
/// or its pod replaced by one of another name): it is removed, so that such keys do not pile up
/// and a replica started later does not count it alive for its first time to live.
const FORGOTTEN_AFTER_TTLS: u32 = 3;

/// How an engine shares its store with other replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// This replica's name, unique among the replicas (for example host name and pid).
    pub id: String,
    /// How long a replica may go without renewing its heartbeat before others take over its
    /// contexts. Takeover happens between one and about one and a third of this after a crash.
    pub ttl: Duration,
    /// An operation on at least this many clusters is shared by cluster among the live
    /// replicas (see [`super::share`]); `None`: every operation is run by its context's owner
    /// alone.
    pub share_from: Option<usize>,
}

impl ReplicaConfig {
    /// A replica named `id` with a time to live of `ttl`, running each operation alone.
    pub fn new(id: impl Into<String>, ttl: Duration) -> Self {
        Self {
            id: id.into(),
            ttl,
            share_from: None,
        }
    }

    /// Shares an operation on at least `clusters` clusters among the live replicas.
    #[must_use]
    pub fn sharing_from(mut self, clusters: usize) -> Self {
        self.share_from = Some(clusters.max(1));
        self
    }
}

/// The ownership of contexts by this replica.
#[derive(Debug)]
pub(crate) struct Owners {
    config: ReplicaConfig,
    /// The heartbeat version of each other replica, and when this replica first saw it.
    seen: Mutex<HashMap<String, (u64, Instant)>>,
    /// The owner key revision (fencing token) of each context this replica took.
    tokens: Mutex<HashMap<ContextId, u64>>,
    lease: Mutex<Lease>,
    /// Told when the lease is renewed, or must be checked by a round.
    renewed: Notify,
}

/// This replica's own view of its heartbeat (see the module).
#[derive(Debug, Default)]
struct Lease {
    /// When the last acknowledged beat was sent.
    sent: Option<Instant>,
    /// How many beats were acknowledged.
    beats: u64,
    /// Set when the lease lapsed before beat number `n` was acknowledged: ownership is checked
    /// by a round that starts after it.
    check_after: Option<u64>,
}

/// The owner of a context, from [`Owners::holders`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    pub(crate) replica: String,
    /// The owner key's revision: the owner's fencing token.
    pub(crate) token: u64,
}

impl Holder {
    /// The holder an owner key names.
    fn of(kv: &emco_store::KeyValue) -> Self {
        Self {
            replica: String::from_utf8_lossy(&kv.value).into_owned(),
            token: kv.mod_revision,
        }
    }
}

fn heartbeat_key(id: &str) -> String {
    format!("{HEARTBEATS}{id}/")
}

fn owner_key(ctx: ContextId) -> String {
    owner_key_of(&ctx.to_string())
}

/// The owner key of work named `name`: a context (its id) or a shard of one (see
/// [`super::share`]).
pub(crate) fn owner_key_of(name: &str) -> String {
    format!("{OWNERS}{name}/")
}

impl Owners {
    pub(crate) fn new(config: ReplicaConfig) -> Self {
        Self {
            config,
            seen: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
            lease: Mutex::new(Lease::default()),
            renewed: Notify::new(),
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.config.id
    }

    /// From how many clusters an operation is shared among the replicas.
    pub(crate) fn share_from(&self) -> Option<usize> {
        self.config.share_from
    }

    /// The replicas alive as this one last looked, itself included, by name.
    pub(crate) fn live(&self) -> Vec<String> {
        let seen = lock(&self.seen);
        let mut live: Vec<String> = seen
            .iter()
            .filter(|(id, (_, at))| **id != self.config.id && at.elapsed() < self.config.ttl)
            .map(|(id, _)| id.clone())
            .collect();
        drop(seen);
        live.push(self.config.id.clone());
        live.sort();
        live
    }

    /// How long a replica may be silent before it counts as dead.
    pub(crate) fn ttl(&self) -> Duration {
        self.config.ttl
    }

    /// How often to renew the heartbeat and look at the others.
    pub(crate) fn tick(&self) -> Duration {
        self.config.ttl / 3
    }

    /// Renews this replica's heartbeat and, once the store acknowledged it, the lease, from
    /// when the beat was sent.
    pub(crate) async fn beat(&self, store: &dyn AppContextStore) -> Result<()> {
        let sent = Instant::now();
        let stamp = emco_core::time::rfc3339(std::time::SystemTime::now());
        store
            .put(&heartbeat_key(&self.config.id), Bytes::from(stamp))
            .await?;
        let mut lease = lock(&self.lease);
        lease.beats += 1;
        if lease
            .sent
            .is_some_and(|s| s + self.safe() <= Instant::now())
        {
            tracing::warn!(
                replica = %self.config.id,
                "this replica's lease ran out before the store took its heartbeat: its applies \
                 wait until it has checked which contexts it still owns"
            );
            lease.check_after = Some(lease.beats);
        }
        lease.sent = lease.sent.max(Some(sent));
        drop(lease);
        self.renewed.notify_waiters();
        Ok(())
    }

    /// How long after sending an acknowledged beat this replica may start applies.
    fn safe(&self) -> Duration {
        self.config.ttl / 2
    }

    /// Whether ownership must be checked by a round (the lease lapsed and was renewed since).
    pub(crate) fn needs_check(&self) -> bool {
        lock(&self.lease).check_after.is_some()
    }

    /// How many beats were acknowledged: taken by a round before it reads the owners.
    pub(crate) fn beats(&self) -> u64 {
        lock(&self.lease).beats
    }

    /// A round that started after `beats` acknowledged beats stopped what others took.
    pub(crate) fn checked(&self, beats: u64) {
        let mut lease = lock(&self.lease);
        if lease.check_after.is_some_and(|n| beats >= n) {
            lease.check_after = None;
            drop(lease);
            tracing::info!(replica = %self.config.id, "ownership checked: this replica's applies go on");
            self.renewed.notify_waiters();
        }
    }

    /// Until when an apply may run: `None` when none may start now.
    pub(crate) fn lease_end(&self) -> Option<Instant> {
        let lease = lock(&self.lease);
        let sent = lease.sent.filter(|_| lease.check_after.is_none())?;
        (Instant::now() < sent + self.safe()).then(|| sent + self.config.ttl * 3 / 4)
    }

    /// Until when an apply under way may go on (a beat since it started may have moved it):
    /// `None` when it must be abandoned now.
    pub(crate) fn running_end(&self) -> Option<Instant> {
        let lease = lock(&self.lease);
        let end = lease.sent.filter(|_| lease.check_after.is_none())? + self.config.ttl * 3 / 4;
        (Instant::now() < end).then_some(end)
    }

    /// Waits until an apply may start; `false` when `cancel` fired first.
    pub(crate) async fn leased(&self, cancel: &tokio_util::sync::CancellationToken) -> bool {
        loop {
            let renewed = self.renewed.notified();
            // Cancelled first: the round that lets applies go on again has just cut short
            // the operations of the contexts this replica lost.
            if cancel.is_cancelled() {
                return false;
            }
            if self.lease_end().is_some() {
                return true;
            }
            tokio::select! {
                () = renewed => {}
                // The lease also lapses by itself; a renewal is told, a lapse is not.
                () = tokio::time::sleep(self.tick() / 4) => {}
                () = cancel.cancelled() => return false,
            }
        }
    }

    /// Told when the lease was renewed or checked.
    pub(crate) fn renewal(&self) -> tokio::sync::futures::Notified<'_> {
        self.renewed.notified()
    }

    /// The fencing token this replica took `ctx` with.
    pub(crate) fn token(&self, ctx: ContextId) -> Option<u64> {
        lock(&self.tokens).get(&ctx).copied()
    }

    /// `store` fenced by this replica's ownership of `ctx` at `token` (see the module).
    pub(crate) fn fence(
        store: &std::sync::Arc<dyn AppContextStore>,
        ctx: ContextId,
        token: u64,
    ) -> std::sync::Arc<dyn AppContextStore> {
        Self::fence_key(store, owner_key(ctx), token)
    }

    /// `store` fenced by the ownership of the work whose owner key is `key`, at `token`.
    pub(crate) fn fence_key(
        store: &std::sync::Arc<dyn AppContextStore>,
        key: String,
        token: u64,
    ) -> std::sync::Arc<dyn AppContextStore> {
        std::sync::Arc::new(FencedStore::new(std::sync::Arc::clone(store), key, token))
    }

    /// The holder of the owner key `key`, if any.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn holder(
        &self,
        store: &dyn AppContextStore,
        key: &str,
    ) -> Result<Option<Holder>> {
        Ok(store.get(key).await?.as_ref().map(Holder::of))
    }

    /// Removes this replica's heartbeat at a clean shutdown, so that others take over at once.
    pub(crate) async fn leave(&self, store: &dyn AppContextStore) -> Result<()> {
        store
            .delete(&heartbeat_key(&self.config.id))
            .await
            .map(drop)
    }

    /// Reads the other replicas' heartbeats; a changed one counts from now. Removes the
    /// heartbeats this replica saw unchanged [`FORGOTTEN_AFTER_TTLS`] times the time to live.
    pub(crate) async fn observe(&self, store: &dyn AppContextStore) -> Result<()> {
        let page = store.list(HEARTBEATS, ListOptions::default()).await?;
        let now = Instant::now();
        let forgotten = self.config.ttl * FORGOTTEN_AFTER_TTLS;
        let gone: Vec<(String, u64)> = {
            let mut seen = lock(&self.seen);
            let mut live = HashMap::with_capacity(page.kvs.len());
            for kv in page.kvs {
                let Some(id) = kv
                    .key
                    .strip_prefix(HEARTBEATS)
                    .and_then(|k| k.strip_suffix('/'))
                else {
                    continue;
                };
                let since = match seen.get(id) {
                    Some(&(revision, at)) if revision == kv.mod_revision => at,
                    _ => now,
                };
                live.insert(id.to_owned(), (kv.mod_revision, since));
            }
            *seen = live;
            seen.iter()
                .filter(|(id, (_, at))| **id != self.config.id && at.elapsed() >= forgotten)
                .map(|(id, (revision, _))| (id.clone(), *revision))
                .collect()
        };
        for (id, revision) in gone {
            // Unless it beat again meanwhile (then the next look sees it alive). A failure
            // leaves the key for a later round: the round itself goes on.
            match delete_unchanged(store, &heartbeat_key(&id), revision).await {
                Ok(true) => {
                    let mut seen = lock(&self.seen);
                    if seen.get(&id).is_some_and(|(r, _)| *r == revision) {
                        seen.remove(&id);
                    }
                    drop(seen);
                    tracing::info!(replica = %id, "removed the heartbeat of a replica gone for good");
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(replica = %id, error = %e, "cannot remove a stale heartbeat");
                }
            }
        }
        Ok(())
    }

    /// Whether replica `id` counts as alive: this one, or one whose heartbeat changed within
    /// the time to live.
    pub(crate) fn alive(&self, id: &str) -> bool {
        id == self.config.id
            || lock(&self.seen)
                .get(id)
                .is_some_and(|(_, at)| at.elapsed() < self.config.ttl)
    }

    /// The heartbeat revision (0: none) of replica `id` when it counts as dead, read again
    /// first: a replica this one has not seen yet (it started after the last look) is alive
    /// from now, not dead.
    pub(crate) async fn dead_beat(
        &self,
        store: &dyn AppContextStore,
        id: &str,
    ) -> Result<Option<u64>> {
        if id == self.config.id {
            return Ok(None);
        }
        let beat = store.get(&heartbeat_key(id)).await?;
        let mut seen = lock(&self.seen);
        let Some(beat) = beat else {
            seen.remove(id);
            return Ok(Some(0));
        };
        let since = match seen.get(id) {
            Some(&(revision, at)) if revision == beat.mod_revision => at,
            _ => Instant::now(),
        };
        seen.insert(id.to_owned(), (beat.mod_revision, since));
        Ok((since.elapsed() >= self.config.ttl).then_some(beat.mod_revision))
    }

    /// The owner of every owned context, read in one listing.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn holders(
        &self,
        store: &dyn AppContextStore,
    ) -> Result<HashMap<ContextId, Holder>> {
        let page = store.list(OWNERS, ListOptions::default()).await?;
        Ok(page
            .kvs
            .into_iter()
            .filter_map(|kv| {
                let id = kv
                    .key
                    .strip_prefix(OWNERS)?
                    .strip_suffix('/')?
                    .parse()
                    .ok()?;
                Some((id, Holder::of(&kv)))
            })
            .collect())
    }

    /// Whether `holder` (from [`Self::holders`]) is this replica as it took the context (with
    /// the token it knows).
    pub(crate) fn is_me(&self, ctx: ContextId, holder: Option<&Holder>) -> bool {
        holder.is_some_and(|h| h.replica == self.config.id && self.token(ctx) == Some(h.token))
    }

    /// Whether a context held by `holder` (from [`Self::holders`]) is worth a claim: it has
    /// no owner, or this replica, or a dead one.
    pub(crate) fn claimable(&self, holder: Option<&Holder>) -> bool {
        holder.is_none_or(|h| !self.alive(&h.replica) || h.replica == self.config.id)
    }

    /// Makes this replica the owner of `ctx` if it has none or a dead one; returns its fencing
    /// token when this replica owns it now. A dead owner's context is taken only if its
    /// heartbeat did not change since it was judged dead, in the same transaction.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn claim(
        &self,
        store: &dyn AppContextStore,
        ctx: ContextId,
    ) -> Result<Option<u64>> {
        let token = self.claim_key(store, &owner_key(ctx), Vec::new()).await?;
        if let Some(token) = token {
            lock(&self.tokens).insert(ctx, token);
        }
        Ok(token)
    }

    /// [`Self::claim`] for the owner key `key` of any work (a context or a shard), taken from
    /// another only if `also` holds in the same transaction.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn claim_key(
        &self,
        store: &dyn AppContextStore,
        key: &str,
        also: Vec<Compare>,
    ) -> Result<Option<u64>> {
        let me = Bytes::from(self.config.id.clone());
        let mut txn = also.into_iter().fold(Txn::new(), Txn::when);
        let mut dead = None;
        match store.get(key).await? {
            Some(kv) if kv.value == me => return Ok(Some(kv.mod_revision)),
            Some(kv) => {
                let holder = String::from_utf8_lossy(&kv.value).into_owned();
                let Some(beat) = self.dead_beat(store, &holder).await? else {
                    return Ok(None);
                };
                txn = txn
                    .when(Compare::mod_revision(key, kv.mod_revision))
                    .when(Compare::mod_revision(heartbeat_key(&holder), beat));
                dead = Some(holder);
            }
            None => txn = txn.when(Compare::absent(key)),
        }
        let done = store.txn(txn.op(Op::put(key, me))).await?;
        if !done.succeeded {
            return Ok(None);
        }
        if let Some(dead) = dead {
            tracing::info!(work = %key, replica = %self.config.id, from = %dead, "took over the work of a dead replica");
        }
        Ok(Some(done.revision))
    }

    /// Whether this replica still owns `ctx` as it took it at `token` (another may have taken
    /// it while this one was taken for dead).
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn holds(
        &self,
        store: &dyn AppContextStore,
        ctx: ContextId,
        token: u64,
    ) -> Result<bool> {
        self.holds_key(store, &owner_key(ctx), token).await
    }

    /// [`Self::holds`] for the owner key `key` of any work (a context or a shard).
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn holds_key(
        &self,
        store: &dyn AppContextStore,
        key: &str,
        token: u64,
    ) -> Result<bool> {
        Ok(store.get(key).await?.is_some_and(|kv| {
            kv.mod_revision == token && kv.value.as_ref() == self.config.id.as_bytes()
        }))
    }

    /// Gives up `ctx` when its work is done, unless another replica owns it by now.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn release(&self, store: &dyn AppContextStore, ctx: ContextId) -> Result<()> {
        lock(&self.tokens).remove(&ctx);
        self.release_key(store, &owner_key(ctx)).await
    }

    /// Gives up the work whose owner key is `key`, unless another replica owns it by now.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn release_key(&self, store: &dyn AppContextStore, key: &str) -> Result<()> {
        let Some(kv) = store.get(key).await? else {
            return Ok(());
        };
        if kv.value.as_ref() != self.config.id.as_bytes() {
            return Ok(());
        }
        delete_unchanged(store, key, kv.mod_revision)
            .await
            .map(drop)
    }

    /// Removes the owner key of `ctx`, a context that no longer exists (deleted with its group,
    /// or discarded by the loser of a race), whoever held it, unless it changed meanwhile.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn forget(&self, store: &dyn AppContextStore, ctx: ContextId) -> Result<()> {
        lock(&self.tokens).remove(&ctx);
        let key = owner_key(ctx);
        match store.get(&key).await? {
            Some(kv) => delete_unchanged(store, &key, kv.mod_revision)
                .await
                .map(drop),
            None => Ok(()),
        }
    }
}

/// Deletes `key` if it is still at `revision`; whether it was.
async fn delete_unchanged(store: &dyn AppContextStore, key: &str, revision: u64) -> Result<bool> {
    let txn = Txn::new()
        .when(Compare::mod_revision(key, revision))
        .op(Op::delete(key));
    Ok(store.txn(txn).await?.succeeded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use emco_store::InMemoryAppContextStore;

    fn replica(id: &str) -> Owners {
        Owners::new(ReplicaConfig::new(id, Duration::from_millis(300)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_context_has_one_owner_until_its_replica_stops_beating() {
        let store = InMemoryAppContextStore::new();
        let (a, b) = (replica("a"), replica("b"));
        for r in [&a, &b] {
            r.beat(&store).await.unwrap();
            r.observe(&store).await.unwrap();
        }
        let token = a.claim(&store, ContextId::new(7)).await.unwrap().unwrap();
        assert_eq!(
            a.claim(&store, ContextId::new(7)).await.unwrap(),
            Some(token),
            "a claim is idempotent"
        );
        assert_eq!(
            b.claim(&store, ContextId::new(7)).await.unwrap(),
            None,
            "b took a live replica's context"
        );

        // a keeps beating: b never takes it.
        for _ in 0..5 {
            tokio::time::advance(Duration::from_millis(100)).await;
            a.beat(&store).await.unwrap();
            b.observe(&store).await.unwrap();
            assert_eq!(b.claim(&store, ContextId::new(7)).await.unwrap(), None);
        }
        // a stops: after a whole time to live of b's clock, b takes it, and a knows.
        tokio::time::advance(Duration::from_millis(200)).await;
        b.observe(&store).await.unwrap();
        assert_eq!(
            b.claim(&store, ContextId::new(7)).await.unwrap(),
            None,
            "taken before the time to live"
        );
        tokio::time::advance(Duration::from_millis(150)).await;
        b.observe(&store).await.unwrap();
        let taken = b.claim(&store, ContextId::new(7)).await.unwrap().unwrap();
        assert!(!a.holds(&store, ContextId::new(7), token).await.unwrap());
        // a's release of what it lost leaves b's ownership.
        a.release(&store, ContextId::new(7)).await.unwrap();
        assert!(b.holds(&store, ContextId::new(7), taken).await.unwrap());
        b.release(&store, ContextId::new(7)).await.unwrap();
        assert!(!b.holds(&store, ContextId::new(7), taken).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeat_of_a_replica_gone_for_good_is_removed() {
        let store = InMemoryAppContextStore::new();
        let (a, b, gone) = (replica("a"), replica("b"), replica("gone"));
        for r in [&a, &b, &gone] {
            r.beat(&store).await.unwrap();
        }
        let beats = || async {
            let page = store
                .list(HEARTBEATS, ListOptions::default())
                .await
                .unwrap();
            page.kvs.into_iter().map(|kv| kv.key).collect::<Vec<_>>()
        };
        // a and b go on beating, `gone` stops; b looks every tick.
        for _ in 0..9 {
            tokio::time::advance(Duration::from_millis(100)).await;
            a.beat(&store).await.unwrap();
            b.beat(&store).await.unwrap();
            b.observe(&store).await.unwrap();
        }
        assert_eq!(
            beats().await.len(),
            3,
            "removed before three times the time to live"
        );
        tokio::time::advance(Duration::from_millis(100)).await;
        b.observe(&store).await.unwrap();
        assert_eq!(beats().await, [heartbeat_key("a"), heartbeat_key("b")]);
        assert!(!b.alive("gone") && b.alive("a"));
        assert_eq!(b.dead_beat(&store, "gone").await.unwrap(), Some(0));
        // A replica starting now sees only the live ones.
        let c = replica("c");
        c.observe(&store).await.unwrap();
        assert_eq!(c.live(), ["a", "b", "c"]);
        // One that beats again after all is back.
        gone.beat(&store).await.unwrap();
        b.observe(&store).await.unwrap();
        assert!(b.alive("gone"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_that_left_is_dead_at_once_and_racing_claims_have_one_winner() {
        let store = InMemoryAppContextStore::new();
        let (a, b, c) = (replica("a"), replica("b"), replica("c"));
        for r in [&a, &b, &c] {
            r.beat(&store).await.unwrap();
        }
        assert!(a.claim(&store, ContextId::new(1)).await.unwrap().is_some());
        a.leave(&store).await.unwrap();
        b.observe(&store).await.unwrap();
        c.observe(&store).await.unwrap();
        let (rb, rc) = tokio::join!(
            b.claim(&store, ContextId::new(1)),
            c.claim(&store, ContextId::new(1))
        );
        assert!(
            rb.unwrap().is_some() ^ rc.unwrap().is_some(),
            "exactly one of b and c takes it"
        );
    }

    /// A beat that lands before the takeover keeps the context with its owner: the takeover is
    /// conditioned on the heartbeat judged dead.
    #[tokio::test(start_paused = true)]
    async fn a_beat_that_lands_before_the_takeover_keeps_the_context() {
        let store = InMemoryAppContextStore::new();
        let (a, b) = (replica("a"), replica("b"));
        a.beat(&store).await.unwrap();
        let token = a.claim(&store, ContextId::new(3)).await.unwrap().unwrap();
        b.observe(&store).await.unwrap();
        tokio::time::advance(Duration::from_millis(350)).await;
        // b judged a dead (read the same heartbeat a time to live ago) when a beats again.
        let judged = b.dead_beat(&store, "a").await.unwrap().unwrap();
        a.beat(&store).await.unwrap();
        let owner = store
            .get(&owner_key(ContextId::new(3)))
            .await
            .unwrap()
            .unwrap();
        let late = Txn::new()
            .when(Compare::mod_revision(
                owner_key(ContextId::new(3)),
                owner.mod_revision,
            ))
            .when(Compare::mod_revision(heartbeat_key("a"), judged))
            .op(Op::put(owner_key(ContextId::new(3)), Bytes::from("b")));
        assert!(!store.txn(late).await.unwrap().succeeded);
        assert!(a.holds(&store, ContextId::new(3), token).await.unwrap());
        assert_eq!(
            b.claim(&store, ContextId::new(3)).await.unwrap(),
            None,
            "a beat again"
        );
    }

    /// The lease: applies may start for half the time to live after the last acknowledged beat
    /// was sent; a lease that lapsed waits for a round that read the owners after the renewal.
    #[tokio::test(start_paused = true)]
    async fn the_lease_lapses_by_itself_and_comes_back_after_a_check() {
        let store = InMemoryAppContextStore::new();
        let a = replica("a");
        assert!(a.lease_end().is_none(), "no beat yet");
        a.beat(&store).await.unwrap();
        let end = a.lease_end().unwrap();
        assert_eq!(end - Instant::now(), Duration::from_millis(225));
        tokio::time::advance(Duration::from_millis(100)).await;
        a.beat(&store).await.unwrap();
        assert!(!a.needs_check(), "renewed in time");
        tokio::time::advance(Duration::from_millis(160)).await;
        assert!(a.lease_end().is_none(), "lapsed at half the time to live");
        let before = a.beats();
        a.beat(&store).await.unwrap();
        assert!(a.needs_check());
        assert!(a.lease_end().is_none(), "renewed, but not checked");
        a.checked(before);
        assert!(
            a.needs_check(),
            "a round that started before the renewal checks nothing"
        );
        a.checked(a.beats());
        assert!(!a.needs_check());
        assert!(a.lease_end().is_some());
    }
}
