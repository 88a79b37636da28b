//! Progressive delivery end to end on 20 kubesim clusters: the main job's composite app
//! (examples/) with a rollout policy of 4 waves (1 canary cluster, 20 %, 30 %, the rest),
//! onboarded with emcoctl files and driven over REST. A first instantiate passes every wave; a
//! good update passes them with the bake time and a person's approvals respected; a bad one
//! (kubesim never makes its image ready) stops in the first wave and rolls back by itself, and
//! every cluster ends on the old revision exactly. Policies that cannot work are refused with a
//! 400 naming the field, and an update during a rollout with a 409.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::path::{Path, PathBuf};
use std::time::Duration;

use emco_core::{Error, Result};
use emco_e2e::{Backends, DEADLINE, Env, EnvConfig, Phases, load, tgz};
use http::Method;
use serde_json::{Value, json};

const CLUSTERS: usize = 20;
const DIG: &str = "/v2/projects/demo/composite-apps/http/v1/deployment-intent-groups/http-dig";
const GOOD: &str = "nginx:1.27-alpine";
const BETTER: &str = "nginx:1.28-alpine";
const BAD: &str = "nginx:1.28-never-ready";

fn names(clusters: usize) -> Vec<String> {
    (1..=clusters).map(|i| format!("c{i}")).collect()
}

/// Copies the example chart `app` into `dir` with its image set to `image`.
fn chart_with_image(app: &str, image: &str, dir: &Path) -> Result<PathBuf> {
    let from = emco_e2e::workspace().join("examples/charts").join(app);
    let to = dir.join(format!("{app}-{}", image.replace([':', '.'], "-")));
    copy_dir(&from, &to)?;
    let values = to.join("values.yaml");
    let text = std::fs::read_to_string(&values).map_err(|e| Error::internal(e.to_string()))?;
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("image:") {
                format!("image: {image}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&values, text).map_err(|e| Error::internal(e.to_string()))?;
    Ok(to)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::internal(e.to_string()))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::internal(e.to_string()))? {
        let entry = entry.map_err(|e| Error::internal(e.to_string()))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(|e| Error::internal(e.to_string()))?;
        }
    }
    Ok(())
}

/// `method path` with a JSON body; the status and the body.
async fn send(env: &Env, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    env.send(method, path, body.as_ref()).await.unwrap()
}

/// Replaces the chart of `http-server` with one whose image is `image`.
async fn put_server_chart(env: &Env, image: &str) {
    put_chart(env, "http-server", image).await;
}

/// Replaces the chart of `app` with one whose image is `image`.
async fn put_chart(env: &Env, app: &str, image: &str) {
    let dir = chart_with_image(app, image, env.dir()).unwrap();
    let out = env
        .dir()
        .join(format!("{app}-{}.tgz", image.replace([':', '.'], "-")));
    tgz(&dir, app, &out).unwrap();
    let ca = emco_orchestrator::keys::composite_app("demo", "http", "v1");
    let named = emco_core::model::App {
        metadata: emco_core::Metadata::named(app),
    };
    env.orch
        .onboarding()
        .put_app(&ca, app, &named, &out)
        .await
        .unwrap();
}

/// The image of the http-server Deployment on each cluster (`None` where it is absent).
async fn images(env: &Env, clusters: usize) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for c in names(clusters) {
        out.push(image_on(env, &c).await);
    }
    out
}

/// The image of the http-server Deployment on cluster `c`.
async fn image_on(env: &Env, c: &str) -> Option<String> {
    let client = env.kube(c).await.unwrap();
    let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::default_namespaced(client);
    api.get_opt("http-server").await.unwrap().and_then(|d| {
        let d = serde_json::to_value(d).ok()?;
        let image = d.pointer("/spec/template/spec/containers/0/image")?;
        image.as_str().map(str::to_owned)
    })
}

