//! The dashboard at `/ui/`: a page and its script and style, embedded in the binary, and the
//! few read routes the page needs beyond EMCO's REST API, which it uses for everything else
//! (lists, status, and the actions, so an action from the page is the same call emcoctl makes).
//!
//! - `GET /ui/api/fleet?q=&label=&provider=&reach=&offset=&limit=`: clusters of every provider
//!   with their labels and rsync's own view of their reachability, searched, filtered and paged
//!   here so that the page stays light at 10,000 clusters; with the totals for the summary bar.
//! - `GET /ui/api/deployments`: every deployment intent group with its lifecycle state and its
//!   deployed and ready counts, the worst first.
//! - `GET /ui/api/cluster-providers/{p}/clusters/{c}`: one cluster's labels, reachability and
//!   what runs on it (each group's deployed status narrowed to the cluster).
//! - `GET /ui/api/projects/.../deployment-intent-groups/{dig}/stream?status=`: the group's full
//!   status as server-sent events, from the same [`StatusWatch`](emco_orchestrator::StatusWatch)
//!   that feeds StatusNotify: one event at once, then one per change.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use emco_core::model::status::{DigStatus, StatusOutput, StatusQuery, StatusType};
use emco_core::placement::ClusterRef;
use emco_core::{DigRef, Error};
use emco_orchestrator::auth::Principal;
use emco_orchestrator::rest::DIG;
use emco_orchestrator::{Orchestrator, WatchTarget, keys};
use emco_rest::{ApiError, json_response};
use emco_store::ResourceKey;
use futures::StreamExt as _;
use http::{StatusCode, header};
use serde::{Deserialize, Serialize};

use crate::auth::{Authenticator, SESSION_COOKIE};

const INDEX: &str = include_str!("../ui/index.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

/// The most clusters one fleet page holds.
const MAX_PAGE: usize = 500;

/// The dashboard's routes, on the REST port; `auth` checks the tokens of its login.
pub(crate) fn routes(orch: Orchestrator, auth: Authenticator) -> Router {
    let stream = format!("/ui/api{}/stream", DIG.trim_start_matches("/v2"));
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route(
            "/ui/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
        .route("/ui/api/fleet", get(fleet))
        .route("/ui/api/deployments", get(deployments))
        .route(
            "/ui/api/cluster-providers/{clusterProvider}/clusters/{cluster}",
            get(cluster),
        )
        .route(&stream, get(stream_status))
        .route("/ui/api/me", get(me))
        .with_state(orch)
        .merge(
            Router::new()
                .route("/ui/login", post(login))
                .route("/ui/logout", post(logout))
                .with_state(auth),
        )
}

/// Who the caller is, for the page's header (and whether the server is open).
#[derive(Debug, Serialize)]
struct Me {
    subject: String,
    roles: Vec<String>,
    open: bool,
}

impl Me {
    fn of(who: &Principal, auth_open: bool) -> Self {
        Self {
            subject: who.subject().to_owned(),
            roles: who.roles().iter().map(ToString::to_string).collect(),
            open: auth_open,
        }
    }
}

async fn me(Extension(who): Extension<Principal>) -> Response {
    // The open mode's principal is the only one without credentials behind it.
    let open = who == Principal::open();
    json_response(StatusCode::OK, &Me::of(&who, open))
}

#[derive(Debug, Deserialize)]
struct Login {
    token: String,
}

/// The session cookie's attributes: sent only to this server, never to scripts, never with a
/// request another site starts.
const COOKIE_ATTRIBUTES: &str = "Path=/; HttpOnly; SameSite=Strict";

/// `POST /ui/login {"token": ...}`: checks the token and keeps it in an HTTP-only session
/// cookie, which the guard reads when a request carries no Authorization header.
async fn login(
    State(auth): State<Authenticator>,
    body: Result<axum::Json<Login>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(Login { token }) =
        body.map_err(|e| ApiError::with_status(StatusCode::BAD_REQUEST, e.body_text()))?;
    let token = token.trim();
    // A cookie value's characters (RFC 6265); JWTs and sensible static tokens are within.
    if token.is_empty()
        || !token
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b',' | b';' | b'\\'))
    {
        return Err(Error::invalid(
            "the token is empty or has characters a cookie cannot hold (space, quote, comma, \
             semicolon, backslash)",
        )
        .into());
    }
    let who = auth.authenticate(Some(token)).await?;
    let mut resp = json_response(StatusCode::OK, &Me::of(&who, auth.is_open()));
    let cookie = format!("{SESSION_COOKIE}={token}; {COOKIE_ATTRIBUTES}");
    resp.headers_mut().insert(
        header::SET_COOKIE,
        header::HeaderValue::from_str(&cookie).map_err(|_| Error::invalid("bad token"))?,
    );
    Ok(resp)
}

