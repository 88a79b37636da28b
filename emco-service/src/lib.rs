//! # emco-service
//!
//! The EMCO service as a library: a thin composition of `emco-orchestrator` and its run-time
//! parts. The binary `emco-server` serves it; emco-py embeds it in a Python process (the same
//! stores, controllers, routes and authorization rules, without a socket).
//!
//! - REST (axum, default `127.0.0.1:9015`, EMCO's orchestrator port): EMCO's REST API v2 from
//!   `emco_orchestrator::rest::router`, the intent routes of the built-in controllers (gac, hpa,
//!   dtc, ovnaction, sfc) and of the workflow services, `/healthz`, `/readyz`, Prometheus
//!   `/metrics`, the OpenAPI document at `/v2/openapi.yaml` ([`OPENAPI`]: every route of the
//!   REST API, each operation with an operationId) and the dashboard at `/ui/` (its page
//!   embedded).
//! - gRPC (tonic, default `127.0.0.1:9016`): the AppContext store service of the controller SDK
//!   (so a controller in another process reaches AppContexts kept in the embedded store), rsync's
//!   EMCO services (`installapp`, `updateapp`, `readyNotify`), the orchestrator's `StatusNotify`
//!   and the standard gRPC health service.
//! - Stores: resources in the embedded redb file (default), memory or MongoDB; AppContexts in the
//!   same redb file (default), memory or etcd. A fresh machine needs no external service.
//! - Controllers: gac, hpa and dtc (with its sub-controller nps) run in-process under the names
//!   EMCO's files register them with
//!   ([`BUILTIN_CONTROLLERS`]): a `POST /v2/controllers` of `gac` with any host and port still runs
//!   the built-in one, without a network hop (`--builtin-controllers false` calls every registered
//!   controller over gRPC instead). `rsync` registers without a type and is the in-process engine.
//!
//! Configuration comes from a YAML file, flags and the environment (`EMCO_*`, see [`Config`]).
//! [`serve`] runs it all until a shutdown future resolves, then drains; the binary `emco-server`
//! calls it with SIGTERM/SIGINT, after its logs and the open-files limit.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = emco_service::Config::from_args([
//!     "emco-server", "--backend", "memory", "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
//! ])?
//! .ok_or("--help was asked")?;
//! // Serves until the shutdown future resolves (here at once), then drains.
//! tokio::runtime::Runtime::new()?.block_on(emco_service::serve(config, async {}))?;
//! # Ok(()) }
//! ```

mod audit;
mod auth;
mod config;
mod deployer;
mod metrics;
pub mod presence;
pub mod ratelimit;
pub mod tls;
mod ui;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::IntoResponse;
use axum::routing::get;
use emco_appcontext::Stores;
use emco_appcontext::sealed::{Keyring, SealedStore};
use emco_controller_sdk::client::ControllerRegistry;
use emco_controller_sdk::intent::IntentType;
use emco_controller_sdk::remote::AppContextService;
use emco_controller_sdk::{ActionController, PlacementController};
use emco_controllers::dtc::{Dtc, Nps};
use emco_controllers::gac::Gac;
use emco_controllers::hpa::{HpaAction, HpaConsumer, HpaIntent, HpaPlacement, HpaRequirement};
use emco_controllers::its::Its;
use emco_controllers::ovnaction::Ovnaction;
use emco_controllers::sds::Sds;
use emco_controllers::sfc::{Sfc, SfcClient};
use emco_controllers::swc::Swc;
use emco_core::Error;
use emco_orchestrator::{Limits, Orchestrator};
use emco_rest::ApiError;
use emco_rsync::engine::{Backoff, ReplicaConfig};
use emco_store::{AppContextStore, ResourceStore};
use http::{StatusCode, header};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;

pub use audit::Audit;
pub use auth::{Authenticator, GrpcGuard, SESSION_COOKIE, credentials};
pub use config::{Backend, Config, ContextBackend, LogFormat, SECRETS_KEY_ENV, SecretsKeys};
pub use emco_orchestrator::auth::{Principal, Role};
pub use metrics::Metrics;

