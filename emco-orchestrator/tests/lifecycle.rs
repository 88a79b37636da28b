//! The lifecycle of deployment intent groups against kubesim clusters: instantiate, terminate,
//! stop, update, rollback and migrate through the typed API and the REST routes, with a real
//! chart of EMCO's examples, an in-process action controller and concurrent groups.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use emco_appcontext::keys::Keyed;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::{
    ActionController, ControllerContext, ControllerRegistry, PlacementController,
};
use emco_core::lifecycle::{AppContextStatus, DigState, StateAction, StateInfo};
use emco_core::model::{
    App, AppProfile, AppProfileSpec, Cluster, ClusterReference, ClusterReferenceSpec, CompositeApp,
    CompositeAppSpec, CompositeProfile, Controller, ControllerSpec, DeploymentIntentGroup,
    DeploymentIntentGroupSpec, DigIntent, DigIntentSpec, GenericPlacementIntent, KvPair,
    LogicalCloud, LogicalCloudSpec, UserPermission,
};
use emco_core::placement::{AllOf, AppPlacementIntent, AppPlacementSpec, PlacementIntent};
use emco_core::{DigRef, ErrorKind, LogicalCloudRef, Metadata};
use emco_helm::archive::pack_dir;
use emco_orchestrator::{MigrateIntent, Orchestrator, keys, rest, save_state};
use emco_rsync::connector::kube::KubePool;
use emco_rsync::connector::{Connector, DEPLOYMENT_ID_LABEL, Resource, Scope};
use emco_store::{AppContextStore, ResourceKey, ResourceStore};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use kubesim::Fault;
use tower::ServiceExt;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/testdata");
const PROJECT: &str = "p1";
use emco_testkit::PROVIDER;
const CA: &str = "monitor";
const APP: &str = "collectd";
/// Bounds every wait; a healthy run takes a fraction of it.
const DEADLINE: Duration = Duration::from_secs(90);

fn meta(name: &str) -> Metadata {
    Metadata::named(name)
}

/// An action controller that refuses every context.
struct Refuser;

#[async_trait]
impl ActionController for Refuser {
    async fn update(&self, _: &mut ControllerContext) -> emco_core::Result<()> {
        Err(emco_core::Error::invalid("this intent cannot be honoured"))
    }
}

/// A placement controller that keeps every app off `edge+c1`.
struct AvoidC1;

#[async_trait]
impl PlacementController for AvoidC1 {
    async fn filter_clusters(&self, cx: &mut ControllerContext) -> emco_core::Result<()> {
        for app in cx.apps().await? {
            if cx.clusters(&app).await?.iter().any(|c| c == "edge+c1") {
                cx.remove_cluster(&app, "edge+c1").await?;
            }
        }
        Ok(())
    }
}

/// The controllers every world registers in-process.
fn registry(r: ControllerRegistry) -> ControllerRegistry {
    r.with_action("refuser", Arc::new(Refuser))
        .with_placement("avoid-c1", Arc::new(AvoidC1))
}

/// kubesim clusters `c1..c3` registered as `edge+c1..3`, an orchestrator over them, and a
/// project with the collectd composite app onboarded.
struct World {
    w: emco_testkit::World,
    pool: KubePool,
}

impl std::ops::Deref for World {
    type Target = emco_testkit::World;
    fn deref(&self) -> &emco_testkit::World {
        &self.w
    }
}

impl World {
    async fn start() -> Self {
        Self::start_on(None, true).await
    }

    /// A world whose orchestrator keeps the contexts of `revisions` revisions per group.
    async fn with_history(revisions: usize) -> Self {
        let world = Self {
            w: Self::builder()
                .orchestrator(move |b| b.revision_history_limit(revisions))
                .start()
                .await,
            pool: KubePool::new(),
        };
        world.onboard().await;
        world
    }

    fn builder() -> emco_testkit::WorldBuilder {
        emco_testkit::World::builder()
            .project(PROJECT)
            .labels(|_| vec!["edge".to_owned()])
            .controllers(registry)
    }

    /// A world over the given stores (fresh in-memory ones without); `resume` starts the engine
    /// on the contexts an earlier process left active (never on a store shared with other tests).
    async fn start_on(
        stores: Option<(Arc<dyn ResourceStore>, Arc<dyn AppContextStore>)>,
        resume: bool,
    ) -> Self {
        let mut builder = Self::builder().start_engine(resume);
        if let Some((resources, contexts)) = stores {
            builder = builder.stores(resources, contexts);
        }
        let world = Self {
            w: builder.start().await,
            pool: KubePool::new(),
        };
        world.onboard().await;
        world
    }

    /// Another replica over the world's stores.
    fn replica(&self) -> Orchestrator {
        Orchestrator::builder(Arc::clone(self.orch.store()))
            .contexts(Arc::clone(self.orch.contexts()))
            .gitops_dir(self.dir.path().join("clones"))
            .rsync(emco_testkit::fast_rsync)
            .controllers(|stores| registry(ControllerRegistry::new(stores)))
            .build()
            .unwrap()
    }

    async fn onboard(&self) {
        let o = &self.orch;
        let root = ResourceKey::root();
        self.logical_cloud("lc", &["c1", "c2", "c3"], true).await;
        self.composite_app("v1").await;
        o.onboarding()
            .controllers()
            .create(
                &root,
                &Controller {
                    metadata: meta("refuser"),
                    spec: ControllerSpec {
                        host: "127.0.0.1".into(),
                        port: 9,
                        kind: "action".into(),
                        priority: 1,
                    },
                },
            )
            .await
            .unwrap();
        o.onboarding()
            .controllers()
            .create(
                &root,
                &Controller {
                    metadata: meta("avoid-c1"),
                    spec: ControllerSpec {
                        host: "127.0.0.1".into(),
                        port: 9,
                        kind: "placement".into(),
                        priority: 1,
                    },
                },
            )
            .await
            .unwrap();
    }

