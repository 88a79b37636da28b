//! # emco-workflows
//!
//! EMCO's Temporal workflow manager (`workflowmgr`): workflow intents of a deployment intent
//! group name a workflow client (a user's service that starts workflows on Temporal) and what
//! it should start; emco-rs starts them through the client and asks the Temporal server how they
//! run, cancels and terminates them.
//!
//! - [`model`]: the intents and request bodies, as workflowmgr's Go structs read and write them.
//! - [`temporal::Temporal`]: a client of a Temporal frontend over Temporal's own gRPC API, every
//!   call bounded in time.
//! - [`rest::Workflows`]: the service and its REST routes at EMCO's URLs.
//! - [`tac::Tac`]: EMCO's Temporal action controller: workflow hooks of a group's lifecycle (an
//!   action controller, in-process), their workers, status and cancel routes.

pub mod model;
pub mod rest;
pub mod tac;
pub mod temporal;

pub use model::WorkflowIntent;
pub use rest::{Config, Workflows};
pub use tac::Tac;
pub use temporal::{Temporal, Timeouts};
