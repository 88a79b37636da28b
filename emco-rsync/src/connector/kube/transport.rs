//! The connections under every cluster's client: HTTP/2 where the API server speaks it (as
//! kube-apiserver does, and as Kubernetes' own clients use it), with every request and watch to
//! a server multiplexed over as few connections as the server's stream limit allows, and a
//! process-wide budget of descriptors for them.
//!
//! - Over HTTP/1.1 each watch holds a connection for as long as it runs, so descriptors grew
//!   with clusters x kinds: 10,000 clusters with a three-kind app exhausted a 20,000-descriptor
//!   limit and the server could no longer apply, nor accept a REST client. Over HTTP/2 a cluster
//!   costs one connection whatever its kinds; clusters behind one address (a gateway, a
//!   multi-cluster proxy, kubesim's shared port) share connections, [`MAX_STREAMS`] streams each.
//! - A server that does not offer HTTP/2 in its TLS handshake (or plain HTTP) is reached over
//!   pooled HTTP/1.1 connections, as before.
//! - Every connection, of either kind, holds a permit of the [`Budget`]: the descriptors the
//!   process may open less a reserve for its listeners, stores and REST clients. When the budget
//!   is spent a new connection waits for one to close, said in the log and in the metrics
//!   (`emco_cluster_connection_waits_total`, `emco_cluster_connections_waiting`): clusters wait,
//!   REST clients are never refused for lack of a descriptor.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ::kube::client::Body;
use ::kube::{Client, Config};
use bytes::Bytes;
use emco_runtime::metrics::{Counter, Family, Gauge};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::BoxError;

/// How long a connection with no request or watch on it stays open.
const IDLE_CONNECTION: Duration = Duration::from_secs(20);

/// Streams one HTTP/2 connection carries at most: kube-apiserver's own limit (v1.32 announces
/// `SETTINGS_MAX_CONCURRENT_STREAMS` 100). Past the server's limit a request would queue behind
/// watches that never end, so a connection that is full takes no more and another one opens.
pub const MAX_STREAMS: usize = 100;

/// How long the TLS and HTTP/2 handshakes of a new connection may take: a peer that accepts
/// and never answers must not hold up its address's other requests.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Pings on a connection this long quiet tell a dead peer (a cluster gone without a FIN) from
/// a slow one; no answer within [`PING_TIMEOUT`] closes it, and its watches start again.
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Descriptors kept out of the budget: at least this many, or a fifth of the limit.
const MIN_RESERVE: u64 = 512;

/// The connections clusters may hold, process-wide (descriptors are a process's).
#[derive(Debug)]
pub struct Budget {
    permits: Arc<Semaphore>,
    limit: usize,
    open: Gauge,
    limit_gauge: Gauge,
    waiting: Gauge,
    waits: Counter,
    /// When the last "waiting" warning was logged: once a minute at most.
    warned: Mutex<Option<Instant>>,
}

