//! A client of a Temporal server's frontend: Temporal's own gRPC API (the `temporalio-protos`
//! crate Temporal publishes for its Rust SDK) over tonic, for what workflowmgr asks of
//! Temporal: describe an execution, read its history, query it, wait for it to close, cancel
//! and terminate it.
//!
//! Every call is bounded: connecting and each unary call by [`Timeouts::call`], a wait for a
//! workflow to close by the caller's limit, so a server that does not answer is an error in
//! bounded time, never a hung request.

use std::time::Duration;

use emco_core::{Error, Result};
use serde_json::Value;
use temporalio_protos::grpc::health::v1::HealthCheckRequest;
use temporalio_protos::grpc::health::v1::health_check_response::ServingStatus;
use temporalio_protos::grpc::health::v1::health_client::HealthClient;
use temporalio_protos::temporal::api::common::v1::{Payload, Payloads, WorkflowExecution};
use temporalio_protos::temporal::api::enums::v1::{
    HistoryEventFilterType, QueryRejectCondition, WorkflowExecutionStatus,
};
use temporalio_protos::temporal::api::history::v1::HistoryEvent;
use temporalio_protos::temporal::api::history::v1::history_event::Attributes;
use temporalio_protos::temporal::api::query::v1::WorkflowQuery;
use temporalio_protos::temporal::api::workflowservice::v1::workflow_service_client::WorkflowServiceClient;
use temporalio_protos::temporal::api::workflowservice::v1::{
    DescribeWorkflowExecutionRequest, DescribeWorkflowExecutionResponse,
    GetWorkflowExecutionHistoryRequest, QueryWorkflowRequest,
    RequestCancelWorkflowExecutionRequest, TerminateWorkflowExecutionRequest,
};
use tonic::transport::{Channel, Endpoint};

/// The namespace EMCO's Go client uses (the Go SDK's default).
pub const NAMESPACE: &str = "default";

/// The gRPC service a frontend reports serving.
const WORKFLOW_SERVICE: &str = "temporal.api.workflowservice.v1.WorkflowService";

/// How long a call to Temporal may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting, and each call that does not wait for the workflow.
    pub call: Duration,
    /// Waiting for a workflow to close (`waitForResult`).
    pub wait: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            call: Duration::from_secs(10),
            wait: Duration::from_secs(600),
        }
    }
}

/// A connected client of one Temporal frontend, namespace [`NAMESPACE`].
#[derive(Debug, Clone)]
pub struct Temporal {
    client: WorkflowServiceClient<Channel>,
    endpoint: String,
    timeouts: Timeouts,
    identity: String,
}

/// How a workflow closed, read from its close event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// `Completed`, `Failed`, `Canceled`, `Terminated`, `TimedOut` or `ContinuedAsNew`.
    pub status: &'static str,
    /// The failure's message (or a terminate's reason) when it did not complete.
    pub message: Option<String>,
}

impl Closed {
    /// Whether the workflow completed successfully.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.status == "Completed"
    }
}

impl Temporal {
    /// Connects to the frontend at `host:port` (Go's `client.Options.HostPort`) and checks that
    /// it serves the workflow service, as the Go SDK's `client.NewClient` does.
    ///
    /// # Errors
    /// Unavailable, worded as workflowmgr words it: `Failed to connect to Temporal server
    /// (ENDPOINT). Error: ...`.
    pub async fn connect(endpoint: &str, timeouts: Timeouts) -> Result<Self> {
        let failed = |what: String| {
            Error::unavailable(format!(
                "Failed to connect to Temporal server ({endpoint}). Error: {what}"
            ))
        };
        if endpoint.is_empty() {
            return Err(failed("no address given (temporalServer)".into()));
        }
        let channel = Endpoint::from_shared(format!("http://{endpoint}"))
            .map_err(|e| failed(e.to_string()))?
            .connect_timeout(timeouts.call)
            .connect()
            .await
            .map_err(|e| failed(emco_core::error::chain(&e)))?;
        let mut health = HealthClient::new(channel.clone());
        let mut check = tonic::Request::new(HealthCheckRequest {
            service: WORKFLOW_SERVICE.into(),
        });
        check.set_timeout(timeouts.call);
        let status = health
            .check(check)
            .await
            .map_err(|s| failed(status_text(&s)))?
            .into_inner()
            .status;
        if status != ServingStatus::Serving as i32 {
            return Err(failed(format!(
                "{WORKFLOW_SERVICE} is not serving (health status {status})"
            )));
        }
        Ok(Self {
            client: WorkflowServiceClient::new(channel),
            endpoint: endpoint.to_owned(),
            timeouts,
            identity: format!("{}@emco-rs", std::process::id()),
        })
    }

