//! # emcoctl
//!
//! The EMCO command-line client. It reads EMCO's emcoctl YAML files unchanged (multi-document,
//! `resourceContext.anchor`, optional Go-template values), applies, gets, updates and deletes
//! them over the REST API (http or https), and reports and follows the status of their
//! deployments.
//!
//! - [`document`] parses and renders the files; every error names the file, document and line.
//! - [`ops`] turns documents into requests (delete in reverse, instantiate becomes terminate)
//!   and runs them; [`client`] is the HTTP client; [`config`] finds the server address.
//! - [`status`] reads the status routes of deployment intent groups and logical clouds
//!   (`status`) and follows operations until they settle (`watch`).
//! - [`cli`] is the command line; the `emcoctl` binary only calls [`cli::run`].
//!
//! ```
//! use emcoctl::document::parse;
//! use emcoctl::ops::{Command, plan};
//!
//! let dig = "projects/p/composite-apps/ca/v1/deployment-intent-groups/dig";
//! let text = format!("version: emco/v2\nresourceContext:\n  anchor: {dig}/instantiate\n");
//! let docs = parse(std::path::Path::new("instantiate.yaml"), &text).unwrap();
//! // delete turns an instantiate into a terminate of the same group...
//! let terminate = plan(Command::Delete, &docs[0]).unwrap();
//! assert_eq!(terminate.path, format!("/v2/{dig}/terminate"));
//! // ...and status and watch read the group's status route.
//! let targets = emcoctl::status::targets(&docs);
//! assert_eq!(targets[0].status_path(), format!("/v2/{dig}/status"));
//! assert_eq!(targets[0].label(), "deployment-intent-groups/dig");
//! ```
//!
//! Exit codes: [`error::EXIT_OK`] (0) when every request succeeded,
//! [`error::EXIT_REQUEST_FAILED`] (1) when one failed, [`error::EXIT_BAD_INPUT`] (2) for bad
//! input files or usage, in which case nothing is sent.

pub mod cli;
pub mod client;
pub mod config;
pub mod diff;
pub mod document;
pub mod error;
pub mod ops;
pub mod output;
pub mod rollout;
pub mod status;

pub use error::{CtlError, Result};
