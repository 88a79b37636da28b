//! # emco
//!
//! One dependency for whoever embeds emco-rs or writes an EMCO controller in Rust, instead of
//! one per layer:
//!
//! | path | crate | feature |
//! |---|---|---|
//! | `emco::{Error, Result, Metadata, Validate, ContextId}`, `emco::model`, `emco::lifecycle`, `emco::placement`, ... | emco-core: the model and its rules | always |
//! | `emco::store` | emco-store: the resource and AppContext stores, their backends (memory, embedded, etcd, MongoDB) and fencing | always |
//! | `emco::appcontext` | emco-appcontext: the AppContext API, the key schema of objects, typed collections, sealing | always |
//! | `emco::controller` | emco-controller-sdk: controllers, intents, the gRPC server and client | `controller` (default) |
//! | `emco::rsync` | emco-rsync: deploys AppContexts to clusters | `rsync` |
//! | `emco::orchestrator` | emco-orchestrator: onboarding, lifecycle, status | `orchestrator` |
//!
//! `emco::async_trait` is re-exported for implementing the controller traits.
//!
//! ```
//! use std::sync::Arc;
//! use emco::store::{InMemoryResourceStore, ResourceKey, ResourceStore};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let store: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
//! let project = ResourceKey::root().child("project", "p1");
//! store.create(&project, &serde_json::json!({"metadata": {"name": "p1"}})).await?;
//! assert!(store.get(&project).await?.is_some());
//! # Ok::<(), emco::Error>(())
//! # }).unwrap();
//! ```
//!
//! Complete custom controllers written against this crate alone: an action controller,
//! `examples/label_controller.rs`, and a placement controller, `examples/avoid_controller.rs`
//! (see `examples/label-controller/README.md` at the top of the repository).

pub use async_trait::async_trait;
pub use emco_appcontext as appcontext;
#[cfg(feature = "controller")]
pub use emco_controller_sdk as controller;
pub use emco_core::*;
#[cfg(feature = "orchestrator")]
pub use emco_orchestrator as orchestrator;
#[cfg(feature = "rsync")]
pub use emco_rsync as rsync;
pub use emco_store as store;
