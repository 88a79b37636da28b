//! What the in-process AppContext stores (memory, redb) share: transaction evaluation over a
//! key-value view, the bounded change log and the watch streams fed from it.

use emco_core::poison::lock;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Result};
use tokio::sync::broadcast;

use crate::kv::{
    AppContextStore, Compacted, EventKind, KeyValue, ListOptions, ListPage, Op, Txn, TxnResult,
    WatchEvent, WatchStream,
};

/// The revisions stored with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Revs {
    pub create: u64,
    pub modified: u64,
    pub version: u64,
}

/// The mutable view of the keys a transaction evaluates against.
pub(crate) trait KvView {
    /// The revisions of `key`, if present.
    fn revs(&mut self, key: &str) -> Result<Option<Revs>>;
    /// Stores `key`.
    fn store(&mut self, key: &str, revs: Revs, value: &[u8]) -> Result<()>;
    /// Removes `key`; returns whether it existed.
    fn remove(&mut self, key: &str) -> Result<bool>;
    /// The keys starting with `prefix`.
    fn keys_with_prefix(&mut self, prefix: &str) -> Result<Vec<String>>;
}

/// Evaluates `txn` against `view` at revision `next`: checks the compares and, when they hold,
/// applies the operations. Returns whether they held, how many keys were deleted and the events.
pub(crate) fn evaluate(
    view: &mut impl KvView,
    txn: &Txn,
    next: u64,
) -> Result<(bool, u64, Vec<WatchEvent>)> {
    for c in &txn.compares {
        let current = view.revs(c.key())?.map(|r| r.modified);
        if !c.holds(current) {
            return Ok((false, 0, Vec::new()));
        }
    }
    let mut deleted = 0;
    let mut events = Vec::with_capacity(txn.ops.len());
    let mut delete = |view: &mut dyn KvView, key: String, events: &mut Vec<WatchEvent>| {
        let existed = view.remove(&key)?;
        if existed {
            deleted += 1;
            events.push(WatchEvent {
                kind: EventKind::Delete,
                key,
                value: Bytes::new(),
                mod_revision: next,
            });
        }
        Ok::<_, Error>(())
    };
    for op in &txn.ops {
        match op {
            Op::Put { key, value } => {
                let revs = match view.revs(key)? {
                    Some(r) => Revs {
                        create: r.create,
                        modified: next,
                        version: r.version + 1,
                    },
                    None => Revs {
                        create: next,
                        modified: next,
                        version: 1,
                    },
                };
                view.store(key, revs, value)?;
                events.push(WatchEvent {
                    kind: EventKind::Put,
                    key: key.clone(),
                    value: value.clone(),
                    mod_revision: next,
                });
            }
            Op::Delete { key } => delete(view, key.clone(), &mut events)?,
            Op::DeletePrefix { prefix } => {
                for key in view.keys_with_prefix(prefix)? {
                    delete(view, key, &mut events)?;
                }
            }
        }
    }
    Ok((true, deleted, events))
}

/// An in-process storage engine under [`LocalStore`].
#[async_trait]
pub(crate) trait Engine: Debug + Send + Sync + 'static {
    /// The current revision.
    fn revision(&self) -> Result<u64>;
    /// One key.
    fn get(&self, key: &str) -> Result<Option<KeyValue>>;
    /// One page of keys under `prefix`, read at one consistent revision.
    fn list(&self, prefix: &str, options: &ListOptions) -> Result<ListPage>;
    /// [`AppContextStore::child_names`], at one consistent revision.
    fn child_names(&self, base: &str) -> Result<Vec<String>>;
    /// Applies `txn` atomically (durably, for a persistent engine) at the next revision and
    /// records its events in `log` before it returns, in revision order across commits.
    async fn commit(&self, txn: Txn, log: &SharedLog) -> Result<TxnResult>;
}

/// What applying a transaction gave, before its events are published.
#[derive(Debug)]
pub(crate) struct Applied {
    pub succeeded: bool,
    pub deleted: u64,
    /// The store's revision after it: the next one when it changed anything.
    pub revision: u64,
    pub events: Vec<WatchEvent>,
}

impl Applied {
    /// `evaluate`'s outcome at `next`, the store having been at `next - 1`.
    pub(crate) fn at(
        next: u64,
        (succeeded, deleted, events): (bool, u64, Vec<WatchEvent>),
    ) -> Self {
        let revision = if events.is_empty() { next - 1 } else { next };
        Self {
            succeeded,
            deleted,
            revision,
            events,
        }
    }

    /// Records the events in `log` and answers the transaction. Callers publish in the order
    /// they committed. (The embedded backend's: its writer thread commits outside the lock.)
    #[cfg(feature = "redb")]
    pub(crate) fn publish(self, log: &Mutex<ChangeLog>) -> TxnResult {
        self.record_in(&mut lock(log))
    }

    fn record_in(self, log: &mut ChangeLog) -> TxnResult {
        log.record(self.revision, self.events);
        TxnResult {
            succeeded: self.succeeded,
            revision: self.revision,
            deleted: self.deleted,
        }
    }
}

