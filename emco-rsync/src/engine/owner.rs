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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use emco_appcontext::{AppContextStore, Compare, ListOptions, Op, Txn};
use emco_core::{ErrorKind, Result};
use tokio::time::Instant;

/// Where replicas keep their heartbeats, one key per replica id under it.
pub const HEARTBEATS: &str = "/rsyncreplica/";
const OWNERS: &str = "/rsyncowner/";

/// How an engine shares its store with other replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// This replica's name, unique among the replicas (for example host name and pid).
    pub id: String,
    /// How long a replica may go without renewing its heartbeat before others take over its
    /// contexts. Takeover happens between one and about one and a third of this after a crash.
    pub ttl: Duration,
}

impl ReplicaConfig {
    /// A replica named `id` with a time to live of `ttl`.
    pub fn new(id: impl Into<String>, ttl: Duration) -> Self {
        Self { id: id.into(), ttl }
    }
}

/// The ownership of contexts by this replica.
#[derive(Debug)]
pub(crate) struct Owners {
    config: ReplicaConfig,
    /// The heartbeat version of each other replica, and when this replica first saw it.
    seen: Mutex<HashMap<String, (u64, Instant)>>,
}

fn heartbeat_key(id: &str) -> String {
    format!("{HEARTBEATS}{id}/")
}

fn owner_key(ctx: u64) -> String {
    format!("{OWNERS}{ctx}/")
}

impl Owners {
    pub(crate) fn new(config: ReplicaConfig) -> Self {
        Self {
            config,
            seen: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.config.id
    }

    /// How often to renew the heartbeat and look at the others.
    pub(crate) fn tick(&self) -> Duration {
        self.config.ttl / 3
    }

    /// Renews this replica's heartbeat.
    pub(crate) async fn beat(&self, store: &dyn AppContextStore) -> Result<()> {
        let stamp = emco_core::time::rfc3339(std::time::SystemTime::now());
        store
            .put(&heartbeat_key(&self.config.id), Bytes::from(stamp))
            .await
            .map(drop)
    }

    /// Removes this replica's heartbeat at a clean shutdown, so that others take over at once.
    pub(crate) async fn leave(&self, store: &dyn AppContextStore) -> Result<()> {
        store
            .delete(&heartbeat_key(&self.config.id))
            .await
            .map(drop)
    }

    /// Reads the other replicas' heartbeats; a changed one counts from now.
    pub(crate) async fn observe(&self, store: &dyn AppContextStore) -> Result<()> {
        let page = store.list(HEARTBEATS, ListOptions::default()).await?;
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
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
        Ok(())
    }

    /// Whether replica `id` counts as alive: this one, or one whose heartbeat changed within
    /// the time to live.
    fn alive(&self, id: &str) -> bool {
        id == self.config.id
            || self
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
                .is_some_and(|(_, at)| at.elapsed() < self.config.ttl)
    }

    /// Whether replica `id` counts as alive, its heartbeat read again first: a replica this one
    /// has not seen yet (it started after the last look) is alive from now, not dead.
    async fn alive_now(&self, store: &dyn AppContextStore, id: &str) -> Result<bool> {
        if id == self.config.id {
            return Ok(true);
        }
        let beat = store.get(&heartbeat_key(id)).await?;
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(beat) = beat else {
            seen.remove(id);
            return Ok(false);
        };
        let since = match seen.get(id) {
            Some(&(revision, at)) if revision == beat.mod_revision => at,
            _ => Instant::now(),
        };
        seen.insert(id.to_owned(), (beat.mod_revision, since));
        Ok(since.elapsed() < self.config.ttl)
    }

    /// The owner of every owned context, read in one listing.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn holders(
        &self,
        store: &dyn AppContextStore,
    ) -> Result<HashMap<u64, String>> {
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
                Some((id, String::from_utf8_lossy(&kv.value).into_owned()))
            })
            .collect())
    }

    /// Whether a context held by `holder` (from [`Self::holders`]) is worth a claim: it has
    /// no owner, or this replica, or a dead one.
    pub(crate) fn claimable(&self, holder: Option<&String>) -> bool {
        holder.is_none_or(|h| !self.alive(h) || *h == self.config.id)
    }

    /// Makes this replica the owner of `ctx` if it has none or a dead one; returns whether this
    /// replica owns it now.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn claim(&self, store: &dyn AppContextStore, ctx: u64) -> Result<bool> {
        let key = owner_key(ctx);
        let me = Bytes::from(self.config.id.clone());
        let expected = match store.get(&key).await? {
            Some(kv) if kv.value == me => return Ok(true),
            Some(kv)
                if self
                    .alive_now(store, &String::from_utf8_lossy(&kv.value))
                    .await? =>
            {
                return Ok(false);
            }
            Some(kv) => kv.mod_revision,
            None => 0,
        };
        match store.compare_and_set(&key, me, expected).await {
            Ok(_) => {
                if expected != 0 {
                    tracing::info!(ctx, replica = %self.config.id, "took over a context of a dead replica");
                }
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether this replica still owns `ctx` (another may have taken it while this one was
    /// taken for dead).
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn owns(&self, store: &dyn AppContextStore, ctx: u64) -> Result<bool> {
        Ok(store
            .get(&owner_key(ctx))
            .await?
            .is_some_and(|kv| kv.value.as_ref() == self.config.id.as_bytes()))
    }

    /// Gives up `ctx` when its work is done, unless another replica owns it by now.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn release(&self, store: &dyn AppContextStore, ctx: u64) -> Result<()> {
        let key = owner_key(ctx);
        let Some(kv) = store.get(&key).await? else {
            return Ok(());
        };
        if kv.value.as_ref() != self.config.id.as_bytes() {
            return Ok(());
        }
        delete_unchanged(store, &key, kv.mod_revision).await
    }

    /// Removes the owner key of `ctx`, a context that no longer exists (deleted with its group,
    /// or discarded by the loser of a race), whoever held it, unless it changed meanwhile.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn forget(&self, store: &dyn AppContextStore, ctx: u64) -> Result<()> {
        let key = owner_key(ctx);
        match store.get(&key).await? {
            Some(kv) => delete_unchanged(store, &key, kv.mod_revision).await,
            None => Ok(()),
        }
    }
}

