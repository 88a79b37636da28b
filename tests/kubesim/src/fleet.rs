//! The fleet: N simulated clusters in one process, each with its own listener (its own port),
//! CA, serving certificate and bearer token.
//!
//! One listener per cluster is what makes "unreachable" real: a down cluster closes its port and
//! clients see connection refused, while its neighbours keep serving. An idle cluster costs one
//! listening socket, one parked accept task and its (small) store, so 10,000 clusters fit in one
//! process when the file-descriptor limit allows (`ulimit -n` above the cluster count).
//!
//! With [`FleetConfig::shared_port`] every cluster is served on one listener instead, under the
//! path `/clusters/<name>` that its kubeconfig's server URL carries (as multi-cluster proxies
//! do; kubectl and client-go keep a server URL's path), with one CA for the fleet: one
//! descriptor for the whole fleet plus one per open connection. A "refused" cluster then drops
//! the connections its requests come on, and a black-holed one never answers them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustls::ServerConfig;
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::{Cluster, FleetInner};
use crate::fault::{Fault, FaultState, Unreachable};
use crate::store::Store;
use crate::tls::ClusterCa;
use crate::{api, persist};
use emco_core::x509::{CertSubject, cert_subject};

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
    /// Serve every cluster on the one listener `listen`, each under `/clusters/<name>`, with one
    /// CA for the fleet (see the module documentation).
    pub shared_port: bool,
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
            shared_port: false,
        }
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
        let listeners = if config.shared_port {
            vec![
                TcpListener::bind(config.listen)
                    .await
                    .map_err(io_err(format!("cannot listen on {}", config.listen)))?,
            ]
        } else {
            bind_all(config.listen, config.clusters).await?
        };
        let tls_hosts = (!config.plain_http).then(|| tls_hosts(config.listen.ip()));
        // A shared port has one serving certificate, so one CA signs it and every client's.
        let fleet_tls = match (&tls_hosts, config.shared_port) {
            (Some(hosts), true) => {
                let ca = Arc::new(ClusterCa::new("fleet")?);
                let serving = ca.server_config("fleet", hosts)?;
                Some((ca, serving))
            }
            _ => None,
        };
        let cancel = CancellationToken::new();
        let mut clusters = Vec::with_capacity(config.clusters);
        for i in 0..config.clusters {
            let name = format!("c{}", i + 1);
            let listener = &listeners[if config.shared_port { 0 } else { i }];
            let addr = listener
                .local_addr()
                .map_err(io_err(format!("listener of {name}")))?;
            let mut store = Store::default();
            api::seed(&mut store);
            if let Some(dir) = &config.data_dir {
                persist::load(dir, &name, &mut store)?;
                api::restore_custom_types(&mut store);
            }
            let serving = OnceLock::new();
            if let Some((_, config)) = &fleet_tls {
                let _ = serving.set(config.clone());
            }
            clusters.push(Arc::new(Cluster {
                token: format!("{:032x}", rand::random::<u128>()),
                path: if config.shared_port {
                    format!("/clusters/{name}")
                } else {
                    String::new()
                },
                name,
                tls_hosts: tls_hosts.clone(),
                ca: Mutex::new(fleet_tls.as_ref().map(|(ca, _)| ca.clone())),
                serving,
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
        if config.shared_port {
            let listener = listeners
                .into_iter()
                .next()
                .ok_or_else(|| emco_core::Error::internal("the shared listener is missing"))?;
            tasks.spawn(shared_accept_loop(
                inner.clone(),
                listener,
                tasks.clone(),
                cancel.clone(),
            ));
        } else {
            for (cluster, listener) in inner.clusters.iter().zip(listeners) {
                tasks.spawn(accept_loop(cluster.clone(), listener, tasks.clone()));
            }
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

/// Sleeps until `flip` (a flapping fault's next change), forever without one.
async fn until_flip(flip: Option<Instant>) {
    match flip {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
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
        let flip_sleep = until_flip(flip);
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

/// The TLS handshake of a connection with `config`: the stream and who its client certificate
/// authenticates; `None` when the handshake fails or takes over 10 s.
async fn handshake(
    config: Arc<ServerConfig>,
    tcp: TcpStream,
) -> Option<(
    tokio_rustls::server::TlsStream<TcpStream>,
    Option<Arc<CertSubject>>,
)> {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => {
            // The verifier accepted the chain; the subject says who the client is.
            let user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|c| cert_subject(c))
                .map(Arc::new);
            Some((tls, user))
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            None
        }
    }
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
            if let Some((tls, user)) = handshake(config, tcp).await {
                serve_io(cluster, tls, user).await;
            }
        }
        None => serve_io(cluster, tcp, None).await,
    }
}

/// Accepts the connections of every cluster on the shared port.
async fn shared_accept_loop(
    inner: Arc<FleetInner>,
    listener: TcpListener,
    tasks: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            res = listener.accept() => match res {
                Ok((tcp, _)) => {
                    tasks.spawn(serve_shared(inner.clone(), tcp, cancel.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// A path that names no cluster of the fleet, as the API server answers a path it does not serve.
fn not_found() -> hyper::Response<api::Body> {
    api::error_response(&crate::status::ApiError::path_not_found())
}

/// Why a request on the shared port gets no answer: the connection is dropped instead.
#[derive(Debug)]
struct Dropped(&'static str);

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Dropped {}

/// One connection on the shared port: each request goes to the cluster its path names.
async fn serve_shared(inner: Arc<FleetInner>, tcp: TcpStream, cancel: CancellationToken) {
    let _ = tcp.set_nodelay(true);
    // Every cluster carries the fleet's one serving configuration.
    let config = inner
        .clusters
        .first()
        .and_then(|c| c.serving.get().cloned());
    match config {
        Some(config) => {
            if let Some((tls, user)) = handshake(config, tcp).await {
                serve_shared_io(inner, tls, user, cancel).await;
            }
        }
        None => serve_shared_io(inner, tcp, None, cancel).await,
    }
}

async fn serve_shared_io<IO>(
    inner: Arc<FleetInner>,
    io: IO,
    user: Option<Arc<CertSubject>>,
    cancel: CancellationToken,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let inner = inner.clone();
        let user = user.clone();
        async move { route_shared(&inner, user.as_deref(), req).await }
    });
    let builder = connection_builder();
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
        }
    }
}

/// Serves a request on the shared port by the cluster its path names, without the prefix; an
/// unreachable cluster's request drops the connection (refused) or waits until the fault
/// changes first (black hole).
async fn route_shared(
    inner: &FleetInner,
    user: Option<&CertSubject>,
    req: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<api::Body>, Dropped> {
    let path = req.uri().path();
    let Some((name, rest)) = path
        .strip_prefix("/clusters/")
        .map(|p| p.split_once('/').map_or((p, ""), |(n, r)| (n, r)))
    else {
        return Ok(not_found());
    };
    let Ok(cluster) = inner.cluster(name) else {
        return Ok(not_found());
    };
    let cluster = cluster.clone();
    match cluster.fault_state().unreachable_at(Instant::now()) {
        None => {}
        Some(Unreachable::Refused) => return Err(Dropped("the cluster refuses connections")),
        Some(Unreachable::BlackHole) => {
            let changed = cluster.fault_changed.notified();
            // A change just before `changed` was made would not wake it: look again.
            if cluster.fault_state().unreachable_at(Instant::now()) != Some(Unreachable::BlackHole)
            {
                return Err(Dropped("the cluster was black-holed"));
            }
            let flip = cluster.fault_state().next_flip(Instant::now());
            let flip_sleep = until_flip(flip);
            tokio::select! {
                () = changed => {}
                () = flip_sleep => {}
                () = cluster.shutdown.cancelled() => {}
            }
            // A black hole never answers: the connection goes once the fault changes.
            return Err(Dropped("the cluster was black-holed"));
        }
    }
    let rest = format!("/{rest}");
    let (mut parts, body) = req.into_parts();
    let uri = match parts.uri.query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest,
    };
    parts.uri = match uri.parse() {
        Ok(u) => u,
        Err(_) => return Ok(not_found()),
    };
    Ok(api::serve(cluster, user, hyper::Request::from_parts(parts, body)).await)
}

/// How a connection is served: HTTP/1.1, or HTTP/2 when the client offers it, with
/// kube-apiserver's limit of 100 concurrent streams a connection (v1.32's SETTINGS).
fn connection_builder() -> hyper_util::server::conn::auto::Builder<TokioExecutor> {
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http2().max_concurrent_streams(100);
    builder
}

/// Serves the requests of one connection; `user` is who its client certificate authenticates.
async fn serve_io<IO>(cluster: Arc<Cluster>, io: IO, user: Option<Arc<CertSubject>>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let c = cluster.clone();
    let svc = service_fn(move |req| {
        let c = c.clone();
        let user = user.clone();
        async move { Ok::<_, std::convert::Infallible>(api::serve(c, user.as_deref(), req).await) }
    });
    let builder = connection_builder();
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
        let flip_sleep = until_flip(flip);
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

    /// One request over plain HTTP/1.1 on a fresh connection; the status code.
    async fn status_of(addr: SocketAddr, path: &str) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nhost: kubesim\r\nconnection: close\r\n\r\n");
        tcp.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        tcp.read_to_string(&mut out).await.unwrap();
        out.split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn a_shared_port_serves_each_cluster_under_its_path() {
        let fleet = Fleet::start(FleetConfig {
            clusters: 2,
            plain_http: true,
            shared_port: true,
            ..FleetConfig::default()
        })
        .await
        .unwrap();
        let c1 = fleet.inner.cluster("c1").unwrap().clone();
        let c2 = fleet.inner.cluster("c2").unwrap().clone();
        assert_eq!(c1.addr, c2.addr);
        assert_eq!(
            fleet.server_url("c2").unwrap(),
            format!("http://{}/clusters/c2", c2.addr)
        );
        // The rest of a path is the cluster's own: /version needs no token, /api does.
        assert_eq!(status_of(c1.addr, "/clusters/c1/healthz").await, 200);
        assert_eq!(status_of(c1.addr, "/clusters/c2/version").await, 200);
        assert_eq!(status_of(c1.addr, "/clusters/c1/api").await, 401);
        assert_eq!(status_of(c1.addr, "/clusters/c9/api").await, 404);
        assert_eq!(status_of(c1.addr, "/api").await, 404);
        // A refused cluster drops the connection without an answer; its neighbour answers.
        fleet.set_fault("c2", Fault::down()).unwrap();
        assert_eq!(status_of(c1.addr, "/clusters/c2/healthz").await, 0);
        assert_eq!(status_of(c1.addr, "/clusters/c1/healthz").await, 200);
        fleet.shutdown(Duration::from_secs(1)).await.unwrap();
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
