//! # emcoctl
//!
//! The EMCO command-line client. It reads EMCO's emcoctl YAML files unchanged (multi-document,
//! `resourceContext.anchor`, optional Go-template values), applies, gets, updates and deletes
//! them over the REST API, and follows long operations with a live status view.