    /// An admin logical cloud over `clusters`, instantiated when `ready`.
    async fn logical_cloud(&self, name: &str, clusters: &[&str], ready: bool) {
        let o = &self.orch;
        let lc = LogicalCloud {
            metadata: meta(name),
            spec: LogicalCloudSpec {
                level: "0".into(),
                ..LogicalCloudSpec::default()
            },
        };
        o.onboarding()
            .logical_clouds()
            .create(&keys::project(PROJECT), &lc)
            .await
            .unwrap();
        let key = keys::logical_cloud(PROJECT, name);
        for c in clusters {
            let r = ClusterReference {
                metadata: meta(&format!("{name}-{c}")),
                spec: ClusterReferenceSpec {
                    cluster_provider: PROVIDER.into(),
                    cluster: (*c).into(),
                    ..ClusterReferenceSpec::default()
                },
            };
            o.onboarding()
                .cluster_references()
                .create(&key, &r)
                .await
                .unwrap();
        }
        if ready {
            o.clouds()
                .instantiate(&LogicalCloudRef::new(PROJECT, name))
                .await
                .unwrap();
        }
    }

    /// Composite app `monitor` at `version` with collectd, its profile and composite profile
    /// `cp`.
    async fn composite_app(&self, version: &str) {
        let o = &self.orch;
        let charts = Path::new(TESTDATA).join("emco-examples/helm_charts/collectd");
        o.onboarding()
            .create_composite_app(
                PROJECT,
                &CompositeApp {
                    metadata: meta(CA),
                    spec: CompositeAppSpec {
                        composite_app_version: version.into(),
                    },
                },
            )
            .await
            .unwrap();
        let ca = keys::composite_app(PROJECT, CA, version);
        let chart = self.file(
            &format!("chart-{version}.tgz"),
            &pack_dir(&charts.join("helm/collectd"), APP).unwrap(),
        );
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
        let profile = self.file(
            &format!("profile-{version}.tgz"),
            &pack_dir(&charts.join("profile"), "profile").unwrap(),
        );
        o.onboarding()
            .create_app_profile(
                &ca.child(keys::COMPOSITE_PROFILE, "cp"),
                &AppProfile {
                    metadata: meta("collectd-profile"),
                    spec: AppProfileSpec { app: APP.into() },
                },
                &profile,
            )
            .await
            .unwrap();
    }

    /// Deployment intent group `name` of `monitor/version` on `cloud`, placing collectd on
    /// `cluster`, with the DIG intent naming `controllers` too; approved.
    async fn dig(
        &self,
        version: &str,
        name: &str,
        cloud: &str,
        cluster: &str,
        controllers: &[&str],
    ) -> DigRef {
        self.dig_with(version, name, cloud, cluster, controllers, Vec::new())
            .await
    }

