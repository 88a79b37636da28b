//! The fleet: N simulated clusters in one process, each with its own listener (its own port),
//! CA, serving certificate and bearer token.
//!
//! One listener per cluster is what makes "unreachable" real: a down cluster closes its port and
//! clients see connection refused, while its neighbours keep serving. An idle cluster costs one
//! listening socket, one parked accept task and its (small) store, so 10,000 clusters fit in one
//! process when the file-descriptor limit allows (`ulimit -n` above the cluster count).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rustls::ServerConfig;
use std::time::{Duration, Instant};

use base64::Engine;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::fault::{Fault, FaultState, Unreachable};
use crate::store::Store;
use crate::tls::{CertUser, ClusterCa, cert_user};
use crate::{api, persist};

/// How a [`Fleet`] is set up.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// Number of clusters, named `c1` .. `cN`.
    pub clusters: usize,
    /// Address of the first cluster. Cluster `ci` listens on `port + i - 1`; port 0 gives every
    /// cluster an ephemeral port.
    pub listen: SocketAddr,
    /// Serve plain HTTP instead of TLS (cheaper for big scale runs).
    pub plain_http: bool,
    /// How long workloads take to become ready. Zero makes them ready on the write itself.
    pub ready_delay: Duration,
    /// Where clusters persist their objects (one JSON file per cluster), if anywhere.
    pub data_dir: Option<PathBuf>,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Run the workload controllers: Deployments get ReplicaSets, and ReplicaSets,
    /// StatefulSets, DaemonSets and Jobs get Pods (a few per workload at most). Off by default:
    /// without them workloads only get their simulated status, which is cheaper for big fleets.
    pub controllers: bool,
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            clusters: 1,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            plain_http: false,
            ready_delay: Duration::from_millis(500),
            data_dir: None,
            bookmark_interval: Duration::from_secs(5),
            controllers: false,
        }
    }
}

