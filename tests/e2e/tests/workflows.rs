//! The workflow example end to end (#42): examples/workflows/migrate.py, a Temporal workflow run
//! by a real Temporal server (`../shared/temporal`) and a real worker (emco-testkit's
//! `TemporalKit`), moves the main job's http-server from one kubesim cluster to another through
//! emco-rs's REST API, started (with emcoctl and examples/workflows/migrate.yaml, EMCO's format,
//! and over REST) and followed through a workflow intent (workflowmgr's routes): placed on
//! both, Ready on the new one, removed from the old one. A move to a cluster that
//! never becomes Ready (kubesim refuses its connections) is rolled back: the app stays where it
//! was and the workflow fails saying so.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::time::Duration;

use emco_e2e::{Backends, DEADLINE, Env, EnvConfig, load, tgz};
use emco_testkit::temporal::{TASK_QUEUE, TemporalKit};
use http::Method;
use kubesim::Fault;
use serde_json::{Value, json};

const DIG: &str = "/v2/projects/demo/composite-apps/http/v1/deployment-intent-groups/http-dig";
const SERVER_PLACEMENT: &str = "/v2/projects/demo/composite-apps/http/v1/deployment-intent-groups/\
    http-dig/generic-placement-intents/placement/app-intents/http-server-placement";

async fn send(env: &Env, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    env.send(method, path, body.as_ref()).await.unwrap()
}

/// A workflow intent `name` running the example's `migrate` of http-server `from` -> `to`.
async fn migrate_intent(env: &Env, kit: &TemporalKit, name: &str, (from, to): (&str, &str)) {
    let params = json!({"emco": env.url, "project": "demo", "compositeApp": "http",
        "compositeAppVersion": "v1", "deploymentIntentGroup": "http-dig",
        "genericPlacementIntent": "placement", "appIntent": "http-server-placement",
        "app": "http-server", "clusterProvider": "kubesim", "from": from, "to": to,
        "readySeconds": "20"});
    let body = json!({"metadata": {"name": name}, "spec": {
        "workflowClient": {"clientEndpointName": "127.0.0.1", "clientEndpointPort": kit.client_port},
        "temporal": {"workflowClientName": "migrate",
            "workflowStartOptions": {"ID": name, "TaskQueue": TASK_QUEUE},
            "workflowParams": {"activityParams": {"migrate": params}}}}});
    let (code, text) = send(
        env,
        Method::POST,
        &format!("{DIG}/temporal-workflow-intents"),
        Some(body),
    )
    .await;
    assert_eq!(code, 201, "{text}");
    let (code, text) = send(
        env,
        Method::POST,
        &format!("{DIG}/temporal-workflow-intents/{name}/start"),
        None,
    )
    .await;
    assert_eq!(code, 204, "{text}");
}

/// Waits (through workflowmgr's status) until workflow `name` closes; its description's status
/// number (2 completed, 3 failed) and its last history event.
async fn closed(env: &Env, kit: &TemporalKit, name: &str) -> (i64, Value) {
    let path = format!(
        "{DIG}/temporal-workflow-intents/{name}/status?temporalServer={}&waitForResult=true&\
         runDescribeWfExec=true&getWfHistory=true",
        kit.temporal
    );
    let (code, answer) = send(env, Method::GET, &path, None).await;
    assert_eq!(code, 200, "{answer}");
    let status = answer["workflowExecutionDescription"]["workflow_execution_info"]["status"]
        .as_i64()
        .unwrap();
    let last = answer["workflowHistory"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    (status, last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_moves_an_app_between_clusters_and_rolls_back_when_not_ready() {
    let Some(kit) = TemporalKit::start() else {
        return;
    };
    let mut config = EnvConfig::new(Backends::Embedded, 3);
    config.plain_http = true;
    let env = Env::start(config).await.unwrap().unwrap();
    let packages = env.dir().join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    let charts = emco_e2e::workspace().join("examples/charts");
    for app in ["http-server", "http-client"] {
        tgz(&charts.join(app), app, &packages.join(format!("{app}.tgz"))).unwrap();
    }
    let (phases, _) = env.example(&packages, &["c1", "c2", "c3"]).await.unwrap();
    env.deploy(&phases).await.unwrap();
    env.wait_ready(DIG, DEADLINE).await.unwrap();

    // http-server on c1 alone to begin with.
    let (_, mut intent) = send(&env, Method::GET, SERVER_PLACEMENT, None).await;
    intent["spec"]["intent"] = json!({"allOf": [{"clusterProvider": "kubesim", "cluster": "c1"}]});
    assert_eq!(
        send(&env, Method::PUT, SERVER_PLACEMENT, Some(intent))
            .await
            .0,
        200
    );
    assert_eq!(
        send(&env, Method::POST, &format!("{DIG}/update"), None)
            .await
            .0,
        202
    );
    let everywhere: &[&str] = &["c1", "c2", "c3"];
    env.wait_placement(
        &[("http-server", &["c1"]), ("http-client", everywhere)],
        DEADLINE,
    )
    .await
    .unwrap();

    // The move, with emcoctl and the example's file in EMCO's format: on c2 alone once it is
    // Ready there.
    let values = env
        .write_values(
            "migrate-values.yaml",
            &json!({"WorkflowClientPort": kit.client_port, "TaskQueue": TASK_QUEUE,
                "Emco": env.url, "From": "c1", "To": "c2", "ReadySeconds": "20"}),
        )
        .unwrap();
    let file = emco_e2e::workspace().join("examples/workflows/migrate.yaml");
    env.apply(&load(&[file], &values).unwrap()).await.unwrap();
    let (status, last) = closed(&env, &kit, "move-server-c2").await;
    assert_eq!(status, 2, "{last}");
    env.wait_placement(
        &[("http-server", &["c2"]), ("http-client", everywhere)],
        DEADLINE,
    )
    .await
    .unwrap();
    env.wait_ready(DIG, DEADLINE).await.unwrap();

    // c3 refuses every connection: the app never becomes Ready there, the workflow puts it back
    // on c2 alone and fails saying so.
    env.clusters
        .fleet()
        .unwrap()
        .set_fault("c3", Fault::down())
        .unwrap();
    migrate_intent(&env, &kit, "move-to-c3", ("c2", "c3")).await;
    let (status, last) = closed(&env, &kit, "move-to-c3").await;
    assert_eq!(status, 3, "{last}");
    let failure = &last["attributes"]["WorkflowExecutionFailedEventAttributes"]["failure"];
    let message = failure["message"].as_str().unwrap();
    assert!(message.starts_with("rolled back to c2"), "{failure}");
    env.clusters
        .fleet()
        .unwrap()
        .set_fault("c3", Fault::default())
        .unwrap();
    env.wait_placement(
        &[("http-server", &["c2"]), ("http-client", everywhere)],
        DEADLINE,
    )
    .await
    .unwrap();
    let (_, intent) = send(&env, Method::GET, SERVER_PLACEMENT, None).await;
    assert_eq!(
        intent["spec"]["intent"],
        json!({"allOf": [{"clusterProvider": "kubesim", "cluster": "c2"}]})
    );
    env.wait_ready(DIG, Duration::from_secs(120)).await.unwrap();
}
