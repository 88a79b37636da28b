//! EMCO's REST contract, service by service: each row is a request and the exact status and body
//! EMCO's Go handler answers, with the Go file it is read from (satra124/emco-base-test `src/`).
//! Rows run in order against one server, so a row may rely on the rows before it.
//!
//! Where we answer differently on purpose the row says so (`differs:`): EMCO answers some bad
//! input with a 500, or silently writes another object than the URL names; we keep a 4xx.
//!
//! Each service's table is an `async fn *_table` run by its own test; `every_route_has_a_row`
//! runs them all and fails for any route and method of `openapi.yaml` that no row sends; the
//! document names every route of the REST API (the dashboard's `/ui` aside; a route it left out
//! would be missing from emco-py too, whose client is generated from it:
//! `python_client_is_generated_from_the_document`).

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use axum::body::Body;
use emco_orchestrator::Orchestrator;
use emco_service::{Config, Metrics};
use emco_store::InMemoryResourceStore;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

/// What a row expects in the body.
enum Body_ {
    /// Exactly this text (EMCO's `http.Error` adds the newline).
    Text(&'static str),
    /// This JSON, compared whole.
    Json(Value),
    /// No body.
    Empty,
    /// Anything (the row checks the status only).
    Any,
}

struct Row {
    method: &'static str,
    path: String,
    body: Option<Value>,
    /// A multipart form instead of the JSON body: the `metadata` part and file parts
    /// `(field, file name, content)`.
    form: Option<(Value, Vec<FilePart>)>,
    /// The `Accept` header, if any.
    accept: Option<&'static str>,
    status: u16,
    expect: Body_,
    go: &'static str,
}

type FilePart = (&'static str, &'static str, Vec<u8>);

fn row(
    method: &'static str,
    path: impl Into<String>,
    body: Option<Value>,
    status: u16,
    expect: Body_,
    go: &'static str,
) -> Row {
    Row {
        method,
        path: path.into(),
        body,
        form: None,
        accept: None,
        status,
        expect,
        go,
    }
}

/// A row whose request is a `multipart/form-data` upload (apps, app profiles, clusters, gac's
/// resources and customizations): a `metadata` part and the file parts.
fn form(
    method: &'static str,
    path: impl Into<String>,
    metadata: Value,
    files: Vec<FilePart>,
    status: u16,
    expect: Body_,
    go: &'static str,
) -> Row {
    Row {
        form: Some((metadata, files)),
        ..row(method, path, None, status, expect, go)
    }
}

impl Row {
    /// Sends `Accept: accept` (EMCO's GETs of objects with a file parse it).
    fn accept(mut self, accept: &'static str) -> Self {
        self.accept = Some(accept);
        self
    }
}

use Body_::{Any, Empty, Json, Text};

fn app() -> axum::Router {
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    emco_service::app(orch, &Config::default(), Metrics::new())
}

/// The method and path of every row sent, for [`every_route_has_a_row`].
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<(String, String)>>);

const BOUNDARY: &str = "contract-test-boundary";

fn multipart_body(metadata: &Value, files: &[FilePart]) -> Vec<u8> {
    let mut body = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\
         Content-Type: application/json\r\n\r\n{metadata}\r\n"
    )
    .into_bytes();
    for (field, name, content) in files {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{field}\"; \
                 filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

async fn run(app: &axum::Router, rec: &Recorder, rows: Vec<Row>) {
    for r in rows {
        rec.0
            .lock()
            .unwrap()
            .push((r.method.to_owned(), r.path.clone()));
        let mut req = Request::builder().method(r.method).uri(&r.path);
        if let Some(accept) = r.accept {
            req = req.header("accept", accept);
        }
        let req = match &r.form {
            Some((metadata, files)) => req
                .header(
                    "content-type",
                    format!("multipart/form-data; boundary={BOUNDARY}"),
                )
                .body(Body::from(multipart_body(metadata, files))),
            None => req
                .header("content-type", "application/json")
                .body(Body::from(
                    r.body.map(|b| b.to_string()).unwrap_or_default(),
                )),
        }
        .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let what = format!("{} {} ({}): got {status} {text:?}", r.method, r.path, r.go);
        assert_eq!(status, r.status, "{what}");
        match r.expect {
            Text(t) => assert_eq!(text, t, "{what}"),
            Json(v) => {
                let got: Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got, v, "{what}");
            }
            Empty => assert!(text.is_empty(), "{what}"),
            Any => {}
        }
    }
}

/// A gzip'd tar of `files` (path, text).
fn tgz(files: &[(&str, &str)]) -> Vec<u8> {
    emco_helm::archive::pack_files(files).unwrap()
}

/// A Helm chart `web` as an app's `file` part.
fn chart() -> Vec<FilePart> {
    vec![(
        "file",
        "web.tgz",
        tgz(&[
            (
                "web/Chart.yaml",
                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
            ),
            ("web/values.yaml", "replicas: 1\n"),
        ]),
    )]
}

