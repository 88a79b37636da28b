//! The etcd AppContext store (etcd v3 API via `etcd-client`): what EMCO itself uses, so an EMCO
//! controller written in Go and pointed at the same etcd shares contexts with this crate.
//!
//! ```no_run
//! # async fn f() -> emco_core::Result<()> {
//! let store = emco_store::etcd::EtcdBuilder::new()
//!     .with_endpoints(["http://127.0.0.1:2379"])
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Revisions are etcd's: `mod_revision` per key and the header revision per response. etcd limits
//! a transaction to 128 operations and a request to 1.5 MiB by default; larger transactions fail
//! with `InvalidArgument` (the AppContext writer batches within them).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Result};
use etcd_client::{
    Client, Compare as EtcdCompare, CompareOp, ConnectOptions, DeleteOptions, EventType,
    GetOptions, TxnOp, TxnOpResponse, WatchOptions,
};

use crate::kv::{
    AppContextStore, Compacted, Compare, EventKind, KeyValue, ListOptions, ListPage, Op, Txn,
    TxnResult, WatchEvent, WatchStream, prefix_end,
};

/// Maps an etcd client error onto the error kinds, keeping it as the source.
fn etcd_err(e: etcd_client::Error) -> Error {
    let kind = match &e {
        etcd_client::Error::GRpcStatus(s) => emco_core::grpc::kind_of(s.code()),
        etcd_client::Error::InvalidArgs(_) | etcd_client::Error::InvalidUri(_) => {
            emco_core::ErrorKind::InvalidArgument
        }
        _ => emco_core::ErrorKind::Unavailable,
    };
    Error::new(kind, format!("etcd: {e}")).with_source(e)
}

/// Whether a request only reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Yes,
    No,
}

/// How often a request is made in all, each try after a failure on the next member: a few
/// members down (or without a leader) are passed over, yet etcd down as a whole is still a 503
/// within 2 s (pauses of 25, 50, 100, then 200 ms between).
const RETRIES: usize = 12;

/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Whether a failed request may be made again: it reached no member (tonic's connect error),
/// or it reads and a member could not answer it (etcd's Unavailable: no leader, leader
/// changed). A write a member may have applied is never sent twice.
fn retryable(e: &etcd_client::Error, read: Read) -> bool {
    match e {
        etcd_client::Error::GRpcStatus(s) if unavailable(e) => {
            read == Read::Yes || s.message() == "tcp connect error"
        }
        _ => false,
    }
}

/// Whether the member could not serve a request (down, no leader, cut off).
fn unavailable(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s)
        if emco_core::grpc::kind_of(s.code()) == emco_core::ErrorKind::Unavailable)
}

fn rev(r: i64) -> u64 {
    u64::try_from(r).unwrap_or(0)
}

fn to_i64(r: u64) -> Result<i64> {
    i64::try_from(r).map_err(|_| Error::invalid(format!("revision {r} is out of etcd's range")))
}

fn utf8(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec())
        .map_err(|e| Error::internal("etcd: a key is not UTF-8").with_source(e))
}

/// Builds an [`EtcdAppContextStore`].
#[derive(Debug, Clone, Default)]
pub struct EtcdBuilder {
    endpoints: Vec<String>,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    user: Option<(String, String)>,
    prefix: String,
}

impl EtcdBuilder {
    /// A builder with no endpoints.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder configured from `EMCO_ETCD_ENDPOINTS` (comma-separated URLs) and, when both
    /// are set, `EMCO_ETCD_USERNAME` / `EMCO_ETCD_PASSWORD`.
    #[must_use]
    pub fn from_env() -> Self {
        let endpoints = std::env::var("EMCO_ETCD_ENDPOINTS")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let user = std::env::var("EMCO_ETCD_USERNAME")
            .ok()
            .zip(std::env::var("EMCO_ETCD_PASSWORD").ok());
        Self {
            endpoints,
            user,
            prefix: std::env::var("EMCO_ETCD_PREFIX").unwrap_or_default(),
            ..Self::default()
        }
    }

