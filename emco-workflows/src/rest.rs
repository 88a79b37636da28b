//! workflowmgr's routes (src/workflowmgr/api/api.go, workflow_intent.go) under
//! `/v2/.../deployment-intent-groups/{deploymentIntentGroup}/temporal-workflow-intents`:
//!
//! | route | answer |
//! |---|---|
//! | `POST`, `GET`, `GET {name}`, `DELETE {name}` | the intents (no PUT, as EMCO) |
//! | `POST {name}/start` | 204 once the workflow client answered 204 to `/invoke/{client}` |
//! | `GET {name}/status?temporalServer=..&workflowID=..` | what Temporal says of the workflow |
//! | `POST {name}/cancel` | 204 once Temporal accepted the cancel or terminate |
//!
//! workflowmgr answers every failure of its module with a 500 and the error's text; we keep
//! its texts with the status of what happened: 404 for a missing intent or workflow, 409 for a
//! duplicate, 503 for a workflow client or Temporal server that cannot be reached or refuses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query};
use axum::routing::{get, post};
use bytes::Bytes;
use emco_appcontext::collection::Collection;
use emco_controller_sdk::IntentType;
use emco_core::{Error, Result};
use emco_rest::{ApiError, EmcoJson, KeyPattern, RawBody, Routes, item_key, json_response};
use emco_store::ResourceStore;
use http::StatusCode;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde_json::Value;

use crate::model::{
    CancelRequest, CancelSpec, ClientEndpoint, StatusQuery, TemporalSpec, WorkflowIntent,
};
use crate::temporal::{Temporal, Timeouts};
use temporalio_protos::temporal::api::workflowservice::v1::DescribeWorkflowExecutionResponse;

/// The Temporal server to ask by default, and how long outside calls may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The Temporal frontend (`host:port`) a status or cancel that names none asks, and a
    /// tac hook that names none is followed on; `None`: they must name one (as in EMCO).
    pub temporal_server: Option<String>,
    /// Calls to a Temporal server.
    pub temporal: Timeouts,
    /// The POST to a workflow client's `/invoke/{client}`.
    pub invoke: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            temporal_server: None,
            temporal: Timeouts::default(),
            invoke: Duration::from_secs(30),
        }
    }
}

impl Config {
    /// `named`, else the default server, else nothing (empty).
    #[must_use]
    pub fn server<'a>(&'a self, named: &'a str) -> &'a str {
        if named.is_empty() {
            self.temporal_server.as_deref().unwrap_or_default()
        } else {
            named
        }
    }
}

/// workflowmgr's service: its intents in the resource store, the workflow clients it invokes
/// and the Temporal servers it asks.
#[derive(Debug, Clone)]
pub struct Workflows {
    intents: Arc<Collection<WorkflowIntent>>,
    parent: Arc<KeyPattern>,
    config: Arc<Config>,
    invoker: Invoker,
}

/// What `GET .../status` answers (`WfTemporalStatusResponse`): Temporal's messages as JSON
/// with their proto field names, as Go's encoding/json writes workflowmgr's.
#[derive(Debug, Clone, Serialize)]
pub struct StatusAnswer {
    /// The workflow id asked about.
    #[serde(rename = "workflowID")]
    pub workflow_id: String,
    /// The run asked about, when one was named.
    #[serde(rename = "runID", skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    /// `DescribeWorkflowExecution`'s answer (Go writes the zero value when not asked).
    #[serde(rename = "workflowExecutionDescription")]
    pub description: Value,
    /// Every history event, when asked.
    #[serde(rename = "workflowHistory", skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Value>,
    /// The workflow query's result, when one was run.
    #[serde(rename = "workflowQueryResult", skip_serializing_if = "Value::is_null")]
    pub query_result: Value,
}

impl Workflows {
    /// The service over `store`.
    #[must_use]
    pub fn new(store: Arc<dyn ResourceStore>, config: Config) -> Self {
        Self {
            intents: Arc::new(WorkflowIntent::collection(store)),
            parent: Arc::new(KeyPattern::parse(&collection_path())),
            invoker: Invoker::new(config.invoke),
            config: Arc::new(config),
        }
    }

    async fn intent(&self, params: &HashMap<String, String>) -> Result<WorkflowIntent> {
        let (parent, name) = item_key(&self.parent, WorkflowIntent::PARAM, params)?;
        self.intents.get(&parent, &name).await
    }

