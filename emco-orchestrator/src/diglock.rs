//! Serializes the read-modify-write of a deployment intent group's lifecycle record.
//!
//! The record is a blob (`state`) under the group's key, and the [`ResourceStore`] has no
//! compare-and-set for blobs: two concurrent approves or intent changes on one group would both
//! read the record, both apply their operation and the later write would drop the earlier one.
//! Every path that rewrites the record takes the group's lock across load -> apply -> save.
//!
//! The lock is in-process, so it is correct only while one process owns the store. A
//! multi-replica deployment needs a store-level compare-and-set (a revision checked on
//! `put_blob`) instead; this lock then only spares the retries.
//!
//! [`ResourceStore`]: emco_appcontext::ResourceStore

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use emco_appcontext::ResourceKey;
use tokio::sync::{Mutex, MutexGuard};

/// Stripes: groups sharing a stripe only wait for each other's short critical section.
const STRIPES: usize = 256;

/// A fixed set of striped async mutexes keyed by a hash of the group's key, shared by clones.
///
/// Striping rather than a map of per-group locks keeps memory fixed with tens of thousands of
/// groups and needs no cleanup of entries for deleted groups; the price is that two groups
/// hashing to one stripe are serialized too, which is harmless for a load/apply/save this short.
/// A holder takes one stripe, or two in index order ([`DigLocks::lock_pair`]), so no lock order
/// can deadlock.
#[derive(Debug, Clone)]
pub(crate) struct DigLocks {
    stripes: Arc<[Mutex<()>]>,
}

impl Default for DigLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }
}

impl DigLocks {
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
        let locks = DigLocks::default();
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
        let locks = DigLocks::default();
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
