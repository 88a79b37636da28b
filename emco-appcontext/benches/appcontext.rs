//! Writes and reads back an AppContext of about 100,000 keys (10 apps x 1,000 clusters x 9
//! resources, plus app and cluster keys) on every AppContext backend, and 10,000 resource-store
//! objects on every resource backend; prints keys/s and bytes stored and writes the table to
//! `bench-results/appcontext.txt` at the workspace root.
//!
//! `cargo bench -p emco-appcontext`; set `EMCO_TEST_ETCD` / `EMCO_TEST_MONGO` to include etcd and
//! MongoDB.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_store::embedded::RedbBuilder;
use emco_store::etcd::EtcdBuilder;
use emco_store::mongo::MongoBuilder;
use emco_store::{
    AppContextStore, InMemoryAppContextStore, InMemoryResourceStore, ResourceKey, ResourceStore,
};

const APPS: usize = 10;
const CLUSTERS: usize = 1_000;
const RESOURCES: usize = 9;
const OBJECTS: usize = 10_000;

fn yaml(app: usize, cluster: usize, r: usize) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm{r}\n  labels:\n    app: app{app}\n\
         data:\n  cluster: c{cluster}\n  payload: {}\n",
        "x".repeat(64)
    )
}

struct Row {
    backend: String,
    what: &'static str,
    keys: usize,
    write_kps: f64,
    read_kps: f64,
    bytes: u64,
}

async fn bench_context(name: &str, store: Arc<dyn AppContextStore>) -> emco_core::Result<Row> {
    let meta = CompositeAppMeta {
        project: "bench".into(),
        ..Default::default()
    };
    let ctx = AppContext::create(Arc::clone(&store), &meta).await?;
    let started = Instant::now();
    let mut w = ctx.writer();
    for a in 0..APPS {
        let app = format!("app{a}");
        w.add_app(&app)?;
        for c in 0..CLUSTERS {
            let cluster = format!("provider+c{c}");
            w.add_cluster(&app, &cluster, Some("1"))?;
            for r in 0..RESOURCES {
                w.add_resource(&app, &cluster, &format!("cm{r}+ConfigMap"), &yaml(a, c, r))?;
            }
        }
    }
    w.flush().await?;
    let write = started.elapsed();
    let started = Instant::now();
    let kvs = store.list_all(ctx.root_key(), false).await?;
    let read = started.elapsed();
    let bytes = kvs
        .iter()
        .map(|kv| (kv.key.len() + kv.value.len()) as u64)
        .sum();
    let keys = kvs.len();
    ctx.delete().await?;
    Ok(Row {
        backend: name.to_owned(),
        what: "AppContext",
        keys,
        write_kps: keys as f64 / write.as_secs_f64(),
        read_kps: keys as f64 / read.as_secs_f64(),
        bytes,
    })
}

async fn bench_resources(name: &str, store: &dyn ResourceStore) -> emco_core::Result<Row> {
    let run = format!("bench{}", rand::random::<u32>());
    let root = ResourceKey::root().child("project", run);
    store
        .create(&root, &serde_json::json!({"metadata": {"name": "p"}}))
        .await?;
    let started = Instant::now();
    let mut bytes = 0u64;
    for i in 0..OBJECTS {
        let doc = serde_json::json!({
            "metadata": {"name": format!("c{i}"), "description": "x".repeat(64)},
            "spec": {"labels": ["edge", format!("zone{}", i % 10)]},
        });
        bytes += doc.to_string().len() as u64;
        store
            .create(&root.child("cluster", format!("c{i}")), &doc)
            .await?;
    }
    let write = started.elapsed();
    let started = Instant::now();
    let all = store.list(&root, "cluster", &[]).await?;
    let read = started.elapsed();
    for (k, _) in &all {
        store.delete(k).await?;
    }
    store.delete(&root).await?;
    Ok(Row {
        backend: name.to_owned(),
        what: "resources",
        keys: all.len(),
        write_kps: OBJECTS as f64 / write.as_secs_f64(),
        read_kps: all.len() as f64 / read.as_secs_f64(),
        bytes,
    })
}

async fn run() -> emco_core::Result<String> {
    let mut rows = Vec::new();
    let dir = tempfile::tempdir()
        .map_err(|e| emco_core::Error::unavailable("no temp dir").with_source(e))?;

    rows.push(bench_context("memory", Arc::new(InMemoryAppContextStore::new())).await?);
    let redb = RedbBuilder::new()
        .with_path(dir.path().join("bench.redb"))
        .build()?;
    let mut row = bench_context("redb", redb.app_context_store()).await?;
    row.backend = format!("redb (file {} B)", redb.file_size()?);
    rows.push(row);
    match std::env::var("EMCO_TEST_ETCD") {
        Ok(url) => {
            let etcd = EtcdBuilder::new().with_endpoints([url]).build().await?;
            rows.push(bench_context("etcd", Arc::new(etcd)).await?);
        }
        Err(_) => eprintln!("SKIPPED: EMCO_TEST_ETCD not set; no etcd figures"),
    }

    rows.push(bench_resources("memory", &InMemoryResourceStore::new()).await?);
    rows.push(bench_resources("redb", redb.resource_store().as_ref()).await?);
    match std::env::var("EMCO_TEST_MONGO") {
        Ok(uri) => {
            let db = format!("emco_rs_bench_{}", rand::random::<u32>());
            let mongo = MongoBuilder::new()
                .with_uri(uri)
                .with_database(db)
                .build()
                .await?;
            rows.push(bench_resources("mongodb (nx-27017)", &mongo).await?);
        }
        Err(_) => eprintln!("SKIPPED: EMCO_TEST_MONGO not set; no MongoDB figures"),
    }

    for r in &rows {
        eprintln!("done: {} {}", r.backend, r.what);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<11} {:>8} {:>14} {:>14} {:>14}",
        "backend", "store", "keys", "write keys/s", "read keys/s", "bytes stored"
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "{:<28} {:<11} {:>8} {:>14.0} {:>14.0} {:>14}",
            r.backend, r.what, r.keys, r.write_kps, r.read_kps, r.bytes
        );
    }
    Ok(out)
}

fn main() {
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a runtime: {e}");
            return;
        }
    };
    match rt.block_on(run()) {
        Ok(table) => {
            print!("{table}");
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench-results");
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(dir.join("appcontext.txt"), &table));
            if let Err(e) = written {
                eprintln!("cannot write bench-results/appcontext.txt: {e}");
            }
        }
        Err(e) => eprintln!("benchmark failed: {e}"),
    }
}
