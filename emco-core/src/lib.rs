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

pub mod error;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod ids;
pub mod lifecycle;
pub mod metadata;
pub mod metrics;
pub mod model;
pub mod os;
pub mod placement;
pub mod rollout;
pub mod schemas;
pub mod time;
pub mod validate;
#[cfg(feature = "x509")]
pub mod x509;

pub use error::{Error, ErrorKind, HasKind, Result};
pub use ids::{ContextId, DigRef, LogicalCloudRef};
pub use metadata::Metadata;
pub use placement::ClusterRef;
pub use validate::Validate;
