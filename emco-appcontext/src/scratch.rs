//! A scratch AppContext store for what-if work (a preview): contexts created through it live in
//! memory and vanish with it, every other context is read from the store underneath, and nothing
//! is ever written there. In-process controllers work on it exactly as on the real store, so a
//! preview runs the same code as an instantiate without leaving a trace (the real store's
//! revision does not move).

use emco_core::poison::lock;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use emco_core::{ContextId, Error, Result};

use crate::context::AppContext;
use emco_store::kv::{
    AppContextStore, Compare, KeyValue, ListOptions, ListPage, Op, Txn, TxnResult,
};
use emco_store::memory::InMemoryAppContextStore;

/// See the module documentation.
#[derive(Debug)]
pub struct ScratchStore {
    base: Arc<dyn AppContextStore>,
    scratch: InMemoryAppContextStore,
    /// The contexts created here.
    owned: Mutex<BTreeSet<ContextId>>,
}

/// The context id a key or prefix of the AppContext store belongs to: `/context/<id>/...`.
fn context_of(key: &str) -> Option<ContextId> {
    let rest = key.strip_prefix("/context/")?;
    let (id, _) = rest.split_once('/')?;
    id.parse().ok()
}

impl ScratchStore {
    /// A scratch store over `base`, which it only reads.
    #[must_use]
    pub fn new(base: Arc<dyn AppContextStore>) -> Self {
        Self {
            base,
            // A build writes hundreds of thousands of keys that nobody watches from the past:
            // no change history to copy them into.
            scratch: InMemoryAppContextStore::with_log_capacity(1),
            owned: Mutex::new(BTreeSet::new()),
        }
    }

    fn owns(&self, id: ContextId) -> bool {
        lock(&self.owned).contains(&id)
    }

    /// Whether `key` (or a prefix) is read from the scratch side.
    fn is_scratch(&self, key: &str) -> bool {
        context_of(key).is_some_and(|id| self.owns(id))
    }

    /// The contexts created here, to read a preview's result from.
    #[must_use]
    pub fn contexts(&self) -> Vec<ContextId> {
        lock(&self.owned).iter().copied().collect()
    }

    /// Takes the contexts `txn` touches for the scratch side: those created here, and new ones
    /// (no key in the store underneath). A write to anything else is refused.
    async fn adopt(&self, txn: &Txn) -> Result<()> {
        let keys = txn
            .compares
            .iter()
            .map(Compare::key)
            .chain(txn.ops.iter().map(|op| match op {
                Op::Put { key, .. } | Op::Delete { key } => key.as_str(),
                Op::DeletePrefix { prefix } => prefix.as_str(),
            }));
        let mut new = BTreeSet::new();
        let mut last = None;
        for key in keys {
            let id = context_of(key).ok_or_else(|| {
                Error::failed_precondition(format!(
                    "a preview writes nothing outside its own contexts (key {key:?})"
                ))
            })?;
            // A transaction's keys are nearly all of one context: asked about once.
            if last != Some(id) {
                last = Some(id);
                if !self.owns(id) {
                    new.insert(id);
                }
            }
        }
        for id in &new {
            if self.base.get(&AppContext::prefix(*id)).await?.is_some() {
                return Err(Error::failed_precondition(format!(
                    "a preview writes nothing to context {id}, which is deployed or kept"
                )));
            }
        }
        lock(&self.owned).extend(new);
        Ok(())
    }
}

#[async_trait]
impl AppContextStore for ScratchStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        if self.is_scratch(key) {
            self.scratch.get(key).await
        } else {
            self.base.get(key).await
        }
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListPage> {
        if self.is_scratch(prefix) {
            self.scratch.list(prefix, options).await
        } else {
            self.base.list(prefix, options).await
        }
    }

    async fn child_names(&self, base: &str) -> Result<Vec<String>> {
        // Each side's own way: the in-process stores seek from child to child (a preview's
        // build asks for the clusters of apps placed on 10,000).
        if self.is_scratch(base) {
            self.scratch.child_names(base).await
        } else {
            self.base.child_names(base).await
        }
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        txn.validate()?;
        self.adopt(&txn).await?;
        self.scratch.txn(txn).await
    }

    async fn watch(
        &self,
        prefix: &str,
        after_revision: u64,
    ) -> Result<emco_store::kv::WatchStream> {
        if self.is_scratch(prefix) {
            self.scratch.watch(prefix, after_revision).await
        } else {
            self.base.watch(prefix, after_revision).await
        }
    }

    async fn health(&self) -> Result<()> {
        self.base.health().await
    }

    fn watches_are_immediate(&self) -> bool {
        self.base.watches_are_immediate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::CompositeAppMeta;
    use emco_core::ErrorKind;

    #[tokio::test]
    async fn contexts_made_in_scratch_stay_there_and_the_base_is_only_read() {
        let base: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
        let deployed = AppContext::create(Arc::clone(&base), &CompositeAppMeta::default())
            .await
            .unwrap();
        let mut w = deployed.writer();
        w.add_app("a").unwrap();
        w.flush().await.unwrap();
        let before = base.list("/", ListOptions::default()).await.unwrap();

        let scratch = Arc::new(ScratchStore::new(Arc::clone(&base)));
        let store: Arc<dyn AppContextStore> = scratch.clone();
        let ctx = AppContext::create(Arc::clone(&store), &CompositeAppMeta::default())
            .await
            .unwrap();
        let mut w = ctx.writer();
        w.add_app("b").unwrap();
        w.flush().await.unwrap();
        assert_eq!(ctx.apps().await.unwrap(), ["b"]);
        assert_eq!(scratch.contexts(), [ctx.id()]);
        // The deployed context reads through; writing to it or outside contexts is refused.
        let seen = AppContext::load(Arc::clone(&store), deployed.id())
            .await
            .unwrap();
        assert_eq!(seen.apps().await.unwrap(), ["a"]);
        let err = seen.set_stop_flag(true).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "{err}");
        let err = store.put("/active/1/", "x".into()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::FailedPrecondition, "{err}");
        ctx.delete().await.unwrap();

        let after = base.list("/", ListOptions::default()).await.unwrap();
        assert_eq!(
            before, after,
            "the base store is unchanged, revision included"
        );
        assert!(
            base.get(&AppContext::prefix(ctx.id()))
                .await
                .unwrap()
                .is_none()
        );
    }
}
