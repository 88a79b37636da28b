//! Bad app versions chosen by image tag: `...never-ready` never gets ready, `...crash-after-ready`
//! gets ready and a ready delay later crashes; emco-rsync's readiness judge sees both.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::time::{Duration, Instant};

use common::Sim;
use emco_rsync::readiness::{Readiness, readiness};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, WatchEvent, WatchParams};
use serde_json::{Value, json};

const DELAY: Duration = Duration::from_millis(200);

async fn sim() -> (Sim, kube::Client) {
    let sim = Sim::start_with(kubesim::FleetConfig {
        ready_delay: DELAY,
        controllers: true,
        ..kubesim::FleetConfig::default()
    })
    .await;
    let client = sim.client("c1").await;
    (sim, client)
}

/// The collection path of a kind in namespace `default`.
fn collection(kind: &str) -> String {
    match kind {
        "Pod" => "/api/v1/namespaces/default/pods".to_owned(),
        "Job" => "/apis/batch/v1/namespaces/default/jobs".to_owned(),
        _ => format!("/apis/apps/v1/namespaces/default/{}s", kind.to_lowercase()),
    }
}

/// A workload of `kind` named `name` running `image`, as a chart would render it.
fn workload(kind: &str, name: &str, image: &str) -> Value {
    let pod_spec = json!({"containers": [{"name": "app", "image": image}]});
    let mut obj = json!({
        "apiVersion": match kind { "Pod" => "v1", "Job" => "batch/v1", _ => "apps/v1" },
        "kind": kind,
        "metadata": {"name": name, "labels": {"app": name}},
    });
    obj["spec"] = match kind {
        "Pod" => pod_spec,
        "Job" => {
            let mut spec = pod_spec;
            spec["restartPolicy"] = json!("Never");
            json!({"template": {"metadata": {"labels": {"app": name}}, "spec": spec}})
        }
        _ => json!({
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        }),
    };
    if matches!(kind, "Deployment" | "StatefulSet") {
        obj["spec"]["replicas"] = json!(2);
    }
    obj
}

async fn send(client: &kube::Client, req: http::request::Builder, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    client.request(req.body(body).unwrap()).await.unwrap()
}

async fn create(client: &kube::Client, obj: Value) -> Value {
    let kind = obj["kind"].as_str().unwrap().to_owned();
    let req = http::Request::post(collection(&kind)).header("content-type", "application/json");
    send(client, req, Some(obj)).await
}

async fn get(client: &kube::Client, kind: &str, name: &str) -> Value {
    let req = http::Request::get(format!("{}/{name}", collection(kind)));
    send(client, req, None).await
}

async fn list(client: &kube::Client, kind: &str, app: &str) -> Vec<Value> {
    let req = http::Request::get(format!("{}?labelSelector=app%3D{app}", collection(kind)));
    let list = send(client, req, None).await;
    list["items"].as_array().cloned().unwrap_or_default()
}

/// Sets the image of a Deployment's only container.
async fn set_image(client: &kube::Client, name: &str, image: &str) {
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}});
    let req = http::Request::patch(format!("{}/{name}", collection("Deployment")))
        .header("content-type", "application/strategic-merge-patch+json");
    send(client, req, Some(patch)).await;
}

