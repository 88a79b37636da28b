//! ncm's lifecycle routes under `/v2/cluster-providers/{clusterProvider}/clusters/{cluster}`:
//! `POST apply | terminate | stop` (204, as src/ncm/api/schedulerhandler.go) and `GET status`.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use emco_controller_sdk::rest::{ApiError, json_response};
use emco_core::model::StatusQuery;
use http::StatusCode;
use serde::Deserialize;

use crate::Orchestrator;

const CLUSTER: &str = "/v2/cluster-providers/{clusterProvider}/clusters/{cluster}";

/// The cluster a route names.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterPath {
    cluster_provider: String,
    cluster: String,
}

type Answer = Result<Response, ApiError>;

pub(crate) fn routes() -> Router<Orchestrator> {
    Router::new()
        .route(&format!("{CLUSTER}/apply"), post(apply))
        .route(&format!("{CLUSTER}/terminate"), post(terminate))
        .route(&format!("{CLUSTER}/stop"), post(stop))
        .route(&format!("{CLUSTER}/status"), get(status))
}

async fn apply(State(orch): State<Orchestrator>, Path(p): Path<ClusterPath>) -> Answer {
    orch.apply_cluster_networks(&p.cluster_provider, &p.cluster)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn terminate(State(orch): State<Orchestrator>, Path(p): Path<ClusterPath>) -> Answer {
    orch.terminate_cluster_networks(&p.cluster_provider, &p.cluster)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn stop(State(orch): State<Orchestrator>, Path(p): Path<ClusterPath>) -> Answer {
    orch.stop_cluster_networks(&p.cluster_provider, &p.cluster)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn status(
    State(orch): State<Orchestrator>,
    Path(p): Path<ClusterPath>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let query = StatusQuery::for_dig(pairs)?;
    let answer = orch
        .cluster_network_status(&p.cluster_provider, &p.cluster, &query)
        .await?;
    Ok(json_response(StatusCode::OK, &answer))
}
