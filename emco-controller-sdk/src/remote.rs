//! The AppContext store over gRPC (`proto/emco/ext/appcontext.proto`, our addition to EMCO's
//! services): [`AppContextService`] serves any [`AppContextStore`] (emco-server mounts it when its
//! AppContexts live in the embedded store), and [`RemoteAppContextStore`] is an
//! [`AppContextStore`] that calls it, so an external controller works the same against etcd or
//! against a server on the embedded store.
//!
//! Error kinds travel as gRPC codes (mapped in [`status_of`] and [`error_of`]); a compacted watch
//! start carries the compaction revision in the `emco-compact-revision` metadata so that
//! [`compacted_revision`] works on the client as on a local store.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use emco_core::{Error, Result};
use emco_proto::app_context_store_client::AppContextStoreClient;
use emco_proto::app_context_store_server::{
    AppContextStore as AppContextStoreRpc, AppContextStoreServer,
};
use emco_proto::{
    AcCompare, AcGetRequest, AcGetResponse, AcHealthRequest, AcHealthResponse, AcKeyValue,
    AcListRequest, AcListResponse, AcOp, AcPut, AcTxnRequest, AcTxnResponse, AcWatchEvent,
    AcWatchRequest, ac_compare, ac_op,
};
use emco_store::kv::{Compacted, EventKind, WatchEvent, WatchStream, compacted_revision};
use emco_store::{AppContextStore, Compare, KeyValue, ListOptions, ListPage, Op, Txn, TxnResult};
use futures::{Stream, StreamExt};
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

/// The largest message either side accepts: a whole-context listing can be large.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;

const COMPACT_METADATA: &str = "emco-compact-revision";

/// The gRPC status of an error: its kind as a code, its message kept.
#[must_use]
pub fn status_of(e: &Error) -> Status {
    let mut status = Status::new(emco_core::grpc::code_of(e.kind()), e.to_string());
    if let Some(rev) = compacted_revision(e)
        && let Ok(v) = MetadataValue::try_from(rev.to_string())
    {
        status.metadata_mut().insert(COMPACT_METADATA, v);
    }
    status
}

/// The error of a gRPC status; `requested` is the watch start, to rebuild a compaction error.
#[must_use]
pub fn error_of(status: &Status, requested: u64) -> Error {
    let message = status.message().to_owned();
    let compacted = status
        .metadata()
        .get(COMPACT_METADATA)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(compact_revision) = compacted {
        return Compacted {
            requested,
            compact_revision,
        }
        .into_error();
    }
    let kind = emco_core::grpc::kind_of(status.code());
    Error::new(kind, format!("AppContext service: {message}")).with_source(status.clone())
}

fn kv_to_wire(kv: KeyValue) -> AcKeyValue {
    AcKeyValue {
        key: kv.key,
        value: kv.value.to_vec(),
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
    }
}

fn kv_from_wire(kv: AcKeyValue) -> KeyValue {
    KeyValue {
        key: kv.key,
        value: Bytes::from(kv.value),
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
    }
}

fn txn_from_wire(req: AcTxnRequest) -> std::result::Result<Txn, Status> {
    let mut txn = Txn::new();
    for c in req.compares {
        txn.compares.push(match c.condition {
            Some(ac_compare::Condition::ModRevision(rev)) => Compare::mod_revision(c.key, rev),
            Some(ac_compare::Condition::Exists(true)) => Compare::exists(c.key),
            Some(ac_compare::Condition::Exists(false)) | None => {
                return Err(Status::invalid_argument(format!(
                    "compare on {:?} has no condition",
                    c.key
                )));
            }
        });
    }
    for op in req.ops {
        txn.ops.push(match op.op {
            Some(ac_op::Op::Put(p)) => Op::put(p.key, p.value),
            Some(ac_op::Op::Delete(key)) => Op::delete(key),
            Some(ac_op::Op::DeletePrefix(prefix)) => Op::delete_prefix(prefix),
            None => return Err(Status::invalid_argument("an operation is empty")),
        });
    }
    Ok(txn)
}

