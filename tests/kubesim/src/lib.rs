//! # kubesim
//!
//! A Kubernetes API server that simulates many clusters in one process, for tests, benchmarks and
//! demos: discovery, CRUD, patch, server-side apply, watch and CRDs, with workloads that become
//! ready after a delay and faults that can be switched on per cluster. Clients reach each cluster
//! through an ordinary kubeconfig.
//!
//! Each cluster (`c1` .. `cN`) listens on its own port with its own CA, serving certificate and
//! bearer token (or plain HTTP for big scale runs); [`Fleet::kubeconfig`] gives a normal
//! kubeconfig for it. Over TLS, a client certificate the cluster's CA signed (an approved
//! CertificateSigningRequest's) authenticates too, as its subject's CN. Certificates are made on
//! first use (a kubeconfig, a CSR, the first connection), so big idle fleets start fast. With
//! [`FleetConfig::controllers`] workloads also get their ReplicaSets and Pods. A cluster with
//! cert-manager's CRDs signs `CertificateRequest`s with their CA issuer as they are created. The README of this
//! package lists what the API does, the design choices (one port per cluster) and the known gaps.
//!
//! ```no_run
//! # async fn demo() -> emco_core::Result<()> {
//! use kubesim::{Fault, Fleet, FleetConfig};
//! let fleet = Fleet::start(FleetConfig { clusters: 3, ..FleetConfig::default() }).await?;
//! let kubeconfig = fleet.kubeconfig("c1")?; // hand this to kubectl or kube-rs
//! fleet.set_fault("c2", Fault::down())?; // c2 now refuses connections
//! fleet.shutdown(std::time::Duration::from_secs(1)).await?;
//! # let _ = kubeconfig;
//! # Ok(())
//! # }
//! ```

mod admin;
mod api;
mod apply;
mod certmanager;
mod cluster;
mod defaults;
mod discovery;
mod fault;
mod fleet;
mod invalid;
mod patch;
mod persist;
mod protobuf;
mod rbac;
mod resources;
mod schema;
mod selector;
mod sim;
mod status;
mod store;
mod table;
mod tls;
mod util;

pub use admin::{AdminClient, serve_admin};
pub use fault::{Fault, Unreachable};
pub use fleet::{Fleet, FleetConfig};
pub use sim::{CRASH_AFTER_READY, NEVER_READY};
