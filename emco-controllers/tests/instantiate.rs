//! Controllers called by the orchestrator during real instantiates and updates against kubesim
//! clusters: an SDK controller over gRPC (working on the AppContexts through the AppContext gRPC
//! service) and in-process, failing and unreachable controllers, gac, hpa, and the example
//! label and avoid controllers.

#![allow(clippy::unwrap_used, missing_docs)] // Test helpers fail the test on bad fixtures.

#[allow(dead_code)]
#[path = "../../emco/examples/label_controller.rs"]
mod example;

#[allow(dead_code)]
#[path = "../../emco/examples/avoid_controller.rs"]
mod avoid;

use emco_core::ContextId;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use bytes::Bytes;
use emco_appcontext::AppContext;
use emco_appcontext::keys::Keyed;
use emco_controller_sdk::intent::IntentType;
use emco_controller_sdk::remote::{AppContextService, RemoteAppContextStore};
use emco_controller_sdk::{
    ActionController, ControllerContext, ControllerRegistry, Server, set_field,
};
use emco_controllers::gac::{Customization, Gac, GacResource, GenericK8sIntent};
use emco_controllers::hpa::{HpaAction, HpaConsumer, HpaIntent, HpaPlacement, HpaRequirement};
use emco_core::lifecycle::{AppContextStatus, DigState};
use emco_core::model::{
    App, AppProfile, AppProfileSpec, ClusterReference, ClusterReferenceSpec, CompositeApp,
    CompositeAppSpec, CompositeProfile, DeploymentIntentGroup, DeploymentIntentGroupSpec,
    DigIntent, DigIntentSpec, GenericPlacementIntent, KvPair, KvPairSpec, LogicalCloud,
    LogicalCloudSpec,
};
use emco_core::placement::{AppPlacementIntent, AppPlacementSpec, PlacementIntent};
use emco_core::{DigRef, Error, LogicalCloudRef, Metadata};
use emco_orchestrator::{Orchestrator, keys, rest};
use emco_rsync::connector::kube::KubePool;
use emco_rsync::connector::{Connector, DEPLOYMENT_ID_LABEL, Resource, Scope};
use emco_store::ResourceKey;
use http::{Request, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const PROJECT: &str = "p1";
use emco_testkit::PROVIDER;
const CA: &str = "shop";
const APP: &str = "web";
/// Bounds every wait; a healthy run takes a fraction of it.
const DEADLINE: Duration = Duration::from_secs(90);

/// The chart of app `web`: a Deployment, a Service and a ConfigMap, all named literally.
const CHART: &[(&str, &str)] = &[
    (
        "Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 0.1.0\nappVersion: \"1.0\"\n",
    ),
    ("values.yaml", "replicas: 1\n"),
    (
        "templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n",
    ),
    (
        "templates/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector:\n    app: web\n  ports:\n    - port: 80\n",
    ),
    (
        "templates/configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-cfg\ndata:\n  app.json: '{\"a\":1}'\n",
    ),
];

const PROFILE: &[(&str, &str)] = &[
    (
        "manifest.yaml",
        "---\nversion: v1\ntype:\n  values: \"override_values.yaml\"\n",
    ),
    ("override_values.yaml", "replicas: 1\n"),
];

/// A gzip'd tar of `files` under the directory `top`.
/// A gzip'd tar of `files` under the directory `top`.
fn tgz(top: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let files: Vec<(String, &str)> = files
        .iter()
        .map(|(p, t)| (format!("{top}/{p}"), *t))
        .collect();
    emco_helm::archive::pack_files(&files).unwrap()
}

fn meta(name: &str) -> Metadata {
    Metadata::named(name)
}

/// An action controller labelling every Deployment `<label>: <intent name>` and recording its
/// calls (`update <context> from <replaced context>`, `terminate <context>`).
struct Stamp {
    label: &'static str,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Stamp {
    fn new(label: &'static str) -> Self {
        Self {
            label,
            calls: Arc::default(),
        }
    }
}

#[async_trait]
impl ActionController for Stamp {
    async fn update(&self, cx: &mut ControllerContext) -> emco_core::Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("update {} from {:?}", cx.id(), cx.update_from()));
        let intent = cx.intent_name().unwrap_or_default().to_owned();
        for app in cx.apps().await? {
            for cluster in cx.clusters(&app).await? {
                for (name, mut obj) in cx.resources(&app, &cluster).await? {
                    if obj["kind"] == "Deployment" {
                        set_field(
                            &mut obj,
                            &["metadata", "labels", self.label],
                            intent.clone().into(),
                        )?;
                        cx.put_resource(&app, &cluster, &name, obj).await?;
                    }
                }
            }
        }
        Ok(())
    }

    async fn terminate(&self, cx: &mut ControllerContext) -> emco_core::Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("terminate {}", cx.id()));
        Ok(())
    }
}

/// An action controller refusing every context.
struct Refuser;

#[async_trait]
impl ActionController for Refuser {
    async fn update(&self, _: &mut ControllerContext) -> emco_core::Result<()> {
        Err(Error::invalid("quota exceeded for this intent"))
    }
}

/// kubesim clusters `c1..c3` registered as `edge+c1..3` (labels: c1 and c2 `edge`, c3
/// `core`), an orchestrator over them, a logical cloud `lc` over all three and the composite
/// app `shop` with app `web`.
struct World {
    w: emco_testkit::World,
    pool: KubePool,
    /// Stops the gRPC servers the test started.
    servers: CancellationToken,
}

impl std::ops::Deref for World {
    type Target = emco_testkit::World;
    fn deref(&self) -> &emco_testkit::World {
        &self.w
    }
}

impl World {
    async fn start(
        registry: impl FnOnce(ControllerRegistry) -> ControllerRegistry + Send + 'static,
    ) -> Self {
        let w = emco_testkit::World::builder()
            .project(PROJECT)
            .labels(|name| vec![if name == "c3" { "core" } else { "edge" }.to_owned()])
            .controllers(registry)
            .start()
            .await;
        let world = Self {
            w,
            pool: KubePool::new(),
            servers: CancellationToken::new(),
        };
        world.onboard().await;
        world
    }

