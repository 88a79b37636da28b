//! Several engines (replicas) on one AppContext store: each context is run by one of them, a
//! terminate queued through one replica stops the instantiate another runs, and when a replica
//! is killed with SIGKILL in the middle of an instantiate of 100 clusters, another takes the
//! context over and finishes it with every object applied exactly once; and one cut off from
//! etcd (alive) lands nothing after another took its work over (fencing). Replicas that share
//! large operations by cluster each work on their own part, and a killed one's part is finished
//! by the others, nothing applied twice.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

mod common;

use emco_core::ContextId;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    Crash, Env, applied_count, assert_config_maps, clusters, config_map_app, context, status, until,
};
use emco_appcontext::AppContext;
use emco_appcontext::context::QueueStatus;
use emco_core::lifecycle::{AppContextStatus, RsyncEvent};
use emco_rsync::engine::{ContextStatusExt, ReplicaConfig, Rsync};
use emco_store::{AppContextStore, InMemoryAppContextStore};
use kubesim::Fault;
use tokio_util::sync::CancellationToken;

const CHILD: &str = "child_replica_instantiates";
/// The replicas' time to live: short, so the test is quick; servers use seconds.
const TTL: Duration = Duration::from_millis(1500);

/// The replica owning context `ctx`, if any.
async fn owner(store: &dyn AppContextStore, ctx: ContextId) -> Option<String> {
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
    for (id, holder) in [(kept.id(), "b"), (gone.id(), "b"), (ContextId::new(7), "a")] {
        store
            .put(&format!("/rsyncowner/{id}/"), holder.into())
            .await
            .unwrap();
    }
    gone.delete().await.unwrap();
    until("the owner keys of missing contexts to go", || async {
        owner(store.as_ref(), gone.id()).await.is_none()
            && owner(store.as_ref(), ContextId::new(7)).await.is_none()
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
    let Some(endpoint) = test_etcd("a_killed_replica_s_instantiate_is_finished_by_another") else {
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

/// The etcd of the test command, or `None` (a loud skip) outside CI.
fn test_etcd(test: &str) -> Option<String> {
    let endpoint = std::env::var("EMCO_TEST_ETCD").ok();
    if endpoint.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "EMCO_TEST_ETCD must be set in CI"
        );
        eprintln!("SKIPPED {test}: EMCO_TEST_ETCD is not set");
    }
    endpoint
}

/// A replica of the test, and what stops it cleanly.
struct Running {
    rsync: Rsync,
    stop: CancellationToken,
}

async fn running(builder: emco_rsync::engine::RsyncBuilder, id: &str) -> Running {
    running_as(builder, ReplicaConfig::new(id, TTL)).await
}

/// [`running`] as `replica` says.
async fn running_as(builder: emco_rsync::engine::RsyncBuilder, replica: ReplicaConfig) -> Running {
    let rsync = builder.replica(replica).build().unwrap();
    let stop = CancellationToken::new();
    rsync.start(stop.clone()).await.unwrap();
    Running { rsync, stop }
}

/// The keys of context `ctx` its operations write (resource statuses, the context's status and
/// states, its event queue) with their revisions: not the readiness a follower keeps writing.
async fn work_keys(store: &dyn AppContextStore, ctx: ContextId) -> Vec<(String, u64)> {
    use emco_appcontext::context::ContextKey;
    let root = AppContext::prefix(ctx);
    store
        .list_all(&root, true)
        .await
        .unwrap()
        .into_iter()
        .filter(|kv| {
            !matches!(
                ContextKey::parse(&root, &kv.key),
                Some(ContextKey::ReadyStatus(..) | ContextKey::ClusterStatus(..))
            )
        })
        .map(|kv| (kv.key, kv.mod_revision))
        .collect()
}

/// How many resource statuses of `ctx` say `status`.
async fn statuses(ctx: &AppContext, status: &str) -> usize {
    let want = format!(r#"{{"Status":"{status}"}}"#);
    ctx.store()
        .list_all(ctx.root_key(), false)
        .await
        .unwrap()
        .iter()
        .filter(|kv| kv.key.contains("/resource/") && kv.value.as_ref() == want.as_bytes())
        .count()
}

/// Whether the last event queued for `ctx` is `event` and done: its last write (after the
/// status).
async fn done(ctx: &AppContext, event: RsyncEvent) -> bool {
    common::queue(ctx).await.last() == Some(&(event, QueueStatus::Done))
}

/// An operation on `ctx` during which replica `a` is cut off with `mode`, and `taker` takes it
/// over; its writes also reach `others`.
struct Phase<'a> {
    what: &'a str,
    ctx: &'a AppContext,
    others: &'a [ContextId],
    mode: common::proxy::Mode,
    taker: &'a str,
}

/// One cut of replica `a` in the middle of an operation on `ctx` (see the test).
struct Cut<'a> {
    proxy: &'a common::proxy::Proxy,
    store: &'a Arc<dyn AppContextStore>,
    a: &'a Rsync,
    a_log: &'a Arc<std::sync::Mutex<Vec<common::Call>>>,
    env: &'a Env,
}

impl Cut<'_> {
    /// Cuts `a` off as `phase` says once `started` holds, waits for the taker to own the
    /// context and for `done`; then lets `a` reach etcd again and checks that nothing it sends
    /// lands: the operation's keys (of the context and the others) are as the taker left them,
    /// and no apply or delete of `a` started after the takeover or ended after the taker's first.
    async fn run<S, SF, D, DF>(&self, phase: Phase<'_>, started: S, done: D)
    where
        S: FnMut() -> SF,
        SF: std::future::Future<Output = bool>,
        D: FnMut() -> DF,
        DF: std::future::Future<Output = bool>,
    {
        use common::proxy::Mode;
        let Phase {
            what,
            ctx,
            others,
            mode,
            taker,
        } = phase;
        until(&format!("{what}: a to be under way"), started).await;
        // Into the next batches: cut off in the middle of cluster requests.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            owner(self.store.as_ref(), ctx.id()).await.as_deref(),
            Some("a")
        );
        let cut = Instant::now();
        self.proxy.set(mode);
        // When the last read that still saw `a` started: the takeover came after it.
        let mut took = cut;
        loop {
            let now = Instant::now();
            if owner(self.store.as_ref(), ctx.id()).await.as_deref() == Some(taker) {
                break;
            }
            took = now;
            assert!(
                cut.elapsed() < Duration::from_secs(30),
                "{what}: {taker} did not take the context over"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        until(&format!("{what}: {taker} to finish it"), done).await;
        let mut ids = vec![ctx.id()];
        ids.extend_from_slice(others);
        let keys = |ids: Vec<ContextId>| async move {
            let mut all = Vec::new();
            for id in ids {
                all.extend(work_keys(self.store.as_ref(), id).await);
            }
            all
        };
        let before = keys(ids.clone()).await;
        self.proxy.set(Mode::Pass);
        // a hears of the takeover at its next round and ends its task; what it had sent (held
        // by a stall) lands now, or would.
        tokio::time::timeout(Duration::from_secs(30), self.a.wait_idle(ctx.id()))
            .await
            .expect("a kept running a context another replica took");
        tokio::time::sleep(TTL * 2).await;
        let after = keys(ids).await;
        let changed: Vec<_> = after.iter().filter(|k| !before.contains(k)).collect();
        let gone: Vec<_> = before.iter().filter(|k| !after.contains(k)).collect();
        assert!(
            changed.is_empty() && gone.is_empty(),
            "{what}: a write of the cut-off replica landed after the takeover: written \
             {changed:?}, removed {gone:?}"
        );

        let of_ctx = |calls: Vec<common::Call>| -> Vec<common::Call> {
            let id = ctx.id().to_string();
            calls.into_iter().filter(|c| c.ctx == id).collect()
        };
        let a_calls = of_ctx(self.a_log.lock().unwrap().clone());
        let b_calls = of_ctx(self.env.calls());
        let a_last = a_calls.iter().map(|c| c.at).max();
        let b_first = b_calls.iter().map(|c| c.started).filter(|s| *s > cut).min();
        assert!(
            !a_calls.is_empty() && b_first.is_some(),
            "{what}: both worked on it"
        );
        let late: Vec<String> = a_calls
            .iter()
            .filter(|c| c.started >= took)
            .map(|c| {
                format!(
                    "{} {} {} resources, {:?} after the cut",
                    if c.delete { "delete" } else { "apply" },
                    c.cluster,
                    c.names.len(),
                    c.started.duration_since(cut)
                )
            })
            .collect();
        assert!(
            late.is_empty(),
            "{what}: a started cluster requests after the takeover ({:?} after the cut): {late:?}",
            took.duration_since(cut)
        );
        assert!(
            a_last < b_first,
            "{what}: a cluster request of a ended after {taker}'s first"
        );
        eprintln!(
            "{what} ({mode:?}): a cut off after {} requests; its last ended {:?} after the cut, \
             {taker} took over {:?} after it",
            a_calls.len(),
            a_last.unwrap().saturating_duration_since(cut),
            took.duration_since(cut)
        );
    }
}

/// Fencing: a replica cut off from etcd (alive, its connection stalled, answered one way or
/// refused), through a proxy the test controls, while it runs an instantiate, an update and a
/// terminate. Another replica takes each over and finishes it; then the cut-off one reaches etcd
/// again (a stall delivers what it had sent) and nothing it sends lands: the keys of the
/// operation stay as the taker left them (its writes are refused by etcd: fenced by the owner
/// key's revision), and none of its cluster requests started after the takeover or ended after
/// the taker's first (its lease ran out first). A delay alone is no takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_replica_lands_nothing_after_the_takeover() {
    use common::proxy::{Mode, Proxy};
    const CLUSTERS: usize = 8;
    // A batch (one cluster's) takes about 1.8 s: longer than the lease of a replica cut off in
    // the middle of one, which must abandon it.
    const RESOURCES: usize = 30;
    const TOTAL: usize = CLUSTERS * RESOURCES;
    let Some(endpoint) = test_etcd("a_cut_off_replica_lands_nothing_after_the_takeover") else {
        return;
    };
    let env = Env::start(CLUSTERS).await;
    env.fault_all(&Fault::latency(60));
    let prefix = emco_store::conformance::unique_prefix("/emco-rs-test/fencing-");
    let store = common::etcd(&endpoint, &prefix).await;
    let server = tokio::net::lookup_host(endpoint.trim_start_matches("http://"))
        .await
        .unwrap()
        .next()
        .unwrap();
    let proxy = Proxy::start(server).await;
    let (a_resolver, a_log) = env.own_resolver();
    let a = running(
        // Two clusters at a time: the operation is under way for several batches.
        env.builder(common::etcd(&format!("http://{}", proxy.addr), &prefix).await)
            .connectors(a_resolver)
            .concurrency(2, 1),
        "a",
    )
    .await;
    let mut b = running(env.builder(Arc::clone(&store)), "b1").await;
    let cut = Cut {
        proxy: &proxy,
        store: &store,
        a: &a.rsync,
        a_log: &a_log,
        env: &env,
    };
    // Another replica in b's place: b leaves (its heartbeat removed), a takes what b held.
    let replace = |b: Running, next: &'static str, ctx: ContextId| {
        let (env, store) = (&env, &store);
        async move {
            b.stop.cancel();
            until("a to take the context back", || async {
                owner(store.as_ref(), ctx).await.as_deref() == Some("a")
            })
            .await;
            running(env.builder(Arc::clone(store)), next).await
        }
    };

    // An instantiate through a, whose etcd answers late (a delay is no takeover), then stalls.
    let first = context(
        Arc::clone(&store),
        &[config_map_app(&clusters(CLUSTERS), RESOURCES)],
    )
    .await;
    proxy.set(Mode::Delay(Duration::from_millis(20)));
    a.rsync.instantiate(first.id()).await.unwrap();
    cut.run(
        Phase {
            what: "instantiate",
            ctx: &first,
            others: &[],
            mode: Mode::Stall,
            taker: "b1",
        },
        || async { applied_count(&first).await >= TOTAL / 4 },
        || async {
            applied_count(&first).await == TOTAL && done(&first, RsyncEvent::Instantiate).await
        },
    )
    .await;
    assert_eq!(status(&first).await, AppContextStatus::Instantiated);
    assert_config_maps(&env, &first, RESOURCES).await;
    b = replace(b, "b2", first.id()).await;

    // An update through a, whose answers stop coming (its requests still land).
    let cms: Vec<(String, String)> = (0..RESOURCES)
        .map(|i| {
            (
                format!("cm{i}+ConfigMap"),
                common::config_map(&format!("cm{i}"), &format!("u{i}")),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = cms.iter().map(|(n, y)| (n.as_str(), y.as_str())).collect();
    let second = context(
        Arc::clone(&store),
        &[common::AppSpec::new("app", &clusters(CLUSTERS), &refs)],
    )
    .await;
    a.rsync.update(first.id(), second.id()).await.unwrap();
    cut.run(
        Phase {
            what: "update",
            ctx: &second,
            others: &[first.id()],
            mode: Mode::CutAnswers,
            taker: "b2",
        },
        || async { applied_count(&second).await >= TOTAL / 4 },
        // Done once the replaced context deleted what the new one no longer has.
        || async {
            applied_count(&second).await == TOTAL
                && done(&second, RsyncEvent::Update).await
                && done(&first, RsyncEvent::UpdateDelete).await
        },
    )
    .await;
    assert_eq!(status(&second).await, AppContextStatus::Updated);
    for i in 0..CLUSTERS {
        let cm = env.get(i, second.id(), "app", &cms[0].1).await.unwrap();
        assert_eq!(cm["data"]["value"], "u0");
    }
    b = replace(b, "b3", second.id()).await;

    // A terminate through a, whose connections are then refused.
    a.rsync.terminate(second.id()).await.unwrap();
    cut.run(
        Phase {
            what: "terminate",
            ctx: &second,
            others: &[],
            mode: Mode::Refuse,
            taker: "b3",
        },
        || async { statuses(&second, "Deleted").await >= TOTAL / 4 },
        || async { done(&second, RsyncEvent::Terminate).await },
    )
    .await;
    assert_eq!(status(&second).await, AppContextStatus::Terminated);
    for i in 0..CLUSTERS {
        assert!(env.get(i, second.id(), "app", &cms[0].1).await.is_none());
    }
    b.stop.cancel();
    a.stop.cancel();
    store.delete_prefix("/").await.unwrap();
}

/// The call log of a replica's own connectors.
type Log = Arc<std::sync::Mutex<Vec<common::Call>>>;

/// A replica of `env`'s fleet on `store` that shares operations on at least 10 clusters, with
/// connectors and a call log of its own.
async fn sharing_replica(env: &Env, store: &Arc<dyn AppContextStore>, id: &str) -> (Running, Log) {
    let (resolver, log) = env.own_resolver();
    let builder = env.builder(Arc::clone(store)).connectors(resolver);
    let replica = running_as(builder, ReplicaConfig::new(id, TTL).sharing_from(10)).await;
    (replica, log)
}

/// Replicas a, b and c of `env`'s fleet sharing on a new store, once each has seen the others
/// beat (a round every third of the time to live), and a context of `resources` config maps on
/// every cluster of the fleet.
async fn sharing_trio(
    env: &Env,
    resources: usize,
) -> (Arc<dyn AppContextStore>, Vec<(Running, Log)>, AppContext) {
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let mut replicas = Vec::new();
    for id in ["a", "b", "c"] {
        replicas.push(sharing_replica(env, &store, id).await);
    }
    tokio::time::sleep(TTL / 2).await;
    let count = env.fleet.cluster_names().len();
    let ctx = context(
        Arc::clone(&store),
        &[config_map_app(&clusters(count), resources)],
    )
    .await;
    (store, replicas, ctx)
}

/// The (cluster, resource) pairs a call log applied (or deleted) successfully, with how often.
fn done_by(
    log: &std::sync::Mutex<Vec<common::Call>>,
    delete: bool,
) -> std::collections::HashMap<(String, String), usize> {
    let mut done = std::collections::HashMap::new();
    for call in log
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.ok && c.delete == delete)
    {
        for name in &call.names {
            *done
                .entry((call.cluster.clone(), name.clone()))
                .or_default() += 1;
        }
    }
    done
}

/// What shared operations leave in the store: shard records, outcomes, shard owner keys.
async fn shard_keys(store: &dyn AppContextStore, ctx: ContextId) -> Vec<String> {
    let mut keys = Vec::new();
    for prefix in [
        "/rsyncshard/".to_owned(),
        "/rsyncsharddone/".to_owned(),
        format!("/rsyncowner/{ctx}."),
    ] {
        keys.extend(
            store
                .list_all(&prefix, true)
                .await
                .unwrap()
                .into_iter()
                .map(|kv| kv.key),
        );
    }
    keys
}

/// An instantiate and a terminate of 30 clusters through three replicas that share operations
/// from 10 clusters: each replica works on its own third of the clusters, every object is
/// applied (then deleted) exactly once in all, the replica that owns the context follows the
/// readiness of all of them, and nothing of the shards is left in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_deployment_is_shared_by_cluster_among_the_replicas() {
    const CLUSTERS: usize = 30;
    const RESOURCES: usize = 3;
    let env = Env::start(CLUSTERS).await;
    let (store, replicas, ctx) = sharing_trio(&env, RESOURCES).await;
    let mut ready = replicas[0].0.rsync.subscribe_ready(ctx.id());
    replicas[0].0.rsync.instantiate(ctx.id()).await.unwrap();
    until("the shared instantiate to complete", || async {
        status(&ctx).await == AppContextStatus::Instantiated
    })
    .await;
    assert_eq!(applied_count(&ctx).await, CLUSTERS * RESOURCES);
    assert_config_maps(&env, &ctx, RESOURCES).await;

    let mut all: std::collections::HashMap<(String, String), usize> =
        std::collections::HashMap::new();
    let mut owned: Vec<std::collections::HashSet<String>> = Vec::new();
    for (_, log) in &replicas {
        let applied = done_by(log, false);
        let clusters: std::collections::HashSet<String> =
            applied.keys().map(|(c, _)| c.clone()).collect();
        assert_eq!(
            clusters.len(),
            CLUSTERS / 3,
            "each replica applies a third of the clusters"
        );
        for (k, n) in applied {
            *all.entry(k).or_default() += n;
        }
        owned.push(clusters);
    }
    assert_eq!(all.len(), CLUSTERS * RESOURCES, "every object applied");
    assert!(
        all.values().all(|&n| n == 1),
        "an object applied twice: {:?}",
        all.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    assert!(owned[0].is_disjoint(&owned[1]) && owned[1].is_disjoint(&owned[2]));
    assert!(shard_keys(store.as_ref(), ctx.id()).await.is_empty());
    until("one part done by each replica", || async {
        replicas.iter().all(|(r, _)| {
            let m = r.rsync.metrics();
            m.shards_run.get(&["Instantiate", "done"]) == 1
                && m.shards.get(&["Instantiate"]).unwrap_or(0.0) == 0.0
        })
    })
    .await;

    // The owner follows the readiness of every cluster; the others of none once their shard
    // ended.
    let followers = |r: &Rsync| r.metrics().readiness_followers.get(&[]).unwrap_or(0.0);
    until(
        "the owner to follow every cluster, the others none",
        || async {
            followers(&replicas[0].0.rsync) == CLUSTERS as f64
                && followers(&replicas[1].0.rsync) == 0.0
                && followers(&replicas[2].0.rsync) == 0.0
        },
    )
    .await;
    let mut seen = std::collections::HashSet::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while seen.len() < CLUSTERS {
            seen.insert(ready.next().await.unwrap().cluster);
        }
    })
    .await
    .expect("the owner to see every cluster ready");

    // A terminate through another replica is shared too.
    replicas[1].0.rsync.terminate(ctx.id()).await.unwrap();
    until("the shared terminate to complete", || async {
        status(&ctx).await == AppContextStatus::Terminated
    })
    .await;
    assert_config_maps(&env, &ctx, 0).await;
    let mut deleted = 0;
    for (_, log) in &replicas {
        let by = done_by(log, true);
        assert!(!by.is_empty(), "each replica deletes its share");
        assert!(by.values().all(|&n| n == 1));
        deleted += by.len();
    }
    assert_eq!(deleted, CLUSTERS * RESOURCES);
    assert!(shard_keys(store.as_ref(), ctx.id()).await.is_empty());
    until("no follower left", || async {
        replicas.iter().all(|(r, _)| followers(&r.rsync) == 0.0)
    })
    .await;
}

