//! # emco-client
//!
//! EMCO's REST API from Rust, for emcoctl, emco-py and programs of their own. It reads EMCO's
//! emcoctl YAML files unchanged (multi-document, `resourceContext.anchor`, optional Go-template
//! values), turns them into requests, sends them over http or https, or to a router in the
//! same process, and reads and follows the status of deployments.
//!
//! - [`document`] parses and renders the files; every error names the file, document and line.
//! - [`ops`] turns documents into requests (delete in reverse, instantiate becomes terminate)
//!   and runs them; [`client`] is the HTTP client.
//! - [`status`] reads the status routes of deployment intent groups and logical clouds
//!   (`status`) and follows operations until they settle (`watch`); [`output`] prints answers
//!   as JSON, YAML or tables.
//!
//! ```
//! use emco_client::document::parse;
//! use emco_client::ops::{Command, plan};
//!
//! let dig = "projects/p/composite-apps/ca/v1/deployment-intent-groups/dig";
//! let text = format!("version: emco/v2\nresourceContext:\n  anchor: {dig}/instantiate\n");
//! let docs = parse(std::path::Path::new("instantiate.yaml"), &text).unwrap();
//! // delete turns an instantiate into a terminate of the same group...
//! let terminate = plan(Command::Delete, &docs[0]).unwrap();
//! assert_eq!(terminate.path, format!("/v2/{dig}/terminate"));
//! // ...and status and watch read the group's status route.
//! let targets = emco_client::status::targets(&docs);
//! assert_eq!(targets[0].status_path(), format!("/v2/{dig}/status"));
//! assert_eq!(targets[0].label(), "deployment-intent-groups/dig");
//! ```
//!
//! Errors map to exit codes (as emcoctl's): [`error::EXIT_OK`] (0) when every request
//! succeeded, [`error::EXIT_REQUEST_FAILED`] (1) when one failed, [`error::EXIT_BAD_INPUT`] (2)
//! for bad input files or usage, in which case nothing is sent.

pub mod client;
pub mod document;
pub mod error;
pub mod ops;
pub mod output;
pub mod status;

pub use error::{CtlError, Result};
