//! The status of deployment intent groups against kubesim clusters: `GET DIG/status` with every
//! query option and list mode through the REST router, and the StatusNotify gRPC stream over a
//! real connection. Contexts are written directly (as instantiate does) and deployed by the
//! orchestrator's own rsync engine.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use emco_core::ContextId;
use emco_helm::archive::pack_dir;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use emco_appcontext::keys::Keyed;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_core::Metadata;
use emco_core::lifecycle::{AppContextStatus, DigOperation, DigState, StateAction, StateInfo};
use emco_core::model::status::DigStatus;
use emco_core::model::status::{StatusQuery, StatusResponse};
use emco_core::model::{
    App, AppProfile, AppProfileSpec, ClusterReference, ClusterReferenceSpec, CompositeApp,
    CompositeAppSpec, CompositeProfile, DeploymentIntentGroup, DeploymentIntentGroupSpec,
    DigIntent, DigIntentSpec, GenericPlacementIntent,
};
use emco_core::placement::{AllOf, AppPlacementIntent, AppPlacementSpec, PlacementIntent};
use emco_core::{DigRef, ErrorKind};
use emco_orchestrator::{WatchTarget, keys, save_state};
use emco_proto::status_notify_client::StatusNotifyClient;
use emco_proto::status_registration::Key;
use emco_proto::{
    ClusterKey, DigKey, LcKey, StatusDeregistration, StatusNotification, StatusOutput,
    StatusRegistration, StatusValue, status_detail,
};
use emco_store::ResourceKey;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tonic::transport::server::TcpIncoming;
use tower::ServiceExt;

const STATUS: &str = "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/dig/status";

const DEPLOYMENT: &str = "
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
";

const SERVICE: &str = "
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  selector: {app: db}
  ports:
  - port: 5432
";

fn config_map(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n"
    )
}

/// One app of a context: name, clusters (`prov+cN`) and resources (`name+Kind`, YAML).
struct AppSpec {
    name: &'static str,
    clusters: Vec<&'static str>,
    resources: Vec<(String, String)>,
}

fn web(settings: &str) -> AppSpec {
    AppSpec {
        name: "web",
        clusters: vec!["prov+c1", "prov+c2"],
        resources: vec![
            (
                "settings+ConfigMap".into(),
                config_map("settings", settings),
            ),
            ("web+Deployment".into(), DEPLOYMENT.into()),
        ],
    }
}

fn db() -> AppSpec {
    AppSpec {
        name: "db",
        clusters: vec!["prov+c1"],
        resources: vec![
            ("db-config+ConfigMap".into(), config_map("db-config", "x")),
            ("db+Service".into(), SERVICE.into()),
        ],
    }
}

/// An orchestrator with its rsync engine running, two kubesim clusters registered as `prov+c1`
/// and `prov+c2`, and the deployment intent group `p1/ca/v1/dig` (approved, never
/// instantiated).
struct Env {
    w: emco_testkit::World,
    router: Router,
    dig: ResourceKey,
}

impl std::ops::Deref for Env {
    type Target = emco_testkit::World;
    fn deref(&self) -> &emco_testkit::World {
        &self.w
    }
}

