//! The engine against kubesim clusters with the in-memory AppContext store (and one run on etcd):
//! queue, statuses, retries, stop, terminate during instantiate, dependencies, hooks, update,
//! rollback, restart.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

mod common;

use emco_core::ContextId;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{AppSpec, DEPLOYMENT, Env, clusters, config_map, context, status, until};
use emco_appcontext::AppContext;
use emco_appcontext::context::{AppDependency, HookGroups, QueueElement, QueueStatus, Registry};
use emco_core::lifecycle::{AppContextStatus, ClusterReadiness, RsyncEvent, RsyncStatus};
use emco_rsync::engine::ContextStatusExt;
use emco_store::{AppContextStore, InMemoryAppContextStore};
use kubesim::Fault;
use tokio_util::sync::CancellationToken;

fn memory() -> Arc<dyn AppContextStore> {
    Arc::new(InMemoryAppContextStore::new())
}

/// The statuses of the resources of `app` on `cluster`; `None` for one not written yet.
async fn resource_statuses(ctx: &AppContext, app: &str, cluster: &str) -> Vec<Option<RsyncStatus>> {
    let mut out = Vec::new();
    for n in ctx.resources(app, cluster).await.unwrap() {
        out.push(ctx.resource_status(app, cluster, &n).await.unwrap());
    }
    out
}

/// Why each resource of `app` on `cluster` failed or retries (`Reason`, `Message` of its status
/// record); `None` for one that says nothing.
async fn reasons(ctx: &AppContext, app: &str, cluster: &str) -> Vec<Option<(String, String)>> {
    let mut out = Vec::new();
    for n in ctx.resources(app, cluster).await.unwrap() {
        let key = format!(
            "{}app/{app}/cluster/{cluster}/resource/{n}/status/",
            ctx.root_key()
        );
        let raw = ctx.store().get(&key).await.unwrap().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&raw.value).unwrap();
        let text = |k: &str| doc.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        out.push(text("Reason").zip(text("Message")));
    }
    out
}

/// The reasons of [`reasons`] alone.
async fn reason_words(ctx: &AppContext, app: &str, cluster: &str) -> Vec<Option<String>> {
    reasons(ctx, app, cluster)
        .await
        .into_iter()
        .map(|r| r.map(|(reason, _)| reason))
        .collect()
}

async fn all_statuses(ctx: &AppContext, app: &str, cs: &[String], want: RsyncStatus) -> bool {
    for c in cs {
        if resource_statuses(ctx, app, c)
            .await
            .iter()
            .any(|s| *s != Some(want))
        {
            return false;
        }
    }
    true
}

fn web_app(cs: &[String]) -> AppSpec {
    let cm = config_map("settings", "blue");
    AppSpec::new(
        "web",
        cs,
        &[("settings+ConfigMap", &cm), ("web+Deployment", DEPLOYMENT)],
    )
}

async fn instantiate_and_terminate_on(store: Arc<dyn AppContextStore>) {
    let env = Env::start(3).await;
    let cs = clusters(3);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let rsync = env.engine(Arc::clone(&store));
    rsync.start(CancellationToken::new()).await.unwrap();
    let mut ready = rsync.subscribe_ready(ctx.id());

    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Applied).await);
    for (i, c) in cs.iter().enumerate() {
        let obj = env
            .get(i, ctx.id(), "web", &config_map("settings", "blue"))
            .await
            .unwrap();
        assert_eq!(obj["data"]["value"], "blue");
        assert_eq!(
            obj["metadata"]["labels"]["emco/deployment-id"],
            format!("{}-web", ctx.id())
        );
        assert_eq!(
            ctx.cluster_ready_status("web", c).await.unwrap(),
            ClusterReadiness::Available
        );
    }
    // Every cluster reports its app ready (the Deployment becomes available after a delay).
    let mut seen = Vec::new();
    for _ in 0..3 {
        let n = tokio::time::timeout(Duration::from_secs(30), ready.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((n.ctx_id, n.app.as_str()), (ctx.id(), "web"));
        seen.push(n.cluster);
    }
    seen.sort();
    assert_eq!(seen, cs);
    assert!(
        AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .is_empty()
    );
    // What it did, as metrics: each cluster's two kinds applied once, reached, the context
    // Instantiated with nothing queued.
    let m = rsync.metrics();
    for c in &cs {
        assert_eq!(m.applied.get(&[c, "ConfigMap"]), 1);
        assert_eq!(m.applied.get(&[c, "Deployment"]), 1);
        assert_eq!(m.reachable.get(&[c]), Some(1.0));
    }
    assert_eq!(m.contexts_in(AppContextStatus::Instantiated), 1);
    assert!(m.batch_seconds.count(&["applied"]) >= 3);
    assert_eq!(m.queue_depth.get(&[&ctx.id().to_string()]), None);

    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Deleted).await);
    for i in 0..3 {
        assert!(
            env.get(i, ctx.id(), "web", &config_map("settings", "blue"))
                .await
                .is_none()
        );
    }
    for c in &cs {
        assert_eq!(rsync.metrics().deleted.get(&[c, "Deployment"]), 1);
    }
    assert_eq!(
        rsync.metrics().contexts_in(AppContextStatus::Instantiated),
        0
    );
    assert_eq!(rsync.metrics().contexts_in(AppContextStatus::Terminated), 1);
    let queue = ctx.event_queue().await.unwrap();
    let events: Vec<_> = queue.iter().map(|e| (e.event, e.status)).collect();
    assert_eq!(
        events,
        [
            (RsyncEvent::Instantiate, QueueStatus::Done),
            (RsyncEvent::Terminate, QueueStatus::Done)
        ]
    );
}

/// The readiness of every app of every context on a cluster is followed by one task of that
/// cluster: two contexts on three clusters are six followers in three tasks; a terminated
/// context's followers go at once, and the last one's take their tasks with them.
#[tokio::test]
async fn the_followers_of_a_cluster_share_one_task() {
    let env = Env::start(3).await;
    let store = memory();
    let cs = clusters(3);
    let web = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let cms = context(Arc::clone(&store), &[common::config_map_app(&cs, 2)]).await;
    let rsync = env.engine(Arc::clone(&store));
    rsync.start(CancellationToken::new()).await.unwrap();
    for ctx in [&web, &cms] {
        rsync.instantiate(ctx.id()).await.unwrap();
        rsync.wait_idle(ctx.id()).await;
    }
    let m = rsync.metrics();
    let counts = || {
        (
            m.readiness_followers.get(&[]).unwrap_or(0.0),
            m.readiness_clusters.get(&[]).unwrap_or(0.0),
        )
    };
    until("six followers in three tasks", || async {
        counts() == (6.0, 3.0)
    })
    .await;
    rsync.terminate(web.id()).await.unwrap();
    rsync.wait_idle(web.id()).await;
    until("the terminated context's followers gone", || async {
        counts() == (3.0, 3.0)
    })
    .await;
    rsync.terminate(cms.id()).await.unwrap();
    rsync.wait_idle(cms.id()).await;
    until("no follower and no task left", || async {
        counts() == (0.0, 0.0)
    })
    .await;
}

#[tokio::test]
async fn instantiate_and_terminate() {
    instantiate_and_terminate_on(memory()).await;
}

#[tokio::test]
async fn instantiate_and_terminate_on_etcd() {
    let Ok(endpoint) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!("SKIPPED instantiate_and_terminate_on_etcd: EMCO_TEST_ETCD is not set");
        return;
    };
    let store = emco_store::etcd::EtcdBuilder::new()
        .with_endpoints([endpoint])
        // Its own key space: other tests' engines on this etcd must not resume its contexts.
        .with_prefix(emco_store::conformance::unique_prefix(
            "/emco-rs-test/engine-",
        ))
        .build()
        .await
        .unwrap();
    instantiate_and_terminate_on(Arc::new(store)).await;
}

