//! The embedded file backends on [redb](https://docs.rs/redb): the server's default, so a fresh
//! machine needs no external service. One file holds both stores:
//!
//! ```no_run
//! # fn main() -> emco_core::Result<()> {
//! let db = emco_store::embedded::RedbBuilder::new().with_path("/var/lib/emco/emco.redb").build()?;
//! let contexts = db.app_context_store();
//! let resources = db.resource_store();
//! # Ok(()) }
//! ```
//!
//! Every AppContext transaction and every resource write is committed with immediate durability
//! (fsync) before it is acknowledged; concurrent ones share a redb write transaction and its
//! fsync (a group commit), each AppContext transaction still at its own revision. Blobs are
//! written in 1 MiB chunks, each in its own non-durable transaction, and published by a final
//! durable transaction that points the blob at the new chunks; chunks left by a crash
//! mid-upload are removed on open.

use std::fmt;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Result};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::kv::{KeyValue, ListOptions, ListPage, Txn, TxnResult};
use crate::local::{self, Applied, Engine, KvView, LocalStore, Revs, SharedLog};
use crate::resource::{
    BLOB_CHUNK, BlobStream, BlobVersion, Chunked, Expect, Family, FamilyScan, Filter, PutMode,
    ResourceKey, ResourceStore, Scanned, check_put, in_creation_order, matches_all, write_chunks,
};

const KV: TableDefinition<&str, &[u8]> = TableDefinition::new("appcontext");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RES: TableDefinition<&str, &[u8]> = TableDefinition::new("resources");
/// Encoded resource key -> its creation number, which lists are ordered by. Objects stored
/// before this table existed have none and list first, in key order.
const RES_CREATED: TableDefinition<&str, u64> = TableDefinition::new("resource_created");
/// (encoded key, blob name) -> (upload id, size, chunk count)
const BLOB_META: TableDefinition<(&str, &str), (u64, u64, u32)> = TableDefinition::new("blob_meta");
/// (encoded key, blob name, upload id, chunk index) -> bytes
const BLOB_CHUNKS: TableDefinition<(&str, &str, u64, u32), &[u8]> =
    TableDefinition::new("blob_chunks");

const REVISION: &str = "revision";
/// The META entry holding the last resource creation number given.
const LAST_CREATED: &str = "resource-created";

/// The store's revision as `meta` (the META table, read or written) holds it.
fn stored_revision(meta: &impl ReadableTable<&'static str, u64>) -> Result<u64> {
    Ok(meta
        .get(REVISION)
        .map_err(db_err)?
        .map(|g| g.value())
        .unwrap_or(0))
}

fn db_err(e: impl Into<redb::Error>) -> Error {
    let e: redb::Error = e.into();
    // A failed write (a full disk, most often) leaves redb refusing everything until the file
    // is opened again: say what to do, not only what happened.
    let message = match &e {
        redb::Error::Io(io) => format!(
            "embedded store: cannot write its file ({io}); free disk space, then restart the \
             server"
        ),
        redb::Error::PreviousIo => "embedded store: a write to its file failed earlier (a full \
             disk?); free disk space, then restart the server"
            .to_owned(),
        _ => format!("embedded store: {e}"),
    };
    Error::unavailable(message).with_source(e)
}

/// The creation number of the resource stored under `key` (0 for one stored before they were
/// kept).
fn created(order: &impl ReadableTable<&'static str, u64>, key: &str) -> Result<u64> {
    Ok(order.get(key).map_err(db_err)?.map_or(0, |g| g.value()))
}

fn corrupt(what: &str) -> Error {
    Error::internal(format!("embedded store: corrupt {what}"))
}

/// The default of [`RedbBuilder::with_cache_size`]: 128 MiB. redb's own default (1 GiB) was
/// the largest single part of the server's memory at 10,000 clusters; reads it misses come from
/// the operating system's page cache.
pub const DEFAULT_CACHE_SIZE: usize = 128 * 1024 * 1024;