/// Our OpenAPI 3 description of the routes served.
pub const OPENAPI: &str = include_str!("../openapi.yaml");

/// The name gac is registered under in EMCO's files (`00-controllers.yaml`).
pub const GAC: &str = "gac";
/// The name hpa's placement controller is registered under (EMCO's hpa examples).
pub const HPA_PLACEMENT: &str = "hpa-placement-controller-1";
/// The name hpa's action controller is registered under (EMCO's hpa examples).
pub const HPA_ACTION: &str = "hpa-action-controller-1";
/// The name dtc is registered under in EMCO's files (`prerequisites-common.yaml`).
pub const DTC: &str = "dtc";
/// The name EMCO's files register the network action controller (ovnaction) under.
pub const OVNACTION: &str = "ovnaction";
/// The name dtc's network policy sub-controller is registered under in `/v2/dtc-controllers`.
pub const NPS: &str = "nps";
/// The name dtc's Istio sub-controller is registered under in `/v2/dtc-controllers`.
pub const ITS: &str = "its";
/// The name dtc's SD-EWAN sub-controller is registered under in `/v2/dtc-controllers`.
pub const SWC: &str = "swc";
/// dtc's service discovery sub-controller.
pub const SDS: &str = "sds";
/// The name EMCO's sfc example registers the network chaining controller under.
pub const SFC: &str = "sfc";
/// The name EMCO's sfc example registers the chain client controller under.
pub const SFC_CLIENT: &str = "sfcclient";
/// The name EMCO registers its Temporal action controller (tac) under.
pub const TAC: &str = emco_workflows::tac::TAC;
/// The controllers run in-process by default, by registration name.
pub const BUILTIN_CONTROLLERS: [&str; 8] = [
    GAC,
    HPA_PLACEMENT,
    HPA_ACTION,
    DTC,
    OVNACTION,
    SFC,
    SFC_CLIENT,
    TAC,
];