#[tokio::test]
async fn an_event_not_allowed_is_marked_error_and_skipped() {
    let env = Env::start(1).await;
    let store = memory();
    let ctx = context(Arc::clone(&store), &[web_app(&clusters(1))]).await;
    let rsync = env.engine(store);
    // Terminate is not allowed on a Created context; the instantiate after it still runs.
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(
        common::queue(&ctx).await,
        [
            (RsyncEvent::Terminate, QueueStatus::Error),
            (RsyncEvent::Instantiate, QueueStatus::Done)
        ]
    );
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
}

#[tokio::test]
async fn a_cluster_that_is_down_is_retried_without_blocking_the_others() {
    let env = Env::start(3).await;
    let store = memory();
    let cs = clusters(3);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    env.fleet.set_fault("c2", Fault::down()).unwrap();
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();

    until("c2 retrying and c1, c3 applied", || async {
        ctx.cluster_ready_status("web", &cs[1]).await.unwrap() == ClusterReadiness::Retrying
            && resource_statuses(&ctx, "web", &cs[1])
                .await
                .iter()
                .all(|s| *s == Some(RsyncStatus::Retrying))
            && all_statuses(
                &ctx,
                "web",
                &[cs[0].clone(), cs[2].clone()],
                RsyncStatus::Applied,
            )
            .await
    })
    .await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiating);
    let m = rsync.metrics();
    assert_eq!(m.reachable.get(&[&cs[1]]), Some(0.0));
    assert!(m.retries.get(&[&cs[1]]) >= 1);
    assert_eq!(m.retries.get(&[&cs[0]]), 0);
    assert_eq!(m.contexts_in(AppContextStatus::Instantiating), 1);
    // Each says why it retries, the cluster's answer, the tries so far and the next one's time.
    for why in reasons(&ctx, "web", &cs[1]).await {
        let (reason, message) = why.unwrap();
        assert_eq!(reason, "Unreachable");
        assert!(!message.is_empty());
    }
    for n in ctx.resources("web", &cs[1]).await.unwrap() {
        let key = format!(
            "{}app/web/cluster/{}/resource/{n}/status/",
            ctx.root_key(),
            cs[1]
        );
        let raw = ctx.store().get(&key).await.unwrap().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&raw.value).unwrap();
        assert!(doc["Attempts"].as_u64().is_some_and(|a| a >= 1), "{doc}");
        let next = doc["NextRetry"].as_str().unwrap();
        assert!(emco_core::time::parse_rfc3339(next).is_some(), "{doc}");
    }

    env.fleet.set_fault("c2", Fault::none()).unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Applied).await);
    // Applied: nothing left to explain.
    assert_eq!(reason_words(&ctx, "web", &cs[1]).await, [None, None]);
    assert_eq!(rsync.metrics().reachable.get(&[&cs[1]]), Some(1.0));
    assert_eq!(rsync.metrics().applied.get(&[&cs[1], "ConfigMap"]), 1);
    assert_eq!(
        ctx.cluster_ready_status("web", &cs[1]).await.unwrap(),
        ClusterReadiness::Available
    );
    assert!(
        env.get(1, ctx.id(), "web", &config_map("settings", "blue"))
            .await
            .is_some()
    );
}

/// Workers start a few at a time (two per permit of the global limit) and give their start
/// slot back when they back off: more unreachable clusters than slots never hold back the
/// reachable ones (src/engine/run/mod.rs `spawn_worker`).
#[tokio::test]
async fn more_clusters_down_than_start_slots_do_not_hold_back_the_others() {
    let env = Env::start(6).await;
    let store = memory();
    let cs = clusters(6);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    for down in ["c1", "c2", "c3", "c4"] {
        env.fleet.set_fault(down, Fault::down()).unwrap();
    }
    // One permit: two start slots, four clusters down before the two that answer.
    let rsync = env.builder(store).concurrency(1, 1).build().unwrap();
    rsync.instantiate(ctx.id()).await.unwrap();
    until("the two reachable clusters applied", || async {
        all_statuses(&ctx, "web", &cs[4..], RsyncStatus::Applied).await
    })
    .await;
    for down in &cs[..4] {
        assert!(
            resource_statuses(&ctx, "web", down)
                .await
                .iter()
                .all(|s| *s == Some(RsyncStatus::Retrying))
        );
    }
    for down in ["c1", "c2", "c3", "c4"] {
        env.fleet.set_fault(down, Fault::none()).unwrap();
    }
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Applied).await);
}

#[tokio::test]
async fn retries_run_out_when_a_maximum_is_set() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    env.fleet.set_fault("c1", Fault::down()).unwrap();
    let rsync = emco_rsync::engine::Rsync::builder()
        .store(store)
        .connectors(env.resolver.clone())
        .backoff(emco_rsync::engine::Backoff {
            initial: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
            max_retries: Some(3),
        })
        .build()
        .unwrap();
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::InstantiateFailed);
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Failed).await);
    for why in reasons(&ctx, "web", &cs[0]).await {
        let (reason, message) = why.unwrap();
        assert_eq!(reason, "Unreachable");
        assert!(
            message.starts_with("gave up after 4 attempts: "),
            "{message}"
        );
    }
    let applies = env.calls().iter().filter(|c| !c.delete).count();
    assert_eq!(applies, 4, "one try and three retries");
}

#[tokio::test]
async fn stop_while_retrying_fails_the_operation() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    env.fleet.set_fault("c1", Fault::down()).unwrap();
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();
    until("c1 retrying, c2 applied", || async {
        ctx.cluster_ready_status("web", &cs[0]).await.unwrap() == ClusterReadiness::Retrying
            && all_statuses(&ctx, "web", &cs[1..], RsyncStatus::Applied).await
    })
    .await;
    rsync.stop(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::InstantiateFailed);
    assert!(all_statuses(&ctx, "web", &cs[..1], RsyncStatus::Failed).await);
    assert!(all_statuses(&ctx, "web", &cs[1..], RsyncStatus::Applied).await);
    assert_eq!(
        reason_words(&ctx, "web", &cs[0]).await,
        [Some("Stopped".to_owned()), Some("Stopped".to_owned())]
    );
    let queue = ctx.event_queue().await.unwrap();
    assert_eq!(queue[0].status, QueueStatus::Error);
    assert!(ctx.stop_flag().await.unwrap());

    // A stop flag written by someone else (another rsync, the orchestrator) stops too; a new
    // operation clears the flag first.
    rsync.instantiate(ctx.id()).await.unwrap();
    until("instantiating again", || async {
        ctx.cluster_ready_status("web", &cs[0]).await.unwrap() == ClusterReadiness::Retrying
            && status(&ctx).await == AppContextStatus::Instantiating
    })
    .await;
    ctx.set_stop_flag(true).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::InstantiateFailed);
}

#[tokio::test]
async fn terminate_during_instantiate_cancels_it_and_skips_pending_events() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    env.fleet.set_fault("c2", Fault::down()).unwrap();
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();
    until("c1 applied, c2 retrying", || async {
        all_statuses(&ctx, "web", &cs[..1], RsyncStatus::Applied).await
            && ctx.cluster_ready_status("web", &cs[1]).await.unwrap() == ClusterReadiness::Retrying
    })
    .await;
    rsync.read(ctx.id()).await.unwrap();
    assert_eq!(
        ctx.desired_state().await.unwrap(),
        Some(AppContextStatus::Instantiated)
    );
    rsync.terminate(ctx.id()).await.unwrap();
    assert!(
        ctx.pending_terminate().await.unwrap(),
        "the running instantiate gives way to a terminate"
    );
    // c2 comes back only for the terminate: nothing was applied there, deleting is harmless.
    env.fleet.set_fault("c2", Fault::none()).unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    assert!(!ctx.pending_terminate().await.unwrap());
    assert_eq!(
        ctx.current_state().await.unwrap(),
        Some(AppContextStatus::Terminated)
    );
    assert_eq!(
        ctx.desired_state().await.unwrap(),
        Some(AppContextStatus::Terminated)
    );
    let events: Vec<_> = ctx
        .event_queue()
        .await
        .unwrap()
        .iter()
        .map(|e| (e.event, e.status))
        .collect();
    assert_eq!(
        events,
        [
            (RsyncEvent::Instantiate, QueueStatus::Skip),
            (RsyncEvent::Read, QueueStatus::Skip),
            (RsyncEvent::Terminate, QueueStatus::Done)
        ]
    );
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Deleted).await);
    for i in 0..2 {
        assert!(env.get(i, ctx.id(), "web", DEPLOYMENT).await.is_none());
    }
}

