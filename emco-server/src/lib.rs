//! # emco-server
//!
//! The reference EMCO server: a thin composition of `emco-orchestrator` behind EMCO's REST API
//! (axum), its gRPC services (tonic), health, readiness and metrics endpoints. Configuration comes
//! from a file, flags and the environment; the embedded store is the default backend so a fresh
//! machine needs no external service.
