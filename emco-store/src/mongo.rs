//! The MongoDB resource store (via the `mongodb` crate), what EMCO itself uses for its DB.
//!
//! ```no_run
//! # async fn f() -> emco_core::Result<()> {
//! let store = emco_store::mongo::MongoBuilder::new()
//!     .with_uri("mongodb://127.0.0.1:27017")
//!     .with_database("emco")
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Collections: `resources` holds one document per object, `{_id: <encoded key>, parent:
//! <encoded parent key>, kind: <type>, created: <creation number>, json: <the document as JSON
//! text>, doc: <the document as BSON>}`; `counters` holds the last creation number given (`{_id:
//! "resources", n}`), which lists are ordered by, as EMCO's MongoDB answers in insertion order.
//! The JSON text is authoritative (it round-trips every JSON number exactly), the BSON
//! copy serves list filters as dotted-path queries (`doc.spec.labels: "edge"`). Blobs are
//! GridFS-like: `blob_chunks` holds 1 MiB chunks `{upload, n, data}` and `blob_meta` points a
//! `(key, name)` at the upload whose chunks are current.
//!
//! Referential integrity without multi-document transactions (replica sets have them, but
//! wire-compatible test servers and standalone servers do not): `_id` is the encoded key, so a
//! create is atomic against another create (duplicate key). A create checks the parent, inserts,
//! then checks the parent again and removes its insert if the parent vanished; a delete checks
//! for children and then deletes. Every interleaving of one create and one delete of its parent
//! ends consistent: either the delete sees the child (`Conflict`) or the create sees the parent
//! gone (`NotFound`). The limit: a crash between a create's insert and its second check can leave
//! one orphan, which a later delete of the would-be parent's key does not see.
//!
//! The tests run against `nx-27017`, a MongoDB wire-protocol server, not a real mongod (none
//! is installable in CI); the queries used are plain equality on `_id` and dotted paths, sort by
//! `_id`/`n`, `$set` and `$inc`, and single-document writes, which both answer the same way.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Result};
use futures::StreamExt;
use mongodb::bson::{self, Bson, Document, doc, spec::BinarySubtype};
use mongodb::error::{ErrorKind as MongoKind, WriteFailure};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, IndexModel};
use serde_json::Value;

use crate::resource::{
    BLOB_CHUNK, BlobStream, BlobVersion, Chunked, Expect, Family, Filter, PutMode, ResourceKey,
    ResourceStore, check_put, in_creation_order, write_chunks,
};

fn mongo_err(e: mongodb::error::Error) -> Error {
    let kind = if matches!(*e.kind, MongoKind::InvalidArgument { .. }) {
        emco_core::ErrorKind::InvalidArgument
    } else {
        emco_core::ErrorKind::Unavailable
    };
    Error::new(kind, format!("mongodb: {e}")).with_source(e)
}

fn is_duplicate(e: &mongodb::error::Error) -> bool {
    match &*e.kind {
        MongoKind::Write(WriteFailure::WriteError(w)) => w.code == 11000,
        MongoKind::Command(c) => c.code == 11000,
        _ => false,
    }
}

/// An integer field, whichever width the server chose to store it in.
fn integer(b: &Bson) -> Option<i64> {
    match b {
        Bson::Int64(n) => Some(*n),
        Bson::Int32(n) => Some(i64::from(*n)),
        _ => None,
    }
}

fn corrupt(what: &str) -> Error {
    Error::internal(format!("mongodb: corrupt {what}"))
}

/// Builds a [`MongoResourceStore`].
#[derive(Debug, Clone, Default)]
pub struct MongoBuilder {
    uri: Option<String>,
    database: Option<String>,
}

impl MongoBuilder {
    /// A builder with no URI.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder configured from `EMCO_MONGO_URI` and `EMCO_MONGO_DATABASE` (default `emco`).
    #[must_use]
    pub fn from_env() -> Self {
        Self {
            uri: std::env::var("EMCO_MONGO_URI").ok(),
            database: std::env::var("EMCO_MONGO_DATABASE").ok(),
        }
    }

    /// The connection string (`mongodb://host:port`).
    #[must_use]
    pub fn with_uri(mut self, uri: impl Into<String>) -> Self {
        self.uri = Some(uri.into());
        self
    }