/// The built-in action controllers by their registration names, dtc calling its sub-controllers
/// in-process.
type Actions = Vec<(&'static str, Arc<dyn ActionController>)>;
/// The built-in placement controllers by their registration names.
type Placements = Vec<(&'static str, Arc<dyn PlacementController>)>;

/// dtc's sub-controllers, by the names `/v2/dtc-controllers` registers them under.
fn dtc_subs() -> Actions {
    vec![
        (NPS, Arc::new(Nps)),
        (ITS, Arc::new(Its)),
        (SWC, Arc::new(Swc)),
        (SDS, Arc::new(Sds::default())),
    ]
}

/// The built-in controllers ([`BUILTIN_CONTROLLERS`]); tac calls workflow clients and Temporal
/// servers within `workflows`.
fn builtin_controllers(workflows: &emco_workflows::Config) -> (Actions, Placements) {
    let dtc = dtc_subs()
        .into_iter()
        .fold(Dtc::new(), |dtc, (name, sub)| dtc.with_sub(name, sub));
    let actions: Actions = vec![
        (GAC, Arc::new(Gac)),
        (DTC, Arc::new(dtc)),
        (HPA_ACTION, Arc::new(HpaAction)),
        (OVNACTION, Arc::new(Ovnaction)),
        (SFC, Arc::new(Sfc)),
        (SFC_CLIENT, Arc::new(SfcClient)),
        (TAC, Arc::new(emco_workflows::Tac::new(workflows.clone()))),
    ];
    let placements: Placements = vec![(
        HPA_PLACEMENT,
        Arc::new(HpaPlacement {
            name: HPA_PLACEMENT.to_owned(),
        }),
    )];
    (actions, placements)
}

/// Serves the built-in controller `name` (or a dtc sub-controller) alone over EMCO's controller
/// gRPC protocol on `config.grpc_listen`, on the orchestrator's stores, until `shutdown`.
///
/// # Errors
/// InvalidArgument for a name that is no built-in controller; as [`open_stores`]; Unavailable
/// when the listener cannot be bound.
pub async fn serve_controller(
    config: &Config,
    name: &str,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let known: Vec<&str> = BUILTIN_CONTROLLERS
        .iter()
        .copied()
        .chain([NPS, ITS, SWC, SDS])
        .collect();
    if !known.contains(&name) {
        return Err(Error::invalid(format!(
            "{name:?} is no built-in controller; one of: {}",
            known.join(", ")
        )));
    }
    let stores = open_stores(config).await?;
    let (mut actions, placements) = builtin_controllers(&config.workflows);
    // Alone, tac is called over gRPC: it cannot hold a context for the orchestrator.
    for (n, c) in &mut actions {
        if *n == TAC {
            *c = Arc::new(emco_workflows::Tac::new(config.workflows.clone()).remote());
        }
    }
    let server = emco_controller_sdk::Server::builder(Arc::clone(&stores.appcontext))
        .name(name)
        .resources(Arc::clone(stores.resources()?))
        .deployer(Arc::new(deployer::RemoteRsync::new(Arc::clone(
            stores.resources()?,
        ))));
    let server = match actions
        .into_iter()
        .chain(dtc_subs())
        .find(|(n, _)| *n == name)
    {
        Some((_, c)) => server.action_arc(c),
        None => match placements.into_iter().find(|(n, _)| *n == name) {
            Some((_, c)) => server.placement_arc(c),
            // Known but neither: the server refuses to start without a controller.
            None => server,
        },
    };
    tracing::info!(controller = name, grpc_listen = %config.grpc_listen, "serving one controller");
    server.serve(config.grpc_listen, shutdown).await
}

fn open_redb(config: &Config) -> Result<emco_store::embedded::Redb, Error> {
    std::fs::create_dir_all(&config.data_dir).map_err(|e| {
        Error::unavailable(format!("cannot create the data dir {:?}", config.data_dir))
            .with_source(e)
    })?;
    emco_store::embedded::RedbBuilder::new()
        .with_path(config.data_dir.join("emco.redb"))
        .with_cache_size(config.store_cache)
        .build()
}

/// The keyring `config` names, `None` when credentials are stored in the clear.
///
/// # Errors
/// InvalidArgument when the keyring cannot be read or parsed.
pub fn secrets_keyring(config: &Config) -> Result<Option<Keyring>, Error> {
    match &config.secrets {
        None => Ok(None),
        Some(SecretsKeys::File(path)) => Keyring::from_file(path).map(Some),
        Some(SecretsKeys::Env) => {
            let text = std::env::var(SECRETS_KEY_ENV).map_err(|_| {
                Error::invalid(format!("{SECRETS_KEY_ENV} is not set or not UTF-8"))
            })?;
            Keyring::parse(&text).map(Some)
        }
    }
}

/// The backend's resource store, its credentials sealed when `config` has secrets keys; what
/// older keys (or none) sealed is sealed again with the current key in the background.
async fn resource_store(
    config: &Config,
    redb: Option<&emco_store::embedded::Redb>,
) -> Result<Arc<dyn ResourceStore>, Error> {
    let store = backend_store(config, redb).await?;
    // Always wrapped: without keys, a credential sealed earlier is refused by its key's name
    // rather than answered as ciphertext.
    let Some(keyring) = secrets_keyring(config)? else {
        tracing::warn!(
            "credentials (cluster kubeconfigs, logical-cloud and CA keys) are stored in the clear: \
             give --secrets-key-file or {SECRETS_KEY_ENV} to seal them"
        );
        return Ok(Arc::new(SealedStore::new(store, None)));
    };
    let sealed = SealedStore::new(store, Some(Arc::new(keyring)));
    let resealing = sealed.clone();
    tokio::spawn(async move {
        match resealing.reseal().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                secrets = n,
                "sealed stored credentials with the current key"
            ),
            Err(e) => tracing::error!(error = %e, "cannot seal stored credentials again"),
        }
    });
    Ok(Arc::new(sealed))
}

