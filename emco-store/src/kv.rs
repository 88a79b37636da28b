//! The AppContext store trait (EMCO's etcd): a revisioned key-value store with prefix listing,
//! compare-and-set, multi-operation transactions and prefix watches.

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Result};
use futures::stream::BoxStream;

/// At most this many operations go into one transaction (etcd's default `--max-txn-ops`): what
/// every backend accepts, so a writer that batches within it works on all of them.
pub const MAX_TXN_OPS: usize = 128;
/// At most this many request bytes go into one transaction, below etcd's default
/// `--max-request-bytes` of 1.5 MiB (1,572,864) to leave room for framing.
pub const MAX_TXN_BYTES: usize = 1_500_000;

/// One stored key with its value and etcd-style revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value; empty when the listing asked for keys only.
    pub value: Bytes,
    /// The store revision at which the key was created.
    pub create_revision: u64,
    /// The store revision of the last change of the key (etcd's `mod_revision`).
    pub mod_revision: u64,
    /// How many times the key was written since it was created (1 after creation).
    pub version: u64,
}

/// A condition of a [`Txn`]; all conditions must hold for the operations to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key's `mod_revision` equals `mod_revision`; `0` means the key must be absent.
    ModRevision {
        /// The key to check.
        key: String,
        /// The expected revision (`0` = absent).
        mod_revision: u64,
    },
    /// The key exists.
    Exists {
        /// The key to check.
        key: String,
    },
}

impl Compare {
    /// The key must be absent.
    pub fn absent(key: impl Into<String>) -> Self {
        Self::ModRevision {
            key: key.into(),
            mod_revision: 0,
        }
    }

    /// The key must have been last changed at `mod_revision`.
    pub fn mod_revision(key: impl Into<String>, mod_revision: u64) -> Self {
        Self::ModRevision {
            key: key.into(),
            mod_revision,
        }
    }

    /// The key must exist.
    pub fn exists(key: impl Into<String>) -> Self {
        Self::Exists { key: key.into() }
    }

    /// The key this condition is about.
    #[must_use]
    pub fn key(&self) -> &str {
        match self {
            Self::ModRevision { key, .. } | Self::Exists { key } => key,
        }
    }

    /// Whether the condition holds for a key whose current `mod_revision` is `current`
    /// (`None` when the key is absent).
    #[must_use]
    pub fn holds(&self, current: Option<u64>) -> bool {
        match self {
            Self::ModRevision {
                mod_revision: 0, ..
            } => current.is_none(),
            Self::ModRevision { mod_revision, .. } => current == Some(*mod_revision),
            Self::Exists { .. } => current.is_some(),
        }
    }
}

/// A write operation of a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Writes `value` under `key`.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: Bytes,
    },
    /// Deletes `key` if it exists.
    Delete {
        /// The key.
        key: String,
    },
    /// Deletes every key starting with `prefix`.
    DeletePrefix {
        /// The prefix; must not be empty.
        prefix: String,
    },
}

impl Op {
    /// A put of `value` under `key`.
    pub fn put(key: impl Into<String>, value: impl Into<Bytes>) -> Self {
        Self::Put {
            key: key.into(),
            value: value.into(),
        }
    }

    /// A delete of `key`.
    pub fn delete(key: impl Into<String>) -> Self {
        Self::Delete { key: key.into() }
    }

    /// A delete of every key under `prefix`.
    pub fn delete_prefix(prefix: impl Into<String>) -> Self {
        Self::DeletePrefix {
            prefix: prefix.into(),
        }
    }

    /// The number of request bytes the operation costs, as etcd counts them (roughly).
    #[must_use]
    pub fn request_bytes(&self) -> usize {
        // 16 bytes cover the protobuf framing of one operation.
        16 + match self {
            Self::Put { key, value } => key.len() + value.len(),
            Self::Delete { key } => key.len(),
            Self::DeletePrefix { prefix } => 2 * prefix.len(),
        }
    }
}

/// An atomic transaction: if every compare holds, every operation runs at one new revision;
/// otherwise nothing changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    /// The conditions.
    pub compares: Vec<Compare>,
    /// The operations run when the conditions hold.
    pub ops: Vec<Op>,
}

impl Txn {
    /// An empty transaction.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a condition.
    #[must_use]
    pub fn when(mut self, compare: Compare) -> Self {
        self.compares.push(compare);
        self
    }