    /// Starts the intent's workflow through its workflow client (module workflow_intent.go
    /// `StartWorkflowIntent`, see [`Invoker::start`]).
    ///
    /// # Errors
    /// As [`Invoker::start`].
    pub async fn start(&self, intent: &WorkflowIntent) -> Result<()> {
        self.invoker
            .start(&intent.spec.client, &intent.spec.temporal)
            .await
    }

    /// What Temporal says of a workflow (module workflow_intent.go `GetStatusWorkflowIntent`):
    /// the description, the history and a query's result as `query` asks, after waiting (at most
    /// [`Timeouts::wait`]) for the workflow to close when it asks that. Without a `workflowID`
    /// the intent's is used.
    ///
    /// # Errors
    /// A missing intent (when its id is needed), or Temporal's answer.
    pub async fn status(
        &self,
        params: &HashMap<String, String>,
        query: StatusQuery,
    ) -> Result<StatusAnswer> {
        let id = async {
            let intent = self.intent(params).await?;
            Ok(intent.spec.temporal.workflow_start_options.id)
        };
        follow_defaulted(&self.config, query, id).await
    }

    /// Cancels or terminates the intent's workflow (module workflow_intent.go
    /// `CancelWorkflowIntent`): the request's `workflowID` or else the intent's.
    ///
    /// # Errors
    /// A missing intent, or Temporal's answer.
    pub async fn cancel(
        &self,
        params: &HashMap<String, String>,
        request: &CancelRequest,
    ) -> Result<()> {
        let intent = self.intent(params).await?;
        let mut spec = request.spec.clone();
        spec.temporal_server = self.config.server(&spec.temporal_server).to_owned();
        stop(
            self.config.temporal,
            &intent.spec.temporal.workflow_start_options.id,
            &spec,
        )
        .await
    }

    /// The routes (see the module's table).
    pub fn routes<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let crud = Routes::<WorkflowIntent>::new(
            format!("/v2{}", collection_path()),
            WorkflowIntent::PARAM,
        )
        .without_put()
        .serve((*self.intents).clone());
        let item = format!("/v2{}/{{{}}}", collection_path(), WorkflowIntent::PARAM);

        let w = self.clone();
        let start = move |Path(params): Path<HashMap<String, String>>| async move {
            let intent = w.intent(&params).await?;
            w.start(&intent).await?;
            Ok::<_, ApiError>(StatusCode::NO_CONTENT)
        };
        let w = self.clone();
        let status = move |Path(params): Path<HashMap<String, String>>,
                           Query(pairs): Query<Vec<(String, String)>>| async move {
            // Go's r.Form: the first value of each key.
            let mut seen = std::collections::HashSet::new();
            let first = pairs
                .iter()
                .filter(|(k, _)| seen.insert(k.as_str()))
                .map(|(k, v)| (k.as_str(), v.as_str()));
            let query = StatusQuery::parse(first)?;
            let answer = w.status(&params, query).await?;
            Ok::<_, ApiError>(json_response(StatusCode::OK, &answer))
        };
        let w = self.clone();
        let cancel = move |Path(params): Path<HashMap<String, String>>, RawBody(body): RawBody| async move {
            let request = EmcoJson::<CancelRequest>::parse(&body)?;
            if w.config.server(&request.spec.temporal_server).is_empty() {
                return Err(Error::invalid(":: Temporal Server endpoint is required.").into());
            }
            w.cancel(&params, &request).await?;
            Ok::<_, ApiError>(StatusCode::NO_CONTENT)
        };
        crud.route(&format!("{item}/start"), post(start))
            .route(&format!("{item}/status"), get(status))
            .route(&format!("{item}/cancel"), post(cancel))
    }
}

fn collection_path() -> String {
    WorkflowIntent::collection_path()
}

fn to_json<T: Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::internal("cannot encode Temporal's answer").with_source(e))
}

