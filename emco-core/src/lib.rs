//! # emco-core
//!
//! The model of EMCO, the Edge Multi-Cluster Orchestrator, with no I/O and no async runtime:
//!
//! - [`model`]: serde types for every object of EMCO's REST API (projects, composite apps, apps,
//!   profiles, deployment intent groups and their intents, cluster providers, clusters, labels,
//!   kv-pairs, logical clouds, controllers), with JSON field names as EMCO's current API.
//! - [`validate`]: EMCO's schema rules, with errors that carry a kind and the offending field path.
//! - [`placement`]: resolution of app placement intents against a cluster inventory, as a pure
//!   function, and the final choice per anyOf group after placement controllers filtered.
//! - [`lifecycle`]: the deployment intent group and AppContext/rsync state machines as pure
//!   transition functions.
//! - [`rollout`]: rollout policies, the waves they make of the placed clusters and the verdict
//!   of a wave's gate.
//! - [`error`]: the [`ErrorKind`]s every library error of the workspace maps onto.
//!
//! ```
//! use emco_core::{Metadata, Validate, ErrorKind};
//!
//! let ok = Metadata::named("my-project");
//! assert!(ok.validate().is_ok());
//!
//! let bad = Metadata::named("-bad");
//! let err = bad.validate().unwrap_err().within("metadata");
//! assert_eq!(err.kind(), ErrorKind::InvalidArgument);
//! assert_eq!(err.field(), Some("metadata.name"));
//! ```

pub mod drift;
pub mod error;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod ids;
pub mod lifecycle;
pub mod metadata;
pub mod model;
pub mod placement;
pub mod poison;
pub mod preview;
pub mod rollout;
pub mod schemas;
pub mod time;
pub mod validate;
#[cfg(feature = "x509")]
pub mod x509;

/// Declares an object type of the REST API in one attribute: its name (`Named`), its
/// validation and JSON schema (`Validate`) and, for a controller's intent, its place in the
/// API (`IntentType` of the controller SDK).
///
/// ```
/// use emco_core::{Metadata, Object, Result, Validate, model::Named};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Object)]
/// #[object(metadata, check = Quota::check)]
/// struct Quota { metadata: Metadata, limit: u32 }
///
/// impl Quota {
///     fn check(&self) -> Result<()> {
///         if self.limit == 0 {
///             return Err(emco_core::Error::invalid("must be positive").with_field("limit"));
///         }
///         Ok(())
///     }
/// }
///
/// let q = Quota { metadata: Metadata::named("q1"), limit: 0 };
/// assert_eq!(q.name(), "q1");
/// assert_eq!(q.validate().unwrap_err().to_string(), "limit: must be positive");
/// let bad = Quota { metadata: Metadata::named("-q"), limit: 1 };
/// assert_eq!(bad.validate().unwrap_err().field(), Some("metadata.name"));
/// ```
///
/// Intent types add `#[intent(parent = Dig, segment = "label-intents", param = "labelIntent")]`
/// (see the controller SDK's `intent` module); every option is listed in emco-derive's
/// documentation.
pub use emco_derive::Object;
pub use error::{Error, ErrorKind, Found, HasKind, Result};
pub use ids::{ContextId, DigRef, LogicalCloudRef, ResourceName};
pub use metadata::Metadata;
pub use placement::ClusterRef;
pub use validate::Validate;

// The derive names this crate `::emco_core` everywhere, here too.
extern crate self as emco_core;

/// What `#[derive(Object)]` implements, at one path whatever re-exports this crate.
#[doc(hidden)]
pub mod __derive {
    pub use crate::error::Result;
    pub use crate::model::Named;
    pub use crate::validate::Validate;
    pub use emco_go::jsonschema::Schema;
}