/// One simulated cluster.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) name: String,
    pub(crate) token: String,
    /// The names and addresses the serving certificate covers; `None` serves plain HTTP.
    tls_hosts: Option<Arc<[String]>>,
    /// The CA, made on first use: generating 10,000 of them up front took most of the start.
    ca: Mutex<Option<Arc<ClusterCa>>>,
    /// The TLS configuration with the serving certificate, made on the first connection.
    serving: OnceLock<Arc<ServerConfig>>,
    pub(crate) addr: SocketAddr,
    store: Mutex<Store>,
    fault: Mutex<FaultState>,
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
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn fault_state(&self) -> FaultState {
        self.fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The cluster's CA (made now if this is its first use): what clients trust and what signs
    /// approved certificate requests. Plain-HTTP clusters have one too, for their CSRs.
    pub(crate) fn ca(&self) -> emco_core::Result<Arc<ClusterCa>> {
        // Generated under the lock: a kubeconfig handed out must name the CA that stays.
        let mut ca = self
            .ca
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = ca.as_ref() {
            return Ok(c.clone());
        }
        let made = Arc::new(ClusterCa::new(&self.name)?);
        *ca = Some(made.clone());
        Ok(made)
    }

    /// The TLS configuration, made on the first connection; `None` for plain HTTP.
    fn server_config(&self) -> emco_core::Result<Option<Arc<ServerConfig>>> {
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

    fn set_fault(&self, fault: Fault) {
        *self
            .fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = FaultState {
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
        format!("{scheme}://{}", self.addr)
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
    index: HashMap<String, usize>,
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

/// A running fleet of simulated clusters. Dropping it without [`Fleet::shutdown`] stops the
/// listeners too (their tasks see the cancellation).
#[derive(Debug)]
pub struct Fleet {
    pub(crate) inner: Arc<FleetInner>,
    pub(crate) tasks: TaskTracker,
    pub(crate) cancel: CancellationToken,
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> emco_core::Error {
    move |e| emco_core::Error::unavailable(what).with_source(e)
}

impl Fleet {
    /// Creates the clusters (certificates, tokens, stores, loaded from `data_dir` if set) and
    /// starts serving them.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for zero clusters or a port range beyond 65535, `Unavailable` when a
    /// listener cannot bind, `Internal` when certificates cannot be made.
    pub async fn start(config: FleetConfig) -> emco_core::Result<Self> {
        if config.clusters == 0 {
            return Err(
                emco_core::Error::invalid("at least one cluster is needed").with_field("clusters")
            );
        }
        let base = usize::from(config.listen.port());
        if base != 0 && base + config.clusters - 1 > 65_535 {
            return Err(
                emco_core::Error::invalid("the port range of the clusters exceeds 65535")
                    .with_field("listen"),
            );
        }
        let listeners = bind_all(config.listen, config.clusters).await?;
        let tls_hosts = (!config.plain_http).then(|| tls_hosts(config.listen.ip()));
        let cancel = CancellationToken::new();
        let mut clusters = Vec::with_capacity(config.clusters);
        for (i, listener) in listeners.iter().enumerate() {
            let name = format!("c{}", i + 1);
            let addr = listener
                .local_addr()
                .map_err(io_err(format!("listener of {name}")))?;
            let mut store = Store::default();
            api::seed(&mut store);
            if let Some(dir) = &config.data_dir {
                persist::load(dir, &name, &mut store)?;
            }
            clusters.push(Arc::new(Cluster {
                token: format!("{:032x}", rand::random::<u128>()),
                name,
                tls_hosts: tls_hosts.clone(),
                ca: Mutex::new(None),
                serving: OnceLock::new(),
                addr,
                store: Mutex::new(store),
                fault: Mutex::new(FaultState::default()),
                fault_changed: Notify::new(),
                ready_delay: config.ready_delay,
                bookmark_interval: config.bookmark_interval,
                controllers: config.controllers,
                shutdown: cancel.clone(),
            }));
        }
        let index = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        let inner = Arc::new(FleetInner {
            clusters,
            index,
            data_dir: config.data_dir.clone(),
        });
        let tasks = TaskTracker::new();
        for (cluster, listener) in inner.clusters.iter().zip(listeners) {
            tasks.spawn(accept_loop(cluster.clone(), listener, tasks.clone()));
        }
        if let Some(dir) = config.data_dir {
            tasks.spawn(persist::flush_loop(inner.clone(), dir, cancel.clone()));
        }
        Ok(Self {
            inner,
            tasks,
            cancel,
        })
    }

    /// The names of the clusters, `c1` .. `cN`.
    #[must_use]
    pub fn cluster_names(&self) -> Vec<String> {
        self.inner.clusters.iter().map(|c| c.name.clone()).collect()
    }

    /// The URL of a cluster's API server.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown cluster.
    pub fn server_url(&self, cluster: &str) -> emco_core::Result<String> {
        Ok(self.inner.cluster(cluster)?.server_url())
    }

    /// A kubeconfig (YAML) for a cluster: server URL, CA and bearer token.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown cluster.
    pub fn kubeconfig(&self, cluster: &str) -> emco_core::Result<String> {
        self.inner.cluster(cluster)?.kubeconfig_text()
    }

    /// Writes `DIR/<cluster>.kubeconfig` for every cluster and returns the paths.
    ///
    /// # Errors
    ///
    /// `Unavailable` when the directory or a file cannot be written.
    pub async fn write_kubeconfigs(&self, dir: &Path) -> emco_core::Result<Vec<PathBuf>> {
        // One blocking task per core, each for a run of clusters: a task hop per file made
        // 10,000 files take seconds, and the CAs the kubeconfigs name are generated here.
        tokio::fs::create_dir_all(dir)
            .await
            .map_err(io_err(format!("cannot create {}", dir.display())))?;
        let n = self.inner.clusters.len();
        let workers = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let chunk = n.div_ceil(workers).max(1);
        let mut handles = Vec::new();
        for start in (0..n).step_by(chunk) {
            let inner = self.inner.clone();
            let dir = dir.to_path_buf();
            handles.push(tokio::task::spawn_blocking(move || {
                let end = (start + chunk).min(inner.clusters.len());
                inner.clusters[start..end]
                    .iter()
                    .map(|c| {
                        let path = dir.join(format!("{}.kubeconfig", c.name));
                        std::fs::write(&path, c.kubeconfig_text()?)
                            .map_err(io_err(format!("cannot write {}", path.display())))?;
                        Ok(path)
                    })
                    .collect::<emco_core::Result<Vec<_>>>()
            }));
        }
        let mut paths = Vec::with_capacity(n);
        for h in handles {
            paths.extend(h.await.map_err(|e| {
                emco_core::Error::internal("writing kubeconfigs failed").with_source(e)
            })??);
        }
        Ok(paths)
    }

    /// Switches a cluster's fault; takes effect for new connections and requests at once.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown cluster, `InvalidArgument` for a bad fault.
    pub fn set_fault(&self, cluster: &str, fault: Fault) -> emco_core::Result<()> {
        self.inner.set_fault(cluster, fault)
    }

    /// The current fault of a cluster.
    ///
    /// # Errors
    ///
    /// `NotFound` for an unknown cluster.
    pub fn fault(&self, cluster: &str) -> emco_core::Result<Fault> {
        Ok(self.inner.cluster(cluster)?.fault_state().fault)
    }

    /// Stops accepting, closes connections, waits for the tasks (at most `grace`) and writes
    /// the stores to the data directory if one is set.
    ///
    /// # Errors
    ///
    /// `Unavailable` when the final persistence write fails.
    pub async fn shutdown(self, grace: Duration) -> emco_core::Result<()> {
        self.stop(grace).await
    }

    /// [`Fleet::shutdown`] by reference, for owners that cannot give the fleet up.
    ///
    /// # Errors
    ///
    /// As [`Fleet::shutdown`].
    pub async fn stop(&self, grace: Duration) -> emco_core::Result<()> {
        self.cancel.cancel();
        self.tasks.close();
        // Connections that do not finish within the grace period are dropped with the runtime.
        let _ = tokio::time::timeout(grace, self.tasks.wait()).await;
        if let Some(dir) = &self.inner.data_dir {
            persist::flush_all(&self.inner, dir, true)?;
        }
        Ok(())
    }

    /// A JSON summary of the clusters (name, server, fault), as the admin endpoint lists them.
    #[must_use]
    pub fn summary(&self) -> Value {
        summary(&self.inner)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

pub(crate) fn summary(inner: &FleetInner) -> Value {
    let list: Vec<Value> = inner
        .clusters
        .iter()
        .map(|c| json!({"name": c.name, "server": c.server_url(), "fault": c.fault_state().fault}))
        .collect();
    Value::Array(list)
}

/// Above this many clusters, port 0 means "free ports below the ephemeral range" rather than
/// ephemeral ports: the kernel's search for a free ephemeral port slows down with every
/// listener (binding 10,000 took 21 s here, against 0.3 s for chosen ports).
const EPHEMERAL_LIMIT: usize = 256;

/// Binds one listener per cluster: consecutive ports from `listen`'s port, or free ports when
/// it is 0.
async fn bind_all(listen: SocketAddr, n: usize) -> emco_core::Result<Vec<TcpListener>> {
    let base = usize::from(listen.port());
    let mut listeners = Vec::with_capacity(n);
    if base != 0 || n <= EPHEMERAL_LIMIT {
        for i in 0..n {
            let port = if base == 0 {
                0
            } else {
                u16::try_from(base + i).unwrap_or(0)
            };
            let addr = SocketAddr::new(listen.ip(), port);
            listeners.push(
                TcpListener::bind(addr)
                    .await
                    .map_err(io_err(format!("cannot listen on {addr}")))?,
            );
        }
        return Ok(listeners);
    }
    // Ports 10000..32767 sit below Linux's default ephemeral range; start at a random place in
    // it so that two fleets rarely probe the same ports, and skip ports in use.
    let span = 32_768usize.saturating_sub(10_000 + n).max(1);
    let mut port = 10_000 + rand::random_range(0..span);
    while listeners.len() < n {
        let p = u16::try_from(port)
            .map_err(|_| emco_core::Error::unavailable("no free ports left for the clusters"))?;
        let addr = SocketAddr::new(listen.ip(), p);
        match TcpListener::bind(addr).await {
            Ok(l) => listeners.push(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {}
            Err(e) => return Err(io_err(format!("cannot listen on {addr}"))(e)),
        }
        port += 1;
    }
    Ok(listeners)
}

/// The names and addresses serving certificates cover: loopback, plus the listen address when
/// it is a specific other one.
fn tls_hosts(ip: std::net::IpAddr) -> Arc<[String]> {
    let mut hosts = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    if !ip.is_unspecified() && ip.to_string() != "127.0.0.1" {
        hosts.push(ip.to_string());
    }
    hosts.into()
}

/// Accepts connections for one cluster, closing the port while the cluster is "refused".
async fn accept_loop(cluster: Arc<Cluster>, listener: TcpListener, tasks: TaskTracker) {
    let addr = cluster.addr;
    let mut listener = Some(listener);
    loop {
        let changed = cluster.fault_changed.notified();
        let state = cluster.fault_state();
        let now = Instant::now();
        let mode = state.unreachable_at(now);
        let flip = state.next_flip(now);
        if mode == Some(Unreachable::Refused) {
            listener = None;
        } else if listener.is_none() {
            match TcpListener::bind(addr).await {
                Ok(l) => listener = Some(l),
                Err(e) => {
                    tracing::warn!(cluster = %cluster.name, error = %e, "cannot re-open port; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(200)) => continue,
                        () = cluster.shutdown.cancelled() => return,
                    }
                }
            }
        }
        let flip_sleep = async {
            match flip {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        let accept = async {
            match &listener {
                Some(l) => l.accept().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = cluster.shutdown.cancelled() => return,
            () = changed => {}
            () = flip_sleep => {}
            res = accept => match res {
                Ok((tcp, _)) => {
                    if mode == Some(Unreachable::BlackHole) {
                        tasks.spawn(hold(cluster.clone(), tcp));
                    } else {
                        tasks.spawn(serve_connection(cluster.clone(), tcp));
                    }
                }
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(cluster = %cluster.name, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// A black-holed connection: never read, never answered, closed when the fault changes.
async fn hold(cluster: Arc<Cluster>, tcp: TcpStream) {
    tokio::select! {
        () = cluster.fault_changed.notified() => {}
        () = cluster.shutdown.cancelled() => {}
    }
    drop(tcp);
}

async fn serve_connection(cluster: Arc<Cluster>, tcp: TcpStream) {
    // Lower latency for small request/answer pairs.
    let _ = tcp.set_nodelay(true);
    let config = match cluster.server_config() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(cluster = %cluster.name, error = %e, "no serving certificate");
            return;
        }
    };
    match config {
        Some(config) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            let handshake = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp));
            match handshake.await {
                Ok(Ok(tls)) => {
                    // The verifier accepted the chain; the subject says who the client is.
                    let user = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|certs| certs.first())
                        .and_then(cert_user)
                        .map(Arc::new);
                    serve_io(cluster, tls, user).await;
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        }
        None => serve_io(cluster, tcp, None).await,
    }
}

/// Serves the requests of one connection; `user` is who its client certificate authenticates.
async fn serve_io<IO>(cluster: Arc<Cluster>, io: IO, user: Option<Arc<CertUser>>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let c = cluster.clone();
    let svc = service_fn(move |req| {
        let c = c.clone();
        let user = user.clone();
        async move { Ok::<_, std::convert::Infallible>(api::serve(c, user.as_deref(), req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    loop {
        let changed = cluster.fault_changed.notified();
        // A connection accepted just before the cluster went unreachable missed the change:
        // look again now that `changed` will see any later one.
        if cluster
            .fault_state()
            .unreachable_at(Instant::now())
            .is_some()
        {
            return;
        }
        let flip = cluster.fault_state().next_flip(Instant::now());
        let flip_sleep = async {
            match flip {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = conn.as_mut() => return,
            () = flip_sleep => {
                if cluster.fault_state().unreachable_at(Instant::now()).is_some() {
                    return;
                }
            }
            () = changed => {
                // Going unreachable cuts open connections, as a dead node would.
                if cluster.fault_state().unreachable_at(Instant::now()).is_some() {
                    return;
                }
            }
            () = cluster.shutdown.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has_ca(fleet: &Fleet, name: &str) -> bool {
        fleet
            .inner
            .cluster(name)
            .unwrap()
            .ca
            .lock()
            .unwrap()
            .is_some()
    }

    #[tokio::test]
    async fn certificates_are_made_on_first_use() {
        let fleet = Fleet::start(FleetConfig {
            clusters: 3,
            ..FleetConfig::default()
        })
        .await
        .unwrap();
        assert!(!has_ca(&fleet, "c1") && !has_ca(&fleet, "c2"));
        // The first connection makes the serving certificate (and the CA under it) ...
        let c1 = fleet.inner.cluster("c1").unwrap().clone();
        assert!(c1.server_config().unwrap().is_some());
        assert!(has_ca(&fleet, "c1") && !has_ca(&fleet, "c2"));
        // ... and a kubeconfig handed out afterwards names that same CA.
        let text = fleet.kubeconfig("c1").unwrap();
        assert_eq!(text, fleet.kubeconfig("c1").unwrap());
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        let list = namespaces.list(&Default::default()).await.unwrap();
        assert!(
            list.items
                .iter()
                .any(|n| n.metadata.name.as_deref() == Some("default"))
        );
        // Each cluster its own CA; plain-HTTP kubeconfigs need none.
        assert_ne!(text, fleet.kubeconfig("c2").unwrap());
        assert!(has_ca(&fleet, "c2") && !has_ca(&fleet, "c3"));
        fleet.shutdown(Duration::from_secs(1)).await.unwrap();

        let plain = Fleet::start(FleetConfig {
            clusters: 1,
            plain_http: true,
            ..FleetConfig::default()
        })
        .await
        .unwrap();
        assert!(
            !plain
                .kubeconfig("c1")
                .unwrap()
                .contains("certificate-authority-data")
        );
        assert!(!has_ca(&plain, "c1"));
        plain.shutdown(Duration::from_secs(1)).await.unwrap();
    }
}