async fn backend_store(
    config: &Config,
    redb: Option<&emco_store::embedded::Redb>,
) -> Result<Arc<dyn ResourceStore>, Error> {
    Ok(match config.backend {
        Backend::Memory => Arc::new(emco_store::InMemoryResourceStore::new()),
        Backend::Embedded => match redb {
            Some(db) => db.resource_store(),
            None => open_redb(config)?.resource_store(),
        },
        Backend::Mongo => {
            let uri = config
                .mongo_uri
                .clone()
                .ok_or_else(|| Error::invalid("the mongo backend needs --mongo-uri"))?;
            Arc::new(
                emco_store::mongo::MongoBuilder::new()
                    .with_uri(uri)
                    .with_database(config.mongo_database.clone())
                    .build()
                    .await?,
            )
        }
    })
}

/// Opens the resource store `config` names.
///
/// # Errors
/// Unavailable or Internal when the backend cannot be opened.
pub async fn open_store(config: &Config) -> Result<Arc<dyn ResourceStore>, Error> {
    resource_store(config, None).await
}

/// Opens both stores `config` names; the embedded ones share one redb file,
/// `<data dir>/emco.redb`.
///
/// # Errors
/// Unavailable or Internal when a backend cannot be opened; InvalidArgument for a backend
/// missing its address.
pub async fn open_stores(config: &Config) -> Result<Stores, Error> {
    Ok(open_stores_held(config).await?.0)
}

/// [`open_stores`], and for the embedded ones what tells when their file is let go (to open
/// it again in the same process once the stores' users stopped).
///
/// # Errors
/// As [`open_stores`].
pub async fn open_stores_held(
    config: &Config,
) -> Result<(Stores, Option<emco_store::embedded::FileHold>), Error> {
    let redb = if config.backend == Backend::Embedded
        || config.context_backend == ContextBackend::Embedded
    {
        Some(open_redb(config)?)
    } else {
        None
    };
    let resources = resource_store(config, redb.as_ref()).await?;
    let contexts: Arc<dyn AppContextStore> = match config.context_backend {
        ContextBackend::Memory => Arc::new(emco_store::InMemoryAppContextStore::new()),
        ContextBackend::Embedded => match &redb {
            Some(db) => db.app_context_store(),
            None => open_redb(config)?.app_context_store(),
        },
        ContextBackend::Etcd => Arc::new(
            emco_store::etcd::EtcdBuilder::from_env()
                .with_endpoints(config.etcd_endpoints.clone())
                .with_prefix(config.etcd_prefix.clone())
                .build()
                .await?,
        ),
    };
    let hold = redb.as_ref().map(emco_store::embedded::Redb::hold);
    Ok((Stores::new(contexts).with_resources(resources), hold))
}

/// Builds the orchestrator over `stores` as `config` says: upload limits, rsync tuning, the
/// controller call timeout, and the built-in controllers in-process unless disabled. Call
/// [`Orchestrator::start`] to resume the deployments an earlier process left running.
///
/// # Errors
/// As `OrchestratorBuilder::build`; FailedPrecondition for stores without a resource store.
pub fn orchestrator(config: &Config, stores: Stores) -> Result<Orchestrator, Error> {
    orchestrator_with(config, stores, |registry| registry)
}

