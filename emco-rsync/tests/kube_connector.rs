//! The Kubernetes connector against kubesim clusters: TLS, bearer token and CA from the
//! kubeconfig, server-side apply, discovery of CRD kinds, delete, readiness and faults.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::sync::Arc;
use std::time::Duration;

use emco_core::ErrorKind;
use emco_rsync::connector::kube::{KubeConnector, KubePool};
use emco_rsync::connector::{Batch, Connector, DEPLOYMENT_ID_LABEL, Propagation, Resource, Scope};
use emco_rsync::readiness::{Readiness, readiness};
use kubesim::{Fault, Fleet, FleetConfig};
use serde_json::Value;

async fn fleet(clusters: usize) -> Fleet {
    Fleet::start(FleetConfig {
        clusters,
        ready_delay: Duration::from_millis(200),
        ..FleetConfig::default()
    })
    .await
    .unwrap()
}

async fn connector(pool: &KubePool, fleet: &Fleet, cluster: &str) -> Arc<KubeConnector> {
    pool.connector(cluster, &fleet.kubeconfig(cluster).unwrap())
        .await
        .unwrap()
}

fn res(yaml: &str) -> Resource {
    Resource::from_yaml(yaml).unwrap()
}

const NAMESPACE: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n";
const CONFIG: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n";
const DEPLOYMENT: &str = "
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
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