    /// A world where dtc runs with `sub` in-process, registered in `/v2/dtc-controllers` as
    /// `name` (at a port nobody serves, as in EMCO's files) with `priority`.
    async fn start_dtc(
        name: &'static str,
        sub: Arc<dyn ActionController>,
        port: u16,
        priority: i64,
    ) -> Self {
        use emco_controllers::dtc::{DTC_CONTROLLER, Dtc, DtcController};
        use emco_rest::Collection;
        let w = Self::start(move |r| {
            let dtc = Dtc::new().with_sub(name, sub);
            r.with_action("dtc", Arc::new(dtc))
        })
        .await;
        w.register("dtc", dead_port().await, "action", 1).await;
        let record: DtcController = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"host": format!("{name}.invalid"), "port": port, "type": "action",
                "priority": priority}}))
        .unwrap();
        Collection::<DtcController>::new(Arc::clone(w.orch.store()), DTC_CONTROLLER)
            .create(&ResourceKey::root(), &record)
            .await
            .unwrap();
        w
    }

    async fn onboard(&self) {
        let o = &self.orch;
        let lc = LogicalCloud {
            metadata: meta("lc"),
            spec: LogicalCloudSpec {
                level: "0".into(),
                // What sfc's client selectors match namespaces by.
                labels: Some(BTreeMap::from([("sfc".to_owned(), "head".to_owned())])),
                ..LogicalCloudSpec::default()
            },
        };
        o.onboarding()
            .logical_clouds()
            .create(&keys::project(PROJECT), &lc)
            .await
            .unwrap();
        for c in ["c1", "c2", "c3"] {
            let r = ClusterReference {
                metadata: meta(&format!("lc-{c}")),
                spec: ClusterReferenceSpec {
                    cluster_provider: PROVIDER.into(),
                    cluster: c.into(),
                    ..ClusterReferenceSpec::default()
                },
            };
            o.onboarding()
                .cluster_references()
                .create(&keys::logical_cloud(PROJECT, "lc"), &r)
                .await
                .unwrap();
        }
        o.clouds()
            .instantiate(&LogicalCloudRef::new(PROJECT, "lc"))
            .await
            .unwrap();

        o.onboarding()
            .create_composite_app(
                PROJECT,
                &CompositeApp {
                    metadata: meta(CA),
                    spec: CompositeAppSpec {
                        composite_app_version: "v1".into(),
                    },
                },
            )
            .await
            .unwrap();
        let ca = keys::composite_app(PROJECT, CA, "v1");
        let chart = self.file("chart.tgz", &tgz(APP, CHART));
        o.onboarding()
            .create_app(
                &ca,
                &App {
                    metadata: meta(APP),
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
                    metadata: meta("cp"),
                },
            )
            .await
            .unwrap();
        let profile = self.file("profile.tgz", &tgz("profile", PROFILE));
        o.onboarding()
            .create_app_profile(
                &ca.child(keys::COMPOSITE_PROFILE, "cp"),
                &AppProfile {
                    metadata: meta("web-profile"),
                    spec: AppProfileSpec { app: APP.into() },
                },
                &profile,
            )
            .await
            .unwrap();
    }

    /// Registers controller `name` at `addr` (`kind` action or placement) with
    /// `POST /v2/controllers`.
    async fn register(&self, name: &str, addr: SocketAddr, kind: &str, priority: i64) {
        let body = json!({"metadata": {"name": name}, "spec": {"host": addr.ip().to_string(),
            "port": addr.port(), "type": kind, "priority": priority}});
        let answer = rest::router(self.orch.clone())
            .oneshot(
                Request::post("/v2/controllers")
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string()))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::CREATED, "registering {name}");
    }

    /// Serves `controller` over gRPC on a loopback port (working on the AppContexts through
    /// the orchestrator's AppContext gRPC service, on `ac`) and registers it as `name`.
    async fn serve_remote(&self, name: &str, controller: Arc<dyn ActionController>, ac: &str) {
        let contexts = Arc::new(RemoteAppContextStore::connect_lazy(ac).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = Server::builder(contexts)
            .name(name)
            .resources(Arc::clone(self.orch.store()))
            .action_arc(controller);
        let stop = self.servers.clone();
        tokio::spawn(async move {
            server
                .serve_with_listener(listener, stop.cancelled_owned())
                .await
                .unwrap();
        });
        self.register(name, addr, "action", 10).await;
    }

    /// Serves the orchestrator's AppContext store over gRPC on a loopback port; its URL.
    async fn serve_contexts(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let service = AppContextService::server(Arc::clone(self.orch.contexts()));
        let stop = self.servers.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    stop.cancelled_owned(),
                )
                .await
                .unwrap();
        });
        format!("http://{addr}")
    }

    /// Deployment intent group `name` placing web by `placement`, its DIG intent naming
    /// `intents` (controller -> intent), approved.
    async fn dig(&self, name: &str, placement: Value, intents: &[(&str, &str)]) -> DigRef {
        self.dig_apps(name, &[(APP, placement)], intents).await
    }

    /// As [`Self::dig`], placing each app of `placements` by its placement.
    async fn dig_apps(
        &self,
        name: &str,
        placements: &[(&str, Value)],
        intents: &[(&str, &str)],
    ) -> DigRef {
        let o = &self.orch;
        let ca = keys::composite_app(PROJECT, CA, "v1");
        let group = DeploymentIntentGroup {
            metadata: meta(name),
            spec: DeploymentIntentGroupSpec {
                composite_profile: "cp".into(),
                version: format!("r-{name}"),
                logical_cloud: "lc".into(),
                override_values: Vec::new(),
            },
        };
        o.onboarding()
            .deployment_intent_groups()
            .create(&ca, &group)
            .await
            .unwrap();
        let dig_ref = DigRef::new(PROJECT, CA, "v1", name);
        let dig = dig_ref.key();
        o.onboarding()
            .generic_placement_intents()
            .create(
                &dig,
                &GenericPlacementIntent {
                    metadata: meta("gpi"),
                },
            )
            .await
            .unwrap();
        for (app, placement) in placements {
            let placement: PlacementIntent = serde_json::from_value(placement.clone()).unwrap();
            let api = AppPlacementIntent {
                metadata: meta(&format!("{app}-placement")),
                spec: AppPlacementSpec {
                    app: (*app).into(),
                    intent: placement,
                },
            };
            o.onboarding()
                .app_placement_intents()
                .create(&dig.child(keys::GENERIC_PLACEMENT_INTENT, "gpi"), &api)
                .await
                .unwrap();
        }
        let mut intent = BTreeMap::from([("genericPlacementIntent".to_owned(), "gpi".to_owned())]);
        for (c, i) in intents {
            intent.insert((*c).to_owned(), (*i).to_owned());
        }
        o.onboarding()
            .dig_intents()
            .create(
                &dig,
                &DigIntent {
                    metadata: meta("di"),
                    spec: DigIntentSpec { intent },
                },
            )
            .await
            .unwrap();
        o.deployments().approve(&dig_ref).await.unwrap();
        dig_ref
    }

    /// The context the group's record names as deployed.
    async fn context(&self, dig: &DigRef) -> AppContext {
        let id: ContextId = self
            .orch
            .deployments()
            .state(dig)
            .await
            .unwrap()
            .statusctxid
            .parse()
            .unwrap();
        AppContext::load(Arc::clone(self.orch.contexts()), id)
            .await
            .unwrap()
    }

    async fn state(&self, dig: &DigRef) -> DigState {
        self.orch
            .deployments()
            .state(dig)
            .await
            .unwrap()
            .current_state()
    }

    /// The object `kind`/`name` (`apiVersion` `api`) on kubesim cluster `cluster`, if any.
    async fn object(&self, cluster: &str, api: &str, kind: &str, name: &str) -> Option<Value> {
        let conn = self
            .pool
            .connector(cluster, &self.fleet.kubeconfig(cluster).unwrap())
            .await
            .unwrap();
        let yaml = format!("apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n");
        let rid = Resource::from_yaml(&yaml).unwrap().id().clone();
        conn.get(&Scope::new("0", APP), &rid).await.unwrap()
    }

    /// Applies `docs` (YAML documents separated by `---`) to kubesim cluster `cluster`, as its
    /// admin would before a deployment needs them (CRDs, namespaces).
    async fn install(&self, cluster: &str, docs: &str) {
        let conn = self
            .pool
            .connector(cluster, &self.fleet.kubeconfig(cluster).unwrap())
            .await
            .unwrap();
        let mut batch = emco_rsync::connector::Batch::new(Scope::new("setup", "admin"));
        for doc in docs.split("\n---\n") {
            batch = batch.with_resource(Resource::from_yaml(doc).unwrap());
        }
        conn.apply(&batch).await.unwrap();
    }

    /// Waits until `kind`/`name` on `cluster` was applied from context `ctx` and `check` holds
    /// for it; the object.
    async fn wait_object(
        &self,
        cluster: &str,
        (api, kind, name): (&str, &str, &str),
        ctx: &AppContext,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let label = format!("{}-{APP}", ctx.id());
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let got = self.object(cluster, api, kind, name).await;
            if let Some(obj) = &got
                && obj["metadata"]["labels"][DEPLOYMENT_ID_LABEL] == label.as_str()
                && check(obj)
            {
                return got.unwrap();
            }
            assert!(
                tokio::time::Instant::now() < end,
                "{kind}/{name} on {cluster} is {got:?}, wanted one from context {}",
                ctx.id()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until rsync has handled `ctx`: its status is neither Created (queued) nor a
    /// running one.
    async fn settled(&self, ctx: &AppContext) {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let status = ctx.status().await.unwrap();
            if status.is_some_and(|s| s != AppContextStatus::Created && !s.is_running()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "context {} stays {status:?}",
                ctx.id()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `kind`/`name` is gone from `cluster`.
    async fn wait_gone(&self, cluster: &str, (api, kind, name): (&str, &str, &str)) {
        let end = tokio::time::Instant::now() + DEADLINE;
        while let Some(obj) = self.object(cluster, api, kind, name).await {
            assert!(
                tokio::time::Instant::now() < end,
                "{kind}/{name} stays on {cluster}: {obj}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn stop(self) {
        self.servers.cancel();
        self.w.stop().await;
    }
}

const DEPLOYMENT: (&str, &str, &str) = ("apps/v1", "Deployment", "web");
const CONFIG_MAP: (&str, &str, &str) = ("v1", "ConfigMap", "web-cfg");

fn on(cluster: &str) -> Value {
    json!({"allOf": [{"clusterProvider": PROVIDER, "cluster": cluster}]})
}

/// A port nothing listens on.
async fn dead_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_controllers_over_grpc_and_in_process_and_refusals() {
    let w = World::start(|r| r.with_action("inproc", Arc::new(Stamp::new("inproc")))).await;
    let ac = w.serve_contexts().await;
    let remote = Arc::new(Stamp::new("remote"));
    w.serve_remote(
        "remote",
        Arc::clone(&remote) as Arc<dyn ActionController>,
        &ac,
    )
    .await;
    w.serve_remote("refuser", Arc::new(Refuser), &ac).await;
    w.register("inproc", dead_port().await, "action", 20).await;
    w.register("down", dead_port().await, "action", 5).await;

    // A refusing and an unreachable controller abort the instantiate, naming the controller;
    // nothing is deployed and the group stays approved.
    for (name, controller, says) in [
        ("d-refused", "refuser", "quota exceeded for this intent"),
        ("d-down", "down", "unreachable"),
    ] {
        let dig = w
            .dig(name, on("c1"), &[("remote", "blue"), (controller, "x")])
            .await;
        let e = w.orch.deployments().instantiate(&dig).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&format!("controller {controller}")), "{text}");
        assert!(text.contains(says), "{text}");
        assert_eq!(w.state(&dig).await, DigState::Approved);
    }
    assert!(
        w.object("c1", "apps/v1", "Deployment", "web")
            .await
            .is_none()
    );

    // The gRPC controller (registered host:port) and the in-process one (the registration's
    // address is not used) both change the Deployment that reaches the cluster.
    let dig = w
        .dig("d-ok", on("c1"), &[("remote", "blue"), ("inproc", "green")])
        .await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    let d = w.wait_object("c1", DEPLOYMENT, &ctx, |_| true).await;
    assert_eq!(d["metadata"]["labels"]["remote"], "blue", "{d}");
    assert_eq!(d["metadata"]["labels"]["inproc"], "green", "{d}");

    // An update: the gRPC controller sees the context it replaces and changes the new one
    // (unchanged objects are not applied again). A terminate is passed on to it.
    assert_eq!(w.orch.deployments().update(&dig).await.unwrap(), 2);
    let next = w.context(&dig).await;
    let yaml = next
        .resource(APP, "edge+c1", "web+Deployment")
        .await
        .unwrap()
        .unwrap();
    assert!(yaml.contains("remote: blue"), "{yaml}");
    // rsync drops an update still queued when a terminate of the new context arrives, which
    // leaves the first context's objects on the cluster; let the update run first.
    w.settled(&next).await;
    w.orch.deployments().terminate(&dig).await.unwrap();
    w.wait_gone("c1", DEPLOYMENT).await;
    let calls = remote.calls.lock().unwrap().clone();
    let (first, second) = (ctx.id(), next.id());
    assert_eq!(
        calls[calls.len() - 3..],
        [
            format!("update {first} from None"),
            format!("update {second} from Some({first})"),
            format!("terminate {second}"),
        ],
        "{calls:?}"
    );
    w.stop().await;
}

/// Creates `value` of intent type `T` under `parent` with its blobs.
async fn put_intent<T: IntentType>(
    o: &Orchestrator,
    parent: &ResourceKey,
    value: Value,
    blobs: &[(&str, &str)],
) -> ResourceKey {
    let v: T = serde_json::from_value(value).unwrap();
    let name = v.name().to_owned();
    T::collection(Arc::clone(o.store()))
        .put(parent, &name, &v)
        .await
        .unwrap();
    let key = parent.child(T::PARAM, name.as_str());
    for (blob, data) in blobs {
        let stream = futures::stream::iter([Ok(Bytes::from(data.to_string()))]);
        o.store()
            .put_blob(&key, blob, Box::pin(stream))
            .await
            .unwrap();
    }
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gac_patches_adds_objects_fills_data_by_scope_and_updates() {
    let w = World::start(|r| r.with_action("gac", Arc::new(Gac))).await;
    w.register("gac", dead_port().await, "action", 10).await;
    let o = &w.orch;
    let all = json!({"allOf": [
        {"clusterProvider": PROVIDER, "cluster": "c1"},
        {"clusterProvider": PROVIDER, "cluster": "c2"},
        {"clusterProvider": PROVIDER, "cluster": "c3"}]});
    let dig = w.dig("d1", all, &[("gac", "g1")]).await;
    let g1 =
        put_intent::<GenericK8sIntent>(o, &dig.key(), json!({"metadata": {"name": "g1"}}), &[])
            .await;
    let existing = |name: &str, kind: &str, api: &str, object: &str| {
        json!({"metadata": {"name": name}, "spec": {"app": APP, "newObject": "false",
            "resourceGVK": {"apiVersion": api, "kind": kind, "name": object}}})
    };
    let deploy = put_intent::<GacResource>(
        o,
        &g1,
        existing("r-deploy", "Deployment", "apps/v1", "web"),
        &[],
    )
    .await;
    let replicas = |n: u32| {
        json!({"metadata": {"name": "replicas"}, "spec": {"patchType": "json",
            "patchJson": [{"op": "replace", "path": "/spec/replicas", "value": n}]}})
    };
    put_intent::<Customization>(o, &deploy, replicas(3), &[]).await;
    // Merge patch on the clusters labelled edge only (allow), and everywhere but c1 (deny).
    put_intent::<Customization>(
        o,
        &deploy,
        json!({"metadata": {"name": "tier"}, "spec": {"clusterSpecific": "true",
            "clusterInfo": {"scope": "label", "clusterProvider": PROVIDER, "clusterLabel": "edge", "mode": "allow"},
            "patchType": "merge", "patchJson": [{"metadata": {"labels": {"tier": "edge"}}}]}}),
        &[],
    )
    .await;
    put_intent::<Customization>(
        o,
        &deploy,
        json!({"metadata": {"name": "not-c1"}, "spec": {"clusterSpecific": "true",
            "clusterInfo": {"scope": "name", "clusterProvider": PROVIDER, "cluster": "c1", "mode": "deny"},
            "patchType": "merge", "patchJson": [{"metadata": {"annotations": {"where": "not-c1"}}}]}}),
        &[],
    )
    .await;
    // ConfigMap data: a key merged into the chart's value, a key from a file.
    let cfg =
        put_intent::<GacResource>(o, &g1, existing("r-cfg", "ConfigMap", "v1", "web-cfg"), &[])
            .await;
    put_intent::<Customization>(
        o,
        &cfg,
        json!({"metadata": {"name": "data"}, "spec": {"configMapOptions": {"dataKeyOptions": [
            {"fileName": "extra.json", "keyName": "app.json", "mergePatch": "true"},
            {"fileName": "motd.txt", "keyName": "motd"}]}}}),
        &[("extra.json", "{\"b\":2}"), ("motd.txt", "hello")],
    )
    .await;
    // New objects from files: a Secret filled from a file, and a plain ConfigMap.
    let secret = put_intent::<GacResource>(
        o,
        &g1,
        json!({"metadata": {"name": "r-secret"}, "spec": {"app": APP, "newObject": "true",
            "resourceGVK": {"apiVersion": "v1", "kind": "Secret", "name": "web-secret"}}}),
        &[(
            "file",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: web-secret\ntype: Opaque\n",
        )],
    )
    .await;
    put_intent::<Customization>(
        o,
        &secret,
        json!({"metadata": {"name": "token"}, "spec": {"secretOptions": {"dataKeyOptions": [
            {"fileName": "token.txt", "keyName": "token"}]}}}),
        &[("token.txt", "s3cret")],
    )
    .await;
    put_intent::<GacResource>(
        o,
        &g1,
        json!({"metadata": {"name": "r-extra"}, "spec": {"app": APP, "newObject": "true",
            "resourceGVK": {"apiVersion": "v1", "kind": "ConfigMap", "name": "extra"}}}),
        &[(
            "file",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  k: v\n",
        )],
    )
    .await;

    o.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    for cluster in ["c1", "c2", "c3"] {
        let d = w.wait_object(cluster, DEPLOYMENT, &ctx, |_| true).await;
        assert_eq!(d["spec"]["replicas"], 3, "{cluster}: {d}");
        let tier = d["metadata"]["labels"]["tier"].as_str();
        assert_eq!(tier, (cluster != "c3").then_some("edge"), "{cluster}: {d}");
        let note = d["metadata"]["annotations"]["where"].as_str();
        assert_eq!(
            note,
            (cluster != "c1").then_some("not-c1"),
            "{cluster}: {d}"
        );

        let cm = w.wait_object(cluster, CONFIG_MAP, &ctx, |_| true).await;
        let app_json: Value =
            serde_json::from_str(cm["data"]["app.json"].as_str().unwrap()).unwrap();
        assert_eq!(app_json, json!({"a": 1, "b": 2}), "{cluster}: {cm}");
        assert_eq!(cm["data"]["motd"], "hello", "{cluster}: {cm}");

        let s = w
            .wait_object(cluster, ("v1", "Secret", "web-secret"), &ctx, |_| true)
            .await;
        assert_eq!(s["data"]["token"], "czNjcmV0", "{cluster}: {s}");
        let e = w
            .wait_object(cluster, ("v1", "ConfigMap", "extra"), &ctx, |_| true)
            .await;
        assert_eq!(e["data"]["k"], "v", "{cluster}: {e}");
    }

    // A changed customization reaches the clusters with the DIG update.
    put_intent::<Customization>(o, &deploy, replicas(5), &[]).await;
    assert_eq!(o.deployments().update(&dig).await.unwrap(), 2);
    let ctx = w.context(&dig).await;
    for cluster in ["c1", "c2", "c3"] {
        w.wait_object(cluster, DEPLOYMENT, &ctx, |d| d["spec"]["replicas"] == 5)
            .await;
    }
    w.stop().await;
}

/// Sets the kv-pairs of cluster `cluster`.
async fn kv(o: &Orchestrator, cluster: &str, pairs: Value) {
    let pair = KvPair {
        metadata: meta("hw"),
        spec: KvPairSpec {
            kv: vec![serde_json::from_value(pairs).unwrap()],
        },
    };
    o.onboarding()
        .kv_pairs()
        .create(&keys::cluster(PROVIDER, cluster), &pair)
        .await
        .unwrap();
}

/// hpa intent `name` for web: one consumer (the Deployment's container) with `requirements`.
async fn hpa_intent(o: &Orchestrator, dig: &ResourceKey, name: &str, requirements: &[Value]) {
    let intent = put_intent::<HpaIntent>(
        o,
        dig,
        json!({"metadata": {"name": name}, "spec": {"app": APP}}),
        &[],
    )
    .await;
    let consumer = put_intent::<HpaConsumer>(
        o,
        &intent,
        json!({"metadata": {"name": "web"}, "spec": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "container": "web"}}),
        &[],
    )
    .await;
    for r in requirements {
        put_intent::<HpaRequirement>(o, &consumer, r.clone(), &[]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_places_on_clusters_meeting_the_requirements() {
    let w = World::start(|r| {
        r.with_placement(
            "hpa-placement",
            Arc::new(HpaPlacement {
                name: "hpa-placement".into(),
            }),
        )
        .with_action("hpa-action", Arc::new(HpaAction))
    })
    .await;
    let addr = dead_port().await;
    w.register("hpa-placement", addr, "placement", 1).await;
    w.register("hpa-action", addr, "action", 1).await;
    let o = &w.orch;
    kv(o, "c1", json!({"cpu": 2})).await;
    kv(o, "c2", json!({"cpu": "8"})).await;
    kv(
        o,
        "c3",
        json!({"cpu": 16, "feature.node.kubernetes.io/intel_qat": "true"}),
    )
    .await;
    let cpu = |n: u32| {
        json!({"metadata": {"name": "cpu"}, "spec": {"allocatable": true, "mandatory": true,
            "resource": {"name": "cpu", "requests": n, "limits": n}}})
    };
    let qat = json!({"metadata": {"name": "qat"}, "spec": {"allocatable": false, "mandatory": false,
        "weight": 10, "resource": {"key": "feature.node.kubernetes.io/intel_qat", "value": "true"}}});
    let intents = [("hpa-placement", "h"), ("hpa-action", "h")];

    // allOf every cluster, at least 4 cpus: c1 is dropped; the action sets the requests.
    let all = json!({"allOf": [{"clusterProvider": PROVIDER, "clusterLabel": "edge"},
        {"clusterProvider": PROVIDER, "clusterLabel": "core"}]});
    let d1 = w.dig("d1", all, &intents).await;
    hpa_intent(o, &d1.key(), "h", &[cpu(4)]).await;
    o.deployments().instantiate(&d1).await.unwrap();
    let ctx = w.context(&d1).await;
    assert_eq!(ctx.clusters(APP).await.unwrap(), ["edge+c2", "edge+c3"]);
    for cluster in ["c2", "c3"] {
        let d = w.wait_object(cluster, DEPLOYMENT, &ctx, |_| true).await;
        let res = &d["spec"]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(res["requests"]["cpu"], "4", "{d}");
        assert_eq!(res["limits"]["cpu"], "4", "{d}");
    }
    assert!(
        w.object("c1", "apps/v1", "Deployment", "web")
            .await
            .is_none()
    );
    o.deployments().terminate(&d1).await.unwrap();
    for cluster in ["c2", "c3"] {
        w.wait_gone(cluster, DEPLOYMENT).await;
    }

    // More than any cluster has: nothing is placed, naming the app.
    let any = json!({"anyOf": [{"clusterProvider": PROVIDER, "clusterLabel": "edge"},
        {"clusterProvider": PROVIDER, "clusterLabel": "core"}]});
    let d2 = w.dig("d2", any.clone(), &intents).await;
    hpa_intent(o, &d2.key(), "h", &[cpu(64)]).await;
    let e = o.deployments().instantiate(&d2).await.unwrap_err();
    assert!(e.to_string().contains("app web"), "{e}");

    // anyOf: c1 fails the mandatory requirement, the first survivor (c2) is kept.
    let d3 = w.dig("d3", any.clone(), &intents).await;
    hpa_intent(o, &d3.key(), "h", &[cpu(4)]).await;
    o.deployments().instantiate(&d3).await.unwrap();
    let ctx3 = w.context(&d3).await;
    assert_eq!(ctx3.clusters(APP).await.unwrap(), ["edge+c2"]);
    w.wait_object("c2", DEPLOYMENT, &ctx3, |_| true).await;

    // An optional requirement's weight ranks the survivors: c3 has qat.
    let d4 = w.dig("d4", any, &intents).await;
    hpa_intent(o, &d4.key(), "h", &[cpu(4), qat]).await;
    o.deployments().instantiate(&d4).await.unwrap();
    let ctx4 = w.context(&d4).await;
    assert_eq!(ctx4.clusters(APP).await.unwrap(), ["edge+c3"]);
    w.wait_object("c3", DEPLOYMENT, &ctx4, |_| true).await;
    w.stop().await;
}

/// Serves an example controller as its main does (the builder `serving` makes, over gRPC, on
/// the orchestrator's stores) and registers it as `name` of `kind`.
async fn serve_example(
    w: &World,
    name: &str,
    kind: &str,
    serving: impl FnOnce(emco_controller_sdk::ServerBuilder) -> emco_controller_sdk::ServerBuilder,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = serving(
        Server::builder(Arc::clone(w.orch.contexts()))
            .name(name)
            .resources(Arc::clone(w.orch.store())),
    );
    let stop = w.servers.clone();
    tokio::spawn(async move {
        server
            .serve_with_listener(listener, stop.cancelled_owned())
            .await
            .unwrap();
    });
    w.register(name, addr, kind, 10).await;
}

/// Creates an example controller's intent through its own REST routes (`routes`), under group
/// `dig`'s `segment`.
async fn post_example_intent(routes: axum::Router, dig: &str, segment: &str, body: Value) {
    let uri = format!(
        "/v2/projects/{PROJECT}/composite-apps/{CA}/v1/deployment-intent-groups/{dig}/{segment}"
    );
    let answer = routes
        .oneshot(
            Request::post(uri)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_label_controller_labels_deployments_on_the_clusters() {
    let w = World::start(|r| r).await;
    serve_example(&w, "label", "action", |s| s.action(example::Labeler)).await;
    let dig = w.dig("d1", on("c2"), &[("label", "team")]).await;
    let routes = example::LabelIntent::routes(Arc::clone(w.orch.store()));
    let body = json!({"metadata": {"name": "team"}, "spec": {"apps": [APP],
        "labels": {"team": "blue"}, "annotations": {"owner": "ops"}}});
    post_example_intent(routes, "d1", "label-intents", body).await;

    w.orch.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    let d = w.wait_object("c2", DEPLOYMENT, &ctx, |_| true).await;
    assert_eq!(d["metadata"]["labels"]["team"], "blue", "{d}");
    assert_eq!(d["metadata"]["annotations"]["owner"], "ops", "{d}");
    // Only Deployments are touched.
    let cm = w.wait_object("c2", CONFIG_MAP, &ctx, |_| true).await;
    assert!(cm["metadata"]["labels"].get("team").is_none(), "{cm}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_avoid_controller_keeps_apps_off_clusters_with_avoided_labels() {
    let w = World::start(|r| r).await;
    serve_example(&w, "avoid", "placement", |s| s.placement(avoid::Avoider)).await;
    let routes = avoid::AvoidIntent::routes(Arc::clone(w.orch.store()));
    let everywhere = json!({"allOf": [{"clusterProvider": PROVIDER, "cluster": "c1"},
        {"clusterProvider": PROVIDER, "cluster": "c2"},
        {"clusterProvider": PROVIDER, "cluster": "c3"}]});
    // c3 is labelled core: a group avoiding core is placed on c1 and c2 alone.
    let dig = w.dig("d1", everywhere, &[("avoid", "no-core")]).await;
    let body = json!({"metadata": {"name": "no-core"}, "spec": {"labels": ["core", "gpu"]}});
    post_example_intent(routes.clone(), "d1", "avoid-intents", body).await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    assert_eq!(ctx.clusters(APP).await.unwrap(), ["edge+c1", "edge+c2"]);
    w.wait_object("c1", DEPLOYMENT, &ctx, |_| true).await;
    w.wait_object("c2", DEPLOYMENT, &ctx, |_| true).await;
    assert!(
        w.object("c3", "apps/v1", "Deployment", "web")
            .await
            .is_none()
    );

    // Avoiding the label of the one cluster placed: the instantiate says why, and the group
    // stays as it was.
    let dig = w.dig("d2", on("c1"), &[("avoid", "no-edge")]).await;
    let body = json!({"metadata": {"name": "no-edge"}, "spec": {"labels": ["edge"]}});
    post_example_intent(routes.clone(), "d2", "avoid-intents", body).await;
    let err = w.orch.deployments().instantiate(&dig).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("every cluster of app web carries a label in {\"edge\"}"),
        "{err}"
    );
    assert_eq!(w.state(&dig).await, DigState::Approved);
    // An intent naming no label is refused by its own check.
    let answer = routes
        .oneshot(
            Request::post(format!(
                "/v2/projects/{PROJECT}/composite-apps/{CA}/v1/deployment-intent-groups/d2/avoid-intents"
            ))
            .header("content-type", "application/json")
            .body(Body::from(r#"{"metadata": {"name": "none"}, "spec": {"labels": []}}"#))
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ovnaction_annotates_the_workloads_pod_template() {
    use emco_controllers::ovnaction::{
        NETWORKS_ANNOTATION, NFN_ANNOTATION, NetControlIntent, Ovnaction, WorkloadIfIntent,
        WorkloadIntent,
    };
    let w = World::start(|r| r.with_action("ovnaction", Arc::new(Ovnaction))).await;
    w.register("ovnaction", dead_port().await, "action", 1)
        .await;
    let o = &w.orch;
    // c2 has Nodus on every interface: no multus selection there.
    kv(
        o,
        "c2",
        json!({"CNI-Networking-Nodus-CNI-For-all-interfaces": "true"}),
    )
    .await;
    let both = json!({"allOf": [
        {"clusterProvider": PROVIDER, "cluster": "c1"},
        {"clusterProvider": PROVIDER, "cluster": "c2"}]});
    let dig = w.dig("d1", both, &[("ovnaction", "net")]).await;
    let nci =
        put_intent::<NetControlIntent>(o, &dig.key(), json!({"metadata": {"name": "net"}}), &[])
            .await;
    let wi = put_intent::<WorkloadIntent>(
        o,
        &nci,
        json!({"metadata": {"name": "web-wi"}, "spec": {"app": APP,
            "workloadResource": "web", "type": "Deployment"}}),
        &[],
    )
    .await;
    // A workload intent without interfaces changes nothing (the ConfigMap stays as it is).
    put_intent::<WorkloadIntent>(
        o,
        &nci,
        json!({"metadata": {"name": "cfg-wi"}, "spec": {"app": APP,
            "workloadResource": "web-cfg", "type": "ConfigMap"}}),
        &[],
    )
    .await;
    for (name, interface, network, ip) in [
        ("a-if", "eth1", "emco-private-net", "10.10.20.2"),
        ("b-if", "eth2", "protected-private-net", ""),
    ] {
        put_intent::<WorkloadIfIntent>(
            o,
            &wi,
            json!({"metadata": {"name": name}, "spec": {"interface": interface,
                "name": network, "defaultGateway": "false", "ipAddress": ip}}),
            &[],
        )
        .await;
    }
    o.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    let nfn = r#"{"type":"ovn4nfv","interface":[{"interface":"eth1","name":"emco-private-net","defaultGateway":"false","ipAddress":"10.10.20.2"},{"interface":"eth2","name":"protected-private-net","defaultGateway":"false"}]}"#;
    for (cluster, networks) in [
        (
            "c1",
            Some(r#"[{"name":"ovn-networkobj","namespace":"default","cni-args":null}]"#),
        ),
        ("c2", None),
    ] {
        let d = w.wait_object(cluster, DEPLOYMENT, &ctx, |_| true).await;
        let a = &d["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(a[NFN_ANNOTATION], nfn, "{cluster}: {d}");
        assert_eq!(
            a.get(NETWORKS_ANNOTATION).and_then(Value::as_str),
            networks,
            "{cluster}"
        );
        let cm = w.wait_object(cluster, CONFIG_MAP, &ctx, |_| true).await;
        assert!(cm["metadata"].get("annotations").is_none(), "{cm}");
    }
    w.stop().await;
}

/// The CRDs of Istio's resources (written for these tests).
const ISTIO_CRDS: &str = include_str!("../../tests/crds/istio.yaml");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dtc_runs_its_which_deploys_istio_resources_across_clusters() {
    use emco_controllers::its::Its;

    let w = World::start_dtc("its", Arc::new(Its), 9053, 3).await;
    let o = &w.orch;
    // Istio on every cluster: its CRDs, its namespace and the ingress gateway's kv-pairs.
    for cluster in ["c1", "c2"] {
        w.install(cluster, ISTIO_CRDS).await;
        w.install(
            cluster,
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: istio-system\n",
        )
        .await;
        kv(
            o,
            cluster,
            json!({"istioIngressGatewayAddress": format!("10.0.0.{}", &cluster[1..]),
                "istioIngressGatewayPort": "32001", "istioIngressGatewayInternalPort": "15443"}),
        )
        .await;
    }
    // web serves on c1 and is its own client on c2 (one app, two clusters).
    let both = json!({"allOf": [
        {"clusterProvider": PROVIDER, "cluster": "c1"},
        {"clusterProvider": PROVIDER, "cluster": "c2"}]});
    let dig = w.dig("d1", both, &[("dtc", "tg")]).await;
    let tg = put_intent::<emco_controllers::dtc::TrafficGroupIntent>(
        o,
        &dig.key(),
        json!({"metadata": {"name": "tg"}}),
        &[],
    )
    .await;
    let server = put_intent::<emco_controllers::dtc::InboundServerIntent>(
        o,
        &tg,
        json!({"metadata": {"name": "srv"}, "spec": {"app": APP, "appLabel": "app=web",
            "serviceName": "web", "port": 80, "protocol": "TCP", "serviceMesh": "istio"}}),
        &[],
    )
    .await;
    let client = put_intent::<emco_controllers::dtc::InboundClientsIntent>(
        o,
        &server,
        json!({"metadata": {"name": "cli"}, "spec": {"app": APP, "appLabel": "app=web",
            "serviceName": "web"}}),
        &[],
    )
    .await;
    put_intent::<emco_controllers::dtc::InboundClientsAccessIntent>(
        o,
        &client,
        json!({"metadata": {"name": "get"}, "spec": {"action": "ALLOW",
            "url": ["/status"], "access": ["GET"]}}),
        &[],
    )
    .await;
    o.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    // As its writes them, under the app on each cluster (the AppContext's view).
    let on = |cluster: &str, name: &str| {
        let ctx = &ctx;
        let key = name.to_owned();
        let app_cluster = format!("{PROVIDER}+{cluster}");
        async move {
            let yaml = ctx.resource(APP, &app_cluster, &key).await.unwrap();
            emco_go::yaml::from_str::<Value>(
                &yaml.unwrap_or_else(|| panic!("no {key} on {app_cluster}")),
            )
            .unwrap()
        }
    };
    // web is on both clusters, so each is a server cluster that the client on the other one
    // reaches through its gateway: the server side on both, no client side (its' unit tests
    // cover a client in a cluster without the server).
    for cluster in ["c1", "c2"] {
        let names = ctx
            .resources(APP, &format!("{PROVIDER}+{cluster}"))
            .await
            .unwrap();
        for name in [
            "web-gateway+Gateway",
            "web-se-server+ServiceEntry",
            "web-se-server-dr+DestinationRule",
            "web+AuthorizationPolicy",
        ] {
            assert!(names.iter().any(|n| n == name), "{cluster}: {names:?}");
        }
        assert!(
            !names.iter().any(|n| n.contains("client")),
            "{cluster}: {names:?}"
        );
        let gw = on(cluster, "web-gateway+Gateway").await;
        assert_eq!(gw["metadata"]["namespace"], "istio-system");
        assert_eq!(
            gw["spec"]["servers"][0],
            json!({"port": {"name": "tls", "number": 15443, "protocol": "TLS"},
                "hosts": [format!("web.default.edge.{cluster}")],
                "tls": {"mode": "AUTO_PASSTHROUGH"}, "name": "tls"})
        );
        let ap = on(cluster, "web+AuthorizationPolicy").await;
        assert_eq!(
            ap["spec"],
            json!({"action": "ALLOW", "rules": [{"to": [{"operation": {
                "hosts": ["web.default", "web.default.svc.cluster.local", "web"],
                "methods": ["GET"], "paths": ["/status"]}}]}]})
        );
    }
    // And on the clusters.
    let get = |cluster: &'static str,
               api: &'static str,
               kind: &'static str,
               ns: &'static str,
               name: &'static str| {
        let w = &w;
        async move {
            let conn = w
                .pool
                .connector(cluster, &w.fleet.kubeconfig(cluster).unwrap())
                .await
                .unwrap();
            let yaml = format!(
                "apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {ns}\n"
            );
            let rid = Resource::from_yaml(&yaml).unwrap().id().clone();
            conn.get(&Scope::new("0", APP), &rid).await.unwrap()
        }
    };
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let entry = get(
            "c2",
            "networking.istio.io/v1beta1",
            "ServiceEntry",
            "istio-system",
            "web-se-server",
        )
        .await;
        let policy = get(
            "c1",
            "security.istio.io/v1beta1",
            "AuthorizationPolicy",
            "default",
            "web",
        )
        .await;
        if let (Some(e), Some(p)) = (entry, policy) {
            assert_eq!(e["spec"]["endpoints"], json!([{"address": "web.default"}]));
            assert_eq!(e["spec"]["hosts"], json!(["web.default.edge.c2"]));
            assert_eq!(p["spec"]["action"], "ALLOW");
            break;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "its' resources never reached the clusters"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    o.deployments().terminate(&dig).await.unwrap();
    w.wait_gone(
        "c1",
        ("security.istio.io/v1beta1", "AuthorizationPolicy", "web"),
    )
    .await;
    w.stop().await;
}

/// The CRD of Nodus' NetworkChaining (written for these tests).
const SFC_CRDS: &str = include_str!("../../tests/crds/sfc.yaml");

/// sfc (src/sfc/internal/action): a chain's NetworkChaining on the clusters running its
/// functions, the link label on the functions' pods; sfcclient (src/sfcclient/internal/action):
/// a client workload of another group labelled with the pod selector of its chain end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sfc_deploys_the_chain_and_sfcclient_attaches_a_client() {
    use emco_controllers::sfc::{
        Sfc, SfcClient, SfcClientIntent, SfcClientSelectorIntent, SfcIntent, SfcLinkIntent,
        SfcProviderNetworkIntent,
    };
    let w = World::start(|r| {
        r.with_action("sfc", Arc::new(Sfc))
            .with_action("sfcclient", Arc::new(SfcClient))
    })
    .await;
    w.register("sfc", dead_port().await, "action", 2).await;
    w.register("sfcclient", dead_port().await, "action", 2)
        .await;
    let o = &w.orch;
    for cluster in ["c1", "c2"] {
        w.install(cluster, SFC_CRDS).await;
    }
    let both = json!({"allOf": [
        {"clusterProvider": PROVIDER, "cluster": "c1"},
        {"clusterProvider": PROVIDER, "cluster": "c2"}]});
    let d1 = w.dig("d1", both, &[("sfc", "chain")]).await;
    let chain = put_intent::<SfcIntent>(
        o,
        &d1.key(),
        json!({"metadata": {"name": "s1"}, "spec": {"chainType": "Routing", "namespace": "default"}}),
        &[],
    )
    .await;
    put_intent::<SfcLinkIntent>(
        o,
        &chain,
        json!({"metadata": {"name": "fw"}, "spec": {"leftNet": "left-net", "rightNet": "right-net",
            "linkLabel": "sfc-fn=fw", "app": APP, "workloadResource": "web",
            "resourceType": "Deployment"}}),
        &[],
    )
    .await;
    for (name, end, value) in [("head", "left", "head"), ("tail", "right", "tail")] {
        put_intent::<SfcClientSelectorIntent>(
            o,
            &chain,
            json!({"metadata": {"name": name}, "spec": {"chainEnd": end,
                "podSelector": {"matchLabels": {"sfc": value}},
                "namespaceSelector": {"matchLabels": {"sfc": value}}}}),
            &[],
        )
        .await;
    }
    put_intent::<SfcProviderNetworkIntent>(
        o,
        &chain,
        json!({"metadata": {"name": "right-pn"}, "spec": {"chainEnd": "right",
            "providerNetwork": "right-pnetwork", "gatewayIp": "172.30.20.2",
            "subnet": "172.30.20.0/24"}}),
        &[],
    )
    .await;
    o.deployments().instantiate(&d1).await.unwrap();
    let ctx = w.context(&d1).await;
    assert_eq!(
        ctx.app_order()
            .await
            .unwrap()
            .unwrap()
            .last()
            .map(String::as_str),
        Some("network-chain-intents")
    );
    let selector = |v: &str| json!({"matchLabels": {"sfc": v}});
    let routing = json!({
        "namespace": "default",
        "networkChain": "net=left-net,sfc-fn=fw,net=right-net",
        "left": [{"gatewayIp": "", "networkName": "", "subnet": "",
            "podSelector": selector("head"), "namespaceSelector": selector("head")}],
        "right": [{"gatewayIp": "172.30.20.2", "networkName": "right-pnetwork",
            "subnet": "172.30.20.0/24", "podSelector": selector("tail"),
            "namespaceSelector": selector("tail")}],
    });
    let chaining = ("k8s.plugin.opnfv.org/v1alpha1", "NetworkChaining", "s1");
    for cluster in ["c1", "c2"] {
        let d = w
            .wait_object(cluster, DEPLOYMENT, &ctx, |d| {
                d["spec"]["template"]["metadata"]["labels"]["sfc-fn"] == "fw"
            })
            .await;
        assert_eq!(d["spec"]["template"]["metadata"]["labels"]["app"], "web");
        let cr = w
            .object(cluster, chaining.0, chaining.1, chaining.2)
            .await
            .unwrap_or_else(|| panic!("no NetworkChaining on {cluster}"));
        assert_eq!(cr["spec"]["chainType"], "Routing", "{cr}");
        assert_eq!(cr["spec"]["routingSpec"], routing, "{cr}");
        assert_eq!(
            cr["metadata"]["labels"][DEPLOYMENT_ID_LABEL],
            format!("{}-network-chain-intents", ctx.id())
        );
    }

    // A client of the chain's left end, in another group on c3.
    let client = |name: &str, end: &str| {
        json!({"metadata": {"name": name}, "spec": {"chainEnd": end, "sfcIntent": "s1",
            "compositeApp": CA, "compositeAppVersion": "v1", "deploymentIntentGroup": "d1",
            "app": APP, "workloadResource": "web", "resourceType": "Deployment"}})
    };
    let d2 = w.dig("d2", on("c3"), &[("sfcclient", "any")]).await;
    put_intent::<SfcClientIntent>(o, &d2.key(), client("left-client", "left"), &[]).await;
    o.deployments().instantiate(&d2).await.unwrap();
    let ctx2 = w.context(&d2).await;
    let d = w
        .wait_object("c3", DEPLOYMENT, &ctx2, |d| {
            d["spec"]["template"]["metadata"]["labels"]["sfc"] == "head"
        })
        .await;
    assert!(
        d["spec"]["template"]["metadata"]["labels"]
            .get("sfc-fn")
            .is_none(),
        "{d}"
    );
    assert!(
        w.object("c3", chaining.0, chaining.1, chaining.2)
            .await
            .is_none()
    );

    // The right end admits namespaces labelled sfc=tail; the logical cloud's are sfc=head.
    let d3 = w.dig("d3", on("c3"), &[("sfcclient", "any")]).await;
    put_intent::<SfcClientIntent>(o, &d3.key(), client("right-client", "right"), &[]).await;
    let e = o.deployments().instantiate(&d3).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("No matching SFC Client Selector Intents found for s1 by end: right"),
        "{e}"
    );

    // Terminating the chain's group removes the chain with the rest.
    o.deployments().terminate(&d1).await.unwrap();
    for cluster in ["c1", "c2"] {
        w.wait_gone(cluster, chaining).await;
    }
    w.stop().await;
}

/// App `srv` of the service discovery test: a Deployment and a NodePort Service `srv-svc` on
/// 30083, as EMCO's http-server chart with its service discovery overrides.
const SERVER_CHART: &[(&str, &str)] = &[
    (
        "Chart.yaml",
        "apiVersion: v2\nname: srv\nversion: 0.1.0\nappVersion: \"1.0\"\n",
    ),
    ("values.yaml", "tcpPort: 30083\n"),
    (
        "templates/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-srv\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: srv\n  template:\n    metadata:\n      labels:\n        app: srv\n    spec:\n      containers:\n        - name: srv\n          image: nginx:1.25\n",
    ),
    (
        "templates/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: srv-svc\nspec:\n  type: NodePort\n  selector:\n    app: srv\n  ports:\n    - name: srv-svc-tcp\n      protocol: TCP\n      port: {{ .Values.tcpPort }}\n      nodePort: {{ .Values.tcpPort }}\n      targetPort: 3333\n",
    ),
];

/// sds (src/sds): the server `srv` on c2 behind a NodePort Service, its client `web` on c1 and
/// c2. Once srv is ready, a child context (app `service-discovery`, recorded in the group's
/// context) puts on c1, and only there, a headless Service `srv-svc` with the port named after
/// its number and Endpoints at the first address of c2's first Node; c2 keeps the server's own
/// Service. Terminating the group removes the child's objects too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sds_makes_the_server_resolvable_in_the_clients_clusters() {
    use emco_controllers::dtc::{InboundClientsIntent, InboundServerIntent, TrafficGroupIntent};
    use emco_controllers::sds::{SERVICE_DISCOVERY_APP, Sds};

    let sds = Sds::default().with_poll(Duration::from_millis(100));
    let w = World::start_dtc("sds", Arc::new(sds), 9039, 2).await;
    let o = &w.orch;
    // A cluster without kubelets has no Node: its admin registers one, with its addresses.
    w.install(
        "c2",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  addresses:\n  - type: InternalIP\n    address: 10.0.0.12\n  - type: Hostname\n    address: n1\n",
    )
    .await;
    let ca = keys::composite_app(PROJECT, CA, "v1");
    let chart = w.file("srv.tgz", &tgz("srv", SERVER_CHART));
    o.onboarding()
        .create_app(
            &ca,
            &App {
                metadata: meta("srv"),
            },
            &chart,
        )
        .await
        .unwrap();
    let profile = w.file("srv-profile.tgz", &tgz("profile", PROFILE));
    o.onboarding()
        .create_app_profile(
            &ca.child(keys::COMPOSITE_PROFILE, "cp"),
            &AppProfile {
                metadata: meta("srv-profile"),
                spec: AppProfileSpec { app: "srv".into() },
            },
            &profile,
        )
        .await
        .unwrap();
    let both = json!({"allOf": [
        {"clusterProvider": PROVIDER, "cluster": "c1"},
        {"clusterProvider": PROVIDER, "cluster": "c2"}]});
    let dig = w
        .dig_apps("d1", &[(APP, both), ("srv", on("c2"))], &[("dtc", "tg")])
        .await;
    let tg =
        put_intent::<TrafficGroupIntent>(o, &dig.key(), json!({"metadata": {"name": "tg"}}), &[])
            .await;
    let server = put_intent::<InboundServerIntent>(
        o,
        &tg,
        json!({"metadata": {"name": "serverin"}, "spec": {"app": "srv", "appLabel": "app=srv",
            "serviceName": "srv-svc", "port": 3333, "protocol": "TCP", "serviceMesh": "none"}}),
        &[],
    )
    .await;
    put_intent::<InboundClientsIntent>(
        o,
        &server,
        json!({"metadata": {"name": "client1"}, "spec": {"app": APP, "appLabel": "app=web",
            "serviceName": "web", "namespaces": [], "cidrs": []}}),
        &[],
    )
    .await;
    o.deployments().instantiate(&dig).await.unwrap();
    let parent = w.context(&dig).await;

    // On c1, once srv is ready: the child's Service and Endpoints.
    let end = tokio::time::Instant::now() + DEADLINE;
    let (service, endpoints) = loop {
        let svc = w.object("c1", "v1", "Service", "srv-svc").await;
        let ep = w.object("c1", "v1", "Endpoints", "srv-svc").await;
        if let (Some(svc), Some(ep)) = (svc, ep) {
            break (svc, ep);
        }
        assert!(
            tokio::time::Instant::now() < end,
            "no service discovery objects on c1"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let children = parent.child_contexts().await.unwrap();
    assert_eq!(children.len(), 1, "one server cluster, one client app");
    let child = AppContext::load(Arc::clone(o.contexts()), children[0])
        .await
        .unwrap();
    let child_meta = child.meta().await.unwrap();
    assert_eq!(child_meta.composite_app, SERVICE_DISCOVERY_APP);
    assert_eq!(child_meta.release, "r-d1");
    assert_eq!(child_meta.child_context_ids, None);
    assert_eq!(child.apps().await.unwrap(), [SERVICE_DISCOVERY_APP]);
    let c1 = format!("{PROVIDER}+c1");
    assert_eq!(
        child.clusters(SERVICE_DISCOVERY_APP).await.unwrap(),
        std::slice::from_ref(&c1)
    );
    assert_eq!(
        child
            .resource_order(SERVICE_DISCOVERY_APP, &c1)
            .await
            .unwrap()
            .unwrap(),
        ["srv-svc+Endpoint", "srv-svc+Service"]
    );
    let label = format!("{}-{SERVICE_DISCOVERY_APP}", child.id());
    for obj in [&service, &endpoints] {
        assert_eq!(
            obj["metadata"]["labels"][DEPLOYMENT_ID_LABEL],
            label.as_str()
        );
        assert_eq!(obj["metadata"]["namespace"], "default");
    }
    assert_eq!(service["spec"]["clusterIP"], "None");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(service["spec"]["sessionAffinity"], "None");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "30083", "protocol": "TCP", "port": 30083, "targetPort": 30083}])
    );
    assert_eq!(
        endpoints["subsets"],
        json!([{"addresses": [{"ip": "10.0.0.12"}],
            "ports": [{"name": "30083", "port": 30083, "protocol": "TCP"}]}])
    );
    // c2, the server's cluster, keeps the server's own Service.
    let own = w.object("c2", "v1", "Service", "srv-svc").await.unwrap();
    assert_eq!(own["spec"]["type"], "NodePort");
    assert_eq!(
        own["metadata"]["labels"][DEPLOYMENT_ID_LABEL],
        format!("{}-srv", parent.id()).as_str()
    );
    assert!(
        w.object("c2", "v1", "Endpoints", "srv-svc").await.is_none() || {
            // The cluster's own endpoints controller may keep one for the server's Service; never
            // the child's.
            let ep = w.object("c2", "v1", "Endpoints", "srv-svc").await.unwrap();
            ep["metadata"]["labels"][DEPLOYMENT_ID_LABEL] != label.as_str()
        }
    );

    o.deployments().terminate(&dig).await.unwrap();
    w.wait_gone("c1", ("v1", "Endpoints", "srv-svc")).await;
    w.wait_gone("c1", ("v1", "Service", "srv-svc")).await;
    w.settled(&child).await;
    assert_eq!(
        child.status().await.unwrap(),
        Some(AppContextStatus::Terminated)
    );
    w.stop().await;
}

/// A tac workflow hook `name` at `point` starting `client` (a TemporalKit workflow) with id `id`
/// and `params`, followed on the kit's Temporal server, under the group `dig`.
async fn tac_hook(
    w: &World,
    kit: &emco_testkit::temporal::TemporalKit,
    dig: &DigRef,
    (name, point): (&str, &str),
    (client, id): (&str, &str),
    params: Value,
) {
    use emco_workflows::tac::WorkflowHook;
    let hook: WorkflowHook = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"hookType": point, "temporalServer": kit.temporal,
            "workflowClient": {"clientEndpointName": "127.0.0.1",
                "clientEndpointPort": kit.client_port},
            "temporal": {"workflowClientName": client,
                "workflowStartOptions": {"ID": id,
                    "TaskQueue": emco_testkit::temporal::TASK_QUEUE},
                "workflowParams": {"activityParams": params}}}}))
    .unwrap();
    WorkflowHook::collection(Arc::clone(w.orch.store()))
        .create(&dig.key(), &hook)
        .await
        .unwrap();
}

/// `r` with tac in-process, as the server runs it.
fn with_tac(r: ControllerRegistry) -> ControllerRegistry {
    let tac = emco_workflows::Tac::new(emco_workflows::Config::default());
    r.with_action("tac", Arc::new(tac))
}

/// The holds of the group's deployed context, as its status answers them.
async fn holds(w: &World, dig: &DigRef) -> Vec<emco_core::lifecycle::hold::Hold> {
    let ctx = w.context(dig).await;
    ctx.holds::<emco_core::lifecycle::hold::Holds>()
        .await
        .unwrap()
        .map(|(h, _)| h.holds)
        .unwrap_or_default()
}

/// Waits until the first hold of the group's context is no longer holding; the hold.
async fn hold_ended(w: &World, dig: &DigRef) -> emco_core::lifecycle::hold::Hold {
    use emco_core::lifecycle::hold::HoldState;
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        let now = holds(w, dig).await;
        if let Some(h) = now.first().filter(|h| h.state != HoldState::Holding) {
            return h.clone();
        }
        assert!(tokio::time::Instant::now() < end, "still held: {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// tac's workflow hooks on a real Temporal server (`../shared/temporal`) with a real workflow
/// client and worker: a pre-install hook holds the instantiate's hand-over to rsync until its
/// workflow completes (the group is recorded at once), a failing one keeps the context from the
/// clusters with the workflow's error, a hold outlives the orchestrator that took it (the next
/// one waits again and deploys), a pre-termination hook runs before the resources go and a
/// post-termination hook after (src/tac/internal/action/action.go; the holding is ours).
#[tokio::test]
async fn tac_hooks_hold_and_fail_the_lifecycle_on_temporal() {
    use emco_core::lifecycle::hold::HoldState;
    use emco_workflows::temporal::{Temporal, Timeouts};
    let Some(kit) = emco_testkit::temporal::TemporalKit::start() else {
        return;
    };
    let w = World::start(with_tac).await;
    w.register("tac", dead_port().await, "action", 1).await;
    let temporal = Temporal::connect(&kit.temporal, Timeouts::default())
        .await
        .unwrap();
    let status = |id: &'static str| {
        let temporal = temporal.clone();
        async move {
            let d = temporal.describe(id, "").await.unwrap();
            emco_workflows::temporal::status_name(d.workflow_execution_info.unwrap().status)
        }
    };

    // A pre-install hook of 2 s: the instantiate is recorded at once, the context handed over
    // once the workflow completed.
    let dig = w.dig("d-hold", on("c1"), &[("tac", "hooks")]).await;
    let sleep2 = json!({"sleep": {"seconds": "2"}});
    tac_hook(
        &w,
        &kit,
        &dig,
        ("prep", "pre-install"),
        ("sleep", "prep-1"),
        sleep2,
    )
    .await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    assert_eq!(w.state(&dig).await, DigState::Instantiated);
    assert_eq!(status("prep-1").await, "Running");
    let held = holds(&w, &dig).await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].state, HoldState::Holding);
    assert_eq!(
        held[0].description,
        format!("pre-install hook prep: workflow prep-1 on {}", kit.temporal)
    );
    let ctx = w.context(&dig).await;
    assert!(
        ctx.event_queue().await.unwrap().is_empty(),
        "handed over while held"
    );
    assert_eq!(hold_ended(&w, &dig).await.state, HoldState::Released);
    assert_eq!(status("prep-1").await, "Completed");
    w.wait_object("c1", DEPLOYMENT, &ctx, |_| true).await;

    // Terminate: the pre-termination hook completes while the Deployment is still there, the
    // post-termination hook starts once the terminate is handed over.
    tac_hook(
        &w,
        &kit,
        &dig,
        ("drain", "pre-termination"),
        ("sleep", "drain-1"),
        json!({"sleep": {"seconds": "1"}}),
    )
    .await;
    tac_hook(
        &w,
        &kit,
        &dig,
        ("cleanup", "post-termination"),
        ("sleep", "cleanup-1"),
        json!({"sleep": {"seconds": "1"}}),
    )
    .await;
    w.settled(&ctx).await;
    w.orch.deployments().terminate(&dig).await.unwrap();
    assert_eq!(status("drain-1").await, "Completed");
    w.wait_gone("c1", DEPLOYMENT).await;
    // Started in the background once the terminate was handed over: it may not exist yet.
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        while temporal.describe("cleanup-1", "").await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(started.is_ok(), "the post-termination hook never started");
    let closed = temporal
        .wait_closed("cleanup-1", "", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(closed.completed(), "{closed:?}");

    // A failing pre-install hook keeps the context from the clusters, saying why.
    let dig = w.dig("d-fail", on("c2"), &[("tac", "hooks")]).await;
    let failing = json!({"fail": {"message": "backup target is full"}});
    tac_hook(
        &w,
        &kit,
        &dig,
        ("backup", "pre-install"),
        ("fail", "backup-1"),
        failing,
    )
    .await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    let failed = hold_ended(&w, &dig).await;
    assert_eq!(failed.state, HoldState::Failed);
    assert_eq!(
        failed.message,
        "pre-install hook backup: workflow backup-1 failed: backup target is full"
    );
    let ctx = w.context(&dig).await;
    assert_eq!(
        ctx.status().await.unwrap(),
        Some(AppContextStatus::InstantiateFailed)
    );
    assert!(ctx.event_queue().await.unwrap().is_empty());
    assert!(
        w.object("c2", "apps/v1", "Deployment", "web")
            .await
            .is_none()
    );

    // The orchestrator stops while a hold waits: the next one, on the same stores, waits
    // again and deploys.
    let dig = w.dig("d-restart", on("c3"), &[("tac", "hooks")]).await;
    let sleep3 = json!({"sleep": {"seconds": "3"}});
    tac_hook(
        &w,
        &kit,
        &dig,
        ("migrate-db", "pre-install"),
        ("sleep", "db-1"),
        sleep3,
    )
    .await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    w.cancel.cancel();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(status("db-1").await, "Completed");
    let ctx = w.context(&dig).await;
    assert!(
        ctx.event_queue().await.unwrap().is_empty(),
        "the stopped one handed over"
    );
    assert_eq!(holds(&w, &dig).await[0].state, HoldState::Holding);
    let next = w.restarted_with(with_tac);
    let cancel = CancellationToken::new();
    next.start(cancel.clone()).await.unwrap();
    assert_eq!(hold_ended(&w, &dig).await.state, HoldState::Released);
    w.wait_object("c3", DEPLOYMENT, &ctx, |_| true).await;

    // Counted and timed by point and result (emco_workflow_hooks_total and
    // emco_workflow_hook_wait_seconds on the server's /metrics).
    let m = emco_workflows::tac::HookMetrics::get();
    assert_eq!(m.hooks.get(&["pre-install", "started"]), 3);
    assert_eq!(m.hooks.get(&["pre-install", "completed"]), 2);
    assert_eq!(m.hooks.get(&["pre-install", "failed"]), 1);
    assert_eq!(m.hooks.get(&["pre-termination", "completed"]), 1);
    assert_eq!(m.hooks.get(&["post-termination", "started"]), 1);
    assert_eq!(m.waits.count(&["pre-install", "completed"]), 2);
    cancel.cancel();
    w.stop().await;
}

/// tac served over EMCO's controller protocol (as `emco-server --serve-controller tac`): the
/// orchestrator cannot wait for a hold through it, so a pre-install hook holds the
/// UpdateAppContext call itself and the instantiate answers once the workflow completed.
#[tokio::test]
async fn tac_over_grpc_holds_the_call_instead() {
    let Some(kit) = emco_testkit::temporal::TemporalKit::start() else {
        return;
    };
    let w = World::start(|r| r).await;
    let ac = w.serve_contexts().await;
    let tac = emco_workflows::Tac::new(emco_workflows::Config::default()).remote();
    w.serve_remote("tac", Arc::new(tac), &ac).await;
    let dig = w.dig("d-remote", on("c1"), &[("tac", "hooks")]).await;
    let sleep2 = json!({"sleep": {"seconds": "2"}});
    tac_hook(
        &w,
        &kit,
        &dig,
        ("prep", "pre-install"),
        ("sleep", "remote-1"),
        sleep2,
    )
    .await;
    let started = std::time::Instant::now();
    w.orch.deployments().instantiate(&dig).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(holds(&w, &dig).await.is_empty());
    let ctx = w.context(&dig).await;
    w.wait_object("c1", DEPLOYMENT, &ctx, |_| true).await;
    w.stop().await;
}

/// A worker intent of hook `hook` of `dig` naming the group `worker` (same composite app).
async fn tac_worker(w: &World, dig: &DigRef, hook: &str, (name, worker): (&str, &str)) {
    use emco_workflows::tac::{WorkerIntent, WorkflowHook};
    let intent: WorkerIntent = serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"startToCloseTimeout": 60000, "deploymentIntentGroup": worker,
            "compositeApp": CA, "compositeAppVersion": "v1"}}))
    .unwrap();
    WorkerIntent::collection(Arc::clone(w.orch.store()))
        .create(&dig.key().child(WorkflowHook::PARAM, hook), &intent)
        .await
        .unwrap();
}

/// tac's worker intents (src/tac/internal/action/action.go getWorkers, verifyWorkers,
/// deployWorkers, cleanUpWorkers): an approved worker group is instantiated and Ready before
/// its pre-install hook starts and terminated once the instantiate was handed over; a worker
/// group deployed already is left alone; one naming no group fails the instantiate, which
/// records nothing.
#[tokio::test]
async fn tac_deploys_the_workers_of_its_hooks_around_them() {
    let Some(kit) = emco_testkit::temporal::TemporalKit::start() else {
        return;
    };
    let w = World::start(with_tac).await;
    w.register("tac", dead_port().await, "action", 1).await;
    let worker = w.dig("worker", on("c2"), &[]).await;
    let shared = w.dig("shared-worker", on("c3"), &[]).await;
    w.orch.deployments().instantiate(&shared).await.unwrap();

    let dig = w.dig("d-workers", on("c1"), &[("tac", "hooks")]).await;
    let sleep = json!({"sleep": {"seconds": "4"}});
    tac_hook(
        &w,
        &kit,
        &dig,
        ("prep", "pre-install"),
        ("sleep", "w-1"),
        sleep,
    )
    .await;
    tac_worker(&w, &dig, "prep", ("temporal-worker", "worker")).await;
    tac_worker(&w, &dig, "prep", ("shared", "shared-worker")).await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    // Deployed and Ready before the hook started: the hook is held on its workflow now.
    assert_eq!(w.state(&worker).await, DigState::Instantiated);
    let worker_ctx = w.context(&worker).await;
    w.wait_object("c2", DEPLOYMENT, &worker_ctx, |_| true).await;
    assert!(!holds(&w, &dig).await.is_empty());
    // Once handed over, the post-install event terminates the worker tac deployed, not the
    // one it found deployed.
    let ctx = w.context(&dig).await;
    w.wait_object("c1", DEPLOYMENT, &ctx, |_| true).await;
    let end = tokio::time::Instant::now() + DEADLINE;
    while w.state(&worker).await != DigState::Terminated {
        assert!(tokio::time::Instant::now() < end, "the worker stays");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    w.wait_gone("c2", DEPLOYMENT).await;
    assert_eq!(w.state(&shared).await, DigState::Instantiated);

    // A worker naming no group: the instantiate fails saying so and records nothing.
    let bad = w.dig("d-bad-worker", on("c1"), &[("tac", "hooks")]).await;
    let sleep = json!({"sleep": {"seconds": "1"}});
    tac_hook(
        &w,
        &kit,
        &bad,
        ("prep", "pre-install"),
        ("sleep", "w-2"),
        sleep,
    )
    .await;
    tac_worker(&w, &bad, "prep", ("missing", "nowhere")).await;
    let e = w.orch.deployments().instantiate(&bad).await.unwrap_err();
    assert_eq!(e.kind(), emco_core::ErrorKind::FailedPrecondition, "{e}");
    assert!(
        e.message().contains(
            "Failed to verify all workers were approved or already started: d-bad-worker: worker missing"
        ),
        "{e}"
    );
    assert_eq!(w.state(&bad).await, DigState::Approved);
    w.stop().await;
}

/// Every orchestrator on the stores waits for the held contexts (ours): one that stops while it
/// waits leaves nothing stuck, the other, running all along, hands the context over once the
/// workflow completed (as a replica takes a dead one's wait over), and the registry of held
/// contexts is empty again.
#[tokio::test]
async fn a_running_orchestrator_takes_a_stopped_ones_hold_over() {
    use emco_appcontext::context::Registry;
    use emco_core::lifecycle::hold::HoldState;
    let Some(kit) = emco_testkit::temporal::TemporalKit::start() else {
        return;
    };
    let w = World::start(with_tac).await;
    w.register("tac", dead_port().await, "action", 1).await;
    let other = w.restarted_with(with_tac);
    let cancel = CancellationToken::new();
    other.start(cancel.clone()).await.unwrap();

    let dig = w.dig("d-takeover", on("c1"), &[("tac", "hooks")]).await;
    let sleep = json!({"sleep": {"seconds": "3"}});
    tac_hook(
        &w,
        &kit,
        &dig,
        ("prep", "pre-install"),
        ("sleep", "t-1"),
        sleep,
    )
    .await;
    w.orch.deployments().instantiate(&dig).await.unwrap();
    let held = AppContext::registered(w.orch.contexts().as_ref(), Registry::Held)
        .await
        .unwrap();
    let ctx = w.context(&dig).await;
    assert_eq!(held, [ctx.id()]);
    w.cancel.cancel();
    assert_eq!(hold_ended(&w, &dig).await.state, HoldState::Released);
    w.wait_object("c1", DEPLOYMENT, &ctx, |_| true).await;
    let held = AppContext::registered(w.orch.contexts().as_ref(), Registry::Held)
        .await
        .unwrap();
    assert!(held.is_empty(), "{held:?}");
    cancel.cancel();
    w.stop().await;
}
