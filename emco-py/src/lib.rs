//! # emco-py
//!
//! Python bindings for emco-rs, built with maturin. The crate holds no business logic: it wraps
//! the Rust API of `emco-orchestrator` and maps its error kinds onto a Python exception hierarchy.