#[tokio::test]
async fn apps_wait_for_their_dependencies() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let db = AppSpec::new("db", &cs, &[("web+Deployment", DEPLOYMENT)]);
    let cm = config_map("api", "x");
    let mut api = AppSpec::new("api", &cs, &[("api+ConfigMap", &cm)]);
    api.deps = vec![AppDependency {
        app: "db".into(),
        op_status: "Ready".into(),
        wait: 1,
    }];
    let cm2 = config_map("ui", "y");
    let mut ui = AppSpec::new("ui", &cs, &[("ui+ConfigMap", &cm2)]);
    ui.deps = vec![AppDependency {
        app: "api".into(),
        op_status: "Deployed".into(),
        wait: 0,
    }];
    // Listed in reverse so the app order alone would get it wrong.
    let ctx = context(Arc::clone(&store), &[ui, api, db]).await;
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);

    let calls = env.calls();
    let last = |app: &str| {
        calls
            .iter()
            .filter(|c| c.app == app)
            .map(|c| c.at)
            .max()
            .unwrap()
    };
    let first = |app: &str| {
        calls
            .iter()
            .filter(|c| c.app == app)
            .map(|c| c.at)
            .min()
            .unwrap()
    };
    // db must be ready (the Deployment takes 200 ms) and then 1 s must pass before api.
    assert!(first("api") >= last("db") + Duration::from_secs(1));
    assert!(first("ui") >= last("api"));

    // Terminate removes dependents first.
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    let calls: Vec<_> = env.calls().into_iter().filter(|c| c.delete).collect();
    let at = |app: &str| calls.iter().find(|c| c.app == app).unwrap().at;
    assert!(at("ui") <= at("api") && at("api") <= at("db"));
}

#[tokio::test]
async fn a_failed_dependency_fails_the_dependent_app() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let bad = "apiVersion: example.com/v1\nkind: Missing\nmetadata:\n  name: x\n";
    let a = AppSpec::new("a", &cs, &[("x+Missing", bad)]);
    let cm = config_map("b", "1");
    let mut b = AppSpec::new("b", &cs, &[("b+ConfigMap", &cm)]);
    b.deps = vec![AppDependency {
        app: "a".into(),
        op_status: "Deployed".into(),
        wait: 0,
    }];
    let ctx = context(Arc::clone(&store), &[a, b]).await;
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::InstantiateFailed);
    assert!(all_statuses(&ctx, "a", &cs, RsyncStatus::Failed).await);
    assert!(all_statuses(&ctx, "b", &cs, RsyncStatus::Failed).await);
    assert!(env.calls().iter().all(|c| c.app != "b"));
}

const CRD: &str = "
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";
const WIDGET: &str =
    "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";

fn job(name: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: j\n        image: busybox\n"
    )
}

#[tokio::test]
async fn helm_hooks_run_in_their_phases() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let (pre, post, pre_del, post_del) = (job("pre"), job("post"), job("predel"), job("postdel"));
    let mut app = AppSpec::new(
        "chart",
        &cs,
        &[
            ("w1+Widget", WIDGET),
            ("web+Deployment", DEPLOYMENT),
            ("widgets.example.com+CustomResourceDefinition", CRD),
            ("pre+Job", &pre),
            ("post+Job", &post),
            ("predel+Job", &pre_del),
            ("postdel+Job", &post_del),
        ],
    );
    app.hooks = Some(HookGroups {
        crd_install: vec!["widgets.example.com+CustomResourceDefinition".into()],
        pre_install: vec!["pre+Job".into()],
        post_install: vec!["post+Job".into()],
        pre_delete: vec!["predel+Job".into()],
        post_delete: vec!["postdel+Job".into()],
    });
    let ctx = context(Arc::clone(&store), &[app]).await;
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    let applied: Vec<Vec<String>> = env
        .calls()
        .into_iter()
        .filter(|c| c.ok)
        .map(|c| c.names)
        .collect();
    assert_eq!(
        applied,
        [
            vec!["widgets.example.com+CustomResourceDefinition".to_owned()],
            vec!["pre+Job".to_owned()],
            vec!["w1+Widget".to_owned(), "web+Deployment".to_owned()],
            vec!["post+Job".to_owned()],
        ]
    );
    // The pre-install Job completed before the resources were applied.
    let pre_job = env.get(0, ctx.id(), "chart", &pre).await.unwrap();
    assert!(emco_rsync::readiness::readiness(&pre_job).is_ready());
    assert!(env.get(0, ctx.id(), "chart", WIDGET).await.is_some());
    // Delete hooks are not part of instantiate.
    assert!(env.get(0, ctx.id(), "chart", &pre_del).await.is_none());

    env.log.lock().unwrap().clear();
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    let calls: Vec<(bool, Vec<String>)> = env
        .calls()
        .into_iter()
        .map(|c| (c.delete, c.names))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        calls,
        [
            (false, s(&["predel+Job"])),
            (true, s(&["predel+Job"])),
            (
                true,
                s(&[
                    "post+Job",
                    "web+Deployment",
                    "w1+Widget",
                    "pre+Job",
                    "widgets.example.com+CustomResourceDefinition"
                ])
            ),
            (false, s(&["postdel+Job"])),
            (true, s(&["postdel+Job"])),
        ]
    );
    assert!(all_statuses(&ctx, "chart", &cs, RsyncStatus::Deleted).await);
    assert!(env.get(0, ctx.id(), "chart", DEPLOYMENT).await.is_none());
}

/// A Job hook with `spec` added (a deadline fails it, `suspend` keeps it from ever running, as
/// kube-controller-manager does).
fn job_with(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n  {spec}\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: j\n        image: busybox\n"
    )
}

/// An app `chart` of a ConfigMap and a Job hook (`spec` added to the Job, named after `n`) in
/// the hook group `group` picks: (app, hook YAML, ConfigMap YAML).
fn hooked_app(
    cs: &[String],
    n: &str,
    spec: &str,
    group: fn(&mut HookGroups) -> &mut Vec<String>,
) -> (AppSpec, String, String) {
    let hook = job_with(&format!("hook{n}"), spec);
    let cm = config_map(&format!("main{n}"), "1");
    let mut app = AppSpec::new(
        "chart",
        cs,
        &[
            (&format!("main{n}+ConfigMap"), &cm),
            (&format!("hook{n}+Job"), &hook),
        ],
    );
    let mut hooks = HookGroups::default();
    group(&mut hooks).push(format!("hook{n}+Job"));
    app.hooks = Some(hooks);
    (app, hook, cm)
}

/// An engine whose hooks time out after 600 ms.
fn short_hook_timeout(env: &Env, store: &Arc<dyn AppContextStore>) -> emco_rsync::engine::Rsync {
    env.builder(Arc::clone(store))
        .hook_timeout(Duration::from_millis(600))
        .build()
        .unwrap()
}