/// Builds a [`Redb`] database handle.
#[derive(Debug, Clone, Default)]
pub struct RedbBuilder {
    path: Option<PathBuf>,
    log_capacity: Option<usize>,
    cache_size: Option<usize>,
}

impl RedbBuilder {
    /// A builder with no path.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder whose path comes from `EMCO_DATA_DIR` (file `emco.redb` in it).
    #[must_use]
    pub fn from_env() -> Self {
        let path = std::env::var_os("EMCO_DATA_DIR").map(|d| PathBuf::from(d).join("emco.redb"));
        Self {
            path,
            ..Self::default()
        }
    }

    /// The database file (created if missing).
    #[must_use]
    pub fn with_path(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }

    /// How many changes the AppContext store keeps for watches that start in the past
    /// (default 100,000). History before opening is never available.
    #[must_use]
    pub fn with_log_capacity(mut self, capacity: usize) -> Self {
        self.log_capacity = Some(capacity);
        self
    }

    /// How much memory the database may use for its page cache and write buffer (default
    /// [`DEFAULT_CACHE_SIZE`]).
    #[must_use]
    pub fn with_cache_size(mut self, bytes: usize) -> Self {
        self.cache_size = Some(bytes);
        self
    }

    /// Opens (or creates) the database and removes blob chunks left by an interrupted upload.
    ///
    /// # Errors
    /// `InvalidArgument` without a path; `Unavailable` when the file cannot be opened (for
    /// example because another process holds it).
    pub fn build(self) -> Result<Redb> {
        let path = self
            .path
            .ok_or_else(|| Error::invalid("the redb store needs a path"))?;
        let db = redb::Builder::new()
            .set_cache_size(self.cache_size.unwrap_or(DEFAULT_CACHE_SIZE))
            .create(&path)
            .map_err(db_err)?;
        let tx = db.begin_write().map_err(db_err)?;
        let revision = {
            tx.open_table(KV).map_err(db_err)?;
            tx.open_table(RES).map_err(db_err)?;
            tx.open_table(RES_CREATED).map_err(db_err)?;
            let meta = tx.open_table(BLOB_META).map_err(db_err)?;
            let mut chunks = tx.open_table(BLOB_CHUNKS).map_err(db_err)?;
            let mut orphans = Vec::new();
            for row in chunks.iter().map_err(db_err)? {
                let (k, _) = row.map_err(db_err)?;
                let (key, name, upload, n) = k.value();
                let live = meta.get((key, name)).map_err(db_err)?.map(|m| m.value().0);
                if live != Some(upload) {
                    orphans.push((key.to_owned(), name.to_owned(), upload, n));
                }
            }
            for (key, name, upload, n) in &orphans {
                chunks
                    .remove((key.as_str(), name.as_str(), *upload, *n))
                    .map_err(db_err)?;
            }
            stored_revision(&tx.open_table(META).map_err(db_err)?)?
        };
        tx.commit().map_err(db_err)?;
        let released = Arc::new(AtomicBool::new(false));
        let db = Arc::new(OpenFile {
            db,
            _released: Released(Arc::clone(&released)),
        });
        let engine = KvEngine {
            db: Arc::clone(&db),
            commits: GroupCommit::start(&db, "emco-redb-contexts")?,
        };
        let capacity = self.log_capacity.unwrap_or(local::DEFAULT_LOG_CAPACITY);
        Ok(Redb {
            path,
            file: FileHold(released),
            app_contexts: Arc::new(RedbAppContextStore(LocalStore::new(
                engine, revision, capacity,
            ))),
            resources: Arc::new(RedbResourceStore {
                commits: GroupCommit::start(&db, "emco-redb-resources")?,
                db,
            }),
        })
    }
}

/// An open redb file holding both stores.
#[derive(Debug, Clone)]
pub struct Redb {
    path: PathBuf,
    file: FileHold,
    app_contexts: Arc<RedbAppContextStore>,
    resources: Arc<RedbResourceStore>,
}