/// Deletes `key` if it is still at `revision`.
async fn delete_unchanged(store: &dyn AppContextStore, key: &str, revision: u64) -> Result<()> {
    store
        .txn(
            Txn::new()
                .when(Compare::mod_revision(key, revision))
                .op(Op::delete(key)),
        )
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use emco_appcontext::InMemoryAppContextStore;

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
        assert!(a.claim(&store, 7).await.unwrap());
        assert!(a.claim(&store, 7).await.unwrap(), "a claim is idempotent");
        assert!(
            !b.claim(&store, 7).await.unwrap(),
            "b took a live replica's context"
        );

        // a keeps beating: b never takes it.
        for _ in 0..5 {
            tokio::time::advance(Duration::from_millis(100)).await;
            a.beat(&store).await.unwrap();
            b.observe(&store).await.unwrap();
            assert!(!b.claim(&store, 7).await.unwrap());
        }
        // a stops: after a whole time to live of b's clock, b takes it, and a knows.
        tokio::time::advance(Duration::from_millis(200)).await;
        b.observe(&store).await.unwrap();
        assert!(
            !b.claim(&store, 7).await.unwrap(),
            "taken before the time to live"
        );
        tokio::time::advance(Duration::from_millis(150)).await;
        b.observe(&store).await.unwrap();
        assert!(b.claim(&store, 7).await.unwrap());
        assert!(!a.owns(&store, 7).await.unwrap());
        // a's release of what it lost leaves b's ownership.
        a.release(&store, 7).await.unwrap();
        assert!(b.owns(&store, 7).await.unwrap());
        b.release(&store, 7).await.unwrap();
        assert!(!b.owns(&store, 7).await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_that_left_is_dead_at_once_and_racing_claims_have_one_winner() {
        let store = InMemoryAppContextStore::new();
        let (a, b, c) = (replica("a"), replica("b"), replica("c"));
        for r in [&a, &b, &c] {
            r.beat(&store).await.unwrap();
        }
        assert!(a.claim(&store, 1).await.unwrap());
        a.leave(&store).await.unwrap();
        b.observe(&store).await.unwrap();
        c.observe(&store).await.unwrap();
        let (rb, rc) = tokio::join!(b.claim(&store, 1), c.claim(&store, 1));
        assert!(rb.unwrap() ^ rc.unwrap(), "exactly one of b and c takes it");
    }
}