    /// The database (default `emco`).
    #[must_use]
    pub fn with_database(mut self, database: impl Into<String>) -> Self {
        self.database = Some(database.into());
        self
    }

    /// Connects, checks the server answers and creates the indexes.
    ///
    /// # Errors
    /// `InvalidArgument` without a URI or with a bad one; `Unavailable` when the server cannot be
    /// reached.
    pub async fn build(self) -> Result<MongoResourceStore> {
        let uri = self
            .uri
            .ok_or_else(|| Error::invalid("the MongoDB store needs a URI"))?;
        let mut options = ClientOptions::parse(&uri).await.map_err(mongo_err)?;
        // The driver waits 30 s for a server by default: a request while MongoDB is down would
        // hang that long before its 503. A URI's own setting stays.
        options
            .server_selection_timeout
            .get_or_insert(SELECTION_TIMEOUT);
        options.connect_timeout.get_or_insert(SELECTION_TIMEOUT);
        let client = Client::with_options(options).map_err(mongo_err)?;
        let db = client.database(self.database.as_deref().unwrap_or("emco"));
        let store = MongoResourceStore {
            db: db.clone(),
            resources: db.collection("resources"),
            counters: db.collection("counters"),
            meta: db.collection("blob_meta"),
            chunks: db.collection("blob_chunks"),
        };
        store.health().await?;
        let index = |keys| IndexModel::builder().keys(keys).build();
        store
            .resources
            .create_index(index(doc! {"parent": 1, "kind": 1}))
            .await
            .map_err(mongo_err)?;
        store
            .chunks
            .create_index(index(doc! {"upload": 1, "n": 1}))
            .await
            .map_err(mongo_err)?;
        store
            .meta
            .create_index(index(doc! {"key": 1}))
            .await
            .map_err(mongo_err)?;
        Ok(store)
    }
}

/// How long a request waits for MongoDB to be reachable (the driver's server selection and
/// connect timeouts) unless the URI says otherwise.
const SELECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The resource store on MongoDB.
#[derive(Clone)]
pub struct MongoResourceStore {
    db: mongodb::Database,
    resources: Collection<Document>,
    counters: Collection<Document>,
    meta: Collection<Document>,
    chunks: Collection<Document>,
}

impl fmt::Debug for MongoResourceStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MongoResourceStore")
            .field("database", &self.db.name())
            .finish()
    }
}

fn blob_id(enc: &str, name: &str) -> String {
    // Blob names are single-line, so the last newline separates key and name unambiguously.
    format!("{enc}\n{name}")
}

fn check_blob_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('\n') {
        return Err(Error::invalid(
            "a blob name must be non-empty and single-line",
        ));
    }
    Ok(())
}

impl MongoResourceStore {
    /// The documents `query` finds, in creation order, with their keys.
    async fn find_docs(&self, query: Document) -> Result<Vec<(ResourceKey, Value)>> {
        let mut cursor = self
            .resources
            .find(query)
            .sort(doc! {"_id": 1})
            .await
            .map_err(mongo_err)?;
        let mut out = Vec::new();
        while let Some(d) = cursor.next().await {
            let d = d.map_err(mongo_err)?;
            let id = d.get_str("_id").map_err(|_| corrupt("resource"))?;
            let json = d.get_str("json").map_err(|_| corrupt("resource"))?;
            let value: Value =
                serde_json::from_str(json).map_err(|e| corrupt("resource").with_source(e))?;
            // Sorted here, not by the server: documents stored before creation numbers were
            // kept have none, and list first in key order.
            let created = d.get("created").and_then(integer).unwrap_or(0);
            out.push((
                u64::try_from(created).unwrap_or(0),
                (ResourceKey::decode(id)?, value),
            ));
        }
        Ok(in_creation_order(out))
    }

    /// The next creation number: one atomic increment, so replicas sharing the database never
    /// give one twice.
    async fn next_created(&self) -> Result<i64> {
        let counter = self
            .counters
            .find_one_and_update(doc! {"_id": "resources"}, doc! {"$inc": {"n": 1_i64}})
            .upsert(true)
            .return_document(mongodb::options::ReturnDocument::After)
            .await
            .map_err(mongo_err)?
            .ok_or_else(|| corrupt("creation counter"))?;
        counter
            .get("n")
            .and_then(integer)
            .ok_or_else(|| corrupt("creation counter"))
    }

