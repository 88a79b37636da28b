//! rsync at fleet scale: one context of `EMCO_BENCH_CLUSTERS` kubesim clusters (default 1,000)
//! x `EMCO_BENCH_RESOURCES` resources (default 100; every tenth a Deployment, the rest
//! ConfigMaps), AppContext in memory, kubesim in-process over plain HTTP.
//!
//! Measures the time until every resource is Applied (context Instantiated), the time until
//! every cluster reported its app ready, the peak RSS of the process (engine and kubesim
//! together), and, against the same fleet, the raw server-side-apply throughput of a plain client
//! loop with the same concurrency, for the ratio. Prints a table and writes it to
//! `bench-results/rsync-fleet.txt`.
//!
//! `cargo bench -p emco-rsync --bench fleet` (set `EMCO_BENCH_CLUSTERS=50` for a quick try).

#![allow(clippy::unwrap_used)] // A benchmark fails loudly on bad fixtures.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use emco_appcontext::{AppContext, AppContextStore, CompositeAppMeta, InMemoryAppContextStore};
use emco_core::lifecycle::AppContextStatus;
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::engine::{MapResolver, Rsync};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kubesim::{Fleet, FleetConfig};
use tokio_util::sync::CancellationToken;

const GLOBAL: usize = 256;
const PER_CLUSTER: usize = 4;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn manifest(i: usize) -> (String, String) {
    if i % 10 == 9 {
        let name = format!("web{i}");
        let yaml = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  \
             selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    \
             spec:\n      containers:\n      - name: c\n        image: nginx\n"
        );
        (format!("{name}+Deployment"), yaml)
    } else {
        let name = format!("cfg{i}");
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{i}\"\n"
        );
        (format!("{name}+ConfigMap"), yaml)
    }
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
    // does; cluster-major would open a connection per request in flight on one cluster.
    let jobs = (0..resources).flat_map(|i| clients.iter().map(move |c| (c.clone(), i)));
    let failures = futures::stream::iter(jobs)
        .map(|(client, i)| async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "default");
            let name = format!("raw{i}");
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name}, "data": {"value": i.to_string()}
            }))
            .unwrap();
            api.patch(
                &name,
                &PatchParams::apply("bench").force(),
                &Patch::Apply(&cm),
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

    // The engine.
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
    for n in &names {
        let id = format!("prov+{n}");
        w.add_cluster("app", &id, None).unwrap();
        for (name, yaml) in &manifests {
            w.add_resource("app", &id, name, yaml).unwrap();
        }
        w.set_resource_order("app", &id, &order).unwrap();
        let kc = fleet.kubeconfig(n).unwrap();
        resolver.insert(
            id.clone(),
            Arc::new(KubeConnector::from_kubeconfig(id, &kc).await.unwrap()),
        );
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
    rsync.start(CancellationToken::new()).await.unwrap();
    let mut ready = rsync.subscribe_ready(ctx.id());
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
    let rss = peak_rss_mib();

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
         per cluster. Command: `EMCO_BENCH_CLUSTERS={clusters} EMCO_BENCH_RESOURCES={resources} \
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
    writeln!(
        table,
        "| rsync, all Applied (context {status}) | {:.2} s, {:.0} objects/s |",
        applied.as_secs_f64(),
        per_s(applied)
    )
    .unwrap();
    writeln!(
        table,
        "| rsync, all Ready ({ready_clusters}/{clusters} clusters notified) | {:.2} s |",
        all_ready.as_secs_f64()
    )
    .unwrap();
    writeln!(
        table,
        "| rsync apply throughput / raw SSA throughput | {:.2} |",
        raw.as_secs_f64() / applied.as_secs_f64()
    )
    .unwrap();
    writeln!(table, "| peak RSS (engine + kubesim) | {rss:.1} MiB |").unwrap();
    print!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("rsync-fleet.txt"), &table).unwrap();
}