/// [`orchestrator`] with more in-process controllers: `more` adds them to the registry after
/// the built-in ones (an embedding program's own controllers, Python ones in emco-py).
///
/// # Errors
/// As [`orchestrator`].
pub fn orchestrator_with(
    config: &Config,
    stores: Stores,
    more: impl FnOnce(ControllerRegistry) -> ControllerRegistry + Send + 'static,
) -> Result<Orchestrator, Error> {
    let builtin = config.builtin_controllers;
    let timeout = config.controller_timeout;
    let workflows = config.workflows.clone();
    let backoff = Backoff {
        max_retries: config.rsync_max_retries,
        max_delay: config.rsync_max_backoff,
        ..Backoff::default()
    };
    let (global, per_cluster) = (config.rsync_concurrency, config.rsync_cluster_concurrency);
    let hook_timeout = config.rsync_hook_timeout;
    let liveness = config.cluster_liveness;
    let replica = config.replica_id.as_ref().map(|id| {
        let replica = ReplicaConfig::new(id.clone(), config.replica_ttl);
        match config.replica_share_from {
            Some(from) => replica.sharing_from(from),
            None => replica,
        }
    });
    let mut builder = Orchestrator::builder(Arc::clone(stores.resources()?));
    if let Some(revisions) = config.revision_history_limit {
        builder = builder.revision_history_limit(revisions);
    }
    builder
        .contexts(stores.appcontext)
        .helm(config.helm)
        .limits(Limits {
            max_archive: config.max_upload,
            ..Limits::default()
        })
        .controllers(move |stores| {
            let mut registry = ControllerRegistry::new(stores.clone()).with_timeout(timeout);
            if !builtin {
                return more(registry);
            }
            let (actions, placements) = builtin_controllers(&workflows);
            for (name, c) in actions {
                registry = registry.with_action(name, c);
            }
            for (name, c) in placements {
                registry = registry.with_placement(name, c);
            }
            more(registry)
        })
        .rsync(move |b| {
            let b = b
                .concurrency(global, per_cluster)
                .backoff(backoff)
                .hook_timeout(hook_timeout)
                .liveness(liveness);
            match replica {
                Some(replica) => b.replica(replica),
                None => b,
            }
        })
        .build()
}

/// The REST routes of the built-in controllers' intents over `store`: gac's
/// `generic-k8s-intents` (with `resources` and `customizations`, files up to `max_file` bytes),
/// dtc's `traffic-group-intents` (and below) and `/v2/dtc-controllers`, hpa's `hpa-intents`
/// (with `hpa-resource-consumers` and `resource-requirements`), ovnaction's
/// `network-controller-intent` (with `workload-intents` and `interfaces`), sfc's
/// `network-chains` (with `links`, `client-selectors` and `provider-networks`) and sfcclient's
/// `sfc-clients`.
pub fn controller_routes(store: &Arc<dyn ResourceStore>, max_file: u64) -> Router {
    emco_controllers::gac::routes(Arc::clone(store), max_file)
        .merge(emco_controllers::dtc::routes(Arc::clone(store)))
        .merge(HpaIntent::routes(Arc::clone(store)))
        .merge(HpaConsumer::routes(Arc::clone(store)))
        .merge(HpaRequirement::routes(Arc::clone(store)))
        .merge(emco_controllers::ovnaction::routes(Arc::clone(store)))
        .merge(emco_controllers::sfc::routes(Arc::clone(store)))
}

fn service_name<S: NamedService>(_: &S) -> &'static str {
    S::NAME
}

/// The gRPC services over `orch`: the AppContext store, `StatusNotify`, rsync's `installapp`,
/// `updateapp` and `readyNotify`, and health, which reports each of them serving; the returned
/// [`GrpcHealth`] lets the caller report them not serving while it drains. Every service but
/// health needs a platform admin's credentials when `auth` is not open.
pub async fn grpc_router(
    orch: &Orchestrator,
    auth: Authenticator,
) -> (
    GrpcHealth,
    tonic::transport::server::Router<
        tower::layer::util::Stack<GrpcGuard, tower::layer::util::Identity>,
    >,
) {
    let (reporter, health) = tonic_health::server::health_reporter();
    let contexts = AppContextService::server(Arc::clone(orch.contexts()));
    let rsync = orch.rsync().grpc_services();
    let notify = orch.status().notify_service();
    let health_of = GrpcHealth {
        reporter,
        services: vec![
            "",
            service_name(&contexts),
            service_name(&notify),
            service_name(&rsync.installapp),
            service_name(&rsync.updateapp),
            service_name(&rsync.ready_notify),
        ],
    };
    health_of
        .set_all(tonic_health::ServingStatus::Serving)
        .await;
    let router = tonic::transport::Server::builder()
        .layer(GrpcGuard(auth))
        .add_service(health)
        .add_service(contexts)
        .add_service(notify)
        .add_service(rsync.installapp)
        .add_service(rsync.updateapp)
        .add_service(rsync.ready_notify);
    (health_of, router)
}