    /// [`World::dig`] with override values.
    async fn dig_with(
        &self,
        version: &str,
        name: &str,
        cloud: &str,
        cluster: &str,
        controllers: &[&str],
        override_values: Vec<emco_core::model::OverrideValues>,
    ) -> DigRef {
        let o = &self.orch;
        let ca = keys::composite_app(PROJECT, CA, version);
        let group = DeploymentIntentGroup {
            metadata: meta(name),
            spec: DeploymentIntentGroupSpec {
                composite_profile: "cp".into(),
                version: format!("r-{name}"),
                logical_cloud: cloud.into(),
                override_values,
            },
        };
        o.onboarding()
            .deployment_intent_groups()
            .create(&ca, &group)
            .await
            .unwrap();
        let dig_ref = DigRef::new(PROJECT, CA, version, name);
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
        self.place(&dig_ref, cluster).await;
        let mut intent = std::collections::BTreeMap::new();
        intent.insert("genericPlacementIntent".to_owned(), "gpi".to_owned());
        for c in controllers {
            intent.insert((*c).to_owned(), "i1".to_owned());
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

    /// Creates or replaces the app placement intent of collectd: all of `cluster`.
    async fn place(&self, dig: &DigRef, cluster: &str) {
        self.place_with(
            dig,
            PlacementIntent {
                all_of: vec![AllOf {
                    cluster_provider: PROVIDER.into(),
                    cluster: cluster.into(),
                    ..AllOf::default()
                }],
                any_of: Vec::new(),
            },
        )
        .await;
    }

    /// Creates or replaces the app placement intent of collectd.
    async fn place_with(&self, dig: &DigRef, placement: PlacementIntent) {
        let intent = AppPlacementIntent {
            metadata: meta("collectd-placement"),
            spec: AppPlacementSpec {
                app: APP.into(),
                intent: placement,
            },
        };
        let gpi = dig.key().child(keys::GENERIC_PLACEMENT_INTENT, "gpi");
        self.orch
            .onboarding()
            .app_placement_intents()
            .put(&gpi, "collectd-placement", &intent)
            .await
            .unwrap();
    }

    async fn state(&self, dig: &DigRef) -> StateInfo {
        self.orch.deployments().state(dig).await.unwrap()
    }

    /// The context the group's record names as deployed.
    async fn context(&self, dig: &DigRef) -> AppContext {
        let id: emco_core::ContextId = self.state(dig).await.statusctxid.parse().unwrap();
        AppContext::load(Arc::clone(self.orch.contexts()), id)
            .await
            .unwrap()
    }

    async fn wait_status(&self, ctx: &AppContext, want: AppContextStatus) {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let now = ctx.status().await.unwrap();
            if now == Some(want) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "context {} stayed {now:?}, wanted {want}",
                ctx.id()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The resources of collectd that `ctx` places on `cluster` and that exist there, with
    /// their deployment-id label, as `(name+Kind, label)`.
    async fn on_cluster(&self, ctx: &AppContext, cluster: &str) -> Vec<(String, Option<String>)> {
        let conn = self
            .pool
            .connector(cluster, &self.fleet.kubeconfig(cluster).unwrap())
            .await
            .unwrap();
        let id = format!("{PROVIDER}+{cluster}");
        let scope = Scope::new(ctx.id().to_string(), APP);
        let mut out = Vec::new();
        for name in ctx.resources(APP, &id).await.unwrap() {
            let yaml = ctx.resource(APP, &id, &name).await.unwrap().unwrap();
            let rid = Resource::from_yaml(&yaml).unwrap().id().clone();
            if let Some(obj) = conn.get(&scope, &rid).await.unwrap() {
                let label = obj["metadata"]["labels"][DEPLOYMENT_ID_LABEL]
                    .as_str()
                    .map(str::to_owned);
                out.push((name, label));
            }
        }
        out
    }

    /// Waits until collectd's Service on `cluster` carries the label of `ctx` (`Some`), or is
    /// gone (`None`).
    async fn wait_service(&self, cluster: &str, ctx: Option<&AppContext>) {
        let conn = self
            .pool
            .connector(cluster, &self.fleet.kubeconfig(cluster).unwrap())
            .await
            .unwrap();
        let rid =
            Resource::from_yaml("apiVersion: v1\nkind: Service\nmetadata:\n  name: collectd\n")
                .unwrap()
                .id()
                .clone();
        let scope = Scope::new("0", APP);
        let want = ctx.map(|c| format!("{}-{APP}", c.id()));
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let got = conn.get(&scope, &rid).await.unwrap().map(|o| {
                o["metadata"]["labels"][DEPLOYMENT_ID_LABEL]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            });
            if got == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < end,
                "collectd on {cluster} is {got:?}, wanted {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(self) {
        self.w.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instantiate_update_rollback_terminate_and_again() {
    let w = World::start().await;
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    let o = &w.orch;

    o.deployments().instantiate(&dig).await.unwrap();
    let state = w.state(&dig).await;
    assert_eq!(state.current_state(), DigState::Instantiated);
    assert_eq!(state.latest_revision(), 1);
    let first = w.context(&dig).await;
    let meta = first.meta().await.unwrap();
    assert_eq!(
        (
            meta.release.as_str(),
            meta.namespace.as_str(),
            meta.level.as_str()
        ),
        ("r-d1", "default", "0")
    );
    assert_eq!(meta.logical_cloud, "lc");
    w.wait_status(&first, AppContextStatus::Instantiated).await;
    let objects = w.on_cluster(&first, "c1").await;
    let names: Vec<&str> = objects.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&"collectd+Service"), "{names:?}");
    let label = format!("{}-{APP}", first.id());
    assert!(
        objects
            .iter()
            .all(|(_, l)| l.as_deref() == Some(label.as_str()))
    );
    w.wait_service("c2", None).await;

    let again = o.deployments().instantiate(&dig).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Conflict, "{again}");

    // Move collectd to c2: the intent change leaves the group Instantiated until the update.
    w.place(&dig, "c2").await;
    assert_eq!(w.state(&dig).await.current_state(), DigState::Instantiated);
    assert_eq!(o.deployments().update(&dig).await.unwrap(), 2);
    let second = w.context(&dig).await;
    assert_ne!(second.id(), first.id());
    assert_eq!(second.clusters(APP).await.unwrap(), ["edge+c2"]);
    w.wait_service("c2", Some(&second)).await;
    w.wait_service("c1", None).await;

    assert_eq!(o.deployments().rollback(&dig, 1).await.unwrap(), 3);
    let state = w.state(&dig).await;
    assert_eq!(state.current_state(), DigState::Updated);
    assert_eq!(state.statusctxid, first.id().to_string());
    w.wait_service("c1", Some(&first)).await;
    w.wait_service("c2", None).await;
    let bad = o.deployments().rollback(&dig, 7).await.unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidArgument, "{bad}");

    o.deployments().terminate(&dig).await.unwrap();
    assert_eq!(w.state(&dig).await.current_state(), DigState::Terminated);
    w.wait_service("c1", None).await;
    w.wait_status(&first, AppContextStatus::Terminated).await;
    let twice = o.deployments().terminate(&dig).await.unwrap_err();
    assert_eq!(twice.kind(), ErrorKind::Conflict, "{twice}");
    o.deployments().stop(&dig).await.unwrap();
    o.deployments().stop(&dig).await.unwrap();
    assert_eq!(
        w.state(&dig).await.current_state(),
        DigState::TerminateStopped
    );

    // A re-instantiate deploys a new context from the current intents (c2).
    o.deployments().instantiate(&dig).await.unwrap();
    let third = w.context(&dig).await;
    assert!(![first.id(), second.id()].contains(&third.id()));
    let state = w.state(&dig).await;
    assert_eq!(state.actions.last().unwrap().revision, 1);
    let e = o.deployments().rollback(&dig, 1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    w.wait_service("c2", Some(&third)).await;
    o.deployments().terminate(&dig).await.unwrap();
    w.wait_status(&third, AppContextStatus::Terminated).await;
    w.wait_service("c2", None).await;

    // Deleting the group (its intents first) deletes its contexts.
    let gpi = dig.key().child(keys::GENERIC_PLACEMENT_INTENT, "gpi");
    o.onboarding()
        .app_placement_intents()
        .delete(&gpi, "collectd-placement")
        .await
        .unwrap();
    o.onboarding()
        .generic_placement_intents()
        .delete(&dig.key(), "gpi")
        .await
        .unwrap();
    o.onboarding()
        .dig_intents()
        .delete(&dig.key(), "di")
        .await
        .unwrap();
    o.onboarding()
        .deployment_intent_groups()
        .delete(&dig.key().parent().unwrap(), "d1")
        .await
        .unwrap();
    for ctx in [&first, &second, &third] {
        let gone = AppContext::load(Arc::clone(o.contexts()), ctx.id()).await;
        assert_eq!(gone.unwrap_err().kind(), ErrorKind::NotFound);
    }
    w.stop().await;
}

/// A history of 3 revisions: each update deletes the contexts of the revisions before the
/// last three (not the current one, nor one rsync still works on); a rollback within the
/// history works, one beyond it is refused with why. (EMCO keeps every revision: the default.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_history_limit_deletes_older_contexts_as_updates_come() {
    let w = World::with_history(3).await;
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    let o = &w.orch;
    o.deployments().instantiate(&dig).await.unwrap();
    let mut contexts = vec![w.context(&dig).await];
    w.wait_status(&contexts[0], AppContextStatus::Instantiated)
        .await;
    for (revision, cluster) in [(2, "c2"), (3, "c1"), (4, "c2"), (5, "c1")] {
        w.place(&dig, cluster).await;
        assert_eq!(o.deployments().update(&dig).await.unwrap(), revision);
        let ctx = w.context(&dig).await;
        w.wait_service(cluster, Some(&ctx)).await;
        w.wait_status(&ctx, AppContextStatus::Updated).await;
        // The replaced context has deleted what the new one no longer has before the next
        // update (an overlap is another story: see the notes).
        let replaced = contexts.last().unwrap();
        let end = tokio::time::Instant::now() + DEADLINE;
        while !replaced
            .event_queue()
            .await
            .unwrap()
            .last()
            .is_some_and(|e| {
                e.event == emco_core::lifecycle::RsyncEvent::UpdateDelete
                    && e.status == emco_appcontext::context::QueueStatus::Done
            })
        {
            assert!(
                tokio::time::Instant::now() < end,
                "no UpdateDelete of {}",
                replaced.id()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        contexts.push(ctx);
    }
    // Each update deleted the contexts beyond the last three: revisions 1 and 2 are gone.
    let exists = |ctx: &AppContext| {
        let store = Arc::clone(o.contexts());
        let id = ctx.id();
        async move { AppContext::load(store, id).await.is_ok() }
    };
    let mut kept = Vec::new();
    for ctx in &contexts {
        kept.push(exists(ctx).await);
    }
    assert_eq!(kept, [false, false, true, true, true]);

    assert_eq!(o.deployments().rollback(&dig, 4).await.unwrap(), 6);
    w.wait_service("c2", Some(&contexts[3])).await;
    w.wait_service("c1", None).await;
    let e = o.deployments().rollback(&dig, 1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("no longer kept"), "{e}");
    o.deployments().terminate(&dig).await.unwrap();
    w.wait_status(&contexts[3], AppContextStatus::Terminated)
        .await;
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_of_keeps_one_cluster_of_what_placement_controllers_left() {
    let w = World::start().await;
    let o = &w.orch;
    let any_of: PlacementIntent = serde_json::from_value(serde_json::json!({
        "anyOf": [{"clusterProvider": PROVIDER, "clusterLabel": "edge"}]
    }))
    .unwrap();
    // Without a placement controller the first cluster is kept; with one that rejects c1, c2.
    for (name, controllers, want) in [
        ("plain", &[][..], "edge+c1"),
        ("filtered", &["avoid-c1"][..], "edge+c2"),
    ] {
        let dig = w.dig("v1", name, "lc", "c1", controllers).await;
        w.place_with(&dig, any_of.clone()).await;
        o.deployments().approve(&dig).await.unwrap();
        o.deployments().instantiate(&dig).await.unwrap();
        let ctx = w.context(&dig).await;
        assert_eq!(ctx.clusters(APP).await.unwrap(), [want], "{name}");
        assert!(ctx.cluster_group(APP, want).await.unwrap().is_some());
        w.wait_status(&ctx, AppContextStatus::Instantiated).await;
        o.deployments().terminate(&dig).await.unwrap();
        w.wait_status(&ctx, AppContextStatus::Terminated).await;
    }

    // Override values reach the chart as --set values.
    let ca = keys::composite_app(PROJECT, CA, "v1");
    let mut group = o
        .onboarding()
        .deployment_intent_groups()
        .get(&ca, "plain")
        .await
        .unwrap();
    group.spec.override_values = serde_json::from_value(serde_json::json!([
        {"app": APP, "values": {"collectd_prometheus.service.port": "9200"}}
    ]))
    .unwrap();
    let e = o
        .onboarding()
        .deployment_intent_groups()
        .put(&ca, "plain", &group)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "only while Created: {e}");
    assert_eq!(
        e.message(),
        "The specified DeploymentIntentGroup is not in Created status"
    );
    // A group takes its override values when it is created (EMCO refuses a PUT of the group
    // once it left Created: src/orchestrator/pkg/module/deployment_intent_groups.go).
    let overrides = group.spec.override_values.clone();
    let dig = w
        .dig_with("v1", "overrides", "lc", "c1", &[], overrides)
        .await;
    o.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    let service = ctx
        .resource(APP, "edge+c1", "collectd+Service")
        .await
        .unwrap()
        .unwrap();
    assert!(service.contains("port: 9200"), "{service}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_terminate_blocks_a_new_instantiate_until_stopped() {
    let w = World::start().await;
    let o = &w.orch;
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    o.deployments().instantiate(&dig).await.unwrap();
    let first = w.context(&dig).await;
    w.wait_status(&first, AppContextStatus::Instantiated).await;

    // c1 is down: the terminate keeps retrying.
    w.fleet.set_fault("c1", Fault::down()).unwrap();
    o.deployments().terminate(&dig).await.unwrap();
    w.wait_status(&first, AppContextStatus::Terminating).await;
    let e = o.deployments().instantiate(&dig).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert!(e.message().contains("still being terminated"), "{e}");

    o.deployments().stop(&dig).await.unwrap();
    assert_eq!(
        w.state(&dig).await.current_state(),
        DigState::TerminateStopped
    );
    w.wait_status(&first, AppContextStatus::TerminateFailed)
        .await;
    w.fleet.set_fault("c1", Fault::none()).unwrap();
    o.deployments().instantiate(&dig).await.unwrap();
    let second = w.context(&dig).await;
    assert_ne!(second.id(), first.id());
    w.wait_status(&second, AppContextStatus::Instantiated).await;
    w.wait_service("c1", Some(&second)).await;
    w.stop().await;
}

/// The AppContexts in `store`.
async fn context_ids(store: &dyn AppContextStore) -> std::collections::BTreeSet<String> {
    let page = store
        .list(
            "/context/",
            emco_store::ListOptions {
                keys_only: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    page.kvs
        .iter()
        .filter_map(|kv| kv.key.strip_prefix("/context/")?.split('/').next())
        .map(str::to_owned)
        .collect()
}

/// A process killed between recording an instantiate and queuing it for rsync leaves a record
/// naming a context whose event queue is empty; the next start queues it after the grace period
/// (src/orchestrator/pkg/module/instantiation.go records, then `callRsyncInstall`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_cut_short_by_a_crash_is_queued_at_start() {
    let w = World::start().await;
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    // The state the crash leaves: a context built for the instantiate, the record naming it,
    // nothing queued.
    let ctx = AppContext::create(Arc::clone(w.orch.contexts()), &CompositeAppMeta::default())
        .await
        .unwrap();
    let mut writer = ctx.writer();
    writer.add_app("web").unwrap();
    writer
        .add_cluster("web", &format!("{PROVIDER}+c1"), None)
        .unwrap();
    writer
        .add_resource(
            "web",
            &format!("{PROVIDER}+c1"),
            "crash-cm+ConfigMap",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crash-cm\ndata:\n  a: b\n",
        )
        .unwrap();
    writer.flush().await.unwrap();
    let mut info = w.state(&dig).await;
    info.statusctxid = ctx.id().to_string();
    info.actions.push(StateAction {
        state: DigState::Instantiated,
        instance: ctx.id().to_string(),
        time: "2026-11-26T12:00:00Z".into(),
        revision: 1,
    });
    save_state(w.orch.store().as_ref(), &dig.key(), &info)
        .await
        .unwrap();
    assert!(ctx.event_queue().await.unwrap().is_empty());

    // The next process (here a replica on the same stores) starts and finishes the hand-over.
    let restarted = w.restarted();
    let cancel = tokio_util::sync::CancellationToken::new();
    restarted.start(cancel.clone()).await.unwrap();
    w.wait_status(&ctx, AppContextStatus::Instantiated).await;
    let queue = ctx.event_queue().await.unwrap();
    assert_eq!(queue.len(), 1, "queued once: {queue:?}");
    // Recorded work that was handed over is left alone.
    assert_eq!(restarted.reconcile(Duration::ZERO).await.unwrap(), 0);
    cancel.cancel();
    w.stop().await;
}

/// Eight instantiates of one group race, half through a second orchestrator sharing the stores
/// (another replica): the record's compare-and-set lets exactly one win; every other one is
/// refused with EMCO's 409 text and deletes the context it built, so only the winner's context
/// exists and reaches rsync (src/orchestrator/pkg/module/instantiation.go `Instantiate`:
/// `DeploymentIntentGroup has already been instantiated`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_instantiates_one_wins_across_replicas() {
    let w = World::start().await;
    let other = w.replica();
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    let before = context_ids(w.orch.contexts().as_ref()).await;
    let racers = (0..8).map(|i| {
        let orch = if i % 2 == 0 {
            w.orch.clone()
        } else {
            other.clone()
        };
        let dig = dig.clone();
        tokio::spawn(async move { orch.deployments().instantiate(&dig).await })
    });
    let results: Vec<_> = futures::future::join_all(racers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let won = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "{results:?}");
    for lost in results.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(lost.kind(), ErrorKind::Conflict, "{lost}");
        assert!(
            lost.message()
                .starts_with("DeploymentIntentGroup has already been instantiated"),
            "{lost}"
        );
    }
    let state = w.state(&dig).await;
    assert_eq!(state.current_state(), DigState::Instantiated);
    assert_eq!(state.actions.len(), 3, "{state:?}");
    let after = context_ids(w.orch.contexts().as_ref()).await;
    let new: Vec<_> = after.difference(&before).collect();
    assert_eq!(new, [state.statusctxid.as_str()], "contexts left: {new:?}");
    let ctx = w.context(&dig).await;
    w.wait_status(&ctx, AppContextStatus::Instantiated).await;
    w.stop().await;
}

/// A terminate sent the moment an instantiate is recorded: the terminate is queued after the
/// instantiate's hand-over to rsync, never before it, so the group ends terminated and nothing
/// stays on the cluster (a terminate queued first would be refused on the Created context and
/// the instantiate would then deploy a group recorded Terminated).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_terminate_right_after_an_instantiate_is_queued_after_it() {
    let w = World::start().await;
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    let instantiate = {
        let orch = w.orch.clone();
        let dig = dig.clone();
        tokio::spawn(async move { orch.deployments().instantiate(&dig).await })
    };
    // Terminate as soon as the record allows it (FailedPrecondition until it is recorded).
    loop {
        match w.orch.deployments().terminate(&dig).await {
            Ok(()) => break,
            Err(e) if e.kind() == ErrorKind::FailedPrecondition => tokio::task::yield_now().await,
            Err(e) => panic!("{e}"),
        }
    }
    instantiate.await.unwrap().unwrap();
    assert_eq!(w.state(&dig).await.current_state(), DigState::Terminated);
    let ctx = w.context(&dig).await;
    w.wait_status(&ctx, AppContextStatus::Terminated).await;
    w.wait_service("c1", None).await;
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instantiate_update_terminate_on_etcd_and_mongodb() {
    let (Ok(etcd), Ok(mongo)) = (
        std::env::var("EMCO_TEST_ETCD"),
        std::env::var("EMCO_TEST_MONGO"),
    ) else {
        eprintln!(
            "SKIPPED instantiate_update_terminate_on_etcd_and_mongodb: \
             EMCO_TEST_ETCD and EMCO_TEST_MONGO are not both set"
        );
        return;
    };
    let contexts = emco_store::etcd::EtcdBuilder::new()
        .with_endpoints([etcd])
        // Its own key space: other tests' engines on this etcd must not resume its contexts.
        .with_prefix(emco_store::conformance::unique_prefix(
            "/emco-rs-test/lifecycle-",
        ))
        .build()
        .await
        .unwrap();
    let resources = emco_store::mongo::MongoBuilder::new()
        .with_uri(mongo)
        .with_database(format!(
            "emco_lifecycle_{}_{}",
            std::process::id(),
            rand_suffix()
        ))
        .build()
        .await
        .unwrap();
    let w = World::start_on(Some((Arc::new(resources), Arc::new(contexts))), false).await;
    let o = &w.orch;
    let dig = w.dig("v1", "d1", "lc", "c1", &[]).await;
    o.deployments().instantiate(&dig).await.unwrap();
    let first = w.context(&dig).await;
    w.wait_status(&first, AppContextStatus::Instantiated).await;
    w.wait_service("c1", Some(&first)).await;
    w.place(&dig, "c2").await;
    assert_eq!(o.deployments().update(&dig).await.unwrap(), 2);
    let second = w.context(&dig).await;
    w.wait_service("c2", Some(&second)).await;
    w.wait_service("c1", None).await;
    o.deployments().terminate(&dig).await.unwrap();
    w.wait_status(&second, AppContextStatus::Terminated).await;
    w.wait_service("c2", None).await;
    w.stop().await;
}

/// A suffix telling apart the databases of tests run at once.
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_leave_the_group_unchanged() {
    let w = World::start().await;
    let o = &w.orch;

    // Not approved.
    let ca = keys::composite_app(PROJECT, CA, "v1");
    let fresh = DeploymentIntentGroup {
        metadata: meta("fresh"),
        spec: DeploymentIntentGroupSpec {
            composite_profile: "cp".into(),
            version: "r-fresh".into(),
            logical_cloud: "lc".into(),
            override_values: Vec::new(),
        },
    };
    o.onboarding()
        .deployment_intent_groups()
        .create(&ca, &fresh)
        .await
        .unwrap();
    let created = DigRef::new(PROJECT, CA, "v1", "fresh");
    assert_eq!(w.state(&created).await.current_state(), DigState::Created);
    let e = o.deployments().instantiate(&created).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition, "{e}");
    for e in [
        o.deployments().terminate(&created).await.unwrap_err(),
        o.deployments().stop(&created).await.unwrap_err(),
        o.deployments().update(&created).await.unwrap_err(),
        o.deployments().rollback(&created, 1).await.unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition, "{e}");
    }
    let missing = o
        .deployments()
        .instantiate(&DigRef::new(PROJECT, CA, "v1", "nope"))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");

    // A logical cloud that is not instantiated.
    w.logical_cloud("cold", &["c1"], false).await;
    let cold = w.dig("v1", "cold", "cold", "c1", &[]).await;
    let e = o.deployments().instantiate(&cold).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition, "{e}");
    assert!(e.message().contains("instantiate it first"), "{e}");

