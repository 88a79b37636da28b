//! # emcoctl
//!
//! The EMCO command-line client over [`emco_client`]: it reads EMCO's emcoctl YAML files
//! unchanged, applies, gets, updates and deletes them over the REST API (http or https), and
//! reports and follows the status of their deployments.
//!
//! - [`cli`] is the command line; the `emcoctl` binary only calls [`cli::run`].
//! - [`config`] finds the server address; [`diff`] compares files with what the server holds;
//!   [`rollout`] follows and steers waved rollouts.
//! - The documents, requests, HTTP client, status and output are emco-client's, re-exported
//!   here under their own names.
//!
//! Exit codes: [`error::EXIT_OK`] (0) when every request succeeded,
//! [`error::EXIT_REQUEST_FAILED`] (1) when one failed, [`error::EXIT_BAD_INPUT`] (2) for bad
//! input files or usage, in which case nothing is sent.

pub mod cli;
pub mod config;
pub mod diff;
pub mod rollout;

pub use emco_client::{CtlError, Result, client, document, error, ops, output, status};