/// The gRPC health of the server's services.
#[derive(Debug, Clone)]
pub struct GrpcHealth {
    reporter: tonic_health::server::HealthReporter,
    services: Vec<&'static str>,
}

impl GrpcHealth {
    /// Reports every service (and the server, `""`) as `status`.
    pub async fn set_all(&self, status: tonic_health::ServingStatus) {
        for name in &self.services {
            self.reporter.set_service_status(name, status).await;
        }
    }
}

#[derive(Clone)]
struct Probe(Arc<dyn ResourceStore>, Arc<dyn AppContextStore>);

/// Ready when both stores answer.
async fn readyz(State(Probe(store, contexts)): State<Probe>) -> Result<&'static str, ApiError> {
    store.health().await?;
    contexts.health().await?;
    Ok("ok\n")
}

/// The body limits, for refusing oversized requests on their announced length.
#[derive(Debug, Clone, Copy)]
struct BodyLimits {
    json: u64,
    upload: u64,
}

/// Answers 413 at once when `Content-Length` exceeds the limit of the request's kind, before
/// any of the body is read (bodies without a length are still cut off by the extractors).
async fn refuse_oversized(
    State(limits): State<BodyLimits>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let headers = req.headers();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().starts_with("multipart/"));
    let limit = if multipart {
        limits.upload
    } else {
        limits.json
    };
    match length {
        Some(n) if n > limit => ApiError::with_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {limit} bytes"),
        )
        .into_response(),
        _ => next.run(req).await,
    }
}

/// The audit records' destination `config` names; the log alone when its file cannot be
/// opened (checked when the configuration was read, so only a file gone since).
fn audit_of(config: &Config) -> Audit {
    let Some(path) = &config.audit_log else {
        return Audit::log_only();
    };
    Audit::to_file(path).unwrap_or_else(|e| {
        tracing::error!(error = %e, "audit records go to the log only");
        Audit::log_only()
    })
}

/// Who callers are as `config` says: open without an auth file. An auth file that cannot be
/// read any more (it was checked when the configuration was read) lets nobody in.
#[must_use]
pub fn authenticator(config: &Config) -> Authenticator {
    let Some(path) = &config.auth_config else {
        return Authenticator::open();
    };
    Authenticator::from_file(path).unwrap_or_else(|e| {
        tracing::error!(error = %e, "every call is refused");
        Authenticator::closed()
    })
}

/// The whole HTTP application: REST v2 with the built-in controllers' intent routes,
/// `/healthz`, `/readyz`, `/metrics`, `/v2/openapi.yaml` and the dashboard `/ui/`, with
/// `config.max_body` as the limit of JSON bodies (uploads have their own limit); callers are
/// authenticated as `config` says.
pub fn app(orch: Orchestrator, config: &Config, metrics: Metrics) -> Router {
    app_with(orch, config, metrics, authenticator(config))
}

