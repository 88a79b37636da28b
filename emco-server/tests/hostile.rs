//! Hostile input over REST (#20): arbitrary and mutated JSON bodies and multipart uploads sent
//! to the create and replace routes of every kind of object get a 4xx (or a success), never a
//! 500 and never a panic; and a bad request loses nothing that was stored. Generated: arbitrary
//! bytes, arbitrary JSON documents, and valid bodies with one field replaced by an arbitrary
//! value. `PROPTEST_CASES` sets how many (the CI run uses the default).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use axum::body::Body;
use emco_orchestrator::Orchestrator;
use emco_service::{Config, Metrics};
use emco_store::InMemoryResourceStore;
use http::Request;
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt;

const CA: &str = "/v2/projects/p/composite-apps/ca/v1";
const DIG: &str = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/d";

/// Create routes and a valid body each, under the objects [`world`] makes.
fn routes() -> Vec<(&'static str, String, Value)> {
    let meta = |n: &str| json!({"name": n, "description": "", "userData1": "", "userData2": ""});
    vec![
        (
            "POST",
            "/v2/projects".into(),
            json!({"metadata": meta("p2")}),
        ),
        (
            "PUT",
            "/v2/projects/p".into(),
            json!({"metadata": meta("p")}),
        ),
        (
            "POST",
            "/v2/cluster-providers".into(),
            json!({"metadata": meta("cp2")}),
        ),
        (
            "POST",
            "/v2/cluster-providers/cp/clusters/c/labels".into(),
            json!({"clusterLabel": "edge"}),
        ),
        (
            "POST",
            "/v2/cluster-providers/cp/clusters/c/kv-pairs".into(),
            json!({"metadata": meta("kv"), "spec": {"kv": [{"k": "v"}]}}),
        ),
        (
            "POST",
            "/v2/controllers".into(),
            json!({"metadata": meta("ctl"), "spec": {"host": "h", "port": 9000, "type": "action", "priority": 1}}),
        ),
        (
            "POST",
            "/v2/dtc-controllers".into(),
            json!({"metadata": meta("nps"), "spec": {"host": "h", "port": 9000, "type": "action", "priority": 1}}),
        ),
        (
            "POST",
            "/v2/projects/p/composite-apps".into(),
            json!({"metadata": meta("ca2"), "spec": {"compositeAppVersion": "v1"}}),
        ),
        (
            "POST",
            format!("{CA}/composite-profiles"),
            json!({"metadata": meta("prof2")}),
        ),
        (
            "POST",
            format!("{CA}/deployment-intent-groups"),
            json!({"metadata": meta("d2"), "spec": {"compositeProfile": "prof", "version": "r1",
                "logicalCloud": "lc", "overrideValues": [{"app": "web", "values": {"a": "b"}}]}}),
        ),
        (
            "POST",
            format!("{DIG}/intents"),
            json!({"metadata": meta("i"), "spec": {"intent": {"genericPlacementIntent": "g"}}}),
        ),
        (
            "POST",
            format!("{DIG}/generic-placement-intents"),
            json!({"metadata": meta("g")}),
        ),
        (
            "POST",
            format!("{DIG}/traffic-group-intents"),
            json!({"metadata": meta("t")}),
        ),
        (
            "POST",
            format!("{DIG}/network-chains"),
            json!({"metadata": meta("s"), "spec": {"chainType": "Routing", "namespace": "default"}}),
        ),
        (
            "POST",
            format!("{DIG}/network-controller-intent"),
            json!({"metadata": meta("n")}),
        ),
        (
            "POST",
            format!("{DIG}/generic-k8s-intents"),
            json!({"metadata": meta("gk")}),
        ),
        (
            "POST",
            format!("{DIG}/hpa-intents"),
            json!({"metadata": meta("h"), "spec": {"app": "web"}}),
        ),
        (
            "POST",
            "/v2/projects/p/logical-clouds".into(),
            json!({"metadata": meta("lc2"), "spec": {"namespace": "ns", "user": {"userName": "u", "type": "certificate"}}}),
        ),
        (
            "POST",
            "/v2/projects/p/logical-clouds/lc/cluster-references".into(),
            json!({"metadata": meta("r"), "spec": {"clusterProvider": "cp", "cluster": "c", "loadbalancerIp": "0.0.0.0"}}),
        ),
        (
            "POST",
            "/v2/projects/p/logical-clouds/lc/user-permissions".into(),
            json!({"metadata": meta("up"), "spec": {"namespace": "ns", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}}),
        ),
        (
            "POST",
            "/v2/projects/p/logical-clouds/lc/cluster-quotas".into(),
            json!({"metadata": meta("q"), "spec": {"pods": "10"}}),
        ),
        (
            "POST",
            "/v2/cluster-providers/cp/ca-certs".into(),
            json!({"metadata": meta("cert"), "spec": {"isCA": true, "issuerRef": {"name": "i", "kind": "ClusterIssuer", "group": "cert-manager.io"},
                "duration": "8760h", "issuingCluster": {"cluster": "c", "clusterProvider": "cp"},
                "csrInfo": {"keySize": 2048, "version": 1, "algorithm": {"publicKeyAlgorithm": "RSA", "signatureAlgorithm": "SHA256WithRSA"}}}}),
        ),
        (
            "POST",
            "/v2/cluster-providers/cp/clusters/c/networks".into(),
            json!({"metadata": meta("net"), "spec": {"cniType": "ovn4nfv", "ipv4Subnets": [{"subnet": "10.0.0.0/24", "name": "s", "gateway": "10.0.0.1/24"}]}}),
        ),
    ]
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: t}\n";