    /// Adds an operation.
    #[must_use]
    pub fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Checks the rules every backend enforces (they are etcd's): keys are not empty, a key is
    /// written at most once, and a deleted prefix does not cover a written key.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](emco_core::ErrorKind::InvalidArgument) when a rule is broken.
    pub fn validate(&self) -> Result<()> {
        let mut written = std::collections::BTreeSet::new();
        for op in &self.ops {
            match op {
                Op::Put { key, .. } | Op::Delete { key } => {
                    if key.is_empty() {
                        return Err(Error::invalid("a transaction key must not be empty"));
                    }
                    if !written.insert(key.as_str()) {
                        return Err(Error::invalid(format!(
                            "key {key:?} is written twice in one transaction"
                        )));
                    }
                }
                Op::DeletePrefix { prefix } if prefix.is_empty() => {
                    return Err(Error::invalid("a deleted prefix must not be empty"));
                }
                Op::DeletePrefix { .. } => {}
            }
        }
        for op in &self.ops {
            if let Op::DeletePrefix { prefix } = op
                && let Some(k) = written.iter().find(|k| k.starts_with(prefix.as_str()))
            {
                return Err(Error::invalid(format!(
                    "key {k:?} is both written and under deleted prefix {prefix:?}"
                )));
            }
        }
        if self.compares.iter().any(|c| c.key().is_empty()) {
            return Err(Error::invalid("a compared key must not be empty"));
        }
        Ok(())
    }
}

/// The outcome of a [`Txn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnResult {
    /// Whether the compares held and the operations ran.
    pub succeeded: bool,
    /// The store revision after the transaction.
    pub revision: u64,
    /// How many keys the delete operations removed.
    pub deleted: u64,
}

/// Options of [`AppContextStore::list`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// At most this many keys per page (`None`: all).
    pub limit: Option<usize>,
    /// Start after this key (exclusive), to fetch the next page.
    pub start_after: Option<String>,
    /// Return keys and revisions only, with empty values.
    pub keys_only: bool,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// The keys, in ascending order.
    pub kvs: Vec<KeyValue>,
    /// Whether more keys follow (ask again with `start_after` = the last key).
    pub more: bool,
    /// The store revision the page was read at; a watch from it misses nothing.
    pub revision: u64,
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted.
    Delete,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    /// Put or delete.
    pub kind: EventKind,
    /// The key.
    pub key: String,
    /// The new value (empty for a delete).
    pub value: Bytes,
    /// The revision of the change.
    pub mod_revision: u64,
}

/// The stream a watch yields. It does not end on its own (drop it to stop watching); after an
/// `Err` item it ends.
pub type WatchStream = BoxStream<'static, Result<WatchEvent>>;

/// The cause kept in an error when a watch asks for history the store no longer has, as etcd
/// reports a compacted revision. Find it with [`compacted_revision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("revision {requested} is compacted; the oldest available revision is {compact_revision}")]
pub struct Compacted {
    /// The revision the watch asked to start after.
    pub requested: u64,
    /// The store's compaction point: watches must start at or after it.
    pub compact_revision: u64,
}

impl Compacted {
    /// The error of kind `FailedPrecondition` that carries this cause.
    #[must_use]
    pub fn into_error(self) -> Error {
        Error::failed_precondition(self.to_string()).with_source(self)
    }
}

/// If `err` reports a compacted watch start, the store's compaction revision: the caller must
/// list again and watch from the new listing's revision.
#[must_use]
pub fn compacted_revision(err: &Error) -> Option<u64> {
    std::error::Error::source(err)
        .and_then(|s| s.downcast_ref::<Compacted>())
        .map(|c| c.compact_revision)
}