impl Budget {
    /// A budget of `limit` connections.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        let limit_gauge = Gauge::new(
            "emco_cluster_connections_limit",
            "Connections to clusters the process may hold (its descriptor limit less a reserve).",
            &[],
        );
        #[allow(clippy::cast_precision_loss)] // far below 2^52
        limit_gauge.set(&[], limit as f64);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
            open: Gauge::new(
                "emco_cluster_connections",
                "Open connections to clusters.",
                &[],
            ),
            limit_gauge,
            waiting: Gauge::new(
                "emco_cluster_connections_waiting",
                "New connections to clusters waiting for a descriptor now.",
                &[],
            ),
            waits: Counter::new(
                "emco_cluster_connection_waits_total",
                "New connections to clusters that had to wait for a descriptor.",
                &[],
            ),
            warned: Mutex::new(None),
        }
    }

    /// The budget for a process allowed `soft` descriptors (None: unlimited).
    #[must_use]
    pub fn for_limit(soft: Option<u64>) -> Self {
        let limit = soft.map_or(Semaphore::MAX_PERMITS as u64, |soft| {
            soft.saturating_sub(MIN_RESERVE.max(soft / 5)).max(1)
        });
        Self::new(usize::try_from(limit).unwrap_or(Semaphore::MAX_PERMITS))
    }

    /// The process's budget, sized by its open-files limit when first used (the server raises
    /// that limit before it builds any client).
    pub fn process() -> &'static Arc<Self> {
        static BUDGET: LazyLock<Arc<Budget>> =
            LazyLock::new(|| Arc::new(Budget::for_limit(emco_runtime::os::open_files_limit().0)));
        &BUDGET
    }

    /// Connections this budget allows.
    #[must_use]
    pub const fn limit(&self) -> usize {
        self.limit
    }

    /// Connections open now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.limit - self.permits.available_permits()
    }

    /// The metric families of the budget.
    #[must_use]
    pub fn families(&self) -> [&dyn Family; 4] {
        #[allow(clippy::cast_precision_loss)] // far below 2^52
        self.open.set(&[], self.open() as f64);
        [&self.open, &self.limit_gauge, &self.waiting, &self.waits]
    }

    /// A permit for one connection, waiting for one to close when none is left.
    async fn acquire(&self) -> OwnedSemaphorePermit {
        if let Ok(p) = Arc::clone(&self.permits).try_acquire_owned() {
            return p;
        }
        self.waits.inc(&[]);
        // Lowered however the wait ends: a request whose timeout drops it while it waits too.
        struct Waiting<'a>(&'a Gauge);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.add(&[], -1.0);
            }
        }
        self.waiting.add(&[], 1.0);
        let _waiting = Waiting(&self.waiting);
        {
            let mut warned = lock(&self.warned);
            if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                *warned = Some(Instant::now());
                tracing::warn!(
                    limit = self.limit,
                    waiting = self.waiting.get(&[]).unwrap_or_default(),
                    "every descriptor for cluster connections is in use: new connections wait \
                     for one to close (raise the open-files limit to reach more clusters at once)"
                );
            }
        }
        let permit = Arc::clone(&self.permits).acquire_owned().await;
        // The semaphore is never closed.
        permit.unwrap_or_else(|_| unreachable!("the connection budget is never closed"))
    }
}

/// A TCP connector whose connections each hold a permit of the [`Budget`].
#[derive(Debug, Clone)]
struct Budgeted {
    http: HttpConnector,
    budget: Arc<Budget>,
}

impl tower::Service<Uri> for Budgeted {
    type Response = Held;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Held, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let mut http = self.http.clone();
        let budget = Arc::clone(&self.budget);
        Box::pin(async move {
            let permit = budget.acquire().await;
            let io = tower::Service::call(&mut http, uri).await?;
            Ok(Held {
                io,
                _permit: permit,
            })
        })
    }
}

/// A TCP connection and its permit, given back when it closes.
#[derive(Debug)]
struct Held {
    io: TokioIo<TcpStream>,
    _permit: OwnedSemaphorePermit,
}

impl hyper::rt::Read for Held {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Held {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connection for Held {
    fn connected(&self) -> Connected {
        self.io.connected()
    }
}

type Https = HttpsConnector<Budgeted>;
type Io = MaybeHttpsStream<Held>;

/// One HTTP/2 connection and the streams open on it.
#[derive(Debug)]
struct Conn {
    send: hyper::client::conn::http2::SendRequest<Body>,
    streams: AtomicUsize,
    /// When its last stream ended.
    idle_since: Mutex<Instant>,
}

impl Conn {
    /// A stream on this connection if it has room.
    fn slot(self: &Arc<Self>) -> Option<Slot> {
        if self.send.is_closed() {
            return None;
        }
        self.streams
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_STREAMS).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(self)))
    }

    fn idle_for(&self) -> Option<Duration> {
        (self.streams.load(Ordering::Acquire) == 0).then(|| lock(&self.idle_since).elapsed())
    }
}

