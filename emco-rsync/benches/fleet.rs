//! rsync at fleet scale: one context of `EMCO_BENCH_CLUSTERS` kubesim clusters (default 1,000)
//! x `EMCO_BENCH_RESOURCES` resources (default 100; every tenth a Deployment, the rest
//! ConfigMaps; the raw loop applies the same objects), AppContext in memory, kubesim in-process over plain HTTP.
//!
//! Measures the time until every resource is Applied (context Instantiated), the time until
//! every cluster reported its app ready, the requests the engine sent until then and per second
//! once everything is ready (readiness from watches; then, for comparison, readiness polled
//! object by object, skipped with `EMCO_BENCH_POLL=0`, run first with
//! `EMCO_BENCH_POLL_FIRST=1`), the peak RSS of the process (engine and kubesim
//! together), and, against the same fleet, the raw server-side-apply throughput of a plain client
//! loop with the same concurrency, for the ratio. Prints a table and writes it to
//! `bench-results/rsync-fleet.txt`.
//!
//! `cargo bench -p emco-rsync --bench fleet` (set `EMCO_BENCH_CLUSTERS=50` for a quick try).

#![allow(clippy::unwrap_used)] // A benchmark fails loudly on bad fixtures.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_core::lifecycle::AppContextStatus;
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{
    Batch, BatchError, Connector, Propagation, ResourceId, Scope, Warnings,
};
use emco_rsync::engine::{MapResolver, Rsync};
use emco_store::{AppContextStore, InMemoryAppContextStore};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kubesim::{Fleet, FleetConfig};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[path = "../tests/common/gate.rs"]
mod gate;

const GLOBAL: usize = 256;
const PER_CLUSTER: usize = 4;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A memory figure of this process from `/proc/self/status` (`VmHWM` peak, `VmRSS` now), MiB.
fn rss_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resource `i` of the bench (every tenth a Deployment, the rest ConfigMaps) named with
/// `prefix`, as JSON (which is YAML too): its AppContext name, the object, and its type.
fn object(prefix: &str, i: usize) -> (String, Value, ApiResource) {
    if i % 10 == 9 {
        let name = format!("{prefix}web{i}");
        let object = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}
                }
            }
        });
        (
            format!("{name}+Deployment"),
            object,
            ApiResource::erase::<Deployment>(&()),
        )
    } else {
        let name = format!("{prefix}cfg{i}");
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"value": i.to_string()}
        });
        (
            format!("{name}+ConfigMap"),
            object,
            ApiResource::erase::<ConfigMap>(&()),
        )
    }
}

fn manifest(i: usize) -> (String, String) {
    let (name, object, _) = object("", i);
    (name, object.to_string())
}

