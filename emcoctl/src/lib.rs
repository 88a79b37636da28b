//! # emcoctl
//!
//! The EMCO command-line client. It reads EMCO's emcoctl YAML files unchanged (multi-document,
//! `resourceContext.anchor`, optional Go-template values), applies, gets, updates and deletes
//! them over the REST API.
//!
//! - [`document`] parses and renders the files; every error names the file, document and line.
//! - [`ops`] turns documents into requests (delete in reverse, instantiate becomes terminate)
//!   and runs them; [`client`] is the HTTP client; [`config`] finds the server address.
//! - [`cli`] is the command line; the `emcoctl` binary only calls [`cli::run`].
//!
//! Exit codes: [`error::EXIT_OK`] (0) when every request succeeded,
//! [`error::EXIT_REQUEST_FAILED`] (1) when one failed, [`error::EXIT_BAD_INPUT`] (2) for bad
//! input files or usage, in which case nothing is sent.

pub mod cli;
pub mod client;
pub mod config;
pub mod document;
pub mod error;
pub mod ops;

pub use error::{CtlError, Result};