impl Env {
    async fn start(ready_delay: Duration) -> Self {
        let w = emco_testkit::World::builder()
            .clusters(2)
            .ready_delay(ready_delay)
            .provider("prov")
            .start()
            .await;
        let env = Self {
            router: emco_orchestrator::rest::router(w.orch.clone()),
            w,
            dig: keys::dig("p1", "ca", "v1", "dig"),
        };
        for (path, body) in [
            ("/v2/projects", json!({"metadata": {"name": "p1"}})),
            (
                "/v2/projects/p1/composite-apps",
                json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
            ),
            (
                "/v2/projects/p1/composite-apps/ca/v1/composite-profiles",
                json!({"metadata": {"name": "cp"}}),
            ),
            (
                "/v2/projects/p1/logical-clouds",
                json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}}),
            ),
            (
                "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups",
                json!({"metadata": {"name": "dig"}, "spec": {"compositeProfile": "cp", "version": "r1", "logicalCloud": "lc0"}}),
            ),
        ] {
            let (code, answer) = env.send("POST", path, Some(body)).await;
            assert_eq!(code, StatusCode::CREATED, "{path}: {answer}");
        }
        let (code, _) = env
            .send(
                "POST",
                "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/dig/approve",
                None,
            )
            .await;
        assert_eq!(code, StatusCode::ACCEPTED);
        env
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let code = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (code, value)
    }

    /// `GET DIG/status?<query>`, expecting 200.
    async fn status(&self, query: &str) -> Value {
        let (code, body) = self.send("GET", &format!("{STATUS}?{query}"), None).await;
        assert_eq!(code, StatusCode::OK, "?{query}: {body}");
        body
    }

    /// Polls the status query until `f` holds; the deadline only bounds a hang.
    async fn status_until(&self, query: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let body = self.status(query).await;
            if f(&body) {
                return body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Writes a context of the group holding `apps` (status Created), as instantiate does.
    async fn context(&self, apps: &[AppSpec]) -> ContextId {
        let meta = CompositeAppMeta {
            project: "p1".into(),
            composite_app: "ca".into(),
            version: "v1".into(),
            release: "r1".into(),
            deployment_intent_group: "dig".into(),
            logical_cloud: "lc0".into(),
            level: "0".into(),
            ..CompositeAppMeta::default()
        };
        let ctx = AppContext::create(Arc::clone(self.orch.contexts()), &meta)
            .await
            .unwrap();
        let mut w = ctx.writer();
        let order: Vec<&str> = apps.iter().map(|a| a.name).collect();
        w.set_app_order(&order).unwrap();
        for a in apps {
            w.add_app(a.name).unwrap();
            for c in &a.clusters {
                w.add_cluster(a.name, c, None).unwrap();
                let mut names = Vec::new();
                for (n, y) in &a.resources {
                    w.add_resource(a.name, c, n, y).unwrap();
                    names.push(n.as_str());
                }
                w.set_resource_order(a.name, c, &names).unwrap();
            }
        }
        w.set_status(AppContextStatus::Created).unwrap();
        w.flush().await.unwrap();
        ctx.id()
    }

    /// Records `state` with `instance` in the group's lifecycle record.
    async fn record(&self, state: DigState, instance: ContextId, revision: i64) {
        let mut info = self
            .orch
            .deployments()
            .state(&keys::dig_ref(&self.dig).unwrap())
            .await
            .unwrap();
        info.statusctxid = instance.to_string();
        info.actions.push(StateAction {
            state,
            instance: instance.to_string(),
            time: "2026-11-21T12:00:00Z".into(),
            revision,
        });
        save_state(self.orch.store().as_ref(), &self.dig, &info)
            .await
            .unwrap();
    }

    async fn instantiate(&self, apps: &[AppSpec]) -> ContextId {
        let id = self.context(apps).await;
        self.record(DigState::Instantiated, id, 1).await;
        self.orch.rsync().instantiate(id).await.unwrap();
        id
    }

    async fn stop(self) {
        self.w.stop().await;
    }
}

fn count(body: &Value, counts: &str, key: &str) -> i64 {
    body[counts][key].as_i64().unwrap_or(0)
}

/// `(app, cluster, resource name, the resource's status field)` of every resource listed.
fn listed(body: &Value, field: &str) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    for a in body["apps"].as_array().into_iter().flatten() {
        for c in a["clusters"].as_array().into_iter().flatten() {
            for r in c["resources"].as_array().into_iter().flatten() {
                out.push((
                    a["name"].as_str().unwrap().to_owned(),
                    format!(
                        "{}+{}",
                        c["clusterProvider"].as_str().unwrap(),
                        c["cluster"].as_str().unwrap()
                    ),
                    r["name"].as_str().unwrap().to_owned(),
                    r[field].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    out
}

#[tokio::test]
async fn status_query_options_and_list_modes() {
    let env = Env::start(Duration::from_millis(200)).await;

    // Never instantiated: the lifecycle record and nothing else.
    let before = env.status("").await;
    assert_eq!(before["name"], "dig");
    assert_eq!(before["project"], "p1");
    assert_eq!(before["compositeApp"], "ca");
    assert_eq!(before["compositeAppVersion"], "v1");
    assert_eq!(before["compositeProfile"], "cp");
    assert_eq!(before["states"]["actions"][1]["state"], "Approved");
    for field in [
        "deployedStatus",
        "readyStatus",
        "deployedCounts",
        "readyCounts",
        "apps",
    ] {
        assert!(before.get(field).is_none(), "{field}: {before}");
    }
    assert_eq!(env.status("apps").await, json!({"name": "dig", "apps": []}));
    assert_eq!(
        env.status("clusters").await,
        json!({"name": "dig", "clustersByApp": []})
    );

    // Bad queries are 400, unknown groups and instances 404.
    for bad in [
        "status=up",
        "output=everything",
        "type=x",
        "cluster=nocluster",
        "app=bad%20name",
        "instance=",
        "instance=abc",
    ] {
        let (code, body) = env.send("GET", &format!("{STATUS}?{bad}"), None).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "?{bad}: {body}");
    }
    let (code, _) = env
        .send(
            "GET",
            "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/nope/status",
            None,
        )
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = env
        .send("GET", &format!("{STATUS}?instance=1234"), None)
        .await;
    assert_eq!(code, StatusCode::NOT_FOUND);

    let first = env.instantiate(&[web("blue"), db()]).await;
    let ready = env
        .status_until("status=ready", "Instantiated and Ready", |b| {
            b["deployedStatus"] == "Instantiated" && b["readyStatus"] == "Ready"
        })
        .await;
    assert_eq!(ready["states"]["statusctxid"], first.to_string());
    assert_eq!(count(&ready, "readyCounts", "Ready"), 6);
    assert!(ready.get("deployedCounts").is_none());
    let all = listed(&ready, "readyStatus");
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|r| r.3 == "Ready"), "{all:?}");
    // App order, then clusters, then resource order.
    assert_eq!(
        all.iter()
            .map(|r| format!("{}/{}/{}", r.0, r.1, r.2))
            .collect::<Vec<_>>(),
        [
            "web/prov+c1/settings",
            "web/prov+c1/web",
            "web/prov+c2/settings",
            "web/prov+c2/web",
            "db/prov+c1/db-config",
            "db/prov+c1/db",
        ]
    );
    let web_c1 = &ready["apps"][0]["clusters"][0];
    assert_eq!(web_c1["connectivity"], "Available");
    assert_eq!(
        web_c1["resources"][1]["GVK"],
        json!({"Group": "apps", "Version": "v1", "Kind": "Deployment"})
    );
    assert_eq!(
        ready["apps"][1]["clusters"][0]["resources"][1]["GVK"],
        json!({"Group": "", "Version": "v1", "Kind": "Service"})
    );
    assert!(web_c1["resources"][0].get("detail").is_none());

    // status=deployed: what rsync did.
    let deployed = env.status("status=deployed").await;
    assert_eq!(deployed["deployedStatus"], "Instantiated");
    assert_eq!(deployed["deployedCounts"], json!({"Applied": 6}));
    assert!(deployed.get("readyStatus").is_none() && deployed.get("readyCounts").is_none());
    assert!(
        listed(&deployed, "deployedStatus")
            .iter()
            .all(|r| r.3 == "Applied")
    );
    // The deprecated type=rsync, also the answer without status= or type= (EMCO's default,
    // src/orchestrator/api/instantiation_handler.go statusHandler), says the same in the
    // names of src/orchestrator/pkg/status/status_helper.go prepareStatusResult.
    let legacy = env.status("type=rsync").await;
    assert_eq!(env.status("").await, legacy);
    assert_eq!(legacy["status"], "Instantiated");
    assert_eq!(legacy["rsyncStatus"], json!({"Applied": 6}));
    let c = &legacy["apps"][0]["clusters"][0];
    assert_eq!(c["readyStatus"], "Available");
    assert_eq!(c["resources"][1]["rsyncStatus"], "Applied");
    for field in [
        "deployedStatus",
        "deployedCounts",
        "readyStatus",
        "readyCounts",
    ] {
        assert!(legacy.get(field).is_none(), "{field}: {legacy}");
    }
    assert!(c.get("connectivity").is_none() && c["resources"][1].get("deployedStatus").is_none());
    // type=cluster: what the clusters report, in the same old names.
    let cluster = env.status("type=cluster").await;
    assert_eq!(cluster["status"], "Instantiated");
    assert_eq!(cluster["readyStatus"], "Ready");
    assert_eq!(cluster["clusterStatus"], json!({"Ready": 6}));
    let c = &cluster["apps"][0]["clusters"][0];
    assert_eq!(c["readyStatus"], "Available");
    assert_eq!(c["resources"][1]["clusterStatus"], "Ready");

    // output=summary leaves out the apps; output=detail adds what is known of each resource.
    let summary = env.status("output=summary&status=deployed").await;
    assert!(summary.get("apps").is_none());
    assert_eq!(summary["deployedCounts"], json!({"Applied": 6}));
    let detail = env.status("output=detail&status=deployed").await;
    let d = &detail["apps"][0]["clusters"][0]["resources"][1]["detail"];
    assert_eq!(d["kind"], "Deployment");
    assert_eq!(d["metadata"]["name"], "web");
    let detail = env.status("output=detail&status=ready").await;
    let d = &detail["apps"][0]["clusters"][0]["resources"][1]["detail"];
    assert_eq!(d["present"], true);
    assert_eq!(d["ready"], true);

    // Filters narrow apps, clusters, resources and the counts.
    let only_web = env.status("app=web&status=deployed").await;
    assert_eq!(only_web["deployedCounts"], json!({"Applied": 4}));
    assert_eq!(only_web["apps"].as_array().unwrap().len(), 1);
    let c2 = env.status("cluster=prov%2Bc2&status=ready").await;
    assert_eq!(
        listed(&c2, "readyStatus")
            .iter()
            .map(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str()))
            .collect::<Vec<_>>(),
        [("web", "prov+c2", "settings"), ("web", "prov+c2", "web")]
    );
    let settings = env
        .status("resource=settings&resource=db&status=ready")
        .await;
    assert_eq!(count(&settings, "readyCounts", "Ready"), 3);
    let none = env.status("app=db&cluster=prov%2Bc2&status=ready").await;
    assert!(
        none.get("apps").is_none() && none.get("readyStatus").is_none(),
        "{none}"
    );
    let (code, body) = env.send("GET", &format!("{STATUS}?app=other"), None).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");

    // List modes, with their precedence apps > clusters > resources.
    assert_eq!(
        env.status("apps").await,
        json!({"name": "dig", "apps": ["web", "db"]})
    );
    assert_eq!(
        env.status("resources&clusters&apps&app=db").await,
        json!({"name": "dig", "apps": ["web", "db"]})
    );
    assert_eq!(
        env.status("clusters&resources&app=web").await,
        json!({"name": "dig", "clustersByApp": [{"app": "web", "clusters": [
            {"clusterProvider": "prov", "cluster": "c1"}, {"clusterProvider": "prov", "cluster": "c2"}]}]})
    );
    assert_eq!(
        env.status("resources&cluster=prov%2Bc1").await,
        json!({"name": "dig", "resourcesByApp": [
            {"app": "web", "clusterProvider": "prov", "cluster": "c1", "resources": [
                {"name": "settings", "GVK": {"Group": "", "Version": "v1", "Kind": "ConfigMap"}},
                {"name": "web", "GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"}}]},
            {"app": "db", "clusterProvider": "prov", "cluster": "c1", "resources": [
                {"name": "db-config", "GVK": {"Group": "", "Version": "v1", "Kind": "ConfigMap"}},
                {"name": "db", "GVK": {"Group": "", "Version": "v1", "Kind": "Service"}}]}]})
    );

    // An update to a context without db: the default is the new context, instance= the old.
    let second = env.context(&[web("green")]).await;
    env.record(DigState::Updated, second, 2).await;
    env.orch.rsync().update(first, second).await.unwrap();
    let updated = env
        .status_until("status=deployed", "the update", |b| {
            b["deployedStatus"] == "Updated"
        })
        .await;
    assert_eq!(updated["deployedCounts"], json!({"Applied": 4}));
    let old = env
        .status_until(
            &format!("instance={first}&status=deployed&app=db"),
            "db deleted by the update",
            |b| {
                b["deployedCounts"] == json!({"Deleted": 2})
                    && b["deployedStatus"] == "Instantiated"
            },
        )
        .await;
    assert_eq!(old["apps"][0]["name"], "db");
    let old_ready = env
        .status(&format!("instance={first}&app=db&status=ready"))
        .await;
    assert_eq!(old_ready["readyCounts"], json!({"NotPresent": 2}));
    assert_eq!(old_ready["readyStatus"], "NotReady");
    env.status_until("status=ready", "the new context ready", |b| {
        b["readyStatus"] == "Ready"
    })
    .await;

    // Terminate: everything is gone.
    env.record(DigState::Terminated, second, 2).await;
    env.orch.rsync().terminate(second).await.unwrap();
    let gone = env
        .status_until("status=ready", "Terminated", |b| {
            b["deployedStatus"] == "Terminated"
        })
        .await;
    assert_eq!(gone["readyCounts"], json!({"NotPresent": 4}), "{gone}");
    let gone = env.status("status=deployed").await;
    assert_eq!(gone["deployedCounts"], json!({"Deleted": 4}));
    env.stop().await;
}

