//! workflowmgr against a real Temporal server (`../shared/temporal`, 1.19.1) and a real workflow
//! client and worker (emco-testkit's `TemporalKit`, on Temporal's Python SDK): start, status (running, completed, failed,
//! with a query and the history), cancel and terminate, and the answers when the client or the
//! server cannot be reached. EMCO's behaviour: src/workflowmgr/pkg/module/workflow_intent.go.
//!
//! Outside CI a missing Temporal kit or Python SDK skips the test (saying so); in CI it fails.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::call;
use emco_orchestrator::Orchestrator;
use emco_service::{Config, Metrics};
use emco_store::InMemoryResourceStore;
use emco_testkit::temporal::{TASK_QUEUE, TemporalKit as Kit};
use serde_json::{Value, json};

const DIG: &str = "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/d1";

/// The application; `temporal_server` is its `--temporal-server`.
fn app(call_timeout: Duration, temporal_server: Option<String>) -> axum::Router {
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    let mut config = Config::default();
    config.workflows.temporal_server = temporal_server;
    config.workflows.temporal.call = call_timeout;
    config.workflows.temporal.wait = Duration::from_secs(60);
    config.workflows.invoke = call_timeout;
    emco_service::app(orch, &config, Metrics::new())
}

async fn send(app: &axum::Router, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
    let (status, _, text) = call(app, None, method, path, body).await;
    (status.as_u16(), text)
}

async fn group(app: &axum::Router) {
    let setup = [
        ("/v2/projects", json!({"metadata": {"name": "p1"}})),
        (
            "/v2/projects/p1/composite-apps",
            json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
        ),
        (
            "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups",
            json!({"metadata": {"name": "d1"}, "spec": {"compositeProfile": "cp",
                "version": "r1", "logicalCloud": "lc", "overrideValues": []}}),
        ),
    ];
    for (path, body) in setup {
        assert_eq!(send(app, "POST", path, Some(body)).await.0, 201, "{path}");
    }
}

/// Creates intent `name` for workflow `client` with id `id` and activity parameters `params`.
async fn intent(app: &axum::Router, kit: &Kit, name: &str, client: &str, id: &str, params: Value) {
    let body = json!({"metadata": {"name": name}, "spec": {
        "workflowClient": {"clientEndpointName": "127.0.0.1", "clientEndpointPort": kit.client_port},
        "temporal": {"workflowClientName": client,
            "workflowStartOptions": {"ID": id, "TaskQueue": TASK_QUEUE},
            "workflowParams": {"activityParams": params}}}});
    let path = format!("{DIG}/temporal-workflow-intents");
    let (status, text) = send(app, "POST", &path, Some(body)).await;
    assert_eq!(status, 201, "{text}");
}

