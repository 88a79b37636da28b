//! The resource store trait (EMCO's "DB"): onboarded objects under hierarchical keys with
//! parent/child referential integrity, plus named binary blobs streamed in chunks.

use std::fmt::{self, Debug};

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Found, Result};
use futures::stream::BoxStream;
use serde_json::Value;

/// A stream of blob bytes, in order.
pub type BlobStream = BoxStream<'static, Result<Bytes>>;

/// The size of the chunks the persistent backends store blobs in.
pub const BLOB_CHUNK: usize = 1024 * 1024;

/// The content of the file at `path` as a blob stream, read in 256 KiB pieces (an upload
/// spooled to disk, a chart from a directory), so a large file never sits in memory whole.
///
/// # Errors
/// Internal when the file cannot be opened; the stream yields Internal when a read fails.
pub async fn file_blob_stream(path: &std::path::Path) -> Result<BlobStream> {
    use tokio::io::AsyncReadExt as _;
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| Error::internal(format!("cannot open {}", path.display())).with_source(e))?;
    let stream = futures::stream::try_unfold(file, |mut file| async move {
        let mut piece = vec![0; 256 * 1024];
        let n = file
            .read(&mut piece)
            .await
            .map_err(|e| Error::internal("cannot read a file into a blob").with_source(e))?;
        piece.truncate(n);
        Ok((n > 0).then(|| (Bytes::from(piece), file)))
    });
    Ok(Box::pin(stream))
}

/// The key of an object: an ordered list of `(type, name)` segments, e.g.
/// `project=p1 / compositeApp=ca / compositeAppVersion=v1 / app=a1`. The parent is the key
/// without its last segment; the empty key is the root.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceKey {
    segments: Vec<(String, String)>,
}

impl ResourceKey {
    /// The root (no segments): the parent of top-level objects.
    #[must_use]
    pub fn root() -> Self {
        Self::default()
    }

    /// This key extended by one `(type, name)` segment.
    #[must_use]
    pub fn child(&self, kind: impl Into<String>, name: impl Into<String>) -> Self {
        let mut segments = self.segments.clone();
        segments.push((kind.into(), name.into()));
        Self { segments }
    }

    /// A key from its segments.
    pub fn from_segments<K: Into<String>, N: Into<String>>(
        segments: impl IntoIterator<Item = (K, N)>,
    ) -> Self {
        Self {
            segments: segments
                .into_iter()
                .map(|(k, n)| (k.into(), n.into()))
                .collect(),
        }
    }

    /// The segments.
    #[must_use]
    pub fn segments(&self) -> &[(String, String)] {
        &self.segments
    }

    /// Whether this is the root.
    #[must_use]
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The parent key (`None` for the root).
    #[must_use]
    pub fn parent(&self) -> Option<Self> {
        let (_, rest) = self.segments.split_last()?;
        Some(Self {
            segments: rest.to_vec(),
        })
    }

    /// The type of the last segment.
    #[must_use]
    pub fn kind(&self) -> Option<&str> {
        self.segments.last().map(|(k, _)| k.as_str())
    }

    /// The name of the last segment.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.segments.last().map(|(_, n)| n.as_str())
    }

    /// The storage form: `/type/name` per segment, with `%` and `/` percent-escaped, so that
    /// the keys of a parent's children share the prefix [`Self::children_prefix`] and sort
    /// together.
    ///
    /// # Errors
    /// `InvalidArgument` when a type or name is empty.
    pub fn encode(&self) -> Result<String> {
        let mut out = String::new();
        for (i, (kind, name)) in self.segments.iter().enumerate() {
            if kind.is_empty() || name.is_empty() {
                return Err(Error::invalid("key segments must have a type and a name")
                    .with_field(format!("key[{i}]")));
            }
            out.push('/');
            escape_into(kind, &mut out);
            out.push('/');
            escape_into(name, &mut out);
        }
        Ok(out)
    }

    /// The prefix shared by the storage keys of this key's children of type `kind`.
    ///
    /// # Errors
    /// `InvalidArgument` when `kind` or a segment is empty.
    pub fn children_prefix(&self, kind: &str) -> Result<String> {
        if kind.is_empty() {
            return Err(Error::invalid("a child type must not be empty"));
        }
        let mut out = self.encode()?;
        out.push('/');
        escape_into(kind, &mut out);
        out.push('/');
        Ok(out)
    }

    /// Parses the storage form made by [`Self::encode`].
    ///
    /// # Errors
    /// `Internal` when `encoded` is not a storage key (a corrupt store).
    pub fn decode(encoded: &str) -> Result<Self> {
        if encoded.is_empty() {
            return Ok(Self::root());
        }
        let bad = || Error::internal(format!("malformed stored key {encoded:?}"));
        let parts: Vec<&str> = encoded
            .strip_prefix('/')
            .ok_or_else(bad)?
            .split('/')
            .collect();
        if !parts.len().is_multiple_of(2) {
            return Err(bad());
        }
        let mut segments = Vec::with_capacity(parts.len() / 2);
        for pair in parts.chunks(2) {
            let kind = unescape(pair[0]).ok_or_else(bad)?;
            let name = unescape(pair[1]).ok_or_else(bad)?;
            segments.push((kind, name));
        }
        Ok(Self { segments })
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("(root)");
        }
        for (i, (k, n)) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write!(f, "{k} {n:?}")?;
        }
        Ok(())
    }
}

fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            c => out.push(c),
        }
    }
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3)? {
            "%25" => out.push('%'),
            "%2F" => out.push('/'),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// A list filter: the value at a dotted JSON path equals a string, or is an array that contains
/// it (the same rule as a MongoDB dotted-path equality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The dotted path, e.g. `metadata.name` or `spec.labels`.
    pub path: String,
    /// The string the value must equal.
    pub equals: String,
}

impl Filter {
    /// `path == equals`.
    pub fn eq(path: impl Into<String>, equals: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            equals: equals.into(),
        }
    }

    /// Whether `doc` passes.
    #[must_use]
    pub fn matches(&self, doc: &Value) -> bool {
        let mut at = doc;
        for part in self.path.split('.') {
            match at.get(part) {
                Some(v) => at = v,
                None => return false,
            }
        }
        match at {
            Value::String(s) => *s == self.equals,
            Value::Array(items) => items
                .iter()
                .any(|i| i.as_str() == Some(self.equals.as_str())),
            _ => false,
        }
    }
}

/// Reads the whole blob `name` of `key` into memory; `None` when there is none. For files
/// small enough to hold at once (kubeconfigs, charts being rendered, intent files).
///
/// # Errors
/// As [`read_blob_versioned`].
pub async fn read_blob(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
) -> Result<Option<Vec<u8>>> {
    Ok(read_blob_versioned(store, key, name)
        .await?
        .map(|(data, _)| data))
}

/// How many times a whole-blob read starts again when the blob is replaced under it.
const REREADS: usize = 3;

/// Reads the whole blob `name` of `key` with its version; `None` when there is none. For the
/// read half of a compare-and-set ([`ResourceStore::put_blob_if`]). A blob replaced while it
/// is read (a store that streams its chunks answers `Conflict`) is read again.
///
/// # Errors
/// The store's errors other than `NotFound`; `Conflict` when the blob keeps changing.
pub async fn read_blob_versioned(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
) -> Result<Option<(Vec<u8>, BlobVersion)>> {
    read_whole_blob(store, key, name).await.found()
}

