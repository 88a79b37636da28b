//! # emco-controller-sdk
//!
//! Write an EMCO placement or action controller as one type and one or two async functions. The
//! SDK serves it over EMCO's gRPC wire protocol (`contextupdate`, `PlacementController`) or runs
//! it in-process inside the server, gives it a typed handle on the AppContext, and gives its
//! intent types REST routes. It also holds the client side that the orchestrator uses to call
//! registered controllers in priority order.
//!
//! - [`ActionController`] / [`PlacementController`]: the traits a controller implements, given a
//!   [`ControllerContext`] (a typed, staged [`ContextHandle`] on the AppContext, the intent name,
//!   the replaced context, and its intents through [`intent`]);
//! - [`Server`]: serves a controller over gRPC (`contextupdate` / `PlacementController` + health,
//!   graceful shutdown); [`ActionRunner`] / [`PlacementRunner`] run it in-process;
//! - [`ControllerRegistry`]: the orchestrator's side, calling the controllers a DIG names in
//!   priority order over gRPC (one cached channel per address, timeouts) or in-process.
//!
//! ```
//! use std::sync::Arc;
//! use emco_appcontext::{AppContext, CompositeAppMeta};
//! use emco_store::{AppContextStore, InMemoryAppContextStore};
//! use emco_controller_sdk::{ActionController, ActionRunner, ControllerContext, Stores, set_field};
//!
//! struct Team;
//!
//! #[async_trait::async_trait]
//! impl ActionController for Team {
//!     async fn update(&self, cx: &mut ControllerContext) -> emco_core::Result<()> {
//!         let team = cx.intent_name().unwrap_or("none").to_owned();
//!         for app in cx.apps().await? {
//!             for cluster in cx.clusters(&app).await? {
//!                 for (name, mut obj) in cx.resources(&app, &cluster).await? {
//!                     set_field(&mut obj, &["metadata", "labels", "team"], team.clone().into())?;
//!                     cx.put_resource(&app, &cluster, &name, obj).await?;
//!                 }
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
//! let ctx = AppContext::create(Arc::clone(&store), &CompositeAppMeta::default()).await?;
//! let mut w = ctx.writer();
//! w.add_app("web")?;
//! w.add_cluster("web", "p+c1", None)?;
//! w.add_resource("web", "p+c1", "web+Service", "kind: Service\nmetadata:\n  name: web\n")?;
//! w.flush().await?;
//! // In-process; `Server::builder(store).action(Team).serve(addr, shutdown)` serves it over gRPC.
//! let runner = ActionRunner::new(Arc::new(Team), Stores::new(Arc::clone(&store)));
//! runner.update(&ctx.id().to_string(), "blue", "").await?;
//! let yaml = ctx.resource("web", "p+c1", "web+Service").await?.unwrap_or_default();
//! assert!(yaml.contains("team: blue"));
//! # Ok::<(), emco_core::Error>(())
//! # }).unwrap();
//! ```
//!
//! [`rest`] is the REST kit (the crate emco-rest) the server and every controller share: EMCO's
//! status codes and error bodies, the JSON body extractor, and generic collection/item routes
//! over the resource store, so a controller's intent types get the same conventions as the
//! orchestrator's own objects.

pub mod client;
pub mod controller;
pub mod groups;
pub mod handle;
pub mod intent;
pub mod remote;
#[cfg(feature = "rest")]
pub use emco_rest as rest;
pub mod server;

pub use client::ControllerRegistry;
pub use controller::{
    ActionController, ActionRunner, ControllerContext, Deployer, Event, ObjectRef,
    PlacementController, PlacementRunner, Stores,
};
pub use groups::{Groups, GroupsLink};
pub use handle::{ContextHandle, resource_name, set_field};
pub use intent::{Dig, IntentType};
pub use server::{Server, ServerBuilder};

// `#[derive(Object)]` names this crate `::emco_controller_sdk` everywhere, here too.
extern crate self as emco_controller_sdk;

/// What `#[derive(Object)]`'s `#[intent(...)]` implements, at one path whatever re-exports
/// this crate.
#[doc(hidden)]
pub mod __derive {
    pub use crate::intent::IntentType;
    pub use emco_appcontext::collection::{Collection, Wording};
    pub use emco_store::ResourceStore;
}