/// The AppContext store: EMCO's etcd. Implemented by the memory, embedded (redb) and etcd
/// backends; use it as `Arc<dyn AppContextStore>`.
///
/// Revisions are store-wide and grow by one per transaction that changes something, as in etcd.
#[async_trait]
pub trait AppContextStore: Debug + Send + Sync + 'static {
    /// The value of `key`, or `None`.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// The keys under `prefix` in ascending order, one page at a time.
    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListPage>;

    /// Runs `txn` atomically.
    ///
    /// # Errors
    /// `InvalidArgument` when [`Txn::validate`] fails; `Unavailable` when the backend fails.
    async fn txn(&self, txn: Txn) -> Result<TxnResult>;

    /// Every change under `prefix` with a revision greater than `after_revision`, in revision
    /// order, then the live changes. `after_revision` is usually [`ListPage::revision`].
    ///
    /// # Errors
    /// `FailedPrecondition` with a [`Compacted`] cause when that history is gone.
    async fn watch(&self, prefix: &str, after_revision: u64) -> Result<WatchStream>;

    /// Whether the store answers.
    async fn health(&self) -> Result<()>;

    /// Whether a change is in this store's watch streams by the time the transaction that made
    /// it returns (the in-process stores), so that draining a watch without waiting catches up
    /// with every change committed before. False (the default) when events arrive later, as
    /// from etcd.
    fn watches_are_immediate(&self) -> bool {
        false
    }

    /// Writes `value` under `key`; returns the new revision.
    async fn put(&self, key: &str, value: Bytes) -> Result<u64> {
        Ok(self.txn(Txn::new().op(Op::put(key, value))).await?.revision)
    }

    /// Writes `value` under `key` only if the key is absent; returns the new revision.
    ///
    /// # Errors
    /// `AlreadyExists` when the key exists.
    async fn create(&self, key: &str, value: Bytes) -> Result<u64> {
        let r = self
            .txn(
                Txn::new()
                    .when(Compare::absent(key))
                    .op(Op::put(key, value)),
            )
            .await?;
        if r.succeeded {
            Ok(r.revision)
        } else {
            Err(Error::already_exists(format!("key {key:?} exists")))
        }
    }

    /// Writes `value` under `key` only if its `mod_revision` is `expected` (0: absent); returns
    /// the new revision.
    ///
    /// # Errors
    /// `Conflict` when the key changed since `expected`.
    async fn compare_and_set(&self, key: &str, value: Bytes, expected: u64) -> Result<u64> {
        let txn = Txn::new()
            .when(Compare::mod_revision(key, expected))
            .op(Op::put(key, value));
        let r = self.txn(txn).await?;
        if r.succeeded {
            Ok(r.revision)
        } else {
            Err(Error::conflict(format!(
                "key {key:?} is not at revision {expected}"
            )))
        }
    }

    /// Deletes `key`; returns whether it existed.
    async fn delete(&self, key: &str) -> Result<bool> {
        Ok(self.txn(Txn::new().op(Op::delete(key))).await?.deleted > 0)
    }

    /// Deletes every key under `prefix`; returns how many.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64> {
        Ok(self
            .txn(Txn::new().op(Op::delete_prefix(prefix)))
            .await?
            .deleted)
    }

    /// The names `n` of the keys `<base>n/` one level below `base`, in ascending order of their
    /// keys. By default from a listing of everything under `base`; the in-process stores skip
    /// each child's subtree instead (the apps of a context of 10,000 clusters are a few names
    /// among hundreds of thousands of keys).
    async fn child_names(&self, base: &str) -> Result<Vec<String>> {
        let keys = self
            .list_all(base, true)
            .await?
            .into_iter()
            .map(|kv| kv.key);
        Ok(children(keys, base))
    }

    /// Every key (and value unless `keys_only`) under `prefix`, fetched page by page.
    async fn list_all(&self, prefix: &str, keys_only: bool) -> Result<Vec<KeyValue>> {
        let mut out = Vec::new();
        self.for_each_page(prefix, keys_only, &mut |kvs| {
            out.extend(kvs);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Hands every key (and value unless `keys_only`) under `prefix` to `visit`, a page of
    /// [`LIST_PAGE`] at a time in key order, holding one page at once: for readers of whole
    /// contexts that keep a little of each key.
    ///
    /// # Errors
    /// The store's, or the first of `visit`.
    async fn for_each_page(
        &self,
        prefix: &str,
        keys_only: bool,
        visit: &mut (dyn FnMut(Vec<KeyValue>) -> Result<()> + Send),
    ) -> Result<()> {
        let mut start_after = None;
        loop {
            let options = ListOptions {
                limit: Some(LIST_PAGE),
                start_after,
                keys_only,
            };
            let page = self.list(prefix, options).await?;
            start_after = page.kvs.last().map(|kv| kv.key.clone());
            visit(page.kvs)?;
            if !page.more {
                return Ok(());
            }
        }
    }
}

/// The names `n` of the keys `<base>n/` among `keys` (one level below `base`).
pub(crate) fn children(keys: impl IntoIterator<Item = String>, base: &str) -> Vec<String> {
    keys.into_iter()
        .filter_map(|k| {
            let rest = k.strip_prefix(base)?.strip_suffix('/')?;
            (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_owned())
        })
        .collect()
}

/// The page size [`AppContextStore::list_all`] uses.
pub const LIST_PAGE: usize = 1000;

/// The smallest string greater than every string starting with `prefix` (`None`: no bound).
#[must_use]
pub fn prefix_end(prefix: &str) -> Option<Vec<u8>> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_duplicates_and_overlaps() {
        let t = Txn::new().op(Op::put("a", "1")).op(Op::put("a", "2"));
        assert!(t.validate().is_err());
        let t = Txn::new()
            .op(Op::put("a/b", "1"))
            .op(Op::delete_prefix("a/"));
        assert!(t.validate().is_err());
        let t = Txn::new()
            .op(Op::put("a/b", "1"))
            .op(Op::delete_prefix("b/"));
        assert!(t.validate().is_ok());
    }

    #[test]
    fn prefix_end_increments_last_byte() {
        assert_eq!(prefix_end("a/"), Some(b"a0".to_vec()));
        assert_eq!(prefix_end(""), None);
    }

    #[test]
    fn compacted_is_found_in_the_error() {
        let e = Compacted {
            requested: 1,
            compact_revision: 5,
        }
        .into_error();
        assert_eq!(compacted_revision(&e), Some(5));
        assert_eq!(e.kind(), emco_core::ErrorKind::FailedPrecondition);
    }

    #[test]
    fn children_picks_one_level() {
        let keys = ["/b/a/", "/b/a/x/", "/b/c/", "/b/", "/b/d/e/"].map(str::to_owned);
        assert_eq!(children(keys, "/b/"), vec!["a".to_owned(), "c".to_owned()]);
    }
}