/// Runs `apply` at the revision after the log's and records its events, all under the log's lock:
/// the lock orders commits and their publication, so a watch that registers between two commits
/// sees each exactly once. For engines whose commits are quick.
pub(crate) fn commit_in_order(
    log: &Mutex<ChangeLog>,
    apply: impl FnOnce(u64) -> Result<(bool, u64, Vec<WatchEvent>)>,
) -> Result<TxnResult> {
    let mut log = lock(log);
    let next = log.revision + 1;
    Ok(Applied::at(next, apply(next)?).record_in(&mut log))
}

/// How many change events the log keeps for watches that start in the past.
pub(crate) const DEFAULT_LOG_CAPACITY: usize = 100_000;

/// The bounded log of recent changes plus the channel that feeds live watches.
#[derive(Debug)]
pub(crate) struct ChangeLog {
    /// Watches may start after any revision `>= floor`.
    floor: u64,
    revision: u64,
    events: VecDeque<WatchEvent>,
    capacity: usize,
    live: broadcast::Sender<Arc<[WatchEvent]>>,
}

impl ChangeLog {
    fn record(&mut self, revision: u64, events: Vec<WatchEvent>) {
        self.revision = revision;
        if events.is_empty() {
            return;
        }
        let batch: Arc<[WatchEvent]> = events.into();
        if batch.len() > self.capacity {
            // The whole revision would be dropped at once, and every one before it: not copied
            // in (a context's writes are hundreds of thousands of events; a scratch store keeps
            // no history).
            self.events.clear();
            self.floor = revision;
        } else {
            self.events.extend(batch.iter().cloned());
            // Drop whole revisions so a revision is either fully in the log or below the floor.
            while self.events.len() > self.capacity {
                let Some(oldest) = self.events.front().map(|e| e.mod_revision) else {
                    break;
                };
                while self
                    .events
                    .front()
                    .is_some_and(|e| e.mod_revision == oldest)
                {
                    self.events.pop_front();
                }
                self.floor = oldest;
            }
        }
        // No receiver is not an error: nobody watches.
        let _ = self.live.send(batch);
    }

    fn since(&self, prefix: &str, after: u64) -> Result<VecDeque<WatchEvent>> {
        if after < self.floor {
            return Err(Compacted {
                requested: after,
                compact_revision: self.floor,
            }
            .into_error());
        }
        // The log is in revision order: a watch starting at a recent revision (a status
        // answer's catch-up) reads only the events after it, not the whole log.
        let start = self.events.partition_point(|e| e.mod_revision <= after);
        Ok(self
            .events
            .range(start..)
            .filter(|e| e.key.starts_with(prefix))
            .cloned()
            .collect())
    }
}

/// The change log a store's commits publish to.
pub(crate) type SharedLog = Arc<Mutex<ChangeLog>>;

/// An AppContext store over an in-process [`Engine`], with watches served from a change log.
#[derive(Debug)]
pub(crate) struct LocalStore<E: Engine> {
    engine: E,
    log: SharedLog,
}

impl<E: Engine> LocalStore<E> {
    /// A store over `engine`, whose current revision is `revision`.
    pub(crate) fn new(engine: E, revision: u64, capacity: usize) -> Self {
        let (live, _) = broadcast::channel(1024);
        let log = ChangeLog {
            floor: revision,
            revision,
            events: VecDeque::new(),
            capacity: capacity.max(1),
            live,
        };
        Self {
            engine,
            log: Arc::new(Mutex::new(log)),
        }
    }

    pub(crate) fn engine(&self) -> &E {
        &self.engine
    }
}

#[async_trait]
impl<E: Engine> AppContextStore for LocalStore<E> {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        // A point read is a few page lookups, nearly always cached: cheaper inline than a hop to
        // the blocking pool and back (which cost rsync most of its time reading a large context)
        // and never queued behind writes there.
        self.engine.get(key)
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListPage> {
        // Inline as well: a page is bounded by its limit, and through the blocking pool a read
        // queued behind every durable write of a busy rsync (a status read of a context being
        // deployed to 10,000 clusters took minutes that way).
        self.engine.list(prefix, &options)
    }

    async fn child_names(&self, base: &str) -> Result<Vec<String>> {
        // Inline: a seek per child, never the keys below them.
        self.engine.child_names(base)
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        txn.validate()?;
        self.engine.commit(txn, &self.log).await
    }

    async fn watch(&self, prefix: &str, after_revision: u64) -> Result<WatchStream> {
        let (backlog, rx) = {
            let log = lock(&self.log);
            (log.since(prefix, after_revision)?, log.live.subscribe())
        };
        let state = WatchState {
            log: Arc::clone(&self.log),
            prefix: prefix.to_owned(),
            after: after_revision,
            pending: backlog,
            rx,
            failed: false,
        };
        Ok(Box::pin(futures::stream::unfold(state, WatchState::next)))
    }

    async fn health(&self) -> Result<()> {
        self.engine.revision().map(drop)
    }

    fn watches_are_immediate(&self) -> bool {
        // A commit records its events in the change log and the live channel before it returns.
        true
    }
}