/// Whether an open redb file is still held: its stores, and the reads and commits they started
/// (which may outlive a cancelled caller), keep it and its lock; another open of the file
/// succeeds once none does.
#[derive(Debug, Clone)]
pub struct FileHold(Arc<AtomicBool>);

impl FileHold {
    /// Whether everything let go of the file, and the database closed it.
    #[must_use]
    pub fn is_released(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The open database. Its last holder closes it, and the file lock goes at the end of that
/// (fields drop in order: the database, then the flag saying it is closed).
struct OpenFile {
    db: Database,
    _released: Released,
}

impl std::ops::Deref for OpenFile {
    type Target = Database;
    fn deref(&self) -> &Database {
        &self.db
    }
}

struct Released(Arc<AtomicBool>);

impl Drop for Released {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Redb {
    /// Tells when the file is let go.
    #[must_use]
    pub fn hold(&self) -> FileHold {
        self.file.clone()
    }

    /// The AppContext store in this file.
    #[must_use]
    pub fn app_context_store(&self) -> Arc<RedbAppContextStore> {
        Arc::clone(&self.app_contexts)
    }

    /// The resource store in this file.
    #[must_use]
    pub fn resource_store(&self) -> Arc<RedbResourceStore> {
        Arc::clone(&self.resources)
    }

    /// The size of the database file in bytes.
    ///
    /// # Errors
    /// `Unavailable` when the file cannot be read.
    pub fn file_size(&self) -> Result<u64> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| Error::unavailable("embedded store: cannot stat file").with_source(e))
    }
}

struct KvEngine {
    db: Arc<OpenFile>,
    commits: GroupCommit<Published>,
}

/// A transaction in a committed group, whose events go to its store's change log.
struct Published {
    log: SharedLog,
    applied: Applied,
}

impl AfterCommit for Published {
    type Answer = TxnResult;
    fn after_commit(self) -> TxnResult {
        self.applied.publish(&self.log)
    }
}

impl fmt::Debug for KvEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KvEngine").finish_non_exhaustive()
    }
}

/// Stored form of a key: create, mod and version revisions (little endian), then the value.
fn encode_entry(revs: Revs, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + value.len());
    out.extend_from_slice(&revs.create.to_le_bytes());
    out.extend_from_slice(&revs.modified.to_le_bytes());
    out.extend_from_slice(&revs.version.to_le_bytes());
    out.extend_from_slice(value);
    out
}

fn decode_revs(raw: &[u8]) -> Result<Revs> {
    let word = |i: usize| -> Result<u64> {
        raw.get(i * 8..i * 8 + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| corrupt("entry"))
    };
    Ok(Revs {
        create: word(0)?,
        modified: word(1)?,
        version: word(2)?,
    })
}

fn decode_kv(key: &str, raw: &[u8], keys_only: bool) -> Result<KeyValue> {
    let revs = decode_revs(raw)?;
    let value = if keys_only {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(&raw[24..])
    };
    Ok(KeyValue {
        key: key.to_owned(),
        value,
        create_revision: revs.create,
        mod_revision: revs.modified,
        version: revs.version,
    })
}

fn from(start: &str) -> (Bound<&str>, Bound<&str>) {
    (Bound::Included(start), Bound::Unbounded)
}

/// The key-value table in a read transaction.
struct ReadView(redb::ReadOnlyTable<&'static str, &'static [u8]>);

impl local::KeysFrom for ReadView {
    fn keys_from(&self, start: &str, visit: &mut dyn FnMut(&str) -> bool) -> Result<()> {
        for row in self.0.range::<&str>(from(start)).map_err(db_err)? {
            let (k, _) = row.map_err(db_err)?;
            if !visit(k.value()) {
                break;
            }
        }
        Ok(())
    }
}

