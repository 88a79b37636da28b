//! The dashboard's routes: the embedded page, the fleet search over every provider with rsync's
//! reachability, the deployment overview (worst first) and the live status stream. The page
//! itself is driven in headless Chromium by `emco-py/tests/test_dashboard.py`.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::sync::Arc;

use axum::body::Body;
use emco_core::Metadata;
use emco_core::model::Cluster;
use emco_orchestrator::Orchestrator;
use emco_service::{Config, Metrics};
use emco_store::InMemoryResourceStore;
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster: {server: 'https://127.0.0.1:1'}\n\
     users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c1\n  context: {cluster: c1, user: u}\n\
     current-context: c1\n";

struct Ui {
    orch: Orchestrator,
    app: axum::Router,
}

impl Ui {
    fn new() -> Self {
        let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
        let app = emco_service::app(orch.clone(), &Config::default(), Metrics::new());
        Self { orch, app }
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, String) {
        let (status, _, body) = common::call(&self.app, None, method, path, body).await;
        (status, body)
    }

    async fn json(&self, path: &str) -> Value {
        let (status, body) = self.send("GET", path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Project p1, composite app ca v1 and its groups `names`.
    async fn groups(&self, names: &[&str]) {
        let mut posts = vec![
            ("/v2/projects", json!({"metadata": {"name": "p1"}})),
            (
                "/v2/projects/p1/composite-apps",
                json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
            ),
        ];
        for name in names {
            posts.push((
                "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups",
                json!({"metadata": {"name": name}, "spec": {"compositeProfile": "cp",
                    "version": "r1", "logicalCloud": "lc"}}),
            ));
        }
        for (path, body) in posts {
            let (status, answer) = self.send("POST", path, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{path}: {answer}");
        }
    }

    /// Provider `provider` with clusters `names`, labelled `label` when given.
    async fn clusters(&self, provider: &str, names: &[&str], label: Option<&str>) {
        let (status, body) = self
            .send(
                "POST",
                "/v2/cluster-providers",
                Some(json!({"metadata": {"name": provider}})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
        for name in names {
            let cluster = Cluster {
                metadata: Metadata::named(*name),
                ..Cluster::default()
            };
            self.orch
                .onboarding()
                .create_cluster(provider, &cluster, Some(&kubeconfig))
                .await
                .unwrap();
            if let Some(label) = label {
                let path = format!("/v2/cluster-providers/{provider}/clusters/{name}/labels");
                let (status, body) = self
                    .send("POST", &path, Some(json!({"clusterLabel": label})))
                    .await;
                assert_eq!(status, StatusCode::CREATED, "{body}");
            }
        }
    }
}

fn names(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}+{}",
                c["provider"].as_str().unwrap(),
                c["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn the_page_and_its_assets_are_embedded() {
    let ui = Ui::new();
    let resp = ui
        .app
        .clone()
        .oneshot(Request::get("/ui").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(resp.headers()[header::LOCATION], "/ui/");
    for (path, kind, part) in [
        ("/ui/", "text/html", "<script src=\"app.js\">"),
        ("/ui/app.js", "text/javascript", "new EventSource("),
        ("/ui/app.css", "text/css", ".cell"),
    ] {
        let resp = ui
            .app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let ct = resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(String::from_utf8_lossy(&body).contains(part), "{path}");
    }
    // Nothing the page loads comes from elsewhere.
    let (_, index) = ui.send("GET", "/ui/", None).await;
    let (_, script) = ui.send("GET", "/ui/app.js", None).await;
    for text in [index, script] {
        assert!(!text.contains("http://") && !text.contains("https://"));
    }
    // The dashboard's requests count in the HTTP metrics, by route.
    let (_, metrics) = ui.send("GET", "/metrics", None).await;
    assert!(
        metrics
            .contains(r#"emco_http_requests_total{method="GET",route="/ui/app.js",status="200"}"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_fleet_is_searched_filtered_and_paged_with_rsyncs_reachability() {
    let ui = Ui::new();
    ui.clusters("edge-a", &["a1", "a2", "a3"], Some("edge"))
        .await;
    ui.clusters("core", &["k1", "k2"], None).await;
    let reach = &ui.orch.rsync().metrics().reachable;
    reach.set(&["edge-a+a1"], 1.0);
    reach.set(&["edge-a+a2"], 0.0);

    let all = ui.json("/ui/api/fleet").await;
    assert_eq!(
        (all["total"].clone(), all["matched"].clone()),
        (json!(5), json!(5))
    );
    assert_eq!(
        (
            all["reachable"].clone(),
            all["unreachable"].clone(),
            all["unknown"].clone()
        ),
        (json!(1), json!(1), json!(3))
    );
    assert_eq!(all["providers"], json!(["core", "edge-a"]));
    assert_eq!(all["labels"], json!(["edge"]));
    // The clusters in the order they were registered, as the API lists them.
    assert_eq!(names(&all)[..2], ["edge-a+a1", "edge-a+a2"]);
    assert_eq!(all["items"][4]["reach"], "unknown");

    let labelled = ui.json("/ui/api/fleet?label=edge").await;
    assert_eq!(names(&labelled), ["edge-a+a1", "edge-a+a2", "edge-a+a3"]);
    assert_eq!(labelled["items"][0]["labels"], json!(["edge"]));
    let down = ui.json("/ui/api/fleet?reach=unreachable").await;
    assert_eq!(names(&down), ["edge-a+a2"]);
    // The search is a case-insensitive part of the cluster's or the provider's name.
    let searched = ui.json("/ui/api/fleet?q=K2").await;
    assert_eq!(names(&searched), ["core+k2"]);
    let by_provider = ui
        .json("/ui/api/fleet?q=EDGE&provider=edge-a&reach=unknown")
        .await;
    assert_eq!(names(&by_provider), ["edge-a+a3"]);
    // Pages: the totals stay those of the whole fleet.
    let page = ui.json("/ui/api/fleet?offset=2&limit=2").await;
    assert_eq!(names(&page), ["edge-a+a3", "core+k1"]);
    assert_eq!(
        (page["matched"].clone(), page["offset"].clone()),
        (json!(5), json!(2))
    );
    let past = ui.json("/ui/api/fleet?offset=10").await;
    assert_eq!(names(&past), Vec::<String>::new());

    // One cluster: labels, reachability, and nothing deployed on it yet.
    let one = ui
        .json("/ui/api/cluster-providers/edge-a/clusters/a2")
        .await;
    assert_eq!(
        one,
        json!({"provider": "edge-a", "name": "a2", "labels": ["edge"], "reach": "unreachable",
               "deployments": []})
    );
    let (status, _) = ui
        .send("GET", "/ui/api/cluster-providers/edge-a/clusters/k1", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, body) = ui.send("GET", "/ui/api/fleet?reach=maybe", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("reach must be"), "{body}");
    let (status, _) = ui.send("GET", "/ui/api/fleet?limit=lots", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_overview_lists_every_group_with_its_state() {
    let ui = Ui::new();
    assert_eq!(ui.json("/ui/api/deployments").await, json!([]));
    ui.groups(&["d1", "d0"]).await;
    let list = ui.json("/ui/api/deployments").await;
    assert_eq!(
        list,
        json!([
            {"project": "p1", "compositeApp": "ca", "compositeAppVersion": "v1", "name": "d0",
             "state": "Created", "status": "", "readyStatus": "", "deployedCounts": {},
             "readyCounts": {}, "health": 2},
            {"project": "p1", "compositeApp": "ca", "compositeAppVersion": "v1", "name": "d1",
             "state": "Created", "status": "", "readyStatus": "", "deployedCounts": {},
             "readyCounts": {}, "health": 2},
        ])
    );
}

#[tokio::test]
async fn the_status_stream_answers_at_once_and_refuses_what_it_cannot_follow() {
    let ui = Ui::new();
    let stream = "/ui/api/projects/p1/composite-apps/ca/v1/deployment-intent-groups/d1/stream";
    let (status, body) = ui.send("GET", stream, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    ui.groups(&["d1"]).await;
    let (status, body) = ui.send("GET", &format!("{stream}?status=all"), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // The first event is the status now; the stream stays open for the next.
    let resp = ui
        .app
        .clone()
        .oneshot(
            Request::get(format!("{stream}?status=deployed"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = resp.into_body();
    let frame = body.frame().await.unwrap().unwrap();
    let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
    let data = text
        .strip_prefix("event: status\ndata: ")
        .and_then(|t| t.strip_suffix("\n\n"))
        .unwrap_or_else(|| panic!("{text:?}"));
    let first: Value = serde_json::from_str(data).unwrap();
    assert_eq!(first["name"], "d1");
    assert_eq!(first["states"]["actions"][0]["state"], "Created");
}
