//! Shared fixtures of the engine tests: a kubesim fleet, connectors that record what they were
//! asked to do, and AppContexts built from a compact description.

#![allow(dead_code)] // Each test binary uses a different subset.
#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

pub mod proxy;

use emco_core::ContextId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use emco_appcontext::context::QueueStatus;
use emco_appcontext::context::{AppDependency, HookGroups};
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_core::Result;
use emco_core::lifecycle::{AppContextStatus, RsyncEvent};
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{
    Batch, BatchError, Connector, Observation, Propagation, ReadinessSource, ResourceId, Scope,
    Warnings,
};
use emco_rsync::engine::{Backoff, MapResolver, Rsync, RsyncBuilder};
use emco_store::AppContextStore;
use kubesim::{Fleet, FleetConfig};
use serde_json::Value;

/// One call a [`Recording`] connector saw.
#[derive(Debug, Clone)]
pub struct Call {
    /// When it was made.
    pub started: Instant,
    /// When it ended, or was abandoned (its future dropped).
    pub at: Instant,
    /// The context it was made for.
    pub ctx: String,
    pub cluster: String,
    pub app: String,
    pub delete: bool,
    /// `name+Kind` of the resources of the batch.
    pub names: Vec<String>,
    pub ok: bool,
}

/// Wraps a connector and records every apply and delete, and counts object reads.
#[derive(Debug)]
pub struct Recording {
    inner: Arc<dyn Connector>,
    log: Arc<Mutex<Vec<Call>>>,
    /// Objects read one by one (`get`, or one per id of `observe`).
    reads: Arc<AtomicUsize>,
    /// Whether the inner connector's watcher is offered (else the engine polls).
    watch: bool,
}

impl Recording {
    /// A call about to be made, recorded when it ends or is abandoned.
    fn call(&self, batch: &Batch, delete: bool) -> Pending {
        Pending {
            call: Some(Call {
                started: Instant::now(),
                at: Instant::now(),
                ctx: batch.scope.ctx_id.clone(),
                cluster: self.inner.cluster().to_owned(),
                app: batch.scope.app.clone(),
                delete,
                names: batch.resources.iter().map(|r| r.id().emco_name()).collect(),
                ok: false,
            }),
            log: Arc::clone(&self.log),
        }
    }
}

/// A call under way: logged (not ok) even when its future is dropped.
struct Pending {
    call: Option<Call>,
    log: Arc<Mutex<Vec<Call>>>,
}

impl Pending {
    fn ended<T, E>(mut self, r: &std::result::Result<T, E>) {
        if let Some(call) = &mut self.call {
            call.ok = r.is_ok();
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(mut call) = self.call.take() {
            call.at = Instant::now();
            self.log.lock().unwrap().push(call);
        }
    }
}

#[async_trait]
impl Connector for Recording {
    fn cluster(&self) -> &str {
        self.inner.cluster()
    }
    fn observes_live_state(&self) -> bool {
        self.inner.observes_live_state()
    }
    async fn apply(&self, batch: &Batch) -> std::result::Result<Warnings, BatchError> {
        let call = self.call(batch, false);
        let r = self.inner.apply(batch).await;
        call.ended(&r);
        r
    }
    async fn delete(
        &self,
        batch: &Batch,
        propagation: Propagation,
    ) -> std::result::Result<(), BatchError> {
        let call = self.call(batch, true);
        let r = self.inner.delete(batch, propagation).await;
        call.ended(&r);
        r
    }
    async fn get(&self, scope: &Scope, id: &ResourceId) -> Result<Option<Value>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.get(scope, id).await
    }
    async fn health(&self) -> Result<()> {
        self.inner.health().await
    }
    fn readiness_source(&self) -> Option<Arc<dyn ReadinessSource>> {
        if self.watch {
            self.inner.readiness_source()
        } else {
            None
        }
    }
    async fn observe(&self, scope: &Scope, ids: &[ResourceId]) -> Result<Vec<Observation>> {
        self.reads.fetch_add(ids.len(), Ordering::Relaxed);
        self.inner.observe(scope, ids).await
    }
}

/// A fleet, connectors to all of its clusters (as `prov+cN`) and the call log.
pub struct Env {
    pub fleet: Fleet,
    pub resolver: Arc<MapResolver>,
    pub log: Arc<Mutex<Vec<Call>>>,
    pub direct: Vec<Arc<KubeConnector>>,
    /// Objects the engine read one by one, all clusters.
    pub reads: Arc<AtomicUsize>,
}

impl Env {
    pub async fn start(clusters: usize) -> Self {
        Self::start_with(clusters, true).await
    }

