//! Restart recovery after SIGKILL: a child process instantiates a context of 50 clusters
//! (AppContext on the real etcd, clusters in a kubesim fleet run by this test), is killed in the
//! middle, and a new engine here finishes the job with every object applied exactly once and
//! every status Applied.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

mod common;

use std::sync::Arc;

use common::{Crash, applied_count, assert_config_maps, status};
use emco_appcontext::AppContext;
use emco_appcontext::context::QueueStatus;
use emco_core::lifecycle::{AppContextStatus, RsyncEvent};
use tokio_util::sync::CancellationToken;

const CLUSTERS: usize = 50;
const RESOURCES: usize = 10;
const CHILD: &str = "child_engine_instantiates_from_kubeconfigs";

/// The child side: run only by the parent test, through environment variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper run as a child process by sigkill_during_instantiate_loses_nothing"]
async fn child_engine_instantiates_from_kubeconfigs() {
    common::child_instantiates(|b| b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_instantiate_loses_nothing() {
    let Ok(endpoint) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!("SKIPPED sigkill_during_instantiate_loses_nothing: EMCO_TEST_ETCD is not set");
        return;
    };
    let crash = Crash::start(&endpoint, "restart", CLUSTERS, RESOURCES).await;
    let (env, store, ctx, total) = (&crash.env, &crash.store, &crash.ctx, crash.total);
    crash.kill_midway(crash.spawn(CHILD), 4).await;
    assert_eq!(status(ctx).await, AppContextStatus::Instantiating);
    assert!(
        AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .contains(&ctx.id())
    );

    let rsync = env.engine(Arc::clone(store));
    rsync.start(CancellationToken::new()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;

    assert_eq!(status(ctx).await, AppContextStatus::Instantiated);
    let (_, not_applied) = common::resource_statuses(ctx).await;
    assert!(not_applied.is_empty(), "{not_applied:#?}");
    assert_eq!(applied_count(ctx).await, total);
    assert_eq!(
        common::queue(ctx).await,
        [(RsyncEvent::Instantiate, QueueStatus::Done)]
    );
    assert!(
        !AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .contains(&ctx.id())
    );
    // Every object exactly once, with its content, on every cluster.
    assert_config_maps(env, ctx, RESOURCES).await;
    // Leave etcd as clean as we found it: the context and its registry entries.
    store.delete_prefix("/").await.unwrap();
}