    /// The frontend's `host:port`.
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn request<T>(&self, message: T, timeout: Duration) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(timeout);
        request
    }

    /// `DescribeWorkflowExecution`.
    ///
    /// # Errors
    /// Temporal's answer (see [`from_status`]).
    pub async fn describe(
        &self,
        workflow_id: &str,
        run_id: &str,
    ) -> Result<DescribeWorkflowExecutionResponse> {
        let request = DescribeWorkflowExecutionRequest {
            namespace: NAMESPACE.into(),
            execution: Some(execution(workflow_id, run_id)),
        };
        self.client
            .clone()
            .describe_workflow_execution(self.request(request, self.timeouts.call))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| from_status(&s))
    }

    /// Every event of the execution's history so far, page by page.
    ///
    /// # Errors
    /// Temporal's answer (see [`from_status`]).
    pub async fn history(&self, workflow_id: &str, run_id: &str) -> Result<Vec<HistoryEvent>> {
        let mut events = Vec::new();
        let mut token = Vec::new();
        loop {
            let request = GetWorkflowExecutionHistoryRequest {
                namespace: NAMESPACE.into(),
                execution: Some(execution(workflow_id, run_id)),
                next_page_token: std::mem::take(&mut token),
                history_event_filter_type: HistoryEventFilterType::AllEvent as i32,
                ..Default::default()
            };
            let page = self
                .client
                .clone()
                .get_workflow_execution_history(self.request(request, self.timeouts.call))
                .await
                .map_err(|s| from_status(&s))?
                .into_inner();
            events.extend(page.history.map(|h| h.events).unwrap_or_default());
            if page.next_page_token.is_empty() {
                return Ok(events);
            }
            token = page.next_page_token;
        }
    }

    /// Waits until the execution closes (long polls for its close event) and says how, for at
    /// most `limit`.
    ///
    /// # Errors
    /// Temporal's answer; unavailable when `limit` passes first.
    pub async fn wait_closed(
        &self,
        workflow_id: &str,
        run_id: &str,
        limit: Duration,
    ) -> Result<Closed> {
        let wait = async {
            let mut token = Vec::new();
            loop {
                let request = GetWorkflowExecutionHistoryRequest {
                    namespace: NAMESPACE.into(),
                    execution: Some(execution(workflow_id, run_id)),
                    next_page_token: std::mem::take(&mut token),
                    wait_new_event: true,
                    history_event_filter_type: HistoryEventFilterType::CloseEvent as i32,
                    ..Default::default()
                };
                // Temporal answers a long poll within its own timeout (about 20 s) with a token
                // to poll again.
                let page = self
                    .client
                    .clone()
                    .get_workflow_execution_history(self.request(request, limit))
                    .await
                    .map_err(|s| from_status(&s))?
                    .into_inner();
                if let Some(event) = page.history.and_then(|h| h.events.into_iter().next()) {
                    return Ok(closed(&event));
                }
                if page.next_page_token.is_empty() {
                    return Err(Error::unavailable(format!(
                        "Temporal server ({}) ended the history of workflow {workflow_id} \
                         without its close event",
                        self.endpoint
                    )));
                }
                token = page.next_page_token;
            }
        };
        tokio::time::timeout(limit, wait).await.unwrap_or_else(|_| {
            Err(Error::unavailable(format!(
                "workflow {workflow_id} did not close within {}s",
                limit.as_secs()
            )))
        })
    }

    /// `QueryWorkflow` of `query_type` without arguments, its result decoded from the first
    /// payload as the Go SDK's default converter decodes it.
    ///
    /// # Errors
    /// workflowmgr's texts: `Query failed (TYPE). Error: ...`, `Got no result for query
    /// (TYPE).`, `Failed to get result for query (TYPE). Error: ...`.
    pub async fn query(&self, workflow_id: &str, run_id: &str, query_type: &str) -> Result<Value> {
        let request = QueryWorkflowRequest {
            namespace: NAMESPACE.into(),
            execution: Some(execution(workflow_id, run_id)),
            query: Some(WorkflowQuery {
                query_type: query_type.into(),
                ..Default::default()
            }),
            query_reject_condition: QueryRejectCondition::None as i32,
        };
        let answer = self
            .client
            .clone()
            .query_workflow(self.request(request, self.timeouts.call))
            .await
            .map_err(|s| {
                let e = from_status(&s);
                Error::new(
                    e.kind(),
                    format!("Query failed ({query_type}). Error: {}", e.message()),
                )
            })?
            .into_inner();
        let Some(payload) = answer
            .query_result
            .and_then(|p| p.payloads.into_iter().next())
        else {
            return Err(Error::invalid(format!(
                "Got no result for query ({query_type})."
            )));
        };
        decode(&payload).map_err(|e| {
            Error::invalid(format!(
                "Failed to get result for query ({query_type}). Error: {e}"
            ))
        })
    }

    /// `RequestCancelWorkflowExecution`: the workflow is asked to cancel itself.
    ///
    /// # Errors
    /// Temporal's answer (see [`from_status`]).
    pub async fn cancel(&self, workflow_id: &str, run_id: &str) -> Result<()> {
        let request = RequestCancelWorkflowExecutionRequest {
            namespace: NAMESPACE.into(),
            workflow_execution: Some(execution(workflow_id, run_id)),
            identity: self.identity.clone(),
            request_id: request_id(),
            ..Default::default()
        };
        self.client
            .clone()
            .request_cancel_workflow_execution(self.request(request, self.timeouts.call))
            .await
            .map(drop)
            .map_err(|s| from_status(&s))
    }

    /// `TerminateWorkflowExecution` with `reason` and `details` (one JSON payload, as the Go
    /// SDK encodes EMCO's details list).
    ///
    /// # Errors
    /// Temporal's answer (see [`from_status`]).
    pub async fn terminate(
        &self,
        workflow_id: &str,
        run_id: &str,
        reason: &str,
        details: &[Value],
    ) -> Result<()> {
        let details = (!details.is_empty()).then(|| Payloads {
            payloads: vec![json_payload(&Value::Array(details.to_vec()))],
        });
        let request = TerminateWorkflowExecutionRequest {
            namespace: NAMESPACE.into(),
            workflow_execution: Some(execution(workflow_id, run_id)),
            reason: reason.into(),
            details,
            identity: self.identity.clone(),
            ..Default::default()
        };
        self.client
            .clone()
            .terminate_workflow_execution(self.request(request, self.timeouts.call))
            .await
            .map(drop)
            .map_err(|s| from_status(&s))
    }
}