fn txn_to_wire(txn: Txn) -> AcTxnRequest {
    AcTxnRequest {
        compares: txn
            .compares
            .into_iter()
            .map(|c| match c {
                Compare::ModRevision { key, mod_revision } => AcCompare {
                    key,
                    condition: Some(ac_compare::Condition::ModRevision(mod_revision)),
                },
                Compare::Exists { key } => AcCompare {
                    key,
                    condition: Some(ac_compare::Condition::Exists(true)),
                },
            })
            .collect(),
        ops: txn
            .ops
            .into_iter()
            .map(|op| AcOp {
                op: Some(match op {
                    Op::Put { key, value } => ac_op::Op::Put(AcPut {
                        key,
                        value: value.to_vec(),
                    }),
                    Op::Delete { key } => ac_op::Op::Delete(key),
                    Op::DeletePrefix { prefix } => ac_op::Op::DeletePrefix(prefix),
                }),
            })
            .collect(),
    }
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn to_u64(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Serves an [`AppContextStore`] over gRPC.
#[derive(Debug, Clone)]
pub struct AppContextService {
    store: Arc<dyn AppContextStore>,
}

impl AppContextService {
    /// The service over `store`, ready to mount on a tonic server.
    #[must_use]
    pub fn server(store: Arc<dyn AppContextStore>) -> AppContextStoreServer<Self> {
        AppContextStoreServer::new(Self { store })
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }
}

type EventStream = Pin<Box<dyn Stream<Item = std::result::Result<AcWatchEvent, Status>> + Send>>;

#[tonic::async_trait]
impl AppContextStoreRpc for AppContextService {
    async fn get(
        &self,
        request: Request<AcGetRequest>,
    ) -> std::result::Result<Response<AcGetResponse>, Status> {
        let kv = self
            .store
            .get(&request.into_inner().key)
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(AcGetResponse {
            kv: kv.map(kv_to_wire),
        }))
    }

    async fn list(
        &self,
        request: Request<AcListRequest>,
    ) -> std::result::Result<Response<AcListResponse>, Status> {
        let req = request.into_inner();
        let options = ListOptions {
            limit: req.limit.map(to_usize),
            start_after: req.start_after,
            keys_only: req.keys_only,
        };
        let page = self
            .store
            .list(&req.prefix, options)
            .await
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(AcListResponse {
            kvs: page.kvs.into_iter().map(kv_to_wire).collect(),
            more: page.more,
            revision: page.revision,
        }))
    }

    async fn txn(
        &self,
        request: Request<AcTxnRequest>,
    ) -> std::result::Result<Response<AcTxnResponse>, Status> {
        let txn = txn_from_wire(request.into_inner())?;
        let r = self.store.txn(txn).await.map_err(|e| status_of(&e))?;
        Ok(Response::new(AcTxnResponse {
            succeeded: r.succeeded,
            revision: r.revision,
            deleted: r.deleted,
        }))
    }

    type WatchStream = EventStream;

    async fn watch(
        &self,
        request: Request<AcWatchRequest>,
    ) -> std::result::Result<Response<EventStream>, Status> {
        let req = request.into_inner();
        let events = self
            .store
            .watch(&req.prefix, req.after_revision)
            .await
            .map_err(|e| status_of(&e))?;
        let stream = events.map(|item| {
            item.map(|ev| AcWatchEvent {
                delete: ev.kind == EventKind::Delete,
                key: ev.key,
                value: ev.value.to_vec(),
                mod_revision: ev.mod_revision,
            })
            .map_err(|e| status_of(&e))
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn health(
        &self,
        _request: Request<AcHealthRequest>,
    ) -> std::result::Result<Response<AcHealthResponse>, Status> {
        self.store.health().await.map_err(|e| status_of(&e))?;
        Ok(Response::new(AcHealthResponse {}))
    }
}

/// The environment variable a bearer token for emco-server's gRPC services is read from.
pub const TOKEN_ENV: &str = "EMCO_TOKEN";

/// Sends a bearer token (`authorization` metadata) with every call, when it has one: what an
/// emco-server that requires credentials asks of its gRPC callers (a platform admin's token).
#[derive(Clone, Default)]
pub struct BearerToken(Option<MetadataValue<tonic::metadata::Ascii>>);

// Written out so that the token never lands in a debug print.
impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "BearerToken(<redacted>)"
        } else {
            "BearerToken(None)"
        })
    }
}

