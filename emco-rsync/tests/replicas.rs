//! Several engines (replicas) on one AppContext store: each context is run by one of them, a
//! terminate queued through one replica stops the instantiate another runs, and when a replica
//! is killed with SIGKILL in the middle of an instantiate of 100 clusters, another takes the
//! context over and finishes it with every object applied exactly once.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    Crash, Env, applied_count, assert_config_maps, clusters, config_map_app, context, status, until,
};
use emco_appcontext::context::QueueStatus;
use emco_appcontext::{AppContext, AppContextStore, InMemoryAppContextStore};
use emco_core::lifecycle::{AppContextStatus, RsyncEvent};
use emco_rsync::engine::{ReplicaConfig, Rsync};
use kubesim::Fault;
use tokio_util::sync::CancellationToken;

const CHILD: &str = "child_replica_instantiates";
/// The replicas' time to live: short, so the test is quick; servers use seconds.
const TTL: Duration = Duration::from_millis(1500);

/// The replica owning context `ctx`, if any.
async fn owner(store: &dyn AppContextStore, ctx: u64) -> Option<String> {
    store
        .get(&format!("/rsyncowner/{ctx}/"))
        .await
        .unwrap()
        .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
}

/// A started replica named `id` of `env`'s engine on `store`.
async fn replica(env: &Env, store: &Arc<dyn AppContextStore>, id: &str) -> Rsync {
    let rsync = env
        .builder(Arc::clone(store))
        .replica(ReplicaConfig::new(id, TTL))
        .build()
        .unwrap();
    rsync.start(CancellationToken::new()).await.unwrap();
    rsync
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminate_through_one_replica_stops_the_instantiate_another_runs() {
    let env = Env::start(4).await;
    // c1 is down: the instantiate keeps retrying it until the terminate arrives.
    env.fleet.set_fault("c1", Fault::down()).unwrap();
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let (a, b) = (
        replica(&env, &store, "a").await,
        replica(&env, &store, "b").await,
    );
    let ctx = context(Arc::clone(&store), &[config_map_app(&clusters(4), 20)]).await;
    a.instantiate(ctx.id()).await.unwrap();
    assert_eq!(owner(store.as_ref(), ctx.id()).await.as_deref(), Some("a"));
    until("a to apply the clusters that answer", || async {
        applied_count(&ctx).await >= 60
    })
    .await;
    // b queues the terminate; a, the owner, gives way and runs it.
    b.terminate(ctx.id()).await.unwrap();
    assert_eq!(owner(store.as_ref(), ctx.id()).await.as_deref(), Some("a"));
    until("a to cut the instantiate short", || async {
        ctx.event_queue().await.unwrap()[0].status == QueueStatus::Skip
    })
    .await;
    env.fleet.set_fault("c1", Fault::none()).unwrap();
    until("the terminate to complete", || async {
        status(&ctx).await == AppContextStatus::Terminated
    })
    .await;
    a.wait_idle(ctx.id()).await;
    assert_eq!(
        common::queue(&ctx).await,
        [
            (RsyncEvent::Instantiate, QueueStatus::Skip),
            (RsyncEvent::Terminate, QueueStatus::Done)
        ]
    );
    assert_eq!(owner(store.as_ref(), ctx.id()).await, None, "not released");
    assert_config_maps(&env, &ctx, 0).await;
}

/// A context deleted without rsync finishing it (its group deleted, or discarded by the loser
/// of a race) leaves no owner key behind: a round removes it, whoever held it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_keys_of_deleted_contexts_are_removed() {
    let env = Env::start(1).await;
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let a = replica(&env, &store, "a").await;
    let kept = context(Arc::clone(&store), &[config_map_app(&clusters(1), 1)]).await;
    let gone = context(Arc::clone(&store), &[config_map_app(&clusters(1), 1)]).await;
    for (id, holder) in [(kept.id(), "b"), (gone.id(), "b"), (7, "a")] {
        store
            .put(&format!("/rsyncowner/{id}/"), holder.into())
            .await
            .unwrap();
    }
    gone.delete().await.unwrap();
    until("the owner keys of missing contexts to go", || async {
        owner(store.as_ref(), gone.id()).await.is_none() && owner(store.as_ref(), 7).await.is_none()
    })
    .await;
    assert_eq!(owner(store.as_ref(), kept.id()).await.as_deref(), Some("b"));
    drop(a);
}

/// The child side: replica `a`, run only by the parent test, through environment variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper run as a child process by a_killed_replica_s_instantiate_is_finished_by_another"]
async fn child_replica_instantiates() {
    common::child_instantiates(|b| b.replica(ReplicaConfig::new("a", TTL))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_s_instantiate_is_finished_by_another() {
    const CLUSTERS: usize = 100;
    const RESOURCES: usize = 5;
    let Ok(endpoint) = std::env::var("EMCO_TEST_ETCD") else {
        assert!(
            std::env::var("CI").is_err(),
            "EMCO_TEST_ETCD must be set in CI"
        );
        eprintln!(
            "SKIPPED a_killed_replica_s_instantiate_is_finished_by_another: EMCO_TEST_ETCD is not set"
        );
        return;
    };
    let crash = Crash::start(&endpoint, "replicas", CLUSTERS, RESOURCES).await;
    let (env, store, ctx, total) = (&crash.env, &crash.store, &crash.ctx, crash.total);
    // Replicas b and c run from the start and leave the context to its owner while it lives.
    let (b, c) = (
        replica(env, store, "b").await,
        replica(env, store, "c").await,
    );
    let before = crash.kill_midway(crash.spawn(CHILD), 5).await;
    let killed = Instant::now();
    assert_eq!(owner(store.as_ref(), ctx.id()).await.as_deref(), Some("a"));

    let taker = loop {
        if let Some(o) = owner(store.as_ref(), ctx.id()).await.filter(|o| o != "a") {
            break Some(o);
        }
        if status(ctx).await == AppContextStatus::Instantiated {
            break None;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "no replica took the context over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let takeover = killed.elapsed();
    until("the instantiate to complete", || async {
        status(ctx).await == AppContextStatus::Instantiated
    })
    .await;
    let finished = killed.elapsed();
    eprintln!(
        "replica takeover: {CLUSTERS} clusters x {RESOURCES} objects, {before} applied by the killed \
         replica; taken over by {taker:?} {takeover:?} after the kill (ttl {TTL:?}), instantiated \
         {finished:?} after it"
    );
    // Its last heartbeat came at most a third of the time to live before the kill.
    assert!(
        takeover >= TTL * 2 / 3,
        "taken over before the dead replica's time to live ran out"
    );
    assert_eq!(applied_count(ctx).await, total);
    assert_config_maps(env, ctx, RESOURCES).await;
    // Both survivors see the same status.
    for r in [&b, &c] {
        r.wait_idle(ctx.id()).await;
    }
    let other = AppContext::load(Arc::clone(store), ctx.id()).await.unwrap();
    assert_eq!(status(&other).await, AppContextStatus::Instantiated);
    // The taker keeps the deployed context, following its readiness.
    assert_eq!(owner(store.as_ref(), ctx.id()).await, taker);

    // Then a terminate through b, whichever took the instantiate over.
    b.terminate(ctx.id()).await.unwrap();
    until("the terminate to complete", || async {
        status(ctx).await == AppContextStatus::Terminated
    })
    .await;
    assert_config_maps(env, ctx, 0).await;
    until("the terminated context to be released", || async {
        owner(store.as_ref(), ctx.id()).await.is_none()
    })
    .await;
    store.delete_prefix("/").await.unwrap();
}