fn condition<'a>(obj: &'a Value, kind: &str) -> (&'a Value, &'a Value) {
    let c = obj["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .unwrap();
    (&c["status"], &c["reason"])
}

/// The replica count at `field` of a status; the API server leaves zero counts out.
fn count(obj: &Value, field: &str) -> i64 {
    obj["status"][field].as_i64().unwrap_or(0)
}

fn not_ready(obj: &Value) -> bool {
    matches!(readiness(obj), Readiness::NotReady(_))
}

/// Polls `f` until it gives `Some`, for at most 30 s.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A Deployment whose rollout is stuck, as a real server reports it.
fn assert_stuck_rollout(d: &Value) {
    assert_eq!(
        d["status"]["observedGeneration"],
        d["metadata"]["generation"]
    );
    assert_eq!(count(d, "updatedReplicas"), 2);
    assert_eq!(count(d, "readyReplicas"), 0);
    assert_eq!(count(d, "availableReplicas"), 0);
    assert_eq!(
        condition(d, "Available"),
        (&json!("False"), &json!("MinimumReplicasUnavailable"))
    );
    assert_eq!(
        condition(d, "Progressing"),
        (&json!("True"), &json!("ReplicaSetUpdated"))
    );
    assert_eq!(
        readiness(d),
        Readiness::NotReady("0 of 2 updated replicas available".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_images_stay_not_ready_and_good_ones_get_ready() {
    let (sim, client) = sim().await;
    let kinds = ["Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"];
    for kind in kinds {
        let lower = kind.to_lowercase();
        create(
            &client,
            workload(kind, &format!("good-{lower}"), "nginx:1.25"),
        )
        .await;
        let bad = workload(kind, &format!("bad-{lower}"), "nginx:1.25-never-ready");
        let created = create(&client, bad).await;
        assert!(not_ready(&created), "{kind} is not ready at first");
    }
    let good = eventually("good workloads ready", || async {
        let mut all = Vec::new();
        for kind in kinds {
            let obj = get(&client, kind, &format!("good-{}", kind.to_lowercase())).await;
            if !readiness(&obj).is_ready() {
                return None;
            }
            all.push(obj);
        }
        Some(all)
    })
    .await;
    assert_eq!(count(&good[0], "availableReplicas"), 2);
    // Well past the ready delay the bad ones are still not ready.
    tokio::time::sleep(DELAY * 5).await;
    for kind in kinds {
        let obj = get(&client, kind, &format!("bad-{}", kind.to_lowercase())).await;
        assert!(not_ready(&obj), "{kind}: {:?}", readiness(&obj));
    }
    assert_stuck_rollout(&get(&client, "Deployment", "bad-deployment").await);
    let sts = get(&client, "StatefulSet", "bad-statefulset").await;
    assert_eq!(
        readiness(&sts),
        Readiness::NotReady("0 of 2 replicas ready".to_owned())
    );
    let ds = get(&client, "DaemonSet", "bad-daemonset").await;
    assert_eq!(
        readiness(&ds),
        Readiness::NotReady("0 of 1 pods ready".to_owned())
    );
    let job = get(&client, "Job", "bad-job").await;
    assert_eq!((count(&job, "active"), count(&job, "succeeded")), (1, 0));
    // Their Pods run, with the readiness probe failing.
    for app in [
        "bad-deployment",
        "bad-statefulset",
        "bad-daemonset",
        "bad-job",
        "bad-pod",
    ] {
        let pods = list(&client, "Pod", app).await;
        assert!(!pods.is_empty(), "{app} has Pods");
        for pod in pods {
            assert_eq!(pod["status"]["phase"], "Running", "{app}");
            let c = &pod["status"]["containerStatuses"][0];
            assert_eq!((&c["ready"], &c["started"]), (&json!(false), &json!(true)));
            assert!(c["state"]["running"].is_object());
            assert_eq!(
                condition(&pod, "Ready"),
                (&json!("False"), &json!("ContainersNotReady"))
            );
            assert_eq!(
                readiness(&pod),
                Readiness::NotReady("not ready: ContainersNotReady".to_owned())
            );
        }
    }
    let rs = list(&client, "ReplicaSet", "bad-deployment").await;
    assert_eq!(
        readiness(&rs[0]),
        Readiness::NotReady("0 of 2 replicas ready".to_owned())
    );
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_ready_images_get_ready_then_fail() {
    let (sim, client) = sim().await;
    let api: Api<Deployment> = Api::default_namespaced(client.clone());
    let start = Instant::now();
    let created = create(
        &client,
        workload("Deployment", "web", "app:2-crash-after-ready"),
    )
    .await;
    create(&client, workload("Job", "task", "task:2-crash-after-ready")).await;
    // Every status write is a watch event: none of the states can be missed.
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let wp = WatchParams::default().fields("metadata.name=web");
    let mut events = api.watch(&wp, rv).await.unwrap().boxed();
    let mut ready_at = None;
    let crashed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(e) = events.next().await {
            let WatchEvent::Modified(d) = e.unwrap() else {
                continue;
            };
            let d = serde_json::to_value(d).unwrap();
            match (readiness(&d), ready_at) {
                (Readiness::Ready, None) => ready_at = Some(start.elapsed()),
                (Readiness::NotReady(_), Some(_)) => return (d, start.elapsed()),
                (r, _) => assert!(matches!(r, Readiness::NotReady(_)), "{r:?}"),
            }
        }
        panic!("the watch ended");
    })
    .await
    .unwrap();
    let (d, crashed_at) = crashed;
    let ready_at = ready_at.unwrap();
    assert!(ready_at >= DELAY, "ready after {ready_at:?}");
    assert!(crashed_at >= DELAY * 2, "crashed after {crashed_at:?}");
    assert_eq!(count(&d, "updatedReplicas"), 2);
    assert_eq!(count(&d, "readyReplicas"), 0);
    assert_eq!(count(&d, "availableReplicas"), 0);
    assert_eq!(
        condition(&d, "Available"),
        (&json!("False"), &json!("MinimumReplicasUnavailable"))
    );
    assert_eq!(
        condition(&d, "Progressing"),
        (&json!("True"), &json!("NewReplicaSetAvailable"))
    );
    assert_eq!(
        readiness(&d),
        Readiness::NotReady("0 of 2 updated replicas available".to_owned())
    );
    // Its Pods crash-loop, restarted again and again.
    let pods = eventually("pods restarted three times", || async {
        let pods = list(&client, "Pod", "web").await;
        pods.iter()
            .all(|p| count_at(p, "/status/containerStatuses/0/restartCount") >= 3)
            .then_some(pods)
    })
    .await;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        assert_eq!(pod["status"]["phase"], "Running");
        let c = &pod["status"]["containerStatuses"][0];
        assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(c["lastState"]["terminated"]["reason"], "Error");
        assert_eq!(c["ready"], false);
        assert!(not_ready(pod));
    }
    // A Job's Pod (restartPolicy Never) fails once, and so does the Job, for good.
    let job = get(&client, "Job", "task").await;
    assert_eq!(
        condition(&job, "Failed"),
        (&json!("True"), &json!("BackoffLimitExceeded"))
    );
    assert!(matches!(readiness(&job), Readiness::Failed(_)));
    let job_pods = list(&client, "Pod", "task").await;
    assert_eq!(job_pods[0]["status"]["phase"], "Failed");
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

fn count_at(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_to_a_bad_image_and_back() {
    let (sim, client) = sim().await;
    let ready = |what: &'static str| {
        let client = client.clone();
        async move {
            eventually(what, || async {
                let d = get(&client, "Deployment", "web").await;
                readiness(&d).is_ready().then_some(d)
            })
            .await
        }
    };
    create(&client, workload("Deployment", "web", "nginx:1.25")).await;
    ready("ready with a good image").await;
    // A bad version: the new rollout never completes.
    set_image(&client, "web", "nginx:1.26-never-ready").await;
    let d = get(&client, "Deployment", "web").await;
    assert!(not_ready(&d));
    tokio::time::sleep(DELAY * 4).await;
    let d = get(&client, "Deployment", "web").await;
    assert_eq!(d["metadata"]["generation"], 2);
    assert_stuck_rollout(&d);
    let pods = list(&client, "Pod", "web").await;
    assert!(
        pods.iter()
            .all(|p| p["spec"]["containers"][0]["image"] == "nginx:1.26-never-ready")
    );
    assert!(pods.iter().all(not_ready));
    // Rolling back makes it ready again.
    set_image(&client, "web", "nginx:1.25").await;
    let d = ready("ready after the rollback").await;
    assert_eq!(count(&d, "availableReplicas"), 2);
    let pods = eventually("pods of the good image ready", || async {
        let pods = list(&client, "Pod", "web").await;
        pods.iter().all(|p| readiness(p).is_ready()).then_some(pods)
    })
    .await;
    assert!(
        pods.iter()
            .all(|p| p["spec"]["containers"][0]["image"] == "nginx:1.25")
    );

    // A version that crashes once ready; rolled back after the crash, it stays ready (the
    // crashed version's timers do not touch the new spec).
    set_image(&client, "web", "nginx:1.27-crash-after-ready").await;
    eventually("crashed", || async {
        let d = get(&client, "Deployment", "web").await;
        let rolled_out = condition(&d, "Progressing").1 == "NewReplicaSetAvailable";
        (d["metadata"]["generation"] == 4 && rolled_out && not_ready(&d)).then_some(())
    })
    .await;
    set_image(&client, "web", "nginx:1.25").await;
    ready("ready after the second rollback").await;
    tokio::time::sleep(DELAY * 4).await;
    let d = get(&client, "Deployment", "web").await;
    assert!(readiness(&d).is_ready(), "{:?}", readiness(&d));
    for pod in list(&client, "Pod", "web").await {
        assert!(readiness(&pod).is_ready(), "{pod}");
        assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0);
    }
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// With no ready delay a crash-after-ready app is ready on the write and crashes right after;
/// its Pods still restart on a back-off rather than in a busy loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_delay_crash_after_ready_crashes_at_once() {
    let sim = Sim::start_with(kubesim::FleetConfig {
        ready_delay: Duration::ZERO,
        controllers: true,
        ..kubesim::FleetConfig::default()
    })
    .await;
    let client = sim.client("c1").await;
    let image = format!("app:3-{}", kubesim::CRASH_AFTER_READY);
    let created = create(&client, workload("Deployment", "web", &image)).await;
    assert!(readiness(&created).is_ready());
    eventually("crashed", || async {
        not_ready(&get(&client, "Deployment", "web").await).then_some(())
    })
    .await;
    let restarts = || async {
        let pods = list(&client, "Pod", "web").await;
        pods.iter()
            .map(|p| count_at(p, "/status/containerStatuses/0/restartCount"))
            .min()
            .unwrap_or(0)
    };
    eventually("pods restarted", || async {
        (restarts().await >= 2).then_some(())
    })
    .await;
    // Back-off doubles from 100 ms: far fewer than one restart per millisecond.
    let before = restarts().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(restarts().await <= before + 2);
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}