/// As `helm install`: a pre-install hook that fails (its Job failed) or does not complete within
/// the hook timeout fails the install; nothing after it is applied.
#[tokio::test]
async fn a_failed_or_late_pre_install_hook_fails_the_install() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let rsync = short_hook_timeout(&env, &store);
    for (i, spec) in ["activeDeadlineSeconds: 0", "suspend: true"]
        .iter()
        .enumerate()
    {
        let (app, pre, cm) = hooked_app(&cs, &i.to_string(), spec, |h| &mut h.pre_install);
        let ctx = context(Arc::clone(&store), &[app]).await;
        rsync.instantiate(ctx.id()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), rsync.wait_idle(ctx.id()))
            .await
            .expect("the install ends");
        assert_eq!(
            status(&ctx).await,
            AppContextStatus::InstantiateFailed,
            "{spec}"
        );
        assert_eq!(
            resource_statuses(&ctx, "chart", &cs[0]).await,
            [Some(RsyncStatus::Failed), Some(RsyncStatus::Failed)],
            "{spec}"
        );
        assert!(env.get(0, ctx.id(), "chart", &pre).await.is_some());
        assert!(env.get(0, ctx.id(), "chart", &cm).await.is_none(), "{spec}");
        // The ConfigMap was held back by the hook, which says why it failed (in name order:
        // the hook, then the ConfigMap).
        let why = reasons(&ctx, "chart", &cs[0]).await;
        assert_eq!(why[1].as_ref().unwrap().0, "NotApplied", "{spec}");
        let (reason, message) = why[0].clone().unwrap();
        assert_eq!(reason, "NotReady", "{spec}");
        assert!(
            message.contains("DeadlineExceeded") || message.starts_with("not ready after"),
            "{spec}: {message}"
        );
    }
}

/// A pre-delete hook that never completes does not hold a terminate forever: after the hook
/// timeout the terminate deletes everything (the hook too) and ends TerminateFailed; a failed
/// delete hook does the same at once.
#[tokio::test]
async fn a_failed_or_late_delete_hook_fails_the_terminate_but_deletes_all() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let rsync = short_hook_timeout(&env, &store);
    for (i, spec) in ["suspend: true", "activeDeadlineSeconds: 0"]
        .iter()
        .enumerate()
    {
        let (app, pre_del, cm) = hooked_app(&cs, &i.to_string(), spec, |h| &mut h.pre_delete);
        let ctx = context(Arc::clone(&store), &[app]).await;
        rsync.instantiate(ctx.id()).await.unwrap();
        rsync.wait_idle(ctx.id()).await;
        assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
        rsync.terminate(ctx.id()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), rsync.wait_idle(ctx.id()))
            .await
            .expect("the terminate ends");
        assert_eq!(
            status(&ctx).await,
            AppContextStatus::TerminateFailed,
            "{spec}"
        );
        assert!(env.get(0, ctx.id(), "chart", &cm).await.is_none(), "{spec}");
        assert!(
            env.get(0, ctx.id(), "chart", &pre_del).await.is_none(),
            "{spec}"
        );
        // The hook was deleted too: its status says so.
        assert!(all_statuses(&ctx, "chart", &cs, RsyncStatus::Deleted).await);
    }
}

#[tokio::test]
async fn update_applies_changes_and_deletes_leftovers_and_rollback_reverts() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let (a1, b, keep) = (
        config_map("a", "1"),
        config_map("b", "1"),
        config_map("k", "1"),
    );
    let (a2, c) = (config_map("a", "2"), config_map("c", "1"));
    let v1 = AppSpec::new(
        "app",
        &cs,
        &[
            ("a+ConfigMap", &a1),
            ("b+ConfigMap", &b),
            ("k+ConfigMap", &keep),
        ],
    );
    let v2 = AppSpec::new(
        "app",
        &cs,
        &[
            ("a+ConfigMap", &a2),
            ("c+ConfigMap", &c),
            ("k+ConfigMap", &keep),
        ],
    );
    let old = context(Arc::clone(&store), &[v1]).await;
    let new = context(Arc::clone(&store), &[v2]).await;
    let rsync = env.engine(Arc::clone(&store));
    rsync.instantiate(old.id()).await.unwrap();
    rsync.wait_idle(old.id()).await;
    env.log.lock().unwrap().clear();

    rsync.update(old.id(), new.id()).await.unwrap();
    rsync.wait_idle(new.id()).await;
    rsync.wait_idle(old.id()).await;
    assert_eq!(status(&new).await, AppContextStatus::Updated);
    assert_eq!(status(&old).await, AppContextStatus::Instantiated);
    // Objects carry the deployment id of the context that applied them; the unchanged `k`
    // stays as the old context applied it.
    let live = |i: usize, ctx: ContextId, yaml: String| {
        let env = &env;
        async move { env.get(i, ctx, "app", &yaml).await }
    };
    for i in 0..2 {
        assert_eq!(
            live(i, new.id(), a2.clone()).await.unwrap()["data"]["value"],
            "2"
        );
        assert!(live(i, new.id(), c.clone()).await.is_some());
        assert!(live(i, old.id(), b.clone()).await.is_none());
        assert!(live(i, old.id(), keep.clone()).await.is_some());
    }
    let calls = env.calls();
    assert!(
        calls
            .iter()
            .all(|c| !c.names.contains(&"k+ConfigMap".to_owned()))
    );
    assert!(calls.iter().any(|c| c.delete && c.names == ["b+ConfigMap"]));
    assert_eq!(
        old.resource_status("app", &cs[0], "b+ConfigMap")
            .await
            .unwrap(),
        Some(RsyncStatus::Deleted)
    );
    assert!(all_statuses(&new, "app", &cs, RsyncStatus::Applied).await);

    // Roll back to the old context.
    rsync.rollback(new.id(), old.id()).await.unwrap();
    rsync.wait_idle(old.id()).await;
    rsync.wait_idle(new.id()).await;
    assert_eq!(status(&old).await, AppContextStatus::Updated);
    for i in 0..2 {
        assert_eq!(
            live(i, old.id(), a1.clone()).await.unwrap()["data"]["value"],
            "1"
        );
        assert!(live(i, old.id(), b.clone()).await.is_some());
        assert!(live(i, new.id(), c.clone()).await.is_none());
    }
    assert!(all_statuses(&old, "app", &cs, RsyncStatus::Applied).await);
}

/// A terminate that arrives before an update (or an instantiate) has finished: whether the
/// update was still queued or already running, nothing of either context stays deployed.
#[tokio::test]
async fn terminate_right_after_update_removes_both_contexts() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let (a1, b) = (config_map("a", "1"), config_map("b", "1"));
    let (a2, c) = (config_map("a", "2"), config_map("c", "1"));
    let v1 = AppSpec::new("app", &cs, &[("a+ConfigMap", &a1), ("b+ConfigMap", &b)]);
    let v2 = AppSpec::new("app", &cs, &[("a+ConfigMap", &a2), ("c+ConfigMap", &c)]);
    let old = context(Arc::clone(&store), &[v1]).await;
    let new = context(Arc::clone(&store), &[v2]).await;
    let rsync = env.engine(Arc::clone(&store));
    rsync.instantiate(old.id()).await.unwrap();
    rsync.wait_idle(old.id()).await;
    assert!(env.get(0, old.id(), "app", &b).await.is_some());

    rsync.update(old.id(), new.id()).await.unwrap();
    rsync.terminate(new.id()).await.unwrap();
    until("both contexts terminated", || async {
        status(&new).await == AppContextStatus::Terminated
            && status(&old).await == AppContextStatus::Terminated
    })
    .await;
    rsync.wait_idle(new.id()).await;
    rsync.wait_idle(old.id()).await;
    for (ctx, yaml) in [
        (old.id(), &a1),
        (old.id(), &b),
        (new.id(), &a2),
        (new.id(), &c),
    ] {
        assert!(env.get(0, ctx, "app", yaml).await.is_none(), "{yaml}");
    }

    // A context whose instantiate never ran is terminated without touching the clusters.
    let never = context(
        Arc::clone(&store),
        &[AppSpec::new(
            "app",
            &cs,
            &[("d+ConfigMap", &config_map("d", "1"))],
        )],
    )
    .await;
    rsync.instantiate(never.id()).await.unwrap();
    rsync.terminate(never.id()).await.unwrap();
    until("terminated", || async {
        status(&never).await == AppContextStatus::Terminated
    })
    .await;
}