impl BearerToken {
    /// No token.
    #[must_use]
    pub fn none() -> Self {
        Self(None)
    }

    /// `token`.
    ///
    /// # Errors
    /// `InvalidArgument` when the token has characters a header cannot carry.
    pub fn new(token: &str) -> Result<Self> {
        let value = MetadataValue::try_from(format!("Bearer {}", token.trim()))
            .map_err(|_| Error::invalid("the token has characters a header cannot carry"))?;
        Ok(Self(Some(value)))
    }

    /// The token of the environment variable [`TOKEN_ENV`], none when it is unset or empty.
    ///
    /// # Errors
    /// As [`BearerToken::new`].
    pub fn from_env() -> Result<Self> {
        match std::env::var(TOKEN_ENV) {
            Ok(t) if !t.trim().is_empty() => Self::new(&t),
            _ => Ok(Self::none()),
        }
    }
}

impl tonic::service::Interceptor for BearerToken {
    fn call(&mut self, mut req: Request<()>) -> std::result::Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            req.metadata_mut().insert("authorization", value.clone());
        }
        Ok(req)
    }
}

/// How a client reaches a server that serves gRPC over TLS (an `https://` URL): the CA
/// certificates to trust (PEM; the system's roots when none) and a client certificate and key
/// (PEM) to authenticate with.
#[derive(Clone, Default)]
pub struct ClientTls {
    /// CA certificates, PEM.
    pub ca_pem: Option<Vec<u8>>,
    /// A client certificate chain and its key, PEM.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

// Written out so that the key never lands in a debug print.
impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca_pem", &self.ca_pem.is_some())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

/// The environment variables [`ClientTls::from_env`] reads: files of the CA, the client
/// certificate and its key.
pub const TLS_ENV: [&str; 3] = ["EMCO_CA_CERT", "EMCO_CLIENT_CERT", "EMCO_CLIENT_KEY"];

impl ClientTls {
    /// The files `EMCO_CA_CERT`, `EMCO_CLIENT_CERT` and `EMCO_CLIENT_KEY` name, when set.
    ///
    /// # Errors
    /// `InvalidArgument` when a named file cannot be read, or only one of the certificate and
    /// the key is given.
    pub fn from_env() -> Result<Self> {
        let read = |var: &str| -> Result<Option<Vec<u8>>> {
            match std::env::var_os(var) {
                None => Ok(None),
                Some(path) => std::fs::read(&path).map(Some).map_err(|e| {
                    Error::invalid(format!("cannot read {var} ({})", path.to_string_lossy()))
                        .with_source(e)
                }),
            }
        };
        let identity = match (read(TLS_ENV[1])?, read(TLS_ENV[2])?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err(Error::invalid(
                    "EMCO_CLIENT_CERT and EMCO_CLIENT_KEY go together",
                ));
            }
        };
        Ok(Self {
            ca_pem: read(TLS_ENV[0])?,
            identity,
        })
    }
}

/// An endpoint for `url`, with `tls` when it is `https://`.
///
/// # Errors
/// `InvalidArgument` for a bad URL or TLS material.
pub fn endpoint(url: &str, tls: &ClientTls) -> Result<Endpoint> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| Error::invalid(format!("bad gRPC URL {url}")).with_source(e))?;
    if !url.starts_with("https://") {
        return Ok(endpoint);
    }
    let mut config = tonic::transport::ClientTlsConfig::new();
    config = match &tls.ca_pem {
        Some(pem) => config.ca_certificate(tonic::transport::Certificate::from_pem(pem)),
        None => config.with_native_roots(),
    };
    if let Some((cert, key)) = &tls.identity {
        config = config.identity(tonic::transport::Identity::from_pem(cert, key));
    }
    endpoint
        .tls_config(config)
        .map_err(|e| Error::invalid(format!("TLS for {url}: {e}")))
}

