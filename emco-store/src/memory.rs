//! The in-memory backends: always built, used by unit tests and as the reference behaviour of
//! the conformance suites.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::poison::lock;
use emco_core::{Error, Result};
use futures::StreamExt;
use serde_json::Value;

use crate::kv::{KeyValue, ListOptions, ListPage, Txn, TxnResult};
use crate::local::{self, Engine, KvView, LocalStore, Revs, SharedLog};
use crate::resource::{
    BlobStream, BlobVersion, Expect, Family, FamilyScan, Filter, PutMode, ResourceKey,
    ResourceStore, Scanned, check_put, in_creation_order, matches_all,
};

/// The range of map keys `>= start`.
fn from(start: &str) -> (Bound<&str>, Bound<&str>) {
    (Bound::Included(start), Bound::Unbounded)
}

#[derive(Debug, Default)]
struct MemState {
    revision: u64,
    keys: BTreeMap<String, (Revs, Bytes)>,
}

impl KvView for MemState {
    fn revs(&mut self, key: &str) -> Result<Option<Revs>> {
        Ok(self.keys.get(key).map(|(r, _)| *r))
    }

    fn store(&mut self, key: &str, revs: Revs, value: &[u8]) -> Result<()> {
        self.keys
            .insert(key.to_owned(), (revs, Bytes::copy_from_slice(value)));
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<bool> {
        Ok(self.keys.remove(key).is_some())
    }

    fn keys_with_prefix(&mut self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .keys
            .range::<str, _>(from(prefix))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect())
    }
}

#[derive(Debug, Default)]
struct MemEngine(Mutex<MemState>);

fn to_kv(key: &str, revs: &Revs, value: &Bytes) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: value.clone(),
        create_revision: revs.create,
        mod_revision: revs.modified,
        version: revs.version,
    }
}

#[async_trait]
impl Engine for MemEngine {
    fn revision(&self) -> Result<u64> {
        Ok(lock(&self.0).revision)
    }

    fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(lock(&self.0).keys.get(key).map(|(r, v)| to_kv(key, r, v)))
    }

    fn list(&self, prefix: &str, options: &ListOptions) -> Result<ListPage> {
        let state = lock(&self.0);
        let iter = state
            .keys
            .range::<str, _>(from(local::list_start(prefix, options)))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (r, v))| Ok(to_kv(k, r, v)));
        local::page(iter, options, state.revision)
    }

    fn child_names(&self, base: &str) -> Result<Vec<String>> {
        local::child_names(&*lock(&self.0), base)
    }

    async fn commit(&self, txn: Txn, log: &SharedLog) -> Result<TxnResult> {
        local::commit_in_order(log, |next| {
            let mut state = lock(&self.0);
            // Map operations cannot fail, so evaluation never stops half-way.
            let out = local::evaluate(&mut *state, &txn, next)?;
            if !out.2.is_empty() {
                state.revision = next;
            }
            Ok(out)
        })
    }
}

impl local::KeysFrom for MemState {
    fn keys_from(&self, from: &str, visit: &mut dyn FnMut(&str) -> bool) -> Result<()> {
        for k in self.keys.range::<str, _>(self::from(from)).map(|(k, _)| k) {
            if !visit(k) {
                break;
            }
        }
        Ok(())
    }
}

/// The in-memory AppContext store. Watches can start after any revision still in its change log
/// (the last 100,000 changes by default).
#[derive(Debug)]
pub struct InMemoryAppContextStore(LocalStore<MemEngine>);

impl Default for InMemoryAppContextStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryAppContextStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::with_log_capacity(local::DEFAULT_LOG_CAPACITY)
    }

    /// An empty store whose change log keeps `capacity` events.
    #[must_use]
    pub fn with_log_capacity(capacity: usize) -> Self {
        Self(LocalStore::new(MemEngine::default(), 0, capacity))
    }

    /// The bytes of keys and values stored.
    #[must_use]
    pub fn stored_bytes(&self) -> u64 {
        lock(&self.0.engine().0)
            .keys
            .iter()
            .map(|(k, (_, v))| (k.len() + v.len()) as u64)
            .sum()
    }
}

crate::local::delegate_app_context_store!(InMemoryAppContextStore);

/// A blob's version and chunks.
type StoredBlob = (BlobVersion, std::sync::Arc<Vec<Bytes>>);

#[derive(Debug, Default)]
struct ResState {
    /// Encoded key -> creation number and document.
    docs: BTreeMap<String, (u64, Value)>,
    /// The last creation number given.
    created: u64,
    /// (encoded key, blob name) -> version and chunks.
    blobs: BTreeMap<(String, String), StoredBlob>,
}

/// The in-memory resource store.
#[derive(Debug, Default)]
pub struct InMemoryResourceStore(Mutex<ResState>);