#[tokio::test]
async fn a_restarted_engine_resumes_active_contexts() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    env.fleet.set_fault("c2", Fault::down()).unwrap();
    let first = env.engine(Arc::clone(&store));
    let shutdown = CancellationToken::new();
    first.start(shutdown.clone()).await.unwrap();
    first.instantiate(ctx.id()).await.unwrap();
    until("c1 applied, c2 retrying", || async {
        ctx.cluster_ready_status("web", &cs[1]).await.unwrap() == ClusterReadiness::Retrying
            && all_statuses(&ctx, "web", &cs[..1], RsyncStatus::Applied).await
    })
    .await;
    shutdown.cancel();
    first.wait_idle(ctx.id()).await;
    assert_eq!(
        AppContext::active_contexts(store.as_ref()).await.unwrap(),
        [ctx.id()]
    );
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiating);

    env.fleet.set_fault("c2", Fault::none()).unwrap();
    env.log.lock().unwrap().clear();
    let second = env.engine(Arc::clone(&store));
    second.start(CancellationToken::new()).await.unwrap();
    second.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert!(all_statuses(&ctx, "web", &cs, RsyncStatus::Applied).await);
    // Resources already applied on c1 are not applied again.
    assert!(env.calls().iter().all(|c| c.cluster == cs[1]));
    assert!(
        AppContext::active_contexts(store.as_ref())
            .await
            .unwrap()
            .is_empty()
    );
}

/// The web app deployed to 2 clusters by an engine that is then stopped.
async fn deployed_by_a_stopped_engine() -> (Env, Arc<dyn AppContextStore>, Vec<String>, AppContext)
{
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let first = env.engine(Arc::clone(&store));
    let shutdown = CancellationToken::new();
    first.start(shutdown.clone()).await.unwrap();
    first.instantiate(ctx.id()).await.unwrap();
    first.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert_eq!(
        AppContext::registered(store.as_ref(), Registry::Deployed)
            .await
            .unwrap(),
        [ctx.id()]
    );
    shutdown.cancel();
    (env, store, cs, ctx)
}