/// `POST /ui/logout`: forgets the session cookie.
async fn logout() -> Response {
    let cookie = format!("{SESSION_COOKIE}=; Max-Age=0; {COOKIE_ATTRIBUTES}");
    (StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response()
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // The assets change with the binary; never serve a stale page after an upgrade.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The fleet query.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FleetQuery {
    /// Part of the provider or cluster name, case-insensitive.
    q: String,
    /// A label the cluster must carry.
    label: String,
    /// The provider the cluster must belong to.
    provider: String,
    /// `reachable`, `unreachable` or `unknown`.
    reach: String,
    offset: usize,
    limit: Option<usize>,
}

/// Whether rsync reached a cluster the last time it tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Reach {
    Reachable,
    Unreachable,
    /// rsync has not talked to it since this server started.
    Unknown,
}

impl Reach {
    fn parse(s: &str) -> Result<Option<Self>, Error> {
        match s {
            "" => Ok(None),
            "reachable" => Ok(Some(Self::Reachable)),
            "unreachable" => Ok(Some(Self::Unreachable)),
            "unknown" => Ok(Some(Self::Unknown)),
            other => Err(Error::invalid(format!(
                "reach must be reachable, unreachable or unknown, not {other:?}"
            ))),
        }
    }
}

/// rsync's own view of a cluster: what its last call or watch there did.
fn reach_of(orch: &Orchestrator, provider: &str, cluster: &str) -> Reach {
    match orch
        .rsync()
        .metrics()
        .reachable
        .get(&[ClusterRef::new(provider, cluster).as_str()])
    {
        Some(v) if v > 0.0 => Reach::Reachable,
        Some(_) => Reach::Unreachable,
        None => Reach::Unknown,
    }
}

#[derive(Debug, Serialize)]
struct FleetCluster {
    provider: String,
    name: String,
    labels: Vec<String>,
    reach: Reach,
}

#[derive(Debug, Default, Serialize)]
struct FleetPage {
    /// All clusters, whatever the filters.
    total: usize,
    reachable: usize,
    unreachable: usize,
    unknown: usize,
    /// Clusters the filters match; `items` is a page of them.
    matched: usize,
    offset: usize,
    providers: Vec<String>,
    labels: BTreeSet<String>,
    items: Vec<FleetCluster>,
}

async fn fleet(
    State(orch): State<Orchestrator>,
    Query(query): Query<FleetQuery>,
) -> Result<Response, ApiError> {
    let reach_filter = Reach::parse(&query.reach)?;
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let needle = query.q.to_lowercase();
    let onboarding = orch.onboarding();
    let mut page = FleetPage {
        offset: query.offset,
        ..FleetPage::default()
    };
    for provider in onboarding
        .cluster_providers()
        .list(&ResourceKey::root(), &[])
        .await?
    {
        let provider = provider.metadata.name;
        for cluster in onboarding.clusters_with_labels(&provider).await? {
            let name = cluster.metadata.name;
            let reach = reach_of(&orch, &provider, &name);
            page.total += 1;
            match reach {
                Reach::Reachable => page.reachable += 1,
                Reach::Unreachable => page.unreachable += 1,
                Reach::Unknown => page.unknown += 1,
            }
            let labels: Vec<String> = cluster
                .labels
                .into_iter()
                .map(|l| l.cluster_label)
                .collect();
            page.labels.extend(labels.iter().cloned());
            let matches = (query.provider.is_empty() || query.provider == provider)
                && (query.label.is_empty() || labels.contains(&query.label))
                && reach_filter.is_none_or(|r| r == reach)
                && (needle.is_empty()
                    || name.to_lowercase().contains(&needle)
                    || provider.to_lowercase().contains(&needle));
            if !matches {
                continue;
            }
            if page.matched >= query.offset && page.items.len() < limit {
                page.items.push(FleetCluster {
                    provider: provider.clone(),
                    name,
                    labels,
                    reach,
                });
            }
            page.matched += 1;
        }
        page.providers.push(provider);
    }
    // A filter's choices read best sorted; the clusters stay in the API's (creation) order.
    page.providers.sort();
    Ok(json_response(StatusCode::OK, &page))
}