fn execution(workflow_id: &str, run_id: &str) -> WorkflowExecution {
    WorkflowExecution {
        workflow_id: workflow_id.into(),
        run_id: run_id.into(),
    }
}

fn request_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// The name of a workflow status number (`Running`, `Completed`, ...).
#[must_use]
pub fn status_name(status: i32) -> &'static str {
    match WorkflowExecutionStatus::try_from(status) {
        Ok(WorkflowExecutionStatus::Running) => "Running",
        Ok(WorkflowExecutionStatus::Completed) => "Completed",
        Ok(WorkflowExecutionStatus::Failed) => "Failed",
        Ok(WorkflowExecutionStatus::Canceled) => "Canceled",
        Ok(WorkflowExecutionStatus::Terminated) => "Terminated",
        Ok(WorkflowExecutionStatus::ContinuedAsNew) => "ContinuedAsNew",
        Ok(WorkflowExecutionStatus::TimedOut) => "TimedOut",
        Ok(WorkflowExecutionStatus::Paused) => "Paused",
        Ok(WorkflowExecutionStatus::Unspecified) | Err(_) => "Unspecified",
    }
}

/// How a close event says the workflow ended.
fn closed(event: &HistoryEvent) -> Closed {
    let failure = |f: &Option<temporalio_protos::temporal::api::failure::v1::Failure>| {
        f.as_ref().map(|f| f.message.clone())
    };
    let (status, message) = match &event.attributes {
        Some(Attributes::WorkflowExecutionCompletedEventAttributes(_)) => ("Completed", None),
        Some(Attributes::WorkflowExecutionFailedEventAttributes(a)) => {
            ("Failed", failure(&a.failure))
        }
        Some(Attributes::WorkflowExecutionCanceledEventAttributes(_)) => {
            ("Canceled", Some("the workflow was canceled".to_owned()))
        }
        Some(Attributes::WorkflowExecutionTerminatedEventAttributes(a)) => {
            ("Terminated", Some(a.reason.clone()))
        }
        Some(Attributes::WorkflowExecutionTimedOutEventAttributes(_)) => {
            ("TimedOut", Some("the workflow timed out".to_owned()))
        }
        Some(Attributes::WorkflowExecutionContinuedAsNewEventAttributes(_)) => {
            ("ContinuedAsNew", None)
        }
        _ => (
            "Unspecified",
            Some(format!("unexpected close event {}", event.event_type)),
        ),
    };
    Closed { status, message }
}