#[tokio::test]
async fn a_restarted_engine_follows_the_readiness_of_deployed_contexts() {
    let (env, store, cs, ctx) = deployed_by_a_stopped_engine().await;
    env.log.lock().unwrap().clear();

    // Nothing is queued: the new engine only follows readiness again, and tells it.
    let second = env.engine(Arc::clone(&store));
    let mut sub = second.subscribe_ready(ctx.id());
    second.start(CancellationToken::new()).await.unwrap();
    let mut ready = vec![next_ready(&mut sub).await.1, next_ready(&mut sub).await.1];
    ready.sort();
    assert_eq!(ready, cs);
    let deployments: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.direct[1].client().clone(),
        "default",
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    deployments
        .patch_status(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {"availableReplicas": 0}})),
        )
        .await
        .unwrap();
    until("c2 shows the Deployment not ready", || async {
        collected(&ctx, "web", &cs[1]).await["resources"]["web+Deployment"]["ready"] == false
    })
    .await;
    assert!(env.calls().is_empty(), "nothing is applied again");

    second.terminate(ctx.id()).await.unwrap();
    second.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    assert!(
        AppContext::registered(store.as_ref(), Registry::Deployed)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Changes made while no engine ran are drift once one runs again: the restarted engine's
/// first look finds a field held by another manager and, since the manifest sets it, names
/// that manager (src/drift.rs, `Follower::verify`), and an object it applied before missing
/// (src/engine/run/drift.rs, `Keeper::applied_before`).
#[tokio::test]
async fn drift_made_while_the_engine_was_down_is_reported_after_a_restart() {
    let (env, store, cs, ctx) = deployed_by_a_stopped_engine().await;

    let maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(env.direct[1].client().clone(), "default");
    let edit = kube::api::PatchParams {
        field_manager: Some("kubectl-edit".to_owned()),
        ..kube::api::PatchParams::default()
    };
    maps.patch(
        "settings",
        &edit,
        &kube::api::Patch::Merge(serde_json::json!({"data": {"value": "edited"}})),
    )
    .await
    .unwrap();
    // And the Deployment on c1 is deleted.
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(env.direct[0].client().clone(), "default");
    deployments
        .delete("web", &kube::api::DeleteParams::default())
        .await
        .unwrap();

    let second = env.engine(Arc::clone(&store));
    second.start(CancellationToken::new()).await.unwrap();
    until("c1 shows the deleted Deployment as drift", || async {
        let drift = &collected(&ctx, "web", &cs[0]).await["resources"]["web+Deployment"]["drift"];
        drift[0]["path"] == "" && drift[0]["removed"] == true
    })
    .await;
    until("c2 shows the edit as drift of kubectl-edit", || async {
        let drift =
            &collected(&ctx, "web", &cs[1]).await["resources"]["settings+ConfigMap"]["drift"];
        drift[0]["path"] == "data.value" && drift[0]["manager"] == "kubectl-edit"
    })
    .await;
    // What was not changed has no drift.
    let c1 = collected(&ctx, "web", &cs[0]).await;
    let c2 = collected(&ctx, "web", &cs[1]).await;
    assert!(
        c1["resources"]["settings+ConfigMap"].get("drift").is_none()
            && c2["resources"]["web+Deployment"].get("drift").is_none(),
        "{c1} {c2}"
    );
}

#[tokio::test]
async fn a_hundred_clusters_in_one_context() {
    let env = Env::start(100).await;
    let store = memory();
    let cs = clusters(100);
    let cms: Vec<(String, String)> = (0..5)
        .map(|i| {
            (
                format!("cm{i}+ConfigMap"),
                config_map(&format!("cm{i}"), "v"),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = cms.iter().map(|(n, y)| (n.as_str(), y.as_str())).collect();
    let ctx = context(Arc::clone(&store), &[AppSpec::new("app", &cs, &refs)]).await;
    let rsync = env.engine(store);
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert!(all_statuses(&ctx, "app", &cs, RsyncStatus::Applied).await);
    for i in [0, 49, 99] {
        assert!(env.get(i, ctx.id(), "app", &cms[4].1).await.is_some());
    }
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    assert!(all_statuses(&ctx, "app", &cs, RsyncStatus::Deleted).await);
}

/// A resolver that counts the resolutions it answers.
#[derive(Debug)]
struct Counting {
    inner: Arc<emco_rsync::engine::MapResolver>,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl emco_rsync::engine::ClusterResolver for Counting {
    async fn connector(
        &self,
        cluster: &str,
    ) -> emco_core::Result<Arc<dyn emco_rsync::connector::Connector>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.connector(cluster).await
    }
}

/// The apps of one operation resolve each cluster once; the resource statuses of a worker's
/// batch and the cluster's readiness are written in one transaction (Pending with Unknown before
/// the apply, Applied with Available after it).
#[tokio::test]
async fn a_worker_resolves_its_cluster_once_per_operation_and_records_together() {
    use futures::StreamExt as _;
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let apps: Vec<AppSpec> = ["a", "b", "c"]
        .iter()
        .map(|a| {
            let cm = config_map(&format!("cm-{a}"), "v");
            AppSpec::new(a, &cs, &[(&format!("cm-{a}+ConfigMap"), &cm)])
        })
        .collect();
    let ctx = context(Arc::clone(&store), &apps).await;
    let mut events = store.watch(ctx.root_key(), 0).await.unwrap();
    let counting = Arc::new(Counting {
        inner: Arc::clone(&env.resolver),
        calls: std::sync::atomic::AtomicUsize::new(0),
    });
    let rsync = env
        .builder(Arc::clone(&store))
        .connectors(counting.clone())
        .build()
        .unwrap();
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        2,
        "one resolution per cluster"
    );

    // Every (app, cluster): its Pending status at the revision of its readiness Unknown, its
    // Applied status at the revision of its readiness Available.
    let mut at: std::collections::HashMap<(String, String), u64> = Default::default();
    let want = 3 * 2 * 4;
    while at.len() < want {
        let e = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .expect("the writes of the deploy")
            .unwrap()
            .unwrap();
        let value: serde_json::Value = serde_json::from_slice(&e.value).unwrap_or_default();
        let rest = e.key.strip_prefix(ctx.root_key()).unwrap_or_default();
        let Some((path, what)) = rest
            .strip_suffix("/readystatus/")
            .map(|p| (p, value.as_str().unwrap_or_default().to_owned()))
            .or_else(|| {
                let (path, _) = rest.split_once("/resource/")?;
                rest.ends_with("/status/").then(|| {
                    (
                        path,
                        value["Status"].as_str().unwrap_or_default().to_owned(),
                    )
                })
            })
        else {
            continue;
        };
        at.entry((path.to_owned(), what)).or_insert(e.mod_revision);
    }
    for app in ["a", "b", "c"] {
        for c in &cs {
            let path = format!("app/{app}/cluster/{c}");
            let rev = |what: &str| at.get(&(path.clone(), what.to_owned())).copied();
            assert!(rev("Pending").is_some(), "{path}: {at:?}");
            assert_eq!(rev("Pending"), rev("Unknown"), "{path}");
            assert_eq!(rev("Applied"), rev("Available"), "{path}");
        }
    }

    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        4,
        "a new operation resolves again"
    );
}

/// The collected status (`status/`) of `app` on `cluster`, `Null` before the first write.
async fn collected(ctx: &AppContext, app: &str, cluster: &str) -> serde_json::Value {
    ctx.cluster_status(app, cluster)
        .await
        .unwrap()
        .unwrap_or_default()
}

/// The next readiness notification, as (app, cluster); the timeout only bounds a hang.
async fn next_ready(sub: &mut emco_rsync::engine::ReadySubscription) -> (String, String) {
    let n = tokio::time::timeout(Duration::from_secs(60), sub.next())
        .await
        .expect("a readiness notification within 60 s")
        .unwrap();
    (n.app, n.cluster)
}

#[tokio::test]
async fn readiness_comes_from_watches_and_follows_every_transition() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let rsync = env.engine(Arc::clone(&store));
    let mut sub = rsync.subscribe_ready(ctx.id());
    rsync.instantiate(ctx.id()).await.unwrap();
    let mut first = vec![next_ready(&mut sub).await.1, next_ready(&mut sub).await.1];
    first.sort();
    assert_eq!(first, cs);
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert_eq!(
        ctx.current_state().await.unwrap(),
        Some(AppContextStatus::Instantiated)
    );
    assert_eq!(
        ctx.desired_state().await.unwrap(),
        Some(AppContextStatus::Instantiated)
    );
    assert!(!ctx.pending_terminate().await.unwrap());
    let listed = ctx.resource_statuses_listed().await.unwrap();
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert!(listed.values().all(|s| *s == RsyncStatus::Applied));

    // Readiness came from one watch per cluster and type, not from reading objects.
    assert_eq!(env.reads.load(Ordering::Relaxed), 0);
    for conn in &env.direct {
        assert_eq!(conn.watcher().watch_count(), 2, "ConfigMap, Deployment");
    }
    for c in &cs {
        until("the collected status shows everything ready", || async {
            let doc = collected(&ctx, "web", c).await;
            doc["readyStatus"] == "Available"
                && doc["resources"]["web+Deployment"]["ready"] == true
                && doc["resources"]["settings+ConfigMap"]["ready"] == true
        })
        .await;
    }

    // The Deployment of c1 loses its replicas: c1 shows it not ready.
    let deployments: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        env.direct[0].client().clone(),
        "default",
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let params = kube::api::PatchParams::default();
    deployments
        .patch_status(
            "web",
            &params,
            &kube::api::Patch::Merge(serde_json::json!({"status": {"availableReplicas": 0}})),
        )
        .await
        .unwrap();
    until("c1 shows the Deployment not ready", || async {
        let doc = collected(&ctx, "web", &cs[0]).await;
        doc["resources"]["web+Deployment"]["ready"] == false
            && doc["resources"]["web+Deployment"]["present"] == true
    })
    .await;
    // A new rollout makes it ready again: readyNotify fires again, for c1 only.
    deployments
        .patch(
            "web",
            &params,
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(
        next_ready(&mut sub).await,
        ("web".to_owned(), cs[0].clone())
    );
    let doc = collected(&ctx, "web", &cs[0]).await;
    assert_eq!(doc["resources"]["web+Deployment"]["ready"], true, "{doc}");
    assert_eq!(env.reads.load(Ordering::Relaxed), 0);

    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(
        ctx.current_state().await.unwrap(),
        Some(AppContextStatus::Terminated)
    );
    let doc = collected(&ctx, "web", &cs[1]).await;
    assert_eq!(
        doc["resources"]["web+Deployment"]["present"], false,
        "{doc}"
    );
}

#[tokio::test]
async fn without_a_watcher_readiness_is_polled() {
    let env = Env::start_with(1, false).await;
    let store = memory();
    let cs = clusters(1);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let rsync = env.engine(Arc::clone(&store));
    let mut sub = rsync.subscribe_ready(ctx.id());
    rsync.instantiate(ctx.id()).await.unwrap();
    assert_eq!(
        next_ready(&mut sub).await,
        ("web".to_owned(), cs[0].clone())
    );
    assert!(
        env.reads.load(Ordering::Relaxed) >= 2,
        "each object is read"
    );
    let doc = collected(&ctx, "web", &cs[0]).await;
    assert_eq!(doc["readyStatus"], "Available", "{doc}");
    assert_eq!(doc["resources"]["web+Deployment"]["ready"], true, "{doc}");
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
}

#[tokio::test]
async fn readiness_is_unknown_until_the_cluster_is_reached() {
    let env = Env::start(1).await;
    let store = memory();
    let cs = clusters(1);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    // Connections are accepted and never answered: the applies time out after 5 s.
    env.fleet.set_fault("c1", Fault::black_hole()).unwrap();
    let rsync = env.engine(Arc::clone(&store));
    rsync.instantiate(ctx.id()).await.unwrap();
    let key = format!("{}app/web/cluster/{}/readystatus/", ctx.root_key(), cs[0]);
    until("readystatus written as Unknown", || async {
        store
            .get(&key)
            .await
            .unwrap()
            .is_some_and(|kv| kv.value.as_ref() == b"\"Unknown\"")
    })
    .await;
    until("readystatus Retrying", || async {
        ctx.cluster_ready_status("web", &cs[0]).await.unwrap() == ClusterReadiness::Retrying
    })
    .await;
    env.fleet.set_fault("c1", Fault::none()).unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);
    assert_eq!(
        ctx.cluster_ready_status("web", &cs[0]).await.unwrap(),
        ClusterReadiness::Available
    );
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
}

/// Runs git in `dir` with a fixed identity.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=agent", "-c", "user.email=agent@localhost"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Pushes a status object as EMCO's monitor writes it back: a ResourceBundleState listing
/// `objects` (each carried base64-encoded, as Go encodes bytes).
fn write_back(agent: &std::path::Path, ctx: ContextId, objects: &[serde_json::Value]) {
    use base64::Engine as _;
    let entries: Vec<serde_json::Value> = objects
        .iter()
        .map(|o| {
            let api_version = o["apiVersion"].as_str().unwrap();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            serde_json::json!({"group": group, "version": version, "kind": o["kind"],
                "name": o["metadata"]["name"], "namespace": "default",
                "res": base64::engine::general_purpose::STANDARD.encode(o.to_string())})
        })
        .collect();
    let doc = serde_json::json!({"apiVersion": "k8splugin.io/v1alpha1", "kind": "ResourceBundleState",
        "metadata": {"name": format!("{ctx}-web")}, "status": {"ready": true, "resourceStatuses": entries}});
    git(agent, &["pull", "-q", "origin", "main"]);
    let dir = agent.join(format!("clusters/prov+g1/status/{ctx}/app/web"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{ctx}-web-status.yaml")),
        emco_go::yaml::to_string(&doc).unwrap(),
    )
    .unwrap();
    git(agent, &["add", "-A"]);
    git(agent, &["commit", "-q", "-m", "status"]);
    git(agent, &["push", "-q", "origin", "HEAD:main"]);
}

#[tokio::test]
async fn gitops_readiness_comes_from_the_status_written_back() {
    use emco_rsync::connector::gitops::{GitOpsConfig, GitOpsConnector};
    let tmp = tempfile::tempdir().unwrap();
    let remote = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            remote.to_str().unwrap(),
        ],
    );
    let conn = GitOpsConnector::open(GitOpsConfig::new(
        "prov+g1",
        remote.to_str().unwrap(),
        tmp.path().join("rsync"),
    ))
    .await
    .unwrap();
    let resolver = Arc::new(emco_rsync::engine::MapResolver::new());
    resolver.insert("prov+g1", Arc::new(conn));
    let store = memory();
    let cs = vec!["prov+g1".to_owned()];
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let rsync = emco_rsync::engine::Rsync::builder()
        .store(store)
        .connectors(resolver)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut sub = rsync.subscribe_ready(ctx.id());
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Instantiated);

    // Committed is not deployed: until the agent writes back, nothing is claimed.
    until("the collected status says Unknown", || async {
        collected(&ctx, "web", &cs[0]).await["readyStatus"] == "Unknown"
    })
    .await;
    let doc = collected(&ctx, "web", &cs[0]).await;
    for r in ["settings+ConfigMap", "web+Deployment"] {
        assert_eq!(doc["resources"][r]["present"], false, "{doc}");
        assert_eq!(doc["resources"][r]["ready"], false, "{doc}");
        assert!(doc["resources"][r]["reason"].is_string(), "{doc}");
    }

    let agent = tmp.path().join("agent");
    git(
        tmp.path(),
        &["clone", "-q", remote.to_str().unwrap(), "agent"],
    );
    let label = serde_json::json!({"emco/deployment-id": format!("{}-web", ctx.id())});
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default", "labels": label}});
    write_back(&agent, ctx.id(), std::slice::from_ref(&cm));
    until(
        "the ConfigMap is reported, the Deployment absent",
        || async {
            let doc = collected(&ctx, "web", &cs[0]).await;
            doc["readyStatus"] == "Available"
                && doc["resources"]["settings+ConfigMap"]["ready"] == true
                && doc["resources"]["web+Deployment"]["present"] == false
        },
    )
    .await;

    let deployment = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "generation": 1, "labels": label},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                   "readyReplicas": 1, "availableReplicas": 1}});
    write_back(&agent, ctx.id(), &[cm, deployment]);
    assert_eq!(
        next_ready(&mut sub).await,
        ("web".to_owned(), cs[0].clone())
    );
    let doc = collected(&ctx, "web", &cs[0]).await;
    assert_eq!(doc["resources"]["web+Deployment"]["ready"], true, "{doc}");

    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    assert_eq!(status(&ctx).await, AppContextStatus::Terminated);
}

