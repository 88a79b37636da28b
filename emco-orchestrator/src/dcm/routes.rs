//! The REST routes of the logical cloud lifecycle, under
//! `/v2/projects/{project}/logical-clouds/{logicalCloud}`: `POST instantiate | terminate | stop |
//! update` (202; `update` answers the new revision), `GET status` and
//! `GET cluster-references/{clusterReference}/kubeconfig` (the YAML text).

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use emco_controller_sdk::rest::{ApiError, json_response};
use emco_core::Error;
use http::{StatusCode, header};

use super::LogicalCloudStatusQuery;
use crate::Orchestrator;

const LC: &str = "/v2/projects/{project}/logical-clouds/{logicalCloud}";

type Params = Path<HashMap<String, String>>;
type Answer = Result<Response, ApiError>;

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

/// The project and logical cloud of the URL.
fn names(p: &HashMap<String, String>) -> Result<(&str, &str), ApiError> {
    let param = |name: &str| {
        p.get(name).map(String::as_str).ok_or_else(|| {
            ApiError::from(Error::invalid(format!("path parameter {name} is missing")))
        })
    };
    Ok((param("project")?, param("logicalCloud")?))
}

async fn instantiate(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let (project, cloud) = names(&p)?;
    orch.instantiate_logical_cloud(project, cloud).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn terminate(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let (project, cloud) = names(&p)?;
    orch.terminate_logical_cloud(project, cloud).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn stop(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let (project, cloud) = names(&p)?;
    orch.stop_logical_cloud(project, cloud).await?;
    // dcm's stopHandler answers 200 (src/dcm/api/logicalCloudHandler.go).
    Ok(StatusCode::OK.into_response())
}

async fn update(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let (project, cloud) = names(&p)?;
    let revision = orch.update_logical_cloud(project, cloud).await?;
    Ok(json_response(StatusCode::ACCEPTED, &revision))
}

async fn status(
    State(orch): State<Orchestrator>,
    Path(p): Params,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let (project, cloud) = names(&p)?;
    let query = LogicalCloudStatusQuery::from_pairs(pairs)?;
    let answer = orch.logical_cloud_status(project, cloud, &query).await?;
    Ok(json_response(StatusCode::OK, &answer))
}

async fn kubeconfig(State(orch): State<Orchestrator>, Path(p): Params) -> Answer {
    let (project, cloud) = names(&p)?;
    let reference = p
        .get("clusterReference")
        .map(String::as_str)
        .unwrap_or_default();
    let text = orch
        .logical_cloud_kubeconfig(project, cloud, reference)
        .await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], text).into_response())
}