/// One stream of a connection, held until its answer's body ends or is dropped.
#[derive(Debug)]
struct Slot(Arc<Conn>);

impl Drop for Slot {
    fn drop(&mut self) {
        if self.0.streams.fetch_sub(1, Ordering::AcqRel) == 1 {
            *lock(&self.0.idle_since) = Instant::now();
        }
    }
}

/// The connections to one address (scheme and authority).
#[derive(Debug, Default)]
struct Host {
    conns: Mutex<Vec<Arc<Conn>>>,
    /// Held while a connection opens, so that requests arriving together share it.
    opening: tokio::sync::Mutex<()>,
    /// The server answered the TLS handshake without HTTP/2.
    http1: AtomicBool,
}

impl Host {
    /// Takes `conn` off the list: it is closed or closing.
    fn forget(&self, conn: &Arc<Conn>) {
        lock(&self.conns).retain(|other| !Arc::ptr_eq(other, conn));
    }

    fn slot(&self) -> Option<Slot> {
        let conns = lock(&self.conns);
        conns.iter().find_map(Conn::slot)
    }
}

/// A response body that holds its stream's [`Slot`] until it ends.
#[derive(Debug)]
pub struct Answer {
    body: Incoming,
    slot: Option<Slot>,
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The connections of the clusters that share TLS settings: HTTP/2 per address where the server
/// offers it, pooled HTTP/1.1 elsewhere.
#[derive(Debug, Clone)]
pub(super) struct Transport(Arc<TransportInner>);

#[derive(Debug)]
struct TransportInner {
    https: Https,
    http1: hyper_util::client::legacy::Client<Https, Body>,
    hosts: Mutex<HashMap<String, Arc<Host>>>,
}

impl Transport {
    /// A transport with `config`'s TLS settings whose connections count against `budget`.
    fn new(config: &Config, budget: Arc<Budget>) -> Result<Self, ::kube::Error> {
        use ::kube::client::ConfigExt as _;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(config.connect_timeout);
        let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config.rustls_client_config()?)
            .https_or_http();
        if let Some(name) = &config.tls_server_name {
            let name = name.clone().try_into().map_err(|e| {
                ::kube::Error::RustlsTls(::kube::client::RustlsTlsError::InvalidServerName(e))
            })?;
            builder =
                builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
        }
        let https = builder
            .enable_all_versions()
            .wrap_connector(Budgeted { http, budget });
        let http1 = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_CONNECTION)
            .pool_timer(TokioTimer::new())
            .build(https.clone());
        Ok(Self(Arc::new(TransportInner {
            https,
            http1,
            hosts: Mutex::default(),
        })))
    }

    fn host(&self, address: &str) -> Arc<Host> {
        let mut hosts = lock(&self.0.hosts);
        Arc::clone(hosts.entry(address.to_owned()).or_default())
    }

    async fn send(self, req: Request<Body>) -> Result<Response<Answer>, BoxError> {
        let address = match (req.uri().scheme_str(), req.uri().authority()) {
            (Some("https"), Some(a)) => Some(a.as_str().to_owned()),
            _ => None,
        };
        let Some(address) = address else {
            return self.send_http1(req).await;
        };
        let host = self.host(&address);
        let mut req = req;
        // A connection its peer closed (a cluster going away cuts them) may take a request
        // before its end is read: the request comes back unsent and goes on a new connection,
        // as hyper's pool retries HTTP/1.1 requests on a closed connection.
        for _ in 0..3 {
            if host.http1.load(Ordering::Acquire) {
                return self.send_http1(req).await;
            }
            let slot = match host.slot() {
                Some(slot) => slot,
                None => {
                    let _opening = host.opening.lock().await;
                    match host.slot() {
                        Some(slot) => slot,
                        None => match self.open(req.uri().clone(), &host, &address).await? {
                            Some(slot) => slot,
                            None => return self.send_http1(req).await,
                        },
                    }
                }
            };
            let mut send = slot.0.send.clone();
            match send.try_send_request(req).await {
                Ok(answer) => {
                    return Ok(answer.map(|body| Answer {
                        body,
                        slot: Some(slot),
                    }));
                }
                Err(mut e) => match e.take_message() {
                    Some(unsent) => {
                        host.forget(&slot.0);
                        req = unsent;
                    }
                    None => return Err(e.into_error().into()),
                },
            }
        }
        Err(
            format!("connecting to {address}: every connection closed before the request went")
                .into(),
        )
    }

    async fn send_http1(&self, req: Request<Body>) -> Result<Response<Answer>, BoxError> {
        let answer = self.0.http1.request(req).await?;
        Ok(answer.map(|body| Answer { body, slot: None }))
    }

    /// Opens a connection to `host`: HTTP/2 when its server offers it (a slot on it), else None
    /// (the host is marked HTTP/1.1 and the handshake's connection dropped).
    async fn open(
        &self,
        uri: Uri,
        host: &Arc<Host>,
        address: &str,
    ) -> Result<Option<Slot>, BoxError> {
        let mut https = self.0.https.clone();
        let handshake = async {
            let io: Io = tower::Service::call(&mut https, uri).await?;
            if !io.connected().is_negotiated_h2() {
                return Ok::<_, BoxError>(None);
            }
            let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .keep_alive_interval(PING_INTERVAL)
                .keep_alive_timeout(PING_TIMEOUT)
                .handshake::<Io, Body>(io)
                .await?;
            Ok(Some((send, connection)))
        };
        let opened = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| {
                format!("connecting to {address}: no handshake within {HANDSHAKE_TIMEOUT:?}")
            })??;
        let Some((send, connection)) = opened else {
            tracing::debug!(%address, "the server does not offer HTTP/2: pooled HTTP/1.1 connections");
            host.http1.store(true, Ordering::Release);
            return Ok(None);
        };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "cluster connection ended");
            }
        });
        let conn = Arc::new(Conn {
            send,
            streams: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
        });
        let slot = conn.slot();
        lock(&host.conns).push(Arc::clone(&conn));
        tokio::spawn(reap(Arc::downgrade(host), Arc::downgrade(&conn)));
        Ok(slot)
    }
}

