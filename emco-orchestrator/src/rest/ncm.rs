//! ncm's lifecycle routes under `/v2/cluster-providers/{clusterProvider}/clusters/{cluster}`:
//! `POST apply | terminate | stop` (204, as src/ncm/api/schedulerhandler.go) and `GET status`.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use emco_core::model::StatusQuery;
use emco_rest::json_response;
use http::StatusCode;

use super::{Answer, CLUSTERS, ClusterPath};
use crate::Orchestrator;

pub(super) fn routes() -> Router<Orchestrator> {
    let cluster = format!("{CLUSTERS}/{{cluster}}");
    Router::new()
        .route(&format!("{cluster}/apply"), post(apply))
        .route(&format!("{cluster}/terminate"), post(terminate))
        .route(&format!("{cluster}/stop"), post(stop))
        .route(&format!("{cluster}/status"), get(status))
}

async fn apply(State(orch): State<Orchestrator>, Path(p): Path<ClusterPath>) -> Answer {
    orch.cluster_networks().apply(&p.cluster_ref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn terminate(State(orch): State<Orchestrator>, Path(p): Path<ClusterPath>) -> Answer {
    orch.cluster_networks().terminate(&p.cluster_ref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn stop(State(orch): State<Orchestrator>, Path(p): Path<ClusterPath>) -> Answer {
    orch.cluster_networks().stop(&p.cluster_ref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn status(
    State(orch): State<Orchestrator>,
    Path(p): Path<ClusterPath>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let query = StatusQuery::for_dig(pairs)?;
    let answer = orch
        .status()
        .cluster_networks(&p.cluster_ref(), &query)
        .await?;
    Ok(json_response(StatusCode::OK, &answer))
}