    // A mandatory cluster outside the logical cloud.
    w.logical_cloud("small", &["c1"], true).await;
    let outside = w.dig("v1", "outside", "small", "c3", &[]).await;
    let e = o.deployments().instantiate(&outside).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");

    // A failing action controller aborts, names itself and leaves no context behind.
    let refused = w.dig("v1", "refused", "lc", "c1", &["refuser"]).await;
    let e = o.deployments().instantiate(&refused).await.unwrap_err();
    assert!(e.message().contains("refuser"), "{e}");
    assert!(e.message().contains("cannot be honoured"), "{e}");
    for dig in [&cold, &outside, &refused] {
        let state = w.state(dig).await;
        assert_eq!(state.current_state(), DigState::Approved);
        assert!(state.statusctxid.is_empty());
    }
    let left = o.contexts().list_all("/context/", true).await.unwrap();
    assert!(left.is_empty(), "{} keys left behind", left.len());

    // A controller's intent written under an approved group leaves it Approved, as in EMCO
    // (src/orchestrator/pkg/module/instantiation.go reads intents at instantiate; no intent
    // module writes the state record).
    let gac = refused.key().child("genericK8sIntent", "g1");
    o.store()
        .create(&gac, &serde_json::json!({"metadata": {"name": "g1"}}))
        .await
        .unwrap();
    assert_eq!(w.state(&refused).await.current_state(), DigState::Approved);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_run_concurrently_and_migrate_moves_a_deployment() {
    let w = World::start().await;
    let o = &w.orch;
    let mut digs = Vec::new();
    for i in 0..6 {
        // g0 alone on c1; the others share c2 and c3 (the chart's Service has a fixed name, so
        // groups on one cluster deploy the same object).
        let cluster = if i == 0 { "c1" } else { ["c2", "c3"][i % 2] };
        digs.push(w.dig("v1", &format!("g{i}"), "lc", cluster, &[]).await);
    }
    // Each group twice at once: exactly one instantiate of each wins, the other is refused.
    let results = futures::future::join_all(
        digs.iter()
            .chain(digs.iter())
            .map(|d| async move { o.deployments().instantiate(d).await }),
    )
    .await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), digs.len(), "{failed:?}");
    assert!(failed.iter().all(|e| e.kind() == ErrorKind::Conflict));
    for dig in &digs {
        assert_eq!(
            w.state(dig).await.actions.len(),
            3,
            "one instantiate recorded"
        );
        w.wait_status(&w.context(dig).await, AppContextStatus::Instantiated)
            .await;
    }
    for dig in &digs[1..] {
        o.deployments().terminate(dig).await.unwrap();
    }
    for dig in &digs[1..] {
        w.wait_status(&w.context(dig).await, AppContextStatus::Terminated)
            .await;
    }

    // Migrate g0 (v1 on c1) to a DIG of v2 placing collectd on c3.
    w.composite_app("v2").await;
    let target = w.dig("v2", "t0", "lc", "c3", &[]).await;
    let source = &digs[0];
    let intent: MigrateIntent = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "m"},
        "spec": {"targetCompositeAppVersion": "v2", "targetDeploymentIntentGroup": "t0"}
    }))
    .unwrap();
    o.deployments().migrate(source, &intent).await.unwrap();
    assert_eq!(w.state(source).await.current_state(), DigState::Terminated);
    assert_eq!(
        w.state(&target).await.current_state(),
        DigState::Instantiated
    );
    let after = w.context(&target).await;
    assert_eq!(after.meta().await.unwrap().version, "v2");
    w.wait_service("c3", Some(&after)).await;
    w.wait_service("c1", None).await;
    let again = o.deployments().migrate(source, &intent).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::FailedPrecondition, "{again}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standard_logical_cloud_deploys_with_its_own_credentials() {
    let w = World::start().await;
    let o = &w.orch;
    let lc: LogicalCloud = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "std"},
        "spec": {"namespace": "std-ns", "user": {"userName": "bob"}}
    }))
    .unwrap();
    let key = keys::logical_cloud(PROJECT, "std");
    o.onboarding()
        .logical_clouds()
        .create(&keys::project(PROJECT), &lc)
        .await
        .unwrap();
    let reference = ClusterReference {
        metadata: meta("ref-c1"),
        spec: ClusterReferenceSpec {
            cluster_provider: PROVIDER.into(),
            cluster: "c1".into(),
            ..ClusterReferenceSpec::default()
        },
    };
    o.onboarding()
        .cluster_references()
        .create(&key, &reference)
        .await
        .unwrap();
    let all: UserPermission = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "all"},
        "spec": {"namespace": "std-ns", "apiGroups": ["", "apps"], "resources": ["*"], "verbs": ["*"]}
    }))
    .unwrap();
    o.onboarding()
        .user_permissions()
        .create(&key, &all)
        .await
        .unwrap();
    let dig = w.dig("v1", "sd", "std", "c1", &[]).await;
    let e = o.deployments().instantiate(&dig).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition, "{e}");

    o.clouds()
        .instantiate(&LogicalCloudRef::new(PROJECT, "std"))
        .await
        .unwrap();
    let end = tokio::time::Instant::now() + DEADLINE;
    while o.deployments().instantiate(&dig).await.is_err() {
        assert!(
            tokio::time::Instant::now() < end,
            "the cloud never became usable"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ctx = w.context(&dig).await;
    let meta = ctx.meta().await.unwrap();
    assert_eq!(
        (meta.level.as_str(), meta.namespace.as_str()),
        ("1", "std-ns")
    );
    w.wait_status(&ctx, AppContextStatus::Instantiated).await;
    let conn = w
        .pool
        .connector("c1", &w.fleet.kubeconfig("c1").unwrap())
        .await
        .unwrap();
    let service =
        Resource::from_yaml("apiVersion: v1\nkind: Service\nmetadata:\n  name: collectd\n")
            .unwrap();
    let scope = Scope::new(ctx.id().to_string(), APP).with_namespace("std-ns");
    let obj = conn.get(&scope, service.id()).await.unwrap().unwrap();
    assert_eq!(
        obj["metadata"]["labels"][DEPLOYMENT_ID_LABEL],
        format!("{}-{APP}", ctx.id())
    );
    o.deployments().terminate(&dig).await.unwrap();
    w.wait_status(&ctx, AppContextStatus::Terminated).await;
    assert!(conn.get(&scope, service.id()).await.unwrap().is_none());
    w.stop().await;
}

fn git(args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gitops_cluster_is_deployed_to_through_its_repository() {
    let w = World::start().await;
    let o = &w.orch;
    let remote = w.dir.path().join("remote.git");
    let remote = remote.to_str().unwrap();
    git(&["init", "-q", "--bare", "-b", "main", remote]);
    let provider = keys::cluster_provider(PROVIDER);
    let sync: KvPair = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "repo"},
        "spec": {"kv": [{"url": remote}, {"branch": "main"}]}
    }))
    .unwrap();
    o.onboarding()
        .cluster_sync_objects()
        .create(&provider, &sync)
        .await
        .unwrap();
    let cluster: Cluster = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "g1"},
        "spec": {"gitOps": {"gitOpsType": "fluxcd", "gitOpsReferenceObject": "repo",
                            "gitOpsResourceObject": "repo"}}
    }))
    .unwrap();
    o.onboarding()
        .create_cluster(PROVIDER, &cluster, None)
        .await
        .unwrap();
    w.logical_cloud("git", &["g1"], true).await;
    let dig = w.dig("v1", "gd", "git", "g1", &[]).await;

    o.deployments().instantiate(&dig).await.unwrap();
    let ctx = w.context(&dig).await;
    w.wait_status(&ctx, AppContextStatus::Instantiated).await;
    let files = git(&["--git-dir", remote, "ls-tree", "-r", "--name-only", "main"]);
    let service = format!(
        "clusters/{PROVIDER}+g1/context/{}/app/{APP}/collectd+Service.yaml",
        ctx.id()
    );
    assert!(files.lines().any(|l| l == service), "{files}");

    o.deployments().terminate(&dig).await.unwrap();
    w.wait_status(&ctx, AppContextStatus::Terminated).await;
    let files = git(&["--git-dir", remote, "ls-tree", "-r", "--name-only", "main"]);
    assert!(
        !files.contains(&format!("context/{}/", ctx.id())),
        "{files}"
    );
    w.stop().await;
}