/// Closes `conn` once it has been idle for [`IDLE_CONNECTION`] (or its peer closed it): it
/// leaves its host's list, and the connection ends with its last handle.
async fn reap(host: Weak<Host>, conn: Weak<Conn>) {
    loop {
        tokio::time::sleep(IDLE_CONNECTION / 2).await;
        let Some(c) = conn.upgrade() else { return };
        let done = c.send.is_closed() || c.idle_for().is_some_and(|idle| idle >= IDLE_CONNECTION);
        if done {
            if let Some(host) = host.upgrade() {
                host.forget(&c);
            }
            return;
        }
    }
}

impl tower::Service<Request<Body>> for Transport {
    type Response = Response<Answer>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Answer>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        Box::pin(self.clone().send(req))
    }
}

/// What makes connections interchangeable between clusters: the same trusted CA, server name
/// and connect timeout, and no client certificate (bearer tokens go per request).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct TransportKey {
    root_cert: Option<Vec<Vec<u8>>>,
    accept_invalid_certs: bool,
    tls_server_name: Option<String>,
    connect_timeout: Option<Duration>,
}

impl TransportKey {
    /// The key of `config`'s connections; None when they are its own: a client certificate
    /// (static or from a plugin), a proxy, or a CA file reread on rotation.
    pub(super) fn of(config: &Config) -> Option<Self> {
        let auth = &config.auth_info;
        let own = config.proxy_url.is_some()
            || config.root_cert_file.is_some()
            || auth.exec.is_some()
            || auth.auth_provider.is_some()
            || auth.client_certificate.is_some()
            || auth.client_certificate_data.is_some()
            || auth.client_key.is_some()
            || auth.client_key_data.is_some();
        (!own).then(|| Self {
            root_cert: config.root_cert.clone(),
            accept_invalid_certs: config.accept_invalid_certs,
            tls_server_name: config.tls_server_name.clone(),
            connect_timeout: config.connect_timeout,
        })
    }
}