async fn status(app: &axum::Router, kit: &Kit, name: &str, query: &str) -> Value {
    let path = format!(
        "{DIG}/temporal-workflow-intents/{name}/status?temporalServer={}&{query}",
        kit.temporal
    );
    let (status, text) = send(app, "GET", &path, None).await;
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Temporal's status number in a description (1 running, 2 completed, 3 failed, 4 canceled,
/// 5 terminated).
fn execution_status(answer: &Value) -> i64 {
    answer["workflowExecutionDescription"]["workflow_execution_info"]["status"]
        .as_i64()
        .unwrap_or_else(|| panic!("no status in {answer}"))
}

/// The attributes of the last history event, by their type's name.
fn last_event(answer: &Value) -> (String, Value) {
    let events = answer["workflowHistory"].as_array().unwrap();
    let attributes = events.last().unwrap()["attributes"].as_object().unwrap();
    let (kind, value) = attributes.iter().next().unwrap();
    (kind.clone(), value.clone())
}

async fn post(app: &axum::Router, path: &str, body: Option<Value>) -> (u16, String) {
    send(
        app,
        "POST",
        &format!("{DIG}/temporal-workflow-intents/{path}"),
        body,
    )
    .await
}

#[tokio::test]
async fn workflow_intents_start_and_follow_workflows_on_temporal() {
    let Some(kit) = Kit::start() else { return };
    let app = app(Duration::from_secs(10), Some(kit.temporal.clone()));
    group(&app).await;

    // A workflow that sleeps 3 s: running and answering its query, then completed.
    intent(
        &app,
        &kit,
        "nap",
        "sleep",
        "nap-1",
        json!({"sleep": {"seconds": "3"}}),
    )
    .await;
    assert_eq!(post(&app, "nap/start", None).await, (204, String::new()));
    let answer = status(&app, &kit, "nap", "runDescribeWfExec=true&queryType=state").await;
    assert_eq!(
        answer["workflowID"], "nap-1",
        "the intent's id when none is asked"
    );
    assert_eq!(execution_status(&answer), 1, "{answer}");
    assert_eq!(answer["workflowQueryResult"], json!({"state": "sleeping"}));
    assert!(
        answer.get("workflowHistory").is_none(),
        "not asked: {answer}"
    );
    let answer = status(
        &app,
        &kit,
        "nap",
        "workflowID=nap-1&waitForResult=true&getWfHistory=true&runDescribeWfExec=true",
    )
    .await;
    assert_eq!(execution_status(&answer), 2, "{answer}");
    let (kind, completed) = last_event(&answer);
    assert_eq!(kind, "WorkflowExecutionCompletedEventAttributes");
    // The result payload: JSON `"slept"`, base64 in proto's JSON of bytes.
    assert_eq!(completed["result"]["payloads"][0]["data"], "InNsZXB0Ig==");

    // A workflow that fails: its status says so, its close event carries the error.
    let failing = json!({"fail": {"message": "backup target is full"}});
    intent(&app, &kit, "backup", "fail", "backup-1", failing).await;
    assert_eq!(post(&app, "backup/start", None).await.0, 204);
    let answer = status(
        &app,
        &kit,
        "backup",
        "waitForResult=true&getWfHistory=true&runDescribeWfExec=true",
    )
    .await;
    assert_eq!(execution_status(&answer), 3, "{answer}");
    let (kind, failed) = last_event(&answer);
    assert_eq!(kind, "WorkflowExecutionFailedEventAttributes");
    assert_eq!(failed["failure"]["message"], "backup target is full");

    // Cancel: the workflow is asked to stop and ends canceled.
    intent(&app, &kit, "long", "sleep", "long-1", json!({})).await;
    assert_eq!(post(&app, "long/start", None).await.0, 204);
    let cancel = json!({"metadata": {"name": "c"}, "spec": {"temporalServer": kit.temporal}});
    assert_eq!(
        post(&app, "long/cancel", Some(cancel)).await,
        (204, String::new())
    );
    let answer = status(
        &app,
        &kit,
        "long",
        "waitForResult=true&runDescribeWfExec=true",
    )
    .await;
    assert_eq!(execution_status(&answer), 4, "{answer}");

    // Terminate, with the id given in the request and a reason Temporal records.
    intent(&app, &kit, "stuck", "sleep", "stuck-1", json!({})).await;
    assert_eq!(post(&app, "stuck/start", None).await.0, 204);
    let terminate = json!({"metadata": {"name": "t"}, "spec": {"temporalServer": kit.temporal,
        "workflowID": "stuck-1", "terminate": true, "reason": "operator gave up",
        "details": ["ticket 42"]}});
    assert_eq!(post(&app, "stuck/cancel", Some(terminate)).await.0, 204);
    let answer = status(
        &app,
        &kit,
        "stuck",
        "getWfHistory=true&runDescribeWfExec=true",
    )
    .await;
    assert_eq!(execution_status(&answer), 5, "{answer}");
    let (kind, terminated) = last_event(&answer);
    assert_eq!(kind, "WorkflowExecutionTerminatedEventAttributes");
    assert_eq!(terminated["reason"], "operator gave up");

    // Without temporalServer the server's --temporal-server is asked.
    let path = format!("{DIG}/temporal-workflow-intents/nap/status?runDescribeWfExec=true");
    let (code, text) = send(&app, "GET", &path, None).await;
    assert_eq!(code, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(execution_status(&answer), 2, "{answer}");

    // Temporal's own refusals keep their meaning: an unknown workflow is a 404.
    let path = format!(
        "{DIG}/temporal-workflow-intents/nap/status?temporalServer={}&workflowID=none&\
         runDescribeWfExec=true",
        kit.temporal
    );
    let (code, text) = send(&app, "GET", &path, None).await;
    assert_eq!(code, 404, "{text}");

    // The client refuses a name it does not serve: workflowmgr's text, with Go's status line.
    intent(&app, &kit, "unknown", "nope", "x-1", json!({})).await;
    let (code, text) = post(&app, "unknown/start", None).await;
    assert_eq!(code, 503);
    assert_eq!(
        text,
        format!(
            "HTTP POST returned status code 404 Not Found for URL http://127.0.0.1:{}/invoke/nope.\n\n",
            kit.client_port
        )
    );
}

/// A client endpoint or Temporal server that does not answer is an error in bounded time.
#[tokio::test]
async fn silent_clients_and_servers_fail_in_bounded_time() {
    let app = app(Duration::from_secs(2), None);
    group(&app).await;
    // Accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let body = json!({"metadata": {"name": "w"}, "spec": {
        "workflowClient": {"clientEndpointName": "127.0.0.1", "clientEndpointPort": port},
        "temporal": {"workflowClientName": "sleep",
            "workflowStartOptions": {"ID": "w-1", "TaskQueue": TASK_QUEUE}}}});
    let path = format!("{DIG}/temporal-workflow-intents");
    assert_eq!(send(&app, "POST", &path, Some(body)).await.0, 201);

    let t = Instant::now();
    let (code, text) = post(&app, "w/start", None).await;
    assert_eq!(code, 503, "{text}");
    assert_eq!(
        text,
        format!("Post \"http://127.0.0.1:{port}/invoke/sleep\": no answer within 2s\n")
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

    let t = Instant::now();
    let query = format!("temporalServer=127.0.0.1:{port}&runDescribeWfExec=true");
    let (code, text) = send(&app, "GET", &format!("{path}/w/status?{query}"), None).await;
    assert_eq!(code, 503, "{text}");
    assert!(
        text.starts_with(&format!(
            "Failed to connect to Temporal server (127.0.0.1:{port}). Error: "
        )),
        "{text}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());

    let t = Instant::now();
    let cancel = json!({"metadata": {"name": "c"}, "spec": {"temporalServer":
        format!("127.0.0.1:{port}")}});
    let (code, text) = post(&app, "w/cancel", Some(cancel)).await;
    assert_eq!(code, 503, "{text}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    drop(silent);
}