async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    ct: &str,
    body: Vec<u8>,
) -> (u16, String) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(Body::from(body))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

fn multipart(metadata: &[u8], file: &[u8]) -> Vec<u8> {
    let mut body = b"--b\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n".to_vec();
    body.extend_from_slice(metadata);
    body.extend_from_slice(b"\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\nContent-Type: application/octet-stream\r\n\r\n");
    body.extend_from_slice(file);
    body.extend_from_slice(b"\r\n--b--\r\n");
    body
}

/// The app over a store holding project p, composite app ca/v1 with composite profile prof and
/// DIG d, cluster provider cp with cluster c, logical cloud lc.
async fn world() -> axum::Router {
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    let app = emco_service::app(orch, &Config::default(), Metrics::new());
    let json = |v: Value| v.to_string().into_bytes();
    for (path, body) in [
        ("/v2/projects", json!({"metadata": {"name": "p"}})),
        (
            "/v2/projects/p/composite-apps",
            json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
        ),
        (
            "/v2/projects/p/composite-apps/ca/v1/composite-profiles",
            json!({"metadata": {"name": "prof"}}),
        ),
        (
            "/v2/projects/p/logical-clouds",
            json!({"metadata": {"name": "lc"}, "spec": {"level": "0"}}),
        ),
        (
            "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups",
            json!({"metadata": {"name": "d"}, "spec": {"compositeProfile": "prof", "version": "r1", "logicalCloud": "lc"}}),
        ),
        ("/v2/cluster-providers", json!({"metadata": {"name": "cp"}})),
    ] {
        let (status, answer) = call(&app, "POST", path, "application/json", json(body)).await;
        assert_eq!(status, 201, "{path}: {answer}");
    }
    let form = multipart(br#"{"metadata":{"name":"c"}}"#, KUBECONFIG.as_bytes());
    let (status, answer) = call(
        &app,
        "POST",
        "/v2/cluster-providers/cp/clusters",
        "multipart/form-data; boundary=b",
        form,
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    app
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "\\PC{0,20}".prop_map(Value::String),
        prop::sample::select(vec![
            "",
            "name",
            "a/b",
            "-x-",
            "..",
            "0.0.0.0",
            "8760h",
            "Routing",
            "certificate"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "\\PC{0,8}",
                    prop::sample::select(vec!["metadata", "spec", "name", "kv", "intent", "app"])
                        .prop_map(str::to_owned),
                ],
                inner,
                0..5,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `v` with the field at one of its paths (chosen by `pick`) replaced by `with`.
fn replace_one(mut v: Value, pick: usize, with: Value) -> Value {
    fn paths(v: &Value, at: String, out: &mut Vec<String>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, c)| paths(c, format!("{at}/{k}"), out)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, c)| paths(c, format!("{at}/{i}"), out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    paths(&v, String::new(), &mut all);
    let path = &all[pick % all.len()];
    if path.is_empty() {
        return with;
    }
    if let Some(slot) = v.pointer_mut(path) {
        *slot = with;
    }
    v
}

fn no_server_error(status: u16, what: &str, answer: &str) -> Result<(), TestCaseError> {
    prop_assert!(status < 500, "{what}: {status} {answer}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn json_bodies_never_get_a_server_error(
        route in any::<prop::sample::Index>(),
        raw in prop::collection::vec(any::<u8>(), 0..64),
        doc in arb_json(),
        pick in any::<usize>(),
        with in arb_json(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let app = world().await;
            let routes = routes();
            let (method, path, valid) = &routes[route.index(routes.len())];
            for body in [raw.clone(), doc.to_string().into_bytes(), replace_one(valid.clone(), pick, with.clone()).to_string().into_bytes()] {
                let (status, answer) = call(&app, method, path, "application/json", body.clone()).await;
                no_server_error(status, &format!("{method} {path} {}", String::from_utf8_lossy(&body)), &answer)?;
            }
            // Nothing stored before was lost.
            let (status, answer) = call(&app, "GET", "/v2/cluster-providers/cp/clusters/c", "application/json", Vec::new()).await;
            prop_assert_eq!(status, 200, "{}", answer);
            Ok::<(), TestCaseError>(())
        })?;
    }

    #[test]
    fn uploads_never_get_a_server_error(
        raw in prop::collection::vec(any::<u8>(), 0..256),
        metadata in arb_json(),
        file in prop::collection::vec(any::<u8>(), 0..256),
        cut in any::<usize>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let app = world().await;
            let valid = multipart(br#"{"metadata":{"name":"c2"}}"#, KUBECONFIG.as_bytes());
            let truncated = valid[..cut % valid.len()].to_vec();
            for path in ["/v2/cluster-providers/cp/clusters", &format!("{CA}/apps"), &format!("{CA}/composite-profiles/prof/profiles")] {
                for body in [raw.clone(), multipart(metadata.to_string().as_bytes(), &file), multipart(br#"{"metadata":{"name":"x"},"spec":{"app":"web"}}"#, &file), truncated.clone()] {
                    let (status, answer) = call(&app, "POST", path, "multipart/form-data; boundary=b", body).await;
                    no_server_error(status, path, &answer)?;
                }
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}
