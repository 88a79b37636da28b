//! workflowmgr's objects as its Go structs read and write them (src/workflowmgr/pkg/module
//! workflow_intent.go, pkg/emcotemporalapi/emco_temporal_api.go).
//!
//! The start options and activity options are the Go SDK's own structs (go.temporal.io/sdk
//! v1.13.1 `client.StartWorkflowOptions`, `workflow.ActivityOptions`), which carry no JSON tags:
//! their keys are Go's field names, every field is written (no `omitempty`), durations are
//! nanoseconds and enums numbers.

use std::collections::BTreeMap;

use emco_controller_sdk::intent::Dig;
use emco_core::{Metadata, Object};
use emco_rest::Wording;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `DIG/temporal-workflow-intents/{workflowIntent}`: where the workflow client listens and what
/// it starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// api/workflow_intent.go createHandler: json-schemas/workflow_intent.json on the re-encoded body.
#[object(schema = INTENT_SCHEMA, empty_body = "EOF", undecodable = str::to_owned)]
#[intent(parent = Dig, segment = "temporal-workflow-intents", param = "workflowIntent",
    wording = intent_wording())]
pub struct WorkflowIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The client endpoint and the Temporal start request.
    #[serde(default)]
    pub spec: WorkflowIntentSpec,
}

/// The `spec` of a [`WorkflowIntent`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkflowIntentSpec {
    /// The network endpoint of the workflow client.
    #[serde(default, rename = "workflowClient")]
    pub client: ClientEndpoint,
    /// What the client is asked to start.
    #[serde(default)]
    pub temporal: TemporalSpec,
}

/// Where the workflow client listens (`WfClientSpec`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientEndpoint {
    /// Host name or address.
    #[serde(default)]
    pub client_endpoint_name: String,
    /// TCP port.
    #[serde(default)]
    pub client_endpoint_port: i64,
}

/// `emcotemporalapi.WfTemporalSpec`: the body posted to the workflow client's
/// `/invoke/{workflowClientName}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemporalSpec {
    /// The client's name for the workflow it starts.
    #[serde(default)]
    pub workflow_client_name: String,
    /// How Temporal is asked to start it; `ID` is the workflow id.
    #[serde(default)]
    pub workflow_start_options: StartOptions,
    /// Per-activity options and parameters for the workflow (Go's `omitempty` does not apply
    /// to a struct: always written).
    #[serde(default)]
    pub workflow_params: WorkflowParams,
}

/// The Go SDK's `client.StartWorkflowOptions` (v1.13.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StartOptions {
    /// The workflow id.
    #[serde(default, rename = "ID")]
    pub id: String,
    /// The task queue its workers poll.
    #[serde(default)]
    pub task_queue: String,
    /// Nanoseconds; 0 is unlimited.
    #[serde(default)]
    pub workflow_execution_timeout: i64,
    /// Nanoseconds; 0 is unlimited.
    #[serde(default)]
    pub workflow_run_timeout: i64,
    /// Nanoseconds; 0 is Temporal's default.
    #[serde(default)]
    pub workflow_task_timeout: i64,
    /// Temporal's `WorkflowIdReusePolicy` number.
    #[serde(default, rename = "WorkflowIDReusePolicy")]
    pub workflow_id_reuse_policy: i32,
    /// Fail a start whose id runs already.
    #[serde(default)]
    pub workflow_execution_error_when_already_started: bool,
    /// The workflow's retry policy.
    #[serde(default)]
    pub retry_policy: Option<RetryPolicy>,
    /// A cron schedule.
    #[serde(default)]
    pub cron_schedule: String,
    /// Memo fields.
    #[serde(default)]
    pub memo: Option<Map<String, Value>>,
    /// Search attributes.
    #[serde(default)]
    pub search_attributes: Option<Map<String, Value>>,
}

/// The Go SDK's `temporal.RetryPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RetryPolicy {
    /// Nanoseconds before the first retry.
    #[serde(default)]
    pub initial_interval: i64,
    /// Growth of the interval per retry.
    #[serde(default)]
    pub backoff_coefficient: f64,
    /// Nanoseconds at most between retries.
    #[serde(default)]
    pub maximum_interval: i64,
    /// Attempts at most; 0 is unlimited.
    #[serde(default)]
    pub maximum_attempts: i32,
    /// Error types never retried.
    #[serde(default)]
    pub non_retryable_error_types: Option<Vec<String>>,
}

