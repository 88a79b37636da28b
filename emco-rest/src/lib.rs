//! # emco-rest
//!
//! EMCO's REST conventions as a reusable kit over axum, shared by the orchestrator's REST API,
//! the reference server and every controller's intent routes (the controller SDK re-exports it
//! as `emco_controller_sdk::rest`): error mapping, body extraction and generic routes.
//!
//! - [`ApiError`]: every error kind mapped onto EMCO's status codes, with a short plain-text body;
//! - [`EmcoJson`]: the JSON body extractor (empty body 400, malformed JSON 422, schema 400);
//! - [`multipart`]: EMCO's `metadata` + `file` / `files` uploads, spooled to disk with a limit;
//! - [`accept`]: `Accept` negotiation for objects that carry a file (apps, profiles, clusters);
//! - [`Routes`]: EMCO's five routes (create/get/list/put/delete) over a [`Collection`], the
//!   typed API of one object type in the resource store (from `emco_appcontext::collection`,
//!   re-exported here), keyed by the URL's path parameters, answering with EMCO's texts and
//!   codes for the type ([`Wording`]).
//!
//! ```
//! use std::sync::Arc;
//! use emco_store::{InMemoryResourceStore, ResourceStore};
//! use emco_rest::Routes;
//! use emco_core::model::{GenericPlacementIntent, Project};
//!
//! let store: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
//! let app: axum::Router = Routes::<Project>::new("/v2/projects", "project")
//!     .router(Arc::clone(&store))
//!     .merge(
//!         Routes::<GenericPlacementIntent>::new(
//!             "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}\
//!              /deployment-intent-groups/{deploymentIntentGroup}/generic-placement-intents",
//!             "genericPlacementIntent",
//!         )
//!         .router(store),
//!     );
//! # let _ = app;
//! ```

pub mod accept;
mod error;
mod files;
mod json;
pub mod multipart;
mod pattern;
mod routes;

pub use accept::Representation;
pub use emco_appcontext::collection::{
    Collection, EmptyList, Hook, NoHook, Object, PutStatus, Wording,
};
pub use error::{ApiError, ERROR_KIND_HEADER};
pub use files::{BlobFiles, FileRoutes, FormWriter, read_form};
pub use json::{EmcoJson, RawBody};
pub use pattern::KeyPattern;
pub use routes::{
    CollectionView, ListView, Routes, View, item_key, json_response, list_response, put_status,
};
