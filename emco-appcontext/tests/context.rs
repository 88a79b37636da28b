//! The typed AppContext API: the exact EMCO layout (keys and JSON values), read-back of every
//! part, the event queue, the active registry and batched writes. Runs on memory, and on etcd
//! too when `EMCO_TEST_ETCD` is set.

// Test helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use emco_appcontext::context::{
    AppContextStatus, AppDependency, ClusterReadiness, HookGroups, MAX_TXN_OPS, QueueElement,
    QueueStatus, RsyncEvent, RsyncStatus,
};
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_store::etcd::EtcdBuilder;
use emco_store::{AppContextStore, InMemoryAppContextStore};
use serde_json::{Value, json};

async fn etcd() -> Option<Arc<dyn AppContextStore>> {
    let Ok(url) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!(
            "SKIPPED: EMCO_TEST_ETCD not set; the AppContext layout test did not run on etcd"
        );
        return None;
    };
    Some(Arc::new(
        EtcdBuilder::new()
            .with_endpoints([url])
            .build()
            .await
            .unwrap(),
    ))
}

fn meta() -> CompositeAppMeta {
    CompositeAppMeta {
        project: "p1".into(),
        composite_app: "ca".into(),
        version: "v1".into(),
        release: "r1".into(),
        deployment_intent_group: "dig".into(),
        namespace: "default".into(),
        level: "0".into(),
        ..Default::default()
    }
}

