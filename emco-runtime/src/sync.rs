//! Striped async locks: one short critical section per object (a deployment intent group, an
//! AppContext) without a map of locks that grows with the objects.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use tokio::sync::{Mutex, MutexGuard};

/// How many stripes a [`StripedLocks::default`] has: objects sharing a stripe only wait for
/// each other's short critical section.
pub const STRIPES: usize = 256;

/// A fixed set of async mutexes, an object taking the one its hash picks; clones share them.
///
/// Striping rather than a lock per object keeps memory fixed with tens of thousands of objects
/// and needs no cleanup when they are deleted; the price is that two objects hashing to one
/// stripe are serialized too, harmless for sections of a few store writes. A holder takes one
/// stripe, or two in index order ([`StripedLocks::lock_pair`]), so no lock order can deadlock.
#[derive(Debug, Clone)]
pub struct StripedLocks {
    stripes: Arc<[Mutex<()>]>,
}

impl Default for StripedLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }
}

impl StripedLocks {
    fn stripe(&self, key: &impl Hash) -> usize {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        // The remainder is below the stripe count, so the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation)]
        let i = (h.finish() % self.stripes.len() as u64) as usize;
        i
    }

    /// Waits for, then holds, the lock of `key` until the guard is dropped.
    pub async fn lock(&self, key: &impl Hash) -> MutexGuard<'_, ()> {
        self.stripes[self.stripe(key)].lock().await
    }

    /// Holds the locks of two objects at once. The stripes are taken in index order, and once
    /// when both objects share one, so two holders of pairs cannot deadlock.
    pub async fn lock_pair(
        &self,
        a: &impl Hash,
        b: &impl Hash,
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
    use std::time::Duration;

    #[tokio::test]
    async fn one_object_is_exclusive_and_clones_share_the_lock() {
        let locks = StripedLocks::default();
        let clone = locks.clone();
        let guard = locks.lock(&"d1").await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), clone.lock(&"d1"));
        assert!(waiting.await.is_err(), "a clone took a held lock");
        drop(guard);
        drop(clone.lock(&"d1").await);
    }

    #[tokio::test]
    async fn a_pair_holds_both_and_a_shared_stripe_once() {
        let locks = StripedLocks::default();
        // The same object twice shares its stripe: taking it once must not deadlock.
        drop(locks.lock_pair(&"a", &"a").await);
        let pair = locks.lock_pair(&"a", &"b").await;
        for key in ["a", "b"] {
            let waiting = tokio::time::timeout(Duration::from_millis(20), locks.lock(&key));
            assert!(waiting.await.is_err(), "a paired lock was free");
        }
        drop(pair);
        drop(locks.lock_pair(&"b", &"a").await);
    }
}