/// [`read_blob_versioned`] with a missing blob (or object) as the store's `NotFound`.
///
/// # Errors
/// The store's errors; `Conflict` when the blob keeps changing.
pub async fn read_whole_blob(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
) -> Result<(Vec<u8>, BlobVersion)> {
    use futures::TryStreamExt;
    let mut attempt = 0;
    loop {
        let (version, stream) = store.get_blob_versioned(key, name).await?;
        match stream.try_collect::<Vec<Bytes>>().await {
            Ok(chunks) => return Ok((chunks.concat(), version)),
            Err(e) if e.kind() == emco_core::ErrorKind::Conflict && attempt < REREADS => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One stored content of a blob: every put makes a new version, so a version read with the
/// content names exactly that content. Opaque; compare versions only for equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlobVersion(u64);

impl BlobVersion {
    /// A fresh version for a new upload: random, so versions never repeat across processes
    /// sharing a store. Kept below 2^63 so that it survives a signed 64-bit field unchanged.
    #[must_use]
    pub fn fresh() -> Self {
        Self(rand::random::<u64>() >> 1)
    }

    /// The version a backend stored as `raw`.
    #[must_use]
    pub const fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The number a backend stores.
    #[must_use]
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// What a conditional blob write ([`ResourceStore::put_blob_if`]) expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Anything: an unconditional write.
    Any,
    /// No blob of that name.
    Absent,
    /// The blob at exactly this version.
    Version(BlobVersion),
}

impl Expect {
    /// Whether a blob currently at `current` (`None`: no blob) meets the expectation.
    #[must_use]
    pub fn holds(self, current: Option<BlobVersion>) -> bool {
        match self {
            Self::Any => true,
            Self::Absent => current.is_none(),
            Self::Version(v) => current == Some(v),
        }
    }

    /// The error of a write whose expectation failed.
    #[must_use]
    pub fn failed(key: &ResourceKey, name: &str) -> Error {
        Error::conflict(format!(
            "the blob {name:?} of {key} was changed by another writer"
        ))
    }
}

/// Whether `doc` passes every filter.
#[must_use]
pub fn matches_all(doc: &Value, filters: &[Filter]) -> bool {
    filters.iter().all(|f| f.matches(doc))
}

/// How [`ResourceStore::put`] treats an existing object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// Create only: `AlreadyExists` if the key exists.
    Create,
    /// Update only: `NotFound` if the key does not exist.
    Update,
    /// Create or replace.
    Upsert,
}

/// The referential-integrity rules of a put, shared by every backend.
///
/// # Errors
/// `InvalidArgument` for the root key; `NotFound` when the parent is missing (for a create) or
/// the key is missing (for an update); `AlreadyExists` when creating an existing key.
pub fn check_put(
    key: &ResourceKey,
    mode: PutMode,
    parent_exists: bool,
    exists: bool,
) -> Result<()> {
    if key.is_root() {
        return Err(Error::invalid("the root key holds no object"));
    }
    match (mode, exists) {
        (PutMode::Create, true) => Err(Error::already_exists(format!("{key} already exists"))),
        (PutMode::Update, false) => Err(Error::not_found(format!("{key} does not exist"))),
        (_, false) if !parent_exists => Err(Error::not_found(format!(
            "the parent of {key} does not exist"
        ))),
        _ => Ok(()),
    }
}

/// A child with its own children of one type: what [`ResourceStore::list_with_children`]
/// answers per child.
pub type Family = ((ResourceKey, Value), Vec<(ResourceKey, Value)>);

/// Sorts `(creation number, item)` pairs into creation order and drops the numbers. Stable, so
/// objects without a number (stored before numbers were kept: all 0) stay in key order, first.
pub(crate) fn in_creation_order<T>(mut items: Vec<(u64, T)>) -> Vec<T> {
    items.sort_by_key(|(created, _)| *created);
    items.into_iter().map(|(_, item)| item).collect()
}

/// An object's creation number, key and document.
type Numbered = (u64, (ResourceKey, Value));

/// [`ResourceStore::list_with_children`] over one scan of the storage keys that start with
/// the children's prefix, for the backends that keep encoded keys sorted; answers in creation
/// order.
pub(crate) struct FamilyScan {
    prefix: String,
    /// `<grandchild type>/`, escaped: what follows a child's name in a grandchild's key.
    marker: String,
    /// Each family with its child's creation number, its grandchildren's beside them.
    families: Vec<(Numbered, Vec<Numbered>)>,
    /// A child's escaped name -> its index in `families`. A grandchild's key can sort after
    /// another child's (`c1-a` before `c1/label/x`), so it is placed by name.
    index: std::collections::HashMap<String, usize>,
}

/// Where a storage key stands in a [`FamilyScan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// Past the children's prefix: the scan is over.
    Done,
    /// A child or a grandchild of the wanted type: read its document.
    Wanted,
    /// Something else below a child.
    Skip,
}

impl FamilyScan {
    pub(crate) fn new(
        parent: &ResourceKey,
        child_type: &str,
        grandchild_type: &str,
    ) -> Result<Self> {
        if grandchild_type.is_empty() {
            return Err(Error::invalid("a child type must not be empty"));
        }
        let mut marker = String::new();
        escape_into(grandchild_type, &mut marker);
        marker.push('/');
        Ok(Self {
            prefix: parent.children_prefix(child_type)?,
            marker,
            families: Vec::new(),
            index: std::collections::HashMap::new(),
        })
    }

    /// Where the scan starts.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether the key `key` (encoded) ends the scan, is wanted, or is skipped.
    pub(crate) fn classify(&self, key: &str) -> Scanned {
        let Some(rest) = key.strip_prefix(self.prefix.as_str()) else {
            return Scanned::Done;
        };
        match rest.split_once('/') {
            None => Scanned::Wanted,
            Some((_, below)) => match below.strip_prefix(self.marker.as_str()) {
                Some(name) if !name.contains('/') => Scanned::Wanted,
                _ => Scanned::Skip,
            },
        }
    }

    /// Adds the wanted key `key` with its document and creation number.
    ///
    /// # Errors
    /// `Internal` for a key that does not decode.
    pub(crate) fn add(&mut self, key: &str, created: u64, doc: Value) -> Result<()> {
        let decoded = ResourceKey::decode(key)?;
        let rest = &key[self.prefix.len()..];
        match rest.split_once('/') {
            None => {
                self.index.insert(rest.to_owned(), self.families.len());
                self.families.push(((created, (decoded, doc)), Vec::new()));
            }
            Some((child, _)) => {
                // A grandchild sorts after its parent, so the parent is known by now.
                if let Some(&i) = self.index.get(child) {
                    self.families[i].1.push((created, (decoded, doc)));
                }
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Vec<Family> {
        let families = self
            .families
            .into_iter()
            .map(|((created, child), below)| (created, (child, in_creation_order(below))))
            .collect();
        in_creation_order(families)
    }
}

/// The resource store: EMCO's onboarded objects. Implemented by the memory, embedded (redb) and
/// MongoDB backends; use it as `Arc<dyn ResourceStore>`.
///
/// Integrity: an object can only be created when its parent exists, and only deleted when it has
/// no children. Deleting an object deletes its blobs.
#[async_trait]
pub trait ResourceStore: Debug + Send + Sync + 'static {
    /// Writes the JSON document of `key` according to `mode`.
    ///
    /// # Errors
    /// See [`check_put`].
    async fn put(&self, key: &ResourceKey, value: &Value, mode: PutMode) -> Result<()>;

    /// The document of `key`, or `None`.
    async fn get(&self, key: &ResourceKey) -> Result<Option<Value>>;

    /// The children of `parent` of type `child_type` that pass every filter, in the order they
    /// were created (an update keeps an object's place; deleted and created again, it comes
    /// last): EMCO's MongoDB answers in insertion order, and its clients see that order.
    async fn list(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        filters: &[Filter],
    ) -> Result<Vec<(ResourceKey, Value)>>;

    /// The children of `parent` of type `child_type`, each with its own children of type
    /// `grandchild_type`, both in creation order: one read where a list per child would take one each
    /// (clusters with their labels, for every cluster of a provider). The default lists them
    /// one by one; the backends read them in one go.
    async fn list_with_children(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        grandchild_type: &str,
    ) -> Result<Vec<Family>> {
        let mut out = Vec::new();
        for child in self.list(parent, child_type, &[]).await? {
            let grandchildren = self.list(&child.0, grandchild_type, &[]).await?;
            out.push((child, grandchildren));
        }
        Ok(out)
    }

    /// Deletes `key` and its blobs.
    ///
    /// # Errors
    /// `NotFound` when it does not exist; `Conflict` when it has children.
    async fn delete(&self, key: &ResourceKey) -> Result<()>;

    /// Stores the blob `name` of `key` from `data` if the blob is as `expect` says, replacing a
    /// previous one atomically; returns its size and new version. Persistent backends write it
    /// chunk by chunk, never holding it whole. The check and the replace are one atomic step, so
    /// of two writers expecting one version, one wins and the other gets `Conflict` (whatever
    /// the process each runs in): the compare-and-set that state records are kept with.
    ///
    /// # Errors
    /// `NotFound` when `key` does not exist; `Conflict` when the blob is not as expected; the
    /// stream's error when it fails. A failed put leaves the previous blob.
    async fn put_blob_if(
        &self,
        key: &ResourceKey,
        name: &str,
        data: BlobStream,
        expect: Expect,
    ) -> Result<(u64, BlobVersion)>;

    /// The blob `name` of `key`, streamed, with the version it was read at.
    ///
    /// # Errors
    /// `NotFound` when there is no such blob.
    async fn get_blob_versioned(
        &self,
        key: &ResourceKey,
        name: &str,
    ) -> Result<(BlobVersion, BlobStream)>;

    /// Stores the blob `name` of `key` from `data` whatever was there; returns its size.
    ///
    /// # Errors
    /// As [`Self::put_blob_if`] but never `Conflict`.
    async fn put_blob(&self, key: &ResourceKey, name: &str, data: BlobStream) -> Result<u64> {
        Ok(self.put_blob_if(key, name, data, Expect::Any).await?.0)
    }

    /// The blob `name` of `key`, streamed.
    ///
    /// # Errors
    /// `NotFound` when there is no such blob.
    async fn get_blob(&self, key: &ResourceKey, name: &str) -> Result<BlobStream> {
        Ok(self.get_blob_versioned(key, name).await?.1)
    }

    /// Deletes the blob `name` of `key`; returns whether it existed.
    async fn delete_blob(&self, key: &ResourceKey, name: &str) -> Result<bool>;

    /// Whether the store answers.
    async fn health(&self) -> Result<()>;

    /// Creates `key`: `AlreadyExists` if present, `NotFound` if its parent is missing.
    async fn create(&self, key: &ResourceKey, value: &Value) -> Result<()> {
        self.put(key, value, PutMode::Create).await
    }

    /// Replaces the document of an existing `key`.
    async fn update(&self, key: &ResourceKey, value: &Value) -> Result<()> {
        self.put(key, value, PutMode::Update).await
    }
}

/// What [`write_chunks`] wrote: the blob's size and chunk count, and why it stopped early.
#[cfg_attr(not(any(feature = "redb", feature = "mongodb")), allow(dead_code))]
pub(crate) struct Chunked {
    pub size: u64,
    pub count: u32,
    /// The first failure of the stream or of a write; the caller removes what was written.
    pub failure: Option<Error>,
}

/// The one chunked blob writer of the backends: writes `data` as chunks of `size` bytes (the
/// last may be shorter) with `write(index, chunk)`, in order, until the stream ends or the
/// stream or a write fails.
#[cfg_attr(not(any(feature = "redb", feature = "mongodb")), allow(dead_code))]
pub(crate) async fn write_chunks<F, Fut>(data: BlobStream, size: usize, mut write: F) -> Chunked
where
    F: FnMut(u32, Bytes) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    use futures::StreamExt;
    let mut chunks = rechunk(data, size);
    let mut out = Chunked {
        size: 0,
        count: 0,
        failure: None,
    };
    while let Some(chunk) = chunks.next().await {
        let written = match chunk {
            Ok(chunk) => {
                out.size += chunk.len() as u64;
                write(out.count, chunk).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            out.failure = Some(e);
            break;
        }
        out.count += 1;
    }
    out
}

/// Re-chunks a blob stream into pieces of at most `size` bytes (the last one may be shorter),
/// so a backend stores fixed-size chunks whatever the producer yields.
#[cfg_attr(not(any(feature = "redb", feature = "mongodb")), allow(dead_code))]
fn rechunk(data: BlobStream, size: usize) -> BlobStream {
    use futures::StreamExt;
    let state = (data, bytes::BytesMut::new(), false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut data, mut buf, mut done)| async move {
            loop {
                if buf.len() >= size {
                    let chunk = buf.split_to(size).freeze();
                    return Some((Ok(chunk), (data, buf, done)));
                }
                if done {
                    if buf.is_empty() {
                        return None;
                    }
                    let chunk = buf.split().freeze();
                    return Some((Ok(chunk), (data, buf, done)));
                }
                match data.next().await {
                    Some(Ok(b)) => buf.extend_from_slice(&b),
                    Some(Err(e)) => return Some((Err(e), (data, buf, true))),
                    None => done = true,
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// A store whose first `fails` blob reads break off as a streaming store's do when the
    /// blob is replaced under them.
    #[derive(Debug)]
    struct ReplacedWhileRead {
        inner: crate::InMemoryResourceStore,
        fails: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl ResourceStore for ReplacedWhileRead {
        async fn put(&self, key: &ResourceKey, value: &Value, mode: PutMode) -> Result<()> {
            self.inner.put(key, value, mode).await
        }
        async fn get(&self, key: &ResourceKey) -> Result<Option<Value>> {
            self.inner.get(key).await
        }
        async fn list(
            &self,
            parent: &ResourceKey,
            child_type: &str,
            filters: &[Filter],
        ) -> Result<Vec<(ResourceKey, Value)>> {
            self.inner.list(parent, child_type, filters).await
        }
        async fn delete(&self, key: &ResourceKey) -> Result<()> {
            self.inner.delete(key).await
        }
        async fn put_blob_if(
            &self,
            key: &ResourceKey,
            name: &str,
            data: BlobStream,
            expect: Expect,
        ) -> Result<(u64, BlobVersion)> {
            self.inner.put_blob_if(key, name, data, expect).await
        }
        async fn get_blob_versioned(
            &self,
            key: &ResourceKey,
            name: &str,
        ) -> Result<(BlobVersion, BlobStream)> {
            let (version, stream) = self.inner.get_blob_versioned(key, name).await?;
            let left = self.fails.load(std::sync::atomic::Ordering::SeqCst);
            if left == 0 {
                return Ok((version, stream));
            }
            self.fails
                .store(left - 1, std::sync::atomic::Ordering::SeqCst);
            let broken = stream
                .take(1)
                .chain(futures::stream::iter([Err(Error::conflict("replaced"))]));
            Ok((version, Box::pin(broken)))
        }
        async fn delete_blob(&self, key: &ResourceKey, name: &str) -> Result<bool> {
            self.inner.delete_blob(key, name).await
        }
        async fn health(&self) -> Result<()> {
            self.inner.health().await
        }
    }

    #[tokio::test]
    async fn whole_blob_reads_start_again_when_the_blob_is_replaced() {
        let store = ReplacedWhileRead {
            inner: crate::InMemoryResourceStore::new(),
            fails: 2.into(),
        };
        let key = ResourceKey::root().child("project", "p");
        store.create(&key, &serde_json::json!({})).await.unwrap();
        let data: BlobStream = Box::pin(futures::stream::iter([
            Ok(Bytes::from_static(b"ab")),
            Ok(Bytes::from_static(b"cd")),
        ]));
        store.put_blob(&key, "state", data).await.unwrap();
        let (read, _) = read_blob_versioned(&store, &key, "state")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read, b"abcd");
        store
            .fails
            .store(REREADS + 1, std::sync::atomic::Ordering::SeqCst);
        let e = read_blob(&store, &key, "state").await.unwrap_err();
        assert_eq!(e.kind(), emco_core::ErrorKind::Conflict);
    }

    #[test]
    fn keys_round_trip_and_escape() {
        let k = ResourceKey::root()
            .child("project", "p/1")
            .child("app", "a%b");
        let enc = k.encode().unwrap();
        assert_eq!(enc, "/project/p%2F1/app/a%25b");
        assert_eq!(ResourceKey::decode(&enc).unwrap(), k);
        assert_eq!(
            k.parent().unwrap(),
            ResourceKey::root().child("project", "p/1")
        );
        assert!(ResourceKey::root().child("", "x").encode().is_err());
        assert!(ResourceKey::decode("/a").is_err());
        assert!(ResourceKey::decode("/a/%zz").is_err());
    }

    #[test]
    fn filters_follow_dotted_paths() {
        let doc = serde_json::json!({"spec": {"labels": ["edge", "east"], "name": "c1"}});
        assert!(Filter::eq("spec.labels", "edge").matches(&doc));
        assert!(Filter::eq("spec.name", "c1").matches(&doc));
        assert!(!Filter::eq("spec.name", "c2").matches(&doc));
        assert!(!Filter::eq("spec.missing", "c1").matches(&doc));
    }

    proptest::proptest! {
        #[test]
        fn any_key_round_trips(segs in proptest::collection::vec((".{1,8}", ".{1,8}"), 0..5)) {
            let key = ResourceKey::from_segments(segs);
            let enc = key.encode().unwrap();
            proptest::prop_assert_eq!(ResourceKey::decode(&enc).unwrap(), key.clone());
            // A child's storage key lies under its parent's children prefix, one level down.
            if let (Some(parent), Some(kind)) = (key.parent(), key.kind()) {
                let prefix = parent.children_prefix(kind).unwrap();
                let rest = enc.strip_prefix(&prefix).unwrap();
                proptest::prop_assert!(!rest.contains('/'));
            }
        }
    }

    #[tokio::test]
    async fn rechunk_makes_fixed_chunks() {
        let input: Vec<Result<Bytes>> = vec![
            Ok(Bytes::from_static(b"abc")),
            Ok(Bytes::from_static(b"defgh")),
        ];
        let out: Vec<_> = rechunk(Box::pin(futures::stream::iter(input)), 3)
            .collect::<Vec<_>>()
            .await;
        let out: Vec<Bytes> = out.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(out, vec![&b"abc"[..], &b"def"[..], &b"gh"[..]]);
    }
}
