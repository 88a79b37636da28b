//! Orders each lifecycle record write with its hand-over to rsync, within one process.
//!
//! Records change by compare-and-set ([`crate::state`]), so of two racing operations only one
//! wins, with no lock held while rendering or calling controllers. But a winner writes its
//! record and then queues its rsync event: an operation that reads the new record in between
//! (a terminate right after an instantiate) could queue its own event first, and rsync would
//! then run them in the wrong order. Each operation therefore holds its object's lock from the
//! last check through the record write to the hand-over: a few store writes, nothing more.
//! Across replicas this short window remains (see issue #15's notes).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use emco_appcontext::ResourceKey;
use tokio::sync::{Mutex, MutexGuard};

/// Stripes: groups sharing a stripe only wait for each other's short critical section.
const STRIPES: usize = 256;

/// A fixed set of striped async mutexes keyed by a hash of the object's key, shared by clones.
///
/// Striping rather than a map of per-group locks keeps memory fixed with tens of thousands of
/// groups and needs no cleanup of entries for deleted groups; the price is that two groups
/// hashing to one stripe are serialized too, which is harmless for a load/apply/save this short.
/// A holder takes one stripe, or two in index order ([`HandOverLocks::lock_pair`]), so no lock order
/// can deadlock.
#[derive(Debug, Clone)]
pub(crate) struct HandOverLocks {
    stripes: Arc<[Mutex<()>]>,
}

impl Default for HandOverLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }
}

impl HandOverLocks {
    fn stripe(&self, dig: &ResourceKey) -> usize {
        let mut h = DefaultHasher::new();
        dig.hash(&mut h);
        // The remainder is below STRIPES, so the cast cannot truncate.
        (h.finish() % self.stripes.len() as u64) as usize
    }

    /// Waits for, then holds, the lock of the group at `dig` until the guard is dropped.
    pub(crate) async fn lock(&self, dig: &ResourceKey) -> MutexGuard<'_, ()> {
        self.stripes[self.stripe(dig)].lock().await
    }

    /// Holds the locks of two groups at once (a migrate changes both records). The stripes are
    /// taken in index order, and once when both groups share one, so two holders of pairs
    /// cannot deadlock.
    pub(crate) async fn lock_pair(
        &self,
        a: &ResourceKey,
        b: &ResourceKey,
    ) -> (MutexGuard<'_, ()>, Option<MutexGuard<'_, ()>>) {
        let (i, j) = (self.stripe(a), self.stripe(b));
        let (first, second) = (i.min(j), i.max(j));
        let held = self.stripes[first].lock().await;
        let other = if first == second {
            None
        } else {
            Some(self.stripes[second].lock().await)
        };
        (held, other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_group_is_exclusive_and_clones_share_the_lock() {
        let locks = HandOverLocks::default();
        let dig = ResourceKey::root().child("dig", "d1");
        let clone = locks.clone();
        let guard = locks.lock(&dig).await;
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(20), clone.lock(&dig));
        assert!(waiting.await.is_err(), "a clone took a held lock");
        drop(guard);
        drop(clone.lock(&dig).await);
    }

    #[tokio::test]
    async fn a_pair_holds_both_and_a_shared_stripe_once() {
        let locks = HandOverLocks::default();
        let (a, b) = (
            ResourceKey::root().child("dig", "a"),
            ResourceKey::root().child("dig", "b"),
        );
        // The same group twice shares its stripe: taking it once must not deadlock.
        drop(locks.lock_pair(&a, &a).await);
        let pair = locks.lock_pair(&a, &b).await;
        for key in [&a, &b] {
            let waiting =
                tokio::time::timeout(std::time::Duration::from_millis(20), locks.lock(key));
            assert!(waiting.await.is_err(), "a paired lock was free");
        }
        drop(pair);
        drop(locks.lock_pair(&b, &a).await);
    }
}