struct WatchState {
    log: Arc<Mutex<ChangeLog>>,
    prefix: String,
    after: u64,
    pending: VecDeque<WatchEvent>,
    rx: broadcast::Receiver<Arc<[WatchEvent]>>,
    failed: bool,
}

impl WatchState {
    async fn next(mut self) -> Option<(Result<WatchEvent>, Self)> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(e) = self.pending.pop_front() {
                self.after = e.mod_revision;
                return Some((Ok(e), self));
            }
            match self.rx.recv().await {
                Ok(batch) => self.pending.extend(
                    batch
                        .iter()
                        .filter(|e| e.mod_revision > self.after && e.key.starts_with(&self.prefix))
                        .cloned(),
                ),
                // The live channel overflowed: catch up from the log, which keeps more history.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let caught_up = lock(&self.log).since(&self.prefix, self.after);
                    match caught_up {
                        Ok(events) => self.pending = events,
                        Err(e) => {
                            self.failed = true;
                            return Some((Err(e), self));
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// Keys in ascending order from a given one on: what [`child_names`] reads of an engine.
pub(crate) trait KeysFrom {
    /// Gives `visit` the keys `>= from` in order until it answers false or they end.
    fn keys_from(&self, from: &str, visit: &mut dyn FnMut(&str) -> bool) -> Result<()>;
}

/// How many keys of one child's subtree a children listing reads before it seeks past the
/// rest: a child with a few keys below it is cheaper to read through than to seek past.
const SCAN_BEFORE_SEEK: usize = 8;

/// The names `n` of the keys `<base>n/` in `keys` ([`AppContextStore::child_names`]): reads
/// through each child's first keys, then seeks past its subtree.
pub(crate) fn child_names(keys: &impl KeysFrom, base: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut from = base.to_owned();
    loop {
        // The subtree being read (`<base>n/`) and how many of its keys were read.
        let mut within: Option<(String, usize)> = None;
        let mut seek = None;
        keys.keys_from(&from, &mut |k| {
            let Some(rest) = k.strip_prefix(base) else {
                return false;
            };
            if let Some((subtree, read)) = &mut within
                && k.starts_with(subtree.as_str())
            {
                *read += 1;
                if *read > SCAN_BEFORE_SEEK {
                    // Every key below `<base>n/` sorts before `<base>n0` ('0' follows '/').
                    subtree.pop();
                    subtree.push('0');
                    seek = Some(std::mem::take(subtree));
                    return false;
                }
                return true;
            }
            within = rest.find('/').map(|end| {
                let name = &rest[..end];
                if !name.is_empty() && end + 1 == rest.len() {
                    out.push(name.to_owned());
                }
                (format!("{base}{name}/"), 1)
            });
            true
        })?;
        match seek {
            Some(next) => from = next,
            None => return Ok(out),
        }
    }
}

/// Applies the listing options to an ascending iterator of keys under a prefix.
pub(crate) fn page<I>(iter: I, options: &ListOptions, revision: u64) -> Result<ListPage>
where
    I: Iterator<Item = Result<KeyValue>>,
{
    let limit = options.limit.unwrap_or(usize::MAX);
    let mut kvs = Vec::new();
    let mut more = false;
    for kv in iter {
        let mut kv = kv?;
        if options
            .start_after
            .as_deref()
            .is_some_and(|s| kv.key.as_str() <= s)
        {
            continue;
        }
        if kvs.len() == limit {
            more = true;
            break;
        }
        if options.keys_only {
            kv.value = Bytes::new();
        }
        kvs.push(kv);
    }
    Ok(ListPage {
        kvs,
        more,
        revision,
    })
}

/// The first key a listing under `prefix` must look at.
pub(crate) fn list_start<'a>(prefix: &'a str, options: &'a ListOptions) -> &'a str {
    match options.start_after.as_deref() {
        Some(s) if s > prefix => s,
        _ => prefix,
    }
}

/// Implements `AppContextStore` for a newtype over a store that implements it.
macro_rules! delegate_app_context_store {
    ($t:ty) => {
        #[async_trait::async_trait]
        impl $crate::kv::AppContextStore for $t {
            async fn get(&self, key: &str) -> emco_core::Result<Option<$crate::kv::KeyValue>> {
                self.0.get(key).await
            }
            async fn list(
                &self,
                prefix: &str,
                options: $crate::kv::ListOptions,
            ) -> emco_core::Result<$crate::kv::ListPage> {
                self.0.list(prefix, options).await
            }
            async fn txn(&self, txn: $crate::kv::Txn) -> emco_core::Result<$crate::kv::TxnResult> {
                self.0.txn(txn).await
            }
            async fn child_names(&self, base: &str) -> emco_core::Result<Vec<String>> {
                self.0.child_names(base).await
            }
            async fn watch(
                &self,
                prefix: &str,
                after_revision: u64,
            ) -> emco_core::Result<$crate::kv::WatchStream> {
                self.0.watch(prefix, after_revision).await
            }
            async fn health(&self) -> emco_core::Result<()> {
                self.0.health().await
            }
            fn watches_are_immediate(&self) -> bool {
                self.0.watches_are_immediate()
            }
        }
    };
}
pub(crate) use delegate_app_context_store;
