//! The lifecycle routes of deployment intent groups under `DIG`: `POST approve | instantiate |
//! terminate | stop | update | rollback | migrate` (202; `update` answers the new revision) and
//! `GET status` (src/orchestrator/api/instantiation_handler.go); ours: `GET rollout` and
//! `POST rollout/approve | pause | resume | abort` (202) for a group rolled out in waves, and
//! `GET preview` (what an instantiate or update would do, writing nothing).

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use emco_core::DigRef;
use emco_core::model::status::StatusQuery;
use emco_rest::{EmcoJson, json_response};
use http::StatusCode;

use super::{Answer, DIG};
use crate::{MigrateIntent, Orchestrator, PreviewOptions, RollbackIntent, RolloutControl};

pub(super) fn routes() -> Router<Orchestrator> {
    Router::new()
        .route(&format!("{DIG}/approve"), post(approve))
        .route(&format!("{DIG}/instantiate"), post(instantiate))
        .route(&format!("{DIG}/terminate"), post(terminate))
        .route(&format!("{DIG}/stop"), post(stop))
        .route(&format!("{DIG}/update"), post(update))
        .route(&format!("{DIG}/rollback"), post(rollback))
        .route(&format!("{DIG}/migrate"), post(migrate))
        .route(&format!("{DIG}/status"), get(status))
        .route(&format!("{DIG}/preview"), get(preview))
        .route(&format!("{DIG}/rollout"), get(rollout))
        .route(
            &format!("{DIG}/rollout/approve"),
            post(|s, p| control(s, p, RolloutControl::Approve)),
        )
        .route(
            &format!("{DIG}/rollout/pause"),
            post(|s, p| control(s, p, RolloutControl::Pause)),
        )
        .route(
            &format!("{DIG}/rollout/resume"),
            post(|s, p| control(s, p, RolloutControl::Resume)),
        )
        .route(
            &format!("{DIG}/rollout/abort"),
            post(|s, p| control(s, p, RolloutControl::Abort)),
        )
}

async fn preview(
    State(orch): State<Orchestrator>,
    Path(dig): Path<DigRef>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let options = PreviewOptions::from_pairs(&pairs)?;
    let preview = orch.deployments().preview(&dig, &options).await?;
    Ok(json_response(StatusCode::OK, &preview))
}

async fn rollout(State(orch): State<Orchestrator>, Path(dig): Path<DigRef>) -> Answer {
    let run = orch.deployments().rollout(&dig).await?;
    Ok(json_response(StatusCode::OK, &run))
}

async fn control(
    State(orch): State<Orchestrator>,
    Path(dig): Path<DigRef>,
    control: RolloutControl,
) -> Answer {
    orch.deployments().control_rollout(&dig, control).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn approve(State(orch): State<Orchestrator>, Path(dig): Path<DigRef>) -> Answer {
    orch.deployments().approve(&dig).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn instantiate(State(orch): State<Orchestrator>, Path(dig): Path<DigRef>) -> Answer {
    orch.deployments().instantiate(&dig).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn terminate(State(orch): State<Orchestrator>, Path(dig): Path<DigRef>) -> Answer {
    orch.deployments().terminate(&dig).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn stop(State(orch): State<Orchestrator>, Path(dig): Path<DigRef>) -> Answer {
    orch.deployments().stop(&dig).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn update(State(orch): State<Orchestrator>, Path(dig): Path<DigRef>) -> Answer {
    let revision = orch.deployments().update(&dig).await?;
    Ok((StatusCode::ACCEPTED, revision.to_string()).into_response())
}

async fn rollback(
    State(orch): State<Orchestrator>,
    Path(dig): Path<DigRef>,
    EmcoJson(body): EmcoJson<RollbackIntent>,
) -> Answer {
    orch.deployments()
        .rollback(&dig, body.spec.revision)
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn migrate(
    State(orch): State<Orchestrator>,
    Path(dig): Path<DigRef>,
    EmcoJson(body): EmcoJson<MigrateIntent>,
) -> Answer {
    orch.deployments().migrate(&dig, &body).await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn status(
    State(orch): State<Orchestrator>,
    Path(dig): Path<DigRef>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let query = StatusQuery::for_dig(pairs)?;
    let answer = orch.status().deployment(&dig, &query).await?;
    Ok(json_response(StatusCode::OK, &answer))
}