/// `emcotemporalapi.WorkflowParams`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowParams {
    /// Activity options by activity name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub activity_options: BTreeMap<String, ActivityOptions>,
    /// Key-value parameters by activity name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub activity_params: BTreeMap<String, BTreeMap<String, String>>,
}

/// The Go SDK's `workflow.ActivityOptions` (v1.13.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ActivityOptions {
    /// The task queue of the activity.
    #[serde(default)]
    pub task_queue: String,
    /// Nanoseconds.
    #[serde(default)]
    pub schedule_to_close_timeout: i64,
    /// Nanoseconds.
    #[serde(default)]
    pub schedule_to_start_timeout: i64,
    /// Nanoseconds.
    #[serde(default)]
    pub start_to_close_timeout: i64,
    /// Nanoseconds.
    #[serde(default)]
    pub heartbeat_timeout: i64,
    /// Wait for the activity's cancellation to complete.
    #[serde(default)]
    pub wait_for_cancellation: bool,
    /// The activity id.
    #[serde(default, rename = "ActivityID")]
    pub activity_id: String,
    /// The activity's retry policy.
    #[serde(default)]
    pub retry_policy: Option<RetryPolicy>,
}

/// The body of `POST .../{workflowIntent}/cancel` (`WfTemporalCancelRequest`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// api/workflow_intent.go cancelHandler: io.EOF is a 400 `EOF`, a body that does not decode a 422
// with the decoder's text, then json-schemas/cancel_request.json.
#[object(schema = CANCEL_SCHEMA, empty_body = "EOF", undecodable = str::to_owned)]
pub struct CancelRequest {
    /// Sent by emcoctl; its name is checked by the schema (Go writes the struct whole).
    #[serde(default)]
    pub metadata: Metadata,
    /// What to cancel and how.
    #[serde(default)]
    pub spec: CancelSpec,
}

/// The `spec` of a [`CancelRequest`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelSpec {
    /// `host:port` of the Temporal frontend. Required.
    #[serde(default)]
    pub temporal_server: String,
    /// Overrides the intent's `ID`.
    #[serde(
        default,
        rename = "workflowID",
        skip_serializing_if = "String::is_empty"
    )]
    pub workflow_id: String,
    /// A run of the workflow; the latest when empty.
    #[serde(default, rename = "runID", skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    /// Terminate (no cleanup by the workflow) instead of asking it to cancel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminate: bool,
    /// Why, recorded by Temporal with a terminate.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Details recorded with a terminate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
}

/// The query of `GET .../{workflowIntent}/status` (`WfTemporalStatusQuery`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusQuery {
    /// `host:port` of the Temporal frontend.
    pub temporal_server: String,
    /// The workflow id.
    pub workflow_id: String,
    /// A run of it; the open or latest closed run when empty.
    pub run_id: String,
    /// Wait until the workflow closes before answering.
    pub wait_for_result: bool,
    /// Describe the execution.
    pub describe: bool,
    /// Read the whole history.
    pub history: bool,
    /// Run this workflow query.
    pub query_type: String,
}

impl StatusQuery {
    /// Reads the query parameters as api/workflow_intent.go `buildStatusQuery` does: one
    /// surrounding quote on either side of `temporalServer` is cut; a boolean that is neither
    /// `true` nor `false` reads as false (Go builds its message and drops it); any other key is
    /// refused.
    ///
    /// # Errors
    /// `Unknown query parameter: KEY`.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> emco_core::Result<Self> {
        let mut q = Self::default();
        for (key, value) in pairs {
            match key {
                "temporalServer" => {
                    let v = value.strip_prefix(['"', '\'']).unwrap_or(value);
                    let v = v.strip_suffix(['"', '\'']).unwrap_or(v);
                    v.clone_into(&mut q.temporal_server);
                }
                "workflowID" => value.clone_into(&mut q.workflow_id),
                "runID" => value.clone_into(&mut q.run_id),
                "queryType" => value.clone_into(&mut q.query_type),
                "waitForResult" => q.wait_for_result = value == "true",
                "runDescribeWfExec" => q.describe = value == "true",
                "getWfHistory" => q.history = value == "true",
                other => {
                    return Err(emco_core::Error::invalid(format!(
                        "Unknown query parameter: {other}"
                    )));
                }
            }
        }
        Ok(q)
    }
}