/// A profile archive as an app profile's `file` part.
fn profile() -> Vec<FilePart> {
    vec![(
        "file",
        "profile.tgz",
        tgz(&[
            (
                "manifest.yaml",
                "---\nversion: v1\ntype:\n  values: \"override_values.yaml\"\n",
            ),
            ("override_values.yaml", "replicas: 1\n"),
        ]),
    )]
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster: {server: 'https://127.0.0.1:1'}\n\
     users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c1\n  context: {cluster: c1, user: u}\n\
     current-context: c1\n";

/// A kubeconfig as a cluster's `file` part.
fn kubeconfig() -> Vec<FilePart> {
    vec![("file", "kubeconfig", KUBECONFIG.as_bytes().to_vec())]
}

/// A project `p1`, its composite app `ca` v1 and the group `d1`, for the tables that need them.
fn group_rows() -> Vec<Row> {
    vec![
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "p1"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            "/v2/projects/p1/composite-apps",
            Some(json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups"),
            Some(
                json!({"metadata": {"name": "d1"}, "spec": {"compositeProfile": "cp",
                "version": "r1", "logicalCloud": "lc", "overrideValues": []}}),
            ),
            201,
            Any,
            "setup",
        ),
    ]
}

fn meta(name: &str) -> Value {
    json!({"name": name, "description": "", "userData1": "", "userData2": ""})
}

const PROJECTS: &str = "/v2/projects";
const CA: &str = "/v2/projects/p1/composite-apps/ca/v1";
const DIG: &str = "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/d1";

async fn orchestrator_table(rec: &Recorder) {
    let app = app();
    let rows = vec![
        // ---- projects: api/projecthandler.go, module/project.go ----
        row(
            "GET",
            PROJECTS,
            None,
            200,
            Json(Value::Null),
            "projecthandler.go getHandler: nil slice",
        ),
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "p1"}})),
            201,
            Json(json!({"metadata": meta("p1")})),
            "projecthandler.go createHandler",
        ),
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "p1"}})),
            409,
            Text("Project already exists\n"),
            "api/apierrors.go",
        ),
        row(
            "POST",
            PROJECTS,
            None,
            400,
            Text("Empty body\n"),
            "projecthandler.go: io.EOF",
        ),
        // ---- request bodies checked against EMCO's JSON schemas (infra/validation
        // ValidateJsonSchemaData, gojsonschema v1.2.0), on the body as the Go struct writes it
        // back: a missing name is an empty one ----
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"description": "d"}})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "projecthandler.go createHandler, json-schemas/metadata.json",
        ),
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "-".repeat(129)}})),
            400,
            Text(
                "Invalid Input:\nString length must be less than or equal to 128\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "projecthandler.go createHandler, json-schemas/metadata.json",
        ),
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "p9", "userData2": "u".repeat(513)}})),
            400,
            Text("Invalid Input:\nString length must be less than or equal to 512\n"),
            "projecthandler.go createHandler, json-schemas/metadata.json",
        ),
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "p2", "description": null}})),
            201,
            Json(json!({"metadata": meta("p2")})),
            "encoding/json: null leaves the zero value",
        ),
        row(
            "GET",
            "/v2/projects/nope",
            None,
            404,
            Text("Project not found\n"),
            "api/apierrors.go",
        ),
        row(
            "PUT",
            "/v2/projects/p3",
            Some(json!({"metadata": {"name": "p3"}})),
            200,
            Json(json!({"metadata": meta("p3")})),
            "projecthandler.go updateHandler: always 200",
        ),
        row(
            "PUT",
            "/v2/projects/p3",
            Some(json!({"metadata": {"name": "p4"}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "projecthandler.go updateHandler",
        ),
        row(
            "DELETE",
            "/v2/projects/p3",
            None,
            204,
            Empty,
            "projecthandler.go deleteHandler",
        ),
        row(
            "DELETE",
            "/v2/projects/p3",
            None,
            404,
            Text("Project not found\n"),
            "projecthandler.go deleteHandler: looks the project up first",
        ),
        // ---- composite apps: api/composite_app_handler.go ----
        row(
            "POST",
            "/v2/projects/nope/composite-apps",
            Some(json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}})),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "pkg/infra/apierror/apierror.go: db Insert parent resource not found",
        ),
        row(
            "POST",
            "/v2/projects/p1/composite-apps",
            Some(json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}})),
            201,
            Json(json!({"metadata": meta("ca"), "spec": {"compositeAppVersion": "v1"}})),
            "composite_app_handler.go createHandler",
        ),
        row(
            "POST",
            "/v2/projects/p1/composite-apps",
            Some(json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}})),
            409,
            Text("App already exists\n"),
            "api/apierrors.go: `App already exists` matches first",
        ),
        row(
            "GET",
            "/v2/projects/p1/composite-apps/ca/v9",
            None,
            404,
            Text("App not found\n"),
            "api/apierrors.go: `App not found` matches first",
        ),
        row(
            "GET",
            "/v2/projects/nope/composite-apps",
            None,
            404,
            Text("Project not found\n"),
            "composite_app_handler.go getAllCompositeAppsHandler",
        ),
        row(
            "PUT",
            CA,
            Some(json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}})),
            201,
            Any,
            "composite_app_handler.go updateHandler: always 201",
        ),
        row(
            "GET",
            format!("{CA}/apps"),
            None,
            200,
            Json(Value::Null),
            "apphandler.go: nil slice",
        ),
        row(
            "GET",
            format!("{CA}/composite-profiles"),
            None,
            200,
            Json(Value::Null),
            "composite_profilehandler.go: nil slice",
        ),
        row(
            "POST",
            format!("{CA}/composite-profiles"),
            Some(json!({"metadata": {"name": "cp"}})),
            201,
            Json(json!({"metadata": meta("cp")})),
            "composite_profilehandler.go",
        ),
        row(
            "POST",
            format!("{CA}/composite-profiles"),
            Some(json!({"metadata": {"name": "cp"}})),
            409,
            Text("CompositeProfile already exists\n"),
            "api/apierrors.go",
        ),
        row(
            "GET",
            format!("{CA}/composite-profiles/x"),
            None,
            404,
            Text("CompositeProfile not found\n"),
            "api/apierrors.go",
        ),
        row(
            "DELETE",
            format!("{CA}/composite-profiles/x"),
            None,
            404,
            Text("The requested resource not found\n"),
            "apierror.go: db Remove resource not found",
        ),
        // ---- deployment intent groups: deployment_intent_groups_handler.go ----
        row(
            "GET",
            format!("{CA}/deployment-intent-groups"),
            None,
            200,
            Json(Value::Null),
            "getAllDeploymentIntentGroupsHandler: nil slice",
        ),
        row(
            "GET",
            "/v2/projects/nope/composite-apps/ca/v1/deployment-intent-groups",
            None,
            404,
            Text("Project not found\n"),
            "getAllDeploymentIntentGroupsHandler: project first",
        ),
        row(
            "GET",
            "/v2/projects/p1/composite-apps/ca/v9/deployment-intent-groups",
            None,
            404,
            Text("App not found\n"),
            "getAllDeploymentIntentGroupsHandler: then the composite app",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups"),
            Some(
                json!({"metadata": {"name": "d1"}, "spec": {"compositeProfile": "cp",
                "version": "r1", "logicalCloud": "lc", "overrideValues": []}}),
            ),
            201,
            Json(
                json!({"metadata": meta("d1"), "spec": {"compositeProfile": "cp", "version": "r1",
                "logicalCloud": "lc", "overrideValues": []}}),
            ),
            "createDeploymentIntentGroupHandler: a logical cloud created later is accepted",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups"),
            Some(
                json!({"metadata": {"name": "d1"}, "spec": {"compositeProfile": "cp",
                "version": "r1", "logicalCloud": "lc", "overrideValues": []}}),
            ),
            409,
            Text("Intent already exists\n"),
            "api/apierrors.go: `Intent already exists` matches first",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups"),
            Some(
                json!({"metadata": {"name": "d2"}, "spec": {"compositeProfile": "cp",
                "version": "r 1", "logicalCloud": "lc", "overrideValues": []}}),
            ),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "createDeploymentIntentGroupHandler, json-schemas/deployment-group-intent.json",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups"),
            Some(
                json!({"metadata": {"name": "d2"}, "spec": {"compositeProfile": "cp",
                "version": "r1", "logicalCloud": "lc",
                "overrideValues": [{"app": "a", "values": {"k": "v".repeat(129)}}]}}),
            ),
            400,
            Text("Invalid Input:\nString length must be less than or equal to 128\n"),
            "createDeploymentIntentGroupHandler: override values of at most 128 characters",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups"),
            Some(
                json!({"metadata": {"name": "d2"}, "spec": {"compositeProfile": "cp",
                "version": "r1", "logicalCloud": "lc"}}),
            ),
            201,
            Any,
            "differs: EMCO refuses a group without overrideValues (its nil slice is `null`: \
             `Invalid type. Expected: array, given: null`); an absent list is an empty one here",
        ),
        row(
            "GET",
            format!("{CA}/deployment-intent-groups/x"),
            None,
            404,
            Text("DeploymentIntentGroup not found\n"),
            "api/apierrors.go",
        ),
        // ---- generic placement intents, app intents, /intents ----
        row(
            "GET",
            format!("{DIG}/generic-placement-intents"),
            None,
            200,
            Json(Value::Null),
            "getAllGenericPlacementIntentsHandler: nil slice",
        ),
        row(
            "POST",
            format!("{DIG}/generic-placement-intents"),
            Some(json!({"metadata": {"name": "g"}})),
            201,
            Json(json!({"metadata": meta("g")})),
            "generic_placement_intent_handler.go",
        ),
        row(
            "POST",
            format!("{DIG}/generic-placement-intents"),
            Some(json!({"metadata": {"name": "g"}})),
            409,
            Text("Intent already exists\n"),
            "api/apierrors.go",
        ),
        row(
            "GET",
            format!("{DIG}/generic-placement-intents/x"),
            None,
            404,
            Text("Intent not found\n"),
            "api/apierrors.go: `Intent not found` matches GenericPlacementIntent not found",
        ),
        row(
            "PUT",
            format!("{DIG}/generic-placement-intents/g"),
            Some(json!({"metadata": {"name": "g"}})),
            200,
            Any,
            "putGenericPlacementHandler: 200 when it existed",
        ),
        row(
            "PUT",
            format!("{DIG}/generic-placement-intents/h"),
            Some(json!({"metadata": {"name": "h"}})),
            201,
            Any,
            "putGenericPlacementHandler: 201 when new",
        ),
        row(
            "DELETE",
            format!("{DIG}/generic-placement-intents/x"),
            None,
            404,
            Text("The requested resource not found\n"),
            "apierror.go",
        ),
        row(
            "GET",
            format!("{DIG}/intents"),
            None,
            200,
            Json(json!({"intent": null})),
            "add_intents.go GetAllIntents: ListOfIntents{}",
        ),
        row(
            "POST",
            format!("{DIG}/intents"),
            Some(
                json!({"metadata": {"name": "i1"}, "spec": {"intent": {"genericPlacementIntent": "g"}}}),
            ),
            201,
            Any,
            "add_intents_handler.go addIntentHandler",
        ),
        row(
            "GET",
            format!("{DIG}/intents"),
            None,
            200,
            Json(json!({"intent": [{"genericPlacementIntent": "g"}]})),
            "add_intents.go GetAllIntents: the maps only",
        ),
        row(
            "GET",
            format!("{DIG}/intents/?intent=i1"),
            None,
            200,
            Json(json!({"intent": {"genericPlacementIntent": "g"}})),
            "getIntentByNameHandler",
        ),
        row(
            "GET",
            format!("{DIG}/intents/?intent=zz"),
            None,
            404,
            Text("Intent not found\n"),
            "add_intents.go GetIntentByName",
        ),
        row(
            "GET",
            format!("{DIG}/intents/?intent="),
            None,
            400,
            Text("Missing appName in GET request\n"),
            "getIntentByNameHandler (sic)",
        ),
        row(
            "POST",
            format!("{DIG}/intents"),
            Some(
                json!({"metadata": {"name": "i1"}, "spec": {"intent": {"genericPlacementIntent": "g"}}}),
            ),
            409,
            Text("Intent already exists\n"),
            "api/apierrors.go",
        ),
        // ---- lifecycle: instantiation_handler.go ----
        row(
            "POST",
            format!("{DIG}/approve"),
            None,
            202,
            Empty,
            "approveHandler",
        ),
        row(
            "POST",
            format!("{DIG}/approve"),
            None,
            202,
            Empty,
            "instantiation.go Approve: an approved group stays approved",
        ),
        row(
            "POST",
            format!("{DIG}/generic-placement-intents"),
            Some(json!({"metadata": {"name": "late"}})),
            201,
            Any,
            "generic_placement_intent.go: intents after approve leave the state alone",
        ),
        row(
            "PUT",
            DIG,
            Some(
                json!({"metadata": {"name": "d1"}, "spec": {"compositeProfile": "cp",
                "version": "r2", "logicalCloud": "lc", "overrideValues": []}}),
            ),
            409,
            Text("The specified DeploymentIntentGroup is not in Created status\n"),
            "api/apierrors.go: The DeploymentIntentGroup is not updated",
        ),
        // ---- lifecycle refusals in EMCO's words ----
        row(
            "POST",
            format!("{DIG}/terminate"),
            None,
            409,
            Text("DeploymentIntentGroup is not instantiated :d1\n"),
            "differs: EMCO answers 500 with this text (module/instantiation.go, update.go)",
        ),
        row(
            "POST",
            format!("{DIG}/update"),
            None,
            409,
            Text("DeploymentIntentGroup is not instantiated :d1\n"),
            "differs: EMCO answers 500 with this text (module/instantiation.go, update.go)",
        ),
        row(
            "POST",
            format!("{DIG}/stop"),
            None,
            409,
            Text("DeploymentIntentGroup has not been instantiated:d1\n"),
            "differs: EMCO answers 500 with this text (module/instantiation.go, update.go)",
        ),
        // ---- status queries: instantiation_handler.go statusHandler ----
        row(
            "GET",
            format!("{DIG}/status?status=bogus"),
            None,
            400,
            Text("Invalid query status\n"),
            "instantiation_handler.go statusHandler",
        ),
        row(
            "GET",
            format!("{DIG}/status?type=x"),
            None,
            400,
            Text("Invalid query type\n"),
            "instantiation_handler.go statusHandler",
        ),
        row(
            "GET",
            format!("{DIG}/status?output=x"),
            None,
            400,
            Text("Invalid query output\n"),
            "instantiation_handler.go statusHandler",
        ),
        row(
            "GET",
            format!("{DIG}/status?instance="),
            None,
            400,
            Text("Invalid query instance\n"),
            "instantiation_handler.go statusHandler",
        ),
        row(
            "GET",
            format!("{DIG}/status?cluster=a"),
            None,
            400,
            Text("Invalid cluster query\n"),
            "instantiation_handler.go statusHandler",
        ),
        row(
            "GET",
            format!("{DIG}/status?app=-x"),
            None,
            400,
            Text("Invalid app query\n"),
            "instantiation_handler.go statusHandler",
        ),
        row(
            "GET",
            format!("{DIG}/status?resource=-r"),
            None,
            400,
            Text("Invalid resources query\n"),
            "instantiation_handler.go statusHandler",
        ),
        // ---- controllers: controllerhandler.go ----
        row(
            "GET",
            "/v2/controllers",
            None,
            200,
            Json(Value::Null),
            "controllerhandler.go: nil slice",
        ),
        row(
            "POST",
            "/v2/controllers",
            Some(
                json!({"metadata": {"name": "c1"}, "spec": {"host": "h", "port": 9000, "type": "action", "priority": 3}}),
            ),
            201,
            Json(
                json!({"metadata": meta("c1"), "spec": {"host": "h", "port": 9000, "type": "action", "priority": 3}}),
            ),
            "controllerhandler.go createHandler",
        ),
        row(
            "POST",
            "/v2/controllers",
            Some(
                json!({"metadata": {"name": "c1"}, "spec": {"host": "h", "port": 9000, "type": "action", "priority": 3}}),
            ),
            409,
            Text("Controller already exists\n"),
            "controllerhandler.go createHandler",
        ),
        row(
            "PUT",
            "/v2/controllers/c1",
            Some(
                json!({"metadata": {"name": "c1"}, "spec": {"host": "h", "port": 9001, "type": "action", "priority": 3}}),
            ),
            201,
            Any,
            "controllerhandler.go putHandler: always 201",
        ),
        row(
            "POST",
            "/v2/controllers",
            Some(
                json!({"metadata": {"name": "b0"}, "spec": {"host": "h", "port": 9002, "type": "placement"}}),
            ),
            201,
            Any,
            "controllerhandler.go createHandler",
        ),
        row(
            "GET",
            "/v2/controllers",
            None,
            200,
            Json(json!([
                {"metadata": meta("c1"), "spec": {"host": "h", "port": 9001, "type": "action", "priority": 3}},
                {"metadata": meta("b0"), "spec": {"host": "h", "port": 9002, "type": "placement", "priority": 0}}])),
            "controllerhandler.go getHandler: in insertion order (infra/db/mongo.go Find has no \
             sort), an update keeping its place",
        ),
        row(
            "DELETE",
            "/v2/controllers/b0",
            None,
            204,
            Empty,
            "controllerhandler.go deleteHandler",
        ),
        row(
            "GET",
            "/v2/controllers/x",
            None,
            404,
            Text("Controller not found\n"),
            "api/apierrors.go",
        ),
        // ---- apps: apphandler.go, a multipart form of `metadata` and `file` ----
        form(
            "POST",
            format!("{CA}/apps"),
            json!({"metadata": {"name": "web"}}),
            chart(),
            201,
            Json(json!({"metadata": meta("web")})),
            "apphandler.go createAppHandler",
        ),
        form(
            "POST",
            format!("{CA}/apps"),
            json!({"metadata": {"name": "web"}}),
            chart(),
            409,
            Text("App already exists\n"),
            "api/apierrors.go",
        ),
        form(
            "POST",
            format!("{CA}/apps"),
            json!({"metadata": {"name": "web2"}}),
            vec![],
            422,
            Text("Unable to process file\n"),
            "apphandler.go createAppHandler: r.FormFile(\"file\") fails",
        ),
        row(
            "GET",
            format!("{CA}/apps/web"),
            None,
            200,
            Json(json!({"metadata": meta("web")})),
            "apphandler.go getAppHandler: Accept application/json",
        )
        .accept("application/json"),
        row(
            "GET",
            format!("{CA}/apps/nope"),
            None,
            404,
            Text("App not found\n"),
            "apphandler.go getAppHandler, api/apierrors.go",
        )
        .accept("application/json"),
        row(
            "GET",
            format!("{CA}/apps/web"),
            None,
            200,
            Json(json!({"metadata": meta("web")})),
            "differs: EMCO's getAppHandler parses a missing Accept header and answers 406 \
             `mime: no media type`; no Accept is JSON here",
        ),
        form(
            "PUT",
            format!("{CA}/apps/web2"),
            json!({"metadata": {"name": "web2"}}),
            chart(),
            201,
            Json(json!({"metadata": meta("web2")})),
            "apphandler.go updateAppHandler: always 201",
        ),
        form(
            "PUT",
            format!("{CA}/apps/web2"),
            json!({"metadata": {"name": "web2", "description": "d"}}),
            chart(),
            201,
            Any,
            "apphandler.go updateAppHandler: 201 for a replace too",
        ),
        row(
            "DELETE",
            format!("{CA}/apps/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "apphandler.go deleteAppHandler: db Remove resource not found",
        ),
        // ---- app dependencies: app_dependency_handler.go, module/app_dependency.go ----
        row(
            "GET",
            format!("{CA}/apps/web/dependency"),
            None,
            200,
            Json(json!([])),
            "app_dependency.go GetAllAppDependency: made with make",
        ),
        row(
            "POST",
            format!("{CA}/apps/web/dependency"),
            Some(
                json!({"metadata": {"name": "dep1"}, "spec": {"app": "web2", "opStatus": "Ready", "wait": 10}}),
            ),
            201,
            Json(
                json!({"metadata": meta("dep1"), "spec": {"app": "web2", "opStatus": "Ready", "wait": 10}}),
            ),
            "app_dependency_handler.go createAppDependencyHandler",
        ),
        row(
            "POST",
            format!("{CA}/apps/web/dependency"),
            Some(
                json!({"metadata": {"name": "dep1"}, "spec": {"app": "web2", "opStatus": "Ready", "wait": 10}}),
            ),
            409,
            Text("AppDependency already exists\n"),
            "differs: `AppDependency already exists` matches no apierror entry, so EMCO answers 500",
        ),
        row(
            "GET",
            format!("{CA}/apps/web/dependency/nope"),
            None,
            404,
            Text("AppDependency not found\n"),
            "api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{CA}/apps/web/dependency/dep1"),
            Some(
                json!({"metadata": {"name": "dep2"}, "spec": {"app": "web2", "opStatus": "Ready", "wait": 10}}),
            ),
            400,
            Text("Mismatched name in PUT request\n"),
            "differs: updateAppDependencyHandler writes this 400 but does not return, and creates \
             the body's dependency too",
        ),
        row(
            "PUT",
            format!("{CA}/apps/web/dependency/dep1"),
            Some(
                json!({"metadata": {"name": "dep1"}, "spec": {"app": "web2", "opStatus": "Deployed", "wait": 5}}),
            ),
            201,
            Any,
            "updateAppDependencyHandler: always 201",
        ),
        row(
            "DELETE",
            format!("{CA}/apps/web/dependency/nope"),
            None,
            404,
            Text("AppDependency not found\n"),
            "deleteappDependencyHandler: looks the dependency up first",
        ),
        row(
            "DELETE",
            format!("{CA}/apps/web/dependency/dep1"),
            None,
            204,
            Empty,
            "deleteappDependencyHandler",
        ),
        // ---- composite profiles and app profiles: composite_profilehandler.go,
        // app_profilehandler.go (multipart) ----
        row(
            "PUT",
            format!("{CA}/composite-profiles/cp"),
            Some(json!({"metadata": {"name": "cp", "description": "d"}})),
            201,
            Any,
            "composite_profilehandler.go updateHandler: always 201",
        ),
        row(
            "GET",
            format!("{CA}/composite-profiles/cp/profiles"),
            None,
            200,
            Json(Value::Null),
            "app_profilehandler.go getAppProfileHandler: nil slice",
        ),
        form(
            "POST",
            format!("{CA}/composite-profiles/nope/profiles"),
            json!({"metadata": {"name": "pr1"}, "spec": {"app": "web"}}),
            profile(),
            404,
            Text("CompositeProfile not found\n"),
            "module/app_profile.go CreateAppProfile: looks the composite profile up",
        ),
        form(
            "POST",
            format!("{CA}/composite-profiles/cp/profiles"),
            json!({"metadata": {"name": "pr1"}, "spec": {"app": "web"}}),
            profile(),
            201,
            Json(json!({"metadata": meta("pr1"), "spec": {"app": "web"}})),
            "app_profilehandler.go createAppProfileHandler",
        ),
        form(
            "POST",
            format!("{CA}/composite-profiles/cp/profiles"),
            json!({"metadata": {"name": "pr1"}, "spec": {"app": "web"}}),
            profile(),
            409,
            Text("AppProfile already exists\n"),
            "api/apierrors.go",
        ),
        form(
            "POST",
            format!("{CA}/composite-profiles/cp/profiles"),
            json!({"metadata": {"name": "pr2"}, "spec": {"app": "web"}}),
            profile(),
            409,
            Text("App already has an AppProfile\n"),
            "module/app_profile.go CreateAppProfile, api/apierrors.go",
        ),
        row(
            "GET",
            format!("{CA}/composite-profiles/cp/profiles/pr1"),
            None,
            200,
            Json(json!({"metadata": meta("pr1"), "spec": {"app": "web"}})),
            "app_profilehandler.go getAppProfileHandler: Accept application/json",
        )
        .accept("application/json"),
        row(
            "GET",
            format!("{CA}/composite-profiles/cp/profiles/nope"),
            None,
            404,
            Text("AppProfile not found\n"),
            "api/apierrors.go",
        )
        .accept("application/json"),
        form(
            "PUT",
            format!("{CA}/composite-profiles/cp/profiles/pr1"),
            json!({"metadata": {"name": "pr1", "description": "d"}, "spec": {"app": "web"}}),
            profile(),
            201,
            Any,
            "app_profilehandler.go updateAppProfileHandler: always 201",
        ),
        row(
            "DELETE",
            format!("{CA}/composite-profiles/cp/profiles/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteAppProfileHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{CA}/composite-profiles/cp/profiles/pr1"),
            None,
            204,
            Empty,
            "deleteAppProfileHandler",
        ),
        // ---- /intents/{groupIntent}: add_intents_handler.go ----
        row(
            "PUT",
            format!("{DIG}/intents/i2"),
            Some(
                json!({"metadata": {"name": "i2"}, "spec": {"intent": {"genericPlacementIntent": "g"}}}),
            ),
            201,
            Any,
            "putIntentHandler: 201 when new",
        ),
        row(
            "PUT",
            format!("{DIG}/intents/i2"),
            Some(
                json!({"metadata": {"name": "i2"}, "spec": {"intent": {"genericPlacementIntent": "h"}}}),
            ),
            200,
            Any,
            "putIntentHandler: 200 when it existed",
        ),
        row(
            "DELETE",
            format!("{DIG}/intents/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteIntentHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{DIG}/intents/i2"),
            None,
            204,
            Empty,
            "deleteIntentHandler",
        ),
        // ---- app intents: app_intent_handler.go ----
        row(
            "GET",
            format!("{DIG}/generic-placement-intents/g/app-intents"),
            None,
            200,
            Json(Value::Null),
            "getAllAppIntentsHandler: nil slice",
        ),
        row(
            "PUT",
            format!("{DIG}/generic-placement-intents/g/app-intents/ai"),
            Some(json!({"metadata": {"name": "ai"}, "spec": {"app": "web",
                "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1"}]}}})),
            201,
            Any,
            "putAppIntentHandler: 201 when new",
        ),
        row(
            "PUT",
            format!("{DIG}/generic-placement-intents/g/app-intents/ai"),
            Some(json!({"metadata": {"name": "ai"}, "spec": {"app": "web",
                "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c2"}]}}})),
            200,
            Any,
            "putAppIntentHandler: 200 when it existed",
        ),
        row(
            "GET",
            format!("{DIG}/generic-placement-intents/g/app-intents/?app=x&app-name=web"),
            None,
            200,
            Json(json!({"app": "web",
                "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c2"}]}})),
            "getAllIntentsByAppHandler: the route needs app, the handler reads app-name",
        ),
        row(
            "GET",
            format!("{DIG}/generic-placement-intents/g/app-intents/?app=x&app-name=db"),
            None,
            200,
            Json(json!({"intent": {}})),
            "getAllIntentsByAppHandler: an empty spec when no intent places the app",
        ),
        row(
            "GET",
            format!("{DIG}/generic-placement-intents/g/app-intents/?app=x"),
            None,
            400,
            Text("Missing appName in GET request\n"),
            "getAllIntentsByAppHandler",
        ),
        row(
            "DELETE",
            format!("{DIG}/generic-placement-intents/g/app-intents/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteAppIntentHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{DIG}/generic-placement-intents/g/app-intents/ai"),
            None,
            204,
            Empty,
            "deleteAppIntentHandler",
        ),
        // ---- lifecycle refusals: instantiation_handler.go, update_handler.go ----
        row(
            "POST",
            format!("{CA}/deployment-intent-groups/d2/instantiate"),
            None,
            409,
            Text("DeploymentIntentGroup must be Approved before instantiatingd2\n"),
            "differs: EMCO answers 500 with this cause (module/instantiation.go handleStateInfo)",
        ),
        row(
            "POST",
            format!("{CA}/deployment-intent-groups/nope/instantiate"),
            None,
            404,
            Text("DeploymentIntentGroup not found\n"),
            "instantiateHandler: api/apierrors.go",
        ),
        row(
            "POST",
            format!("{DIG}/rollback"),
            Some(json!({"metadata": {}, "spec": {"revision": "1"}})),
            409,
            Text(
                "cannot rollback deployment intent group in state Approved: only an instantiated deployment intent group can change revision\n",
            ),
            "differs: EMCO's Rollback checks no state and answers 500 `No matching ContextId found`",
        ),
        row(
            "POST",
            format!("{DIG}/migrate"),
            Some(
                json!({"spec": {"targetCompositeAppVersion": "v1", "targetDeploymentIntentGroup": "d2"}}),
            ),
            409,
            Text("DeploymentIntentGroup is not instantiated :d1\n"),
            "differs: EMCO answers 500 with this cause (module/instantiation.go Migrate)",
        ),
        // ---- deletes: db Remove ----
        row(
            "DELETE",
            format!("{CA}/deployment-intent-groups/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteDeploymentIntentGroupHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            DIG,
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "deleteDeploymentIntentGroupHandler: db Remove parent child constraint",
        ),
        row(
            "DELETE",
            format!("{CA}/deployment-intent-groups/d2"),
            None,
            204,
            Empty,
            "deleteDeploymentIntentGroupHandler",
        ),
        row(
            "DELETE",
            format!("{CA}/apps/web2"),
            None,
            204,
            Empty,
            "apphandler.go deleteAppHandler",
        ),
        row(
            "DELETE",
            "/v2/controllers/nope",
            None,
            404,
            Text("The requested resource not found\n"),
            "controllerhandler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            "/v2/controllers/c1",
            None,
            204,
            Empty,
            "controllerhandler.go deleteHandler",
        ),
        row(
            "POST",
            "/v2/projects/p1/composite-apps",
            Some(json!({"metadata": {"name": "ca2"}, "spec": {"compositeAppVersion": "v1"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "DELETE",
            "/v2/projects/p1/composite-apps/ca2/v1",
            None,
            204,
            Empty,
            "composite_app_handler.go deleteHandler",
        ),
        row(
            "DELETE",
            "/v2/projects/p1/composite-apps/ca2/v1",
            None,
            404,
            Text("The requested resource not found\n"),
            "composite_app_handler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            CA,
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "composite_app_handler.go deleteHandler: db Remove parent child constraint",
        ),
        // ---- routes nobody serves: gorilla/mux defaults ----
        row(
            "GET",
            "/v2/nothing",
            None,
            404,
            Text("404 page not found\n"),
            "gorilla/mux NotFound",
        ),
        row(
            "GET",
            format!("{DIG}/intents/"),
            None,
            404,
            Text("404 page not found\n"),
            "the query route needs its query",
        ),
    ];
    run(&app, rec, rows).await;
}

async fn clm_table(rec: &Recorder) {
    let app = app();
    let cp = "/v2/cluster-providers";
    let rows = vec![
        row(
            "GET",
            cp,
            None,
            200,
            Json(json!([])),
            "clusterhandler.go: made with make",
        ),
        row(
            "POST",
            cp,
            Some(json!({"metadata": {"name": "edge"}})),
            201,
            Json(json!({"metadata": meta("edge")})),
            "clusterhandler.go createClusterProviderHandler",
        ),
        row(
            "POST",
            cp,
            Some(json!({"metadata": {"name": "edge"}})),
            409,
            Text("ClusterProvider already exists\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "POST",
            cp,
            Some(json!({"metadata": {"name": "edge_"}})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "clusterhandler.go createClusterProviderHandler, json-schemas/metadata.json",
        ),
        row(
            "PUT",
            format!("{cp}/edge"),
            Some(json!({"metadata": {"name": "edge"}})),
            201,
            Any,
            "putClusterProviderHandler: 201 either way",
        ),
        row(
            "PUT",
            format!("{cp}/edge"),
            Some(json!({"metadata": {"name": "other"}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "putClusterProviderHandler",
        ),
        row(
            "GET",
            format!("{cp}/nope"),
            None,
            404,
            Text("Cluster provider not found\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{cp}/nope/clusters"),
            None,
            404,
            Text("Cluster provider not found\n"),
            "getClusterHandler",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters"),
            None,
            200,
            Json(json!([])),
            "getClusterHandler",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters?label=none"),
            None,
            200,
            Json(json!([])),
            "cluster.go GetClustersWithLabel: make([]string, 0)",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/labels"),
            None,
            404,
            Text("Cluster not found\n"),
            "getClusterLabelHandler",
        ),
        row(
            "POST",
            format!("{cp}/edge/clusters/c1/labels"),
            Some(json!({"clusterLabel": "east west"})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "clusterhandler.go createClusterLabelHandler, json-schemas/cluster-label.json",
        ),
        row(
            "POST",
            format!("{cp}/edge/clusters/c1/labels"),
            Some(json!({"clusterLabel": "east"})),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "apierror.go: db Insert parent resource not found",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1"),
            None,
            404,
            Text("Cluster not found\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1"),
            None,
            404,
            Text("The requested resource not found\n"),
            "apierror.go: db Remove resource not found",
        ),
        row(
            "GET",
            "/v2/clm-controllers",
            None,
            200,
            Json(Value::Null),
            "clm controller.go: nil slice",
        ),
        row(
            "GET",
            "/v2/clm-controllers/x",
            None,
            404,
            Text("ClmController not found\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "DELETE",
            cp,
            None,
            405,
            Empty,
            "gorilla/mux: the path matches, the method does not",
        ),
        // ---- clusters: clusterhandler.go createClusterHandler, a multipart form ----
        form(
            "POST",
            format!("{cp}/edge/clusters"),
            json!({"metadata": {"name": "c1"}}),
            kubeconfig(),
            201,
            Json(
                json!({"metadata": meta("c1"), "spec": {"gitOps": {"gitOpsType": "",
                "gitOpsReferenceObject": "", "gitOpsResourceObject": ""}}}),
            ),
            "createClusterHandler; Cluster.Spec is a struct, written whole",
        ),
        form(
            "POST",
            format!("{cp}/edge/clusters"),
            json!({"metadata": {"name": "c1"}}),
            kubeconfig(),
            409,
            Text("Cluster already exists\n"),
            "src/clm/api/apierrors.go",
        ),
        form(
            "POST",
            format!("{cp}/nope/clusters"),
            json!({"metadata": {"name": "c1"}}),
            kubeconfig(),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "apierror.go: db Insert parent resource not found",
        ),
        form(
            "POST",
            format!("{cp}/edge/clusters"),
            json!({"metadata": {"name": "c2"}}),
            vec![],
            422,
            Text("Unable to process file\n"),
            "createClusterHandler: no gitOpsType, so the file is required",
        ),
        form(
            "PUT",
            format!("{cp}/edge/clusters/c1"),
            json!({"metadata": {"name": "c1", "description": "d"}}),
            kubeconfig(),
            201,
            Any,
            "differs: clm's api.go registers no PUT for a cluster (gorilla/mux 405); ours \
             replaces it, as emcoctl update asks",
        ),
        // ---- cluster labels ----
        row(
            "POST",
            format!("{cp}/edge/clusters/c1/labels"),
            Some(json!({"clusterLabel": "east"})),
            201,
            Json(json!({"clusterLabel": "east"})),
            "createClusterLabelHandler",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/labels/east"),
            None,
            200,
            Json(json!({"clusterLabel": "east"})),
            "getClusterLabelHandler",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/labels/nope"),
            None,
            404,
            Text("Cluster label not found\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{cp}/edge/clusters/c1/labels/east"),
            Some(json!({"clusterLabel": "west"})),
            400,
            Text("Mismatched label name in PUT request\n"),
            "putClusterLabelHandler",
        ),
        row(
            "PUT",
            format!("{cp}/edge/clusters/c1/labels/west"),
            Some(json!({"clusterLabel": "west"})),
            201,
            Json(json!({"clusterLabel": "west"})),
            "putClusterLabelHandler: 201 either way",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1/labels/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteClusterLabelHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1/labels/west"),
            None,
            204,
            Empty,
            "deleteClusterLabelHandler",
        ),
        // ---- cluster kv-pairs ----
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/kv-pairs"),
            None,
            200,
            Json(json!([])),
            "getClusterKvPairsHandler: made with make",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/nope/kv-pairs"),
            None,
            404,
            Text("Cluster not found\n"),
            "getClusterKvPairsHandler: the cluster first",
        ),
        row(
            "POST",
            format!("{cp}/edge/clusters/c1/kv-pairs"),
            Some(json!({"metadata": {"name": "kv1"}, "spec": {"kv": [{"a": "b"}]}})),
            201,
            Json(json!({"metadata": meta("kv1"), "spec": {"kv": [{"a": "b"}]}})),
            "createClusterKvPairsHandler",
        ),
        row(
            "POST",
            format!("{cp}/edge/clusters/c1/kv-pairs"),
            Some(json!({"metadata": {"name": "kv1"}, "spec": {"kv": [{"a": "b"}]}})),
            409,
            Text("Cluster KV Pair already exists\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/kv-pairs/nope"),
            None,
            404,
            Text("Cluster key value pair not found\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/kv-pairs/kv1?key=a"),
            None,
            200,
            Json(json!({"value": "b"})),
            "getClusterKvPairsHandler: ?key=",
        ),
        row(
            "GET",
            format!("{cp}/edge/clusters/c1/kv-pairs/kv1?key=zz"),
            None,
            404,
            Text("Cluster KV pair key value not found\n"),
            "src/clm/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{cp}/edge/clusters/c1/kv-pairs/kv1"),
            Some(json!({"metadata": {"name": "kv2"}, "spec": {"kv": [{"a": "b"}]}})),
            400,
            Text("Mismatched Key Value pair name in PUT request\n"),
            "putClusterKvPairsHandler",
        ),
        row(
            "PUT",
            format!("{cp}/edge/clusters/c1/kv-pairs/kv1"),
            Some(json!({"metadata": {"name": "kv1"}, "spec": {"kv": [{"a": "c"}]}})),
            201,
            Any,
            "putClusterKvPairsHandler: 201 either way",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1/kv-pairs/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteClusterKvPairsHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{cp}/edge"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "deleteClusterProviderHandler: db Remove parent child constraint",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1/kv-pairs/kv1"),
            None,
            204,
            Empty,
            "deleteClusterKvPairsHandler",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1/labels/east"),
            None,
            204,
            Empty,
            "deleteClusterLabelHandler",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/clusters/c1"),
            None,
            204,
            Empty,
            "deleteClusterHandler",
        ),
        // ---- clm-controllers: controllerhandler.go ----
        row(
            "POST",
            "/v2/clm-controllers",
            Some(json!({"metadata": {"name": "cc"}, "spec": {"host": "h", "port": 1}})),
            201,
            Any,
            "setup",
        ),
        row(
            "PUT",
            "/v2/clm-controllers/cc",
            Some(json!({"metadata": {"name": "dd"}, "spec": {"host": "h", "port": 1}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "clm controllerhandler.go putHandler",
        ),
        row(
            "PUT",
            "/v2/clm-controllers/cc",
            Some(json!({"metadata": {"name": "cc"}, "spec": {"host": "h", "port": 2}})),
            200,
            Json(json!({"metadata": meta("cc"), "spec": {"host": "h", "port": 2}})),
            "clm controllerhandler.go putHandler: 200",
        ),
        row(
            "DELETE",
            "/v2/clm-controllers/nope",
            None,
            404,
            Text("The requested resource not found\n"),
            "clm controllerhandler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            "/v2/clm-controllers/cc",
            None,
            204,
            Empty,
            "clm controllerhandler.go deleteHandler",
        ),
        // ---- cluster sync objects: clusterhandler.go, json-schemas/cluster-kv.json ----
        row(
            "GET",
            format!("{cp}/edge/cluster-sync-objects"),
            None,
            200,
            Json(json!([])),
            "getClusterSyncObjectsHandler: made with make",
        ),
        row(
            "POST",
            format!("{cp}/edge/cluster-sync-objects"),
            Some(json!({"metadata": {"name": "s1"}, "spec": {"kv": [{"gitRepo": "r"}]}})),
            201,
            Json(json!({"metadata": meta("s1"), "spec": {"kv": [{"gitRepo": "r"}]}})),
            "createClusterSyncObjectsHandler",
        ),
        row(
            "POST",
            format!("{cp}/edge/cluster-sync-objects"),
            Some(json!({"metadata": {"name": "s1"}, "spec": {"kv": [{"gitRepo": "r"}]}})),
            409,
            Text("Cluster Sync Objects already exists\n"),
            "differs: clm's table has no entry for this text, so EMCO answers 500",
        ),
        row(
            "GET",
            format!("{cp}/edge/cluster-sync-objects/nope"),
            None,
            404,
            Text("Cluster sync object not found\n"),
            "differs: clm's table has no entry for this text, so EMCO answers 500",
        ),
        row(
            "PUT",
            format!("{cp}/edge/cluster-sync-objects/s1"),
            Some(json!({"metadata": {"name": "s2"}, "spec": {"kv": [{"gitRepo": "r"}]}})),
            400,
            Text("Mismatched cluster sync object name in PUT request\n"),
            "putClusterSyncObjectsHandler",
        ),
        row(
            "PUT",
            format!("{cp}/edge/cluster-sync-objects/s1"),
            Some(json!({"metadata": {"name": "s1"}, "spec": {"kv": [{"gitRepo": "s"}]}})),
            201,
            Any,
            "putClusterSyncObjectsHandler: 201",
        ),
        row(
            "POST",
            format!("{cp}/edge/cluster-sync-objects"),
            Some(json!({"metadata": {"name": "git"}, "spec": {"kv": [
                {"gitType": "github"}, {"userName": "u"}, {"gitToken": "ghp_x"}]}})),
            201,
            Any,
            "createClusterSyncObjectsHandler",
        ),
        row(
            "GET",
            format!("{cp}/edge/cluster-sync-objects"),
            None,
            200,
            // In creation order, as EMCO's MongoDB lists them.
            Json(json!([
                {"metadata": meta("s1"), "spec": {"kv": [{"gitRepo": "s"}]}},
                {"metadata": meta("git"), "spec": {"kv": [
                    {"gitType": "github"}, {"userName": "u"}, {"gitToken": "********"}]}}])),
            "differs: EMCO lists the token; ours masks credentials in lists (#20)",
        ),
        row(
            "GET",
            format!("{cp}/edge/cluster-sync-objects/git"),
            None,
            200,
            Json(json!({"metadata": meta("git"), "spec": {"kv": [
                {"gitType": "github"}, {"userName": "u"}, {"gitToken": "ghp_x"}]}})),
            "getClusterSyncObjectsHandler: one object whole",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/cluster-sync-objects/git"),
            None,
            204,
            Empty,
            "deleteClusterSyncObjectsHandler",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/cluster-sync-objects/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteClusterSyncObjectsHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{cp}/edge/cluster-sync-objects/s1"),
            None,
            204,
            Empty,
            "deleteClusterSyncObjectsHandler",
        ),
        row(
            "DELETE",
            format!("{cp}/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "deleteClusterProviderHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{cp}/edge"),
            None,
            204,
            Empty,
            "deleteClusterProviderHandler",
        ),
    ];
    run(&app, rec, rows).await;
}

async fn dcm_table(rec: &Recorder) {
    let app = app();
    let lcs = "/v2/projects/p1/logical-clouds";
    let lc = "/v2/projects/p1/logical-clouds/lc1";
    let rows = vec![
        row(
            "POST",
            "/v2/projects/nope/logical-clouds",
            Some(json!({"metadata": {"name": "lc1"}, "spec": {"level": "0"}})),
            404,
            Text("Project not found\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "POST",
            PROJECTS,
            Some(json!({"metadata": {"name": "p1"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "GET",
            lcs,
            None,
            200,
            Json(Value::Null),
            "logicalcloud.go GetAll: nil slice",
        ),
        row(
            "POST",
            lcs,
            Some(json!({"metadata": {"name": "lc0"}, "spec": {"level": "0", "labels": null}})),
            201,
            Any,
            "logicalCloudHandler.go createHandler: null labels are Go's nil map",
        ),
        row(
            "POST",
            lcs,
            Some(
                json!({"metadata": {"name": "lc1"}, "spec": {"namespace": "ns1",
            "user": {"userName": "u1"}}}),
            ),
            201,
            Any,
            "logicalCloudHandler.go createHandler",
        ),
        row(
            "POST",
            lcs,
            Some(
                json!({"metadata": {"name": "lc1"}, "spec": {"namespace": "ns1",
            "user": {"userName": "u1"}}}),
            ),
            409,
            Text("Logical Cloud already exists\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "POST",
            lcs,
            Some(json!({"metadata": {"name": "lc-nouser"}, "spec": {"namespace": "ns9"}})),
            201,
            Any,
            "logicalCloudHandler.go createHandler, pkg/module/logicalcloud.go Create: no user check (examples/test-cert/logical-clouds.yaml has none)",
        ),
        row(
            "GET",
            format!("{lcs}/x"),
            None,
            404,
            Text("Logical Cloud not found\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lc}/cluster-references"),
            None,
            400,
            Text("No Cluster References associated\n"),
            "cluster.go GetAllClusters",
        ),
        row(
            "GET",
            format!("{lcs}/x/cluster-references"),
            None,
            404,
            Text("Logical Cloud not found\n"),
            "clusterHandler.go: the logical cloud first",
        ),
        row(
            "POST",
            format!("{lcs}/x/cluster-references"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": "c1"}}),
            ),
            404,
            Text("Logical Cloud not found\n"),
            "clusterHandler.go createHandler",
        ),
        row(
            "POST",
            format!("{lc}/cluster-references"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": "c1",
                "loadBalancerIP": "192.168.100.100/32"}}),
            ),
            400,
            Text("Invalid Input:\nString length must be less than or equal to 16\n"),
            "clusterHandler.go createHandler, json-schemas/cluster-reference.json",
        ),
        row(
            "POST",
            lcs,
            Some(
                json!({"metadata": {"name": "lc9"}, "spec": {"level": "1", "namespace": "ns9",
                "user": {"userName": "u".repeat(21), "type": "certificate"}}}),
            ),
            400,
            Text("Invalid Input:\nString length must be less than or equal to 20\n"),
            "logicalCloudHandler.go createHandler, json-schemas/logical-cloud.json",
        ),
        row(
            "POST",
            format!("{lc}/user-permissions"),
            Some(
                json!({"metadata": {"name": "up9", "userData1": "u".repeat(513)},
                "spec": {"namespace": "ns9", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}}),
            ),
            400,
            Text("Invalid Input:\nString length must be less than or equal to 512\n"),
            "userPermissionHandler.go createHandler, json-schemas/user-permission.json",
        ),
        row(
            "POST",
            format!("{lc}/cluster-references"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": "c1"}}),
            ),
            201,
            Any,
            "cluster.go CreateCluster: the clm cluster is not looked up",
        ),
        row(
            "POST",
            format!("{lc}/cluster-references"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": "c1"}}),
            ),
            409,
            Text("Cluster reference already exists\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{lc}/cluster-references/r1"),
            Some(
                json!({"metadata": {"name": "r2"}, "spec": {"clusterProvider": "edge", "cluster": "c1"}}),
            ),
            409,
            Text("Cluster Reference mismatch\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lc}/cluster-references/x"),
            None,
            404,
            Text("Cluster reference not found\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lc}/user-permissions"),
            None,
            200,
            Json(Value::Null),
            "userpermissions.go: nil slice",
        ),
        row(
            "POST",
            format!("{lc}/user-permissions"),
            Some(json!({"metadata": {"name": "up"},
            "spec": {"namespace": "ns1", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}})),
            201,
            Any,
            "userPermissionHandler.go",
        ),
        row(
            "POST",
            format!("{lc}/user-permissions"),
            Some(json!({"metadata": {"name": "up"},
            "spec": {"namespace": "ns1", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}})),
            409,
            Text("User Permission already exists\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lc}/user-permissions/x"),
            None,
            404,
            Text("User Permission not found\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "POST",
            format!("{lc}/cluster-quotas"),
            Some(json!({"metadata": {"name": "q"}, "spec": {"pods": "5"}})),
            201,
            Any,
            "quotaHandler.go",
        ),
        row(
            "POST",
            format!("{lc}/cluster-quotas"),
            Some(json!({"metadata": {"name": "q"}, "spec": {"pods": "5"}})),
            409,
            Text("Quota already exists\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lc}/cluster-quotas/x"),
            None,
            404,
            Text("Cluster Quota not found\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/cluster-quotas"),
            Some(json!({"metadata": {"name": "q"}, "spec": {"pods": "5"}})),
            400,
            Text("Cluster Quotas not allowed for Logical Cloud Level 0\n"),
            "quota.go CreateQuota",
        ),
        row(
            "POST",
            format!("{lcs}/x/cluster-quotas"),
            Some(json!({"metadata": {"name": "q"}, "spec": {"pods": "5"}})),
            404,
            Text("Logical Cloud not found\n"),
            "quota.go CreateQuota",
        ),
        row(
            "GET",
            format!("{lc}/kv-pairs"),
            None,
            200,
            Json(Value::Null),
            "keyvalue.go: nil slice",
        ),
        row(
            "POST",
            format!("{lc}/kv-pairs"),
            Some(json!({"metadata": {"name": "k"}, "spec": {"kv": [{"a": "b"}]}})),
            201,
            Any,
            "keyValueHandler.go",
        ),
        row(
            "POST",
            format!("{lc}/kv-pairs"),
            Some(json!({"metadata": {"name": "k"}, "spec": {"kv": [{"a": "b"}]}})),
            409,
            Text("Key Value already exists\n"),
            "src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lc}/kv-pairs/x"),
            None,
            404,
            Text("Key Value not found\n"),
            "src/dcm/api/apierrors.go",
        ),
        // ---- PUTs: logicalCloudHandler.go putHandler, the items' updateHandlers ----
        row(
            "PUT",
            format!("{lcs}/nope"),
            Some(json!({"metadata": {"name": "nope"}, "spec": {"level": "0"}})),
            404,
            Text("Logical Cloud not found\n"),
            "logicalCloudHandler.go putHandler: looks the logical cloud up first",
        ),
        row(
            "PUT",
            lc,
            Some(
                json!({"metadata": {"name": "lc2"}, "spec": {"namespace": "ns1", "user": {"userName": "u1"}}}),
            ),
            409,
            Text("Logical Cloud name mismatch\n"),
            "logicalcloud.go UpdateLogicalCloud, src/dcm/api/apierrors.go",
        ),
        row(
            "PUT",
            lc,
            Some(
                json!({"metadata": {"name": "lc1", "description": "d"}, "spec": {"namespace": "ns1",
                "user": {"userName": "u1"}}}),
            ),
            201,
            Any,
            "logicalCloudHandler.go putHandler: 201",
        ),
        row(
            "PUT",
            format!("{lc}/user-permissions/up"),
            Some(json!({"metadata": {"name": "up2"},
                "spec": {"namespace": "ns1", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}})),
            409,
            Text("Permission name mismatch\n"),
            "userpermissions.go UpdateUserPerm, src/dcm/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{lc}/user-permissions/up"),
            Some(json!({"metadata": {"name": "up"},
                "spec": {"namespace": "ns1", "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}})),
            200,
            Any,
            "userPermissionHandler.go updateHandler: 200",
        ),
        row(
            "GET",
            format!("{lcs}/lc0/cluster-quotas"),
            None,
            200,
            Json(Value::Null),
            "quota.go GetAllQuotas: nil slice",
        ),
        row(
            "PUT",
            format!("{lc}/cluster-quotas/q"),
            Some(json!({"metadata": {"name": "q2"}, "spec": {"pods": "5"}})),
            409,
            Text("Quota name mismatch\n"),
            "quota.go UpdateQuota, src/dcm/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{lc}/cluster-quotas/q"),
            Some(json!({"metadata": {"name": "q"}, "spec": {"pods": "6"}})),
            200,
            Any,
            "quotaHandler.go updateHandler: 200",
        ),
        row(
            "PUT",
            format!("{lc}/kv-pairs/k"),
            Some(json!({"metadata": {"name": "k2"}, "spec": {"kv": [{"a": "b"}]}})),
            409,
            Text("KV pair name mismatch\n"),
            "keyvalue.go UpdateKVPair, src/dcm/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{lc}/kv-pairs/k"),
            Some(json!({"metadata": {"name": "k"}, "spec": {"kv": [{"a": "c"}]}})),
            200,
            Any,
            "keyValueHandler.go updateHandler: 200",
        ),
        // ---- deletes: db Remove ----
        row(
            "DELETE",
            format!("{lc}/user-permissions/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "userPermissionHandler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{lc}/user-permissions/up"),
            None,
            204,
            Empty,
            "userPermissionHandler.go deleteHandler",
        ),
        row(
            "DELETE",
            format!("{lc}/cluster-quotas/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "quotaHandler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{lc}/cluster-quotas/q"),
            None,
            204,
            Empty,
            "quotaHandler.go deleteHandler",
        ),
        row(
            "DELETE",
            format!("{lc}/kv-pairs/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "keyValueHandler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{lc}/kv-pairs/k"),
            None,
            204,
            Empty,
            "keyValueHandler.go deleteHandler",
        ),
        row(
            "DELETE",
            format!("{lcs}/nope"),
            None,
            404,
            Text("Logical Cloud not found\n"),
            "logicalcloud.go Delete: looks the logical cloud up first",
        ),
        row(
            "DELETE",
            lc,
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "logicalcloud.go Delete: db Remove parent child constraint",
        ),
        // ---- kubeconfig: clusterHandler.go getConfigHandler, cluster.go GetClusterConfig ----
        row(
            "GET",
            format!("{lc}/cluster-references/nope/kubeconfig"),
            None,
            404,
            Text("Cluster reference not found\n"),
            "getConfigHandler: the reference before its config",
        ),
        row(
            "GET",
            format!("{lc}/cluster-references/r1/kubeconfig"),
            None,
            409,
            Text("Logical Cloud hasn't been instantiated\n"),
            "cluster.go GetClusterConfig: no status context yet",
        ),
        row(
            "DELETE",
            format!("{lc}/cluster-references/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "clusterHandler.go deleteHandler: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{lc}/cluster-references/r1"),
            None,
            204,
            Empty,
            "clusterHandler.go deleteHandler: never instantiated, removed",
        ),
        // ---- lifecycle: logicalCloudHandler.go, module/apply.go, logicalcloud.go ----
        row(
            "POST",
            format!("{lcs}/nope/instantiate"),
            None,
            404,
            Text("Logical Cloud not found\n"),
            "instantiateHandler: the logical cloud first",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/instantiate"),
            None,
            400,
            Text("No Cluster References associated\n"),
            "instantiateHandler: cluster.go GetAllClusters",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/terminate"),
            None,
            400,
            Text("No Cluster References associated\n"),
            "terminateHandler: cluster.go GetAllClusters",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/stop"),
            None,
            409,
            Text("LogicalCloud has not been asked to instantiate: \n"),
            "logicalcloud.go Stop: Created, src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lcs}/lc0/status?status=bogus"),
            None,
            400,
            Text("Invalid query status\n"),
            "logicalCloudHandler.go statusHandler",
        ),
        row(
            "GET",
            format!("{lcs}/lc0/status?output=bogus"),
            None,
            400,
            Text("Invalid query output\n"),
            "logicalCloudHandler.go statusHandler",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/cluster-references"),
            Some(
                json!({"metadata": {"name": "r0"}, "spec": {"clusterProvider": "edge", "cluster": "c1"}}),
            ),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/terminate"),
            None,
            202,
            Empty,
            "apply.go Terminate: never instantiated, nothing to do",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/instantiate"),
            None,
            202,
            Empty,
            "instantiateHandler: an admin cloud",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/instantiate"),
            None,
            409,
            Text("The Logical Cloud is already instantiated\n"),
            "apply.go Instantiate, src/dcm/api/apierrors.go",
        ),
        row(
            "GET",
            format!("{lcs}/lc0/status"),
            None,
            200,
            Any,
            "logicalCloudHandler.go statusHandler",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/update"),
            None,
            202,
            Json(json!(2)),
            "differs: EMCO's updateHandler answers 202 with the JSON of an empty LogicalCloud; \
             ours the new revision, as a DIG update",
        ),
        row(
            "DELETE",
            format!("{lcs}/lc0"),
            None,
            409,
            Text("The Logical Cloud is instantiated, please terminate first\n"),
            "logicalcloud.go Delete, src/dcm/api/apierrors.go",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/terminate"),
            None,
            202,
            Empty,
            "terminateHandler",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/stop"),
            None,
            200,
            Empty,
            "stopHandler: Terminated becomes TerminateStopped; 200",
        ),
        row(
            "POST",
            format!("{lcs}/lc0/stop"),
            None,
            409,
            Text("LogicalCloud termination already stopped: \n"),
            "logicalcloud.go Stop, src/dcm/api/apierrors.go",
        ),
        row(
            "DELETE",
            format!("{lcs}/lc0/cluster-references/r0"),
            None,
            204,
            Empty,
            "clusterHandler.go deleteHandler: terminated, removed",
        ),
        row(
            "DELETE",
            format!("{lcs}/lc0"),
            None,
            204,
            Empty,
            "logicalcloud.go Delete: terminated, its contexts go first",
        ),
    ];
    run(&app, rec, rows).await;
}

async fn gac_and_hpa_table(rec: &Recorder) {
    let app = app();
    let gac = format!("{DIG}/generic-k8s-intents");
    let hpa = format!("{DIG}/hpa-intents");
    let consumers = format!("{hpa}/h1/hpa-resource-consumers");
    let resource = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"app": "web", "newObject": "true",
            "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}}})
    };
    let configmap = || -> Vec<FilePart> {
        vec![(
            "file",
            "cm.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: v\n".to_vec(),
        )]
    };
    let customization = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"clusterSpecific": "false",
            "clusterInfo": {"scope": "label", "clusterProvider": "edge", "clusterLabel": "east",
                "mode": "allow"},
            "patchType": "json", "patchJson": [{"op": "replace", "path": "/data/k", "value": "w"}]}})
    };
    run(&app, rec, group_rows()).await;
    let rows = vec![
        // src/genericactioncontroller/api/generick8sintent.go, pkg/module/module.go
        row(
            "GET",
            gac.clone(),
            None,
            200,
            Json(Value::Null),
            "generick8sintent.go: nil slice",
        ),
        row(
            "POST",
            gac.clone(),
            Some(json!({"metadata": {"description": "d"}})),
            400,
            Text("genericK8sIntent name may not be empty\n"),
            "helper.go validateRequestBody: gac's own checks before the schema",
        ),
        row(
            "POST",
            gac.clone(),
            Some(json!({"metadata": {"name": "g 1"}})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "helper.go validateRequestBody: json-schemas/genericK8sIntent.json",
        ),
        row(
            "POST",
            gac.clone(),
            Some(json!({"metadata": {"name": "g1"}})),
            201,
            Json(json!({"metadata": meta("g1")})),
            "handleGenericK8sIntentCreate",
        ),
        row(
            "POST",
            gac.clone(),
            Some(json!({"metadata": {"name": "g1"}})),
            409,
            Text("genericK8sIntent already exists\n"),
            "module.go",
        ),
        row(
            "GET",
            format!("{gac}/x"),
            None,
            404,
            Text("genericK8sIntent not found\n"),
            "module.go",
        ),
        row(
            "PUT",
            format!("{gac}/g1"),
            Some(json!({"metadata": {"name": "g1"}})),
            200,
            Any,
            "handleGenericK8sIntentUpdate: 200 when it existed",
        ),
        row(
            "PUT",
            format!("{gac}/g1"),
            Some(json!({"metadata": {"name": "g2"}})),
            400,
            Text("the intent name is not matching with the name in the request\n"),
            "handleGenericK8sIntentUpdate",
        ),
        row(
            "GET",
            format!("{gac}/g1/resources/x"),
            None,
            404,
            Text("resource not found\n"),
            "module.go",
        ),
        row(
            "DELETE",
            format!("{gac}/x"),
            None,
            404,
            Text("The requested resource not found\n"),
            "differs: gac answers a raw database error with a 500",
        ),
        // src/hpa-plc/api/hpa-intent-handler.go, api/apierrors.go
        row(
            "GET",
            hpa.clone(),
            None,
            200,
            Json(Value::Null),
            "hpa-intent-api.go GetAllIntents: nil slice",
        ),
        row(
            "POST",
            hpa.clone(),
            Some(json!({"metadata": {"name": "h1"}, "spec": {"app": "web"}})),
            201,
            Any,
            "addHpaIntentHandler",
        ),
        row(
            "POST",
            hpa.clone(),
            Some(json!({"metadata": {"name": "h1"}, "spec": {"app": "web"}})),
            409,
            Text("Intent already exists\n"),
            "src/hpa-plc/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{hpa}/h2"),
            Some(json!({"metadata": {"name": "h2"}, "spec": {"app": "web"}})),
            200,
            Any,
            "putHpaIntentHandler: 200 either way",
        ),
        row(
            "GET",
            format!("{hpa}/x"),
            None,
            404,
            Text("Intent not found\n"),
            "src/hpa-plc/api/apierrors.go",
        ),
        row(
            "DELETE",
            format!("{hpa}/x"),
            None,
            404,
            Text("Intent not found\n"),
            "deleteHpaIntentHandler",
        ),
        row(
            "GET",
            format!("{hpa}/h1/hpa-resource-consumers/x"),
            None,
            404,
            Text("Consumer not found\n"),
            "src/hpa-plc/api/apierrors.go",
        ),
        // json-schemas/placement-hpa-intent.json, on POST and PUT
        row(
            "POST",
            hpa.clone(),
            Some(json!({"metadata": {"name": "h3"}, "spec": {}})),
            400,
            Text("Invalid Input:\napp is required\n"),
            "addHpaIntentHandler: placement-hpa-intent.json",
        ),
        row(
            "PUT",
            format!("{hpa}/h1"),
            Some(json!({"metadata": {"name": "h1"}, "spec": {"app": "a b"}})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "putHpaIntentHandler: the schema on PUT too",
        ),
        // hpa-consumer-handler.go, json-schemas/placement-hpa-consumer.json
        row(
            "POST",
            consumers.clone(),
            Some(json!({"metadata": {"name": "c1"}, "spec": {"kind": "Deployment"}})),
            400,
            Text("Invalid Input:\nname is required\n"),
            "addHpaConsumerHandler: spec.name is the only required field",
        ),
        row(
            "POST",
            consumers.clone(),
            Some(json!({"metadata": {"name": "c1"}, "spec": {"name": "d", "replicas": -1}})),
            400,
            Text("Invalid Input:\nMust be greater than or equal to 1\n"),
            "addHpaConsumerHandler: replicas minimum 1",
        ),
        row(
            "POST",
            consumers.clone(),
            Some(json!({"metadata": {"name": "c1"}, "spec": {"name": "d", "kind": "Deployment"}})),
            201,
            Json(json!({"metadata": meta("c1"), "spec": {"kind": "Deployment", "name": "d"}})),
            "model.go: every spec field omitempty",
        ),
        row(
            "POST",
            consumers.clone(),
            Some(
                json!({"metadata": {"name": "c2"}, "spec": {"name": "d", "container": "app",
                "apiVersion": "apps/v1", "kind": "Deployment", "replicas": 2}}),
            ),
            201,
            Any,
            "addHpaConsumerHandler",
        ),
        // hpa-resource-handler.go: placement-hpa-resource.json, then validateDependents
        row(
            "POST",
            format!("{consumers}/c1/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"resource": {"key": "k", "value": "v"}}}),
            ),
            400,
            Text("Invalid Input:\nallocatable is required\n"),
            "addHpaResourceHandler: placement-hpa-resource.json",
        ),
        row(
            "POST",
            format!("{consumers}/c2/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": true,
                "resource": {"name": "cpu", "requests": 1, "key": "k", "value": "v"}}}),
            ),
            400,
            Text("Invalid Input:\nMust validate one and only one schema (oneOf)\n"),
            "placement-hpa-resource.json: one of the two resource shapes",
        ),
        row(
            "POST",
            format!("{consumers}/c2/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": true,
                "resource": {"name": "cpu"}}}),
            ),
            400,
            Text(
                "Invalid Input:\nMust validate one and only one schema (oneOf)\nrequests is required\n",
            ),
            "placement-hpa-resource.json: gojsonschema names the closest branch's failure",
        ),
        row(
            "POST",
            format!("{consumers}/c1/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": true,
                "resource": {"name": "cpu", "requests": 1}}}),
            ),
            400,
            Text("param[] is empty\n"),
            "validateDependents: an allocatable requirement needs the consumer's container",
        ),
        row(
            "POST",
            format!("{consumers}/c2/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": false,
                "resource": {"name": "cpu", "requests": 1}}}),
            ),
            400,
            Text(
                "JsonSchemaValidation: Document Validation failed .. resource-spec allocatable and resource field value mismatch. hpa-resource-name[r1]\n",
            ),
            "validateDependents (differs: hpa appends Go's %v of the spec, a pointer address)",
        ),
        row(
            "POST",
            format!("{consumers}/c2/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": true,
                "resource": {"name": "cpu", "requests": 5, "limits": 4}}}),
            ),
            400,
            Text(
                "JsonSchemaValidation: Document Validation failed .. resource-spec requests must be less or equal to limits. hpa-resource-name[r1]\n",
            ),
            "validateDependents (differs: without hpa's %v of the spec)",
        ),
        row(
            "POST",
            format!("{consumers}/c2/resource-requirements"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": true,
                "mandatory": false, "weight": 2,
                "resource": {"name": "memory", "requests": 512, "limits": 1024, "units": "Mi"}}}),
            ),
            201,
            Json(
                json!({"metadata": meta("r1"), "spec": {"allocatable": true, "weight": 2,
                "resource": {"name": "memory", "requests": 512, "limits": 1024, "units": "Mi"}}}),
            ),
            "addHpaResourceHandler; model.go omitempty (mandatory false left out)",
        ),
        // ---- hpa PUTs and deletes: hpa-intent-handler.go, hpa-consumer-handler.go,
        // hpa-resource-handler.go ----
        row(
            "PUT",
            format!("{hpa}/h1"),
            Some(json!({"metadata": {"name": "h9"}, "spec": {"app": "web"}})),
            400,
            Text("putHpaIntentHandler .. Mismatched name in PUT request\n"),
            "hpa-intent-handler.go putHpaIntentHandler",
        ),
        row(
            "GET",
            format!("{hpa}/h2/hpa-resource-consumers"),
            None,
            200,
            Json(Value::Null),
            "hpa-consumer-api.go GetAllConsumers: nil slice",
        ),
        row(
            "PUT",
            format!("{consumers}/c1"),
            Some(json!({"metadata": {"name": "c9"}, "spec": {"name": "d"}})),
            400,
            Text("putHpaConsumerHandler ..Mismatched name in PUT request\n"),
            "hpa-consumer-handler.go putHpaConsumerHandler",
        ),
        row(
            "PUT",
            format!("{consumers}/c3"),
            Some(json!({"metadata": {"name": "c3"}, "spec": {"name": "d"}})),
            200,
            Json(json!({"metadata": meta("c3"), "spec": {"name": "d"}})),
            "putHpaConsumerHandler: 200 either way",
        ),
        row(
            "DELETE",
            format!("{consumers}/nope"),
            None,
            404,
            Text("Consumer not found\n"),
            "deleteHpaConsumerHandler: looks the consumer up first",
        ),
        row(
            "DELETE",
            format!("{consumers}/c3"),
            None,
            204,
            Empty,
            "deleteHpaConsumerHandler",
        ),
        row(
            "GET",
            format!("{consumers}/c1/resource-requirements"),
            None,
            200,
            Json(Value::Null),
            "hpa_resource_api.go GetAllResources: nil slice",
        ),
        row(
            "GET",
            format!("{consumers}/c2/resource-requirements/nope"),
            None,
            404,
            Text("Resource not found\n"),
            "src/hpa-plc/api/apierrors.go",
        ),
        row(
            "PUT",
            format!("{consumers}/c2/resource-requirements/r1"),
            Some(
                json!({"metadata": {"name": "r9"}, "spec": {"allocatable": true,
                "resource": {"name": "cpu", "requests": 1}}}),
            ),
            400,
            Text("putHpaResourceHandler .. Mismatched name in PUT request\n"),
            "hpa-resource-handler.go putHpaResourceHandler",
        ),
        row(
            "PUT",
            format!("{consumers}/c2/resource-requirements/r1"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"allocatable": true,
                "resource": {"name": "cpu", "requests": 1}}}),
            ),
            200,
            Any,
            "putHpaResourceHandler: 200 either way",
        ),
        row(
            "DELETE",
            format!("{consumers}/c2/resource-requirements/nope"),
            None,
            404,
            Text("Resource not found\n"),
            "deleteHpaResourceHandler: looks the requirement up first",
        ),
        row(
            "DELETE",
            format!("{consumers}/c2/resource-requirements/r1"),
            None,
            204,
            Empty,
            "deleteHpaResourceHandler",
        ),
        // ---- gac resources and customizations: api/resource.go, api/customization.go,
        // multipart forms; pkg/module/module.go ----
        row(
            "GET",
            format!("{gac}/g1/resources"),
            None,
            200,
            Json(Value::Null),
            "resource.go: nil slice",
        ),
        form(
            "POST",
            format!("{gac}/g1/resources"),
            resource("r1"),
            configmap(),
            201,
            Json(
                json!({"metadata": meta("r1"), "spec": {"app": "web", "newObject": "true",
                "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}}}),
            ),
            "resource.go handleResourceCreate",
        ),
        form(
            "POST",
            format!("{gac}/g1/resources"),
            resource("r1"),
            configmap(),
            409,
            Text("resource already exists\n"),
            "module.go",
        ),
        row(
            "GET",
            format!("{gac}/g1/resources/r1"),
            None,
            200,
            Json(
                json!({"metadata": meta("r1"), "spec": {"app": "web", "newObject": "true",
                "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}}}),
            ),
            "resource.go handleResourceGet: Accept application/json",
        )
        .accept("application/json"),
        form(
            "PUT",
            format!("{gac}/g1/resources/r1"),
            resource("r1"),
            configmap(),
            200,
            Any,
            "resource.go handleResourceUpdate: 200 when it existed",
        ),
        form(
            "PUT",
            format!("{gac}/g1/resources/r2"),
            resource("r2"),
            configmap(),
            201,
            Any,
            "resource.go handleResourceUpdate: 201 when new",
        ),
        row(
            "GET",
            format!("{gac}/g1/resources/r1/customizations"),
            None,
            200,
            Json(Value::Null),
            "customization.go: nil slice",
        ),
        form(
            "POST",
            format!("{gac}/g1/resources/r1/customizations"),
            customization("cu1"),
            vec![],
            201,
            Any,
            "customization.go handleCustomizationCreate",
        ),
        form(
            "POST",
            format!("{gac}/g1/resources/r1/customizations"),
            customization("cu1"),
            vec![],
            409,
            Text("customization already exists\n"),
            "module.go",
        ),
        row(
            "GET",
            format!("{gac}/g1/resources/r1/customizations/nope"),
            None,
            404,
            Text("customization not found\n"),
            "module.go",
        )
        .accept("application/json"),
        row(
            "GET",
            format!("{gac}/g1/resources/r1/customizations/cu1"),
            None,
            200,
            Json(json!({"metadata": meta("cu1"), "spec": {"clusterSpecific": "false",
                "clusterInfo": {"scope": "label", "clusterProvider": "edge", "cluster": "",
                    "clusterLabel": "east", "mode": "allow"},
                "patchType": "json", "patchJson": [{"op": "replace", "path": "/data/k", "value": "w"}],
                "configMapOptions": {}, "secretOptions": {}}})),
            "customization.go handleCustomizationGet: Accept application/json; the options are \
             structs, written whole",
        )
        .accept("application/json"),
        form(
            "PUT",
            format!("{gac}/g1/resources/r1/customizations/cu1"),
            customization("cu1"),
            vec![],
            200,
            Any,
            "customization.go handleCustomizationUpdate: 200 when it existed",
        ),
        row(
            "DELETE",
            format!("{gac}/g1/resources/r1/customizations/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "differs: gac answers a raw database error with a 500",
        ),
        row(
            "DELETE",
            format!("{gac}/g1/resources/r1/customizations/cu1"),
            None,
            204,
            Empty,
            "customization.go handleCustomizationDelete",
        ),
        row(
            "DELETE",
            format!("{gac}/g1/resources/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "differs: gac answers a raw database error with a 500",
        ),
        row(
            "DELETE",
            format!("{gac}/g1/resources/r2"),
            None,
            204,
            Empty,
            "resource.go handleResourceDelete",
        ),
    ];
    run(&app, rec, rows).await;
}

/// Whole bodies of GETs, as Go's encoding/json writes EMCO's structs: every field without
/// `omitempty`, `null` for a nil map or list, omitted empties where the tag says `omitempty`.
async fn bodies_as_go_writes_them_table(rec: &Recorder) {
    let app = app();
    let lcs = "/v2/projects/p1/logical-clouds";
    let lc = "/v2/projects/p1/logical-clouds/lc1";
    let gpi = format!("{DIG}/generic-placement-intents/g");
    let cp = "/v2/cluster-providers";
    let mut setup = group_rows();
    setup.extend(vec![
        row(
            "POST",
            format!("{DIG}/generic-placement-intents"),
            Some(json!({"metadata": {"name": "g"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            lcs,
            Some(json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            lcs,
            Some(
                json!({"metadata": {"name": "lc1"}, "spec": {"namespace": "ns1",
            "user": {"userName": "u1"}}}),
            ),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            format!("{lc}/cluster-references"),
            Some(
                json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": "c1"}}),
            ),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            format!("{lc}/user-permissions"),
            Some(json!({"metadata": {"name": "up"},
            "spec": {"namespace": "ns1", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            format!("{lc}/cluster-quotas"),
            Some(json!({"metadata": {"name": "q"}, "spec": {"pods": "5"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            format!("{lc}/kv-pairs"),
            Some(json!({"metadata": {"name": "k"}, "spec": {"kv": [{"a": "b"}]}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            cp,
            Some(json!({"metadata": {"name": "edge"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            "/v2/clm-controllers",
            Some(json!({"metadata": {"name": "cc"}, "spec": {"host": "h", "port": 1}})),
            201,
            Any,
            "setup",
        ),
    ]);
    run(&app, rec, setup).await;
    let rows = vec![
        row(
            "GET",
            format!("{lcs}/lc0"),
            None,
            200,
            Json(
                json!({"metadata": meta("lc0"), "spec": {"namespace": "", "labels": null, "level": "0",
                "user": {"userName": "", "type": ""}}}),
            ),
            "src/orchestrator/common/logicalcloud.go: labels without omitempty; only level is defaulted",
        ),
        row(
            "GET",
            lc.to_owned(),
            None,
            200,
            Json(
                json!({"metadata": meta("lc1"), "spec": {"namespace": "ns1", "labels": null, "level": "1",
                "user": {"userName": "u1", "type": ""}}}),
            ),
            "src/dcm/pkg/module/logicalcloud.go Create: level \"1\" when empty",
        ),
        row(
            "GET",
            format!("{lc}/cluster-references/r1"),
            None,
            200,
            Json(
                json!({"metadata": meta("r1"), "spec": {"clusterProvider": "edge", "cluster": "c1",
                "loadBalancerIP": "", "certificate": ""}}),
            ),
            "src/orchestrator/common/clusterreference.go",
        ),
        row(
            "GET",
            format!("{lc}/user-permissions/up"),
            None,
            200,
            Json(
                json!({"metadata": meta("up"), "spec": {"namespace": "ns1", "apiGroups": [""],
                "resources": ["pods"], "verbs": ["get"]}}),
            ),
            "src/dcm/pkg/module/userpermissions.go",
        ),
        row(
            "GET",
            format!("{lc}/cluster-quotas/q"),
            None,
            200,
            Json(json!({"metadata": meta("q"), "spec": {"pods": "5"}})),
            "src/dcm/pkg/module/quota.go",
        ),
        row(
            "GET",
            format!("{lc}/kv-pairs/k"),
            None,
            200,
            Json(json!({"metadata": meta("k"), "spec": {"kv": [{"a": "b"}]}})),
            "src/dcm/pkg/module/keyvalue.go",
        ),
        row(
            "GET",
            "/v2/clm-controllers/cc",
            None,
            200,
            Json(json!({"metadata": meta("cc"), "spec": {"host": "h", "port": 1}})),
            "src/clm/pkg/model/model.go: spec fields omitempty",
        ),
        row(
            "GET",
            format!("{DIG}/generic-placement-intents/g"),
            None,
            200,
            Json(json!({"metadata": meta("g")})),
            "module/generic_placement_intent.go: no spec",
        ),
        // app_intent_handler.go handleJsonSchemaValidationError: the schema's errors
        // (json-schemas/generic-placement-intent-app.json) in the handler's words.
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(json!({"metadata": {"name": "ai"}, "spec": {"intent": {}}})),
            400,
            Text("Missing app for the intent\n"),
            "app_intent_handler.go: `app is required` (AppIntent fields are omitempty)",
        ),
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(json!({"metadata": {}, "spec": {"app": "a", "intent": {}}})),
            400,
            Text("Missing name for the intent\n"),
            "app_intent_handler.go: `name is required`",
        ),
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(json!({"metadata": {"name": "ai"}, "spec": {"app": "a",
                "intent": {"allOf": [{"cluster": "c1"}]}}})),
            400,
            Text("Missing clusterProvider in an intent\n"),
            "app_intent_handler.go: `clusterProvider is required`",
        ),
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(json!({"metadata": {"name": "ai"}, "spec": {"app": "a",
                "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1", "clusterLabel": "l"}]}}})),
            400,
            Text("Only one of cluster name or cluster label allowed\n"),
            "app_intent_handler.go: `Must not validate the schema (not)`",
        ),
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(json!({"metadata": {"name": "ai"}, "spec": {"app": "a",
                "intent": {"anyOf": [{"clusterProvider": "edge"}]}}})),
            400,
            Text("Missing cluster or clusterLabel\n"),
            "app_intent_handler.go: `cluster is required`",
        ),
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(
                json!({"metadata": {"name": "ai", "userData1": "u".repeat(513)},
                "spec": {"app": "a", "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1"}]}}}),
            ),
            400,
            Text("Invalid Input:\nString length must be less than or equal to 512\n"),
            "app_intent_handler.go: other schema errors as they are",
        ),
        row(
            "POST",
            format!("{gpi}/app-intents"),
            Some(json!({"metadata": {"name": "ai"},
            "spec": {"app": "a", "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1"}]}}})),
            201,
            Any,
            "setup",
        ),
        row(
            "GET",
            format!("{gpi}/app-intents/ai"),
            None,
            200,
            Json(json!({"metadata": {"name": "ai"}, "spec": {"app": "a",
                "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1"}]}}})),
            "module/app_intent.go: MetaData and gpic fields all omitempty",
        ),
        row(
            "POST",
            format!("{DIG}/intents"),
            Some(
                json!({"metadata": {"name": "i1"}, "spec": {"intent": {"genericPlacementIntent": "g"}}}),
            ),
            201,
            Any,
            "setup",
        ),
        row(
            "GET",
            format!("{DIG}/intents/i1"),
            None,
            200,
            Json(
                json!({"metadata": meta("i1"), "spec": {"intent": {"genericPlacementIntent": "g"}}}),
            ),
            "module/add_intents.go",
        ),
    ];
    run(&app, rec, rows).await;
}

/// dtc: src/dtc/api/{trafficgroupintent,inboundserverintent,inboundclientsintent,
/// inboundclientsaccessintents,controllerhandler}.go, src/dtc/api/apierrors.go,
/// src/dtc/pkg/module/*.go and src/dtc/json-schemas.
async fn dtc_table(rec: &Recorder) {
    let app = app();
    let tgis = format!("{DIG}/traffic-group-intents");
    let inbound = format!("{tgis}/tg1/inbound-intents");
    let clients = format!("{inbound}/web/clients");
    let pattern =
        "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n";
    let server = |port: i64| {
        json!({"metadata": {"name": "web"}, "spec": {"app": "web", "appLabel": "app=web",
            "serviceName": "web", "port": port, "protocol": "TCP"}})
    };
    let long = "a".repeat(64);
    let long_name: &'static str = Box::leak(
        format!(
            "Invalid traffic group intent metadata: Invalid Metadata name=[{long}], errors: \
             [must be no more than 63 characters]\n"
        )
        .into_boxed_str(),
    );
    let mut rows = group_rows();
    rows.extend([
        row("GET", tgis.clone(), None, 200, Json(Value::Null), "trafficgroupintent.go getHandler: nil slice"),
        row(
            "GET",
            "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/nope/traffic-group-intents",
            None,
            200,
            Json(Value::Null),
            "getHandler: a list checks no parent",
        ),
        row(
            "POST",
            "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/nope/traffic-group-intents",
            None,
            404,
            Text("deploymentIntentGroup not found\n"),
            "createHandler: the DIG is looked up before the body is read (apierror shared list)",
        ),
        row("POST", tgis.clone(), None, 400, Text("Empty body\n"), "createHandler: io.EOF"),
        row("POST", tgis.clone(), Some(json!({})), 400, Text(pattern), "createHandler: json-schemas/metadata.json"),
        row(
            "POST",
            tgis.clone(),
            Some(json!({"metadata": {"name": long}})),
            400,
            Text(long_name),
            "validateTrafficGroupIntentInputs: IsValidMetadata, k8s IsValidLabelValue",
        ),
        row(
            "POST",
            tgis.clone(),
            Some(json!({"metadata": {"name": "tg1"}})),
            201,
            Json(json!({"metadata": meta("tg1")})),
            "createHandler",
        ),
        row(
            "POST",
            tgis.clone(),
            Some(json!({"metadata": {"name": "tg1"}})),
            409,
            Text("TrafficGroupIntent already exists\n"),
            "apierrors.go",
        ),
        row("GET", format!("{tgis}/tg1"), None, 200, Json(json!({"metadata": meta("tg1")})), "getHandler"),
        row("GET", format!("{tgis}/x"), None, 404, Text("Traffic group intent not found\n"), "apierrors.go"),
        row(
            "PUT",
            format!("{tgis}/tg1"),
            Some(json!({"metadata": {"name": "tg2"}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "putHandler",
        ),
        row(
            "PUT",
            format!("{tgis}/tg1"),
            Some(json!({"metadata": {"description": "d"}})),
            400,
            Text("Missing name in PUT request\n"),
            "putHandler: the name before the mismatch",
        ),
        row(
            "PUT",
            format!("{tgis}/bad%20name"),
            Some(json!({"metadata": {"name": "bad name"}})),
            400,
            Text("Invalid traffic group intent metadata: Invalid Metadata name=[bad name], errors: [a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]\n"),
            "putHandler: no schema on PUT, IsValidMetadata",
        ),
        row(
            "PUT",
            format!("{tgis}/tg1"),
            Some(json!({"metadata": {"name": "tg1", "description": "d"}})),
            201,
            Any,
            "putHandler: 201 for an update too",
        ),
        // ---- inbound-intents ----
        row("POST", inbound.clone(), Some(server(0)), 400, Text("Invalid Input:\nMust be greater than or equal to 1\n"), "json-schemas/inbound-server.json"),
        row(
            "POST",
            format!("{tgis}/none/inbound-intents"),
            Some(server(80)),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "db Insert parent resource not found (apierror dbErrors)",
        ),
        row(
            "POST",
            inbound.clone(),
            Some(server(80)),
            201,
            Json(json!({"metadata": meta("web"), "spec": {"app": "web", "appLabel": "app=web",
                "serviceName": "web", "externalName": "", "port": 80, "protocol": "TCP",
                "externalSupport": false, "serviceMesh": "",
                "management": {"sidecarProxy": "", "tlsType": ""},
                "external": {"externalCerts": {"serviceCertificate": "",
                    "servicePrivateKey": "", "caCertificate": ""}},
                "edgeCNF": ""}})),
            "module/inboundserverintent.go: every field written",
        ),
        row("POST", inbound.clone(), Some(server(80)), 409, Text("ServerInboundIntent already exists\n"), "apierrors.go"),
        row("GET", format!("{inbound}/x"), None, 404, Text("Inbound server intent not found\n"), "apierrors.go"),
        // ---- clients ----
        row(
            "POST",
            clients.clone(),
            Some(json!({"metadata": {"name": "c1"}, "spec": {"app": "client", "appLabel": "app=client",
                "serviceName": "client", "cidrs": []}})),
            400,
            Text("Invalid Input:\nInvalid type. Expected: array, given: null\n"),
            "json-schemas/inbound-clients.json: a missing list is Go's nil slice",
        ),
        row(
            "POST",
            clients.clone(),
            Some(json!({"metadata": {"name": "c1"}, "spec": {"app": "client", "appLabel": "app=client",
                "serviceName": "client", "namespaces": [], "cidrs": []}})),
            201,
            Json(json!({"metadata": meta("c1"), "spec": {"app": "client", "appLabel": "app=client",
                "serviceName": "client", "namespaces": [], "cidrs": []}})),
            "inboundclientsintent.go createHandler",
        ),
        row("GET", format!("{clients}/x"), None, 404, Text("Inbound clients intent not found\n"), "apierrors.go"),
        // ---- access-points ----
        row(
            "POST",
            format!("{clients}/c1/access-points"),
            Some(json!({"metadata": {"name": "a1"}, "spec": {"action": "DENY", "url": ["/status/*"],
                "access": ["GET"]}})),
            400,
            Text("Invalid Input:\nspec.action must be one of the following: \"ALLOW\"\n"),
            "json-schemas/inbound-clients-access.json",
        ),
        row(
            "POST",
            format!("{clients}/c1/access-points"),
            Some(json!({"metadata": {"name": "a1"}, "spec": {"action": "ALLOW", "url": ["/status/*"],
                "access": ["GET"]}})),
            201,
            Any,
            "differs: EMCO's dtc refuses every access point (409: its ref-schemas/v1.yaml lacks \
             inboundClientsAccessIntent)",
        ),
        // ---- deletes: db Remove ----
        row(
            "DELETE",
            format!("{tgis}/tg1"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "db Remove parent child constraint",
        ),
        row("DELETE", format!("{tgis}/x"), None, 404, Text("The requested resource not found\n"), "db Remove resource not found"),
        // ---- dtc-controllers: controllerhandler.go, json-schemas/controller.json ----
        row("GET", "/v2/dtc-controllers", None, 200, Json(Value::Null), "getHandler: nil slice"),
        row(
            "POST",
            "/v2/dtc-controllers",
            Some(json!({"metadata": {"name": "nps"}, "spec": {"host": "nps", "port": 9062,
                "type": "action", "priority": 1}})),
            201,
            Json(json!({"metadata": meta("nps"), "spec": {"host": "nps", "port": 9062,
                "type": "action", "priority": 1}})),
            "createHandler",
        ),
        row(
            "POST",
            "/v2/dtc-controllers",
            Some(json!({"metadata": {"name": "nps"}, "spec": {"host": "nps", "port": 9062,
                "type": "action", "priority": 1}})),
            409,
            Text("Controller already exists\n"),
            "apierrors.go",
        ),
        row(
            "POST",
            "/v2/dtc-controllers",
            Some(json!({"metadata": {"name": "its"}, "spec": {"host": "its", "port": 9066,
                "type": "placement", "priority": 1}})),
            400,
            Text("Invalid Input:\nMust validate one and only one schema (oneOf)\nDoes not match pattern 'action'\n"),
            "controller.json: type oneOf [pattern action]",
        ),
        row(
            "POST",
            "/v2/dtc-controllers",
            Some(json!({"metadata": {"name": "its"}, "spec": {"host": "its", "port": 9066,
                "type": "action", "priority": 0}})),
            400,
            Text("Invalid Input:\nMust be greater than or equal to 1\n"),
            "controller.json: priority 1 to 100",
        ),
        row(
            "PUT",
            "/v2/dtc-controllers/nps",
            Some(json!({"metadata": {"name": "nps"}, "spec": {"host": "nps", "port": 70000,
                "type": "action", "priority": 1}})),
            400,
            Text("Invalid Input:\nMust be less than or equal to 65535\n"),
            "putHandler: the schema on PUT too",
        ),
        row(
            "PUT",
            "/v2/dtc-controllers/nps",
            Some(json!({"metadata": {"name": "sds"}, "spec": {"host": "nps", "port": 9062,
                "type": "action", "priority": 1}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "putHandler",
        ),
        row(
            "PUT",
            "/v2/dtc-controllers/nps",
            Some(json!({"metadata": {"name": "nps"}, "spec": {"host": "nps", "port": 9062,
                "type": "action", "priority": 2}})),
            201,
            Any,
            "putHandler: 201",
        ),
        row("GET", "/v2/dtc-controllers/x", None, 404, Text("Controller not found\n"), "apierrors.go"),
        row("DELETE", "/v2/dtc-controllers/nps", None, 204, Empty, "deleteHandler"),
        // ---- inbound-intents, clients, access-points: PUT, list, delete ----
        row("GET", format!("{tgis}/none/inbound-intents"), None, 200, Json(Value::Null), "inboundserverintent.go getHandler: nil slice, no parent check"),
        row(
            "PUT",
            format!("{inbound}/web"),
            Some({
                let mut b = server(80);
                b["metadata"]["name"] = json!("web2");
                b
            }),
            400,
            Text("Mismatched name in PUT request\n"),
            "inboundserverintent.go putHandler",
        ),
        row(
            "PUT",
            format!("{inbound}/web2"),
            Some({
                let mut b = server(81);
                b["metadata"]["name"] = json!("web2");
                b
            }),
            201,
            Any,
            "inboundserverintent.go putHandler: 201",
        ),
        row(
            "DELETE",
            format!("{inbound}/web"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "db Remove parent child constraint",
        ),
        row("DELETE", format!("{inbound}/x"), None, 404, Text("The requested resource not found\n"), "db Remove resource not found"),
        row("DELETE", format!("{inbound}/web2"), None, 204, Empty, "inboundserverintent.go deleteHandler"),
        row("GET", format!("{inbound}/web2/clients"), None, 200, Json(Value::Null), "inboundclientsintent.go getHandler: nil slice"),
        row(
            "PUT",
            format!("{clients}/c1"),
            Some(json!({"metadata": {"name": "c2"}, "spec": {"app": "client", "appLabel": "app=client",
                "serviceName": "client", "namespaces": [], "cidrs": []}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "inboundclientsintent.go putHandler",
        ),
        row(
            "PUT",
            format!("{clients}/c2"),
            Some(json!({"metadata": {"name": "c2"}, "spec": {"app": "client", "appLabel": "app=client",
                "serviceName": "client", "namespaces": [], "cidrs": []}})),
            201,
            Any,
            "inboundclientsintent.go putHandler: 201",
        ),
        row("DELETE", format!("{clients}/x"), None, 404, Text("The requested resource not found\n"), "db Remove resource not found"),
        row("DELETE", format!("{clients}/c2"), None, 204, Empty, "inboundclientsintent.go deleteHandler"),
        row("GET", format!("{clients}/c2/access-points"), None, 200, Json(Value::Null), "inboundclientsaccessintents.go getHandler: nil slice"),
        row(
            "GET",
            format!("{clients}/c1/access-points/x"),
            None,
            404,
            Text("Inbound clients access intent not found\n"),
            "differs: dtc's table has no entry for this text, so EMCO answers 500",
        ),
        row(
            "PUT",
            format!("{clients}/c1/access-points/a1"),
            Some(json!({"metadata": {"name": "a2"}, "spec": {"action": "ALLOW", "url": ["/"], "access": ["GET"]}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "inboundclientsaccessintents.go putHandler",
        ),
        row(
            "PUT",
            format!("{clients}/c1/access-points/a2"),
            Some(json!({"metadata": {"name": "a2"}, "spec": {"action": "ALLOW", "url": ["/"], "access": ["GET"]}})),
            201,
            Any,
            "differs: EMCO's dtc refuses every access point (409: its ref-schemas/v1.yaml lacks \
             inboundClientsAccessIntent)",
        ),
        row("DELETE", format!("{clients}/c1/access-points/x"), None, 404, Text("The requested resource not found\n"), "db Remove resource not found"),
        row("DELETE", format!("{clients}/c1/access-points/a2"), None, 204, Empty, "inboundclientsaccessintents.go deleteHandler"),
    ]);
    run(&app, rec, rows).await;
}

/// ncm (src/ncm/api/networkhandler.go, providernethandler.go, schedulerhandler.go,
/// apierrors.go): networks and provider networks of cluster `c1` and its lifecycle refusals.
async fn ncm_table(rec: &Recorder) {
    use emco_core::Metadata;
    use emco_core::model::{Cluster, ClusterProvider};
    use emco_store::ResourceKey;

    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    orch.onboarding()
        .cluster_providers()
        .create(
            &ResourceKey::root(),
            &ClusterProvider {
                metadata: Metadata::named("edge"),
            },
        )
        .await
        .unwrap();
    let c1 = Cluster {
        metadata: Metadata::named("c1"),
        ..Cluster::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("c1.kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    orch.onboarding()
        .create_cluster("edge", &c1, Some(&kubeconfig))
        .await
        .unwrap();
    let app = emco_service::app(orch, &Config::default(), Metrics::new());
    let c = "/v2/cluster-providers/edge/clusters/c1";
    let nets = format!("{c}/networks");
    let pnets = format!("{c}/provider-networks");
    let net = |name: &str, subnet: &str| {
        json!({"metadata": {"name": name}, "spec": {"cniType": "ovn4nfv",
            "ipv4Subnets": [{"subnet": subnet, "name": "subnet1", "gateway": "10.10.20.1/24"}]}})
    };
    let pnet = |labels: Value, vlan_id: &str, selector: &str| {
        json!({"metadata": {"name": "pn1"}, "spec": {"cniType": "ovn4nfv", "providerNetType": "vlan",
            "ipv4Subnets": [{"subnet": "172.16.30.0/24", "name": "s2"}],
            "vlan": {"vlanId": vlan_id, "providerInterfaceName": "eth1",
                "logicalInterfaceName": "eth1.102", "vlanNodeSelector": selector,
                "nodeLabelList": labels}}})
    };
    let rows = vec![
        row(
            "GET",
            nets.clone(),
            None,
            200,
            Json(Value::Null),
            "network.go GetNetworks: a nil slice",
        ),
        row(
            "GET",
            "/v2/cluster-providers/edge/clusters/nope/networks",
            None,
            200,
            Json(Value::Null),
            "GetNetworks checks no cluster",
        ),
        row(
            "POST",
            nets.clone(),
            None,
            400,
            Text("Empty body\n"),
            "createNetworkHandler: io.EOF",
        ),
        row(
            "POST",
            nets.clone(),
            Some(json!({"metadata": {"name": "n1"}, "spec": {"cniType": "ovn4nfv"}})),
            400,
            Text(
                "Invalid Input:\nMust validate at least one schema (anyOf)\nipv4Subnets is required\n",
            ),
            "createNetworkHandler: json-schemas/virtual-network.json",
        ),
        row(
            "POST",
            nets.clone(),
            Some(
                json!({"metadata": {"name": "n1"}, "spec": {"cniType": "calico",
                "ipv4Subnets": [{"subnet": "10.10.20.0/24", "name": "s"}]}}),
            ),
            400,
            Text("Invalid cni type: calico\n"),
            "validateNetworkInputs",
        ),
        row(
            "POST",
            nets.clone(),
            Some(net("n1", "10.10.20.0")),
            400,
            Text(
                "invalid subnet: invalid subnet: could not parse ipv4 cidr 10.10.20.0: invalid CIDR address: 10.10.20.0\n",
            ),
            "validateNetworkInputs: types.go ValidateSubnet, validation IsIpv4Cidr",
        ),
        row(
            "POST",
            nets.clone(),
            Some(net(&"n".repeat(64), "10.10.20.0/24")),
            400,
            Text(
                "Invalid network name - name=[nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn], errors: [must be no more than 63 characters]\n",
            ),
            "validateNetworkInputs: IsValidName caps at 63 where the schema allows 128",
        ),
        row(
            "POST",
            "/v2/cluster-providers/edge/clusters/nope/networks",
            Some(net("n1", "10.10.20.0/24")),
            404,
            Text("Requested resource not found.\n"),
            "differs: clm's `Cluster StateInfo not found` reaches apierror's generic `not found` (404) or its default 500, by version",
        ),
        row(
            "POST",
            nets.clone(),
            Some(net("n1", "10.10.20.0/24")),
            201,
            Json(
                json!({"metadata": {"name": "n1", "description": "", "userData1": "", "userData2": ""},
                "spec": {"cniType": "ovn4nfv", "ipv4Subnets": [{"subnet": "10.10.20.0/24",
                    "name": "subnet1", "gateway": "10.10.20.1/24"}]}}),
            ),
            "createNetworkHandler; types.go: gateway and excludeIps omitempty",
        ),
        row(
            "POST",
            nets.clone(),
            Some(net("n1", "10.10.20.0/24")),
            409,
            Text("Network already exists\n"),
            "network.go CreateNetwork, apierrors.go",
        ),
        row(
            "GET",
            format!("{nets}/nope"),
            None,
            404,
            Text("Network not found\n"),
            "apierrors.go",
        ),
        row(
            "PUT",
            format!("{nets}/n2"),
            Some(json!({"metadata": {}, "spec": {}})),
            400,
            Text("Missing name in PUT request\n"),
            "putNetworkHandler",
        ),
        row(
            "PUT",
            format!("{nets}/n2"),
            Some(net("n1", "10.10.20.0/24")),
            400,
            Text("Mismatched name in PUT request\n"),
            "putNetworkHandler",
        ),
        row(
            "PUT",
            format!("{nets}/n2"),
            Some(json!({"metadata": {"name": "n2"}, "spec": {"cniType": "ovn4nfv"}})),
            201,
            Any,
            "putNetworkHandler: no schema on PUT; 201 either way",
        ),
        row(
            "DELETE",
            format!("{nets}/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "DeleteNetwork: db Remove resource not found",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(Value::Null, "102", "any")),
            400,
            Text("Invalid Input:\nInvalid type. Expected: array, given: null\n"),
            "createProviderNetHandler: the nil nodeLabelList is null in the schema's document",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(json!([]), "5000", "any")),
            400,
            Text("Invalid VlAN ID 5000 - error: [value greater than maximum]\n"),
            "validateProviderNetInputs: IsValidNumberStr",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(json!([]), "x1", "any")),
            400,
            Text("Invalid VlAN ID x1 - error: [strconv.Atoi: parsing \"x1\": invalid syntax]\n"),
            "validateProviderNetInputs: IsValidNumberStr",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(json!([]), "102", "some")),
            400,
            Text("Invalid VlAN Node Selector some\n"),
            "validateProviderNetInputs",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(json!([]), "102", "specific")),
            400,
            Text("Node Labels required for VlAN node selector \"specific\"\n"),
            "validateProviderNetInputs",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(json!(["a=b=c"]), "102", "specific")),
            400,
            Text(
                "Invalid Label=a=b=c - errors: [Invalid label value - label=[a=b=c%], labelvalue=[b=c], errors:  a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]\n",
            ),
            "validateProviderNetInputs: validation.go IsValidLabel",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(
                json!(["kubernetes.io/hostname=localhost"]),
                "102",
                "Specific",
            )),
            201,
            Json(
                json!({"metadata": {"name": "pn1", "description": "", "userData1": "", "userData2": ""},
                "spec": {"cniType": "ovn4nfv", "ipv4Subnets": [{"subnet": "172.16.30.0/24", "name": "s2"}],
                    "providerNetType": "vlan",
                    "vlan": {"vlanID": "102", "providerInterfaceName": "eth1",
                        "logicalInterfaceName": "eth1.102", "vlanNodeSelector": "Specific",
                        "nodeLabelList": ["kubernetes.io/hostname=localhost"]}}}),
            ),
            "createProviderNetHandler: types case-insensitive, kept as sent; Go's `vlanID`",
        ),
        row(
            "POST",
            pnets.clone(),
            Some(pnet(json!([]), "102", "any")),
            409,
            Text("ProviderNet already exists\n"),
            "providernet.go CreateProviderNet, apierrors.go",
        ),
        row(
            "GET",
            format!("{pnets}/nope"),
            None,
            404,
            Text("ProviderNet not found\n"),
            "apierrors.go",
        ),
        // src/ncm/pkg/scheduler/scheduler.go
        row(
            "POST",
            format!("{c}/terminate"),
            None,
            409,
            Text("Cluster network intents have not been applied: c1\n"),
            "TerminateNetworkIntents: Created",
        ),
        row(
            "POST",
            format!("{c}/stop"),
            None,
            409,
            Text("Cluster network intents have not been applied: c1\n"),
            "StopNetworkIntents: Created",
        ),
        row(
            "POST",
            "/v2/cluster-providers/edge/clusters/nope/apply",
            None,
            404,
            Text("Requested resource not found.\n"),
            "differs: ApplyNetworkIntents answers clm's error with a 404 or a 500, by version",
        ),
        row(
            "GET",
            format!("{c}/status"),
            None,
            200,
            Json(
                json!({"name": "edge+c1", "states": {"statusctxid": "", "actions": [
                {"state": "Created", "instance": "", "time": "", "revision": 0}]},
                "cluster": {}}),
            ),
            "statusSchedulerHandler: never applied, only the record; `cluster` always present",
        ),
        row(
            "GET",
            format!("{c}/status?type=none"),
            None,
            400,
            Text("Invalid query type\n"),
            "statusSchedulerHandler",
        ),
        row(
            "GET",
            format!("{c}/status?output=none"),
            None,
            400,
            Text("Invalid query output\n"),
            "statusSchedulerHandler",
        ),
        row(
            "GET",
            "/v2/cluster-providers/edge/clusters/nope/status",
            None,
            404,
            Text("Requested resource not found.\n"),
            "differs: ncm's handler passes a nil error on and drops the connection",
        ),
        // ---- provider networks: providernethandler.go ----
        row(
            "GET",
            "/v2/cluster-providers/edge/clusters/nope/provider-networks",
            None,
            200,
            Json(Value::Null),
            "providernet.go GetProviderNets: a nil slice; checks no cluster",
        ),
        row(
            "PUT",
            format!("{pnets}/pn2"),
            Some(pnet(json!([]), "102", "any")),
            400,
            Text("Mismatched name in PUT request\n"),
            "putProviderNetHandler",
        ),
        row(
            "PUT",
            format!("{pnets}/pn2"),
            Some({
                let mut b = pnet(json!([]), "102", "any");
                b["metadata"]["name"] = json!("pn2");
                b
            }),
            201,
            Any,
            "putProviderNetHandler: 201 either way",
        ),
        row(
            "DELETE",
            format!("{pnets}/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "DeleteProviderNet: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{pnets}/pn2"),
            None,
            204,
            Empty,
            "deleteProviderNetHandler",
        ),
    ];
    run(&app, rec, rows).await;
}

/// ovnaction (src/ovnaction/api/*handler.go, api/apierrors.go, pkg/module): its three intent
/// levels under a DIG.
async fn ovnaction_table(rec: &Recorder) {
    let app = app();
    run(&app, rec, group_rows()).await;
    let nci = format!("{DIG}/network-controller-intent");
    let wis = format!("{nci}/n1/workload-intents");
    let ifs = format!("{wis}/w1/interfaces");
    let full_meta =
        |name: &str| json!({"name": name, "description": "", "userData1": "", "userData2": ""});
    let rows = vec![
        row(
            "GET",
            nci.clone(),
            None,
            200,
            Json(Value::Null),
            "netcontrolintent.go GetNetControlIntents: a nil slice",
        ),
        row(
            "POST",
            nci.clone(),
            Some(json!({"metadata": {"name": "n 1"}})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "netcontrolintenthandler.go createHandler: json-schemas/metadata.json",
        ),
        row(
            "POST",
            nci.clone(),
            Some(json!({"metadata": {"name": "n1"}})),
            201,
            Json(json!({"metadata": full_meta("n1")})),
            "createHandler",
        ),
        row(
            "POST",
            nci.clone(),
            Some(json!({"metadata": {"name": "n1"}})),
            409,
            Text("NetControlIntent already exists\n"),
            "apierrors.go",
        ),
        row(
            "GET",
            format!("{nci}/nope"),
            None,
            404,
            Text("Net Control Intent not found\n"),
            "apierrors.go: with spaces, unlike the 409",
        ),
        row(
            "PUT",
            format!("{nci}/n2"),
            Some(json!({"metadata": {"name": "n1"}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "putHandler",
        ),
        row(
            "PUT",
            format!("{nci}/n2"),
            Some(json!({"metadata": {"name": "n2"}})),
            201,
            Any,
            "putHandler: 201 either way",
        ),
        row(
            "POST",
            format!("{DIG}x/network-controller-intent"),
            Some(json!({"metadata": {"name": "n1"}})),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "apierror.go: db Insert parent resource not found",
        ),
        row(
            "POST",
            wis.clone(),
            Some(
                json!({"metadata": {"name": "w1"}, "spec": {"app": "web", "workloadResource": "r1-web"}}),
            ),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "workloadintenthandler.go: the missing type is Go's \"\" in the schema's document",
        ),
        row(
            "POST",
            wis.clone(),
            Some(json!({"metadata": {"name": "w1"}, "spec": {"app": "web",
                "workloadResource": "r1-web", "type": "Deployment"}})),
            201,
            Json(json!({"metadata": full_meta("w1"), "spec": {"app": "web",
                "workloadResource": "r1-web", "type": "Deployment"}})),
            "workloadintenthandler.go createHandler",
        ),
        row(
            "GET",
            format!("{wis}/nope"),
            None,
            404,
            Text("WorkloadIntent not found\n"),
            "apierrors.go",
        ),
        row(
            "POST",
            ifs.clone(),
            Some(json!({"metadata": {"name": "i1"}, "spec": {"name": "emco-private-net"}})),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "workloadifintenthandler.go: json-schemas/network-load-interface.json",
        ),
        row(
            "POST",
            ifs.clone(),
            Some(
                json!({"metadata": {"name": "i1"}, "spec": {"interface": "eth1",
                "name": "emco-private-net", "ipAddress": "10.10.20.300"}}),
            ),
            400,
            Text("Invalid IP address = [10.10.20.300], errors: invalid ip address 10.10.20.300\n"),
            "validateWorkloadIfIntentInputs: validation.go IsIp",
        ),
        row(
            "POST",
            ifs.clone(),
            Some(
                json!({"metadata": {"name": "i1"}, "spec": {"interface": "eth1",
                "name": "emco-private-net", "macAddress": "00:11"}}),
            ),
            400,
            Text("Invalid MAC address = [00:11], errors: invalid MAC address 00:11\n"),
            "validateWorkloadIfIntentInputs: validation.go IsMac",
        ),
        row(
            "POST",
            ifs.clone(),
            Some(
                json!({"metadata": {"name": "i1"}, "spec": {"interface": "eth1",
                "name": "emco-private-net", "ipAddress": "10.10.20.2"}}),
            ),
            201,
            Json(
                json!({"metadata": full_meta("i1"), "spec": {"interface": "eth1",
                "name": "emco-private-net", "defaultGateway": "false", "ipAddress": "10.10.20.2"}}),
            ),
            "createHandler: defaultGateway defaults to \"false\"; macAddress omitempty",
        ),
        row(
            "PUT",
            format!("{ifs}/i2"),
            Some(json!({"metadata": {}, "spec": {}})),
            400,
            Text("Missing name in PUT request\n"),
            "workloadifintenthandler.go putHandler",
        ),
        row(
            "PUT",
            format!("{ifs}/i2"),
            Some(
                json!({"metadata": {"name": "i2"}, "spec": {"interface": "eth 2",
                "name": "emco-private-net"}}),
            ),
            400,
            Text(
                "Invalid interface name = [eth 2], errors: [a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]\n",
            ),
            "putHandler: no schema on PUT, then validateWorkloadIfIntentInputs",
        ),
        row(
            "GET",
            format!("{ifs}/nope"),
            None,
            404,
            Text("WorkloadIfIntent not found\n"),
            "apierrors.go",
        ),
        row(
            "DELETE",
            format!("{nci}/n1"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "apierror.go: db Remove parent child constraint",
        ),
        row(
            "DELETE",
            format!("{ifs}/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "apierror.go: db Remove resource not found",
        ),
        // ---- workload intents and interfaces: PUT, list, delete ----
        row(
            "GET",
            format!("{nci}/n2/workload-intents"),
            None,
            200,
            Json(Value::Null),
            "workloadintent.go GetWorkloadIntents: a nil slice",
        ),
        row(
            "GET",
            format!("{wis}/w2/interfaces"),
            None,
            200,
            Json(Value::Null),
            "workloadifintent.go GetWorkloadIfIntents: a nil slice",
        ),
        row(
            "PUT",
            format!("{wis}/w1"),
            Some(json!({"metadata": {"name": "w2"}, "spec": {"app": "web",
                "workloadResource": "r1-web", "type": "Deployment"}})),
            400,
            Text("Mismatched name in PUT request\n"),
            "workloadintenthandler.go putHandler",
        ),
        row(
            "PUT",
            format!("{wis}/w2"),
            Some(json!({"metadata": {"name": "w2"}, "spec": {"app": "web",
                "workloadResource": "r2-web", "type": "Deployment"}})),
            201,
            Json(json!({"metadata": full_meta("w2"), "spec": {"app": "web",
                "workloadResource": "r2-web", "type": "Deployment"}})),
            "workloadintenthandler.go putHandler: 201",
        ),
        row(
            "DELETE",
            format!("{wis}/w1"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "apierror.go: db Remove parent child constraint",
        ),
        row(
            "DELETE",
            format!("{wis}/nope"),
            None,
            404,
            Text("The requested resource not found\n"),
            "apierror.go: db Remove resource not found",
        ),
        row(
            "DELETE",
            format!("{wis}/w2"),
            None,
            204,
            Empty,
            "workloadintenthandler.go deleteHandler",
        ),
    ];
    run(&app, rec, rows).await;
}

#[tokio::test]
async fn orchestrator() {
    orchestrator_table(&Recorder::default()).await;
}

#[tokio::test]
async fn clm() {
    clm_table(&Recorder::default()).await;
}

#[tokio::test]
async fn dcm() {
    dcm_table(&Recorder::default()).await;
}

#[tokio::test]
async fn gac_and_hpa() {
    gac_and_hpa_table(&Recorder::default()).await;
}

#[tokio::test]
async fn bodies_as_go_writes_them() {
    bodies_as_go_writes_them_table(&Recorder::default()).await;
}

#[tokio::test]
async fn dtc() {
    dtc_table(&Recorder::default()).await;
}

#[tokio::test]
async fn ncm() {
    ncm_table(&Recorder::default()).await;
}

/// sfc and sfcclient (src/sfc/api/*.go, src/sfcclient/api/sfcclient.go, their apierrors.go,
/// json-schemas and the Go handler tests' cases). Where Go answers 500 for a client's mistake
/// (link errors missing from sfc's error table, a list under a missing DIG) we answer the 404 /
/// 409 its text says.
async fn sfc_table(rec: &Recorder) {
    let app = app();
    run(&app, rec, group_rows()).await;
    let nc = format!("{DIG}/network-chains");
    let links = format!("{nc}/s1/links");
    let cs = format!("{nc}/s1/client-selectors");
    let pn = format!("{nc}/s1/provider-networks");
    let sc = format!("{DIG}/sfc-clients");
    let meta =
        |name: &str| json!({"name": name, "description": "", "userData1": "", "userData2": ""});
    let chain = |name: &str| {
        json!({"metadata": {"name": name},
        "spec": {"chainType": "Routing", "namespace": "default"}})
    };
    let link = |name: &str, label: &str| {
        json!({"metadata": {"name": name}, "spec": {
        "leftNet": "virtual-net1", "rightNet": "dync-net1", "linkLabel": label, "app": "slb",
        "workloadResource": "slb", "resourceType": "Deployment"}})
    };
    let selector = |name: &str, end: &str| {
        json!({"metadata": {"name": name}, "spec": {
        "chainEnd": end, "podSelector": {"matchLabels": {"sfc": "head"}},
        "namespaceSelector": {"matchLabels": {"sfc": "head"}}}})
    };
    let network = |name: &str, gw: &str, subnet: &str| {
        json!({"metadata": {"name": name},
        "spec": {"chainEnd": "left", "providerNetwork": "left-pnetwork", "gatewayIp": gw,
        "subnet": subnet}})
    };
    let client = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"chainEnd": "left",
        "sfcIntent": "s1", "compositeApp": "ca", "compositeAppVersion": "v1",
        "deploymentIntentGroup": "d1", "app": "left-nginx", "workloadResource": "left-nginx",
        "resourceType": "Deployment"}})
    };
    let name_pattern =
        "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n";
    let rows = vec![
        row(
            "GET",
            nc.clone(),
            None,
            200,
            Json(json!([])),
            "sfc.go getSfcHandler: an empty list is []",
        ),
        row(
            "GET",
            format!("{DIG}x/network-chains"),
            None,
            404,
            Text("DeploymentIntentGroup not found\n"),
            "GetAllSfcIntents looks the DIG up (Go: 500)",
        ),
        row(
            "POST",
            nc.clone(),
            Some(json!({"metadata": {"name": "s1"},
            "spec": {"namespace": "default"}})),
            400,
            Text("Invalid Input:\nspec.chainType must be one of the following: \"Routing\"\n"),
            "sfc_test.go: missing chainType; the struct writes \"\"",
        ),
        row(
            "POST",
            nc.clone(),
            Some(chain("test=sfcintent")),
            400,
            Text(name_pattern),
            "sfc_test.go: bad name",
        ),
        row(
            "POST",
            nc.clone(),
            Some(json!("")),
            422,
            Any,
            "createSfcHandler: decode error",
        ),
        row(
            "POST",
            nc.clone(),
            None,
            400,
            Text("Empty body\n"),
            "createSfcHandler: io.EOF",
        ),
        row(
            "POST",
            nc.clone(),
            Some(chain("s1")),
            201,
            Json(
                json!({"metadata": meta("s1"), "spec": {"chainType": "Routing", "namespace": "default"}}),
            ),
            "createSfcHandler",
        ),
        row(
            "POST",
            nc.clone(),
            Some(chain("s1")),
            409,
            Text("SFC Intent already exists\n"),
            "apierrors.go",
        ),
        row("GET", format!("{nc}/s1"), None, 200, Any, "getSfcHandler"),
        row(
            "GET",
            format!("{nc}/nope"),
            None,
            404,
            Text("SFC Intent not found\n"),
            "apierrors.go",
        ),
        row(
            "PUT",
            format!("{nc}/s2"),
            Some(chain("s1")),
            400,
            Text("Mismatched name in PUT request\n"),
            "putSfcHandler",
        ),
        row(
            "PUT",
            format!("{nc}/s2"),
            Some(chain("s2")),
            201,
            Any,
            "putSfcHandler: creates, 201",
        ),
        row(
            "POST",
            format!("{DIG}x/network-chains"),
            Some(chain("s1")),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "db Insert parent resource not found",
        ),
        // ---- links: sfclink.go ----
        row(
            "GET",
            links.clone(),
            None,
            200,
            Json(json!([])),
            "getLinkHandler",
        ),
        row(
            "GET",
            format!("{nc}/nope/links"),
            None,
            404,
            Text("SFC Intent not found\n"),
            "GetAllSfcLinkIntents looks the chain up",
        ),
        row(
            "POST",
            links.clone(),
            Some(link("l1", "app")),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]=([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "sfc-link.json: linkLabel is one key=value",
        ),
        row(
            "POST",
            links.clone(),
            Some(link("l1", "app=slb")),
            201,
            Json(
                json!({"metadata": meta("l1"), "spec": {"leftNet": "virtual-net1",
                "rightNet": "dync-net1", "linkLabel": "app=slb", "app": "slb",
                "workloadResource": "slb", "resourceType": "Deployment"}}),
            ),
            "createLinkHandler",
        ),
        row(
            "POST",
            links.clone(),
            Some(link("l1", "app=slb")),
            409,
            Text("SFC Link Intent already exists\n"),
            "sfclink.go (Go: 500, unmapped)",
        ),
        row(
            "POST",
            format!("{nc}/nope/links"),
            Some(link("l1", "app=slb")),
            409,
            Text("Cannot perform requested operation. Parent resource not found\n"),
            "db Insert parent resource not found",
        ),
        row(
            "GET",
            format!("{links}/l1"),
            None,
            200,
            Any,
            "getLinkHandler",
        ),
        row(
            "GET",
            format!("{links}/nope"),
            None,
            404,
            Text("SFC Link Intent not found\n"),
            "sfclink.go (Go: 500, unmapped)",
        ),
        row(
            "PUT",
            format!("{links}/l1"),
            Some(link("l1", "example.com/app=slb")),
            201,
            Any,
            "putLinkHandler",
        ),
        // ---- client selectors: sfcclientselector.go ----
        row(
            "GET",
            cs.clone(),
            None,
            200,
            Json(json!([])),
            "getSfcClientSelectorHandler",
        ),
        row(
            "POST",
            cs.clone(),
            Some(selector("cs1", "lefty")),
            400,
            Text(
                "Invalid Input:\nspec.chainEnd must be one of the following: \"left\", \"right\"\n",
            ),
            "sfcclientselector_test.go: chainEnd lefty",
        ),
        row(
            "POST",
            cs.clone(),
            Some(json!({"metadata": {"name": "cs1"}, "spec": {
            "chainEnd": "left", "podSelector": {"matchedLabels": {"sfc": "head"}},
            "namespaceSelector": {"matchLabels": {"sfc": "head"}}}})),
            400,
            Text("Invalid Input:\nmatchLabels is required\n"),
            "sfcclientselector_test.go: the typo matchedLabels",
        ),
        row(
            "POST",
            cs.clone(),
            Some(selector("cs1", "left")),
            201,
            Json(json!({"metadata": meta("cs1"), "spec": {"chainEnd": "left",
                "podSelector": {"matchLabels": {"sfc": "head"}},
                "namespaceSelector": {"matchLabels": {"sfc": "head"}}}})),
            "createSfcClientSelectorHandler",
        ),
        row(
            "POST",
            cs.clone(),
            Some(selector("cs1", "left")),
            409,
            Text("SFC Client Selector Intent already exists\n"),
            "apierrors.go",
        ),
        row(
            "GET",
            format!("{cs}/cs1"),
            None,
            200,
            Any,
            "getSfcClientSelectorHandler",
        ),
        row(
            "GET",
            format!("{cs}/nope"),
            None,
            404,
            Text("SFC Client Selector Intent not found\n"),
            "apierrors.go",
        ),
        row(
            "PUT",
            format!("{cs}/cs1"),
            Some(selector("cs1", "right")),
            201,
            Any,
            "putSfcClientSelectorHandler",
        ),
        // ---- provider networks: sfcprovidernetwork.go ----
        row(
            "GET",
            pn.clone(),
            None,
            200,
            Json(json!([])),
            "getSfcProviderNetworkHandler",
        ),
        row(
            "POST",
            pn.clone(),
            Some(network("pn1", "1.2.3.400", "1.2.3.0/24")),
            400,
            Text("Invalid Input:\nDoes not match format 'ipv4'\n"),
            "sfcprovidernetwork_test.go: gatewayIp 1.2.3.400",
        ),
        row(
            "POST",
            pn.clone(),
            Some(network("pn1", "1.2.3.4", "1.2.3.0/33")),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([0-9]{1,3}[.]){3}[0-9]{1,3}(\\/([0-9]|[1-2][0-9]|3[0-2]))?$'\n",
            ),
            "sfcprovidernetwork_test.go: subnet /33",
        ),
        row(
            "POST",
            pn.clone(),
            Some(network("pn1", "172.30.10.2", "172.30.10.0/24")),
            201,
            Json(json!({"metadata": meta("pn1"), "spec": {"chainEnd": "left",
                "providerNetwork": "left-pnetwork", "gatewayIp": "172.30.10.2",
                "subnet": "172.30.10.0/24"}})),
            "createSfcProviderNetworkHandler",
        ),
        row(
            "POST",
            pn.clone(),
            Some(network("pn1", "172.30.10.2", "172.30.10.0/24")),
            409,
            Text("SFC Provider Network Intent already exists\n"),
            "apierrors.go",
        ),
        row(
            "GET",
            format!("{pn}/pn1"),
            None,
            200,
            Any,
            "getSfcProviderNetworkHandler",
        ),
        row(
            "GET",
            format!("{pn}/nope"),
            None,
            404,
            Text("SFC Provider Network Intent not found\n"),
            "apierrors.go",
        ),
        row(
            "PUT",
            format!("{pn}/pn1"),
            Some(network("pn1", "172.30.10.1", "172.30.10.0/24")),
            201,
            Any,
            "putSfcProviderNetworkHandler",
        ),
        // ---- deletes: children first ----
        row(
            "DELETE",
            format!("{nc}/s1"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "db Remove parent child constraint",
        ),
        row(
            "DELETE",
            format!("{links}/l1"),
            None,
            204,
            Empty,
            "deleteLinkHandler",
        ),
        row(
            "DELETE",
            format!("{cs}/cs1"),
            None,
            204,
            Empty,
            "deleteSfcClientSelectorHandler",
        ),
        row(
            "DELETE",
            format!("{pn}/pn1"),
            None,
            204,
            Empty,
            "deleteSfcProviderNetworkHandler",
        ),
        row(
            "DELETE",
            format!("{nc}/s1"),
            None,
            204,
            Empty,
            "deleteSfcHandler",
        ),
        row(
            "DELETE",
            format!("{nc}/s1"),
            None,
            404,
            Text("The requested resource not found\n"),
            "db Remove resource not found",
        ),
        // ---- sfc clients: src/sfcclient/api/sfcclient.go ----
        row(
            "GET",
            sc.clone(),
            None,
            200,
            Json(json!([])),
            "getSfcClientHandler",
        ),
        row(
            "POST",
            sc.clone(),
            Some(
                json!({"metadata": {"name": "c1"}, "spec": {"chainEnd": "left",
            "sfcIntent": "s1", "compositeApp": "ca", "compositeAppVersion": "v1",
            "deploymentIntentGroup": "d1", "workloadResource": "left-nginx",
            "resourceType": "Deployment"}}),
            ),
            400,
            Text(
                "Invalid Input:\nDoes not match pattern '^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'\n",
            ),
            "sfcclient_test.go: missing app",
        ),
        row(
            "POST",
            sc.clone(),
            Some(client("c1")),
            201,
            Json(
                json!({"metadata": meta("c1"), "spec": {"chainEnd": "left", "sfcIntent": "s1",
                "compositeApp": "ca", "compositeAppVersion": "v1", "deploymentIntentGroup": "d1",
                "app": "left-nginx", "workloadResource": "left-nginx",
                "resourceType": "Deployment"}}),
            ),
            "createSfcClientHandler",
        ),
        row(
            "POST",
            sc.clone(),
            Some(client("c1")),
            409,
            Text("SFC Client Intent already exists\n"),
            "apierrors.go",
        ),
        row(
            "GET",
            format!("{sc}/c1"),
            None,
            200,
            Any,
            "getSfcClientHandler",
        ),
        row(
            "GET",
            format!("{sc}/nope"),
            None,
            404,
            Text("SFC Client Intent not found\n"),
            "apierrors.go",
        ),
        row(
            "PUT",
            format!("{sc}/c2"),
            Some(client("c1")),
            400,
            Text("Mismatched name in PUT request\n"),
            "putSfcClientHandler",
        ),
        row(
            "PUT",
            format!("{sc}/c1"),
            Some(client("c1")),
            201,
            Any,
            "putSfcClientHandler",
        ),
        row(
            "DELETE",
            format!("{sc}/c1"),
            None,
            204,
            Empty,
            "deleteSfcClientHandler",
        ),
    ];
    run(&app, rec, rows).await;
}

/// ca-certs' objects (src/ca-certs/api/{cp_cert,cp_cluster,lc_cert,lc_cluster,logicalcloud}.go,
/// helper.go `validateRequestBody`, pkg/module/errorstring.go, and the cases of api/test/*):
/// the handler's own checks before the schema, all at once; PUT creates (201) or replaces (200);
/// a replace only while both lifecycles are Created. Where ca-certs stores a group under a
/// missing certificate we answer 404 `caCert not found`.
async fn ca_certs_table(rec: &Recorder) {
    let app = app();
    let cp = "/v2/cluster-providers/p1/ca-certs";
    let lc = "/v2/projects/proj1/ca-certs";
    let cert = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {"isCA": true,
            "issuerRef": {"name": "foo", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "duration": "8760h", "issuingCluster": {"cluster": "issuer1", "clusterProvider": "p1"},
            "csrInfo": {"keySize": 4096, "version": 1, "dnsNames": [],
                "algorithm": {"publicKeyAlgorithm": "RSA", "signatureAlgorithm": "SHA512WithRSA"},
                "subject": {"locale": {"country": ["US"]}, "names": {"commonName": "foo",
                    "commonNamePrefix": "foo"}, "organization": {}}}}})
    };
    let echoed = |name: &str| {
        json!({"metadata": {"name": name, "description": "", "userData1": "", "userData2": ""},
            "spec": {"isCA": true,
            "issuerRef": {"name": "foo", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "duration": "8760h", "issuingCluster": {"cluster": "issuer1", "clusterProvider": "p1"},
            "csrInfo": {"keySize": 4096, "version": 1,
                "algorithm": {"publicKeyAlgorithm": "RSA", "signatureAlgorithm": "SHA512WithRSA"},
                "subject": {"locale": {"country": ["US"]}, "names": {"commonNamePrefix": "foo",
                    "CommonName": "foo"}, "organization": {}}}}})
    };
    let group = |name: &str| {
        json!({"metadata": {"name": name},
            "spec": {"scope": "name", "cluster": "cluster1", "clusterProvider": "p1"}})
    };
    let cloud = |name: &str| json!({"metadata": {"name": name}, "spec": {"logicalCloud": name}});
    let rows = vec![
        row(
            "POST",
            "/v2/cluster-providers",
            Some(json!({"metadata": {"name": "p1"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "POST",
            "/v2/projects",
            Some(json!({"metadata": {"name": "proj1"}})),
            201,
            Any,
            "setup",
        ),
        row(
            "GET",
            cp,
            None,
            200,
            Json(Value::Null),
            "GetAllCert: a nil slice",
        ),
        row(
            "POST",
            cp,
            Some(json!({"metadata": {"name": ""}, "spec": cert("x")["spec"]})),
            400,
            Text("caCert name may not be empty\n"),
            "cp_cert_test.go: empty name",
        ),
        row(
            "POST",
            cp,
            Some(json!({"metadata": {"name": "c"}, "spec": {}})),
            400,
            Text(
                "issuer name may not be empty\nissuer kind may not be empty\nissuer group/version may not be empty\nissuing cluster may not be empty\nissuing clusterProvider may not be empty\n",
            ),
            "validateCertData: every failure, one per line",
        ),
        row(
            "POST",
            cp,
            None,
            400,
            Text("empty request body\n"),
            "validateRequestBody: io.EOF",
        ),
        row(
            "POST",
            cp,
            Some(json!("not an object")),
            422,
            Text("error decoding the request body\n"),
            "validateRequestBody: undecodable",
        ),
        row(
            "POST",
            cp,
            Some({
                let mut c = cert("bad");
                c["spec"]["issuerRef"]["kind"] = json!("Ca");
                c
            }),
            400,
            Text(
                "Invalid Input:\nspec.issuerRef.kind must be one of the following: \"ClusterIssuer\", \"Issuer\"\n",
            ),
            "certificate.json: issuerRef.kind",
        ),
        row(
            "POST",
            cp,
            Some(cert("cert1")),
            201,
            Json(echoed("cert1")),
            "cp_cert_test.go: create, Go's field names back",
        ),
        row(
            "POST",
            cp,
            Some(cert("cert1")),
            409,
            Text("caCert already exists\n"),
            "cp_cert_test.go: exists",
        ),
        row(
            "GET",
            format!("{cp}/cert1"),
            None,
            200,
            Json(echoed("cert1")),
            "cp_cert_test.go: get",
        ),
        row(
            "GET",
            format!("{cp}/nope"),
            None,
            404,
            Text("caCert not found\n"),
            "cp_cert_test.go: get missing",
        ),
        row(
            "GET",
            cp,
            None,
            200,
            Json(json!([echoed("cert1")])),
            "GetAllCert",
        ),
        row(
            "PUT",
            format!("{cp}/other"),
            Some(cert("cert1")),
            400,
            Text("caCert name is not matching with the name in the request\n"),
            "createOrUpdateCertificate",
        ),
        row(
            "PUT",
            format!("{cp}/cert1"),
            Some(cert("cert1")),
            200,
            Json(echoed("cert1")),
            "cp_cert_test.go: update existing",
        ),
        row(
            "PUT",
            format!("{cp}/cert4"),
            Some(cert("cert4")),
            201,
            Json(echoed("cert4")),
            "cp_cert_test.go: update creates",
        ),
        row(
            "GET",
            format!("{cp}/cert1/clusters"),
            None,
            200,
            Json(Value::Null),
            "GetAllClusterGroups: a nil slice",
        ),
        row(
            "POST",
            format!("{cp}/cert1/clusters"),
            Some(
                json!({"metadata": {"name": ""}, "spec": {"scope": "name", "clusterProvider": "p1"}}),
            ),
            400,
            Text(
                "clusterGroup name may not be empty\ncluster name may not be empty when the scope is the name\n",
            ),
            "cp_cluster_test.go: empty name",
        ),
        row(
            "POST",
            format!("{cp}/cert1/clusters"),
            Some(
                json!({"metadata": {"name": "g"}, "spec": {"scope": "label", "clusterProvider": "p1"}}),
            ),
            400,
            Text("cluster label may not be empty when the scope is the label\n"),
            "validateClusterGroupData",
        ),
        row(
            "POST",
            format!("{cp}/cert1/clusters"),
            Some(
                json!({"metadata": {"name": "g"}, "spec": {"scope": "all", "cluster": "c", "clusterProvider": "p1"}}),
            ),
            400,
            Text("Invalid Input:\nspec.scope must be one of the following: \"label\", \"name\"\n"),
            "cluster.json: scope",
        ),
        row(
            "POST",
            format!("{cp}/cert1/clusters"),
            Some(group("g1")),
            201,
            Json(
                json!({"metadata": {"name": "g1", "description": "", "userData1": "", "userData2": ""},
                "spec": {"cluster": "cluster1", "clusterProvider": "p1", "scope": "name"}}),
            ),
            "cp_cluster_test.go: create",
        ),
        row(
            "POST",
            format!("{cp}/cert1/clusters"),
            Some(group("g1")),
            409,
            Text("caCert cluster group already exists\n"),
            "cp_cluster_test.go: exists",
        ),
        row(
            "POST",
            format!("{cp}/nope/clusters"),
            Some(group("g1")),
            404,
            Text("caCert not found\n"),
            "under a missing certificate (ca-certs stores it anyway)",
        ),
        row(
            "GET",
            format!("{cp}/cert1/clusters/g2"),
            None,
            404,
            Text("caCert cluster group not found\n"),
            "cp_cluster_test.go: get missing",
        ),
        row(
            "PUT",
            format!("{cp}/cert1/clusters/g2"),
            Some(group("g1")),
            400,
            Text("clusterGroup name is not matching with the name in the request\n"),
            "createOrUpdateClusterGroup",
        ),
        row(
            "PUT",
            format!("{cp}/cert1/clusters/g1"),
            Some(group("g1")),
            200,
            Any,
            "cp_cluster_test.go: update",
        ),
        row(
            "GET",
            format!("{cp}/cert1/clusters"),
            None,
            200,
            Json(
                json!([{"metadata": {"name": "g1", "description": "", "userData1": "", "userData2": ""},
                "spec": {"cluster": "cluster1", "clusterProvider": "p1", "scope": "name"}}]),
            ),
            "GetAllClusterGroups",
        ),
        row(
            "DELETE",
            format!("{cp}/cert1"),
            None,
            409,
            Text("Cannot delete parent without deleting child references first\n"),
            "the database refuses a certificate with cluster groups",
        ),
        row(
            "GET",
            format!("{cp}/cert1/enrollment/status"),
            None,
            200,
            Any,
            "handleStatus: Created",
        ),
        row(
            "GET",
            format!("{cp}/cert1/distribution/status?status=x"),
            None,
            400,
            Text("invalid query status\n"),
            "_statusQueryParams (Go: 500 and carries on)",
        ),
        row(
            "GET",
            format!("{cp}/nope/distribution/status"),
            None,
            404,
            Text("caCert not found\n"),
            "Status of a missing certificate",
        ),
        row(
            "POST",
            format!("{cp}/nope/enrollment/instantiate"),
            None,
            404,
            Text("caCert not found\n"),
            "Instantiate of a missing certificate",
        ),
        row(
            "POST",
            format!("{cp}/cert1/enrollment/terminate"),
            None,
            409,
            Text("The CaCert isn't in an expected status so not taking any action\n"),
            "VerifyState(Terminate) before any instantiate (Go: rsync's 500)",
        ),
        row(
            "POST",
            format!("{cp}/cert1/enrollment/update"),
            None,
            202,
            Empty,
            "Update of a certificate not enrolled: nothing, as ca-certs",
        ),
        row(
            "POST",
            format!("{cp}/cert1/distribution/instantiate"),
            None,
            409,
            Text("enrollment is not completed\n"),
            "VerifyEnrollmentState (Go: 500)",
        ),
        row(
            "POST",
            format!("{cp}/cert1/distribution/update"),
            None,
            202,
            Empty,
            "Update of a certificate not distributed: nothing",
        ),
        row(
            "POST",
            format!("{cp}/cert1/distribution/terminate"),
            None,
            409,
            Text("The CaCert isn't in an expected status so not taking any action\n"),
            "VerifyState(Terminate)",
        ),
        row(
            "DELETE",
            format!("{cp}/cert1/clusters/g1"),
            None,
            204,
            Empty,
            "cp_cluster_test.go: delete",
        ),
        row(
            "DELETE",
            format!("{cp}/cert1/clusters/g1"),
            None,
            404,
            Text("The requested resource not found\n"),
            "db Remove of a missing group",
        ),
        row(
            "DELETE",
            format!("{cp}/cert1"),
            None,
            204,
            Empty,
            "cp_cert_test.go: delete",
        ),
        row(
            "DELETE",
            format!("{cp}/cert1"),
            None,
            404,
            Text("The requested resource not found\n"),
            "cp_cert_test.go: delete missing",
        ),
        row("DELETE", format!("{cp}/cert4"), None, 204, Empty, "cleanup"),
        row(
            "POST",
            lc,
            Some(cert("cert2")),
            201,
            Json(echoed("cert2")),
            "lc_cert_test.go: create",
        ),
        row(
            "GET",
            lc,
            None,
            200,
            Json(json!([echoed("cert2")])),
            "GetAllCert",
        ),
        row(
            "GET",
            format!("{lc}/cert2"),
            None,
            200,
            Json(echoed("cert2")),
            "lc_cert_test.go: get",
        ),
        row(
            "PUT",
            format!("{lc}/cert2"),
            Some(cert("cert2")),
            200,
            Any,
            "lc_cert_test.go: update",
        ),
        row(
            "GET",
            format!("{lc}/cert2/logical-clouds"),
            None,
            200,
            Json(Value::Null),
            "GetAllLogicalClouds",
        ),
        row(
            "POST",
            format!("{lc}/cert2/logical-clouds"),
            Some(json!({"metadata": {"name": ""}, "spec": {}})),
            400,
            Text("caCert logicalCloud name may not be empty\nlogicalCloud may not be empty\n"),
            "logicalcloud_test.go: empty name",
        ),
        row(
            "POST",
            format!("{lc}/cert2/logical-clouds"),
            Some(cloud("foo")),
            201,
            Json(
                json!({"metadata": {"name": "foo", "description": "", "userData1": "", "userData2": ""},
                "spec": {"logicalCloud": "foo"}}),
            ),
            "logicalcloud_test.go: create",
        ),
        row(
            "POST",
            format!("{lc}/cert2/logical-clouds"),
            Some(cloud("foo")),
            409,
            Text("caCert logical cloud already exists\n"),
            "logicalcloud_test.go: exists",
        ),
        row(
            "GET",
            format!("{lc}/cert2/logical-clouds/foo"),
            None,
            200,
            Any,
            "logicalcloud_test.go: get",
        ),
        row(
            "GET",
            format!("{lc}/cert2/logical-clouds/bar"),
            None,
            404,
            Text("caCert logical cloud not found\n"),
            "logicalcloud_test.go: get missing",
        ),
        row(
            "GET",
            format!("{lc}/cert2/logical-clouds"),
            None,
            200,
            Any,
            "GetAllLogicalClouds",
        ),
        row(
            "PUT",
            format!("{lc}/cert2/logical-clouds/bar"),
            Some(cloud("foo")),
            400,
            Text("caCert logicalCloud name is not matching with the name in the request\n"),
            "createOrUpdateLogicalCloud",
        ),
        row(
            "PUT",
            format!("{lc}/cert2/logical-clouds/foo"),
            Some(cloud("foo")),
            200,
            Any,
            "logicalcloud_test.go: update",
        ),
        row(
            "POST",
            format!("{lc}/cert2/logical-clouds/foo/clusters"),
            Some(group("g1")),
            201,
            Any,
            "lc_cluster_test.go: create",
        ),
        row(
            "GET",
            format!("{lc}/cert2/logical-clouds/foo/clusters"),
            None,
            200,
            Any,
            "lc_cluster_test.go: list",
        ),
        row(
            "GET",
            format!("{lc}/cert2/logical-clouds/foo/clusters/g1"),
            None,
            200,
            Any,
            "lc_cluster_test.go: get",
        ),
        row(
            "PUT",
            format!("{lc}/cert2/logical-clouds/foo/clusters/g1"),
            Some(group("g1")),
            200,
            Any,
            "lc_cluster_test.go: update",
        ),
        row(
            "GET",
            format!("{lc}/cert2/enrollment/status"),
            None,
            200,
            Any,
            "lc handleStatus",
        ),
        row(
            "GET",
            format!("{lc}/cert2/distribution/status"),
            None,
            200,
            Any,
            "lc handleStatus",
        ),
        row(
            "POST",
            format!("{lc}/cert2/enrollment/instantiate"),
            None,
            404,
            Text("Logical Cloud not found\n"),
            "the logical cloud a record names is looked up",
        ),
        row(
            "POST",
            format!("{lc}/cert2/enrollment/update"),
            None,
            202,
            Empty,
            "lc Update: nothing",
        ),
        row(
            "POST",
            format!("{lc}/cert2/enrollment/terminate"),
            None,
            409,
            Text("The CaCert isn't in an expected status so not taking any action\n"),
            "lc VerifyState",
        ),
        row(
            "POST",
            format!("{lc}/cert2/distribution/instantiate"),
            None,
            409,
            Text("enrollment is not completed\n"),
            "lc VerifyEnrollmentState",
        ),
        row(
            "POST",
            format!("{lc}/cert2/distribution/update"),
            None,
            202,
            Empty,
            "lc Update: nothing",
        ),
        row(
            "POST",
            format!("{lc}/cert2/distribution/terminate"),
            None,
            409,
            Text("The CaCert isn't in an expected status so not taking any action\n"),
            "lc VerifyState",
        ),
        row(
            "DELETE",
            format!("{lc}/cert2/logical-clouds/foo/clusters/g1"),
            None,
            204,
            Empty,
            "lc_cluster_test.go: delete",
        ),
        row(
            "DELETE",
            format!("{lc}/cert2/logical-clouds/foo"),
            None,
            204,
            Empty,
            "logicalcloud_test.go: delete",
        ),
        row(
            "DELETE",
            format!("{lc}/cert2"),
            None,
            204,
            Empty,
            "lc_cert_test.go: delete",
        ),
        row(
            "GET",
            format!("{lc}/cert2"),
            None,
            404,
            Text("caCert not found\n"),
            "gone",
        ),
    ];
    run(&app, rec, rows).await;
}

#[tokio::test]
async fn ca_certs() {
    ca_certs_table(&Recorder::default()).await;
}

#[tokio::test]
async fn ovnaction() {
    ovnaction_table(&Recorder::default()).await;
}

#[tokio::test]
async fn sfc() {
    sfc_table(&Recorder::default()).await;
}

// ---- ours, not EMCO's: rollouts in waves, drift policies, preview ----
// emco-core/src/rollout.rs, drift.rs, preview.rs; emco-orchestrator/src/rest/lifecycle.rs. Each
// policy is a DIG's object like EMCO's intents (same codes); the rollout of a group never
// instantiated is missing; a preview of a group without apps says what is missing.
async fn ours_table(rec: &Recorder) {
    let app = app();
    run(&app, rec, group_rows()).await;
    let policy = json!({"metadata": {"name": "waves"}, "spec": {"waves": [{"name": "canary", "count": 1}, {}]}});
    let drift = json!({"metadata": {"name": "correct"}, "spec": {"action": "correct"}});
    let mut rows = Vec::new();
    for (collection, body) in [("rollout-policies", policy), ("drift-policies", drift)] {
        let c = format!("{DIG}/{collection}");
        let name = body["metadata"]["name"].as_str().unwrap().to_owned();
        let item = format!("{c}/{name}");
        rows.extend([
            row("POST", &c, Some(body.clone()), 201, Any, "ours: create"),
            row("POST", &c, Some(body.clone()), 409, Any, "ours: duplicate"),
            row("GET", &c, None, 200, Any, "ours: list"),
            row("GET", &item, None, 200, Any, "ours: get"),
            row(
                "PUT",
                &item,
                Some(body),
                201,
                Any,
                "ours: replace (201, as EMCO's orchestrator answers every PUT)",
            ),
            row("DELETE", &item, None, 204, Empty, "ours: delete"),
            row("GET", &item, None, 404, Any, "ours: gone"),
        ]);
    }
    rows.extend([
        row(
            "GET",
            format!("{DIG}/preview"),
            None,
            409,
            Any,
            "ours: preview of a group without apps",
        ),
        row(
            "GET",
            format!("{DIG}/preview?detail=nope"),
            None,
            400,
            Any,
            "ours: bad preview option",
        ),
        row(
            "GET",
            format!("{DIG}/rollout"),
            None,
            404,
            Any,
            "ours: never rolled out",
        ),
        row(
            "POST",
            format!("{DIG}/rollout/approve"),
            None,
            404,
            Any,
            "ours: no rollout to approve",
        ),
        row(
            "POST",
            format!("{DIG}/rollout/pause"),
            None,
            404,
            Any,
            "ours: no rollout to pause",
        ),
        row(
            "POST",
            format!("{DIG}/rollout/resume"),
            None,
            404,
            Any,
            "ours: no rollout to resume",
        ),
        row(
            "POST",
            format!("{DIG}/rollout/abort"),
            None,
            404,
            Any,
            "ours: no rollout to abort",
        ),
    ]);
    run(&app, rec, rows).await;
}

#[tokio::test]
async fn ours() {
    ours_table(&Recorder::default()).await;
}

/// emco-py's client (`emco-py/python/emco/_operations.py`) is the document's operations: the
/// method and route of each operationId, and the ids as a type mypy checks every call against.
/// `EMCO_BLESS=1 cargo test -p emco-server --test contract python_client` writes it after a
/// change of the document.
#[test]
fn python_client_is_generated_from_the_document() {
    let doc = emco_go::yaml::parse(emco_service::OPENAPI).unwrap();
    let mut ops = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "post", "put", "delete"].contains(&method.as_str()) {
                continue;
            }
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            let before = ops.insert(id.to_owned(), (method.to_uppercase(), path.clone()));
            assert!(before.is_none(), "operationId {id} is given twice");
        }
    }
    let mut text = String::from(
        "\"\"\"The operations of EMCO's REST API: the method and route of each operationId of the\n\
         OpenAPI document emco-server serves at /v2/openapi.yaml (emco-service/openapi.yaml).\n\
         Generated by emco-server/tests/contract.rs (python_client_is_generated_from_the_document);\n\
         do not edit.\"\"\"\n\nfrom typing import Dict, Literal, Tuple\n\nOperationId = Literal[\n",
    );
    for id in ops.keys() {
        text.push_str(&format!("    \"{id}\",\n"));
    }
    text.push_str("]\n\nOPERATIONS: Dict[str, Tuple[str, str]] = {\n");
    for (id, (method, path)) in &ops {
        text.push_str(&format!("    \"{id}\": (\"{method}\", \"{path}\"),\n"));
    }
    text.push_str("}\n");
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../emco-py/python/emco/_operations.py");
    if std::env::var_os("EMCO_BLESS").is_some() {
        std::fs::write(&file, &text).unwrap();
    }
    let written = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        written == text,
        "{} is not the document's operations: EMCO_BLESS=1 cargo test -p emco-server --test \
         contract python_client",
        file.display()
    );
}

/// Routes outside the REST API (health, readiness, metrics, the document itself): no contract
/// row.
const OURS: &[&str] = &["/healthz", "/readyz", "/metrics", "/v2/openapi.yaml"];

/// Whether the path `path` (a query ignored) is an instance of the route template `template`
/// (`{param}` matches one non-empty segment).
fn matches(template: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter().zip(&p).all(|(t, p)| {
            if t.starts_with('{') && t.ends_with('}') {
                !p.is_empty()
            } else {
                t == p
            }
        })
}

// ---- workflowmgr: src/workflowmgr/api/workflow_intent.go, pkg/module/workflow_intent.go ----
// workflowmgr answers every module error 500 with its text; we keep the texts with a 404, 409 or
// 503 (rows marked `differs:`). Starting, following and cancelling real workflows is
// tests/workflows.rs's, against a Temporal server.
async fn workflowmgr_table(rec: &Recorder) {
    let app = app();
    run(&app, rec, group_rows()).await;
    let wfi = format!("{DIG}/temporal-workflow-intents");
    // Keys as EMCO's example sends them, matched case-insensitively by Go.
    let intent = |name: &str| {
        json!({"metadata": {"name": name}, "spec": {
            "workflowClient": {"clientEndpointName": "127.0.0.1", "clientEndpointPort": 1},
            "temporal": {"workflowClientName": "migrate_workflowclient",
                "workflowStartOptions": {"id": "migrate-1", "taskqueue": "MIGRATION_TASK_Q"}}}})
    };
    // As Go writes the struct back: every start option, Go's field names.
    let stored = json!({"metadata": meta("w1"), "spec": {
        "workflowClient": {"clientEndpointName": "127.0.0.1", "clientEndpointPort": 1},
        "temporal": {"workflowClientName": "migrate_workflowclient",
            "workflowStartOptions": {"ID": "migrate-1", "TaskQueue": "MIGRATION_TASK_Q",
                "WorkflowExecutionTimeout": 0, "WorkflowRunTimeout": 0, "WorkflowTaskTimeout": 0,
                "WorkflowIDReusePolicy": 0, "WorkflowExecutionErrorWhenAlreadyStarted": false,
                "RetryPolicy": null, "CronSchedule": "", "Memo": null, "SearchAttributes": null},
            "workflowParams": {}}}});
    let rows = vec![
        row(
            "GET",
            &wfi,
            None,
            200,
            Json(Value::Null),
            "workflow_intent.go getHandler: nil slice",
        ),
        row(
            "POST",
            &wfi,
            Some(intent("w1")),
            201,
            Json(stored.clone()),
            "createHandler",
        ),
        row(
            "POST",
            &wfi,
            Some(intent("w1")),
            409,
            Text("WorkflowIntent already exists\n"),
            "differs: module CreateWorkflowIntent, 500 in EMCO",
        ),
        row(
            "POST",
            &wfi,
            None,
            400,
            Text("EOF\n"),
            "createHandler: io.EOF",
        ),
        row(
            "POST",
            &wfi,
            Some(
                json!({"metadata": {"name": "w2"}, "spec": {"workflowClient": {},
                "temporal": {"workflowStartOptions": {}, "workflowParams": {
                    "activityOptions": {"a": {"TaskQueue": "q"}}}}}}),
            ),
            400,
            Any,
            "createHandler, json-schemas/workflow_intent.json: an activity option needs all \
             its fields",
        ),
        row(
            "POST",
            &wfi,
            Some(
                json!({"metadata": {"name": "w2"}, "spec": {"workflowClient":
                {"clientEndpointPort": "x"}}}),
            ),
            422,
            Any,
            "createHandler: a body that does not decode",
        ),
        row(
            "GET",
            format!("{wfi}/w1"),
            None,
            200,
            Json(stored.clone()),
            "getHandler",
        ),
        row(
            "GET",
            &wfi,
            None,
            200,
            Json(json!([stored])),
            "getHandler: the list",
        ),
        row(
            "GET",
            format!("{wfi}/nope"),
            None,
            404,
            Text("Workflow Intent not found\n"),
            "differs: module GetWorkflowIntent, 500 in EMCO",
        ),
        row(
            "PUT",
            format!("{wfi}/w1"),
            Some(intent("w1")),
            405,
            Any,
            "api.go: no PUT route",
        ),
        row(
            "POST",
            format!("{wfi}/w1/start"),
            None,
            503,
            Any,
            "differs: module StartWorkflowIntent, the POST to the client fails, 500 in EMCO",
        ),
        row(
            "POST",
            format!("{wfi}/nope/start"),
            None,
            404,
            Text("Workflow Intent not found\n"),
            "differs: module StartWorkflowIntent, 500 in EMCO",
        ),
        row(
            "GET",
            format!("{wfi}/w1/status?temporalServer=127.0.0.1:1&queryParams=x"),
            None,
            400,
            Text("Unknown query parameter: queryParams\n"),
            "workflow_intent.go buildStatusQuery",
        ),
        row(
            "GET",
            format!("{wfi}/w1/status?temporalServer=127.0.0.1:1&workflowID=migrate-1"),
            None,
            503,
            Any,
            "differs: module GetStatusWorkflowIntent, `Failed to connect to Temporal server`, \
             500 in EMCO",
        ),
        row(
            "POST",
            format!("{wfi}/w1/cancel"),
            None,
            400,
            Text("EOF\n"),
            "cancelHandler: io.EOF",
        ),
        row(
            "POST",
            format!("{wfi}/w1/cancel"),
            Some(json!({"metadata": {"name": "c"}, "spec": {}})),
            400,
            Text(":: Temporal Server endpoint is required.\n"),
            "cancelHandler",
        ),
        row(
            "POST",
            format!("{wfi}/nope/cancel"),
            Some(json!({"metadata": {"name": "c"}, "spec": {"temporalServer": "127.0.0.1:1"}})),
            404,
            Text("Workflow Intent not found\n"),
            "differs: module CancelWorkflowIntent, 500 in EMCO",
        ),
        row(
            "POST",
            format!("{wfi}/w1/cancel"),
            Some(
                json!({"metadata": {"name": "c"}, "spec": {"temporalServer": "127.0.0.1:1",
                "terminate": true, "reason": "r", "details": [1]}}),
            ),
            503,
            Any,
            "differs: json-schemas/cancel_request.json does not load in EMCO (`details: int`), \
             every cancel is a 500 there; the Temporal server is not reachable here",
        ),
        row(
            "DELETE",
            format!("{wfi}/w1"),
            None,
            204,
            Empty,
            "deleteHandler",
        ),
        row(
            "GET",
            &wfi,
            None,
            200,
            Json(Value::Null),
            "getHandler: nil slice again",
        ),
    ];
    run(&app, rec, rows).await;
}

#[tokio::test]
async fn workflowmgr() {
    workflowmgr_table(&Recorder::default()).await;
}

// ---- tac: src/tac/api/api.go, intent_handler.go, workers_intent_handler.go, apierrors.go ----
// The hooks running on a real Temporal server are emco-controllers' tests/instantiate.rs
// `tac_hooks_hold_and_fail_the_lifecycle_on_temporal`.
async fn tac_table(rec: &Recorder) {
    let app = app();
    run(&app, rec, group_rows()).await;
    let tac = format!("{DIG}/temporal-action-controller");
    let workers = format!("{tac}/h1/workers");
    let hook = |name: &str, point: &str| {
        json!({"metadata": {"name": name}, "spec": {"hookType": point,
            "workflowClient": {"clientEndpointName": "wfc", "clientEndpointPort": 9090},
            "temporal": {"workflowClientName": "backup",
                "workflowStartOptions": {"ID": "backup-1", "TaskQueue": "Q"}}}})
    };
    let stored = |point: &str| {
        json!({"metadata": meta("h1"), "spec": {"hookType": point,
        "workflowClient": {"clientEndpointName": "wfc", "clientEndpointPort": 9090},
        "temporal": {"workflowClientName": "backup",
            "workflowStartOptions": {"ID": "backup-1", "TaskQueue": "Q",
                "WorkflowExecutionTimeout": 0, "WorkflowRunTimeout": 0, "WorkflowTaskTimeout": 0,
                "WorkflowIDReusePolicy": 0, "WorkflowExecutionErrorWhenAlreadyStarted": false,
                "RetryPolicy": null, "CronSchedule": "", "Memo": null, "SearchAttributes": null},
            "workflowParams": {}}}})
    };
    let worker = json!({"metadata": {"name": "w1"}, "spec": {"startToCloseTimeout": 60,
        "deploymentIntentGroup": "workers", "compositeApp": "temporal-worker",
        "compositeAppVersion": "v1"}});
    let worker_stored = json!({"metadata": meta("w1"), "spec": {"startToCloseTimeout": 60,
        "deploymentIntentGroup": "workers", "compositeApp": "temporal-worker",
        "compositeAppVersion": "v1"}});
    let rows = vec![
        row(
            "GET",
            &tac,
            None,
            200,
            Json(Value::Null),
            "intent_handler.go: nil slice",
        ),
        row(
            "POST",
            &tac,
            Some(hook("h1", "pre-install")),
            201,
            Json(stored("pre-install")),
            "handleTacIntentCreate",
        ),
        row(
            "POST",
            &tac,
            Some(hook("h1", "pre-install")),
            409,
            Text("workflow hook intent already exists\n"),
            "apierrors.go",
        ),
        row(
            "POST",
            &tac,
            None,
            400,
            Text("empty post body\n"),
            "apierrors.go: io.EOF",
        ),
        row(
            "POST",
            &tac,
            Some(json!({"metadata": {"name": 7}})),
            422,
            Text("error decoding json body\n"),
            "apierrors.go",
        ),
        row(
            "POST",
            &tac,
            Some(hook("h2", "mid-install")),
            400,
            Any,
            "json-schemas/tac_intent.json: hookType enum",
        ),
        row(
            "GET",
            format!("{tac}/h1"),
            None,
            200,
            Json(stored("pre-install")),
            "handleTacIntentGet",
        ),
        row(
            "GET",
            format!("{tac}/nope"),
            None,
            404,
            Text("Workflow Hook not found\n"),
            "apierrors.go",
        ),
        row(
            "PUT",
            format!("{tac}/h1"),
            Some(hook("h1", "post-install")),
            201,
            Json(stored("post-install")),
            "handleTacIntentPut: createOrUpdate answers 201",
        ),
        row(
            "GET",
            &tac,
            None,
            200,
            Json(json!([stored("post-install")])),
            "the list",
        ),
        // Workers: workers_intent_handler.go.
        row(
            "GET",
            &workers,
            None,
            200,
            Json(Value::Null),
            "handleWorkerGet: nil slice",
        ),
        row(
            "POST",
            &workers,
            Some(worker.clone()),
            201,
            Json(worker_stored.clone()),
            "handleWorkerCreate",
        ),
        row(
            "GET",
            format!("{workers}/w1"),
            None,
            200,
            Json(worker_stored.clone()),
            "handleWorkerGet",
        ),
        row(
            "PUT",
            format!("{workers}/w1"),
            Some(worker),
            201,
            Json(worker_stored.clone()),
            "handleWorkerUpdate: 201",
        ),
        row(
            "GET",
            &workers,
            None,
            200,
            Json(json!([worker_stored])),
            "handleWorkerGet: the list",
        ),
        row(
            "POST",
            &workers,
            Some(json!({"metadata": {"name": "w2"}, "spec": {"startToCloseTimeout": "x"}})),
            422,
            Text("error decoding json body\n"),
            "apierrors.go",
        ),
        // Status: the query is a JSON body of the GET.
        row(
            "GET",
            format!("{tac}/h1/status"),
            None,
            400,
            Text("EOF\n"),
            "handleTemporalWorkflowHookStatus: io.EOF",
        ),
        row(
            "GET",
            format!("{tac}/h1/status"),
            Some(json!({"temporalServer": "127.0.0.1:1", "runDescribeWfExec": true})),
            503,
            Any,
            "differs: module GetStatusWorkflowIntent `failed to connect to Temporal server`, 500 \
             in EMCO",
        ),
        row(
            "GET",
            format!("{tac}/h1/status?temporalServer=127.0.0.1:1&queryParams=x"),
            None,
            400,
            Text("Unknown query parameter: queryParams\n"),
            "ours: without a body the query reads as workflowmgr's buildStatusQuery (a \
             browser's GET has no body); io.EOF in EMCO",
        ),
        row(
            "POST",
            format!("{tac}/h1/cancel"),
            None,
            400,
            Text("EOF\n"),
            "handleTemporalWorkflowHookCancel: io.EOF",
        ),
        row(
            "POST",
            format!("{tac}/h1/cancel"),
            Some(json!({"spec": {"temporalServer": ""}})),
            400,
            Text(":: Temporal Server endpoint is required.\n"),
            "handleTemporalWorkflowHookCancel",
        ),
        row(
            "POST",
            format!("{tac}/nope/cancel"),
            Some(json!({"spec": {"temporalServer": "127.0.0.1:1"}})),
            404,
            Text("Workflow Hook not found\n"),
            "differs: module CancelWorkflowIntent `Workflow Intent Hook not found`, 500 in EMCO",
        ),
        row(
            "DELETE",
            format!("{tac}/h1"),
            None,
            409,
            Any,
            "infra/db Remove: a hook with workers is not deleted",
        ),
        row(
            "DELETE",
            format!("{workers}/w1"),
            None,
            204,
            Empty,
            "handleWorkerDelete",
        ),
        row(
            "DELETE",
            format!("{tac}/h1"),
            None,
            204,
            Empty,
            "handleTacIntentDelete",
        ),
        row("GET", &tac, None, 200, Json(Value::Null), "nil slice again"),
    ];
    run(&app, rec, rows).await;
}

#[tokio::test]
async fn tac() {
    tac_table(&Recorder::default()).await;
}

/// Every route and method of `openapi.yaml` has at least one contract row.
#[tokio::test]
async fn every_route_has_a_row() {
    let rec = Recorder::default();
    orchestrator_table(&rec).await;
    clm_table(&rec).await;
    dcm_table(&rec).await;
    gac_and_hpa_table(&rec).await;
    bodies_as_go_writes_them_table(&rec).await;
    dtc_table(&rec).await;
    ncm_table(&rec).await;
    ovnaction_table(&rec).await;
    sfc_table(&rec).await;
    ca_certs_table(&rec).await;
    workflowmgr_table(&rec).await;
    tac_table(&rec).await;
    ours_table(&rec).await;
    let sent = rec.0.into_inner().unwrap();

    let doc = emco_go::yaml::parse(emco_service::OPENAPI).unwrap();
    let mut routes: Vec<(String, String)> = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        if OURS.contains(&path.as_str()) {
            continue;
        }
        for method in ops.as_object().unwrap().keys() {
            if ["get", "post", "put", "delete"].contains(&method.as_str()) {
                routes.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    assert!(routes.len() > 200, "{} routes", routes.len());
    let missing: Vec<String> = routes
        .iter()
        .filter(|(method, template)| {
            !sent
                .iter()
                .any(|(m, p)| m == method && matches(template, p))
        })
        .map(|(m, t)| format!("{m} {t}"))
        .collect();
    assert!(
        missing.is_empty(),
        "{} routes without a contract row:\n{}",
        missing.len(),
        missing.join("\n")
    );
}