#[tokio::test]
async fn not_ready_resources_are_reported() {
    // Workloads never become ready during this test.
    let env = Env::start(Duration::from_secs(3600)).await;
    env.instantiate(&[web("blue")]).await;
    let body = env
        .status_until(
            "output=detail&status=ready",
            "the deployments seen not ready",
            |b| count(b, "readyCounts", "NotReady") == 2,
        )
        .await;
    assert_eq!(body["deployedStatus"], "Instantiated");
    assert_eq!(body["readyStatus"], "NotReady");
    assert_eq!(count(&body, "readyCounts", "Ready"), 2);
    let deployment = &body["apps"][0]["clusters"][0]["resources"][1];
    assert_eq!(deployment["readyStatus"], "NotReady");
    assert_eq!(deployment["detail"]["present"], true);
    assert!(
        deployment["detail"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{deployment}"
    );
    let deployed = env.status("status=deployed").await;
    assert_eq!(deployed["deployedCounts"], json!({"Applied": 4}));
    env.stop().await;
}

/// A resource rsync could not deploy says why in the status answer (`reason`, `message`), and
/// stops saying it once applied.
#[tokio::test]
async fn failed_resources_say_why() {
    use emco_rsync::engine::ContextStatusExt as _;
    let env = Env::start(Duration::ZERO).await;
    let id = env.context(&[web("blue")]).await;
    env.record(DigState::Instantiated, id, 1).await;
    let ctx = AppContext::load(Arc::clone(env.orch.contexts()), id)
        .await
        .unwrap();
    let cluster = ctx.clusters("web").await.unwrap()[0].clone();
    let names = ctx.resources("web", &cluster).await.unwrap();
    ctx.set_resource_retrying(
        "web",
        &cluster,
        &names[..1],
        ("Unreachable", "cluster did not answer within 5s"),
        3,
        "2026-11-26T03:30:00Z",
    )
    .await
    .unwrap();
    ctx.set_resource_failures(
        "web",
        &cluster,
        &names[1..],
        emco_core::lifecycle::RsyncStatus::Failed,
        "NotApplied",
        "a CRD or pre-install hook of the app failed on this cluster",
    )
    .await
    .unwrap();
    let body = env.status("status=deployed").await;
    let resources = &body["apps"][0]["clusters"][0]["resources"];
    assert_eq!(resources[0]["deployedStatus"], "Retrying", "{body}");
    assert_eq!(resources[0]["reason"], "Unreachable", "{body}");
    assert_eq!(resources[0]["message"], "cluster did not answer within 5s");
    assert_eq!(resources[0]["attempts"], 3, "{body}");
    assert_eq!(resources[0]["nextRetry"], "2026-11-26T03:30:00Z", "{body}");
    assert_eq!(resources[1]["reason"], "NotApplied", "{body}");
    assert!(resources[1].get("attempts").is_none(), "{body}");
    ctx.set_resource_statuses(
        "web",
        &cluster,
        &names[..1],
        emco_core::lifecycle::RsyncStatus::Applied,
    )
    .await
    .unwrap();
    let body = env.status("status=deployed").await;
    assert!(
        body["apps"][0]["clusters"][0]["resources"][0]
            .get("reason")
            .is_none()
    );
    env.stop().await;
}

fn registration(client: &str, status: StatusValue, output: StatusOutput) -> StatusRegistration {
    StatusRegistration {
        client_id: client.into(),
        key: Some(Key::DigKey(DigKey {
            project: "p1".into(),
            composite_app: "ca".into(),
            composite_app_version: "v1".into(),
            deployment_intent_group: "dig".into(),
        })),
        status_type: status as i32,
        output: output as i32,
        ..StatusRegistration::default()
    }
}

/// Reads notifications until one has `value`; the deadline only bounds a hang.
async fn until_value(
    stream: &mut tonic::Streaming<StatusNotification>,
    value: StatusValue,
) -> StatusNotification {
    let deadline = Duration::from_secs(120);
    tokio::time::timeout(deadline, async {
        loop {
            let n = stream.message().await.unwrap().expect("the stream ended");
            if n.status_value == value as i32 {
                return n;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {value:?} notification"))
}

#[tokio::test]
async fn status_notify_stream() {
    let env = Env::start(Duration::from_millis(200)).await;
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    let stop = env.cancel.clone();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(env.orch.status().notify_service())
            .serve_with_incoming_shutdown(incoming, async move { stop.cancelled().await }),
    );
    let mut client = StatusNotifyClient::connect(format!("http://{addr}"))
        .await
        .unwrap();

    // Registrations that cannot be served answer with an error.
    let mut cluster = registration("x", StatusValue::Ready, StatusOutput::Summary);
    cluster.key = Some(Key::ClusterKey(ClusterKey {
        cluster_provider: "prov".into(),
        cluster: "c1".into(),
    }));
    let err = client.status_register(cluster).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("digKey"), "{err:?}");
    let mut lc = registration("lc", StatusValue::Ready, StatusOutput::All);
    lc.key = Some(Key::LcKey(LcKey {
        project: "p1".into(),
        logical_cloud: "nope".into(),
    }));
    let err = client.status_register(lc.clone()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    // A logical cloud is watched like a group: the admin cloud has no context of its own.
    lc.key = Some(Key::LcKey(LcKey {
        project: "p1".into(),
        logical_cloud: "lc0".into(),
    }));
    let mut cloud = client.status_register(lc).await.unwrap().into_inner();
    let first = cloud.message().await.unwrap().unwrap();
    assert_eq!(first.status_value, StatusValue::NotReady as i32);
    drop(cloud);
    let mut missing = registration("x", StatusValue::Ready, StatusOutput::Summary);
    if let Some(Key::DigKey(k)) = &mut missing.key {
        k.deployment_intent_group = "nope".into();
    }
    let err = client.status_register(missing).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let err = client
        .status_register(registration("", StatusValue::Ready, StatusOutput::All))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);

    // The first message comes at once, before anything is deployed.
    let mut ready = client
        .status_register(registration(
            "watcher",
            StatusValue::Ready,
            StatusOutput::Summary,
        ))
        .await
        .unwrap()
        .into_inner();
    let first = ready.message().await.unwrap().unwrap();
    assert_eq!(first.status_value, StatusValue::NotReady as i32);
    assert!(first.details.is_empty());
    let mut deployed = client
        .status_register(registration(
            "watcher",
            StatusValue::Deployed,
            StatusOutput::All,
        ))
        .await
        .unwrap()
        .into_inner();
    let first = deployed.message().await.unwrap().unwrap();
    assert_eq!(first.status_value, StatusValue::NotDeployed as i32);

    // Deploy: both streams see it, the detailed one down to each resource.
    let id = env.instantiate(&[web("blue"), db()]).await;
    until_value(&mut ready, StatusValue::Ready).await;
    let n = until_value(&mut deployed, StatusValue::Deployed).await;
    let apps: Vec<(String, i32, usize)> = n
        .details
        .iter()
        .map(|d| match &d.status_detail {
            Some(status_detail::StatusDetail::App(a)) => (
                a.app.clone(),
                a.status_value,
                a.clusters.iter().map(|c| c.resources.len()).sum(),
            ),
            other => panic!("unexpected detail {other:?}"),
        })
        .collect();
    let d = StatusValue::Deployed as i32;
    assert_eq!(apps, [("web".into(), d, 4), ("db".into(), d, 2)]);
    let Some(status_detail::StatusDetail::App(web_app)) = &n.details[0].status_detail else {
        unreachable!()
    };
    let deployment = &web_app.clusters[0].resources[1];
    assert_eq!(deployment.name, "web");
    assert_eq!(deployment.gvk.as_ref().unwrap().group, "apps");
    assert_eq!(deployment.status_value, d);

    // A filtered registration reports only what it asks for.
    let mut filtered = registration("other", StatusValue::Deployed, StatusOutput::All);
    filtered.apps = vec!["db".into()];
    let mut only_db = client.status_register(filtered).await.unwrap().into_inner();
    let n = only_db.message().await.unwrap().unwrap();
    assert_eq!(n.status_value, d);
    assert_eq!(n.details.len(), 1);

    // Terminate: the change reaches the streams.
    env.record(DigState::Terminated, id, 1).await;
    env.orch.rsync().terminate(id).await.unwrap();
    until_value(&mut deployed, StatusValue::NotDeployed).await;
    until_value(&mut ready, StatusValue::NotReady).await;

    // Deregistering ends every stream of the client, and only those.
    client
        .status_deregister(StatusDeregistration {
            client_id: "watcher".into(),
        })
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while ready.message().await.unwrap().is_some() {}
        while deployed.message().await.unwrap().is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the streams did not end");
    client
        .status_deregister(StatusDeregistration {
            client_id: "other".into(),
        })
        .await
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while only_db.message().await.unwrap().is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the filtered stream did not end");
    drop(client);
    env.cancel.cancel();
    server.await.unwrap().unwrap();
    env.fleet.stop(Duration::from_secs(1)).await.unwrap();
}

/// The service-level watch under StatusNotify (src/orchestrator/pkg/status/ statusnotify
/// semantics): the status at once, then each change, no gRPC involved.
#[tokio::test]
async fn a_status_watch_yields_each_change_of_a_deployment() {
    let env = Env::start(Duration::from_millis(200)).await;
    let missing = WatchTarget::Dig(DigRef::new("p1", "ca", "v1", "nope"));
    let query = StatusQuery::for_dig([("status", "ready")]).unwrap();
    let err = env
        .orch
        .status()
        .watch(missing, query.clone())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);

    let target = WatchTarget::Dig(DigRef::new("p1", "ca", "v1", "dig"));
    let mut watch = env
        .orch
        .status()
        .watch(target.clone(), query)
        .await
        .unwrap();
    assert_eq!(watch.target(), &target);
    let first = watch.next().await.unwrap();
    assert!(first.apps.is_empty(), "{first:?}");
    // A change of the record alone (here a second approve, as after a terminate; a stop too)
    // touches no context, and the watch still sees it.
    let mut info = env
        .orch
        .deployments()
        .state(&DigRef::new("p1", "ca", "v1", "dig"))
        .await
        .unwrap();
    info.actions.push(StateAction {
        state: DigState::Approved,
        instance: String::new(),
        time: "2026-11-27T00:00:00Z".into(),
        revision: 0,
    });
    save_state(env.orch.store().as_ref(), &env.dig, &info)
        .await
        .unwrap();
    let approved = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the watch missed the approve")
        .unwrap();
    assert_eq!(approved.states, info);
    let first = approved;
    env.instantiate(&[web("blue"), db()]).await;
    let ready = |s: &DigStatus| {
        let all: Vec<&str> = s
            .apps
            .iter()
            .flat_map(|a| &a.clusters)
            .flat_map(|c| &c.resources)
            .map(|r| r.ready_status.as_str())
            .collect();
        all.len() == 6 && all.iter().all(|r| *r == "Ready")
    };
    let mut last = first;
    let reached = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let status = watch.next().await.unwrap();
            assert_ne!(status, last, "a watch yields only changes");
            if ready(&status) {
                return status;
            }
            last = status;
        }
    })
    .await
    .expect("the watch never saw every resource ready");
    assert_eq!(reached.apps.len(), 2);
    env.stop().await;
}

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/testdata");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_instantiate_reaches_instantiated_and_ready() {
    let env = Env::start(Duration::from_millis(200)).await;
    let o = &env.orch;
    // The admin cloud lc0 over c1, marked instantiated (a level-0 cloud deploys nothing).
    let lc = keys::logical_cloud("p1", "lc0");
    o.onboarding()
        .cluster_references()
        .create(
            &lc,
            &ClusterReference {
                metadata: Metadata::named("lc0-c1"),
                spec: ClusterReferenceSpec {
                    cluster_provider: "prov".into(),
                    cluster: "c1".into(),
                    ..ClusterReferenceSpec::default()
                },
            },
        )
        .await
        .unwrap();
    let mut cloud = StateInfo::created("t0");
    cloud.apply(DigOperation::Approve, "", "t1").unwrap();
    cloud.apply(DigOperation::Instantiate, "", "t2").unwrap();
    save_state(o.store().as_ref(), &lc, &cloud).await.unwrap();

    // EMCO's collectd example as composite app `monitor`, placed on prov+c1.
    let charts = std::path::Path::new(TESTDATA).join("emco-examples/helm_charts/collectd");
    o.onboarding()
        .create_composite_app(
            "p1",
            &CompositeApp {
                metadata: Metadata::named("monitor"),
                spec: CompositeAppSpec {
                    composite_app_version: "v1".into(),
                },
            },
        )
        .await
        .unwrap();
    let ca = keys::composite_app("p1", "monitor", "v1");
    let chart = env.dir.path().join("collectd.tgz");
    std::fs::write(
        &chart,
        pack_dir(&charts.join("helm/collectd"), "collectd").unwrap(),
    )
    .unwrap();
    o.onboarding()
        .create_app(
            &ca,
            &App {
                metadata: Metadata::named("collectd"),
            },
            &chart,
        )
        .await
        .unwrap();
    o.onboarding()
        .composite_profiles()
        .create(
            &ca,
            &CompositeProfile {
                metadata: Metadata::named("cp"),
            },
        )
        .await
        .unwrap();
    let profile = env.dir.path().join("profile.tgz");
    std::fs::write(
        &profile,
        pack_dir(&charts.join("profile"), "profile").unwrap(),
    )
    .unwrap();
    o.onboarding()
        .create_app_profile(
            &ca.child(keys::COMPOSITE_PROFILE, "cp"),
            &AppProfile {
                metadata: Metadata::named("collectd-profile"),
                spec: AppProfileSpec {
                    app: "collectd".into(),
                },
            },
            &profile,
        )
        .await
        .unwrap();
    o.onboarding()
        .deployment_intent_groups()
        .create(
            &ca,
            &DeploymentIntentGroup {
                metadata: Metadata::named("mon"),
                spec: DeploymentIntentGroupSpec {
                    composite_profile: "cp".into(),
                    version: "r1".into(),
                    logical_cloud: "lc0".into(),
                    override_values: Vec::new(),
                },
            },
        )
        .await
        .unwrap();
    let dig_ref = DigRef::new("p1", "monitor", "v1", "mon");
    let dig = dig_ref.key();
    o.onboarding()
        .generic_placement_intents()
        .create(
            &dig,
            &GenericPlacementIntent {
                metadata: Metadata::named("gpi"),
            },
        )
        .await
        .unwrap();
    o.onboarding()
        .app_placement_intents()
        .create(
            &dig.child(keys::GENERIC_PLACEMENT_INTENT, "gpi"),
            &AppPlacementIntent {
                metadata: Metadata::named("collectd-placement"),
                spec: AppPlacementSpec {
                    app: "collectd".into(),
                    intent: PlacementIntent {
                        all_of: vec![AllOf {
                            cluster_provider: "prov".into(),
                            cluster: "c1".into(),
                            ..AllOf::default()
                        }],
                        any_of: Vec::new(),
                    },
                },
            },
        )
        .await
        .unwrap();
    let mut intent = std::collections::BTreeMap::new();
    intent.insert("genericPlacementIntent".to_owned(), "gpi".to_owned());
    o.onboarding()
        .dig_intents()
        .create(
            &dig,
            &DigIntent {
                metadata: Metadata::named("di"),
                spec: DigIntentSpec { intent },
            },
        )
        .await
        .unwrap();
    o.deployments().approve(&dig_ref).await.unwrap();

    o.deployments().instantiate(&dig_ref).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        let StatusResponse::Full(s) = o
            .status()
            .deployment(&dig_ref, &StatusQuery::default())
            .await
            .unwrap()
        else {
            panic!("a full answer was asked for");
        };
        if s.totals.deployed_status == "Instantiated" && s.totals.ready_status == "Ready" {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not Instantiated and Ready: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status.name, "mon");
    assert_eq!(status.composite_app, "monitor");
    assert_eq!(
        status.states.current_state(),
        DigState::Instantiated,
        "{:?}",
        status.states
    );
    assert_eq!(status.apps.len(), 1);
    assert_eq!(status.apps[0].name, "collectd");
    assert_eq!(status.apps[0].clusters[0].cluster, "c1");
    let total: i64 = status.totals.ready_counts.values().sum();
    assert!(total > 0 && status.totals.ready_counts.get("Ready") == Some(&total));

    o.deployments().terminate(&dig_ref).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let query = StatusQuery::from_pairs([("status", "deployed")]).unwrap();
        let StatusResponse::Full(s) = o.status().deployment(&dig_ref, &query).await.unwrap() else {
            panic!("a full answer was asked for");
        };
        if s.totals.deployed_status == "Terminated" {
            assert_eq!(
                s.totals.deployed_counts.get("Deleted"),
                Some(&total),
                "{s:?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not Terminated: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env.stop().await;
}