struct TableView<'t>(redb::Table<'t, &'static str, &'static [u8]>);

impl KvView for TableView<'_> {
    fn revs(&mut self, key: &str) -> Result<Option<Revs>> {
        match self.0.get(key).map_err(db_err)? {
            Some(g) => decode_revs(g.value()).map(Some),
            None => Ok(None),
        }
    }

    fn store(&mut self, key: &str, revs: Revs, value: &[u8]) -> Result<()> {
        self.0
            .insert(key, encode_entry(revs, value).as_slice())
            .map_err(db_err)?;
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<bool> {
        Ok(self.0.remove(key).map_err(db_err)?.is_some())
    }

    fn keys_with_prefix(&mut self, prefix: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for row in self.0.range::<&str>(from(prefix)).map_err(db_err)? {
            let (k, _) = row.map_err(db_err)?;
            if !k.value().starts_with(prefix) {
                break;
            }
            out.push(k.value().to_owned());
        }
        Ok(out)
    }
}

#[async_trait]
impl Engine for KvEngine {
    fn revision(&self) -> Result<u64> {
        let tx = self.db.begin_read().map_err(db_err)?;
        stored_revision(&tx.open_table(META).map_err(db_err)?)
    }

    fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(KV).map_err(db_err)?;
        match table.get(key).map_err(db_err)? {
            Some(g) => decode_kv(key, g.value(), false).map(Some),
            None => Ok(None),
        }
    }

    fn list(&self, prefix: &str, options: &ListOptions) -> Result<ListPage> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let revision = stored_revision(&tx.open_table(META).map_err(db_err)?)?;
        let table = tx.open_table(KV).map_err(db_err)?;
        let rows = table
            .range::<&str>(from(local::list_start(prefix, options)))
            .map_err(db_err)?;
        let iter = rows
            .map(|row| row.map_err(db_err))
            .take_while(|row| {
                row.as_ref()
                    .map_or(true, |(k, _)| k.value().starts_with(prefix))
            })
            .map(|row| row.and_then(|(k, v)| decode_kv(k.value(), v.value(), options.keys_only)));
        local::page(iter, options, revision)
    }

    fn child_names(&self, base: &str) -> Result<Vec<String>> {
        let tx = self.db.begin_read().map_err(db_err)?;
        local::child_names(&ReadView(tx.open_table(KV).map_err(db_err)?), base)
    }

    async fn commit(&self, txn: Txn, log: &SharedLog) -> Result<TxnResult> {
        let log = Arc::clone(log);
        // The group's writes run in order in one transaction, so each takes the revision the
        // one before it left; the writer thread publishes them in that order after the commit.
        self.commits
            .write(move |tx| {
                let mut meta = tx.open_table(META).map_err(db_err)?;
                let current = stored_revision(&meta)?;
                let applied = {
                    let mut view = TableView(tx.open_table(KV).map_err(db_err)?);
                    Applied::at(current + 1, local::evaluate(&mut view, &txn, current + 1)?)
                };
                if applied.revision != current {
                    meta.insert(REVISION, applied.revision).map_err(db_err)?;
                }
                Ok(Ok(Published { log, applied }))
            })
            .await
    }
}

/// The embedded AppContext store. Revisions survive restarts; watch history starts at open.
#[derive(Debug)]
pub struct RedbAppContextStore(LocalStore<KvEngine>);

crate::local::delegate_app_context_store!(RedbAppContextStore);

/// The embedded resource store.
pub struct RedbResourceStore {
    db: Arc<OpenFile>,
    commits: GroupCommit<()>,
}

/// What a write of a group commit does once its group is on disk, in commit order, before its
/// caller is answered; its answer.
trait AfterCommit: Send + 'static {
    type Answer: Send + 'static;
    fn after_commit(self) -> Self::Answer;
}

impl AfterCommit for () {
    type Answer = ();
    fn after_commit(self) {}
}