/// [`app`] with the authenticator given, so a server shares one (its key cache and token
/// table) between REST and gRPC.
pub fn app_with(
    orch: Orchestrator,
    config: &Config,
    metrics: Metrics,
    auth: Authenticator,
) -> Router {
    let probe = Router::new()
        .route("/readyz", get(readyz))
        .with_state(Probe(Arc::clone(orch.store()), Arc::clone(orch.contexts())));
    let upload_limit = usize::try_from(config.max_upload)
        .unwrap_or(usize::MAX)
        .saturating_add(2 * 1024 * 1024);
    let controllers = controller_routes(orch.store(), config.max_upload)
        .layer(DefaultBodyLimit::max(upload_limit))
        .merge(
            emco_workflows::Workflows::new(Arc::clone(orch.store()), config.workflows.clone())
                .routes(),
        )
        .merge(emco_workflows::Tac::new(config.workflows.clone()).routes(Arc::clone(orch.store())));
    let orch_metrics = orch.clone();
    let dashboard = ui::routes(orch.clone(), auth.clone());
    let guard = axum::middleware::from_fn_with_state(
        auth::Guard {
            auth,
            limit: config
                .rate_limit
                .map(|n| Arc::new(ratelimit::RateLimit::new(n))),
        },
        auth::guard,
    );
    emco_orchestrator::rest::router(orch)
        .merge(controllers)
        // Inside the layers below, so the dashboard's requests count in the HTTP metrics.
        .merge(dashboard)
        .route(
            "/v2/openapi.yaml",
            get(|| async { ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI) }),
        )
        // gorilla/mux's default for a path no route serves: http.NotFound's text.
        .fallback(|| async {
            ApiError::from(Error::not_found("404 page not found")).into_response()
        })
        .layer(axum::middleware::from_fn_with_state(
            metrics.clone(),
            metrics::track,
        ))
        .layer(DefaultBodyLimit::max(config.max_body))
        .layer(axum::middleware::from_fn_with_state(
            BodyLimits {
                json: config.max_body as u64,
                // The multipart framing and metadata come on top of the file.
                upload: config.max_upload.saturating_add(2 * 1024 * 1024),
            },
            refuse_oversized,
        ))
        // Before any body is read; inside the audit, which records who it let in or refused.
        .layer(guard.clone())
        // Outermost: a call refused by a layer above is recorded too.
        .layer(axum::middleware::from_fn_with_state(
            audit_of(config),
            audit::record,
        ))
        .merge(probe)
        .route("/healthz", get(|| async { "ok\n" }))
        .merge(metrics_route(metrics, orch_metrics).layer(guard))
}

/// `/metrics`: the HTTP metrics with rsync's, the controllers', the rollouts' and tac's hooks'.
fn metrics_route(metrics: Metrics, orch: Orchestrator) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let (m, rsync, controllers, rollouts) = (
                metrics.clone(),
                Arc::clone(orch.rsync().metrics()),
                Arc::clone(orch.controller_registry().metrics()),
                Arc::clone(orch.deployments().rollout_metrics()),
            );
            async move {
                let mut families = rsync.families();
                families.extend(controllers.families());
                families.extend(rollouts.families());
                families.extend(emco_workflows::tac::HookMetrics::get().families());
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                    m.render(&families),
                )
            }
        }),
    )
}

/// Resolves when `cancel` is cancelled; an owned future for the servers' shutdown hooks.
fn on_cancel(cancel: &CancellationToken) -> impl Future<Output = ()> + Send + 'static {
    cancel.clone().cancelled_owned()
}

async fn bind(addr: std::net::SocketAddr, what: &str) -> Result<TcpListener, Error> {
    TcpListener::bind(addr).await.map_err(|e| {
        Error::unavailable(format!("cannot listen on {addr} for {what}")).with_source(e)
    })
}