    /// Keeps every key under `prefix` (like kube-apiserver's `--etcd-prefix`), so that several
    /// installations, or tests, share one etcd without seeing each other's contexts; the store's
    /// users never see the prefix. Default: none (EMCO's own layout at the root).
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The etcd endpoints (`http://host:port`).
    #[must_use]
    pub fn with_endpoints<S: Into<String>>(
        mut self,
        endpoints: impl IntoIterator<Item = S>,
    ) -> Self {
        self.endpoints = endpoints.into_iter().map(Into::into).collect();
        self
    }

    /// How long connecting may take (default 5 s).
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long one request may take (default 30 s; watches are not limited).
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Authenticates as `user`.
    #[must_use]
    pub fn with_user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((user.into(), password.into()));
        self
    }

    /// Connects and checks that etcd answers.
    ///
    /// # Errors
    /// `InvalidArgument` without endpoints; `Unavailable` when etcd cannot be reached.
    pub async fn build(self) -> Result<EtcdAppContextStore> {
        if self.endpoints.is_empty() {
            return Err(Error::invalid("the etcd store needs at least one endpoint"));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout.unwrap_or(Duration::from_secs(5)));
        if let Some((u, p)) = self.user {
            options = options.with_user(u, p);
        }
        // One client per member, as etcd's own client pins one endpoint: a balancer over all
        // sends a share of the requests to a member that is down. Without credentials a client
        // connects when first used; with them it authenticates now, and a member down at start
        // is left out.
        let mut clients = Vec::with_capacity(self.endpoints.len());
        let mut refused = None;
        for endpoint in &self.endpoints {
            match Client::connect([endpoint], Some(options.clone())).await {
                Ok(c) => clients.push(c),
                Err(e) => refused = Some(e),
            }
        }
        if clients.is_empty() {
            return Err(etcd_err(
                refused.unwrap_or(etcd_client::Error::InvalidArgs("no endpoint".into())),
            ));
        }
        let store = EtcdAppContextStore {
            clients: clients.into(),
            pinned: Arc::new(AtomicUsize::new(0)),
            timeout: self.request_timeout.unwrap_or(Duration::from_secs(30)),
            prefix: self.prefix,
        };
        store.health().await?;
        Ok(store)
    }
}

/// The AppContext store on etcd.
#[derive(Clone)]
pub struct EtcdAppContextStore {
    /// One per member; requests go to the pinned one until it fails them.
    clients: Arc<[Client]>,
    pinned: Arc<AtomicUsize>,
    timeout: Duration,
    /// Put before every key on the wire.
    prefix: String,
}