/// One write of a group commit, run in the group's transaction. The outer error is the store's
/// (the whole group fails and nothing of it is kept); the inner one the write's own refusal (a
/// precondition), given only before it changed anything.
type WriteJob<T> = Box<dyn FnOnce(&redb::WriteTransaction) -> Result<Result<T>> + Send>;
type Queued<T> = (
    WriteJob<T>,
    oneshot::Sender<Result<<T as AfterCommit>::Answer>>,
);

/// The most writes one commit takes.
const GROUP_MAX: usize = 512;

/// Concurrent writers committed together: a writer thread takes every write queued while the
/// previous commit ran into one durable transaction, so callers share one fsync instead of
/// paying one each. Each caller is answered after the commit that holds its write: an
/// acknowledged write is on disk; a failed commit fails every write of its group.
struct GroupCommit<T: AfterCommit> {
    queue: std::sync::mpsc::Sender<Queued<T>>,
}

impl<T: AfterCommit> GroupCommit<T> {
    fn start(db: &Arc<OpenFile>, name: &str) -> Result<Self> {
        let (queue, jobs) = std::sync::mpsc::channel::<Queued<T>>();
        // Weak: the database (and its file lock) goes when the stores go, not with this thread.
        let db = Arc::downgrade(db);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                while let Ok(first) = jobs.recv() {
                    let mut group = vec![first];
                    while group.len() < GROUP_MAX {
                        match jobs.try_recv() {
                            Ok(job) => group.push(job),
                            Err(_) => break,
                        }
                    }
                    let (writes, replies): (Vec<WriteJob<T>>, Vec<_>) = group.into_iter().unzip();
                    let outcome = match db.upgrade() {
                        Some(db) => commit_group(&db, writes),
                        None => Err(Error::unavailable("embedded store: closed")),
                    };
                    match outcome {
                        Ok(answers) => {
                            for (reply, answer) in replies.into_iter().zip(answers) {
                                drop(reply.send(answer.map(AfterCommit::after_commit)));
                            }
                        }
                        Err(e) => {
                            for reply in replies {
                                drop(reply.send(Err(Error::new(e.kind(), e.message()))));
                            }
                        }
                    }
                }
            })
            .map_err(|e| {
                Error::unavailable("embedded store: cannot start its writer").with_source(e)
            })?;
        Ok(Self { queue })
    }

    /// Runs `write` in the next group and waits for its commit.
    async fn write(
        &self,
        write: impl FnOnce(&redb::WriteTransaction) -> Result<Result<T>> + Send + 'static,
    ) -> Result<T::Answer> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((Box::new(write), reply))
            .map_err(|_| Error::unavailable("embedded store: its writer stopped"))?;
        answer
            .await
            .map_err(|_| Error::unavailable("embedded store: its writer stopped"))?
    }
}

/// Runs `writes` in one durable transaction, in order (each sees the ones before it), and
/// commits; their own answers.
fn commit_group<T: AfterCommit>(db: &Database, writes: Vec<WriteJob<T>>) -> Result<Vec<Result<T>>> {
    let tx = durable_write(db)?;
    let answers = writes
        .into_iter()
        .map(|w| w(&tx))
        .collect::<Result<Vec<_>>>()?;
    tx.commit().map_err(db_err)?;
    Ok(answers)
}

impl fmt::Debug for RedbResourceStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbResourceStore").finish_non_exhaustive()
    }
}

impl RedbResourceStore {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| Error::internal("store task failed").with_source(e))?
    }
}

fn durable_write(db: &Database) -> Result<redb::WriteTransaction> {
    let mut tx = db.begin_write().map_err(db_err)?;
    tx.set_durability(Durability::Immediate)
        .map_err(|e| db_err(redb::Error::from(e)))?;
    Ok(tx)
}