/// Polls the object until it is ready; the deadline only bounds a hang, it measures nothing.
async fn wait_ready(c: &KubeConnector, scope: &Scope, r: &Resource) -> Value {
    for _ in 0..200 {
        if let Some(obj) = c.get(scope, r.id()).await.unwrap()
            && readiness(&obj) == Readiness::Ready
        {
            return obj;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never became ready", r.id());
}

#[tokio::test]
async fn apply_get_and_delete_a_batch() {
    let fleet = fleet(1).await;
    let pool = KubePool::new();
    let c = connector(&pool, &fleet, "c1").await;
    c.health().await.unwrap();

    let scope = Scope::new("1001", "web").with_namespace("shop");
    let batch = Batch::new(scope.clone())
        .with_resource(res(NAMESPACE))
        .with_resource(res(CONFIG))
        .with_resource(res(DEPLOYMENT));
    c.apply(&batch).await.unwrap();
    // Applying the same batch again is harmless (server-side apply is idempotent).
    c.apply(&batch).await.unwrap();

    let cm = c
        .get(&scope, batch.resources[1].id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        cm["metadata"]["namespace"], "shop",
        "namespace defaulted from the scope"
    );
    assert_eq!(cm["metadata"]["labels"][DEPLOYMENT_ID_LABEL], "1001-web");
    assert_eq!(cm["data"]["color"], "blue");
    let ns = c
        .get(&scope, batch.resources[0].id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ns["metadata"]["labels"][DEPLOYMENT_ID_LABEL], "1001-web");

    let deploy = wait_ready(&c, &scope, &batch.resources[2]).await;
    assert_eq!(
        deploy["spec"]["template"]["metadata"]["labels"][DEPLOYMENT_ID_LABEL],
        "1001-web"
    );
    assert_eq!(
        deploy["spec"]["template"]["metadata"]["labels"]["app"],
        "web"
    );

    // An update goes through the same apply.
    let changed = Batch::new(scope.clone()).with_resource(res(&CONFIG.replace("blue", "green")));
    c.apply(&changed).await.unwrap();
    let cm = c
        .get(&scope, batch.resources[1].id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cm["data"]["color"], "green");

    let to_delete = Batch::new(scope.clone())
        .with_resource(res(DEPLOYMENT))
        .with_resource(res(CONFIG));
    c.delete(&to_delete, Propagation::Background).await.unwrap();
    assert_eq!(c.get(&scope, batch.resources[1].id()).await.unwrap(), None);
    // Deleting what is gone succeeds.
    c.delete(&to_delete, Propagation::Foreground).await.unwrap();
}

#[tokio::test]
async fn kinds_of_a_crd_applied_since_are_discovered() {
    let fleet = fleet(1).await;
    let pool = KubePool::new();
    let c = connector(&pool, &fleet, "c1").await;
    let scope = Scope::new("7", "widgets");
    let widget =
        res("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n");

    // Unknown before the CRD exists: the batch stops at it with NotFound.
    let e = c
        .apply(
            &Batch::new(scope.clone())
                .with_resource(res(CONFIG))
                .with_resource(widget.clone()),
        )
        .await
        .unwrap_err();
    assert_eq!((e.done, e.error.kind()), (1, ErrorKind::NotFound), "{e}");
    assert_eq!(
        c.get(&scope, widget.id()).await.unwrap(),
        None,
        "an unserved kind has no objects"
    );

    let crd = res("
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
");
    c.apply(&Batch::new(scope.clone()).with_resource(crd.clone()))
        .await
        .unwrap();
    wait_ready(&c, &scope, &crd).await;
    c.apply(&Batch::new(scope.clone()).with_resource(widget.clone()))
        .await
        .unwrap();
    let got = c.get(&scope, widget.id()).await.unwrap().unwrap();
    assert_eq!(got["spec"]["size"], 3);
    assert_eq!(got["metadata"]["namespace"], "default");
    assert_eq!(got["metadata"]["labels"][DEPLOYMENT_ID_LABEL], "7-widgets");
}

#[tokio::test]
async fn rejected_manifests_are_not_retryable() {
    let fleet = fleet(1).await;
    let pool = KubePool::new();
    let c = connector(&pool, &fleet, "c1").await;
    let scope = Scope::new("3", "bad");
    // Names must be lowercase RFC 1123 subdomains.
    let bad = res("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n");
    let batch = Batch::new(scope)
        .with_resource(res(CONFIG))
        .with_resource(bad);
    let e = c.apply(&batch).await.unwrap_err();
    assert_eq!(
        (e.done, e.error.kind()),
        (1, ErrorKind::InvalidArgument),
        "{e}"
    );
}

#[tokio::test]
async fn faults_are_unavailable_and_clusters_are_independent() {
    let fleet = fleet(2).await;
    let pool = KubePool::new();
    let c1 = connector(&pool, &fleet, "c1").await;
    let c2 = connector(&pool, &fleet, "c2").await;
    assert_eq!(pool.len(), 2);
    let batch = Batch::new(Scope::new("5", "app")).with_resource(res(CONFIG));

    fleet.set_fault("c1", Fault::down()).unwrap();
    assert_eq!(
        c1.health().await.unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    let e = c1.apply(&batch).await.unwrap_err();
    assert_eq!((e.done, e.error.kind()), (0, ErrorKind::Unavailable));
    c2.apply(&batch).await.unwrap();

    fleet.set_fault("c2", Fault::errors(1.0, 503)).unwrap();
    assert_eq!(
        c2.get(&batch.scope, batch.resources[0].id())
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Unavailable
    );
    fleet.set_fault("c2", Fault::errors(1.0, 429)).unwrap();
    assert_eq!(
        c2.delete(&batch, Propagation::Background)
            .await
            .unwrap_err()
            .error
            .kind(),
        ErrorKind::Unavailable
    );

    // Healed clusters work again with the same pooled connectors.
    fleet.set_fault("c1", Fault::none()).unwrap();
    fleet.set_fault("c2", Fault::none()).unwrap();
    c1.apply(&batch).await.unwrap();
    c2.delete(&batch, Propagation::Background).await.unwrap();
    assert_eq!(
        c2.get(&batch.scope, batch.resources[0].id()).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn a_cluster_that_never_answers_times_out_as_unavailable() {
    let fleet = fleet(1).await;
    let pool = KubePool::new().with_request_timeout(Duration::from_millis(300));
    let c = connector(&pool, &fleet, "c1").await;
    c.health().await.unwrap();
    fleet.set_fault("c1", Fault::black_hole()).unwrap();
    assert_eq!(c.health().await.unwrap_err().kind(), ErrorKind::Unavailable);
    let batch = Batch::new(Scope::new("5", "app")).with_resource(res(CONFIG));
    let e = c.apply(&batch).await.unwrap_err();
    assert_eq!((e.done, e.error.kind()), (0, ErrorKind::Unavailable), "{e}");
    assert_eq!(
        c.get(&batch.scope, batch.resources[0].id())
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Unavailable
    );
}

#[tokio::test]
async fn wrong_token_is_rejected_not_retried() {
    let fleet = fleet(1).await;
    let kubeconfig = fleet.kubeconfig("c1").unwrap();
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .map(|t| t.trim().trim_matches('"').to_owned())
        .unwrap();
    let wrong = kubeconfig.replace(&token, "wrong-token");
    assert_ne!(wrong, kubeconfig);
    let c = KubeConnector::from_kubeconfig("c1", &wrong).await.unwrap();
    assert_eq!(
        c.health().await.unwrap_err().kind(),
        ErrorKind::FailedPrecondition
    );
}

/// Server-side apply refuses a field the kind lacks (a chart's `spec.replicas` on a DaemonSet)
/// whatever `fieldValidation` says, where `kubectl apply` drops it with a warning: the connector
/// drops it too and reports it.
#[tokio::test]
async fn fields_the_schema_lacks_are_dropped_and_reported() {
    let fleet = fleet(1).await;
    let pool = KubePool::new();
    let c = connector(&pool, &fleet, "c1").await;
    let scope = Scope::new("1003", "collectd").with_namespace("default");
    let ds = res("
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ds1
spec:
  replicas: 2
  selector:
    matchLabels: {app: ds1}
  template:
    metadata:
      labels: {app: ds1}
    spec:
      containers:
      - name: c
        image: nginx
        foo: 1
        ports:
        - {containerPort: 80, bar: 1}
      volumes:
      - name: v
        configMap: {name: cm, defaultMode: 0744}
");
    let batch = Batch::new(scope.clone()).with_resource(ds);
    let warnings = c.apply(&batch).await.unwrap();
    let dropped = |p: &str| (0, format!("{p}: field not declared in schema; dropped"));
    // The server stops reading a map at its first undeclared field, so each answer names the
    // next one; the port's key includes the protocol the server defaults.
    let container = ".spec.template.spec.containers[name=\"c\"]";
    assert_eq!(
        warnings,
        [
            dropped(".spec.replicas"),
            dropped(&format!("{container}.foo")),
            dropped(&format!(
                "{container}.ports[containerPort=80,protocol=\"TCP\"].bar"
            )),
        ]
    );
    let live = c
        .get(&scope, batch.resources[0].id())
        .await
        .unwrap()
        .unwrap();
    assert!(live["spec"].get("replicas").is_none());
    assert_eq!(
        live["spec"]["template"]["spec"]["volumes"][0]["configMap"]["defaultMode"],
        484
    );
}

/// kubesim's shared port: every cluster on one listener under `/clusters/<name>` (the path is
/// part of each kubeconfig's server URL): the connector reaches each cluster through its path,
/// the clusters keep separate objects, and a cluster's faults stay its own.
#[tokio::test]
async fn clusters_on_one_shared_port_are_separate_and_fail_alone() {
    let fleet = Fleet::start(FleetConfig {
        clusters: 3,
        ready_delay: Duration::from_millis(200),
        shared_port: true,
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let urls: Vec<String> = ["c1", "c2", "c3"]
        .iter()
        .map(|c| fleet.server_url(c).unwrap())
        .collect();
    let port = urls[0].trim_end_matches("/clusters/c1");
    for (url, c) in urls.iter().zip(["c1", "c2", "c3"]) {
        assert_eq!(url, &format!("{port}/clusters/{c}"));
    }
    let pool = KubePool::new().with_request_timeout(Duration::from_millis(500));
    let c1 = connector(&pool, &fleet, "c1").await;
    let c2 = connector(&pool, &fleet, "c2").await;
    let c3 = connector(&pool, &fleet, "c3").await;
    // One CA for the fleet: the three clusters' requests share one pool of connections.
    assert_eq!(pool.shared_transports(), 1);
    let scope = Scope::new("7", "web");
    let batch = Batch::new(scope.clone())
        .with_resource(res(CONFIG))
        .with_resource(res(DEPLOYMENT));
    c1.apply(&batch).await.unwrap();
    wait_ready(&c1, &scope, &batch.resources[1]).await;
    assert_eq!(c2.get(&scope, batch.resources[0].id()).await.unwrap(), None);

    fleet.set_fault("c2", Fault::down()).unwrap();
    fleet.set_fault("c3", Fault::black_hole()).unwrap();
    assert_eq!(
        c2.health().await.unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    assert_eq!(
        c3.health().await.unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    c1.delete(&batch, Propagation::Background).await.unwrap();

    fleet.set_fault("c2", Fault::none()).unwrap();
    fleet.set_fault("c3", Fault::none()).unwrap();
    c2.apply(&batch).await.unwrap();
    c3.health().await.unwrap();
    assert!(
        c2.get(&scope, batch.resources[0].id())
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(c1.get(&scope, batch.resources[0].id()).await.unwrap(), None);
    fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Applies a Deployment, a Service, a ConfigMap, a Secret and a ServiceAccount to `c` and
/// watches each kind, as a realistic app's readiness does; returns once every watch has listed.
async fn deploy_five_kinds(c: &Arc<KubeConnector>) {
    let scope = Scope::new("5", "mix");
    let kinds = [
        DEPLOYMENT,
        CONFIG,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n  - port: 80\n",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  user: u\n",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: web\n",
    ];
    let mut batch = Batch::new(scope);
    for k in kinds {
        batch = batch.with_resource(res(k));
    }
    c.apply(&batch).await.unwrap();
    let watcher = c.watcher();
    for r in &batch.resources {
        watcher.watch(r.id()).await.unwrap();
    }
    let ids: Vec<_> = batch
        .resources
        .iter()
        .map(|r| {
            let mut id = r.id().clone();
            id.namespace = Some("default".to_owned());
            id
        })
        .collect();
    for _ in 0..200 {
        if ids.iter().all(|id| watcher.current(id).is_some()) {
            assert_eq!(watcher.watch_count(), 5);
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the watches of {} never listed", c.cluster());
}

/// HTTP/2 (kube-apiserver offers it, and kubesim too): a cluster's requests and watches share
/// one connection however many kinds it watches, and clusters behind one address share
/// connections up to the server's 100 streams each. Over HTTP/1.1 each watch held a
/// connection of its own: 5 kinds on 3 clusters were 15 descriptors, 24 clusters 120.
#[tokio::test]
async fn watches_and_requests_of_a_cluster_share_one_connection() {
    use emco_rsync::connector::kube::{Budget, MAX_STREAMS};
    // A cluster per port: one connection each.
    let fleet = fleet(3).await;
    let budget = Arc::new(Budget::new(1_000));
    let pool = KubePool::new().with_connection_budget(Arc::clone(&budget));
    for name in ["c1", "c2", "c3"] {
        deploy_five_kinds(&connector(&pool, &fleet, name).await).await;
    }
    assert_eq!(budget.open(), 3, "one connection per cluster");

    // 24 clusters on one shared port: 120 watches, more than one connection's 100 streams.
    let shared = Fleet::start(FleetConfig {
        clusters: 24,
        shared_port: true,
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let budget = Arc::new(Budget::new(1_000));
    let pool = KubePool::new().with_connection_budget(Arc::clone(&budget));
    let mut all = Vec::new();
    for name in shared.cluster_names() {
        let c = connector(&pool, &shared, &name).await;
        all.push(tokio::spawn(async move { deploy_five_kinds(&c).await }));
    }
    for t in all {
        t.await.unwrap();
    }
    let watches = 24 * 5;
    assert!(watches > MAX_STREAMS);
    let open = budget.open();
    assert!(
        (2..=3).contains(&open),
        "{watches} watches and the requests beside them on {open} connections"
    );
    // Requests still go through beside the watches that fill the connections.
    let c = connector(&pool, &shared, "c24").await;
    let got = c
        .get(&Scope::new("5", "mix"), res(CONFIG).id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got["data"]["color"], "blue");
}

/// Plain HTTP (no TLS handshake to offer HTTP/2 in): pooled HTTP/1.1 connections, as before.
#[tokio::test]
async fn plain_http_clusters_are_reached_over_http1() {
    let fleet = Fleet::start(FleetConfig {
        plain_http: true,
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let pool = KubePool::new();
    let c = connector(&pool, &fleet, "c1").await;
    deploy_five_kinds(&c).await;
}