/// What Temporal says of the workflow `query` names (module workflow_intent.go
/// `GetStatusWorkflowIntent`, and tac's copy of it): the description, the history and a query's
/// result as it asks, after waiting (at most [`Timeouts::wait`]) for the workflow to close when it
/// asks that.
///
/// # Errors
/// Temporal's answer.
pub async fn follow(timeouts: Timeouts, query: &StatusQuery) -> Result<StatusAnswer> {
    let temporal = Temporal::connect(&query.temporal_server, timeouts).await?;
    let (id, run) = (query.workflow_id.as_str(), query.run_id.as_str());
    let mut answer = StatusAnswer {
        workflow_id: query.workflow_id.clone(),
        run_id: query.run_id.clone(),
        description: to_json(&DescribeWorkflowExecutionResponse::default())?,
        history: Vec::new(),
        query_result: Value::Null,
    };
    // workflowmgr describes before it waits; waiting first, the whole answer (description,
    // history, query) is of the closed workflow, which is what a caller waits for.
    if query.wait_for_result {
        temporal.wait_closed(id, run, timeouts.wait).await?;
    }
    if query.describe {
        answer.description = to_json(&temporal.describe(id, run).await?)?;
    }
    if query.history {
        for event in temporal.history(id, run).await? {
            answer.history.push(to_json(&event)?);
        }
    }
    if !query.query_type.is_empty() {
        answer.query_result = temporal.query(id, run, &query.query_type).await?;
    }
    Ok(answer)
}

/// [`follow`] with what `query` leaves out filled in: the workflow id `intent_id` gives (an
/// intent's, read only when needed) and the default Temporal server.
///
/// # Errors
/// `intent_id`'s; Temporal's answer.
pub(crate) async fn follow_defaulted(
    config: &Config,
    mut query: StatusQuery,
    intent_id: impl Future<Output = Result<String>>,
) -> Result<StatusAnswer> {
    if query.workflow_id.is_empty() {
        query.workflow_id = intent_id.await?;
    }
    query.temporal_server = config.server(&query.temporal_server).to_owned();
    follow(config.temporal, &query).await
}

/// Cancels or terminates (`spec.terminate`) the workflow `spec.workflowID`, else `intent_id`
/// (module workflow_intent.go `CancelWorkflowIntent`, and tac's copy of it).
///
/// # Errors
/// Temporal's answer.
pub async fn stop(timeouts: Timeouts, intent_id: &str, spec: &CancelSpec) -> Result<()> {
    let id = if spec.workflow_id.is_empty() {
        intent_id
    } else {
        spec.workflow_id.as_str()
    };
    let temporal = Temporal::connect(&spec.temporal_server, timeouts).await?;
    if spec.terminate {
        temporal
            .terminate(id, &spec.run_id, &spec.reason, &spec.details)
            .await
    } else {
        temporal.cancel(id, &spec.run_id).await
    }
}

/// Posts start requests to workflow clients, each bounded in time.
#[derive(Debug, Clone)]
pub struct Invoker {
    http: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl Invoker {
    /// An invoker whose requests may take `timeout`.
    #[must_use]
    pub fn new(timeout: Duration) -> Self {
        Self {
            http: Client::builder(TokioExecutor::new()).build_http(),
            timeout,
        }
    }

    /// Starts a workflow: posts `spec` (an intent's `spec.temporal`) to the workflow client's
    /// `http://{clientEndpointName}:{clientEndpointPort}/invoke/{workflowClientName}`, which
    /// starts it on Temporal and answers 204.
    ///
    /// # Errors
    /// Unavailable when the client cannot be reached in time or answers anything but 204.
    pub async fn start(&self, client: &ClientEndpoint, spec: &TemporalSpec) -> Result<()> {
        let host = &client.client_endpoint_name;
        // Go's net.JoinHostPort: an IPv6 address in brackets.
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let url = format!(
            "http://{host}:{}/invoke/{}",
            client.client_endpoint_port, spec.workflow_client_name
        );
        let uri: http::Uri = url
            .parse()
            .map_err(|e| Error::invalid(format!("parse \"{url}\": {e}")))?;
        let body = serde_json::to_vec(spec)
            .map_err(|e| Error::internal("cannot encode the start request").with_source(e))?;
        let request = http::Request::post(uri)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::invalid(format!("parse \"{url}\": {e}")))?;
        let answer = tokio::time::timeout(self.timeout, self.http.request(request))
            .await
            .map_err(|_| {
                Error::unavailable(format!(
                    "Post \"{url}\": no answer within {}s",
                    self.timeout.as_secs()
                ))
            })?
            .map_err(|e| {
                Error::unavailable(format!("Post \"{url}\": {}", emco_core::error::chain(&e)))
            })?;
        let status = answer.status();
        if status != StatusCode::NO_CONTENT {
            // Go's resp.Status and the message's own newline.
            return Err(Error::unavailable(format!(
                "HTTP POST returned status code {} {} for URL {url}.\n",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            )));
        }
        Ok(())
    }
}