/// The child side of the shared crash test: replica `a`, sharing from 10 clusters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper run as a child process by a_killed_replica_s_share_is_finished_by_the_others"]
async fn child_sharing_replica_instantiates() {
    common::child_instantiates(|b| b.replica(ReplicaConfig::new("a", TTL).sharing_from(10))).await;
}

/// Three replicas share an instantiate of 60 clusters; the one that leads it (the context's
/// owner, in a child process) is killed with SIGKILL midway. The other two take its context and
/// its shard over: the instantiate completes with every object applied, neither survivor applies
/// an object twice, and none applies one the killed replica had recorded as applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_s_share_is_finished_by_the_others() {
    const CLUSTERS: usize = 60;
    const RESOURCES: usize = 4;
    let Some(endpoint) = test_etcd("a_killed_replica_s_share_is_finished_by_the_others") else {
        return;
    };
    let crash = Crash::start(&endpoint, "shared", CLUSTERS, RESOURCES).await;
    let (env, store, ctx, total) = (&crash.env, &crash.store, &crash.ctx, crash.total);
    // b and c beat before the child starts, so that it shares with both.
    let (b, b_log) = sharing_replica(env, store, "b").await;
    let (c, c_log) = sharing_replica(env, store, "c").await;
    let child = crash.spawn("child_sharing_replica_instantiates");
    until("the child to share the instantiate", || async {
        !store
            .list_all("/rsyncshard/", true)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    crash.kill_midway(child, 4).await;
    let killed = Instant::now();
    // What the killed replica applied: recorded as applied by the kill, not by b or c (the
    // statuses read first: a call is in its log before its status is recorded).
    let recorded = ctx.resource_statuses_listed().await.unwrap();
    let (pre_b, pre_c) = (done_by(&b_log, false), done_by(&c_log, false));
    let by_child: std::collections::HashSet<(String, String)> = recorded
        .into_iter()
        .filter(|(_, s)| *s == emco_core::lifecycle::RsyncStatus::Applied)
        .map(|((_, cluster, name), _)| (cluster, name))
        .filter(|k| !pre_b.contains_key(k) && !pre_c.contains_key(k))
        .collect();
    assert!(!by_child.is_empty(), "the killed replica applied nothing");
    until("the instantiate to complete", || async {
        status(ctx).await == AppContextStatus::Instantiated
    })
    .await;
    assert_eq!(applied_count(ctx).await, total);
    assert_config_maps(env, ctx, RESOURCES).await;
    let (by_b, by_c) = (done_by(&b_log, false), done_by(&c_log, false));
    assert!(
        !by_b.is_empty() && !by_c.is_empty(),
        "both survivors worked"
    );
    for (k, n) in by_b.iter().chain(by_c.iter()) {
        assert_eq!(*n, 1, "{k:?} applied {n} times by one survivor");
    }
    let both: Vec<_> = by_b.keys().filter(|k| by_c.contains_key(*k)).collect();
    assert!(both.is_empty(), "applied by both survivors: {both:?}");
    let again: Vec<_> = by_b
        .keys()
        .chain(by_c.keys())
        .filter(|k| by_child.contains(*k))
        .collect();
    assert!(again.is_empty(), "applied again after the kill: {again:?}");
    eprintln!(
        "shared instantiate: {CLUSTERS} clusters x {RESOURCES} objects; the killed leader applied \
         {} (recorded), b {} and c {} (each once); instantiated {:?} after the kill (ttl {TTL:?})",
        by_child.len(),
        by_b.len(),
        by_c.len(),
        killed.elapsed()
    );
    for r in [&b, &c] {
        r.rsync.wait_idle(ctx.id()).await;
    }
    assert!(shard_keys(store.as_ref(), ctx.id()).await.is_empty());
    store.delete_prefix("/").await.unwrap();
}

/// The owner of a shared instantiate stops in the middle (its parts go on elsewhere) and a
/// terminate is queued through another replica, which takes the context over: the instantiate
/// is skipped and its parts withdrawn before the terminate runs, so nothing of it is applied
/// after the terminate (no object is left on the clusters) and nothing of the parts is left in
/// the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminate_withdraws_the_parts_of_a_shared_instantiate_its_owner_left() {
    const CLUSTERS: usize = 30;
    const RESOURCES: usize = 6;
    let env = Env::start(CLUSTERS).await;
    // Slow enough that the parts are still at work when the terminate comes.
    env.fault_all(&Fault::latency(300));
    let (store, replicas, ctx) = sharing_trio(&env, RESOURCES).await;
    let [(a, a_log), (b, b_log), (c, c_log)] = <[_; 3]>::try_from(replicas).ok().unwrap();
    a.rsync.instantiate(ctx.id()).await.unwrap();
    until("a part of the shared instantiate applied", || async {
        applied_count(&ctx).await >= CLUSTERS * RESOURCES / 5
    })
    .await;
    assert_eq!(
        store.list_all("/rsyncshard/", true).await.unwrap().len(),
        3,
        "the instantiate is shared"
    );
    a.stop.cancel();
    b.rsync.terminate(ctx.id()).await.unwrap();
    until("the terminate to complete", || async {
        status(&ctx).await == AppContextStatus::Terminated
    })
    .await;
    assert_eq!(
        common::queue(&ctx).await,
        [
            (RsyncEvent::Instantiate, QueueStatus::Skip),
            (RsyncEvent::Terminate, QueueStatus::Done)
        ]
    );
    env.fault_all(&Fault::none());
    // Anything of the instantiate still going on would land now.
    tokio::time::sleep(TTL).await;
    assert_config_maps(&env, &ctx, 0).await;
    // Every apply of the instantiate ended before the terminate's first delete started.
    let calls: Vec<common::Call> = [&a_log, &b_log, &c_log]
        .iter()
        .flat_map(|log| log.lock().unwrap().clone())
        .collect();
    let first_delete = calls
        .iter()
        .filter(|c| c.delete)
        .map(|c| c.started)
        .min()
        .expect("the terminate deleted");
    let late: Vec<_> = calls
        .iter()
        .filter(|c| !c.delete && c.at > first_delete)
        .map(|c| (&c.cluster, &c.names))
        .collect();
    assert!(
        late.is_empty(),
        "applies after the terminate began: {late:?}"
    );
    let withdrawn: u64 = [&b, &c]
        .iter()
        .map(|r| {
            r.rsync
                .metrics()
                .shards_run
                .get(&["Instantiate", "withdrawn"])
        })
        .sum();
    assert!(
        withdrawn >= 1,
        "no part of the instantiate was still at work"
    );
    assert!(shard_keys(store.as_ref(), ctx.id()).await.is_empty());
}

/// A shared instantiate of a deployment that is instantiated already (as one that failed is
/// instantiated again) applies everything again, as it would alone: an object removed from a
/// cluster meanwhile is there again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_instantiate_again_applies_what_is_gone() {
    use k8s_openapi::api::core::v1::ConfigMap;
    const CLUSTERS: usize = 12;
    const RESOURCES: usize = 2;
    let env = Env::start(CLUSTERS).await;
    let (_store, replicas, ctx) = sharing_trio(&env, RESOURCES).await;
    replicas[0].0.rsync.instantiate(ctx.id()).await.unwrap();
    until("the shared instantiate to complete", || async {
        status(&ctx).await == AppContextStatus::Instantiated
    })
    .await;
    // cm0 removed by hand from every cluster.
    for conn in &env.direct {
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(conn.client().clone(), "default");
        api.delete("cm0", &kube::api::DeleteParams::default())
            .await
            .unwrap();
    }
    replicas[1].0.rsync.instantiate(ctx.id()).await.unwrap();
    until("the second instantiate to complete", || async {
        done(&ctx, RsyncEvent::Instantiate).await && common::queue(&ctx).await.len() == 2
    })
    .await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert_config_maps(&env, &ctx, RESOURCES).await;
}