fn remove_chunks(
    chunks: &mut redb::Table<'_, (&'static str, &'static str, u64, u32), &'static [u8]>,
    key: &str,
    name: &str,
    upload: u64,
) -> Result<()> {
    chunks
        .retain_in(
            (key, name, upload, 0)..=(key, name, upload, u32::MAX),
            |_, _| false,
        )
        .map_err(db_err)
}

#[async_trait]
impl ResourceStore for RedbResourceStore {
    async fn put(&self, key: &ResourceKey, value: &Value, mode: PutMode) -> Result<()> {
        let enc = key.encode()?;
        let parent = match key.parent() {
            Some(p) if !p.is_root() => Some(p.encode()?),
            _ => None,
        };
        let doc = serde_json::to_vec(value)
            .map_err(|e| Error::invalid("the document is not serializable").with_source(e))?;
        let key = key.clone();
        self.commits
            .write(move |tx| {
                let mut table = tx.open_table(RES).map_err(db_err)?;
                let parent_exists = match &parent {
                    Some(p) => table.get(p.as_str()).map_err(db_err)?.is_some(),
                    None => true,
                };
                let exists = table.get(enc.as_str()).map_err(db_err)?.is_some();
                if let Err(refused) = check_put(&key, mode, parent_exists, exists) {
                    return Ok(Err(refused));
                }
                table.insert(enc.as_str(), doc.as_slice()).map_err(db_err)?;
                if !exists {
                    let mut meta = tx.open_table(META).map_err(db_err)?;
                    let created = meta
                        .get(LAST_CREATED)
                        .map_err(db_err)?
                        .map_or(0, |g| g.value())
                        + 1;
                    meta.insert(LAST_CREATED, created).map_err(db_err)?;
                    let mut order = tx.open_table(RES_CREATED).map_err(db_err)?;
                    order.insert(enc.as_str(), created).map_err(db_err)?;
                }
                Ok(Ok(()))
            })
            .await
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Value>> {
        // Inline, as the AppContext store's point reads: cheaper than the blocking pool.
        let enc = key.encode()?;
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(RES).map_err(db_err)?;
        match table.get(enc.as_str()).map_err(db_err)? {
            Some(g) => serde_json::from_slice(g.value())
                .map(Some)
                .map_err(|e| corrupt("document").with_source(e)),
            None => Ok(None),
        }
    }

    async fn list(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        filters: &[Filter],
    ) -> Result<Vec<(ResourceKey, Value)>> {
        let prefix = parent.children_prefix(child_type)?;
        let filters = filters.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(db_err)?;
            let table = tx.open_table(RES).map_err(db_err)?;
            let order = tx.open_table(RES_CREATED).map_err(db_err)?;
            let mut out = Vec::new();
            for row in table.range::<&str>(from(&prefix)).map_err(db_err)? {
                let (k, v) = row.map_err(db_err)?;
                let Some(rest) = k.value().strip_prefix(prefix.as_str()) else {
                    break;
                };
                if rest.contains('/') {
                    continue;
                }
                let doc: Value = serde_json::from_slice(v.value())
                    .map_err(|e| corrupt("document").with_source(e))?;
                if matches_all(&doc, &filters) {
                    let created = created(&order, k.value())?;
                    out.push((created, (ResourceKey::decode(k.value())?, doc)));
                }
            }
            Ok(in_creation_order(out))
        })
        .await
    }

    async fn list_with_children(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        grandchild_type: &str,
    ) -> Result<Vec<Family>> {
        let mut scan = FamilyScan::new(parent, child_type, grandchild_type)?;
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(db_err)?;
            let table = tx.open_table(RES).map_err(db_err)?;
            let order = tx.open_table(RES_CREATED).map_err(db_err)?;
            let prefix = scan.prefix().to_owned();
            for row in table.range::<&str>(from(&prefix)).map_err(db_err)? {
                let (k, v) = row.map_err(db_err)?;
                match scan.classify(k.value()) {
                    Scanned::Done => break,
                    Scanned::Skip => {}
                    Scanned::Wanted => {
                        let doc: Value = serde_json::from_slice(v.value())
                            .map_err(|e| corrupt("document").with_source(e))?;
                        scan.add(k.value(), created(&order, k.value())?, doc)?;
                    }
                }
            }
            Ok(scan.finish())
        })
        .await
    }

    async fn delete(&self, key: &ResourceKey) -> Result<()> {
        let enc = key.encode()?;
        let key = key.clone();
        self.commits
            .write(move |tx| {
                let mut table = tx.open_table(RES).map_err(db_err)?;
                if table.get(enc.as_str()).map_err(db_err)?.is_none() {
                    return Ok(Err(Error::not_found(format!("{key} does not exist"))));
                }
                let below = format!("{enc}/");
                let child = match table.range::<&str>(from(&below)).map_err(db_err)?.next() {
                    Some(row) => row.map_err(db_err)?.0.value().starts_with(&below),
                    None => false,
                };
                if child {
                    return Ok(Err(Error::conflict(format!("{key} has children"))));
                }
                table.remove(enc.as_str()).map_err(db_err)?;
                let mut order = tx.open_table(RES_CREATED).map_err(db_err)?;
                order.remove(enc.as_str()).map_err(db_err)?;
                let mut meta = tx.open_table(BLOB_META).map_err(db_err)?;
                let mut chunks = tx.open_table(BLOB_CHUNKS).map_err(db_err)?;
                let mut blobs = Vec::new();
                for row in meta.range((enc.as_str(), "")..).map_err(db_err)? {
                    let (k, v) = row.map_err(db_err)?;
                    if k.value().0 != enc {
                        break;
                    }
                    blobs.push((k.value().1.to_owned(), v.value().0));
                }
                for (name, upload) in blobs {
                    meta.remove((enc.as_str(), name.as_str())).map_err(db_err)?;
                    remove_chunks(&mut chunks, &enc, &name, upload)?;
                }
                Ok(Ok(()))
            })
            .await
    }

    async fn put_blob_if(
        &self,
        key: &ResourceKey,
        name: &str,
        data: BlobStream,
        expect: Expect,
    ) -> Result<(u64, BlobVersion)> {
        let enc = key.encode()?;
        if self.get(key).await?.is_none() {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        // The upload id is the blob's version.
        let upload = BlobVersion::fresh().raw();
        let Chunked {
            size,
            count: n,
            failure,
        } = write_chunks(data, BLOB_CHUNK, |i, chunk| {
            let (k, nm) = (enc.clone(), name.to_owned());
            // Non-durable: the final pointer commit below makes these durable together.
            self.blocking(move |db| {
                let mut tx = db.begin_write().map_err(db_err)?;
                tx.set_durability(Durability::None)
                    .map_err(|e| db_err(redb::Error::from(e)))?;
                tx.open_table(BLOB_CHUNKS)
                    .map_err(db_err)?
                    .insert((k.as_str(), nm.as_str(), upload, i), chunk.as_ref())
                    .map_err(db_err)?;
                tx.commit().map_err(db_err)
            })
        })
        .await;
        let (k, nm, key) = (enc, name.to_owned(), key.clone());
        self.blocking(move |db| {
            let tx = durable_write(db)?;
            let result = (|| {
                let mut chunks = tx.open_table(BLOB_CHUNKS).map_err(db_err)?;
                if let Some(e) = failure {
                    remove_chunks(&mut chunks, &k, &nm, upload)?;
                    return Err(e);
                }
                if tx
                    .open_table(RES)
                    .map_err(db_err)?
                    .get(k.as_str())
                    .map_err(db_err)?
                    .is_none()
                {
                    remove_chunks(&mut chunks, &k, &nm, upload)?;
                    return Err(Error::not_found(format!("{key} does not exist")));
                }
                let mut meta = tx.open_table(BLOB_META).map_err(db_err)?;
                // One write transaction at a time: nothing changes between this check and the
                // insert.
                let current = meta
                    .get((k.as_str(), nm.as_str()))
                    .map_err(db_err)?
                    .map(|g| BlobVersion::from_raw(g.value().0));
                if !expect.holds(current) {
                    remove_chunks(&mut chunks, &k, &nm, upload)?;
                    return Err(Expect::failed(&key, &nm));
                }
                let old = meta
                    .insert((k.as_str(), nm.as_str()), (upload, size, n))
                    .map_err(db_err)?
                    .map(|g| g.value().0);
                if let Some(old) = old {
                    remove_chunks(&mut chunks, &k, &nm, old)?;
                }
                Ok((size, BlobVersion::from_raw(upload)))
            })();
            // Commit the cleanup of a failed upload too; then report its error.
            tx.commit().map_err(db_err)?;
            result
        })
        .await
    }

    async fn get_blob_versioned(
        &self,
        key: &ResourceKey,
        name: &str,
    ) -> Result<(BlobVersion, BlobStream)> {
        let (enc, nm, shown) = (key.encode()?, name.to_owned(), key.to_string());
        let (tx, upload, count) = self
            .blocking(move |db| {
                let tx = db.begin_read().map_err(db_err)?;
                let meta = tx.open_table(BLOB_META).map_err(db_err)?;
                let found = meta
                    .get((enc.as_str(), nm.as_str()))
                    .map_err(db_err)?
                    .map(|g| g.value());
                drop(meta);
                match found {
                    Some((upload, _, count)) => Ok((tx, upload, count)),
                    None => Err(Error::not_found(format!("{shown} has no blob {nm:?}"))),
                }
            })
            .await?;
        // The read transaction is a snapshot: a concurrent replace cannot tear the stream.
        let state = (Some(tx), 0u32, key.encode()?, name.to_owned());
        let stream = Box::pin(futures::stream::unfold(
            state,
            move |(tx, i, k, nm)| async move {
                let tx = tx?;
                if i >= count {
                    return None;
                }
                let (k2, nm2) = (k.clone(), nm.clone());
                let read = tokio::task::spawn_blocking(move || {
                    let chunk = (|| {
                        let table = tx.open_table(BLOB_CHUNKS).map_err(db_err)?;
                        let g = table
                            .get((k2.as_str(), nm2.as_str(), upload, i))
                            .map_err(db_err)?
                            .ok_or_else(|| corrupt("blob (missing chunk)"))?;
                        Ok(Bytes::copy_from_slice(g.value()))
                    })();
                    (tx, chunk)
                })
                .await;
                match read {
                    Ok((tx, Ok(chunk))) => Some((Ok(chunk), (Some(tx), i + 1, k, nm))),
                    Ok((_, Err(e))) => Some((Err(e), (None, i, k, nm))),
                    Err(e) => Some((
                        Err(Error::internal("store task failed").with_source(e)),
                        (None, i, k, nm),
                    )),
                }
            },
        ));
        Ok((BlobVersion::from_raw(upload), stream))
    }

    async fn delete_blob(&self, key: &ResourceKey, name: &str) -> Result<bool> {
        let (enc, nm) = (key.encode()?, name.to_owned());
        self.blocking(move |db| {
            let tx = durable_write(db)?;
            let existed = {
                let mut meta = tx.open_table(BLOB_META).map_err(db_err)?;
                let old = meta
                    .remove((enc.as_str(), nm.as_str()))
                    .map_err(db_err)?
                    .map(|g| g.value().0);
                if let Some(upload) = old {
                    let mut chunks = tx.open_table(BLOB_CHUNKS).map_err(db_err)?;
                    remove_chunks(&mut chunks, &enc, &nm, upload)?;
                }
                old.is_some()
            };
            tx.commit().map_err(db_err)?;
            Ok(existed)
        })
        .await
    }

    async fn health(&self) -> Result<()> {
        self.blocking(|db| db.begin_read().map(drop).map_err(db_err))
            .await
    }
}
