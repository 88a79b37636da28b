//! # emco-server
//!
//! The reference EMCO server: a thin composition of `emco-orchestrator` behind EMCO's REST API
//! (axum) with health, readiness and Prometheus metrics endpoints and the OpenAPI document at
//! `/v2/openapi.yaml`. Configuration comes from a YAML file, flags and the environment
//! (`EMCO_*`); the embedded store is the default backend so a fresh machine needs no external
//! service. The binary `emco-server` parses the configuration, builds, serves, and drains on
//! SIGTERM/SIGINT.

mod config;
mod metrics;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::IntoResponse;
use axum::routing::get;
use emco_appcontext::ResourceStore;
use emco_controller_sdk::rest::ApiError;
use emco_core::Error;
use emco_orchestrator::Orchestrator;
use http::{StatusCode, header};

pub use config::{Backend, Config, LogFormat};
pub use metrics::Metrics;

/// Our OpenAPI 3 description of the routes served.
pub const OPENAPI: &str = include_str!("../openapi.yaml");

/// Opens the resource store `config` names.
///
/// # Errors
/// Unavailable or Internal when the backend cannot be opened.
pub async fn open_store(config: &Config) -> Result<Arc<dyn ResourceStore>, Error> {
    Ok(match config.backend {
        Backend::Memory => Arc::new(emco_appcontext::InMemoryResourceStore::new()),
        Backend::Embedded => {
            std::fs::create_dir_all(&config.data_dir).map_err(|e| {
                Error::unavailable(format!("cannot create the data dir {:?}", config.data_dir))
                    .with_source(e)
            })?;
            let db = emco_appcontext::embedded::RedbBuilder::new()
                .with_path(config.data_dir.join("emco.redb"))
                .build()?;
            db.resource_store()
        }
        Backend::Mongo => {
            let uri = config
                .mongo_uri
                .clone()
                .ok_or_else(|| Error::invalid("the mongo backend needs --mongo-uri"))?;
            Arc::new(
                emco_appcontext::mongo::MongoBuilder::new()
                    .with_uri(uri)
                    .with_database(config.mongo_database.clone())
                    .build()
                    .await?,
            )
        }
    })
}

#[derive(Clone)]
struct Probe(Arc<dyn ResourceStore>);

async fn readyz(State(Probe(store)): State<Probe>) -> Result<&'static str, ApiError> {
    store.health().await?;
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

/// The whole HTTP application: REST v2, `/healthz`, `/readyz`, `/metrics`, `/v2/openapi.yaml`,
/// with `config.max_body` as the limit of JSON bodies (uploads have their own limit).
pub fn app(orch: Orchestrator, config: &Config, metrics: Metrics) -> Router {
    let probe = Router::new()
        .route("/readyz", get(readyz))
        .with_state(Probe(Arc::clone(orch.store())));
    emco_orchestrator::rest::router(orch)
        .route(
            "/v2/openapi.yaml",
            get(|| async { ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI) }),
        )
        .fallback(|| async { ApiError::from(Error::not_found("no such route")).into_response() })
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
        .merge(probe)
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move {
                    (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        m.render(),
                    )
                }
            }),
        )
}