impl InMemoryResourceStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ResourceStore for InMemoryResourceStore {
    async fn put(&self, key: &ResourceKey, value: &Value, mode: PutMode) -> Result<()> {
        let enc = key.encode()?;
        let mut s = lock(&self.0);
        let parent_exists = match key.parent() {
            Some(p) if !p.is_root() => s.docs.contains_key(&p.encode()?),
            _ => true,
        };
        let kept = s.docs.get(&enc).map(|(created, _)| *created);
        check_put(key, mode, parent_exists, kept.is_some())?;
        let created = kept.unwrap_or_else(|| {
            s.created += 1;
            s.created
        });
        s.docs.insert(enc, (created, value.clone()));
        Ok(())
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Value>> {
        let enc = key.encode()?;
        Ok(lock(&self.0).docs.get(&enc).map(|(_, v)| v.clone()))
    }

    async fn list(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        filters: &[Filter],
    ) -> Result<Vec<(ResourceKey, Value)>> {
        let prefix = parent.children_prefix(child_type)?;
        let s = lock(&self.0);
        let mut out = Vec::new();
        for (k, (created, v)) in s.docs.range::<str, _>(from(&prefix)) {
            let Some(rest) = k.strip_prefix(&prefix) else {
                break;
            };
            if rest.contains('/') || !matches_all(v, filters) {
                continue;
            }
            out.push((*created, (ResourceKey::decode(k)?, v.clone())));
        }
        Ok(in_creation_order(out))
    }

    async fn list_with_children(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        grandchild_type: &str,
    ) -> Result<Vec<Family>> {
        let mut scan = FamilyScan::new(parent, child_type, grandchild_type)?;
        let s = lock(&self.0);
        for (k, (created, v)) in s.docs.range::<str, _>(from(scan.prefix())) {
            match scan.classify(k) {
                Scanned::Done => break,
                Scanned::Skip => {}
                Scanned::Wanted => scan.add(k, *created, v.clone())?,
            }
        }
        Ok(scan.finish())
    }

    async fn delete(&self, key: &ResourceKey) -> Result<()> {
        let enc = key.encode()?;
        let mut s = lock(&self.0);
        if !s.docs.contains_key(&enc) {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        let below = format!("{enc}/");
        if s.docs
            .range::<str, _>(from(&below))
            .next()
            .is_some_and(|(k, _)| k.starts_with(&below))
        {
            return Err(Error::conflict(format!("{key} has children")));
        }
        s.docs.remove(&enc);
        s.blobs.retain(|(k, _), _| *k != enc);
        Ok(())
    }

    async fn put_blob_if(
        &self,
        key: &ResourceKey,
        name: &str,
        mut data: BlobStream,
        expect: Expect,
    ) -> Result<(u64, BlobVersion)> {
        let enc = key.encode()?;
        if !lock(&self.0).docs.contains_key(&enc) {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        let mut chunks = Vec::new();
        let mut size = 0u64;
        while let Some(chunk) = data.next().await {
            let chunk = chunk?;
            size += chunk.len() as u64;
            chunks.push(chunk);
        }
        let mut s = lock(&self.0);
        // The object may have been deleted while the blob streamed in.
        if !s.docs.contains_key(&enc) {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        let slot = (enc, name.to_owned());
        if !expect.holds(s.blobs.get(&slot).map(|(v, _)| *v)) {
            return Err(Expect::failed(key, name));
        }
        let version = BlobVersion::fresh();
        s.blobs.insert(slot, (version, std::sync::Arc::new(chunks)));
        Ok((size, version))
    }

    async fn get_blob_versioned(
        &self,
        key: &ResourceKey,
        name: &str,
    ) -> Result<(BlobVersion, BlobStream)> {
        let enc = key.encode()?;
        let (version, chunks) = lock(&self.0)
            .blobs
            .get(&(enc, name.to_owned()))
            .cloned()
            .ok_or_else(|| Error::not_found(format!("{key} has no blob {name:?}")))?;
        let items: Vec<Result<Bytes>> = chunks.iter().cloned().map(Ok).collect();
        Ok((version, Box::pin(futures::stream::iter(items))))
    }

    async fn delete_blob(&self, key: &ResourceKey, name: &str) -> Result<bool> {
        let enc = key.encode()?;
        Ok(lock(&self.0)
            .blobs
            .remove(&(enc, name.to_owned()))
            .is_some())
    }

    async fn health(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use proptest::prelude::*;

    use super::*;
    use crate::kv::{AppContextStore, Op, compacted_revision};

    /// A transaction larger than the change log is not kept in it, nor anything before it: a
    /// watch from before it is told so, and live watches still get every event.
    #[tokio::test]
    async fn a_transaction_larger_than_the_log_empties_it() {
        let store = InMemoryAppContextStore::with_log_capacity(2);
        store.put("/x/0", "v".into()).await.unwrap();
        let mut live = store.watch("/x/", 1).await.unwrap();
        let big = Txn {
            compares: Vec::new(),
            ops: (1..=3).map(|i| Op::put(format!("/x/{i}"), "v")).collect(),
        };
        let revision = store.txn(big).await.unwrap().revision;
        for i in 1..=3 {
            assert_eq!(live.next().await.unwrap().unwrap().key, format!("/x/{i}"));
        }
        let Err(e) = store.watch("/x/", 0).await else {
            panic!("a watch from before the transaction was served");
        };
        assert_eq!(compacted_revision(&e), Some(revision), "{e}");
        store.put("/x/4", "v".into()).await.unwrap();
        let mut after = store.watch("/x/", revision).await.unwrap();
        assert_eq!(after.next().await.unwrap().unwrap().key, "/x/4");
    }

    proptest! {
        /// Seeking past subtrees finds exactly the children a full listing finds, whatever the
        /// keys (names sorting just before and after `/` included).
        #[test]
        fn child_names_by_seeking_are_those_of_a_full_listing(
            keys in proptest::collection::btree_set("[ab0/-]{1,6}", 0..80),
            base in "(/|a/|a-/|b/)",
        ) {
            let state = MemState {
                keys: keys
                    .iter()
                    .map(|k| (format!("/{k}"), (Revs { create: 1, modified: 1, version: 1 }, Bytes::new())))
                    .collect(),
                ..MemState::default()
            };
            let base = format!("/{}", base.trim_start_matches('/'));
            let listed = crate::kv::children(state.keys.keys().cloned(), &base);
            prop_assert_eq!(local::child_names(&state, &base).unwrap(), listed);
        }
    }
}
