//! Restart recovery after SIGKILL: a child process instantiates a context of 50 clusters
//! (AppContext on the real etcd, clusters in a kubesim fleet run by this test), is killed in the
//! middle, and a new engine here finishes the job with every object applied exactly once and
//! every status Applied.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{
    AppSpec, Env, applied_count, assert_config_maps, clusters, config_map, context, status, until,
};
use emco_appcontext::AppContext;
use emco_appcontext::context::QueueStatus;
use emco_core::lifecycle::{AppContextStatus, RsyncEvent};
use emco_rsync::engine::Rsync;
use kubesim::Fault;
use tokio_util::sync::CancellationToken;

const CLUSTERS: usize = 50;
const RESOURCES: usize = 10;
const CHILD: &str = "child_engine_instantiates_from_kubeconfigs";

/// The child side: run only by the parent test, through environment variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper run as a child process by sigkill_during_instantiate_loses_nothing"]
async fn child_engine_instantiates_from_kubeconfigs() {
    let (Ok(endpoint), Ok(dir), Ok(ctx), Ok(prefix)) = (
        std::env::var("EMCO_TEST_ETCD"),
        std::env::var("EMCO_RSYNC_CHILD_KUBECONFIGS"),
        std::env::var("EMCO_RSYNC_CHILD_CONTEXT"),
        std::env::var("EMCO_RSYNC_CHILD_PREFIX"),
    ) else {
        eprintln!("SKIPPED {CHILD}: only the restart test runs it");
        return;
    };
    let resolver = common::resolver_from_kubeconfigs(&dir, CLUSTERS).await;
    let rsync = Rsync::builder()
        .store(common::etcd(&endpoint, &prefix).await)
        .connectors(resolver)
        .concurrency(8, 2)
        .build()
        .unwrap();
    rsync.start(CancellationToken::new()).await.unwrap();
    let id: u64 = ctx.parse().unwrap();
    rsync.instantiate(id).await.unwrap();
    rsync.wait_idle(id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_instantiate_loses_nothing() {
    let Ok(endpoint) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!("SKIPPED sigkill_during_instantiate_loses_nothing: EMCO_TEST_ETCD is not set");
        return;
    };
    let env = Env::start(CLUSTERS).await;
    let dir = tempfile::tempdir().unwrap();
    env.fleet.write_kubeconfigs(dir.path()).await.unwrap();
    // Slow clusters so that the kill lands in the middle.
    for name in env.fleet.cluster_names() {
        env.fleet.set_fault(&name, Fault::latency(100)).unwrap();
    }
    let prefix = emco_appcontext::conformance::unique_prefix("/emco-rs-test/restart-");
    let store = common::etcd(&endpoint, &prefix).await;
    let cs = clusters(CLUSTERS);
    let cms: Vec<(String, String)> = (0..RESOURCES)
        .map(|i| {
            let name = format!("cm{i}");
            (
                format!("{name}+ConfigMap"),
                config_map(&name, &format!("v{i}")),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = cms.iter().map(|(n, y)| (n.as_str(), y.as_str())).collect();
    let ctx = context(Arc::clone(&store), &[AppSpec::new("app", &cs, &refs)]).await;

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", CHILD, "--ignored", "--nocapture"])
        .env("EMCO_TEST_ETCD", &endpoint)
        .env("EMCO_RSYNC_CHILD_KUBECONFIGS", dir.path())
        .env("EMCO_RSYNC_CHILD_CONTEXT", ctx.id().to_string())
        .env("EMCO_RSYNC_CHILD_PREFIX", &prefix)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let total = CLUSTERS * RESOURCES;
    until("the child to apply part of the context", || async {
        applied_count(&ctx).await >= total / 4
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let before = applied_count(&ctx).await;
    assert!(before < total, "the kill came too late to test anything");
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiating);
    assert!(
        AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .contains(&ctx.id())
    );

    for name in env.fleet.cluster_names() {
        env.fleet.set_fault(&name, Fault::none()).unwrap();
    }
    let rsync = env.engine(Arc::clone(&store));
    rsync.start(CancellationToken::new()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;

    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    let (_, not_applied) = common::resource_statuses(&ctx).await;
    assert!(not_applied.is_empty(), "{not_applied:#?}");
    assert_eq!(applied_count(&ctx).await, total);
    assert_eq!(
        common::queue(&ctx).await,
        [(RsyncEvent::Instantiate, QueueStatus::Done)]
    );
    assert!(
        !AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .contains(&ctx.id())
    );
    // Every object exactly once, with its content, on every cluster.
    assert_config_maps(&env, &ctx, RESOURCES).await;
    // Leave etcd as clean as we found it: the context and its registry entries.
    store.delete_prefix("/").await.unwrap();
}
