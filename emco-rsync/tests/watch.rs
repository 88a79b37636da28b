//! Readiness watches against a kubesim cluster: one watch per resource type, changes published
//! as workloads become ready and when they are deleted.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::time::Duration;

use emco_rsync::connector::kube::ClusterWatcher;
use emco_rsync::connector::kube::KubePool;
use emco_rsync::connector::{Batch, Connector, Propagation, Resource, Scope};
use emco_rsync::connector::{ReadinessChange, ReadinessSource};
use emco_rsync::readiness::Readiness;
use kubesim::{Fleet, FleetConfig};
use tokio::sync::broadcast;

fn deployment(name: &str) -> Resource {
    Resource::from_yaml(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  \
         selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    \
         spec:\n      containers:\n      - name: c\n        image: nginx\n"
    ))
    .unwrap()
}

/// The next change for `name`; the timeout only bounds a hang.
async fn next_for(rx: &mut broadcast::Receiver<ReadinessChange>, name: &str) -> ReadinessChange {
    loop {
        let change = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap()
            .unwrap();
        if change.id.name == name {
            return change;
        }
    }
}

#[tokio::test]
async fn readiness_changes_are_published_once_per_change() {
    let fleet = Fleet::start(FleetConfig {
        ready_delay: Duration::from_millis(300),
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let pool = KubePool::new();
    let c = pool
        .connector("c1", &fleet.kubeconfig("c1").unwrap())
        .await
        .unwrap();
    let watcher = ClusterWatcher::new(c.clone(), 64);
    let mut rx = watcher.subscribe();

    let scope = Scope::new("11", "web").with_namespace("shop");
    let namespace =
        Resource::from_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n").unwrap();
    c.apply(&Batch::new(scope.clone()).with_resource(namespace))
        .await
        .unwrap();
    let (a, b) = (deployment("a"), deployment("b"));
    watcher.watch(a.id()).await.unwrap();
    watcher.watch(b.id()).await.unwrap();
    assert_eq!(
        watcher.watch_count(),
        1,
        "one watch per resource type, not per object"
    );

    // An unlabelled object of the same type is not reported.
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        c.client().clone(),
        "shop",
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let mut foreign = deployment("foreign").manifest().clone();
    foreign["metadata"]["namespace"] = "shop".into();
    api.patch(
        "foreign",
        &kube::api::PatchParams::apply("other"),
        &kube::api::Patch::Apply(&foreign),
    )
    .await
    .unwrap();

    c.apply(
        &Batch::new(scope.clone())
            .with_resource(a.clone())
            .with_resource(b.clone()),
    )
    .await
    .unwrap();
    let first = next_for(&mut rx, "a").await;
    assert_eq!(first.cluster, "c1");
    assert_eq!(first.deployment_id, "11-web");
    assert_eq!(first.id.namespace.as_deref(), Some("shop"));
    assert!(
        matches!(first.readiness, Some(Readiness::NotReady(_))),
        "{first:?}"
    );
    let ready = next_for(&mut rx, "a").await;
    assert_eq!(ready.readiness, Some(Readiness::Ready));
    let mut id_a = a.id().clone();
    id_a.namespace = Some("shop".to_owned());
    assert_eq!(watcher.current(&id_a), Some(Readiness::Ready));

    c.delete(
        &Batch::new(scope).with_resource(a.clone()),
        Propagation::Background,
    )
    .await
    .unwrap();
    let gone = next_for(&mut rx, "a").await;
    assert_eq!(gone.readiness, None);
    assert_eq!(watcher.current(&id_a), None);

    // Everything received was about labelled objects.
    while let Ok(change) = rx.try_recv() {
        assert_ne!(change.id.name, "foreign");
    }
}

#[tokio::test]
async fn unknown_kinds_cannot_be_watched() {
    let fleet = Fleet::start(FleetConfig::default()).await.unwrap();
    let pool = KubePool::new();
    let c = pool
        .connector("c1", &fleet.kubeconfig("c1").unwrap())
        .await
        .unwrap();
    let watcher = ClusterWatcher::new(c, 4);
    let id = Resource::from_yaml("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
        .unwrap();
    let e = watcher.watch(id.id()).await.unwrap_err();
    assert_eq!(e.kind(), emco_core::ErrorKind::NotFound);
    assert_eq!(watcher.watch_count(), 0);
}

#[path = "common/gate.rs"]
mod gate;

#[tokio::test]
async fn credentials_limited_to_namespaces_are_watched_per_namespace() {
    use emco_rsync::connector::kube::KubeConnector;
    use emco_rsync::connector::{WatchHealth, Watched};

    let fleet = Fleet::start(FleetConfig {
        ready_delay: Duration::from_millis(100),
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    // Deployments may not be listed across namespaces (a namespaced Role); ConfigMaps may.
    let gate = gate::GateLayer {
        forbidden: std::sync::Arc::new(vec!["/apis/apps/v1/deployments".to_owned()]),
        ..gate::GateLayer::default()
    };
    let client = gate::client(&fleet.kubeconfig("c1").unwrap(), &gate).await;
    let c = KubeConnector::from_client("c1", client);
    let watcher = c.watcher();
    assert!(
        std::sync::Arc::ptr_eq(&watcher, &c.watcher()),
        "one watcher per connector"
    );

    let web = deployment("web");
    let config =
        Resource::from_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n").unwrap();
    let mut keyed = Vec::new();
    for ns in ["a", "b"] {
        let namespace = Resource::from_yaml(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
        ))
        .unwrap();
        let scope = Scope::new("12", "web").with_namespace(ns);
        c.apply(&Batch::new(scope.clone()).with_resource(namespace))
            .await
            .unwrap();
        c.apply(
            &Batch::new(scope)
                .with_resource(web.clone())
                .with_resource(config.clone()),
        )
        .await
        .unwrap();
        let k = watcher.watch_in(ns, web.id()).await.unwrap();
        assert_eq!(k.namespace.as_deref(), Some(ns));
        keyed.push(k);
        watcher.watch_in(ns, config.id()).await.unwrap();
    }
    watcher.watch_in("a", web.id()).await.unwrap();
    assert_eq!(
        watcher.watch_count(),
        3,
        "Deployments in a and in b, ConfigMaps across namespaces"
    );
    for k in &keyed {
        for _ in 0..600 {
            if watcher.watched(k) == Watched::Seen(Readiness::Ready) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(watcher.watched(k), Watched::Seen(Readiness::Ready), "{k}");
        assert_eq!(watcher.health(k), Some(WatchHealth::Synced));
    }
    // A listed namespace without the object: known absent, not unknown.
    let mut missing = keyed[0].clone();
    missing.name = "missing".to_owned();
    assert_eq!(watcher.watched(&missing), Watched::Absent);
    // In a namespace nobody watches, nothing is known.
    missing.namespace = Some("c".to_owned());
    assert!(matches!(watcher.watched(&missing), Watched::Unknown(_)));
}