    /// A fleet whose connectors offer their watchers to the engine only when `watch`.
    pub async fn start_with(clusters: usize, watch: bool) -> Self {
        let fleet = Fleet::start(FleetConfig {
            clusters,
            ready_delay: Duration::from_millis(200),
            plain_http: clusters > 20,
            ..FleetConfig::default()
        })
        .await
        .unwrap();
        let resolver = Arc::new(MapResolver::new());
        let log = Arc::new(Mutex::new(Vec::new()));
        let reads = Arc::new(AtomicUsize::new(0));
        let mut direct = Vec::new();
        for name in fleet.cluster_names() {
            let id = format!("prov+{name}");
            let kc = fleet.kubeconfig(&name).unwrap();
            let conn = Arc::new(
                KubeConnector::from_kubeconfig(id.clone(), &kc)
                    .await
                    .unwrap()
                    .with_request_timeout(Duration::from_secs(5)),
            );
            direct.push(Arc::clone(&conn));
            resolver.insert(
                id,
                Arc::new(Recording {
                    inner: conn,
                    log: Arc::clone(&log),
                    reads: Arc::clone(&reads),
                    watch,
                }),
            );
        }
        Self {
            fleet,
            resolver,
            log,
            direct,
            reads,
        }
    }

    /// Connectors to the same clusters with a call log of their own: an engine built with
    /// them is told apart from the others by what it did.
    pub fn own_resolver(&self) -> (Arc<MapResolver>, Arc<Mutex<Vec<Call>>>) {
        let resolver = Arc::new(MapResolver::new());
        let log = Arc::new(Mutex::new(Vec::new()));
        for conn in &self.direct {
            let inner: Arc<dyn Connector> = Arc::clone(conn) as Arc<dyn Connector>;
            resolver.insert(
                inner.cluster().to_owned(),
                Arc::new(Recording {
                    inner,
                    log: Arc::clone(&log),
                    reads: Arc::clone(&self.reads),
                    watch: true,
                }),
            );
        }
        (resolver, log)
    }

    pub fn engine(&self, store: Arc<dyn AppContextStore>) -> Rsync {
        self.builder(store).build().unwrap()
    }

    /// The builder of [`Env::engine`], for tests that tune more.
    pub fn builder(&self, store: Arc<dyn AppContextStore>) -> RsyncBuilder {
        Rsync::builder()
            .store(store)
            .connectors(self.resolver.clone())
            .concurrency(64, 4)
            .backoff(Backoff {
                initial: Duration::from_millis(50),
                max_delay: Duration::from_millis(200),
                max_retries: None,
            })
            .poll_interval(Duration::from_millis(50))
    }

    /// The live object of resource `yaml` of `app` in context `ctx` on cluster index `i`.
    pub async fn get(&self, i: usize, ctx: ContextId, app: &str, yaml: &str) -> Option<Value> {
        let r = emco_rsync::connector::Resource::from_yaml(yaml).unwrap();
        self.direct[i]
            .get(&Scope::new(ctx.to_string(), app), r.id())
            .await
            .unwrap()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.log.lock().unwrap().clone()
    }

    /// Gives every cluster of the fleet `fault`.
    pub fn fault_all(&self, fault: &kubesim::Fault) {
        for name in self.fleet.cluster_names() {
            self.fleet.set_fault(&name, fault.clone()).unwrap();
        }
    }
}

/// A context's app: name, clusters (`prov+cN`), resources (`name+Kind`, YAML), dependencies and
/// hooks.
#[derive(Default, Clone)]
pub struct AppSpec {
    pub name: String,
    pub clusters: Vec<String>,
    pub resources: Vec<(String, String)>,
    pub deps: Vec<AppDependency>,
    pub hooks: Option<HookGroups>,
}

impl AppSpec {
    pub fn new(name: &str, clusters: &[String], resources: &[(&str, &str)]) -> Self {
        Self {
            name: name.to_owned(),
            clusters: clusters.to_vec(),
            resources: resources
                .iter()
                .map(|(n, y)| ((*n).to_owned(), (*y).to_owned()))
                .collect(),
            ..Self::default()
        }
    }
}

/// A one-replica Deployment `web`.
pub const DEPLOYMENT: &str = "
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

pub fn clusters(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("prov+c{i}")).collect()
}

pub fn config_map(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n"
    )
}

