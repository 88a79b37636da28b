//! # emco-rsync
//!
//! The resource synchronizer: takes an AppContext and makes the clusters match it. One task per
//! active context processes its event queue (instantiate, terminate, update), applies resources
//! in app and resource order through a cluster connector (the Kubernetes API, or GitOps),
//! retries unreachable clusters with backoff, records per-resource and per-cluster status in the
//! AppContext, and resumes unfinished work after a restart. EMCO's `installapp`, `updateapp` and
//! `readyNotify` gRPC services are served from here.
