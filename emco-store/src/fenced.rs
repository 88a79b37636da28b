//! Writes that land only while their writer still holds what it works for.
//!
//! A replica that was cut off from the store (alive, but taken for dead by the others) may still
//! have writes in flight, or send some once it is reachable again: a status from before the
//! takeover written over the new owner's. [`FencedStore`] wraps a store and adds one condition to
//! every transaction, the fencing token: a key (an owner key) still at the revision its holder
//! got when it took it. Once another holder has taken that key, every write through the wrapper
//! is refused by the store itself, however late it arrives; reads pass through.

use std::sync::Arc;

use async_trait::async_trait;
use emco_core::{Error, ErrorKind, Result};

use crate::kv::{
    AppContextStore, Compare, KeyValue, ListOptions, ListPage, Txn, TxnResult, WatchStream,
};

/// An [`AppContextStore`] whose writes are conditioned on `key` staying at `token`.
#[derive(Debug, Clone)]
pub struct FencedStore {
    inner: Arc<dyn AppContextStore>,
    key: String,
    token: u64,
}

impl FencedStore {
    /// Writes to `inner` that land only while `key` is at revision `token` (the revision the
    /// holder's own write of `key` gave it).
    pub fn new(inner: Arc<dyn AppContextStore>, key: impl Into<String>, token: u64) -> Self {
        Self {
            inner,
            key: key.into(),
            token,
        }
    }

    /// The fencing key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The revision the fencing key must be at.
    #[must_use]
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Whether `err` is a write refused because the fence moved.
    #[must_use]
    pub fn is_fenced(err: &Error) -> bool {
        err.kind() == ErrorKind::FailedPrecondition
            && std::error::Error::source(err).is_some_and(|s| s.is::<Fenced>())
    }
}

/// The cause of a write refused by a [`FencedStore`].
#[derive(Debug, thiserror::Error)]
#[error("{key} is no longer at revision {token}")]
pub struct Fenced {
    key: String,
    token: u64,
}

#[async_trait]
impl AppContextStore for FencedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListPage> {
        self.inner.list(prefix, options).await
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        let result = self
            .inner
            .txn(txn.when(Compare::mod_revision(&self.key, self.token)))
            .await?;
        if result.succeeded {
            return Ok(result);
        }
        // Revisions only grow: a fence that failed the transaction is still moved now, so one
        // read tells a refusal of the fence from the caller's own conditions failing.
        let now = self.inner.get(&self.key).await?.map(|kv| kv.mod_revision);
        if now == Some(self.token) {
            return Ok(result);
        }
        Err(Error::failed_precondition(format!(
            "the write was refused: this process no longer holds {} (another took it over)",
            self.key
        ))
        .with_source(Fenced {
            key: self.key.clone(),
            token: self.token,
        }))
    }

    async fn watch(&self, prefix: &str, after_revision: u64) -> Result<WatchStream> {
        self.inner.watch(prefix, after_revision).await
    }

    async fn health(&self) -> Result<()> {
        self.inner.health().await
    }

    fn watches_are_immediate(&self) -> bool {
        self.inner.watches_are_immediate()
    }

    async fn child_names(&self, base: &str) -> Result<Vec<String>> {
        self.inner.child_names(base).await
    }

    async fn list_all(&self, prefix: &str, keys_only: bool) -> Result<Vec<KeyValue>> {
        self.inner.list_all(prefix, keys_only).await
    }

    async fn for_each_page(
        &self,
        prefix: &str,
        keys_only: bool,
        visit: &mut (dyn FnMut(Vec<KeyValue>) -> Result<()> + Send),
    ) -> Result<()> {
        self.inner.for_each_page(prefix, keys_only, visit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::InMemoryAppContextStore;
    use bytes::Bytes;

    #[tokio::test]
    async fn writes_land_until_the_fence_moves_then_none_does() {
        let inner: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
        let token = inner.put("/owner/1/", Bytes::from("a")).await.unwrap();
        let fenced = FencedStore::new(Arc::clone(&inner), "/owner/1/", token);
        fenced
            .put("/ctx/1/status/", Bytes::from("1"))
            .await
            .unwrap();
        // The caller's own condition failing is its answer, not a fence.
        assert!(matches!(
            fenced.create("/ctx/1/status/", Bytes::from("x")).await,
            Err(e) if e.kind() == ErrorKind::AlreadyExists
        ));

        inner.put("/owner/1/", Bytes::from("b")).await.unwrap();
        let refused = [
            fenced
                .put("/ctx/1/status/", Bytes::from("2"))
                .await
                .map(drop),
            fenced.delete("/ctx/1/status/").await.map(drop),
            fenced
                .create("/ctx/1/new/", Bytes::from("2"))
                .await
                .map(drop),
            fenced.delete_prefix("/ctx/").await.map(drop),
        ];
        for r in refused {
            let e = r.unwrap_err();
            assert!(FencedStore::is_fenced(&e), "{e}");
            assert!(e.to_string().contains("/owner/1/"), "{e}");
        }
        let status = inner.get("/ctx/1/status/").await.unwrap().unwrap();
        assert_eq!(status.value, Bytes::from("1"));
        assert!(inner.get("/ctx/1/new/").await.unwrap().is_none());
        assert_eq!(
            fenced.get("/ctx/1/status/").await.unwrap().unwrap().value,
            Bytes::from("1"),
            "reads pass"
        );
    }
}
