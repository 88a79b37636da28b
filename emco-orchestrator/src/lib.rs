//! # emco-orchestrator
//!
//! EMCO's service layer as a library: projects, composite apps, apps, profiles, deployment intent
//! groups and their intents, cluster providers and clusters, logical clouds and the controller
//! registry; and the lifecycle of a deployment (approve, instantiate, update, rollback, terminate,
//! stop, status). The REST server, the gRPC services and the Python bindings all call it.