/// A gRPC channel that sends a [`BearerToken`].
pub type TokenChannel = tonic::service::interceptor::InterceptedService<Channel, BearerToken>;

/// An [`AppContextStore`] served by another process's [`AppContextService`].
#[derive(Debug, Clone)]
pub struct RemoteAppContextStore {
    client: AppContextStoreClient<TokenChannel>,
}

impl RemoteAppContextStore {
    /// A store calling the service at `url` (`http://host:port`, or `https://` with the TLS
    /// files of [`TLS_ENV`]), with the token of [`TOKEN_ENV`] if set; the connection is made on
    /// first use and re-made when it drops.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad URL, token or TLS file.
    pub fn connect_lazy(url: &str) -> Result<Self> {
        Self::connect_lazy_with(url, BearerToken::from_env()?, &ClientTls::from_env()?)
    }

    /// [`RemoteAppContextStore::connect_lazy`] with the token and TLS material given.
    ///
    /// # Errors
    /// `InvalidArgument` for a bad URL or TLS material.
    pub fn connect_lazy_with(url: &str, token: BearerToken, tls: &ClientTls) -> Result<Self> {
        Ok(Self::with_token(endpoint(url, tls)?.connect_lazy(), token))
    }

    /// A store over an existing channel, without a token.
    #[must_use]
    pub fn from_channel(channel: Channel) -> Self {
        Self::with_token(channel, BearerToken::none())
    }

    /// A store over an existing channel sending `token`.
    #[must_use]
    pub fn with_token(channel: Channel, token: BearerToken) -> Self {
        Self {
            client: AppContextStoreClient::with_interceptor(channel, token)
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
        }
    }
}

#[async_trait]
impl AppContextStore for RemoteAppContextStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let resp = self
            .client
            .clone()
            .get(AcGetRequest {
                key: key.to_owned(),
            })
            .await
            .map_err(|s| error_of(&s, 0))?;
        Ok(resp.into_inner().kv.map(kv_from_wire))
    }

    async fn list(&self, prefix: &str, options: ListOptions) -> Result<ListPage> {
        let resp = self
            .client
            .clone()
            .list(AcListRequest {
                prefix: prefix.to_owned(),
                limit: options.limit.map(to_u64),
                start_after: options.start_after,
                keys_only: options.keys_only,
            })
            .await
            .map_err(|s| error_of(&s, 0))?
            .into_inner();
        Ok(ListPage {
            kvs: resp.kvs.into_iter().map(kv_from_wire).collect(),
            more: resp.more,
            revision: resp.revision,
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult> {
        // Checked here too, so a bad transaction fails the same way without a round trip.
        txn.validate()?;
        let resp = self
            .client
            .clone()
            .txn(txn_to_wire(txn))
            .await
            .map_err(|s| error_of(&s, 0))?
            .into_inner();
        Ok(TxnResult {
            succeeded: resp.succeeded,
            revision: resp.revision,
            deleted: resp.deleted,
        })
    }

    async fn watch(&self, prefix: &str, after_revision: u64) -> Result<WatchStream> {
        let stream = self
            .client
            .clone()
            .watch(AcWatchRequest {
                prefix: prefix.to_owned(),
                after_revision,
            })
            .await
            .map_err(|s| error_of(&s, after_revision))?
            .into_inner();
        let events = stream.map(move |item| {
            item.map(|ev| WatchEvent {
                kind: if ev.delete {
                    EventKind::Delete
                } else {
                    EventKind::Put
                },
                key: ev.key,
                value: Bytes::from(ev.value),
                mod_revision: ev.mod_revision,
            })
            .map_err(|s| error_of(&s, after_revision))
        });
        Ok(Box::pin(events))
    }

    async fn health(&self) -> Result<()> {
        self.client
            .clone()
            .health(AcHealthRequest {})
            .await
            .map(drop)
            .map_err(|s| error_of(&s, 0))
    }
}