/// Whether every entry of the collected status of `app` on `cluster` satisfies `pick`.
async fn every_entry(
    ctx: &AppContext,
    app: &str,
    cluster: &str,
    pick: impl Fn(&serde_json::Value) -> bool,
) -> bool {
    let Some(doc) = ctx.cluster_status(app, cluster).await.unwrap() else {
        return false;
    };
    let entries = doc["resources"].as_object().cloned().unwrap_or_default();
    !entries.is_empty() && entries.values().all(pick)
}

/// A cluster that stops answering, whether it refuses connections (its watches fail) or
/// accepts them and never answers (its watches stay open and say nothing), has its resources'
/// readiness turned unknown once the grace has passed since its last answer, with the state
/// seen last and since when; the cluster that still answers keeps its own; and once the silent
/// ones answer again their resources are ready again. (Kubernetes' node lifecycle controller
/// does the same with a node whose lease is not renewed within `node-monitor-grace-period`.)
#[tokio::test]
async fn a_silent_cluster_turns_unknown_after_the_grace_and_back_once_it_answers() {
    let env = Env::start(3).await;
    let store = memory();
    let cs = clusters(3);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let grace = Duration::from_secs(3);
    let rsync = env
        .builder(Arc::clone(&store))
        .liveness(emco_rsync::engine::Liveness {
            interval: Duration::from_millis(200),
            grace,
        })
        .build()
        .unwrap();
    rsync.start(CancellationToken::new()).await.unwrap();
    rsync.instantiate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
    let ready = |e: &serde_json::Value| e["ready"] == true && e.get("unknown").is_none();
    for c in &cs {
        until("every cluster ready", || every_entry(&ctx, "web", c, ready)).await;
    }

    env.fleet.set_fault("c2", Fault::down()).unwrap();
    env.fleet.set_fault("c3", Fault::black_hole()).unwrap();
    let silent_at = std::time::SystemTime::now();
    // Within the grace what was seen last still stands.
    assert!(every_entry(&ctx, "web", &cs[1], ready).await);
    assert!(every_entry(&ctx, "web", &cs[2], ready).await);
    for c in &cs[1..] {
        until("the silent cluster's resources unknown", || {
            every_entry(&ctx, "web", c, |e| e["unknown"] == true)
        })
        .await;
        let doc = ctx.cluster_status("web", c).await.unwrap().unwrap();
        for entry in doc["resources"].as_object().unwrap().values() {
            assert_eq!(entry["ready"], false, "{doc}");
            assert_eq!(entry["present"], true, "{doc}");
            assert_eq!(entry["lastState"], "Ready", "{doc}");
            let since = entry["since"].as_str().unwrap();
            let since = emco_core::time::parse_rfc3339(since).unwrap();
            // The last answer came before the cluster went silent (whole seconds).
            assert!(since <= emco_core::time::unix_seconds(silent_at), "{doc}");
            assert!(
                entry["reason"]
                    .as_str()
                    .unwrap()
                    .contains("has not answered since"),
                "{doc}"
            );
        }
        assert_eq!(doc["readyStatus"], "Retrying", "{doc}");
    }
    assert!(every_entry(&ctx, "web", &cs[0], ready).await);
    assert_eq!(rsync.metrics().reachable.get(&[&cs[1]]), Some(0.0));
    assert_eq!(rsync.metrics().reachable.get(&[&cs[2]]), Some(0.0));

    env.fleet.set_fault("c2", Fault::none()).unwrap();
    env.fleet.set_fault("c3", Fault::none()).unwrap();
    for c in &cs[1..] {
        until("the cluster ready again", || {
            every_entry(&ctx, "web", c, ready)
        })
        .await;
        assert_eq!(rsync.metrics().reachable.get(&[c]), Some(1.0));
    }
    rsync.terminate(ctx.id()).await.unwrap();
    rsync.wait_idle(ctx.id()).await;
}