/// workflowmgr's texts: every module error is a 500 there; we answer 404 and 409 with them.
fn intent_wording() -> Wording {
    let mut w = Wording::new("Workflow Intent not found", "WorkflowIntent already exists");
    w.empty_list = emco_rest::EmptyList::Null;
    w
}

emco_go::schemas! {
    INTENT_SCHEMA = "../schemas/workflow_intent.json";
    /// json-schemas/cancel_request.json without its `"details": "int"`, which is no schema:
    /// gojsonschema cannot load the file, so EMCO answers every cancel 500.
    CANCEL_SCHEMA = "../schemas/cancel_request.json";
}

#[cfg(test)]
mod tests {
    use super::*;
    use emco_core::Validate;
    use serde_json::json;

    /// As Go reads EMCO's example (keys matched case-insensitively: `id`, `taskqueue`) and
    /// writes it back: every start option, Go's names.
    #[test]
    fn an_intent_reads_and_writes_as_go() {
        let body = json!({
            "metadata": {"name": "migrate"},
            "spec": {
                "workflowClient": {"clientEndpointName": "wfc", "clientEndpointPort": 9090},
                "temporal": {
                    "workflowClientName": "migrate_workflowclient",
                    "workflowStartOptions": {"id": "migrate-1", "taskqueue": "MIGRATION_TASK_Q",
                        "workflowexecutiontimeout": 60_000_000_000_i64},
                    "workflowParams": {"activityParams": {"a": {"k": "v"}}}
                }
            }
        });
        let intent: WorkflowIntent =
            emco_go::json::from_slice(body.to_string().as_bytes()).unwrap();
        assert_eq!(intent.spec.temporal.workflow_start_options.id, "migrate-1");
        let written = serde_json::to_value(&intent).unwrap();
        assert_eq!(
            written["spec"]["temporal"]["workflowStartOptions"],
            json!({"ID": "migrate-1", "TaskQueue": "MIGRATION_TASK_Q",
                "WorkflowExecutionTimeout": 60_000_000_000_i64, "WorkflowRunTimeout": 0,
                "WorkflowTaskTimeout": 0, "WorkflowIDReusePolicy": 0,
                "WorkflowExecutionErrorWhenAlreadyStarted": false, "RetryPolicy": null,
                "CronSchedule": "", "Memo": null, "SearchAttributes": null})
        );
        assert_eq!(
            written["spec"]["temporal"]["workflowParams"],
            json!({"activityParams": {"a": {"k": "v"}}})
        );
        assert!(INTENT_SCHEMA.invalid_input(&written).is_none());
        intent.validate().unwrap();
    }

    #[test]
    fn the_schema_refuses_what_workflowmgr_refuses() {
        let mut intent = WorkflowIntent::default();
        intent.metadata.name = "w".into();
        // An activity option without its retry policy (workflow_intent.json requires all).
        let mut doc = serde_json::to_value(&intent).unwrap();
        doc["spec"]["temporal"]["workflowParams"] =
            json!({"activityOptions": {"a": {"TaskQueue": "q"}}});
        assert!(INTENT_SCHEMA.invalid_input(&doc).is_some());
        let mut doc = serde_json::to_value(&intent).unwrap();
        doc["metadata"]["name"] = json!("-bad");
        assert!(INTENT_SCHEMA.invalid_input(&doc).is_some());
    }

    /// api/workflow_intent.go buildStatusQuery.
    #[test]
    fn status_queries_read_as_build_status_query() {
        let q = StatusQuery::parse([
            ("temporalServer", "'127.0.0.1:7233\""),
            ("workflowID", "w"),
            ("runDescribeWfExec", "true"),
            ("getWfHistory", "yes"),
            ("waitForResult", "false"),
        ])
        .unwrap();
        assert_eq!(q.temporal_server, "127.0.0.1:7233");
        assert_eq!(q.workflow_id, "w");
        assert!(q.describe && !q.history && !q.wait_for_result);
        let e = StatusQuery::parse([("queryParams", "x")]).unwrap_err();
        assert_eq!(e.message(), "Unknown query parameter: queryParams");
    }
}