/// Runs the whole server as `config` says until `shutdown` resolves: opens the stores, builds
/// the orchestrator, resumes the deployments an earlier process left running, serves REST and
/// gRPC; then stops accepting, reports gRPC health as not serving, cancels rsync (unfinished
/// events stay queued for the next start) and lets in-flight requests finish for up to
/// `config.drain`.
///
/// # Errors
/// Unavailable when a store cannot be opened or a listener cannot be bound; the servers' errors.
pub async fn serve(config: Config, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
    if let Some(name) = &config.serve_controller {
        return serve_controller(&config, name, shutdown).await;
    }
    let stores = open_stores(&config).await?;
    let cancel = CancellationToken::new();
    // Only a shared AppContext store can have another server on it; an embedded file is held.
    let beating = if config.context_backend == ContextBackend::Etcd {
        let period = config.replica_ttl / 3;
        presence::claim(
            Arc::clone(&stores.appcontext),
            config.replica_id.as_deref(),
            period,
            cancel.child_token(),
        )
        .await?
    } else {
        None
    };
    let orch = orchestrator(&config, stores)?;
    let rest_listener = bind(config.listen, "REST").await?;
    let grpc_listener = bind(config.grpc_listen, "gRPC").await?;
    let engine = cancel.child_token();
    orch.start(engine.clone()).await?;

    let auth = authenticator(&config);
    let reloading = auth.clone();
    tls::recheck_every(&cancel, move || match reloading.reload() {
        Ok(true) => tracing::info!("the auth config was read again"),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "keeping the auth config in use"),
    });
    let app = app_with(orch.clone(), &config, Metrics::new(), auth.clone());
    if auth.is_open() {
        tracing::warn!(
            "NO AUTHENTICATION: anyone who reaches the REST and gRPC ports may do anything, \
             including reading every cluster's kubeconfig; give --auth-config to require \
             credentials"
        );
    }
    let (health, grpc) = grpc_router(&orch, auth).await;
    let rest_addr = rest_listener.local_addr().ok();
    let grpc_addr = grpc_listener.local_addr().ok();
    let (rest_tls, grpc_tls) = match &config.tls {
        Some(files) => (
            Some(tls::acceptor(files, &[b"h2", b"http/1.1"], &cancel)?),
            Some(tls::acceptor(files, &[b"h2"], &cancel)?),
        ),
        None => (None, None),
    };
    let rest_incoming = tls::Incoming::new(rest_listener, rest_tls, &cancel);
    let grpc_incoming = tls::grpc_stream(tls::Incoming::new(grpc_listener, grpc_tls, &cancel));
    let stop = on_cancel(&cancel);
    let mut rest = tokio::spawn(async move {
        // The peer (address and client certificate) for the guard and the audit records.
        axum::serve(
            rest_incoming,
            app.into_make_service_with_connect_info::<tls::Peer>(),
        )
        .with_graceful_shutdown(stop)
        .await
        .map_err(|e| Error::unavailable("the REST server failed").with_source(e))
    });
    let stop = on_cancel(&cancel);
    let mut grpc = tokio::spawn(async move {
        grpc.serve_with_incoming_shutdown(grpc_incoming, stop)
            .await
            .map_err(|e| Error::unavailable("the gRPC server failed").with_source(e))
    });
    tracing::info!(
        listen = ?rest_addr,
        grpc_listen = ?grpc_addr,
        tls = config.tls.is_some(),
        backend = ?config.backend,
        context_backend = ?config.context_backend,
        builtin_controllers = config.builtin_controllers,
        "emco-server ready"
    );

    // A server that fails on its own ends the process too, after the other one drained.
    let ended = tokio::select! {
        () = shutdown => Ended::Signal,
        r = &mut rest => Ended::Rest(r),
        r = &mut grpc => Ended::Grpc(r),
    };
    tracing::info!(drain = ?config.drain, "shutting down");
    health
        .set_all(tonic_health::ServingStatus::NotServing)
        .await;
    cancel.cancel();
    let drain = async move {
        let (r, g) = match ended {
            Ended::Signal => (rest.await, grpc.await),
            Ended::Rest(r) => (r, grpc.await),
            Ended::Grpc(g) => (rest.await, g),
        };
        joined("REST", r).and(joined("gRPC", g))
    };
    // Idle gRPC client connections can hold tonic's graceful shutdown (hyperium/hyper#4170);
    // the drain timeout bounds it.
    match tokio::time::timeout(config.drain, drain).await {
        Ok(result) => result?,
        Err(_) => tracing::warn!("requests still running after the drain timeout; exiting"),
    }
    // A replica hands its work over before the process ends (the others take it at once).
    if tokio::time::timeout(config.replica_ttl, orch.rsync().stopped())
        .await
        .is_err()
    {
        tracing::warn!("this replica's work was not handed over in time");
    }
    // Its heartbeat removed, a server started next need not wait to see this one is gone.
    if let Some(beating) = beating
        && tokio::time::timeout(std::time::Duration::from_secs(5), beating)
            .await
            .is_err()
    {
        tracing::warn!("the server's heartbeat was not removed in time");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Why the servers stopped serving.
enum Ended {
    Signal,
    Rest(Joined),
    Grpc(Joined),
}

type Joined = Result<Result<(), Error>, tokio::task::JoinError>;

fn joined(what: &str, r: Joined) -> Result<(), Error> {
    r.map_err(|e| Error::internal(format!("the {what} server task failed")).with_source(e))?
}