/// The clusters of a wave that do not answer, found by asking them all at once: refused,
/// stalled and answering clusters mixed, the silent ones named in the order given with why,
/// within about one timeout however many are stalled (asked one by one, the eight stalled ones
/// would take eight).
#[tokio::test]
async fn unanswering_clusters_are_found_together() {
    let env = Env::start(12).await;
    let store = memory();
    let cs = clusters(12);
    let ctx = context(Arc::clone(&store), &[web_app(&cs)]).await;
    let rsync = env.engine(store);
    let timeout = Duration::from_secs(1);
    assert!(
        rsync
            .unanswering(ctx.id(), &cs, timeout)
            .await
            .unwrap()
            .is_empty()
    );
    env.fleet.set_fault("c2", Fault::down()).unwrap();
    for stalled in 5..=12 {
        env.fleet
            .set_fault(&format!("c{stalled}"), Fault::black_hole())
            .unwrap();
    }
    let asked = std::time::Instant::now();
    let silent = rsync.unanswering(ctx.id(), &cs, timeout).await.unwrap();
    let took = asked.elapsed();
    let names: Vec<&str> = silent.iter().map(|(c, _)| c.as_str()).collect();
    let mut want = vec![cs[1].as_str()];
    want.extend(cs[4..].iter().map(String::as_str));
    assert_eq!(names, want);
    for (c, e) in &silent {
        assert_eq!(e.kind(), emco_core::ErrorKind::Unavailable, "{c}: {e}");
    }
    assert!(
        silent[1].1.to_string().contains("did not answer within"),
        "{}",
        silent[1].1
    );
    assert!(took < 4 * timeout, "asked one by one: {took:?}");
    let err = rsync
        .unanswering(ContextId::new(999_999), &cs, timeout)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), emco_core::ErrorKind::NotFound, "{err}");
}

/// An ask made once per origin (a rollout's wave, asked again by drivers that cannot know
/// whether the one before asked): queued and run once, however often it is made; and one that
/// was queued by an asker that died before marking the context active is run when asked again.
#[tokio::test]
async fn an_ask_of_one_origin_is_queued_and_run_once() {
    let env = Env::start(2).await;
    let store = memory();
    let cs = clusters(2);
    let a = config_map("a", "1");
    let ctx = context(
        Arc::clone(&store),
        &[AppSpec::new("app", &cs, &[("a+ConfigMap", &a)])],
    )
    .await;
    let rsync = env.engine(Arc::clone(&store));
    rsync.start(CancellationToken::new()).await.unwrap();
    let id = ctx.id();
    for _ in 0..3 {
        rsync
            .instantiate_on_once(id, vec![cs[0].clone()], "wave 0")
            .await
            .unwrap();
    }
    rsync.wait_idle(id).await;
    rsync
        .instantiate_on_once(id, vec![cs[0].clone()], "wave 0")
        .await
        .unwrap();
    let queue = ctx.event_queue().await.unwrap();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0].status, QueueStatus::Done);
    assert!(env.get(0, id, "app", &a).await.is_some());
    assert!(env.get(1, id, "app", &a).await.is_none());
    // Queued by an asker that died before the context was marked active: nothing runs it...
    ctx.enqueue_event_once(QueueElement {
        event: RsyncEvent::Instantiate,
        ucid: None,
        clusters: Some(vec![cs[1].clone()]),
        status: QueueStatus::Pending,
        origin: Some("wave 1".into()),
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(env.get(1, id, "app", &a).await.is_none());
    // ...until it is asked again: run, not queued twice.
    rsync
        .instantiate_on_once(id, vec![cs[1].clone()], "wave 1")
        .await
        .unwrap();
    rsync.wait_idle(id).await;
    assert!(env.get(1, id, "app", &a).await.is_some());
    let queue = ctx.event_queue().await.unwrap();
    assert_eq!(queue.len(), 2, "{queue:?}");
    assert_eq!(queue[1].status, QueueStatus::Done);
}

/// Operations limited to some clusters, the waves of a rollout, touch those clusters only: a
/// first instantiate cluster by cluster, an update of one cluster (the others keep the old
/// revision, the delete half included), that cluster rolled back, and the terminate of one
/// cluster; each context's status moves as for the whole context.
#[tokio::test]
async fn operations_limited_to_clusters_touch_only_those() {
    let env = Env::start(3).await;
    let store = memory();
    let cs = clusters(3);
    let (a1, b) = (config_map("a", "1"), config_map("b", "1"));
    let (a2, c) = (config_map("a", "2"), config_map("c", "1"));
    let v1 = AppSpec::new("app", &cs, &[("a+ConfigMap", &a1), ("b+ConfigMap", &b)]);
    let v2 = AppSpec::new("app", &cs, &[("a+ConfigMap", &a2), ("c+ConfigMap", &c)]);
    let old = context(Arc::clone(&store), &[v1]).await;
    let new = context(Arc::clone(&store), &[v2]).await;
    let rsync = env.engine(Arc::clone(&store));
    rsync.start(CancellationToken::new()).await.unwrap();
    // What cluster `i` runs: the value of `a`, and whether `b` and `c` are there.
    let id = old.id();
    let on = |i: usize| {
        let (env, a1, b, c) = (&env, a1.clone(), b.clone(), c.clone());
        async move {
            let a = env.get(i, id, "app", &a1).await;
            (
                a.map(|a| a["data"]["value"].as_str().unwrap().to_owned()),
                env.get(i, id, "app", &b).await.is_some(),
                env.get(i, id, "app", &c).await.is_some(),
            )
        }
    };
    let v1_on = (Some("1".to_owned()), true, false);
    let v2_on = (Some("2".to_owned()), false, true);
    let nothing = (None, false, false);

    rsync
        .instantiate_on(old.id(), Some(vec![cs[0].clone()]))
        .await
        .unwrap();
    rsync.wait_idle(old.id()).await;
    assert_eq!(status(&old).await, AppContextStatus::Instantiated);
    assert_eq!(on(0).await, v1_on);
    assert_eq!(
        (on(1).await, on(2).await),
        (nothing.clone(), nothing.clone())
    );
    assert_eq!(resource_statuses(&old, "app", &cs[1]).await, [None, None]);
    rsync
        .instantiate_on(old.id(), Some(cs[1..].to_vec()))
        .await
        .unwrap();
    rsync.wait_idle(old.id()).await;
    assert!(all_statuses(&old, "app", &cs, RsyncStatus::Applied).await);
    for i in 0..3 {
        assert_eq!(on(i).await, v1_on);
    }

    rsync
        .update_on(old.id(), new.id(), Some(vec![cs[0].clone()]))
        .await
        .unwrap();
    rsync.wait_idle(new.id()).await;
    rsync.wait_idle(old.id()).await;
    assert_eq!(status(&new).await, AppContextStatus::Updated);
    assert_eq!(status(&old).await, AppContextStatus::Instantiated);
    assert_eq!(on(0).await, v2_on);
    assert_eq!((on(1).await, on(2).await), (v1_on.clone(), v1_on.clone()));
    assert_eq!(
        resource_statuses(&new, "app", &cs[0]).await,
        [Some(RsyncStatus::Applied); 2]
    );
    assert_eq!(resource_statuses(&new, "app", &cs[1]).await, [None, None]);
    let b_on = |i: usize| old.resource_status("app", &cs[i], "b+ConfigMap");
    assert_eq!(b_on(0).await.unwrap(), Some(RsyncStatus::Deleted));
    assert_eq!(b_on(1).await.unwrap(), Some(RsyncStatus::Applied));

    rsync
        .rollback_on(new.id(), old.id(), Some(vec![cs[0].clone()]))
        .await
        .unwrap();
    rsync.wait_idle(old.id()).await;
    rsync.wait_idle(new.id()).await;
    for i in 0..3 {
        assert_eq!(on(i).await, v1_on);
    }
    assert!(all_statuses(&old, "app", &cs, RsyncStatus::Applied).await);

    rsync
        .terminate_on(old.id(), vec![cs[2].clone()])
        .await
        .unwrap();
    rsync.wait_idle(old.id()).await;
    assert_eq!((on(0).await, on(1).await), (v1_on.clone(), v1_on));
    assert_eq!(on(2).await, nothing);
    assert_eq!(
        resource_statuses(&old, "app", &cs[2]).await,
        [Some(RsyncStatus::Deleted); 2]
    );
}
