//! Lifecycle state machines as pure transition functions.
//!
//! - [`dig`]: the deployment intent group: its states ([`DigState`]), the stored state record
//!   ([`StateInfo`]) and which operation is allowed in which state ([`transition`]).
//! - [`appcontext`]: the AppContext status as rsync drives it ([`AppContextStatus`],
//!   [`rsync_transition`]), the per-resource status ([`RsyncStatus`]) and the cluster
//!   readiness ([`ClusterReadiness`]).
//!
//! ```
//! use emco_core::lifecycle::{transition, DigOperation, DigState, Outcome};
//!
//! let s = transition(DigState::Created, DigOperation::Approve).unwrap();
//! assert_eq!(s, Outcome::State(DigState::Approved));
//! let err = transition(DigState::Instantiated, DigOperation::Delete).unwrap_err();
//! assert_eq!(err.kind(), emco_core::ErrorKind::Conflict);
//! ```

pub mod appcontext;
pub mod dig;
pub mod hold;

pub use appcontext::{
    AppContextStatus, ClusterReadiness, EventStatuses, ResourceEvent, RsyncEvent, RsyncStatus,
    StatusRecord, resource_transition, rsync_transition,
};
pub use dig::{
    DigOperation, DigState, Outcome, StateAction, StateInfo, check_delete, transition,
    transition_named,
};