/// App `app` of `count` config maps `cm0..` (values `v0..`) on `clusters`.
pub fn config_map_app(clusters: &[String], count: usize) -> AppSpec {
    let cms: Vec<(String, String)> = (0..count)
        .map(|i| {
            let name = format!("cm{i}");
            (
                format!("{name}+ConfigMap"),
                config_map(&name, &format!("v{i}")),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = cms.iter().map(|(n, y)| (n.as_str(), y.as_str())).collect();
    AppSpec::new("app", clusters, &refs)
}

/// Writes a context holding `apps` (in that app order), status Created.
pub async fn context(store: Arc<dyn AppContextStore>, apps: &[AppSpec]) -> AppContext {
    let ctx = AppContext::create(store, &CompositeAppMeta::default())
        .await
        .unwrap();
    let mut w = ctx.writer();
    let order: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    w.set_app_order(&order).unwrap();
    for a in apps {
        w.add_app(&a.name).unwrap();
        if !a.deps.is_empty() {
            w.set_app_dependencies(&a.name, &a.deps).unwrap();
        }
        for c in &a.clusters {
            w.add_cluster(&a.name, c, None).unwrap();
            let mut names = Vec::new();
            for (n, y) in &a.resources {
                w.add_resource(&a.name, c, n, y).unwrap();
                names.push(n.as_str());
            }
            w.set_resource_order(&a.name, c, &names).unwrap();
            if let Some(h) = &a.hooks {
                w.set_hook_groups(&a.name, c, h).unwrap();
            }
        }
    }
    w.set_status(AppContextStatus::Created).unwrap();
    w.flush().await.unwrap();
    ctx
}

/// Polls `f` until it holds; the deadline only bounds a hang, it measures nothing.
pub async fn until<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1500 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

pub async fn status(ctx: &AppContext) -> AppContextStatus {
    ctx.status().await.unwrap().unwrap()
}

/// The resource statuses of the context (`key = value`) that do not say Applied, read in one
/// listing; with the count of those that do.
pub async fn resource_statuses(ctx: &AppContext) -> (usize, Vec<String>) {
    let mut applied = 0;
    let mut other = Vec::new();
    for kv in ctx.store().list_all(ctx.root_key(), false).await.unwrap() {
        if !(kv.key.contains("/resource/") && kv.key.ends_with("/status/")) {
            continue;
        }
        if kv.value.as_ref() == br#"{"Status":"Applied"}"# {
            applied += 1;
        } else {
            other.push(format!(
                "{} = {}",
                kv.key,
                String::from_utf8_lossy(&kv.value)
            ));
        }
    }
    (applied, other)
}

/// How many resource statuses of the context say Applied.
pub async fn applied_count(ctx: &AppContext) -> usize {
    resource_statuses(ctx).await.0
}

/// The event queue of the context as (event, status).
pub async fn queue(ctx: &AppContext) -> Vec<(RsyncEvent, QueueStatus)> {
    ctx.event_queue()
        .await
        .unwrap()
        .iter()
        .map(|e| (e.event, e.status))
        .collect()
}

/// A resolver of connectors to clusters `prov+c1..c{count}` from the kubeconfigs a fleet
/// wrote to `dir` (for an engine in a child process).
pub async fn resolver_from_kubeconfigs(dir: &str, count: usize) -> Arc<MapResolver> {
    let resolver = Arc::new(MapResolver::new());
    for i in 1..=count {
        let path = std::path::PathBuf::from(dir).join(format!("c{i}.kubeconfig"));
        let kc = std::fs::read_to_string(path).unwrap();
        let id = format!("prov+c{i}");
        let conn = KubeConnector::from_kubeconfig(id.clone(), &kc)
            .await
            .unwrap();
        resolver.insert(id, Arc::new(conn));
    }
    resolver
}

/// The config maps `cm0..cm{count}` (values `v0..`) of app `app` of `ctx` on every cluster of
/// the fleet, exactly once each, and nothing else of the context; none at all when `count` is 0.
pub async fn assert_config_maps(env: &Env, ctx: &AppContext, count: usize) {
    use emco_rsync::connector::DEPLOYMENT_ID_LABEL;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::ListParams;
    let selector = format!("{DEPLOYMENT_ID_LABEL}={}-app", ctx.id());
    let mut want: Vec<(String, String)> = (0..count)
        .map(|i| (format!("cm{i}"), format!("v{i}")))
        .collect();
    want.sort();
    for conn in &env.direct {
        let api: Api<ConfigMap> = Api::namespaced(conn.client().clone(), "default");
        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .unwrap();
        let mut got: Vec<(String, String)> = list
            .items
            .iter()
            .map(|cm| {
                (
                    cm.metadata.name.clone().unwrap(),
                    cm.data.as_ref().unwrap()["value"].clone(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "cluster {}", Connector::cluster(conn.as_ref()));
    }
}

/// The etcd store under `prefix`: parent and child processes share one key space of their own,
/// since an engine resumes every active context it sees, and other tests' engines run on the
/// same etcd.
pub async fn etcd(endpoint: &str, prefix: &str) -> Arc<dyn AppContextStore> {
    Arc::new(
        emco_store::etcd::EtcdBuilder::new()
            .with_endpoints([endpoint.to_owned()])
            .with_prefix(prefix)
            .build()
            .await
            .unwrap(),
    )
}

/// The set-up of a test that kills an engine's process with SIGKILL in the middle of an
/// instantiate: a fleet whose clusters answer slowly, their kubeconfigs in a directory for the
/// child, and a context of config maps on every cluster in an etcd key space of its own.
pub struct Crash {
    pub env: Env,
    pub endpoint: String,
    pub dir: tempfile::TempDir,
    pub prefix: String,
    pub store: Arc<dyn AppContextStore>,
    pub ctx: AppContext,
    /// How many objects the context deploys.
    pub total: usize,
}

impl Crash {
    /// `clusters` clusters with `resources` config maps each, keys under a prefix named `name`.
    pub async fn start(endpoint: &str, name: &str, clusters: usize, resources: usize) -> Self {
        let env = Env::start(clusters).await;
        let dir = tempfile::tempdir().unwrap();
        env.fleet.write_kubeconfigs(dir.path()).await.unwrap();
        // Slow clusters so that the kill lands in the middle.
        env.fault_all(&kubesim::Fault::latency(100));
        let prefix = emco_store::conformance::unique_prefix(&format!("/emco-rs-test/{name}-"));
        let store = etcd(endpoint, &prefix).await;
        let ctx = context(
            Arc::clone(&store),
            &[config_map_app(&self::clusters(clusters), resources)],
        )
        .await;
        Self {
            env,
            endpoint: endpoint.to_owned(),
            dir,
            prefix,
            store,
            ctx,
            total: clusters * resources,
        }
    }

    /// Runs the ignored test `child` of this test binary, which calls [`child_instantiates`].
    pub fn spawn(&self, child: &str) -> std::process::Child {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", child, "--ignored", "--nocapture"])
            .env("EMCO_TEST_ETCD", &self.endpoint)
            .env("EMCO_CHILD_KUBECONFIGS", self.dir.path())
            .env("EMCO_CHILD_CONTEXT", self.ctx.id().to_string())
            .env("EMCO_CHILD_PREFIX", &self.prefix)
            .env(
                "EMCO_CHILD_CLUSTERS",
                self.env.fleet.cluster_names().len().to_string(),
            )
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Kills `child` with SIGKILL once it applied `1/share` of the context, then lets the
    /// clusters answer at full speed again; returns how many objects it applied.
    pub async fn kill_midway(&self, mut child: std::process::Child, share: usize) -> usize {
        until("the child to apply part of the context", || async {
            applied_count(&self.ctx).await >= self.total / share
        })
        .await;
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let before = applied_count(&self.ctx).await;
        assert!(
            before < self.total,
            "the kill came too late to test anything"
        );
        self.env.fault_all(&kubesim::Fault::none());
        before
    }
}

/// The child side of a [`Crash`] test: an engine (`tune` adds to its builder) instantiates the
/// parent's context from the kubeconfigs it wrote. Says SKIPPED and does nothing unless run by
/// [`Crash::spawn`].
pub async fn child_instantiates(tune: impl FnOnce(RsyncBuilder) -> RsyncBuilder) {
    let (Ok(endpoint), Ok(dir), Ok(ctx), Ok(prefix), Ok(count)) = (
        std::env::var("EMCO_TEST_ETCD"),
        std::env::var("EMCO_CHILD_KUBECONFIGS"),
        std::env::var("EMCO_CHILD_CONTEXT"),
        std::env::var("EMCO_CHILD_PREFIX"),
        std::env::var("EMCO_CHILD_CLUSTERS"),
    ) else {
        eprintln!("SKIPPED: a child process of a crash test, run only by that test");
        return;
    };
    let resolver = resolver_from_kubeconfigs(&dir, count.parse().unwrap()).await;
    let builder = Rsync::builder()
        .store(etcd(&endpoint, &prefix).await)
        .connectors(resolver)
        .concurrency(8, 2);
    let rsync = tune(builder).build().unwrap();
    rsync
        .start(tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    let id: ContextId = ctx.parse().unwrap();
    rsync.instantiate(id).await.unwrap();
    rsync.wait_idle(id).await;
}
