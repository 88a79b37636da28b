//! The REST routes of the logical cloud lifecycle, under
//! `/v2/projects/{project}/logical-clouds/{logicalCloud}`: `POST instantiate | terminate | stop |
//! update` (202; `update` answers the new revision), `GET status` and
//! `GET cluster-references/{clusterReference}/kubeconfig` (the YAML text).

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use emco_core::LogicalCloudRef;
use emco_rest::json_response;
use http::{StatusCode, header};
use serde::Deserialize;

use super::{Answer, LC};
use crate::Orchestrator;
use crate::dcm::LogicalCloudStatusQuery;

/// A cluster reference's kubeconfig URL.
#[derive(Debug, Deserialize)]
struct ReferencePath {
    #[serde(flatten)]
    cloud: LogicalCloudRef,
    #[serde(rename = "clusterReference")]
    reference: String,
}

pub(super) fn routes() -> Router<Orchestrator> {
    Router::new()
        .route(&format!("{LC}/instantiate"), post(instantiate))
        .route(&format!("{LC}/terminate"), post(terminate))
        .route(&format!("{LC}/stop"), post(stop))
        .route(&format!("{LC}/update"), post(update))
        .route(&format!("{LC}/status"), get(status))
        .route(
            &format!("{LC}/cluster-references/{{clusterReference}}/kubeconfig"),
            get(kubeconfig),
        )
}

async fn instantiate(State(orch): State<Orchestrator>, Path(lc): Path<LogicalCloudRef>) -> Answer {
    orch.clouds().instantiate(&lc).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn terminate(State(orch): State<Orchestrator>, Path(lc): Path<LogicalCloudRef>) -> Answer {
    orch.clouds().terminate(&lc).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn stop(State(orch): State<Orchestrator>, Path(lc): Path<LogicalCloudRef>) -> Answer {
    orch.clouds().stop(&lc).await?;
    // dcm's stopHandler answers 200 (src/dcm/api/logicalCloudHandler.go).
    Ok(StatusCode::OK.into_response())
}

async fn update(State(orch): State<Orchestrator>, Path(lc): Path<LogicalCloudRef>) -> Answer {
    let revision = orch.clouds().update(&lc).await?;
    Ok(json_response(StatusCode::ACCEPTED, &revision))
}

async fn status(
    State(orch): State<Orchestrator>,
    Path(lc): Path<LogicalCloudRef>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let query = LogicalCloudStatusQuery::from_pairs(pairs)?;
    let answer = orch.status().logical_cloud(&lc, &query).await?;
    Ok(json_response(StatusCode::OK, &answer))
}

async fn kubeconfig(State(orch): State<Orchestrator>, Path(p): Path<ReferencePath>) -> Answer {
    let text = orch.clouds().kubeconfig(&p.cloud, &p.reference).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], text).into_response())
}