/// A payload as the Go SDK's default data converter decodes it into an `interface{}`.
fn decode(payload: &Payload) -> std::result::Result<Value, String> {
    let encoding = payload
        .metadata
        .get("encoding")
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .unwrap_or_default();
    match encoding.as_str() {
        "json/plain" => serde_json::from_slice(&payload.data).map_err(|e| e.to_string()),
        "binary/null" => Ok(Value::Null),
        "binary/plain" => {
            use base64::Engine as _;
            Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(&payload.data),
            ))
        }
        other => Err(format!(
            "payload encoding metadata is not set correctly: {other:?}"
        )),
    }
}

fn json_payload(value: &Value) -> Payload {
    Payload {
        metadata: [("encoding".to_owned(), b"json/plain".to_vec())].into(),
        data: value.to_string().into_bytes(),
        ..Default::default()
    }
}

/// Temporal's gRPC answer as an error of the same kind: NotFound 404, InvalidArgument 400,
/// AlreadyExists 409, FailedPrecondition 409, anything else unavailable (503) with Temporal's
/// message.
#[must_use]
pub fn from_status(status: &tonic::Status) -> Error {
    use tonic::Code;
    let message = status.message().to_owned();
    match status.code() {
        Code::NotFound => Error::not_found(message),
        Code::InvalidArgument => Error::invalid(message),
        Code::AlreadyExists => Error::already_exists(message),
        Code::FailedPrecondition => Error::failed_precondition(message),
        _ => Error::unavailable(status_text(status)),
    }
}

fn status_text(status: &tonic::Status) -> String {
    if status.message().is_empty() {
        format!("{:?}", status.code())
    } else {
        format!("{:?}: {}", status.code(), status.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_decode_as_the_go_converter_does() {
        let p = json_payload(&serde_json::json!({"step": 2}));
        assert_eq!(decode(&p).unwrap(), serde_json::json!({"step": 2}));
        let mut null = Payload::default();
        null.metadata
            .insert("encoding".into(), b"binary/null".to_vec());
        assert_eq!(decode(&null).unwrap(), Value::Null);
        assert!(decode(&Payload::default()).is_err());
    }

    #[tokio::test]
    async fn a_frontend_that_is_not_there_fails_in_bounded_time() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let e = Temporal::connect(&addr.to_string(), Timeouts::default())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), emco_core::ErrorKind::Unavailable);
        assert!(
            e.message().starts_with(&format!(
                "Failed to connect to Temporal server ({addr}). Error: "
            )),
            "{e}"
        );
    }
}
