//! hpa against an in-memory AppContext and resource store: apps keep only the clusters whose
//! kv-pairs / labels satisfy the mandatory requirements; an anyOf group keeps its survivors; the
//! action part writes requests and limits into the pod template.

#![allow(clippy::unwrap_used, missing_docs)]

use emco_core::ContextId;
use std::sync::Arc;

use emco_appcontext::keys::{GROUP_INTENT, Keyed};
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::intent::IntentType;
use emco_controller_sdk::{ActionRunner, PlacementRunner, Stores};
use emco_controllers::hpa::{
    ClusterFacts, HpaAction, HpaConsumer, HpaIntent, HpaPlacement, HpaRequirement,
    HpaRequirementSpec, satisfies,
};
use emco_core::ErrorKind;
use emco_core::model::{ClusterLabel, DigIntent, KvPair};
use emco_core::{ClusterRef, DigRef};
use emco_rest::Collection;
use emco_store::{
    AppContextStore, InMemoryAppContextStore, InMemoryResourceStore, PutMode, ResourceKey,
    ResourceStore,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: r1-client\nspec:\n  template:\n    spec:\n      containers:\n      - name: client\n        image: c\n      - name: sidecar\n        image: s\n";

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

/// Clusters p+a (qat, cpu 8), p+b (cpu 2), p+c (label qat, cpu "16") in anyOf group 1, and
/// p+d (nothing) mandatory; the hpa intent requires qat and 4 cpus for the app `client`.
async fn fixture(mandatory: bool) -> (Stores, ContextId) {
    let resources: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
    let feature = "feature.node.kubernetes.io/intel_qat";
    for (c, labels, kv) in [
        ("p+a", vec![], json!([{feature: "true"}, {"cpu": 8}])),
        ("p+b", vec![], json!([{"cpu": 2}, {feature: "true"}])),
        ("p+c", vec!["intel_qat".to_owned()], json!([{"cpu": "16"}])),
        ("p+d", vec![], json!([{"rack": "r9"}])),
    ] {
        let key = c.parse::<ClusterRef>().unwrap().key();
        put_chain(&resources, &key).await;
        for l in labels {
            Collection::<ClusterLabel>::new(Arc::clone(&resources), "clusterLabel")
                .create(&key, &ClusterLabel::new(l))
                .await
                .unwrap();
        }
        Collection::<KvPair>::new(Arc::clone(&resources), "kvPair")
            .create(
                &key,
                &from(json!({"metadata": {"name": "hw"}, "spec": {"kv": kv}})),
            )
            .await
            .unwrap();
    }
    let dig = DigRef::new("p", "ca", "v1", "dig").key();
    put_chain(&resources, &dig).await;
    Collection::<DigIntent>::new(Arc::clone(&resources), GROUP_INTENT)
        .create(
            &dig,
            &from(json!({"metadata": {"name": "i"}, "spec": {"intent": {
                "genericPlacementIntent": "gpi", "hpa-plc": "hpa-1", "hpa-ac": "hpa-1"}}})),
        )
        .await
        .unwrap();
    let intent: HpaIntent = from(json!({"metadata": {"name": "hpa-1"}, "spec": {"app": "client"}}));
    HpaIntent::collection(Arc::clone(&resources))
        .create(&dig, &intent)
        .await
        .unwrap();
    let ikey = dig.child(HpaIntent::PARAM, "hpa-1");
    let consumer: HpaConsumer = from(json!({"metadata": {"name": "c1"}, "spec": {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "r1-client", "container": "client"}}));
    HpaConsumer::collection(Arc::clone(&resources))
        .create(&ikey, &consumer)
        .await
        .unwrap();
    let ckey = ikey.child(HpaConsumer::PARAM, "c1");
    for r in [
        json!({"metadata": {"name": "qat"}, "spec": {"allocatable": false, "mandatory": mandatory,
            "weight": 1, "resource": {"key": feature, "value": "true"}}}),
        json!({"metadata": {"name": "cpu"}, "spec": {"allocatable": true, "mandatory": mandatory,
            "weight": 1, "resource": {"name": "cpu", "requests": 4, "limits": 6}}}),
    ] {
        HpaRequirement::collection(Arc::clone(&resources))
            .create(&ckey, &from::<HpaRequirement>(r))
            .await
            .unwrap();
    }

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
    w.add_app("client").unwrap();
    for (c, g) in [
        ("p+a", Some("1")),
        ("p+b", Some("1")),
        ("p+c", Some("1")),
        ("p+d", None),
    ] {
        w.add_cluster("client", c, g).unwrap();
        w.add_resource("client", c, "r1-client+Deployment", DEPLOY)
            .unwrap();
    }
    w.flush().await.unwrap();
    (Stores::new(store).with_resources(resources), ctx.id())
}

#[tokio::test]
async fn placement_keeps_the_clusters_that_satisfy_the_requirements() {
    let (stores, id) = fixture(true).await;
    let plc = PlacementRunner::new(
        Arc::new(HpaPlacement {
            name: "hpa-plc".into(),
        }),
        stores.clone(),
    );
    // p+d satisfies nothing and is the app's only mandatory cluster: the app has survivors in
    // its anyOf group, so the filter succeeds and p+d is gone.
    plc.filter_clusters(&id.to_string()).await.unwrap();
    let ctx = AppContext::load(Arc::clone(&stores.appcontext), id)
        .await
        .unwrap();
    assert_eq!(ctx.clusters("client").await.unwrap(), vec!["p+a", "p+c"]);
    // The anyOf group keeps both survivors; the orchestrator then picks p+a.
    assert_eq!(
        ctx.cluster_groups("client").await.unwrap()["1"],
        vec!["p+a", "p+c"]
    );
}

#[tokio::test]
async fn optional_requirements_rank_each_any_of_group() {
    let (stores, id) = fixture(false).await;
    let plc = PlacementRunner::new(
        Arc::new(HpaPlacement {
            name: "hpa-plc".into(),
        }),
        stores.clone(),
    );
    plc.filter_clusters(&id.to_string()).await.unwrap();
    let ctx = AppContext::load(Arc::clone(&stores.appcontext), id)
        .await
        .unwrap();
    // Weights 1 + 1: p+a and p+c meet both (2), p+b only qat (1) and leaves the anyOf group;
    // p+d, mandatory and alone in its group, stays although it meets neither.
    assert_eq!(
        ctx.clusters("client").await.unwrap(),
        vec!["p+a", "p+c", "p+d"]
    );
}

#[tokio::test]
async fn no_surviving_cluster_is_an_error_and_changes_nothing() {
    let (stores, id) = fixture(true).await;
    let ctx = AppContext::load(Arc::clone(&stores.appcontext), id)
        .await
        .unwrap();
    // Leave only the clusters that fail.
    let mut h = emco_controller_sdk::ContextHandle::new(ctx.clone());
    h.remove_cluster("client", "p+a").await.unwrap();
    h.remove_cluster("client", "p+c").await.unwrap();
    h.commit().await.unwrap();
    let plc = PlacementRunner::new(
        Arc::new(HpaPlacement {
            name: "hpa-plc".into(),
        }),
        stores.clone(),
    );
    let err = plc.filter_clusters(&id.to_string()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert!(err.to_string().contains("app client"), "{err}");
    assert_eq!(ctx.clusters("client").await.unwrap(), vec!["p+b", "p+d"]);
}

#[tokio::test]
async fn action_writes_requests_and_limits_into_the_container() {
    let (stores, id) = fixture(true).await;
    let ac = ActionRunner::new(Arc::new(HpaAction), stores.clone());
    ac.update(&id.to_string(), "hpa-1", "").await.unwrap();
    let ctx = AppContext::load(Arc::clone(&stores.appcontext), id)
        .await
        .unwrap();
    for c in ["p+a", "p+d"] {
        let yaml = ctx
            .resource("client", c, "r1-client+Deployment")
            .await
            .unwrap()
            .unwrap();
        let d: Value = emco_controller_sdk::handle::parse_resource(&yaml).unwrap();
        let containers = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            containers[0]["resources"],
            json!({"requests": {"cpu": "4"}, "limits": {"cpu": "6"}})
        );
        assert_eq!(containers[1].get("resources"), None);
    }
    let err = ac.update(&id.to_string(), "nope", "").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
}

#[test]
fn nested_intent_urls_follow_emco() {
    assert_eq!(
        HpaRequirement::collection_path(),
        "/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}\
         /deployment-intent-groups/{deploymentIntentGroup}/hpa-intents/{hpaIntent}\
         /hpa-resource-consumers/{hpaResourceConsumer}/resource-requirements"
    );
}

#[test]
fn requirements_match_kv_pairs_and_labels() {
    let facts = ClusterFacts {
        labels: ["gpu".to_owned(), "east".to_owned()].into(),
        kv: [
            ("cpu".to_owned(), json!("8")),
            ("sriov".to_owned(), json!(true)),
        ]
        .into(),
    };
    let req = |v: Value| -> HpaRequirementSpec { from(v) };
    assert!(satisfies(
        &req(json!({"allocatable": true, "resource": {"name": "cpu", "requests": 8}})),
        &facts
    ));
    assert!(!satisfies(
        &req(json!({"allocatable": true, "resource": {"name": "cpu", "requests": 9}})),
        &facts
    ));
    assert!(satisfies(
        &req(json!({"allocatable": true, "resource": {"name": "cpu", "limits": 2}})),
        &facts
    ));
    assert!(!satisfies(
        &req(json!({"allocatable": true, "resource": {"name": "memory", "requests": 1}})),
        &facts
    ));
    assert!(satisfies(
        &req(json!({"resource": {"key": "sriov", "value": "true"}})),
        &facts
    ));
    assert!(!satisfies(
        &req(json!({"resource": {"key": "zone", "value": "east"}})),
        &facts
    ));
    assert!(satisfies(
        &req(json!({"resource": {"key": "example.com/gpu", "value": "true"}})),
        &facts
    ));
    assert!(!satisfies(
        &req(json!({"resource": {"key": "zone", "value": "west"}})),
        &facts
    ));
    assert!(satisfies(&req(json!({"resource": {"key": "gpu"}})), &facts));
}

#[tokio::test]
async fn the_registry_calls_hpa_over_grpc_and_in_process() {
    use emco_controller_sdk::{ControllerRegistry, Server};
    use emco_core::Metadata;
    use emco_core::model::{Controller, ControllerSpec};

    let (stores, id) = fixture(true).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = Server::builder(Arc::clone(&stores.appcontext))
        .name("hpa-plc")
        .resources(Arc::clone(stores.resources.as_ref().unwrap()))
        .placement(HpaPlacement {
            name: "hpa-plc".into(),
        });
    let served = tokio::spawn(server.serve_with_listener(listener, async {
        let _ = stopped.await;
    }));
    let reg = |name: &str, kind: &str, priority: i64| Controller {
        metadata: Metadata::named(name),
        spec: ControllerSpec {
            host: addr.ip().to_string(),
            port: i64::from(addr.port()),
            kind: kind.into(),
            priority,
        },
    };
    let controllers = vec![reg("hpa-ac", "action", 1), reg("hpa-plc", "placement", 1)];
    let registry =
        ControllerRegistry::new(stores.clone()).with_action("hpa-ac", Arc::new(HpaAction));
    let dig = [("hpa-plc", "hpa-1"), ("hpa-ac", "hpa-1")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    registry.invoke(&controllers, &dig, id, None).await.unwrap();

    let ctx = AppContext::load(Arc::clone(&stores.appcontext), id)
        .await
        .unwrap();
    assert_eq!(ctx.clusters("client").await.unwrap(), vec!["p+a", "p+c"]);
    let yaml = ctx
        .resource("client", "p+c", "r1-client+Deployment")
        .await
        .unwrap()
        .unwrap();
    assert!(
        yaml.contains("cpu: '4'") || yaml.contains("cpu: \"4\""),
        "{yaml}"
    );
    stop.send(()).unwrap();
    served.await.unwrap().unwrap();
}