struct Http {
    app: axum::Router,
}

impl Http {
    async fn post(&self, uri: &str, body: &str) -> (StatusCode, String) {
        let req = Request::post(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap();
        self.send(req).await
    }

    async fn get(&self, uri: &str) -> (StatusCode, String) {
        self.send(Request::get(uri).body(Body::empty()).unwrap())
            .await
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, String) {
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_routes_answer_emco_codes() {
    let w = World::start().await;
    w.dig("v1", "d1", "lc", "c1", &[]).await;
    let http = Http {
        app: rest::router(w.orch.clone()),
    };
    let dig = format!("/v2/projects/{PROJECT}/composite-apps/{CA}/v1/deployment-intent-groups/d1");
    let nope =
        format!("/v2/projects/{PROJECT}/composite-apps/{CA}/v1/deployment-intent-groups/nope");

    assert_eq!(
        http.post(&format!("{dig}/terminate"), "").await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        http.post(&format!("{nope}/instantiate"), "").await.0,
        StatusCode::NOT_FOUND
    );
    // Ours: the preview (GET), its query checked.
    let (code, body) = http
        .get(&format!("{dig}/preview?detail=clusters&limit=5"))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let preview: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(preview["operation"], "instantiate");
    assert_eq!(preview["clusters"]["items"][0]["cluster"], "edge+c1");
    for bad in ["limit=0", "detail=all", "offset=-1", "cluster=c1"] {
        let (code, body) = http.get(&format!("{dig}/preview?{bad}")).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    assert_eq!(
        http.get(&format!("{nope}/preview")).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        http.post(&format!("{dig}/instantiate"), "").await.0,
        StatusCode::ACCEPTED
    );
    let (code, body) = http.post(&format!("{dig}/instantiate"), "").await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    // EMCO's text, the group's name glued on (src/orchestrator/pkg/module/instantiation.go).
    assert!(
        body.starts_with("DeploymentIntentGroup has already been instantiated"),
        "{body}"
    );
    let (code, body) = http.post(&format!("{dig}/update"), "").await;
    assert_eq!((code, body.as_str()), (StatusCode::ACCEPTED, "2"));
    let rollback = format!("{dig}/rollback");
    assert_eq!(http.post(&rollback, "").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(
        http.post(&rollback, r#"{"spec":{"revision":["x"]}}"#)
            .await
            .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        http.post(
            &rollback,
            r#"{"metadata":{"name":"r"},"spec":{"revision":"9"}}"#
        )
        .await
        .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        http.post(
            &rollback,
            r#"{"metadata":{"name":"r"},"spec":{"revision":"1"}}"#
        )
        .await
        .0,
        StatusCode::ACCEPTED
    );
    let migrate = format!("{dig}/migrate");
    assert_eq!(
        http.post(&migrate, r#"{"spec":{"targetCompositeAppVersion":"v1"}}"#)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        http.post(
            &migrate,
            r#"{"spec":{"targetCompositeAppVersion":"v9","targetDeploymentIntentGroup":"x"}}"#
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        http.post(&format!("{dig}/stop"), "").await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        http.post(&format!("{dig}/terminate"), "").await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        http.post(&format!("{dig}/terminate"), "").await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        http.post(&format!("{dig}/stop"), "").await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        http.post(&format!("{dig}/update"), "").await.0,
        StatusCode::CONFLICT
    );
    w.stop().await;
}

/// The contexts of the AppContext store: a preview must make none. (The engine goes on writing
/// the deployed context's status meanwhile, so the store's revision is no measure here; that a
/// preview writes nothing at all is the scratch store's own test.)
async fn context_store(w: &World) -> Vec<String> {
    w.orch
        .contexts()
        .list_all("/context/", true)
        .await
        .unwrap()
        .into_iter()
        .map(|kv| kv.key)
        .filter(|k| k.matches('/').count() == 3)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview_shows_placement_and_changes_and_writes_nothing() {
    use emco_orchestrator::PreviewOptions;
    use emco_orchestrator::lifecycle::{Change, Detail};
    let w = World::start().await;
    let o = &w.orch;
    let overrides = serde_json::from_value(serde_json::json!([
        {"app": APP, "values": {"collectd_prometheus.service.port": "9200"}}
    ]))
    .unwrap();
    let dig = w.dig_with("v1", "d1", "lc", "c1", &[], overrides).await;
    let options = PreviewOptions::default();

    // Before the first instantiate: everything is added, on the cluster the intent names.
    let before = context_store(&w).await;
    let p = o.deployments().preview(&dig, &options).await.unwrap();
    assert_eq!(context_store(&w).await, before, "a preview writes nothing");
    assert_eq!(
        (p.operation.as_str(), p.deployed_revision),
        ("instantiate", None)
    );
    assert_eq!((p.summary.clusters, p.summary.added), (1, 3), "{p:?}");
    let changes = p.changes.as_ref().unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].clusters, ["edge+c1"]);
    assert!(changes[0].objects.iter().all(|c| c.change == Change::Added));
    let service = changes[0]
        .objects
        .iter()
        .find(|c| c.resource == "collectd+Service")
        .unwrap();
    assert!(
        service.diff.contains("+    port: 9200\n"),
        "{}",
        service.diff
    );
    let placed = &p.placement[0];
    assert_eq!((placed.app.as_str(), placed.clusters), (APP, 1));
    assert_eq!(placed.gains, ["edge+c1"]);
    let reason = &placed.picked_by[0].reasons[0];
    assert_eq!(
        (reason.path.as_str(), reason.cluster.as_deref()),
        ("spec.intent.allOf[0]", Some("c1"))
    );
    assert!(p.changes_anything());

    o.deployments().instantiate(&dig).await.unwrap();
    let first = w.context(&dig).await;
    w.wait_status(&first, AppContextStatus::Instantiated).await;

    // Deployed and unchanged: an update would change nothing.
    let p = o.deployments().preview(&dig, &options).await.unwrap();
    assert_eq!(
        (p.operation.as_str(), p.deployed_revision),
        ("update", Some(1))
    );
    assert_eq!((p.summary.clusters_changed, p.summary.unchanged), (0, 3));
    assert!(!p.changes_anything() && p.changes.unwrap().is_empty());

    // The intent moves collectd to c2: c1 loses it, c2 gains it, nothing moves yet.
    w.place(&dig, "c2").await;
    let before = context_store(&w).await;
    let p = o.deployments().preview(&dig, &options).await.unwrap();
    assert_eq!(context_store(&w).await, before, "a preview writes nothing");
    w.wait_service("c2", None).await;
    w.wait_service("c1", Some(&first)).await;
    let placed = &p.placement[0];
    assert_eq!(
        (placed.gains.as_slice(), placed.loses.as_slice()),
        (&["edge+c2".to_owned()][..], &["edge+c1".to_owned()][..])
    );
    assert_eq!(
        (
            p.summary.added,
            p.summary.removed,
            p.summary.clusters_changed
        ),
        (3, 3, 2)
    );
    // The per-cluster detail, one cluster per page.
    let page = PreviewOptions {
        detail: Detail::Clusters,
        offset: 1,
        limit: 1,
        ..PreviewOptions::default()
    };
    let p = o.deployments().preview(&dig, &page).await.unwrap();
    let page = p.clusters.unwrap();
    assert_eq!((page.total, page.items.len()), (2, 1));
    let c2 = &page.items[0];
    assert_eq!(c2.cluster, "edge+c2");
    assert_eq!(c2.apps[0].reasons[0].cluster.as_deref(), Some("c2"));
    assert!(c2.objects.iter().all(|c| c.change == Change::Added));

    // What the update would refuse, the preview refuses in the same words.
    w.place(&dig, "c9").await;
    let want = o.deployments().update(&dig).await.unwrap_err();
    let got = o.deployments().preview(&dig, &options).await.unwrap_err();
    assert_eq!((got.kind(), got.message()), (want.kind(), want.message()));

    // Controllers run in-process work on the preview's scratch context: a placement
    // controller's choice shows, an action controller's refusal is the instantiate's.
    let any_of: PlacementIntent = serde_json::from_value(serde_json::json!({
        "anyOf": [{"clusterProvider": PROVIDER, "clusterLabel": "edge"}]
    }))
    .unwrap();
    let filtered = w.dig("v1", "filtered", "lc", "c1", &["avoid-c1"]).await;
    w.place_with(&filtered, any_of).await;
    let before = context_store(&w).await;
    let p = o.deployments().preview(&filtered, &options).await.unwrap();
    assert_eq!(context_store(&w).await, before, "a preview writes nothing");
    assert_eq!(p.placement[0].gains, ["edge+c2"]);
    assert_eq!(
        p.placement[0].picked_by[0].reasons[0].path,
        "spec.intent.anyOf[0]"
    );
    let refused = w.dig("v1", "refused", "lc", "c1", &["refuser"]).await;
    let got = o
        .deployments()
        .preview(&refused, &options)
        .await
        .unwrap_err();
    let want = o.deployments().instantiate(&refused).await.unwrap_err();
    assert_eq!((got.kind(), got.message()), (want.kind(), want.message()));
    w.stop().await;
}