/// `emcoctl rollout ACTION` on the example's instantiate file: its exit code and output.
async fn emcoctl_rollout(env: &Env, values: &Path, action: &str) -> (i32, String) {
    let file = emco_e2e::workspace().join("examples/emcoctl/instantiate.yaml");
    let args = [
        "emcoctl".to_owned(),
        "--server".to_owned(),
        env.url.clone(),
        "rollout".to_owned(),
        action.to_owned(),
        "-f".to_owned(),
        file.display().to_string(),
        "-v".to_owned(),
        values.display().to_string(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = emcoctl::cli::run(args, &mut out, &mut err).await;
    out.extend(err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

/// Polls the group's rollout until `done` holds.
async fn wait_rollout(env: &Env, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (code, run) = send(env, Method::GET, &format!("{DIG}/rollout"), None).await;
        if code == 200 && done(&run) {
            return run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the rollout to be {what}: {code} {run}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn wave_states(run: &Value) -> Vec<String> {
    run["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["state"].as_str().unwrap().to_owned())
        .collect()
}

fn seconds(t: &Value) -> i64 {
    emco_core::time::parse_rfc3339(t.as_str().unwrap()).unwrap()
}

/// The example onboarded (not instantiated) on `clusters` kubesim clusters `c1..`, each labelled
/// `edge`, with http-server's image `GOOD`: the environment, the values file, the documents.
async fn setup(clusters: usize, ready_delay: Duration) -> (Env, PathBuf, Phases) {
    let mut config = EnvConfig::new(Backends::Embedded, clusters);
    config.plain_http = true;
    config.ready_delay = ready_delay;
    let env = Env::start(config).await.unwrap().unwrap();
    let packages = env.dir().join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    let server = chart_with_image("http-server", GOOD, env.dir()).unwrap();
    tgz(&server, "http-server", &packages.join("http-server.tgz")).unwrap();
    let root = emco_e2e::workspace().join("examples");
    tgz(
        &root.join("charts/http-client"),
        "http-client",
        &packages.join("http-client.tgz"),
    )
    .unwrap();
    let all = names(clusters);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let (phases, values) = env.example(&packages, &all).await.unwrap();
    env.apply(&phases.onboard).await.unwrap();
    (env, values, phases)
}

/// Waits until the group is ready, then checks that each of the first `clusters` clusters runs
/// `image`.
async fn ready_on(env: &Env, phases: &Phases, clusters: usize, image: &str) {
    env.wait_ready(&phases.dig_paths()[0], DEADLINE)
        .await
        .unwrap();
    let seen = images(env, clusters).await;
    assert!(
        seen.iter().all(|i| i.as_deref() == Some(image)),
        "not every cluster runs {image}: {seen:?}"
    );
}

/// Instantiates the example's logical cloud and group.
async fn instantiate(env: &Env, phases: &Phases) {
    let lifecycle = Phases {
        onboard: Vec::new(),
        clouds: phases.clouds.clone(),
        digs: phases.digs.clone(),
    };
    env.begin(&lifecycle).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_with_gates_and_an_automatic_rollback() {
    let (env, values, phases) = setup(CLUSTERS, Duration::from_millis(300)).await;
    let root = emco_e2e::workspace().join("examples");
    // Policies that cannot work are refused with the field and why.
    let policies = format!("{DIG}/rollout-policies");
    for (bad, field) in [
        (json!({"waves": []}), "spec.waves"),
        (
            json!({"waves": [{"percent": 120}]}),
            "spec.waves[0].percent",
        ),
        (
            json!({"waves": [{"count": 1}], "gates": {"progressDeadline": "-1m"}}),
            "spec.gates.progressDeadline",
        ),
        (
            json!({"waves": [{"clusters": ["kubesim+nowhere"]}]}),
            "spec.waves[0].clusters",
        ),
    ] {
        let (code, body) = send(
            &env,
            Method::POST,
            &policies,
            Some(json!({"metadata": {"name": "bad"}, "spec": bad})),
        )
        .await;
        assert_eq!(code, 400, "{body}");
        assert!(body.to_string().contains(field), "{field}: {body}");
    }
    // The example policy file applies as it is (and goes again: the test's own follows).
    let example = load(&[root.join("emcoctl/rollout-policy.yaml")], &values).unwrap();
    env.apply(&example).await.unwrap();
    let (code, body) = send(&env, Method::GET, &format!("{policies}/waves"), None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body["spec"]["waves"][0]["clusters"],
        json!(["c1"]),
        "{body}"
    );
    assert_eq!(body["spec"]["onFailure"], "rollback", "{body}");
    env.delete(&example).await.unwrap();
    let policy = json!({"metadata": {"name": "waves"}, "spec": {
        "waves": [{"name": "canary", "clusters": ["c1"]}, {"percent": 20}, {"percent": 30}, {}],
        "gates": {"progressDeadline": "8s", "bakeTime": "1s"},
        "onFailure": "rollback"
    }});
    let (code, body) = send(&env, Method::POST, &policies, Some(policy.clone())).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        &env,
        Method::POST,
        &policies,
        Some(json!({"metadata": {"name": "second"}, "spec": {"waves": [{}]}})),
    )
    .await;
    assert_eq!(code, 409, "one policy per group: {body}");

    // A first instantiate, wave by wave.
    instantiate(&env, &phases).await;
    let run = wait_rollout(&env, "Succeeded", |r| r["state"] == "Succeeded").await;
    let sizes: Vec<usize> = run["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["clusters"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [1, 4, 6, 9], "{run}");
    assert_eq!(run["waves"][0]["clusters"], json!(["kubesim+c1"]));
    assert_eq!(wave_states(&run), ["Succeeded"; 4]);
    for pair in run["waves"].as_array().unwrap().windows(2) {
        // Each wave starts once the one before has baked.
        assert!(
            seconds(&pair[1]["started"]) >= seconds(&pair[0]["finished"]),
            "{run}"
        );
        assert!(
            seconds(&pair[0]["finished"]) - seconds(&pair[0]["started"]) >= 1,
            "{run}"
        );
    }
    let seen = images(&env, CLUSTERS).await;
    assert!(seen.iter().all(|i| i.as_deref() == Some(GOOD)), "{seen:?}");
    env.wait_ready(&phases.dig_paths()[0], DEADLINE)
        .await
        .unwrap();

    // A bad update stops in the canary wave and rolls back by itself.
    put_server_chart(&env, BAD).await;
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 409, "an update during a rollout: {body}");
    assert!(body.to_string().contains("rollout"), "{body}");
    let run = wait_rollout(&env, "RolledBack", |r| r["state"] == "RolledBack").await;
    assert_eq!(
        wave_states(&run),
        ["RolledBack", "Pending", "Pending", "Pending"],
        "{run}"
    );
    let failures = &run["waves"][0]["failures"];
    assert_eq!(failures[0]["cluster"], "kubesim+c1", "{run}");
    assert!(run["reason"].as_str().unwrap().contains("canary"), "{run}");
    // As emcoctl shows it.
    let (code, printed) = emcoctl_rollout(&env, &values, "status").await;
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("rollout RolledBack"), "{printed}");
    assert!(printed.contains("canary  RolledBack"), "{printed}");
    assert!(printed.contains("kubesim+c1: "), "{printed}");
    let (code, printed) = emcoctl_rollout(&env, &values, "approve").await;
    assert_eq!(code, 1, "nothing to approve: {printed}");
    assert!(printed.contains("409"), "{printed}");
    let (_, status) = send(&env, Method::GET, &format!("{DIG}/status"), None).await;
    let last = status["states"]["actions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["state"].as_str(), last["revision"].as_i64()),
        (Some("Updated"), Some(3)),
        "{status}"
    );
    // Every cluster back on the old revision, ready.
    ready_on(&env, &phases, CLUSTERS, GOOD).await;

    // A good update with approvals: each wave after the first waits for a person.
    let approving = json!({"metadata": {"name": "waves"}, "spec": {
        "waves": [{"name": "canary", "clusters": ["c1"]}, {"percent": 20}, {"percent": 30}, {}],
        "gates": {"progressDeadline": "30s", "bakeTime": "1s", "approval": true},
        "onFailure": "rollback"
    }});
    let (code, body) = send(
        &env,
        Method::PUT,
        &format!("{policies}/waves"),
        Some(approving),
    )
    .await;
    assert!(code == 200 || code == 201, "{code} {body}");
    put_server_chart(&env, BETTER).await;
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    for wave in 1..4 {
        let run = wait_rollout(&env, "WaitingForApproval", |r| {
            r["state"] == "WaitingForApproval" && r["current"] == wave
        })
        .await;
        // Nothing of the waiting wave changed yet.
        let changed = images(&env, CLUSTERS)
            .await
            .iter()
            .filter(|i| i.as_deref() == Some(BETTER))
            .count();
        let before: usize = run["waves"].as_array().unwrap()[..wave]
            .iter()
            .map(|w| w["clusters"].as_array().unwrap().len())
            .sum();
        assert_eq!(changed, before, "{run}");
        if wave < 3 {
            let (code, body) =
                send(&env, Method::POST, &format!("{DIG}/rollout/approve"), None).await;
            assert_eq!(code, 202, "{body}");
        } else {
            let (code, printed) = emcoctl_rollout(&env, &values, "approve").await;
            assert_eq!(code, 0, "{printed}");
            assert!(printed.contains("approve accepted"), "{printed}");
        }
    }
    // emcoctl follows it to its end.
    let (code, printed) = emcoctl_rollout(&env, &values, "watch").await;
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("rollout Succeeded"), "{printed}");
    let run = wait_rollout(&env, "Succeeded", |r| r["state"] == "Succeeded").await;
    assert_eq!(wave_states(&run), ["Succeeded"; 4]);
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/rollout/approve"), None).await;
    assert_eq!(code, 409, "nothing to approve: {body}");
    assert!(
        images(&env, CLUSTERS)
            .await
            .iter()
            .all(|i| i.as_deref() == Some(BETTER))
    );
    let (_, status) = send(
        &env,
        Method::GET,
        &format!("{DIG}/status?status=ready"),
        None,
    )
    .await;
    assert_eq!(status["rollout"]["state"], "Succeeded", "{status}");
    env.wait_ready(&phases.dig_paths()[0], DEADLINE)
        .await
        .unwrap();
    // What the rollouts did, as metrics: 4 waves twice and the failed canary.
    let m = env.orch.deployments().rollout_metrics();
    assert_eq!(m.waves_started.get(&[]), 9);
    assert_eq!(m.waves_ended.get(&["succeeded"]), 8);
    assert_eq!(m.waves_ended.get(&["failed"]), 1);
    assert_eq!(m.rollbacks.get(&[]), 1);
    assert_eq!(m.duration.count(&["Succeeded"]), 2);
    assert_eq!(m.duration.count(&["RolledBack"]), 1);
    let (_, text) = send(&env, Method::GET, "/metrics", None).await;
    assert!(
        text.to_string().contains("emco_rollout_rollbacks_total 1"),
        "{text}"
    );
    // The policy is a child of the group: it goes before the group does.
    let (code, body) = send(&env, Method::DELETE, &format!("{policies}/waves"), None).await;
    assert_eq!(code, 204, "{body}");
    env.remove(&phases).await.unwrap();
    env.expect_no_leftovers(&[]).await.unwrap();
}

/// The other gates on 6 clusters: a cluster that does not answer when its wave starts is left
/// out (`unreachable: skip`) and changed once it answers again; custom health read from the
/// live objects (a field of the ConfigMap); a version that gets ready and then crashes fails
/// the wave while it bakes and is rolled back; custom health that never holds fails the wave at
/// its deadline and is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_clusters_custom_health_and_a_crash_while_baking() {
    const N: usize = 6;
    // Workloads ready after 1 s: a version that crashes 1 s after it got ready is seen ready
    // by the gate before it crashes.
    let (env, _values, phases) = setup(N, Duration::from_secs(1)).await;
    let fleet = env.clusters.fleet().unwrap();
    let policies = format!("{DIG}/rollout-policies");
    let policy = |check: &str, bake: &str| {
        json!({"metadata": {"name": "w"}, "spec": {
            "waves": [{"clusters": ["c1"]}, {}],
            "gates": {"progressDeadline": "15s", "bakeTime": bake, "customHealth": [
                {"kind": "ConfigMap", "field": {"path": "metadata.labels.app", "value": check}}
            ]},
            "onFailure": "rollback", "unreachable": "skip"
        }})
    };
    let (code, body) = send(
        &env,
        Method::POST,
        &policies,
        Some(policy("http-server", "1s")),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    fleet.set_fault("c4", kubesim::Fault::down()).unwrap();
    instantiate(&env, &phases).await;
    let run = wait_rollout(&env, "Succeeded", |r| r["state"] == "Succeeded").await;
    assert_eq!(run["waves"][1]["skipped"], json!(["kubesim+c4"]), "{run}");
    assert_eq!(run["catchUp"], json!(["kubesim+c4"]), "{run}");
    for c in names(N).iter().filter(|c| *c != "c4") {
        assert_eq!(image_on(&env, c).await.as_deref(), Some(GOOD), "{c}");
    }
    // c4 answers again: it gets what the rollout ended on.
    fleet.set_fault("c4", kubesim::Fault::none()).unwrap();
    wait_rollout(&env, "caught up", |r| r.get("catchUp").is_none()).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while images(&env, N).await.iter().any(Option::is_none) {
        assert!(tokio::time::Instant::now() < deadline, "c4 never caught up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    env.wait_ready(&phases.dig_paths()[0], DEADLINE)
        .await
        .unwrap();

    // Ready, then crashing while it bakes: the canary fails and is rolled back. (The client:
    // nothing waits for it to stay ready before the gate looks.)
    let (code, body) = send(
        &env,
        Method::PUT,
        &format!("{policies}/w"),
        Some(policy("http-server", "5s")),
    )
    .await;
    assert!(code == 200 || code == 201, "{code} {body}");
    put_chart(&env, "http-client", "busybox:1.37-crash-after-ready").await;
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    let run = wait_rollout(&env, "rolled back", |r| r["state"] == "RolledBack").await;
    let why = run["waves"][0]["failures"][0]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(why.contains("while baking"), "{run}");
    ready_on(&env, &phases, N, GOOD).await;

    // Custom health that never holds: the canary never passes and is rolled back.
    let (code, body) = send(
        &env,
        Method::PUT,
        &format!("{policies}/w"),
        Some(policy("nope", "1s")),
    )
    .await;
    assert!(code == 200 || code == 201, "{code} {body}");
    put_chart(&env, "http-client", "busybox:1.36").await;
    put_server_chart(&env, BETTER).await;
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    let run = wait_rollout(&env, "rolled back", |r| {
        r["state"] == "RolledBack" && r["waves"][0]["failures"].is_array()
    })
    .await;
    let why = run["waves"][0]["failures"][0]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.contains("metadata.labels.app is http-server, not nope"),
        "{run}"
    );
    ready_on(&env, &phases, N, GOOD).await;
    let (code, body) = send(&env, Method::DELETE, &format!("{policies}/w"), None).await;
    assert_eq!(code, 204, "{body}");
    env.remove(&phases).await.unwrap();
}

/// A wave recorded as started whose clusters rsync was never asked to change (its driver was
/// killed between the two, or the ask failed): a driver that did not start the wave asks again
/// at its first look, and the wave passes instead of failing at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_recorded_but_never_asked_for_is_asked_for_again() {
    const N: usize = 4;
    let (env, _values, phases) = setup(N, Duration::ZERO).await;
    let policy = json!({"metadata": {"name": "w"}, "spec": {
        "waves": [{"clusters": ["c1"]}, {}],
        "gates": {"progressDeadline": "20s", "approval": true}, "onFailure": "pause"}});
    let (code, body) = send(
        &env,
        Method::POST,
        &format!("{DIG}/rollout-policies"),
        Some(policy),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    instantiate(&env, &phases).await;
    let run = wait_rollout(&env, "waiting for approval", |r| {
        r["state"] == "WaitingForApproval"
    })
    .await;
    assert_eq!(images(&env, N).await[1..], [None, None, None], "{run}");
    // As a driver that recorded the second wave's start and died before asking rsync leaves it
    // (the driver running here did not start it either).
    let id = emco_core::ContextId::new(run["to"].as_u64().unwrap());
    let ctx = emco_appcontext::AppContext::load(std::sync::Arc::clone(env.orch.contexts()), id)
        .await
        .unwrap();
    let (mut record, revision) = ctx
        .rollout::<emco_core::rollout::RolloutRun>()
        .await
        .unwrap()
        .unwrap();
    record.current = 1;
    record.state = emco_core::rollout::RolloutState::Progressing;
    let wave = &mut record.waves[1];
    wave.state = emco_core::rollout::RolloutState::Progressing;
    wave.approved = true;
    wave.started = emco_core::time::rfc3339(std::time::SystemTime::now());
    wave.origin = format!("rollout wave 1 at {revision}");
    let origin = wave.origin.clone();
    ctx.put_rollout(&record, revision).await.unwrap();
    let run = wait_rollout(&env, "ended", |r| {
        r["state"] == "Succeeded" || r["state"] == "Paused"
    })
    .await;
    assert_eq!(run["state"], "Succeeded", "{run}");
    ready_on(&env, &phases, N, GOOD).await;
    // Each wave's ask is queued once, however often drivers ask.
    let queue = ctx.event_queue().await.unwrap();
    let asked = |origin: &str| {
        queue
            .iter()
            .filter(|e| e.origin.as_deref() == Some(origin))
            .count()
    };
    let first = run["waves"][0]["origin"].as_str().unwrap().to_owned();
    assert_eq!((asked(&first), asked(&origin)), (1, 1), "{queue:?}");
    env.orch
        .rsync()
        .instantiate_on_once(id, vec!["kubesim+c2".into()], &origin)
        .await
        .unwrap();
    assert_eq!(ctx.event_queue().await.unwrap().len(), queue.len());
    let (code, body) = send(
        &env,
        Method::DELETE,
        &format!("{DIG}/rollout-policies/w"),
        None,
    )
    .await;
    assert_eq!(code, 204, "{body}");
    env.remove(&phases).await.unwrap();
}

/// Clusters that do not answer during their wave, under `unreachable: fail` (they count as
/// failures: the rollout rolls back) and `wait` (the wave waits for them, then passes), and a
/// rollout whose changed clusters answer again once a cluster is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_clusters_fail_a_wave_or_are_waited_for() {
    const N: usize = 4;
    let (env, _values, phases) = setup(N, Duration::from_millis(200)).await;
    let fleet = env.clusters.fleet().unwrap();
    let policies = format!("{DIG}/rollout-policies");
    let policy = |unreachable: &str| {
        json!({"metadata": {"name": "w"}, "spec": {
            "waves": [{"clusters": ["c1"]}, {}],
            "gates": {"progressDeadline": "60s"},
            "onFailure": "rollback", "unreachable": unreachable
        }})
    };
    let (code, body) = send(&env, Method::POST, &policies, Some(policy("fail"))).await;
    assert_eq!(code, 201, "{body}");
    instantiate(&env, &phases).await;
    wait_rollout(&env, "Succeeded", |r| r["state"] == "Succeeded").await;
    env.wait_ready(&phases.dig_paths()[0], DEADLINE)
        .await
        .unwrap();

    // fail: c3 is down when its wave comes; the wave fails on it and everything goes back.
    fleet.set_fault("c3", kubesim::Fault::down()).unwrap();
    put_server_chart(&env, BETTER).await;
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    let run = wait_rollout(&env, "rolled back", |r| r["state"] == "RolledBack").await;
    let failures = run["waves"][1]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{run}");
    assert_eq!(failures[0]["cluster"], "kubesim+c3", "{run}");
    assert!(
        failures[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("unreachable"),
        "{run}"
    );
    let deadline = tokio::time::Instant::now() + DEADLINE;
    for c in ["c1", "c2", "c4"] {
        while image_on(&env, c).await.as_deref() != Some(GOOD) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{c} not rolled back"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    fleet.set_fault("c3", kubesim::Fault::none()).unwrap();
    ready_on(&env, &phases, N, GOOD).await;

    // wait: the wave waits for c3 as long as it is down, and passes once it is back.
    let (code, body) = send(
        &env,
        Method::PUT,
        &format!("{policies}/w"),
        Some(policy("wait")),
    )
    .await;
    assert!(code == 200 || code == 201, "{code} {body}");
    fleet.set_fault("c3", kubesim::Fault::down()).unwrap();
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    wait_rollout(&env, "in its second wave", |r| {
        r["current"] == 1 && r["waves"][1]["state"] == "Progressing"
    })
    .await;
    // Longer than the cluster grace (2 s here): unreachable, not failed, still waited for.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (code, run) = send(&env, Method::GET, &format!("{DIG}/rollout"), None).await;
    assert_eq!(code, 200, "{run}");
    assert_eq!(run["state"], "Progressing", "{run}");
    assert!(
        run["waves"][1]["failures"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{run}"
    );
    for c in ["c1", "c2", "c4"] {
        assert_eq!(image_on(&env, c).await.as_deref(), Some(BETTER), "{c}");
    }
    fleet.set_fault("c3", kubesim::Fault::none()).unwrap();
    wait_rollout(&env, "Succeeded", |r| r["state"] == "Succeeded").await;
    ready_on(&env, &phases, N, BETTER).await;
    let (code, body) = send(&env, Method::DELETE, &format!("{policies}/w"), None).await;
    assert_eq!(code, 204, "{body}");
    env.remove(&phases).await.unwrap();
}

/// A cluster deregistered while a rollout runs (its label, then the cluster deleted, as EMCO
/// lets a user decommission a site while apps run on it: src/clm/pkg/cluster/cluster.go
/// `DeleteCluster` refuses only while the cluster's network intents are applied, never for the
/// apps deployed there) leaves the rollout: its wave goes on without it and the rollout
/// succeeds, where changing it would fail the wave and roll every cluster back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_deregistered_mid_rollout_leaves_it() {
    const N: usize = 4;
    let (env, _values, phases) = setup(N, Duration::from_millis(200)).await;
    let policies = format!("{DIG}/rollout-policies");
    let policy = json!({"metadata": {"name": "w"}, "spec": {
        "waves": [{"clusters": ["c1"]}, {}],
        "gates": {"progressDeadline": "30s", "bakeTime": "3s"},
        "onFailure": "rollback"
    }});
    let (code, body) = send(&env, Method::POST, &policies, Some(policy)).await;
    assert_eq!(code, 201, "{body}");
    instantiate(&env, &phases).await;
    wait_rollout(&env, "Succeeded", |r| r["state"] == "Succeeded").await;
    ready_on(&env, &phases, N, GOOD).await;

    put_server_chart(&env, BETTER).await;
    let (code, body) = send(&env, Method::POST, &format!("{DIG}/update"), None).await;
    assert_eq!(code, 202, "{body}");
    wait_rollout(&env, "baking the canary", |r| {
        r["waves"][0]["state"] == "Baking"
    })
    .await;
    let c4 = "/v2/cluster-providers/kubesim/clusters/c4";
    let (code, body) = send(&env, Method::DELETE, &format!("{c4}/labels/edge"), None).await;
    assert_eq!(code, 204, "{body}");
    let (code, body) = send(&env, Method::DELETE, c4, None).await;
    assert_eq!(code, 204, "{body}");
    let run = wait_rollout(&env, "over", |r| {
        matches!(
            r["state"].as_str(),
            Some("Succeeded" | "RolledBack" | "Failed" | "Paused")
        )
    })
    .await;
    assert_eq!(run["state"], "Succeeded", "{run}");
    assert_eq!(run["waves"][1]["left"], json!(["kubesim+c4"]), "{run}");
    assert!(run["waves"][1].get("failures").is_none(), "{run}");
    for c in ["c1", "c2", "c3"] {
        assert_eq!(image_on(&env, c).await.as_deref(), Some(BETTER), "{c}");
    }
    // Nobody changes it any more: it runs what it ran when it left.
    assert_eq!(image_on(&env, "c4").await.as_deref(), Some(GOOD));
    let (code, body) = send(&env, Method::DELETE, &format!("{policies}/w"), None).await;
    assert_eq!(code, 204, "{body}");
}
