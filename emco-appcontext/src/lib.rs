//! # emco-appcontext
//!
//! The two stores of EMCO and the typed AppContext API:
//!
//! - [`ResourceStore`] ("EMCO DB"): onboarded objects under hierarchical [`ResourceKey`]s with
//!   parent/child referential integrity and streamed binary blobs (Helm charts, profiles,
//!   kubeconfigs);
//! - [`AppContextStore`] (EMCO's etcd): revisioned keys with prefix listing, compare-and-set,
//!   transactions and prefix watches;
//! - [`AppContext`]: lays contexts out exactly as EMCO does, so EMCO's Go controllers pointed at
//!   the same etcd read and write them.
//!
//! Both traits are used as `Arc<dyn Trait>`; every error is an [`emco_core::Error`] whose kind
//! says what went wrong and whose source keeps the backend's error.
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
//! use std::sync::Arc;
//! use emco_appcontext::{AppContext, AppContextStore, CompositeAppMeta, InMemoryAppContextStore};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
//! let meta = CompositeAppMeta { project: "p".into(), composite_app: "ca".into(), ..Default::default() };
//! let ctx = AppContext::create(Arc::clone(&store), &meta).await?;
//! let mut w = ctx.writer();
//! w.add_app("web")?;
//! w.add_cluster("web", "provider+edge1", Some("1"))?;
//! w.add_resource("web", "provider+edge1", "web+Deployment", "kind: Deployment\n")?;
//! w.set_app_order(&["web"])?;
//! w.flush().await?;
//! assert_eq!(ctx.apps().await?, vec!["web".to_owned()]);
//! assert_eq!(ctx.resources("web", "provider+edge1").await?, vec!["web+Deployment".to_owned()]);
//! ctx.delete().await?;
//! # Ok::<(), emco_core::Error>(())
//! # }).unwrap();
//! ```

pub mod collection;
pub mod conformance;
pub mod context;
pub mod deployer;
#[cfg(feature = "redb")]
pub mod embedded;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod fenced;
pub mod keys;
pub mod kv;
mod local;
pub mod memory;
#[cfg(feature = "mongodb")]
pub mod mongo;
pub mod resource;
pub mod scratch;
pub mod sealed;

pub use context::{AppContext, CompositeAppMeta};
pub use deployer::{Deployer, ObjectRef};
pub use fenced::FencedStore;
pub use kv::{AppContextStore, Compare, KeyValue, ListOptions, ListPage, Op, Txn, TxnResult};
pub use memory::{InMemoryAppContextStore, InMemoryResourceStore};
pub use resource::{
    BlobStream, BlobVersion, Expect, Family, Filter, PutMode, ResourceKey, ResourceStore,
    file_blob_stream,
};
pub use scratch::ScratchStore;

/// The two stores EMCO runs on: the AppContexts and, where the holder reads onboarded objects
/// (the orchestrator, controllers that read intents), the resource store.
#[derive(Clone)]
pub struct Stores {
    /// Where the AppContexts are: etcd, the embedded store, or the AppContext gRPC client.
    pub appcontext: std::sync::Arc<dyn AppContextStore>,
    /// Where the onboarded objects and intents are, when the holder reads any.
    pub resources: Option<std::sync::Arc<dyn ResourceStore>>,
    /// The resource synchronizer, for controllers that deploy contexts of their own or read
    /// clusters live.
    pub deployer: Option<std::sync::Arc<dyn Deployer>>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("resources", &self.resources.is_some())
            .field("deployer", &self.deployer.is_some())
            .finish_non_exhaustive()
    }
}

impl Stores {
    /// Stores with an AppContext store only.
    #[must_use]
    pub fn new(appcontext: std::sync::Arc<dyn AppContextStore>) -> Self {
        Self {
            appcontext,
            resources: None,
            deployer: None,
        }
    }

    /// Adds the resource synchronizer.
    #[must_use]
    pub fn with_deployer(mut self, deployer: std::sync::Arc<dyn Deployer>) -> Self {
        self.deployer = Some(deployer);
        self
    }

    /// Adds the resource store.
    #[must_use]
    pub fn with_resources(mut self, resources: std::sync::Arc<dyn ResourceStore>) -> Self {
        self.resources = Some(resources);
        self
    }

    /// The resource store.
    ///
    /// # Errors
    /// FailedPrecondition without one.
    pub fn resources(&self) -> emco_core::Result<&std::sync::Arc<dyn ResourceStore>> {
        self.resources
            .as_ref()
            .ok_or_else(|| emco_core::Error::failed_precondition("no resource store is configured"))
    }

    /// The resource synchronizer.
    ///
    /// # Errors
    /// FailedPrecondition without one.
    pub fn deployer(&self) -> emco_core::Result<&std::sync::Arc<dyn Deployer>> {
        self.deployer.as_ref().ok_or_else(|| {
            emco_core::Error::failed_precondition("no resource synchronizer is configured")
        })
    }
}