/// One deployment intent group on the overview.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Deployment {
    project: String,
    composite_app: String,
    composite_app_version: String,
    name: String,
    /// The last lifecycle action's state (Created, Approved, Instantiated, ...).
    state: String,
    /// The AppContext's status (Instantiating, Instantiated, ...), empty before the first
    /// instantiate.
    status: String,
    ready_status: String,
    deployed_counts: BTreeMap<String, i64>,
    ready_counts: BTreeMap<String, i64>,
    /// 0 when something failed (or the context did: InstantiateFailed, ...), 1 while something
    /// retries or is not ready, 2 otherwise: the order of the list.
    health: u8,
}

/// Every deployment intent group of every project `who` sees, of every composite app.
async fn all_groups(orch: &Orchestrator, who: &Principal) -> Result<Vec<DigRef>, Error> {
    let onboarding = orch.onboarding();
    let mut out = Vec::new();
    for project in onboarding
        .projects()
        .list(&ResourceKey::root(), &[])
        .await?
    {
        let project = project.metadata.name;
        if !who.sees_project(&project) {
            continue;
        }
        for ca in onboarding.list_composite_apps(&project).await? {
            let (name, version) = (ca.metadata.name, ca.spec.composite_app_version);
            for dig in onboarding
                .deployment_intent_groups()
                .list(&keys::composite_app(&project, &name, &version), &[])
                .await?
            {
                out.push(DigRef::new(&project, &name, &version, &dig.metadata.name));
            }
        }
    }
    Ok(out)
}

async fn deployments(
    State(orch): State<Orchestrator>,
    Extension(who): Extension<Principal>,
) -> Result<Response, ApiError> {
    let mut out = Vec::new();
    for dig in all_groups(&orch, &who).await? {
        out.push(summary(&orch, dig).await?);
    }
    out.sort_by(|a, b| {
        (a.health, &a.project, &a.composite_app, &a.name).cmp(&(
            b.health,
            &b.project,
            &b.composite_app,
            &b.name,
        ))
    });
    Ok(json_response(StatusCode::OK, &out))
}

/// One cluster: its labels, rsync's reachability, and what runs on it.
#[derive(Debug, Serialize)]
struct ClusterDetail {
    provider: String,
    name: String,
    labels: Vec<String>,
    reach: Reach,
    /// The groups with resources on this cluster, and those resources' status.
    deployments: Vec<DigStatus>,
}

#[derive(Debug, Deserialize)]
struct ClusterPath {
    #[serde(rename = "clusterProvider")]
    provider: String,
    cluster: String,
}

async fn cluster(
    State(orch): State<Orchestrator>,
    Extension(who): Extension<Principal>,
    Path(path): Path<ClusterPath>,
) -> Result<Response, ApiError> {
    let onboarding = orch.onboarding();
    onboarding
        .clusters()
        .get(&keys::cluster_provider(&path.provider), &path.cluster)
        .await?;
    let labels = onboarding
        .cluster_labels()
        .list(&keys::cluster(&path.provider, &path.cluster), &[])
        .await?
        .into_iter()
        .map(|l| l.cluster_label)
        .collect();
    let query = StatusQuery {
        status: StatusType::Deployed,
        clusters: vec![ClusterRef::new(&path.provider, &path.cluster)],
        ..StatusQuery::default()
    };
    // Only the projects the caller sees: a cluster admin learns nothing of the others.
    let mut deployments = Vec::new();
    for dig in all_groups(&orch, &who).await? {
        let status = orch.status().deployment(&dig, &query).await?.into_full()?;
        if !status.apps.is_empty() {
            deployments.push(status);
        }
    }
    let detail = ClusterDetail {
        reach: reach_of(&orch, &path.provider, &path.cluster),
        provider: path.provider,
        name: path.cluster,
        labels,
        deployments,
    };
    Ok(json_response(StatusCode::OK, &detail))
}