    async fn exists(&self, enc: &str) -> Result<bool> {
        Ok(self
            .resources
            .find_one(doc! {"_id": enc})
            .await
            .map_err(mongo_err)?
            .is_some())
    }

    async fn parent_exists(&self, key: &ResourceKey) -> Result<bool> {
        match key.parent() {
            Some(p) if !p.is_root() => self.exists(&p.encode()?).await,
            _ => Ok(true),
        }
    }

    /// What a write sets: everything but `_id` and `created`.
    fn record(key: &ResourceKey, value: &Value) -> Result<Document> {
        let json = serde_json::to_string(value)
            .map_err(|e| Error::invalid("the document is not serializable").with_source(e))?;
        let bson_doc = bson::to_bson(value)
            .map_err(|e| Error::invalid("the document cannot be stored in BSON").with_source(e))?;
        let parent = key
            .parent()
            .map(|p| p.encode())
            .transpose()?
            .unwrap_or_default();
        Ok(doc! {
            "parent": parent,
            "kind": key.kind().unwrap_or_default(),
            "json": json,
            "doc": bson_doc,
        })
    }

    async fn remove_blob(&self, enc: &str, name: &str) -> Result<bool> {
        let old = self
            .meta
            .find_one_and_delete(doc! {"_id": blob_id(enc, name)})
            .await
            .map_err(mongo_err)?;
        match old.as_ref().and_then(|d| d.get_i64("upload").ok()) {
            Some(upload) => {
                self.chunks
                    .delete_many(doc! {"upload": upload})
                    .await
                    .map_err(mongo_err)?;
                Ok(true)
            }
            None => Ok(old.is_some()),
        }
    }

    async fn create(&self, key: &ResourceKey, enc: &str, value: &Value) -> Result<()> {
        let parent_exists = self.parent_exists(key).await?;
        check_put(key, PutMode::Create, parent_exists, false)?;
        let mut record = Self::record(key, value)?;
        record.insert("_id", enc);
        record.insert("created", self.next_created().await?);
        match self.resources.insert_one(record).await {
            Ok(_) => {}
            Err(e) if is_duplicate(&e) => {
                return Err(Error::already_exists(format!("{key} already exists")));
            }
            Err(e) => return Err(mongo_err(e)),
        }
        // A delete of the parent may have checked for children before our insert.
        if !self.parent_exists(key).await? {
            self.resources
                .delete_one(doc! {"_id": enc})
                .await
                .map_err(mongo_err)?;
            return Err(Error::not_found(format!(
                "the parent of {key} does not exist"
            )));
        }
        Ok(())
    }
}

fn chunk_bytes(d: &Document) -> Result<Bytes> {
    match d.get("data") {
        Some(Bson::Binary(b)) => Ok(Bytes::from(b.bytes.clone())),
        _ => Err(corrupt("blob chunk")),
    }
}

