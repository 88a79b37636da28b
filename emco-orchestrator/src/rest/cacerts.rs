//! ca-certs' lifecycle routes, for a cluster provider's and a project's certificates:
//! `POST .../{caCert}/enrollment|distribution/instantiate|terminate|update` (202, empty, as
//! src/ca-certs/api/cp_certenrollment.go) and `GET .../status`.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use emco_core::Error;
use emco_core::model::StatusQuery;
use emco_rest::json_response;
use http::StatusCode;
use serde::Deserialize;

use super::Answer;
use crate::Orchestrator;
use crate::cacerts::{CertOwner, Lifecycle};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CertPath {
    #[serde(default)]
    cluster_provider: Option<String>,
    #[serde(default)]
    project: Option<String>,
    ca_cert: String,
}

impl CertPath {
    fn owner(&self) -> CertOwner {
        match (&self.cluster_provider, &self.project) {
            (Some(p), _) => CertOwner::Provider(p.clone()),
            (None, Some(p)) => CertOwner::Project(p.clone()),
            (None, None) => CertOwner::Project(String::new()),
        }
    }
}

pub(super) fn routes() -> Router<Orchestrator> {
    let mut router = Router::new();
    for owner in [
        "/v2/cluster-providers/{clusterProvider}",
        "/v2/projects/{project}",
    ] {
        for (segment, lifecycle) in [
            ("enrollment", Lifecycle::Enrollment),
            ("distribution", Lifecycle::Distribution),
        ] {
            let base = format!("{owner}/ca-certs/{{caCert}}/{segment}");
            router = router
                .route(
                    &format!("{base}/instantiate"),
                    post(move |s, p| act(s, p, lifecycle, Act::Instantiate)),
                )
                .route(
                    &format!("{base}/terminate"),
                    post(move |s, p| act(s, p, lifecycle, Act::Terminate)),
                )
                .route(
                    &format!("{base}/update"),
                    post(move |s, p| act(s, p, lifecycle, Act::Update)),
                )
                .route(
                    &format!("{base}/status"),
                    get(move |s, p, q| status(s, p, q, lifecycle)),
                );
        }
    }
    router
}

#[derive(Debug, Clone, Copy)]
enum Act {
    Instantiate,
    Terminate,
    Update,
}

async fn act(
    State(orch): State<Orchestrator>,
    Path(p): Path<CertPath>,
    lifecycle: Lifecycle,
    what: Act,
) -> Answer {
    let (certs, owner) = (orch.ca_certs(), p.owner());
    let name = p.ca_cert.as_str();
    match (lifecycle, what) {
        (Lifecycle::Enrollment, Act::Instantiate) => {
            certs.instantiate_enrollment(&owner, name).await?;
        }
        (Lifecycle::Enrollment, Act::Update) => certs.update_enrollment(&owner, name).await?,
        (Lifecycle::Enrollment, Act::Terminate) => {
            certs.terminate_enrollment(&owner, name).await?;
        }
        (Lifecycle::Distribution, Act::Instantiate) => {
            certs.instantiate_distribution(&owner, name).await?;
        }
        (Lifecycle::Distribution, Act::Update) => {
            certs.update_distribution(&owner, name).await?;
        }
        (Lifecycle::Distribution, Act::Terminate) => {
            certs.terminate_distribution(&owner, name).await?;
        }
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn status(
    State(orch): State<Orchestrator>,
    Path(p): Path<CertPath>,
    Query(pairs): Query<Vec<(String, String)>>,
    lifecycle: Lifecycle,
) -> Answer {
    // ca-certs reads no app filter, and words its refusals in lower case (api/helper.go).
    let pairs = pairs.into_iter().filter(|(k, _)| k != "app" && k != "apps");
    let query = StatusQuery::from_pairs(pairs).map_err(|e| {
        let text = e.message();
        let mut chars = text.chars();
        let lowered = chars
            .next()
            .map(|c| c.to_lowercase().chain(chars).collect::<String>())
            .unwrap_or_default();
        Error::new(e.kind(), lowered)
    })?;
    let answer = orch
        .ca_certs()
        .status(&p.owner(), &p.ca_cert, lifecycle, &query)
        .await?;
    Ok(json_response(StatusCode::OK, &answer))
}
