//! # emco-appcontext
//!
//! What EMCO keeps in its two stores (emco-store's [`ResourceStore`] and [`AppContextStore`]):
//!
//! - [`AppContext`] ([`context`]): lays contexts out exactly as EMCO does, so EMCO's Go
//!   controllers pointed at the same etcd read and write them; [`ScratchStore`] holds a context
//!   being built before any of it is written;
//! - [`keys`]: the key schema of onboarded objects, the key a REST URL names;
//! - [`collection`]: the typed create/get/list/put/delete of one object type, answering with
//!   EMCO's texts for it;
//! - [`sealed`]: the blobs that hold credentials sealed with AES-256-GCM before any backend
//!   stores them (it seals by this key schema);
//! - [`Deployer`]: what controllers reach the resource synchronizer through.
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use emco_appcontext::{AppContext, CompositeAppMeta};
//! use emco_store::{AppContextStore, InMemoryAppContextStore};
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
pub mod context;
pub mod deployer;
pub mod keys;
pub mod scratch;
pub mod sealed;

pub use context::{AppContext, CompositeAppMeta};
pub use deployer::{Deployer, ObjectRef};
use emco_store::{AppContextStore, ResourceStore};
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