#[tokio::main]
async fn main() {
    let clusters = env_usize("EMCO_BENCH_CLUSTERS", 1000);
    let resources = env_usize("EMCO_BENCH_RESOURCES", 100);
    let total = clusters * resources;

    let started = Instant::now();
    let fleet = Fleet::start(FleetConfig {
        clusters,
        plain_http: true,
        ready_delay: Duration::from_millis(500),
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let fleet_start = started.elapsed();
    let names = fleet.cluster_names();

    // Raw SSA: a plain client loop applying the same number of ConfigMaps, same concurrency.
    let mut clients = Vec::new();
    for n in &names {
        let kc = fleet.kubeconfig(n).unwrap();
        clients.push(
            KubeConnector::from_kubeconfig(n.clone(), &kc)
                .await
                .unwrap()
                .client()
                .clone(),
        );
    }
    let raw_start = Instant::now();
    // Resource-major order spreads the requests in flight over the clusters, as the engine
    // does; cluster-major would open a connection per request in flight on one cluster. The
    // same objects as the engine's (other names), so that the ratio compares like with like.
    let jobs = (0..resources).flat_map(|i| clients.iter().map(move |c| (c.clone(), i)));
    let failures = futures::stream::iter(jobs)
        .map(|(client, i)| async move {
            let (_, object, resource) = object("raw", i);
            let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            api.patch(
                &name,
                &PatchParams::apply("bench").force(),
                &Patch::Apply(&object),
            )
            .await
            .is_err()
        })
        .buffer_unordered(GLOBAL)
        .filter(|failed| futures::future::ready(*failed))
        .count()
        .await;
    let raw = raw_start.elapsed();
    assert_eq!(failures, 0, "raw server-side apply failed");
    drop(clients);
    let rss_raw = rss_mib("VmRSS");

    // The engine, readiness from watches; then (unless EMCO_BENCH_POLL=0) again with readiness
    // polled object by object, as before the watches were wired, for comparison.
    // The second run re-applies the objects of the first (same names): updates, not creates.
    // `EMCO_BENCH_POLL_FIRST=1` swaps the order, to tell the two effects apart.
    let (watched, polled) = if env_usize("EMCO_BENCH_POLL", 1) == 0 {
        (run_engine(&fleet, &names, resources, true).await, None)
    } else if env_usize("EMCO_BENCH_POLL_FIRST", 0) == 1 {
        let polled = run_engine(&fleet, &names, resources, false).await;
        (
            run_engine(&fleet, &names, resources, true).await,
            Some(polled),
        )
    } else {
        let watched = run_engine(&fleet, &names, resources, true).await;
        (
            watched,
            Some(run_engine(&fleet, &names, resources, false).await),
        )
    };
    let rss = rss_mib("VmHWM");

    let per_s = |d: Duration| total as f64 / d.as_secs_f64();
    let mut table = String::new();
    writeln!(
        table,
        "# rsync fleet: {clusters} kubesim clusters x {resources} resources ({total} objects)\n"
    )
    .unwrap();
    writeln!(
        table,
        "In-process kubesim (plain HTTP, ready delay 500 ms) and engine share one process and \
         the machine's 2 CPUs; AppContext in memory; concurrency {GLOBAL} global, {PER_CLUSTER} \
         per cluster; poll interval 500 ms (polling mode). Requests are counted in the engine's \
         clients (reads: GETs other than watches, incl. discovery). Command: `EMCO_BENCH_CLUSTERS={clusters} EMCO_BENCH_RESOURCES={resources} \
         cargo bench -p emco-rsync --bench fleet`.\n"
    )
    .unwrap();
    writeln!(table, "| measure | value |\n|---|---|").unwrap();
    writeln!(
        table,
        "| fleet start | {:.2} s |",
        fleet_start.as_secs_f64()
    )
    .unwrap();
    writeln!(
        table,
        "| raw SSA, client loop | {:.2} s, {:.0} objects/s |",
        raw.as_secs_f64(),
        per_s(raw)
    )
    .unwrap();
    for (mode, phase) in [("watches", Some(&watched)), ("polling", polled.as_ref())] {
        let Some(p) = phase else { continue };
        writeln!(
            table,
            "| rsync ({mode}), all Applied (context {}) | {:.2} s, {:.0} objects/s |",
            p.status,
            p.applied.as_secs_f64(),
            per_s(p.applied)
        )
        .unwrap();
        writeln!(
            table,
            "| rsync ({mode}), all Ready ({}/{clusters} clusters notified) | {:.2} s |",
            p.ready_clusters,
            p.all_ready.as_secs_f64()
        )
        .unwrap();
        writeln!(
            table,
            "| rsync ({mode}) apply throughput / raw SSA throughput | {:.2} |",
            raw.as_secs_f64() / p.applied.as_secs_f64()
        )
        .unwrap();
        writeln!(
            table,
            "| rsync ({mode}), requests until all Ready | {} writes, {} reads, {} watches ({:.2} reads+watches per object) |",
            p.until_ready.2,
            p.until_ready.1,
            p.until_ready.0,
            (p.until_ready.0 + p.until_ready.1) as f64 / total as f64
        )
        .unwrap();
        writeln!(
            table,
            "| rsync ({mode}), requests per second once all Ready ({} s) | {:.1} reads, {:.1} watches |",
            STEADY.as_secs(),
            p.steady.1 as f64 / STEADY.as_secs_f64(),
            p.steady.0 as f64 / STEADY.as_secs_f64()
        )
        .unwrap();
        writeln!(
            table,
            "| rsync ({mode}), RSS once all Ready (engine + kubesim) | {:.1} MiB |",
            p.rss_ready
        )
        .unwrap();
    }
    writeln!(
        table,
        "| RSS after the raw loop (kubesim holding {total} objects) | {rss_raw:.1} MiB |"
    )
    .unwrap();
    writeln!(table, "| peak RSS (engine + kubesim) | {rss:.1} MiB |").unwrap();
    print!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rsync-fleet.txt"), &table).unwrap();
}

/// How long requests are counted once everything is ready.
const STEADY: Duration = Duration::from_secs(5);

/// The figures of one engine run.
struct Phase {
    status: String,
    applied: Duration,
    all_ready: Duration,
    ready_clusters: usize,
    /// (watches, reads, writes) from the instantiate until all ready.
    until_ready: (usize, usize, usize),
    /// (watches, reads, writes) during [`STEADY`] once all ready.
    steady: (usize, usize, usize),
    /// RSS (MiB) while the engine was at its fullest: everything ready, observers running.
    rss_ready: f64,
}

/// A Kubernetes connector without its watcher: the engine polls readiness object by object.
#[derive(Debug)]
struct Polled(Arc<KubeConnector>);

#[async_trait::async_trait]
impl Connector for Polled {
    fn cluster(&self) -> &str {
        self.0.cluster()
    }
    fn observes_live_state(&self) -> bool {
        true
    }
    async fn apply(&self, batch: &Batch) -> Result<Warnings, BatchError> {
        self.0.apply(batch).await
    }
    async fn delete(&self, batch: &Batch, propagation: Propagation) -> Result<(), BatchError> {
        self.0.delete(batch, propagation).await
    }
    async fn get(&self, scope: &Scope, id: &ResourceId) -> emco_core::Result<Option<Value>> {
        self.0.get(scope, id).await
    }
    async fn health(&self) -> emco_core::Result<()> {
        self.0.health().await
    }
}

fn minus(a: (usize, usize, usize), b: (usize, usize, usize)) -> (usize, usize, usize) {
    (a.0 - b.0, a.1 - b.1, a.2 - b.2)
}

/// Instantiates one context of `resources` resources on every cluster and waits until every
/// cluster notified its app ready.
async fn run_engine(fleet: &Fleet, names: &[String], resources: usize, watch: bool) -> Phase {
    let clusters = names.len();
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let ctx = AppContext::create(Arc::clone(&store), &CompositeAppMeta::default())
        .await
        .unwrap();
    let manifests: Vec<(String, String)> = (0..resources).map(manifest).collect();
    let order: Vec<&str> = manifests.iter().map(|(n, _)| n.as_str()).collect();
    let mut w = ctx.writer();
    w.set_app_order(&["app"]).unwrap();
    w.add_app("app").unwrap();
    let resolver = Arc::new(MapResolver::new());
    let gate = gate::GateLayer::default();
    for n in names {
        let id = format!("prov+{n}");
        w.add_cluster("app", &id, None).unwrap();
        for (name, yaml) in &manifests {
            w.add_resource("app", &id, name, yaml).unwrap();
        }
        w.set_resource_order("app", &id, &order).unwrap();
        let client = gate::client(&fleet.kubeconfig(n).unwrap(), &gate).await;
        let conn = Arc::new(KubeConnector::from_client(id.clone(), client));
        if watch {
            resolver.insert(id, conn);
        } else {
            resolver.insert(id, Arc::new(Polled(conn)));
        }
    }
    w.set_status(AppContextStatus::Created).unwrap();
    w.flush().await.unwrap();

    let rsync = Rsync::builder()
        .store(store)
        .connectors(resolver)
        .concurrency(GLOBAL, PER_CLUSTER)
        .poll_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    rsync.start(cancel.clone()).await.unwrap();
    let mut ready = rsync.subscribe_ready(ctx.id());
    let before = gate.counts.get();
    let engine_start = Instant::now();
    rsync.instantiate(ctx.id()).await.unwrap();
    let ready_task = tokio::spawn(async move {
        let mut seen = 0;
        while seen < clusters && ready.next().await.is_some() {
            seen += 1;
        }
        (seen, engine_start.elapsed())
    });
    rsync.wait_idle(ctx.id()).await;
    let applied = engine_start.elapsed();
    let status = ctx
        .status()
        .await
        .unwrap()
        .map_or_else(|| "none".to_owned(), |s| s.to_string());
    let (ready_clusters, all_ready) = ready_task.await.unwrap();
    let at_ready = gate.counts.get();
    tokio::time::sleep(STEADY).await;
    let steady = minus(gate.counts.get(), at_ready);
    let rss_ready = rss_mib("VmRSS");
    // Ends the readiness observers and, with the engine, the connectors and their watches.
    cancel.cancel();

    Phase {
        status,
        applied,
        all_ready,
        ready_clusters,
        until_ready: minus(at_ready, before),
        steady,
        rss_ready,
    }
}