/// Lays out a small context and checks every key and value byte for byte.
async fn exact_layout(store: Arc<dyn AppContextStore>) {
    let ctx = AppContext::create(Arc::clone(&store), &meta())
        .await
        .unwrap();
    let id = ctx.id();
    assert!(id.get() > 0 && id.get() <= i64::MAX as u64);
    let mut w = ctx.writer();
    w.set_status(AppContextStatus::Created).unwrap();
    w.set_app_order(&["a1", "a2"]).unwrap();
    let deps: BTreeMap<String, String> = [
        ("a1".to_owned(), "go".to_owned()),
        ("a2".to_owned(), "go".to_owned()),
    ]
    .into();
    w.set_app_dependency_instruction(&deps).unwrap();
    w.add_app("a1").unwrap();
    w.add_app("a2").unwrap();
    w.set_app_dependencies(
        "a2",
        &[AppDependency {
            app: "a1".into(),
            op_status: "Ready".into(),
            wait: 5,
        }],
    )
    .unwrap();
    w.add_cluster("a1", "prov+c1", Some("1")).unwrap();
    w.add_cluster("a2", "prov+c1", None).unwrap();
    w.add_resource(
        "a1",
        "prov+c1",
        "web+Deployment",
        "kind: Deployment\nmetadata:\n  name: web\n",
    )
    .unwrap();
    w.add_resource("a1", "prov+c1", "web+Service", "kind: Service\n")
        .unwrap();
    w.add_resource("a2", "prov+c1", "db+StatefulSet", "kind: StatefulSet\n")
        .unwrap();
    let dup = w.add_resource("a1", "prov+c1", "web+Service", "kind: Service\n");
    assert_eq!(dup.unwrap_err().kind(), emco_core::ErrorKind::AlreadyExists);
    w.set_resource_order("a1", "prov+c1", &["web+Service", "web+Deployment"])
        .unwrap();
    w.set_hook_groups("a1", "prov+c1", &HookGroups::default())
        .unwrap();
    w.flush().await.unwrap();
    ctx.set_resource_status("a1", "prov+c1", "web+Deployment", RsyncStatus::Applied)
        .await
        .unwrap();
    ctx.set_cluster_ready_status("a1", "prov+c1", ClusterReadiness::Available)
        .await
        .unwrap();
    ctx.set_stop_flag(false).await.unwrap();
    ctx.enqueue_event(QueueElement {
        clusters: None,
        event: RsyncEvent::Instantiate,
        ucid: None,
        status: QueueStatus::Pending,
        origin: None,
    })
    .await
    .unwrap();
    ctx.set_current_state(AppContextStatus::Instantiating)
        .await
        .unwrap();
    ctx.mark_active().await.unwrap();

    let r = format!("/context/{id}/");
    let c1 = format!("{r}app/a1/cluster/prov+c1/");
    let expected: Vec<(String, Value)> = vec![
        (r.clone(), json!(id.to_string())),
        (format!("{r}app/a1/"), json!("a1")),
        (c1.clone(), json!("prov+c1")),
        (format!("{c1}!@#metaGrp/"), json!("1")),
        (format!("{c1}readystatus/"), json!("Available")),
        (
            format!("{c1}resource/instruction/dependency/"),
            json!(
                r#"{"resdependency":{"crd-install":[],"pre-install":[],"post-install":[],"pre-delete":[],"post-delete":[]}}"#
            ),
        ),
        (
            format!("{c1}resource/instruction/order/"),
            json!(r#"{"resorder":["web+Service","web+Deployment"]}"#),
        ),
        (
            format!("{c1}resource/web+Deployment/"),
            json!("kind: Deployment\nmetadata:\n  name: web\n"),
        ),
        (
            format!("{c1}resource/web+Deployment/status/"),
            json!({"Status": "Applied"}),
        ),
        (
            format!("{c1}resource/web+Service/"),
            json!("kind: Service\n"),
        ),
        (format!("{r}app/a2/"), json!("a2")),
        (format!("{r}app/a2/cluster/prov+c1/"), json!("prov+c1")),
        (
            format!("{r}app/a2/cluster/prov+c1/resource/db+StatefulSet/"),
            json!("kind: StatefulSet\n"),
        ),
        (
            format!("{r}app/a2/instruction/dependency/"),
            json!(r#"[{"app":"a1","opStatus":"Ready","wait":5}]"#),
        ),
        (
            format!("{r}app/instruction/dependency/"),
            json!(r#"{"appdependency":{"a1":"go","a2":"go"}}"#),
        ),
        (
            format!("{r}app/instruction/order/"),
            json!(r#"{"apporder":["a1","a2"]}"#),
        ),
        (
            format!("{r}meta/"),
            json!({"Project":"p1","CompositeApp":"ca","Version":"v1","Release":"r1","DeploymentIntentGroup":"dig","Namespace":"default","Level":"0","ChildContextIDs":null,"LogicalCloud":"","LogicalCloudNamespace":""}),
        ),
        (
            format!("{r}rsync/AppContextEventQueue/"),
            json!({"AcQueue":[{"event":"Instantiate","status":"Pending"}]}),
        ),
        (
            format!("{r}rsync/state/CurrentState/"),
            json!({"Status":"Instantiating"}),
        ),
        (format!("{r}status/"), json!({"Status":"Created"})),
        (format!("{r}stopflag/"), json!(false)),
    ];
    let stored = store.list_all(&r, false).await.unwrap();
    let got: Vec<(String, Value)> = stored
        .iter()
        .map(|kv| (kv.key.clone(), serde_json::from_slice(&kv.value).unwrap()))
        .collect();
    assert_eq!(got, expected);
    // Byte-exact spot checks of the JSON text Go's encoding/json produces.
    let raw = |k: String| {
        let s = &stored;
        async move {
            String::from_utf8(s.iter().find(|kv| kv.key == k).unwrap().value.to_vec()).unwrap()
        }
    };
    assert_eq!(raw(format!("{r}status/")).await, r#"{"Status":"Created"}"#);
    assert_eq!(
        raw(format!("{r}app/instruction/order/")).await,
        r#""{\"apporder\":[\"a1\",\"a2\"]}""#
    );
    let active = store
        .get(&format!("/activecontext/{id}/"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(active.value, format!("\"{id}\""));

    // Everything reads back through the typed API.
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    assert_eq!(ctx.meta().await.unwrap(), meta());
    assert_eq!(ctx.apps().await.unwrap(), ["a1", "a2"]);
    assert_eq!(ctx.clusters("a1").await.unwrap(), ["prov+c1"]);
    assert_eq!(
        ctx.cluster_group("a1", "prov+c1").await.unwrap().as_deref(),
        Some("1")
    );
    assert_eq!(
        ctx.cluster_groups("a1").await.unwrap().get("1").unwrap(),
        &["prov+c1".to_owned()]
    );
    assert_eq!(
        ctx.resources("a1", "prov+c1").await.unwrap(),
        ["web+Deployment", "web+Service"]
    );
    assert_eq!(
        ctx.resource("a2", "prov+c1", "db+StatefulSet")
            .await
            .unwrap()
            .as_deref(),
        Some("kind: StatefulSet\n")
    );
    assert_eq!(ctx.app_order().await.unwrap().unwrap(), ["a1", "a2"]);
    assert_eq!(
        ctx.app_dependency_instruction().await.unwrap().unwrap(),
        deps
    );
    assert_eq!(
        ctx.app_dependencies("a2").await.unwrap().unwrap()[0].wait,
        5
    );
    assert_eq!(
        ctx.resource_order("a1", "prov+c1").await.unwrap().unwrap(),
        ["web+Service", "web+Deployment"]
    );
    assert_eq!(
        ctx.hook_groups("a1", "prov+c1").await.unwrap().unwrap(),
        HookGroups::default()
    );
    assert_eq!(
        ctx.resource_status("a1", "prov+c1", "web+Deployment")
            .await
            .unwrap(),
        Some(RsyncStatus::Applied)
    );
    assert_eq!(
        ctx.cluster_ready_status("a1", "prov+c1").await.unwrap(),
        ClusterReadiness::Available
    );
    assert_eq!(
        ctx.cluster_ready_status("a2", "prov+c1").await.unwrap(),
        ClusterReadiness::Unknown
    );
    ctx.set_cluster_status("a1", "prov+c1", &json!({"ready": true}))
        .await
        .unwrap();
    assert_eq!(
        ctx.cluster_status("a1", "prov+c1").await.unwrap(),
        Some(json!({"ready": true}))
    );
    assert_eq!(ctx.status().await.unwrap(), Some(AppContextStatus::Created));
    ctx.set_status(AppContextStatus::UpdateFailed)
        .await
        .unwrap();
    assert_eq!(
        ctx.status().await.unwrap(),
        Some(AppContextStatus::UpdateFailed)
    );
    assert!(!ctx.stop_flag().await.unwrap());
    ctx.set_stop_flag(true).await.unwrap();
    assert!(ctx.stop_flag().await.unwrap());
    assert_eq!(
        ctx.current_state().await.unwrap(),
        Some(AppContextStatus::Instantiating)
    );
    ctx.set_desired_state(AppContextStatus::Instantiated)
        .await
        .unwrap();
    assert_eq!(
        ctx.desired_state().await.unwrap(),
        Some(AppContextStatus::Instantiated)
    );
    assert!(!ctx.pending_terminate().await.unwrap());
    ctx.set_pending_terminate(true).await.unwrap();
    assert!(ctx.pending_terminate().await.unwrap());
    let i = ctx
        .enqueue_event(QueueElement {
            clusters: None,
            event: RsyncEvent::Update,
            ucid: Some("42".into()),
            status: QueueStatus::Pending,
            origin: None,
        })
        .await
        .unwrap();
    assert_eq!(i, 1);
    ctx.set_event_status(0, QueueStatus::Done).await.unwrap();
    assert!(ctx.set_event_status(9, QueueStatus::Done).await.is_err());
    let q = ctx.event_queue().await.unwrap();
    assert_eq!(q.len(), 2);
    assert_eq!(q[0].status, QueueStatus::Done);
    assert_eq!(q[1].ucid.as_deref(), Some("42"));
    // An ask of one origin is queued once, however often it is made, also once it ran.
    let wave = |clusters: &[&str]| QueueElement {
        clusters: Some(clusters.iter().map(|c| (*c).to_owned()).collect()),
        event: RsyncEvent::Instantiate,
        ucid: None,
        status: QueueStatus::Pending,
        origin: Some("rollout wave 0".into()),
    };
    assert!(ctx.enqueue_event_once(wave(&["p+c1"])).await.unwrap());
    ctx.set_event_status(2, QueueStatus::Done).await.unwrap();
    assert!(!ctx.enqueue_event_once(wave(&["p+c1"])).await.unwrap());
    let q = ctx.event_queue().await.unwrap();
    assert_eq!(q.len(), 3);
    assert_eq!(q[2].origin.as_deref(), Some("rollout wave 0"));
    assert!(
        AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .contains(&id)
    );

    // Delete removes every key of the context.
    assert!(ctx.unmark_active().await.unwrap());
    ctx.delete().await.unwrap();
    assert!(store.list_all(&r, true).await.unwrap().is_empty());
    assert!(AppContext::load(Arc::clone(&store), id).await.is_err());
}

#[tokio::test]
async fn memory_context_has_emcos_exact_layout() {
    exact_layout(Arc::new(InMemoryAppContextStore::new())).await;
}

#[tokio::test]
async fn etcd_context_has_emcos_exact_layout() {
    let Some(store) = etcd().await else { return };
    exact_layout(store).await;
}

/// A large context is written in few transactions, each within etcd's limits.
async fn batched(store: Arc<dyn AppContextStore>) {
    let ctx = AppContext::create(Arc::clone(&store), &meta())
        .await
        .unwrap();
    let mut w = ctx.writer();
    let (apps, clusters, resources) = (3, 20, 10);
    for a in 0..apps {
        let app = format!("app{a}");
        w.add_app(&app).unwrap();
        for c in 0..clusters {
            let cl = format!("p+c{c}");
            w.add_cluster(&app, &cl, Some("1")).unwrap();
            for r in 0..resources {
                w.add_resource(&app, &cl, &format!("r{r}+ConfigMap"), &"x".repeat(2000))
                    .unwrap();
            }
        }
    }
    let keys = w.pending();
    let txns = w.flush().await.unwrap();
    assert_eq!(
        txns,
        keys.div_ceil(MAX_TXN_OPS),
        "{keys} keys in {txns} transactions"
    );
    let stored = store.list_all(ctx.root_key(), true).await.unwrap();
    assert_eq!(stored.len(), keys + 2, "every key plus the root and meta");
    assert_eq!(
        ctx.resources("app2", "p+c19").await.unwrap().len(),
        resources
    );
    ctx.delete().await.unwrap();
}

#[tokio::test]
async fn memory_context_writes_are_batched() {
    batched(Arc::new(InMemoryAppContextStore::new())).await;
}

#[tokio::test]
async fn etcd_context_writes_are_batched() {
    let Some(store) = etcd().await else { return };
    batched(store).await;
}