async fn summary(orch: &Orchestrator, dig: DigRef) -> Result<Deployment, Error> {
    let read = |status| {
        let query = StatusQuery {
            status,
            output: StatusOutput::Summary,
            ..StatusQuery::default()
        };
        let dig = &dig;
        async move { orch.status().deployment(dig, &query).await?.into_full() }
    };
    let deployed = read(StatusType::Deployed).await?;
    let ready = read(StatusType::Ready).await?;
    let health = health(&deployed, &ready);
    Ok(Deployment {
        state: deployed
            .states
            .actions
            .last()
            .map(|a| a.state.to_string())
            .unwrap_or_default(),
        status: deployed.totals.deployed_status,
        ready_status: ready.totals.ready_status,
        deployed_counts: deployed.totals.deployed_counts,
        ready_counts: ready.totals.ready_counts,
        health,
        project: dig.project,
        composite_app: dig.composite_app,
        composite_app_version: dig.version,
        name: dig.dig,
    })
}

/// [`Deployment::health`] from a group's deployed and ready summaries.
fn health(deployed: &DigStatus, ready: &DigStatus) -> u8 {
    let any = |counts: &BTreeMap<String, i64>, keys: &[&str]| {
        keys.iter().any(|k| counts.get(*k).is_some_and(|n| *n > 0))
    };
    if any(&deployed.totals.deployed_counts, &["Failed"])
        || deployed.totals.deployed_status.ends_with("Failed")
    {
        0
    } else if any(&deployed.totals.deployed_counts, &["Retrying", "Pending"])
        || any(&ready.totals.ready_counts, &["NotReady", "Unknown"])
    {
        1
    } else {
        2
    }
}

/// The stream's query: `status=deployed|ready` (default ready), as the status route takes it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StreamQuery {
    status: String,
}

async fn stream_status(
    State(orch): State<Orchestrator>,
    Path(dig): Path<DigRef>,
    Query(q): Query<StreamQuery>,
) -> Result<Response, ApiError> {
    let status = match q.status.as_str() {
        "" | "ready" => StatusType::Ready,
        "deployed" => StatusType::Deployed,
        other => {
            return Err(
                Error::invalid(format!("status must be ready or deployed, not {other:?}")).into(),
            );
        }
    };
    let query = StatusQuery {
        status,
        ..StatusQuery::default()
    };
    // Opening the watch reads the status once: a missing group is a 404, not an empty stream.
    let watch = orch.status().watch(WatchTarget::Dig(dig), query).await?;
    let events = watch.into_stream().map(|item| {
        Ok::<_, Infallible>(match item {
            Ok(status) => Event::default()
                .event("status")
                .json_data(&status)
                .unwrap_or_else(|e| Event::default().event("problem").data(e.to_string())),
            // The stream ends after its first error; the page shows it and reconnects.
            Err(e) => Event::default().event("problem").data(e.to_string()),
        })
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(context: &str, deployed: &[(&str, i64)], ready: &[(&str, i64)]) -> DigStatus {
        let counts = |c: &[(&str, i64)]| c.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
        DigStatus {
            totals: emco_core::model::status::StatusTotals {
                deployed_status: context.into(),
                deployed_counts: counts(deployed),
                ready_counts: counts(ready),
                ..Default::default()
            },
            ..DigStatus::default()
        }
    }

    #[test]
    fn health_puts_failures_first_then_work_in_progress() {
        let h = |d: DigStatus| health(&d, &d);
        assert_eq!(
            h(status("Instantiated", &[("Applied", 3)], &[("Ready", 3)])),
            2
        );
        assert_eq!(h(status("", &[], &[])), 2);
        assert_eq!(h(status("Instantiating", &[("Retrying", 1)], &[])), 1);
        assert_eq!(h(status("Instantiating", &[("Pending", 2)], &[])), 1);
        assert_eq!(
            h(status(
                "Instantiated",
                &[("Applied", 1)],
                &[("NotReady", 1)]
            )),
            1
        );
        assert_eq!(h(status("Instantiated", &[("Failed", 1)], &[])), 0);
        // A context that failed counts even when no resource says Failed (a terminate that
        // could not finish, for one).
        for context in ["InstantiateFailed", "TerminateFailed", "UpdateFailed"] {
            assert_eq!(h(status(context, &[("Applied", 1)], &[])), 0, "{context}");
        }
        // Zero counts are no failures.
        assert_eq!(h(status("Instantiated", &[("Failed", 0)], &[])), 2);
    }
}
