//! gac as a controller: the intent the DIG names is read from the resource store (resources,
//! customizations, uploaded files, cluster labels) and applied to the AppContext.

#![allow(clippy::unwrap_used, missing_docs)]

use emco_core::ContextId;
use std::sync::Arc;

use bytes::Bytes;

use emco_appcontext::keys::Keyed;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::handle::parse_resource;
use emco_controller_sdk::intent::IntentType;
use emco_controller_sdk::{ActionRunner, Stores};
use emco_controllers::gac::{Customization, GacResource, GenericK8sIntent, RESOURCE_FILE_BLOB};
use emco_core::ErrorKind;
use emco_core::model::ClusterLabel;
use emco_core::{ClusterRef, DigRef};
use emco_rest::Collection;
use emco_store::{
    AppContextStore, InMemoryAppContextStore, InMemoryResourceStore, PutMode, ResourceKey,
    ResourceStore,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const DEPLOY: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n";
const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n";

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn put_chain(store: &Arc<dyn ResourceStore>, key: &ResourceKey) {
    let mut keys = vec![key.clone()];
    while let Some(parent) = keys.last().unwrap().parent().filter(|k| !k.is_root()) {
        keys.push(parent);
    }
    for k in keys.iter().rev() {
        if store.get(k).await.unwrap().is_none() {
            store
                .put(k, &json!({"metadata": {"name": k.name()}}), PutMode::Create)
                .await
                .unwrap();
        }
    }
}

async fn blob(store: &Arc<dyn ResourceStore>, key: &ResourceKey, name: &str, data: &[u8]) {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let stream = Box::pin(futures::stream::once(async move { Ok(bytes) }));
    store.put_blob(key, name, stream).await.unwrap();
}

async fn fixture() -> (Stores, ContextId) {
    let resources: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
    for c in ["p+edge1", "p+core1"] {
        put_chain(&resources, &c.parse::<ClusterRef>().unwrap().key()).await;
    }
    Collection::<ClusterLabel>::new(Arc::clone(&resources), "clusterLabel")
        .create(
            &"p+edge1".parse::<ClusterRef>().unwrap().key(),
            &ClusterLabel::new("edge"),
        )
        .await
        .unwrap();
    let dig = DigRef::new("p", "ca", "v1", "dig").key();
    put_chain(&resources, &dig).await;
    let gi: GenericK8sIntent = from(json!({"metadata": {"name": "gi"}}));
    GenericK8sIntent::collection(Arc::clone(&resources))
        .create(&dig, &gi)
        .await
        .unwrap();
    let gkey = dig.child(GenericK8sIntent::PARAM, "gi");

    let res = |name: &str, kind: &str, obj: &str, new: &str| -> GacResource {
        from(
            json!({"metadata": {"name": name}, "spec": {"app": "web", "newObject": new,
            "resourceGVK": {"apiVersion": "v1", "kind": kind, "name": obj}}}),
        )
    };
    let rs = GacResource::collection(Arc::clone(&resources));
    let cs = Customization::collection(Arc::clone(&resources));
    // A new NetworkPolicy for edge clusters only.
    rs.create(&gkey, &res("np", "NetworkPolicy", "np", "true"))
        .await
        .unwrap();
    let npkey = gkey.child(GacResource::PARAM, "np");
    blob(
        &resources,
        &npkey,
        RESOURCE_FILE_BLOB,
        b"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: np\nspec: {}\n",
    )
    .await;
    let edge: Customization = from(json!({"metadata": {"name": "edge"}, "spec": {
        "clusterSpecific": "true", "clusterInfo": {"scope": "label", "clusterProvider": "p",
        "clusterLabel": "edge", "mode": "allow"}}}));
    cs.create(&npkey, &edge).await.unwrap();
    // The app's Deployment scaled by a JSON patch.
    rs.create(&gkey, &res("web", "Deployment", "web", "false"))
        .await
        .unwrap();
    let wkey = gkey.child(GacResource::PARAM, "web");
    let scale: Customization = from(json!({"metadata": {"name": "scale"}, "spec": {
        "patchType": "json", "patchJson": [{"op": "replace", "path": "/spec/replicas", "value": 4}]}}));
    cs.create(&wkey, &scale).await.unwrap();
    // Created after `scale`, so applied after it although its name sorts first.
    let rescale: Customization = from(json!({"metadata": {"name": "a-rescale"}, "spec": {
        "patchType": "json", "patchJson": [{"op": "replace", "path": "/spec/replicas", "value": 6}]}}));
    cs.create(&wkey, &rescale).await.unwrap();
    // The ConfigMap filled from an uploaded file.
    rs.create(&gkey, &res("cfg", "ConfigMap", "cfg", "false"))
        .await
        .unwrap();
    let ckey = gkey.child(GacResource::PARAM, "cfg");
    let data: Customization = from(json!({"metadata": {"name": "data"}, "spec": {
        "configMapOptions": {"dataKeyOptions": [{"fileName": "motd.txt", "keyName": "motd"}]}}}));
    cs.create(&ckey, &data).await.unwrap();
    blob(
        &resources,
        &ckey.child(Customization::PARAM, "data"),
        "motd.txt",
        b"hi",
    )
    .await;

    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let meta = CompositeAppMeta {
        project: "p".into(),
        composite_app: "ca".into(),
        version: "v1".into(),
        deployment_intent_group: "dig".into(),
        ..Default::default()
    };
    let ctx = AppContext::create(Arc::clone(&store), &meta).await.unwrap();
    let mut w = ctx.writer();
    w.add_app("web").unwrap();
    for c in ["p+edge1", "p+core1"] {
        w.add_cluster("web", c, None).unwrap();
        w.add_resource("web", c, "web+Deployment", DEPLOY).unwrap();
        w.add_resource("web", c, "cfg+ConfigMap", CM).unwrap();
    }
    w.flush().await.unwrap();
    (Stores::new(store).with_resources(resources), ctx.id())
}

async fn get(stores: &Stores, id: ContextId, cluster: &str, name: &str) -> Option<Value> {
    let ctx = AppContext::load(Arc::clone(&stores.appcontext), id)
        .await
        .unwrap();
    ctx.resource("web", cluster, name)
        .await
        .unwrap()
        .map(|y| parse_resource(&y).unwrap())
}

#[tokio::test]
async fn gac_applies_the_intent_named_in_the_dig() {
    let (stores, id) = fixture().await;
    let gac = ActionRunner::new(Arc::new(emco_controllers::gac::Gac), stores.clone());
    gac.update(&id.to_string(), "gi", "").await.unwrap();

    assert!(
        get(&stores, id, "p+edge1", "np+NetworkPolicy")
            .await
            .is_some()
    );
    assert!(
        get(&stores, id, "p+core1", "np+NetworkPolicy")
            .await
            .is_none()
    );
    // Customizations run in creation order, the last one's patch winning (EMCO:
    // src/genericactioncontroller/internal/action/action.go ranges over the customizations as
    // its DB lists them, in insertion order).
    for c in ["p+edge1", "p+core1"] {
        let d = get(&stores, id, c, "web+Deployment").await.unwrap();
        assert_eq!(d["spec"]["replicas"], 6);
        let cm = get(&stores, id, c, "cfg+ConfigMap").await.unwrap();
        assert_eq!(cm["data"], json!({"motd": "hi"}));
    }

    let err = gac.update(&id.to_string(), "nope", "").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

/// A multipart body with a `metadata` field and file parts `(field, file name, content)`.
fn form(metadata: &Value, files: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "XgacBoundaryX";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{metadata}\r\n"
        )
        .as_bytes(),
    );
    for (field, name, content) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; \
                 filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn call(
    router: &axum::Router,
    method: &str,
    uri: &str,
    ct: &str,
    body: Vec<u8>,
) -> (http::StatusCode, Value) {
    use tower::ServiceExt;
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(axum::body::Body::from(body))
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn gac_routes_store_forms_and_files_the_controller_reads() {
    let (stores, id) = fixture().await;
    let resources = Arc::clone(stores.resources.as_ref().unwrap());
    let router: axum::Router = emco_controllers::gac::routes(Arc::clone(&resources), 1 << 20);
    let base =
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig/generic-k8s-intents";
    let (status, _) = call(
        &router,
        "POST",
        base,
        "application/json",
        br#"{"metadata":{"name":"gi2"}}"#.to_vec(),
    )
    .await;
    assert_eq!(status, http::StatusCode::CREATED);

    let svc = b"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n";
    let meta = json!({"metadata": {"name": "svc"}, "spec": {"app": "web", "newObject": "true",
        "resourceGVK": {"apiVersion": "v1", "kind": "Service", "name": "svc"}}});
    let (ct, body) = form(&meta, &[("file", "svc.yaml", svc)]);
    let (status, stored) = call(&router, "POST", &format!("{base}/gi2/resources"), &ct, body).await;
    assert_eq!(status, http::StatusCode::CREATED, "{stored}");
    assert_eq!(stored["spec"]["resourceGVK"]["kind"], "Service");
    // Invalid metadata is a 400; a missing parent a 404.
    let bad = json!({"metadata": {"name": "x"}, "spec": {"app": "web", "newObject": "maybe",
        "resourceGVK": {"kind": "Service", "name": "x"}}});
    let (ct, body) = form(&bad, &[]);
    let (status, _) = call(&router, "POST", &format!("{base}/gi2/resources"), &ct, body).await;
    assert_eq!(status, http::StatusCode::BAD_REQUEST);
    let (ct, body) = form(&meta, &[]);
    let (status, _) = call(
        &router,
        "POST",
        &format!("{base}/nope/resources"),
        &ct,
        body,
    )
    .await;
    // As EMCO's database refuses a child of a missing parent (gac's older error table).
    assert_eq!(status, http::StatusCode::CONFLICT);

    let cust = json!({"metadata": {"name": "c"}, "spec": {"patchType": "merge",
        "patchJson": [{"metadata": {"labels": {"via": "rest"}}}]}});
    let (ct, body) = form(&cust, &[("files", "extra.json", b"{}")]);
    let (status, _) = call(
        &router,
        "POST",
        &format!("{base}/gi2/resources/svc/customizations"),
        &ct,
        body,
    )
    .await;
    assert_eq!(status, http::StatusCode::CREATED);
    let (status, got) = call(
        &router,
        "GET",
        &format!("{base}/gi2/resources/svc/customizations/c"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(status, http::StatusCode::OK);
    assert_eq!(got["spec"]["patchType"], "merge");

    let gac = ActionRunner::new(Arc::new(emco_controllers::gac::Gac), stores.clone());
    gac.update(&id.to_string(), "gi2", "").await.unwrap();
    for c in ["p+edge1", "p+core1"] {
        let s = get(&stores, id, c, "svc+Service").await.unwrap();
        assert_eq!(s["metadata"]["labels"], json!({"via": "rest"}));
    }

    let (status, _) = call(
        &router,
        "DELETE",
        &format!("{base}/gi2/resources/svc"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(status, http::StatusCode::CONFLICT);
}

/// GETs `uri` with `Accept: accept`: the status, content type and body.
async fn get_as(
    router: &axum::Router,
    uri: &str,
    accept: &str,
) -> (http::StatusCode, String, Bytes) {
    use tower::ServiceExt;
    let req = http::Request::get(uri)
        .header("accept", accept)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, ct, body)
}

/// The parts of a multipart answer as `(field, file name, content)`, read with axum's parser.
async fn parts(ct: &str, body: Bytes) -> Vec<(String, Option<String>, Bytes)> {
    use axum::extract::{FromRequest, Multipart};
    let req = http::Request::post("/")
        .header("content-type", ct)
        .body(axum::body::Body::from(body))
        .unwrap();
    let mut form = Multipart::from_request(req, &()).await.unwrap();
    let mut out = Vec::new();
    while let Some(field) = form.next_field().await.unwrap() {
        let name = field.name().unwrap_or_default().to_owned();
        let file = field.file_name().map(str::to_owned);
        out.push((name, file, field.bytes().await.unwrap()));
    }
    out
}

#[tokio::test]
async fn gac_get_negotiates_json_multipart_and_the_raw_file() {
    let (stores, _) = fixture().await;
    let resources = Arc::clone(stores.resources.as_ref().unwrap());
    let router: axum::Router = emco_controllers::gac::routes(resources, 1 << 20);
    let base =
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig/generic-k8s-intents";
    let (status, _) = call(
        &router,
        "POST",
        base,
        "application/json",
        br#"{"metadata":{"name":"gi3"}}"#.to_vec(),
    )
    .await;
    assert_eq!(status, http::StatusCode::CREATED);
    let cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";
    let meta = json!({"metadata": {"name": "cm"}, "spec": {"app": "web", "newObject": "true",
        "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"}}});
    let (ct, body) = form(&meta, &[("file", "cm.yaml", cm)]);
    let resource = format!("{base}/gi3/resources/cm");
    let (status, stored) = call(&router, "POST", &format!("{base}/gi3/resources"), &ct, body).await;
    assert_eq!(status, http::StatusCode::CREATED);
    assert_eq!(stored["spec"], meta["spec"]);
    let cust = json!({"metadata": {"name": "data"}, "spec": {"configMapOptions": {"dataKeyOptions": [
        {"fileName": "a.json", "keyName": "a"}, {"fileName": "b.txt", "keyName": "b"},
        {"fileName": "a.json", "keyName": "again"}]}}});
    let (ct, body) = form(
        &cust,
        &[
            ("files", "a.json", b"{\"x\":1}"),
            ("files", "b.txt", b"bee"),
        ],
    );
    let (status, _) = call(
        &router,
        "POST",
        &format!("{resource}/customizations"),
        &ct,
        body,
    )
    .await;
    assert_eq!(status, http::StatusCode::CREATED);

    // The resource: metadata + its file; the raw file; JSON by default.
    let (status, ct, body) = get_as(&router, &resource, "multipart/form-data").await;
    assert_eq!(status, http::StatusCode::OK);
    let got = parts(&ct, body).await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].0, "metadata");
    let m: Value = serde_json::from_slice(&got[0].2).unwrap();
    assert_eq!(m, stored);
    assert_eq!(
        (got[1].0.as_str(), got[1].1.as_deref()),
        ("file", Some("cm"))
    );
    assert_eq!(&got[1].2[..], cm);
    let (status, ct, body) = get_as(&router, &resource, "application/octet-stream").await;
    assert_eq!(
        (status, ct.as_str()),
        (http::StatusCode::OK, "application/octet-stream")
    );
    assert_eq!(&body[..], cm);
    let (status, ct, body) = get_as(&router, &resource, "text/html, */*;q=0.1").await;
    assert_eq!(status, http::StatusCode::OK);
    assert!(ct.starts_with("application/json"), "{ct}");
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), stored);
    let (status, _, _) = get_as(&router, &resource, "text/html").await;
    assert_eq!(status, http::StatusCode::NOT_ACCEPTABLE);

    // The customization: metadata + one `files` part per file its options name.
    let (status, ct, body) = get_as(
        &router,
        &format!("{resource}/customizations/data"),
        "multipart/form-data",
    )
    .await;
    assert_eq!(status, http::StatusCode::OK);
    let got = parts(&ct, body).await;
    let files: Vec<(&str, Option<&str>, &[u8])> = got[1..]
        .iter()
        .map(|(f, n, b)| (f.as_str(), n.as_deref(), &b[..]))
        .collect();
    assert_eq!(got[0].0, "metadata");
    assert_eq!(
        files,
        [
            ("files", Some("a.json"), &b"{\"x\":1}"[..]),
            ("files", Some("b.txt"), &b"bee"[..])
        ]
    );
    // It has no `file`.
    let (status, _, _) = get_as(
        &router,
        &format!("{resource}/customizations/data"),
        "application/octet-stream",
    )
    .await;
    assert_eq!(status, http::StatusCode::NOT_FOUND);
}
