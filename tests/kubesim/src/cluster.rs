//! One simulated cluster (its store, fault, CA and serving certificate) and the set of a
//! fleet's clusters by name: what the API server, the simulated controllers, persistence and
//! the admin API share, below the fleet that serves them.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use rustls::ServerConfig;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::fault::{Fault, FaultState};
use crate::store::Store;
use crate::tls::ClusterCa;

/// One simulated cluster.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) name: String,
    pub(crate) token: String,
    /// The names and addresses the serving certificate covers; `None` serves plain HTTP.
    pub(crate) tls_hosts: Option<Arc<[String]>>,
    /// The CA, made on first use: generating 10,000 of them up front took most of the start.
    pub(crate) ca: Mutex<Option<Arc<ClusterCa>>>,
    /// The TLS configuration with the serving certificate, made on the first connection.
    pub(crate) serving: OnceLock<Arc<ServerConfig>>,
    pub(crate) addr: SocketAddr,
    /// The path its API is served under: empty on a port of its own, `/clusters/<name>` on a
    /// shared one.
    pub(crate) path: String,
    pub(crate) store: Mutex<Store>,
    pub(crate) fault: Mutex<FaultState>,
    /// Woken whenever the fault changes.
    pub(crate) fault_changed: Notify,
    pub(crate) ready_delay: Duration,
    pub(crate) bookmark_interval: Duration,
    /// Whether the workload controllers run.
    pub(crate) controllers: bool,
    pub(crate) shutdown: CancellationToken,
}

impl Cluster {
    /// Locks the store. A panic while holding the lock cannot leave it half-written in a way
    /// that matters more than losing the cluster, so a poisoned lock is taken over.
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        lock(&self.store)
    }

    pub(crate) fn fault_state(&self) -> FaultState {
        lock(&self.fault).clone()
    }

    /// The cluster's CA (made now if this is its first use): what clients trust and what signs
    /// approved certificate requests. Plain-HTTP clusters have one too, for their CSRs.
    pub(crate) fn ca(&self) -> emco_core::Result<Arc<ClusterCa>> {
        // Generated under the lock: a kubeconfig handed out must name the CA that stays.
        let mut ca = lock(&self.ca);
        if let Some(c) = ca.as_ref() {
            return Ok(c.clone());
        }
        let made = Arc::new(ClusterCa::new(&self.name)?);
        *ca = Some(made.clone());
        Ok(made)
    }

    /// The TLS configuration, made on the first connection; `None` for plain HTTP.
    pub(crate) fn server_config(&self) -> emco_core::Result<Option<Arc<ServerConfig>>> {
        let Some(hosts) = &self.tls_hosts else {
            return Ok(None);
        };
        if let Some(c) = self.serving.get() {
            return Ok(Some(c.clone()));
        }
        let made = self.ca()?.server_config(&self.name, hosts)?;
        // Two first connections may race; both configurations carry the same CA, one stays.
        Ok(Some(self.serving.get_or_init(|| made).clone()))
    }

    pub(crate) fn set_fault(&self, fault: Fault) {
        *lock(&self.fault) = FaultState {
            fault,
            since: Instant::now(),
        };
        self.fault_changed.notify_waiters();
    }

    /// The URL clients use.
    pub(crate) fn server_url(&self) -> String {
        let scheme = if self.tls_hosts.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}{}", self.addr, self.path)
    }

    pub(crate) fn kubeconfig_text(&self) -> emco_core::Result<String> {
        let ca = if self.tls_hosts.is_some() {
            format!(
                "\n    certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(&self.ca()?.ca_pem)
            )
        } else {
            String::new()
        };
        let n = &self.name;
        Ok(format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {n}\n  cluster:\n    server: {}{ca}\n\
             contexts:\n- name: {n}\n  context:\n    cluster: {n}\n    user: {n}-admin\n    namespace: default\n\
             current-context: {n}\nusers:\n- name: {n}-admin\n  user:\n    token: {}\npreferences: {{}}\n",
            self.server_url(),
            self.token
        ))
    }
}

#[derive(Debug)]
pub(crate) struct FleetInner {
    pub(crate) clusters: Vec<Arc<Cluster>>,
    pub(crate) index: HashMap<String, usize>,
    pub(crate) data_dir: Option<PathBuf>,
}

impl FleetInner {
    pub(crate) fn cluster(&self, name: &str) -> emco_core::Result<&Arc<Cluster>> {
        self.index
            .get(name)
            .map(|&i| &self.clusters[i])
            .ok_or_else(|| emco_core::Error::not_found(format!("cluster {name:?} not found")))
    }

    /// Sets a cluster's fault after validating it.
    pub(crate) fn set_fault(&self, name: &str, fault: Fault) -> emco_core::Result<()> {
        fault.validate()?;
        self.cluster(name)?.set_fault(fault);
        Ok(())
    }
}