impl std::fmt::Debug for EtcdAppContextStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdAppContextStore")
            .field("timeout", &self.timeout)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl EtcdAppContextStore {
    /// `key` as stored in etcd.
    fn wire(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// A key read from etcd as the store's users know it.
    fn unwire(&self, kv: &etcd_client::KeyValue, keys_only: bool) -> Result<KeyValue> {
        let mut out = to_kv(kv, keys_only)?;
        strip_prefix(&self.prefix, &mut out.key);
        Ok(out)
    }

    /// The pinned member's client, and which it is.
    fn client(&self) -> (usize, &Client) {
        let i = self.pinned.load(Ordering::Relaxed) % self.clients.len();
        (i, &self.clients[i])
    }

    /// Moves on from member `from` after it failed a request (unless another request did).
    fn fail_over(&self, from: usize) {
        let next = (from + 1) % self.clients.len();
        if next != from
            && self
                .pinned
                .compare_exchange(from, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::info!(
                member = next,
                "etcd: a member failed a request: using the next"
            );
        }
    }

    /// A range read from `key` with `options` (a single key without).
    async fn range(
        &self,
        key: String,
        options: Option<GetOptions>,
    ) -> Result<etcd_client::GetResponse> {
        self.timed(Read::Yes, |client| {
            let mut kv = client.kv_client();
            let (key, options) = (key.clone(), options.clone());
            async move { kv.get(key, options).await }
        })
        .await
    }

    /// Runs the request `f` makes with the pinned member's client within the store's timeout.
    /// A request that reached no member (a connection refused: the member is down) is made
    /// again on the next member, as etcd's own client does; a `read` also when the member could
    /// not answer it (no leader during an election, or it is cut off from the others). A few
    /// quick tries: etcd down as a whole is still a prompt 503.
    async fn timed<T, F, Fut>(&self, read: Read, mut f: F) -> Result<T>
    where
        F: FnMut(&Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let attempts = async {
            let mut pause = Duration::from_millis(25);
            for _ in 1..RETRIES {
                let (member, client) = self.client();
                match f(client).await {
                    Err(e) if retryable(&e, read) => {
                        tracing::debug!(error = %e, "etcd: trying again");
                        self.fail_over(member);
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(MAX_PAUSE);
                    }
                    Err(e) => {
                        // A write the member could not take is not made again (it may have
                        // been applied), but the next request goes to another member.
                        if unavailable(&e) {
                            self.fail_over(member);
                        }
                        return Err(e);
                    }
                    done => return done,
                }
            }
            let (member, client) = self.client();
            let last = f(client).await;
            if last.as_ref().is_err_and(unavailable) {
                self.fail_over(member);
            }
            last
        };
        match tokio::time::timeout(self.timeout, attempts).await {
            Ok(r) => r.map_err(etcd_err),
            Err(e) => Err(Error::unavailable("etcd: request timed out").with_source(e)),
        }
    }
}

/// Removes the store's `prefix` from a key read from etcd, in place (nothing to do without one).
fn strip_prefix(prefix: &str, key: &mut String) {
    if key.starts_with(prefix) {
        key.drain(..prefix.len());
    }
}

fn to_kv(kv: &etcd_client::KeyValue, keys_only: bool) -> Result<KeyValue> {
    Ok(KeyValue {
        key: utf8(kv.key())?,
        value: if keys_only {
            Bytes::new()
        } else {
            Bytes::copy_from_slice(kv.value())
        },
        create_revision: rev(kv.create_revision()),
        mod_revision: rev(kv.mod_revision()),
        version: rev(kv.version()),
    })
}

#[async_trait]
impl AppContextStore for EtcdAppContextStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let resp = self.range(self.wire(key), None).await?;
        resp.kvs()
            .first()
            .map(|kv| self.unwire(kv, false))
            .transpose()
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListPage> {
        let start = match options.start_after.as_deref() {
            Some(s) if s >= prefix => self.wire(&format!("{s}\0")),
            _ => self.wire(prefix),
        };
        let mut get = match prefix_end(&self.wire(prefix)) {
            Some(end) => GetOptions::new().with_range(end),
            None => GetOptions::new().with_from_key(),
        };
        if let Some(limit) = options.limit {
            get = get.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        if options.keys_only {
            get = get.with_keys_only();
        }
        let resp = self.range(start, Some(get)).await?;
        let kvs = resp
            .kvs()
            .iter()
            .map(|kv| self.unwire(kv, options.keys_only))
            .collect::<Result<Vec<_>>>()?;
        Ok(ListPage {
            kvs,
            more: resp.more(),
            revision: resp.header().map(|h| rev(h.revision())).unwrap_or(0),
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        txn.validate()?;
        let compares = txn
            .compares
            .iter()
            .map(|c| {
                Ok(match c {
                    Compare::ModRevision { key, mod_revision } => EtcdCompare::mod_revision(
                        self.wire(key),
                        CompareOp::Equal,
                        to_i64(*mod_revision)?,
                    ),
                    Compare::Exists { key } => {
                        EtcdCompare::version(self.wire(key), CompareOp::Greater, 0)
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ops: Vec<TxnOp> = txn
            .ops
            .into_iter()
            .map(|op| match op {
                Op::Put { key, value } => TxnOp::put(self.wire(&key), value.to_vec(), None),
                Op::Delete { key } => TxnOp::delete(self.wire(&key), None),
                Op::DeletePrefix { prefix } => {
                    TxnOp::delete(self.wire(&prefix), Some(DeleteOptions::new().with_prefix()))
                }
            })
            .collect();
        let request = etcd_client::Txn::new().when(compares).and_then(ops);
        let resp = self
            .timed(Read::No, |client| {
                let mut kv = client.kv_client();
                let request = request.clone();
                async move { kv.txn(request).await }
            })
            .await?;
        let deleted = resp
            .op_responses()
            .iter()
            .map(|r| match r {
                TxnOpResponse::Delete(d) => rev(d.deleted()),
                _ => 0,
            })
            .sum();
        Ok(TxnResult {
            succeeded: resp.succeeded(),
            revision: resp.header().map(|h| rev(h.revision())).unwrap_or(0),
            deleted,
        })
    }

    async fn watch(&self, prefix: &str, after_revision: u64) -> Result<WatchStream> {
        let wired = self.wire(prefix);
        let mut options = match prefix_end(&wired) {
            Some(end) => WatchOptions::new().with_range(end),
            None => WatchOptions::new().with_from_key(),
        };
        options = options.with_start_revision(to_i64(after_revision.saturating_add(1))?);
        let stream = self
            .timed(Read::Yes, |client| {
                let mut client = client.watch_client();
                let (wired, options) = (wired.clone(), options.clone());
                async move { client.watch(wired, Some(options)).await }
            })
            .await?;
        let strip = self.prefix.clone();
        let state = (
            stream,
            std::collections::VecDeque::<WatchEvent>::new(),
            false,
            after_revision,
            strip,
        );
        Ok(Box::pin(futures::stream::unfold(
            state,
            |(mut stream, mut pending, done, after, strip)| async move {
                loop {
                    if let Some(e) = pending.pop_front() {
                        return Some((Ok(e), (stream, pending, done, after, strip)));
                    }
                    if done {
                        return None;
                    }
                    // An error ends the stream after it is reported.
                    macro_rules! failed {
                        ($e:expr) => {
                            return Some((Err($e), (stream, pending, true, after, strip)))
                        };
                    }
                    let resp = match stream.message().await {
                        Ok(Some(r)) => r,
                        Ok(None) => return None,
                        Err(e) => failed!(etcd_err(e)),
                    };
                    if resp.canceled() {
                        let e = if resp.compact_revision() > 0 {
                            let compact_revision = rev(resp.compact_revision());
                            Compacted {
                                requested: after,
                                compact_revision,
                            }
                            .into_error()
                        } else {
                            Error::unavailable(format!(
                                "etcd: watch canceled: {}",
                                resp.cancel_reason()
                            ))
                        };
                        failed!(e);
                    }
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let key = match utf8(kv.key()) {
                            Ok(mut k) => {
                                strip_prefix(&strip, &mut k);
                                k
                            }
                            Err(e) => failed!(e),
                        };
                        let (kind, value) = match ev.event_type() {
                            EventType::Put => (EventKind::Put, Bytes::copy_from_slice(kv.value())),
                            EventType::Delete => (EventKind::Delete, Bytes::new()),
                        };
                        pending.push_back(WatchEvent {
                            kind,
                            key,
                            value,
                            mod_revision: rev(kv.mod_revision()),
                        });
                    }
                }
            },
        )))
    }

    async fn health(&self) -> Result<()> {
        self.timed(Read::Yes, |client| {
            let mut m = client.maintenance_client();
            async move { m.status().await }
        })
        .await
        .map(drop)
    }
}