#[async_trait]
impl ResourceStore for MongoResourceStore {
    async fn put(&self, key: &ResourceKey, value: &Value, mode: PutMode) -> Result<()> {
        let enc = key.encode()?;
        if key.is_root() {
            return check_put(key, mode, true, false);
        }
        if mode == PutMode::Create {
            return self.create(key, &enc, value).await;
        }
        // `$set`, not a replace: the object keeps its creation number.
        let set = doc! {"$set": Self::record(key, value)?};
        for _ in 0..3 {
            let r = self
                .resources
                .update_one(doc! {"_id": &enc}, set.clone())
                .await
                .map_err(mongo_err)?;
            if r.matched_count > 0 {
                return Ok(());
            }
            if mode == PutMode::Update {
                return Err(Error::not_found(format!("{key} does not exist")));
            }
            match self.create(key, &enc, value).await {
                // Created concurrently by someone else: replace it on the next round.
                Err(e) if e.kind() == emco_core::ErrorKind::AlreadyExists => {}
                other => return other,
            }
        }
        Err(Error::conflict(format!(
            "{key} kept changing during an upsert"
        )))
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Value>> {
        let enc = key.encode()?;
        let Some(d) = self
            .resources
            .find_one(doc! {"_id": enc})
            .await
            .map_err(mongo_err)?
        else {
            return Ok(None);
        };
        let json = d.get_str("json").map_err(|_| corrupt("resource"))?;
        serde_json::from_str(json)
            .map(Some)
            .map_err(|e| corrupt("resource").with_source(e))
    }

    async fn list(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        filters: &[Filter],
    ) -> Result<Vec<(ResourceKey, Value)>> {
        parent.children_prefix(child_type)?;
        let mut query = doc! {"parent": parent.encode()?, "kind": child_type};
        for f in filters {
            query.insert(format!("doc.{}", f.path), f.equals.as_str());
        }
        self.find_docs(query).await
    }

    /// Two queries: the children, then all their children of the type at once.
    async fn list_with_children(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        grandchild_type: &str,
    ) -> Result<Vec<Family>> {
        let children = self.list(parent, child_type, &[]).await?;
        let mut index = std::collections::HashMap::new();
        let mut parents = Vec::with_capacity(children.len());
        for (i, (k, _)) in children.iter().enumerate() {
            let enc = k.encode()?;
            index.insert(enc.clone(), i);
            parents.push(enc);
        }
        let mut out: Vec<Family> = children.into_iter().map(|c| (c, Vec::new())).collect();
        // Bounded `$in` lists keep each query well under MongoDB's document size limit.
        for chunk in parents.chunks(1000) {
            let query = doc! {"parent": {"$in": chunk}, "kind": grandchild_type};
            for (k, v) in self.find_docs(query).await? {
                let i = k
                    .parent()
                    .and_then(|p| p.encode().ok())
                    .and_then(|p| index.get(&p).copied());
                if let Some(i) = i {
                    out[i].1.push((k, v));
                }
            }
        }
        Ok(out)
    }

    async fn delete(&self, key: &ResourceKey) -> Result<()> {
        let enc = key.encode()?;
        if !self.exists(&enc).await? {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        if self
            .resources
            .find_one(doc! {"parent": &enc})
            .await
            .map_err(mongo_err)?
            .is_some()
        {
            return Err(Error::conflict(format!("{key} has children")));
        }
        let r = self
            .resources
            .delete_one(doc! {"_id": &enc})
            .await
            .map_err(mongo_err)?;
        if r.deleted_count == 0 {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        let mut blobs = self
            .meta
            .find(doc! {"key": &enc})
            .await
            .map_err(mongo_err)?;
        let mut names = Vec::new();
        while let Some(d) = blobs.next().await {
            let d = d.map_err(mongo_err)?;
            names.push(
                d.get_str("name")
                    .map_err(|_| corrupt("blob meta"))?
                    .to_owned(),
            );
        }
        for name in names {
            self.remove_blob(&enc, &name).await?;
        }
        Ok(())
    }

    async fn put_blob_if(
        &self,
        key: &ResourceKey,
        name: &str,
        data: BlobStream,
        expect: Expect,
    ) -> Result<(u64, BlobVersion)> {
        check_blob_name(name)?;
        let enc = key.encode()?;
        if !self.exists(&enc).await? {
            return Err(Error::not_found(format!("{key} does not exist")));
        }
        // The upload id is the blob's version; below 2^63, so the i64 round trip keeps it.
        let version = BlobVersion::fresh();
        let upload = i64::try_from(version.raw()).unwrap_or_default();
        let Chunked {
            size,
            count,
            mut failure,
        } = write_chunks(data, BLOB_CHUNK, |i, chunk| {
            let doc = doc! {
                "upload": upload,
                "n": i32::try_from(i).unwrap_or(i32::MAX),
                "data": bson::Binary {
                    subtype: BinarySubtype::Generic,
                    bytes: chunk.to_vec(),
                },
            };
            async move {
                self.chunks.insert_one(doc).await.map_err(mongo_err)?;
                Ok(())
            }
        })
        .await;
        let n = i32::try_from(count).unwrap_or(i32::MAX);
        if failure.is_none() && !self.exists(&enc).await? {
            failure = Some(Error::not_found(format!("{key} does not exist")));
        }
        if let Some(e) = failure {
            self.chunks
                .delete_many(doc! {"upload": upload})
                .await
                .map_err(mongo_err)?;
            return Err(e);
        }
        let meta = doc! {
            "_id": blob_id(&enc, name),
            "key": &enc,
            "name": name,
            "upload": upload,
            "size": i64::try_from(size).unwrap_or(i64::MAX),
            "chunks": n,
        };
        // The check and the swap are one document operation, atomic on the server.
        let id = blob_id(&enc, name);
        let swapped = match expect {
            Expect::Any => self
                .meta
                .find_one_and_replace(doc! {"_id": &id}, meta)
                .upsert(true)
                .await
                .map(|old| Some(old.and_then(|d| d.get_i64("upload").ok()))),
            Expect::Version(v) => {
                let expected = i64::try_from(v.raw()).unwrap_or(-1);
                self.meta
                    .find_one_and_replace(doc! {"_id": &id, "upload": expected}, meta)
                    .await
                    .map(|old| old.map(|_| Some(expected)))
            }
            Expect::Absent => match self.meta.insert_one(meta).await {
                Ok(_) => Ok(Some(None)),
                Err(e) if is_duplicate(&e) => Ok(None),
                Err(e) => Err(e),
            },
        };
        let replaced = match swapped {
            Ok(Some(replaced)) => replaced,
            Ok(None) => {
                self.chunks
                    .delete_many(doc! {"upload": upload})
                    .await
                    .map_err(mongo_err)?;
                return Err(Expect::failed(key, name));
            }
            Err(e) => {
                // The server may have applied the swap before the answer was lost: only what
                // the metadata does not name may go.
                let current = self
                    .meta
                    .find_one(doc! {"_id": &id})
                    .await
                    .map_err(mongo_err)?
                    .and_then(|d| d.get_i64("upload").ok());
                if current != Some(upload) {
                    self.chunks
                        .delete_many(doc! {"upload": upload})
                        .await
                        .map_err(mongo_err)?;
                }
                return Err(mongo_err(e));
            }
        };
        // The write is done; old chunks left behind only take space.
        if let Some(old) = replaced
            && let Err(e) = self.chunks.delete_many(doc! {"upload": old}).await
        {
            tracing::warn!(key = %key, blob = name, error = %e, "cannot delete replaced chunks");
        }
        Ok((size, version))
    }

    async fn get_blob_versioned(
        &self,
        key: &ResourceKey,
        name: &str,
    ) -> Result<(BlobVersion, BlobStream)> {
        check_blob_name(name)?;
        let enc = key.encode()?;
        let meta = self
            .meta
            .find_one(doc! {"_id": blob_id(&enc, name)})
            .await
            .map_err(mongo_err)?
            .ok_or_else(|| Error::not_found(format!("{key} has no blob {name:?}")))?;
        let upload = meta.get_i64("upload").map_err(|_| corrupt("blob meta"))?;
        let count = meta.get_i32("chunks").map_err(|_| corrupt("blob meta"))?;
        let cursor = self
            .chunks
            .find(doc! {"upload": upload})
            .sort(doc! {"n": 1})
            .await
            .map_err(mongo_err)?;
        // The cursor fetches batches as the consumer reads, so the blob is never held whole.
        let state = (Some(cursor), 0i32);
        let stream = Box::pin(futures::stream::unfold(
            state,
            move |(cursor, seen)| async move {
                let mut cursor = cursor?;
                match cursor.next().await {
                    Some(Ok(d)) => match (d.get_i32("n"), chunk_bytes(&d)) {
                        (Ok(i), Ok(b)) if i == seen => Some((Ok(b), (Some(cursor), seen + 1))),
                        _ => Some((Err(corrupt("blob (chunk out of order)")), (None, seen))),
                    },
                    Some(Err(e)) => Some((Err(mongo_err(e)), (None, seen))),
                    None if seen == count => None,
                    // The blob was replaced while it was read: its old chunks are gone.
                    None => Some((
                        Err(Error::conflict(
                            "the blob changed while it was read; read it again",
                        )),
                        (None, seen),
                    )),
                }
            },
        ));
        let version = BlobVersion::from_raw(u64::try_from(upload).unwrap_or_default());
        Ok((version, stream))
    }

    async fn delete_blob(&self, key: &ResourceKey, name: &str) -> Result<bool> {
        check_blob_name(name)?;
        self.remove_blob(&key.encode()?, name).await
    }

    async fn health(&self) -> Result<()> {
        self.db
            .run_command(doc! {"ping": 1})
            .await
            .map(drop)
            .map_err(mongo_err)
    }
}
