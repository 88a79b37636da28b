//! The dashboard's fleet page at 10,000 clusters: how long `GET /ui/api/fleet` takes to search,
//! filter by label and page over every cluster of every provider, on the embedded (redb) store
//! and in memory.
//!
//! `cargo bench -p emco-server --bench dashboard` (`EMCO_BENCH_CLUSTERS` changes the count); the
//! table is printed and written to `bench-results/dashboard.txt` at the workspace root.

#![allow(clippy::unwrap_used)] // A benchmark fails loudly on a broken setup.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use emco_core::Metadata;
use emco_core::model::{Cluster, ClusterLabel, ClusterProvider};
use emco_orchestrator::{Orchestrator, keys};
use emco_service::{Config, Metrics};
use emco_store::{InMemoryResourceStore, ResourceKey, ResourceStore};
use http::Request;
use http_body_util::BodyExt;
use tower::ServiceExt;

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
     users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n\
     current-context: c\n";
/// Clusters per provider.
const PER_PROVIDER: usize = 1_000;
const RUNS: u32 = 5;

/// Registers `n` clusters over `n / PER_PROVIDER` providers; every tenth is labelled `edge`.
async fn register(orch: &Orchestrator, n: usize) -> Duration {
    let start = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let onboarding = orch.onboarding();
    for p in 0..n.div_ceil(PER_PROVIDER) {
        let provider = format!("provider-{p}");
        onboarding
            .cluster_providers()
            .create(
                &ResourceKey::root(),
                &ClusterProvider {
                    metadata: Metadata::named(&provider),
                },
            )
            .await
            .unwrap();
        for c in (p * PER_PROVIDER)..((p + 1) * PER_PROVIDER).min(n) {
            let name = format!("cluster-{c:05}");
            let cluster = Cluster {
                metadata: Metadata::named(&name),
                ..Cluster::default()
            };
            onboarding
                .create_cluster(&provider, &cluster, Some(&kubeconfig))
                .await
                .unwrap();
            if c % 10 == 0 {
                onboarding
                    .cluster_labels()
                    .create(
                        &keys::cluster(&provider, &name),
                        &ClusterLabel {
                            cluster_label: "edge".into(),
                        },
                    )
                    .await
                    .unwrap();
            }
        }
    }
    start.elapsed()
}

/// The mean time of `RUNS` answers to `path`.
async fn time(app: &axum::Router, path: &str) -> Duration {
    let start = Instant::now();
    for _ in 0..RUNS {
        let resp = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        resp.into_body().collect().await.unwrap();
    }
    start.elapsed() / RUNS
}

async fn measure(store: Arc<dyn ResourceStore>, name: &str, n: usize, out: &mut String) {
    let orch = Orchestrator::new(store);
    let registered = register(&orch, n).await;
    let app = emco_service::app(orch, &Config::default(), Metrics::new());
    writeln!(
        out,
        "{name}: {n} clusters registered in {:.1} s",
        registered.as_secs_f64()
    )
    .unwrap();
    let middle = n / 2;
    for (what, path) in [
        ("first page of 50", "/ui/api/fleet".to_owned()),
        (
            "page in the middle",
            format!("/ui/api/fleet?offset={middle}&limit=50"),
        ),
        (
            "search one name",
            "/ui/api/fleet?q=cluster-04242".to_owned(),
        ),
        (
            "label edge, first page",
            "/ui/api/fleet?label=edge".to_owned(),
        ),
        (
            "not contacted yet, first page",
            "/ui/api/fleet?reach=unknown".to_owned(),
        ),
    ] {
        let took = time(&app, &path).await;
        writeln!(
            out,
            "  {what:<32} {:>8.1} ms  ({:.2} us per cluster)",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() * 1e6 / n as f64
        )
        .unwrap();
    }
}

fn main() {
    let n: usize = std::env::var("EMCO_BENCH_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = runtime.block_on(async {
        let mut out = format!("GET /ui/api/fleet, mean of {RUNS} answers\n");
        measure(
            Arc::new(InMemoryResourceStore::new()),
            "memory",
            n,
            &mut out,
        )
        .await;
        let config = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let store = emco_service::open_store(&config).await.unwrap();
        measure(store, "embedded (redb)", n, &mut out).await;
        out
    });
    print!("{table}");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../bench-results/dashboard.txt"
    );
    std::fs::write(path, &table).unwrap();
}
