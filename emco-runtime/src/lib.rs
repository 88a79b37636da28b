//! # emco-runtime
//!
//! What the long-running parts of emco-rs (the rsync engine, the orchestrator, the servers,
//! kubesim) share beside the model, which does no I/O (emco-core):
//!
//! - [`metrics`]: counter, gauge and histogram families rendered in Prometheus' text format,
//!   owned by each component rather than a global registry;
//! - [`sync`]: striped async locks, one short critical section per object;
//! - [`os`]: the process's open-files limit, raised to the hard one at start;
//! - [`signal`]: the signals that end the process, caught from the start.

pub mod metrics;
pub mod os;
pub mod signal;
pub mod sync;