/// The transports clusters share. With one CA for many clusters (a fleet behind one proxy or
/// gateway, kubesim's shared port) the fleet's requests share connections instead of a pool per
/// cluster; connections with nothing on them close after [`IDLE_CONNECTION`] either way, so
/// clusters done deploying give their descriptors back.
#[derive(Debug)]
pub(super) struct Transports {
    shared: Mutex<HashMap<TransportKey, Transport>>,
    budget: Arc<Budget>,
}

impl Default for Transports {
    fn default() -> Self {
        Self::with_budget(Arc::clone(Budget::process()))
    }
}

impl Transports {
    pub(super) fn with_budget(budget: Arc<Budget>) -> Self {
        Self {
            shared: Mutex::default(),
            budget,
        }
    }

    /// Transports shared by several clusters now.
    pub(super) fn shared(&self) -> usize {
        lock(&self.shared).len()
    }

    /// A client for `config`: kube's layers (base URL, credentials, headers) over a shared
    /// transport when the key allows, else over one of its own; kube's own client when a proxy
    /// is configured.
    pub(super) fn client(&self, config: Config) -> Result<Client, ::kube::Error> {
        use ::kube::client::ConfigExt as _;
        if config.proxy_url.is_some() {
            return Client::try_from(config);
        }
        let transport = match TransportKey::of(&config) {
            Some(key) => {
                let mut map = lock(&self.shared);
                match map.get(&key) {
                    Some(t) => t.clone(),
                    None => {
                        let t = Transport::new(&config, Arc::clone(&self.budget))?;
                        map.insert(key, t.clone());
                        t
                    }
                }
            }
            None => Transport::new(&config, Arc::clone(&self.budget))?,
        };
        let service = tower::ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(config.auth_layer()?)
            .layer(config.extra_headers_layer()?)
            .service(transport);
        Ok(Client::new(service, config.default_namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_keeps_a_reserve() {
        assert_eq!(Budget::for_limit(Some(20_000)).limit(), 16_000);
        assert_eq!(Budget::for_limit(Some(1_024)).limit(), 512);
        assert_eq!(Budget::for_limit(Some(100)).limit(), 1);
        assert!(Budget::for_limit(None).limit() > 1_000_000);
    }

    #[tokio::test]
    async fn a_spent_budget_makes_connections_wait_and_says_so() {
        let budget = Arc::new(Budget::new(1));
        let first = budget.acquire().await;
        assert_eq!(budget.open(), 1);
        let waiting = tokio::spawn({
            let budget = Arc::clone(&budget);
            async move { budget.acquire().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        assert_eq!(budget.waiting.get(&[]), Some(1.0));
        assert_eq!(budget.waits.get(&[]), 1);
        drop(first);
        let second = waiting.await.unwrap();
        assert_eq!(budget.waiting.get(&[]), Some(0.0));
        assert_eq!(budget.open(), 1);
        drop(second);
        assert_eq!(budget.open(), 0);
        // A wait given up (the request's timeout) leaves the gauge as it found it.
        let held = budget.acquire().await;
        let gave_up = tokio::time::timeout(Duration::from_millis(20), budget.acquire()).await;
        assert!(gave_up.is_err());
        assert_eq!(budget.waiting.get(&[]), Some(0.0));
        assert_eq!(budget.waits.get(&[]), 2);
        drop(held);
        let text = emco_runtime::metrics::render(&budget.families());
        assert!(text.contains("emco_cluster_connections 0"), "{text}");
        assert!(text.contains("emco_cluster_connections_limit 1"), "{text}");
        assert!(
            text.contains("emco_cluster_connection_waits_total 2"),
            "{text}"
        );
    }
}
