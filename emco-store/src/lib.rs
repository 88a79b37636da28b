//! # emco-store
//!
//! EMCO's two stores, as traits with interchangeable backends:
//!
//! - [`ResourceStore`] ("EMCO DB"): onboarded objects under hierarchical [`ResourceKey`]s with
//!   parent/child referential integrity and streamed binary blobs (Helm charts, profiles,
//!   kubeconfigs);
//! - [`AppContextStore`] (EMCO's etcd): revisioned keys with prefix listing, compare-and-set,
//!   transactions and prefix watches; [`FencedStore`] refuses a replica's writes once another
//!   took its work over.
//!
//! Both traits are used as `Arc<dyn Trait>`; every error is an [`emco_core::Error`] whose kind
//! says what went wrong and whose source keeps the backend's error. What is stored in them (the
//! AppContext layout, the key schema of objects, typed collections, sealing of secrets) is
//! emco-appcontext's.
//!
//! ## Backends
//!
//! | backend | AppContext store | resource store | feature |
//! |---|---|---|---|
//! | memory | [`InMemoryAppContextStore`] | [`InMemoryResourceStore`] | always |
//! | embedded file (redb) | `RedbAppContextStore` | `RedbResourceStore` | `redb` (default) |
//! | etcd | `EtcdAppContextStore` | - | `etcd` (default) |
//! | MongoDB | - | `MongoResourceStore` | `mongodb` (default) |
//!
//! Each backend has a builder: `RedbBuilder::new().with_path(..).build()`,
//! `EtcdBuilder::from_env()` / `.with_endpoints(..).build().await`,
//! `MongoBuilder::from_env()` / `.with_uri(..).with_database(..).build().await`.
//!
//! ### Conformance
//!
//! [`conformance`] holds one suite per trait; every backend's tests call the same functions. The
//! in-memory and redb backends always run them; the etcd and MongoDB suites run against the
//! servers whose addresses the test command exports as `EMCO_TEST_ETCD` and `EMCO_TEST_MONGO`,
//! and print a loud `SKIPPED:` line when those are unset. In CI the MongoDB server is
//! `nx-27017`, a wire-compatible server (no real mongod is installable there); see [`mongo`] for
//! the query shapes that keep the two equivalent.
//!
//! ### Why redb for the embedded default
//!
//! The server's default store must need no external service, so it is an embedded database.
//! [redb](https://docs.rs/redb) is pure Rust (no C or C++ toolchain),
//! actively maintained, and its commits are crash-safe: a copy-on-write B-tree whose commit
//! flips a checksummed root after an fsync, so a process killed at any point reopens with every
//! acknowledged transaction and nothing half-written. Its single-writer, many-reader MVCC
//! matches how both stores are used. (sled's stable line is old and its rewrite unreleased; fjall
//! and RocksDB are LSM trees that need compaction tuning, RocksDB also a C++ build.) The crate's tests kill a
//! writer with SIGKILL mid-stream and check every acknowledged write survives.
//!
//! ## Example
//!
//! ```
//! use emco_store::{AppContextStore, InMemoryAppContextStore, Txn, Op, Compare};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store = InMemoryAppContextStore::new();
//! let revision = store.put("/a/", "1".into()).await?;
//! // Compare-and-set: only the writer that saw revision `revision` wins.
//! let done = store
//!     .txn(Txn::new().when(Compare::mod_revision("/a/", revision)).op(Op::put("/a/", "2")))
//!     .await?;
//! assert!(done.succeeded);
//! assert_eq!(store.get("/a/").await?.unwrap().value.as_ref(), b"2");
//! # Ok::<(), emco_core::Error>(())
//! # }).unwrap();
//! ```

pub mod conformance;
#[cfg(feature = "redb")]
pub mod embedded;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod fenced;
pub mod kv;
mod local;
pub mod memory;
#[cfg(feature = "mongodb")]
pub mod mongo;
pub mod resource;

pub use fenced::FencedStore;
pub use kv::{AppContextStore, Compare, KeyValue, ListOptions, ListPage, Op, Txn, TxnResult};
pub use memory::{InMemoryAppContextStore, InMemoryResourceStore};
pub use resource::{
    BlobStream, BlobVersion, Expect, Family, Filter, PutMode, ResourceKey, ResourceStore,
    file_blob_stream,
};
