//! emcoctl against the real emco-server, in process on 127.0.0.1 with a temporary store.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::path::{Path, PathBuf};

use emco_orchestrator::Orchestrator;
use emco_service::{Config, Metrics};
use emcoctl::cli::load_documents;
use emcoctl::client::Client;
use emcoctl::ops::{self, Command, Options, Outcome};

// The shared testdata beside the workspace (`../shared` of the repository root).
const EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/testdata/emco-examples"
);

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";

/// Serves a fresh emco-server; returns its URL (the temp dir must outlive the test).
async fn serve(dir: &Path) -> String {
    let config = Config {
        data_dir: dir.join("data"),
        ..Config::default()
    };
    let store = emco_service::open_store(&config).await.unwrap();
    let app = emco_service::app(Orchestrator::new(store), &config, Metrics::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// values-novars.yaml unchanged, plus the values it leaves to the environment (addresses and
/// the kubeconfig path), in a temp copy.
fn values(dir: &Path) -> PathBuf {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let mut text = std::fs::read_to_string(format!(
        "{EXAMPLES}/single-cluster/templates/values-novars.yaml"
    ))
    .unwrap();
    text.push_str(&format!(
        "    HostIP: 127.0.0.1\n    RsyncPort: 9031\n    DtcPort: 9048\n    NpsPort: 9062\n    KubeConfig: {}\n",
        kubeconfig.display()
    ));
    let path = dir.join("values.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn lines(outcomes: &[Outcome]) -> String {
    outcomes.iter().map(|o| o.line() + "\n").collect()
}

fn statuses(outcomes: &[Outcome]) -> Vec<Option<u16>> {
    outcomes
        .iter()
        .map(|o| o.response.as_ref().map(|r| r.as_ref().unwrap().status))
        .collect()
}

async fn run(client: &Client, cmd: Command, docs: &[emcoctl::document::Document]) -> Vec<Outcome> {
    let mut out = Vec::new();
    ops::run(client, cmd, docs, &Options::default(), &mut out)
        .await
        .unwrap()
}

#[tokio::test]
async fn apply_get_delete_single_cluster_prerequisites() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let file = PathBuf::from(format!(
        "{EXAMPLES}/single-cluster/templates/prerequisites-common.yaml"
    ));
    let values = values(dir.path());
    let docs = load_documents(std::slice::from_ref(&file), Some(&values)).unwrap();
    let anchors: Vec<&str> = docs.iter().map(|d| d.anchor.as_str()).collect();
    assert_eq!(
        anchors,
        [
            "projects",
            "controllers",
            "controllers",
            "dtc-controllers",
            "cluster-providers",
            "cluster-providers/provider1/clusters",
            "cluster-providers/provider1/clusters/cluster1/labels",
        ]
    );
    let client = Client::new(&server, Some("token".to_owned())).unwrap();
    // dtc's sub-controller registry included.
    let applied = run(&client, Command::Apply, &docs).await;
    assert_eq!(statuses(&applied), [Some(201); 7], "{}", lines(&applied));
    let got = run(&client, Command::Get, &docs).await;
    assert_eq!(statuses(&got), [Some(200); 7], "{}", lines(&got));
    let deleted = run(&client, Command::Delete, &docs).await;
    assert!(
        statuses(&deleted)
            .iter()
            .all(|c| c.is_some_and(|c| c == 204 || c == 200)),
        "{}",
        lines(&deleted)
    );
    // Reverse order: the label goes first, the project last.
    assert!(
        deleted[0].line().contains("/labels/edge-cluster"),
        "{}",
        deleted[0].line()
    );
    assert!(
        deleted[6].line().contains("DELETE"),
        "{}",
        deleted[6].line()
    );
    let gone = run(&client, Command::Get, &docs).await;
    assert!(
        statuses(&gone).iter().all(|c| *c == Some(404)),
        "{}",
        lines(&gone)
    );
}

async fn cli(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = emcoctl::cli::run(args.iter().copied(), &mut out, &mut err).await;
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[tokio::test]
async fn command_line_exit_codes_outputs_and_stop_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let file = dir.path().join("p.yaml");
    std::fs::write(
        &file,
        "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: {{ .P }}\n  description: first\n---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers\nmetadata:\n  name: cp\n",
    )
    .unwrap();
    let vals = dir.path().join("v.yaml");
    std::fs::write(&vals, "P: p1\n").unwrap();
    let (f, v) = (file.to_str().unwrap(), vals.to_str().unwrap());
    let (code, out, err) = cli(&["emcoctl", "--server", &server, "apply", "-f", f, "-v", v]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("POST {server}/v2/projects -> 201")),
        "{out}"
    );
    assert_eq!(out.lines().count(), 2, "{out}");

    let (code, out, err) = cli(&["emcoctl", "--server", &server, "get", "-f", f, "-v", v]).await;
    assert_eq!(code, 0, "{err}");
    let table: Vec<&str> = out.lines().collect();
    assert!(table[0].starts_with("NAME"), "{out}");
    let row: Vec<&str> = table[1].split_whitespace().collect();
    assert_eq!(row[..3], ["p1", "200", "first"], "{out}");

    let (code, out, _) = cli(&[
        "emcoctl", "--server", &server, "get", "-f", f, "-v", v, "-o", "json",
    ])
    .await;
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json[0]["body"]["metadata"]["name"], "p1");
    assert_eq!(json[1]["status"], 200);

    let (code, out, _) = cli(&[
        "emcoctl", "--server", &server, "get", "-f", f, "-v", v, "-o", "yaml",
    ])
    .await;
    assert_eq!(code, 0);
    assert!(out.contains("name: p1"), "{out}");

    // A second apply fails on the first document: without -s both are tried, with -s one.
    let (code, out, _) = cli(&["emcoctl", "--server", &server, "apply", "-f", f, "-v", v]).await;
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 2, "{out}");
    let (code, out, _) = cli(&[
        "emcoctl", "--server", &server, "apply", "-s", "-f", f, "-v", v,
    ])
    .await;
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("-> 409"), "{out}");

    // update PUTs the changed document.
    let changed = std::fs::read_to_string(&file)
        .unwrap()
        .replace("first", "second");
    let updated = dir.path().join("updated.yaml");
    std::fs::write(&updated, changed).unwrap();
    let u = updated.to_str().unwrap();
    let (code, out, _) = cli(&["emcoctl", "--server", &server, "update", "-f", u, "-v", v]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("PUT {server}/v2/projects/p1 -> 200")),
        "{out}"
    );
    let (_, out, _) = cli(&[
        "emcoctl", "--server", &server, "get", "-f", f, "-v", v, "-o", "json",
    ])
    .await;
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json[0]["body"]["metadata"]["description"], "second");

    let (code, out, _) = cli(&["emcoctl", "--server", &server, "delete", "-f", f, "-v", v]).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("/v2/cluster-providers/cp"),
        "{out}"
    );

    // An unreachable server is a failed request (1); a bad file sends nothing (2).
    let (code, _, err) = cli(&[
        "emcoctl",
        "--server",
        "http://127.0.0.1:1",
        "get",
        "-f",
        f,
        "-v",
        v,
    ])
    .await;
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = cli(&["emcoctl", "--server", &server, "apply", "-f", f]).await;
    assert_eq!(code, 2, "{err}");
}

/// Charts and profiles packaged where the values file for the test-dependency example says
/// (each app is the collectd chart), and that values file with the two clusters' kubeconfigs.
fn test_dependency_values(dir: &Path, kubeconfigs: [&Path; 2]) -> PathBuf {
    let charts = format!("{EXAMPLES}/helm_charts/collectd");
    let packages = dir.join("packages");
    std::fs::create_dir(&packages).unwrap();
    for app in ["collectd", "operator", "nginx"] {
        tgz(
            Path::new(&format!("{charts}/helm/collectd")),
            "collectd",
            &packages.join(format!("{app}.tar.gz")),
        );
        tgz(
            Path::new(&format!("{charts}/profile")),
            ".",
            &packages.join(format!("{app}_profile.tar.gz")),
        );
    }
    let values = dir.join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "ProjectName: proj1\nClusterProvider: provider1\nClusterLabel: edge\nLogicalCloud: lc1\n\
             CompositeApp: ca\nCompositeProfile: cp\nDeploymentIntentGroup: dig\nIntent: i\n\
             GenericPlacementIntent: gpi\nPackagesPath: {}\nAPP1: collectd\nAPP2: operator\nAPP3: nginx\n\
             Clusters:\n- Name: cluster1\n  KubeConfig: {}\n- Name: cluster2\n  KubeConfig: {}\n\
             Applist:\n- Name: collectd\n  Cluster: [cluster1, cluster2]\n- Name: operator\n  Cluster: [cluster1]\n\
             - Name: nginx\n  Cluster: [cluster1, cluster2]\n",
            packages.display(),
            kubeconfigs[0].display(),
            kubeconfigs[1].display(),
        ),
    )
    .unwrap();
    values
}

/// A gzipped tar of `dir`, its entries under `prefix`.
fn tgz(dir: &Path, prefix: &str, out: &Path) {
    std::fs::write(out, emco_helm::archive::pack_dir(dir, prefix).unwrap()).unwrap();
}

/// The test-dependency example's onboarding files, unchanged, with a values file naming temp
/// charts, profiles and kubeconfigs: apply (multipart uploads included) then delete.
#[tokio::test]
async fn test_dependency_onboarding_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let values = test_dependency_values(dir.path(), [&kubeconfig, &kubeconfig]);
    let files: Vec<PathBuf> = ["clusters", "logicalclouds", "apps", "intents"]
        .iter()
        .map(|f| PathBuf::from(format!("{EXAMPLES}/test-dependency/{f}.yaml")))
        .collect();
    let docs = load_documents(&files, Some(&values)).unwrap();
    assert_eq!(docs.len(), 6 + 3 + 10 + 7);
    assert_eq!(docs.iter().filter(|d| !d.uploads.is_empty()).count(), 2 + 6);
    let client = Client::new(&server, None).unwrap();
    let applied = run(&client, Command::Apply, &docs).await;
    assert!(applied.iter().all(Outcome::ok), "{}", lines(&applied));
    let got = run(&client, Command::Get, &docs).await;
    assert!(got.iter().all(Outcome::ok), "{}", lines(&got));
    assert!(
        got.last().unwrap().response.is_none(),
        "approve is not read back"
    );
    let deleted = run(&client, Command::Delete, &docs).await;
    assert!(deleted.iter().all(Outcome::ok), "{}", lines(&deleted));
    assert!(
        deleted[0].response.is_none(),
        "approve is skipped on delete"
    );
    let gone = run(&client, Command::Get, &docs).await;
    let codes = statuses(&gone);
    assert!(
        codes[..codes.len() - 1].iter().all(|c| *c == Some(404)),
        "{}",
        lines(&gone)
    );
}

/// `-t` sends a bearer token and `-w` waits after a 202: a stub route answers 202 with the
/// Authorization header it got.
#[tokio::test]
async fn token_and_wait_after_accepted() {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/v2/projects/p/logical-clouds/lc/instantiate",
        post(|headers: http::HeaderMap| async move {
            let auth = headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            (http::StatusCode::ACCEPTED, auth)
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("i.yaml");
    std::fs::write(
        &file,
        "version: emco/v2\nresourceContext:\n  anchor: projects/p/logical-clouds/lc/instantiate\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "apply",
        "-t",
        "s3cret",
        "-w",
        "1",
        "-f",
        file.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("-> 202 Bearer s3cret"), "{out}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(1));
}

/// A DIG status body: the lifecycle state, the AppContext status, and for each (app, cluster)
/// one resource with the given deployed and ready status.
fn dig_status(
    state: &str,
    deployed: &str,
    ready: &str,
    cells: &[(&str, &str, &str, &str)],
) -> serde_json::Value {
    let mut apps: Vec<serde_json::Value> = Vec::new();
    for (app, cluster, dep, rdy) in cells {
        let mut resource = serde_json::json!({"GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"}, "name": app});
        if !dep.is_empty() {
            resource["deployedStatus"] = (*dep).into();
        }
        if !rdy.is_empty() {
            resource["readyStatus"] = (*rdy).into();
        }
        apps.push(serde_json::json!({"name": app, "clusters": [{"clusterProvider": "p", "cluster": cluster,
            "connectivity": "Available", "resources": [resource]}]}));
    }
    let mut body = serde_json::json!({
        "project": "p", "compositeApp": "ca", "compositeAppVersion": "v1", "name": "dig",
        "states": {"statusctxid": "42", "actions": [
            {"state": "Created", "instance": "", "time": "t0", "revision": 0},
            {"state": state, "instance": "42", "time": "t1", "revision": 1}]},
        "apps": apps,
    });
    if !deployed.is_empty() {
        body["deployedStatus"] = deployed.into();
    }
    if !ready.is_empty() {
        body["readyStatus"] = ready.into();
    }
    body
}

const DIG: &str = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig";

/// A stub status route answering `answers[n]` to its n-th `status=deployed` query (the last
/// one from then on), with the `status=ready` query answered from the same step; it records
/// the query strings it got.
async fn stub_status(
    answers: Vec<serde_json::Value>,
    extra: axum::Router,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    stub_status_counting(answers, extra, Default::default()).await
}

/// [`stub_status`] counting its `status=deployed` answers in `step`.
async fn stub_status_counting(
    answers: Vec<serde_json::Value>,
    extra: axum::Router,
    step: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::extract::RawQuery;
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (step2, seen2) = (step.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            &format!("{DIG}/status"),
            axum::routing::get(move |RawQuery(q): RawQuery| {
                let q = q.unwrap_or_default();
                seen2.lock().unwrap().push(q.clone());
                let n = if q.contains("status=deployed") {
                    step2.fetch_add(1, Ordering::SeqCst)
                } else {
                    step2.load(Ordering::SeqCst).saturating_sub(1)
                };
                let body = answers[n.min(answers.len() - 1)].clone();
                async move { axum::Json(body) }
            }),
        )
        .merge(extra);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (server, seen)
}

fn instantiate_file(dir: &Path) -> PathBuf {
    let file = dir.join("instantiate.yaml");
    std::fs::write(
        &file,
        format!(
            "version: emco/v2\nresourceContext:\n  anchor: {}/instantiate\n",
            &DIG[4..]
        ),
    )
    .unwrap();
    file
}

#[tokio::test]
async fn watch_follows_an_instantiate_until_ready() {
    let answers = vec![
        dig_status(
            "Instantiated",
            "Instantiating",
            "NotReady",
            &[
                ("a1", "c1", "Pending", "NotPresent"),
                ("a2", "c1", "Pending", "NotPresent"),
            ],
        ),
        dig_status(
            "Instantiated",
            "Instantiated",
            "NotReady",
            &[
                ("a1", "c1", "Applied", "NotReady"),
                ("a2", "c1", "Applied", "NotPresent"),
            ],
        ),
        dig_status(
            "Instantiated",
            "Instantiated",
            "NotReady",
            &[
                ("a1", "c1", "Applied", "Ready"),
                ("a2", "c1", "Applied", "NotReady"),
            ],
        ),
        dig_status(
            "Instantiated",
            "Instantiated",
            "Ready",
            &[
                ("a1", "c1", "Applied", "Ready"),
                ("a2", "c1", "Applied", "Ready"),
            ],
        ),
    ];
    let (server, seen) = stub_status(answers, axum::Router::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = instantiate_file(dir.path());
    let f = file.to_str().unwrap();
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "watch",
        "-f",
        f,
        "--interval",
        "0.05",
        "--timeout",
        "120",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("deployment-intent-groups/dig: Instantiated, deployed Instantiating, NotReady [--------------------] 0/2 ready"), "{out}");
    assert!(
        out.contains("a1 @ p+c1: 1 resources, 1 applied, 1 ready (Available)"),
        "{out}"
    );
    assert!(out.contains("[##########----------] 1/2 ready"), "{out}");
    assert!(
        lines.last().unwrap().contains(
            "dig: done: Instantiated, deployed Instantiated, Ready [####################] 2/2 ready"
        ),
        "{out}"
    );
    // Both the deployed and the ready status are asked for.
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().any(|q| q.contains("status=ready")), "{seen:?}");
    assert!(
        seen.iter().any(|q| q.contains("status=deployed")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn watch_reports_failure_and_timeout_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = instantiate_file(dir.path());
    let f = file.to_str().unwrap();
    let failing = vec![
        dig_status(
            "Instantiated",
            "Instantiating",
            "NotReady",
            &[("a1", "c1", "Retrying", "")],
        ),
        dig_status(
            "Instantiated",
            "InstantiateFailed",
            "NotReady",
            &[("a1", "c1", "Failed", "")],
        ),
    ];
    let (server, _) = stub_status(failing, axum::Router::new()).await;
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "watch",
        "-f",
        f,
        "--interval",
        "0.05",
        "-o",
        "json",
    ])
    .await;
    assert_eq!(code, 1, "{out}{err}");
    let events: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["apps"][0]["retrying"], 1, "{out}");
    assert_eq!(events[1]["apps"][0]["failed"], 1, "{out}");
    let last = events.last().unwrap();
    assert_eq!(last["result"], "failed", "{out}");
    assert_eq!(last["message"], "InstantiateFailed", "{out}");

    let stuck = vec![dig_status(
        "Instantiated",
        "Instantiating",
        "NotReady",
        &[("a1", "c1", "Pending", "")],
    )];
    let (server, _) = stub_status(stuck, axum::Router::new()).await;
    let (code, out, _) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "watch",
        "-f",
        f,
        "--interval",
        "0.05",
        "--timeout",
        "0.3",
    ])
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines().last().unwrap().contains("timed out after"),
        "{out}"
    );

    // A DIG the server does not know: 404, over at once.
    let nowhere = format!("{server}/nowhere");
    let (code, out, _) = cli(&["emcoctl", "--server", &nowhere, "watch", "-f", f]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("dig: failed: 404"), "{out}");
}

/// A resource that failed or retries says why under the table.
#[tokio::test]
async fn status_tables_say_why_resources_fail() {
    let mut body = dig_status(
        "Instantiated",
        "Instantiating",
        "",
        &[("a1", "c1", "Applied", ""), ("a2", "c2", "Retrying", "")],
    );
    let r = &mut body["apps"][1]["clusters"][0]["resources"][0];
    r["reason"] = "Unreachable".into();
    r["message"] = "cluster p+c2 did not answer within 5s".into();
    r["attempts"] = 2.into();
    r["nextRetry"] = "2026-11-26T03:30:00Z".into();
    let (server, _) = stub_status(vec![body], axum::Router::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = instantiate_file(dir.path());
    let f = file.to_str().unwrap();
    let (code, out, err) = cli(&["emcoctl", "--server", &server, "status", "-f", f]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            "  why: a2 p+c2 Deployment/a2: Retrying Unreachable: cluster p+c2 did not answer \
             within 5s (attempt 2, next at 2026-11-26T03:30:00Z)\n"
        ),
        "{out}"
    );
    assert_eq!(out.matches("why:").count(), 1, "{out}");
}

#[tokio::test]
async fn status_prints_tables_json_and_passes_query_options() {
    let answers = vec![dig_status(
        "Instantiated",
        "Instantiated",
        "Ready",
        &[
            ("a1", "c1", "Applied", "Ready"),
            ("a2", "c2", "Applied", "NotReady"),
        ],
    )];
    let (server, seen) = stub_status(answers, axum::Router::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = instantiate_file(dir.path());
    let f = file.to_str().unwrap();
    let (code, out, err) = cli(&["emcoctl", "--server", &server, "status", "-f", f]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("deployment-intent-groups/dig ("), "{out}");
    assert!(
        out.contains("state Instantiated, deployed Instantiated, ready Ready, context 42"),
        "{out}"
    );
    let row: Vec<&str> = out
        .lines()
        .find(|l| l.contains("a2"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row, ["a2", "p+c2", "Available", "1", "NotReady=1"], "{out}");

    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "status",
        "-f",
        f,
        "--status",
        "deployed",
        "--output",
        "summary",
        "-o",
        "json",
        "--app",
        "a1",
        "--cluster",
        "p+c1",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json[0]["body"]["states"]["statusctxid"], "42", "{out}");
    assert_eq!(
        json[0]["body"]["apps"][1]["clusters"][0]["cluster"], "c2",
        "{out}"
    );
    assert!(
        json[0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/dig/status?status=deployed&output=summary&app=a1&cluster=p%2Bc1"),
        "{out}"
    );
    assert_eq!(
        seen.lock().unwrap().last().unwrap(),
        "status=deployed&output=summary&app=a1&cluster=p%2Bc1"
    );

    // Bad query options are refused before anything is sent; so are two formats.
    let before = seen.lock().unwrap().len();
    for bad in [
        &["--cluster", "nocluster"][..],
        &["--app", "bad app"],
        &["-o", "json", "-o", "yaml"],
    ] {
        let mut args = vec!["emcoctl", "--server", &server, "status", "-f", f];
        args.extend_from_slice(bad);
        let (code, _, err) = cli(&args).await;
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
    assert_eq!(seen.lock().unwrap().len(), before);
    // A file without lifecycle documents has nothing to report on.
    let plain = dir.path().join("p.yaml");
    std::fs::write(
        &plain,
        "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: p\n",
    )
    .unwrap();
    let (code, _, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "status",
        "-f",
        plain.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 2, "{err}");
    // An error answer is exit 1 and is shown.
    let (code, out, _) = cli(&[
        "emcoctl",
        "--server",
        &format!("{server}/nowhere"),
        "status",
        "-f",
        f,
    ])
    .await;
    assert_eq!(code, 1);
    assert!(out.contains("error: 404"), "{out}");
}

/// delete turns instantiate into terminate and waits for it to finish before it deletes the
/// DIG, which the stub refuses (409) while terminating.
#[tokio::test]
async fn delete_waits_for_the_terminate_before_deleting_the_dig() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let answers = vec![
        dig_status("Instantiated", "Instantiated", "Ready", &[]),
        dig_status("Terminated", "Terminating", "", &[]),
        dig_status("Terminated", "Terminating", "", &[]),
        dig_status("Terminated", "Terminated", "", &[]),
    ];
    // The first answer is the one from before the terminate was seen; the 4th says
    // Terminated, and only from then on does the stub let the DIG be deleted.
    let step = Arc::new(AtomicUsize::new(0));
    let served = step.clone();
    let extra = axum::Router::new()
        .route(
            &format!("{DIG}/terminate"),
            axum::routing::post(|| async { (http::StatusCode::ACCEPTED, "") }),
        )
        .route(
            DIG,
            axum::routing::delete(move || {
                let done = served.load(Ordering::SeqCst) >= 4;
                async move {
                    if done {
                        (http::StatusCode::NO_CONTENT, "")
                    } else {
                        (
                            http::StatusCode::CONFLICT,
                            "DeploymentIntentGroup must be terminated before it can be deleted",
                        )
                    }
                }
            }),
        );
    let (server, _) = stub_status_counting(answers, extra, step).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dig.yaml");
    std::fs::write(
        &file,
        format!(
            "version: emco/v2\nresourceContext:\n  anchor: {}\nmetadata:\n  name: dig\n---\nversion: emco/v2\nresourceContext:\n  anchor: {}/instantiate\n",
            &DIG[4..DIG.len() - 4],
            &DIG[4..]
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, out, err) = cli(&["emcoctl", "--server", &server, "delete", "-f", f]).await;
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("/dig/terminate -> 202") && lines[0].ends_with("(waited: Terminated)"),
        "{out}"
    );
    assert!(
        lines[1].contains(&format!("DELETE {server}{DIG} -> 204")),
        "{out}"
    );

    // With -w the wait is bounded: a DIG stuck terminating fails the command, and the failed
    // DELETE line names the document.
    let stuck = vec![dig_status("Terminated", "Terminating", "", &[])];
    let extra = axum::Router::new()
        .route(
            &format!("{DIG}/terminate"),
            axum::routing::post(|| async { (http::StatusCode::ACCEPTED, "") }),
        )
        .route(
            DIG,
            axum::routing::delete(|| async { (http::StatusCode::CONFLICT, "still terminating") }),
        );
    let (server, _) = stub_status(stuck, extra).await;
    let (code, out, _) = cli(&["emcoctl", "--server", &server, "delete", "-w", "1", "-f", f]).await;
    assert_eq!(code, 1, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{f}:7 (document 2): POST ")),
        "{out}"
    );
    assert!(
        lines[0].ends_with("(still Terminating after the wait)"),
        "{out}"
    );
    assert!(
        lines[1].starts_with(&format!("{f}:1 (document 1): DELETE "))
            && lines[1].contains("-> 409 still terminating"),
        "{out}"
    );
}

/// Serves every connection on 127.0.0.1 over TLS with a fresh self-signed certificate for
/// 127.0.0.1 and answers each request with `body` as JSON; returns the URL and the
/// certificate's PEM.
async fn tls_stub(body: &'static str) -> (String, String) {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let pem = key.cert.pem();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![key.cert.der().clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der())),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to answer.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = tls.read(&mut buf).await.unwrap();
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                tls.write_all(answer.as_bytes()).await.unwrap();
                tls.shutdown().await.unwrap();
            });
        }
    });
    (url, pem)
}

#[tokio::test]
async fn https_with_ca_cert_insecure_and_refused() {
    let (server, pem) = tls_stub(r#"{"metadata":{"name":"p1","description":"over tls"}}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pem).unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(
        &file,
        "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: p1\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "--ca-cert",
        ca.to_str().unwrap(),
        "get",
        "-f",
        f,
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("over tls") && out.contains(&server), "{out}");
    // The system's CAs do not know the certificate: the request fails (1) and says why.
    let (code, _, err) = cli(&["emcoctl", "--server", &server, "get", "-f", f]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("TLS handshake") && err.contains("p.yaml:1 (document 1)"),
        "{err}"
    );
    let (code, out, err) =
        cli(&["emcoctl", "--server", &server, "--insecure", "get", "-f", f]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("over tls"), "{out}");
    // A CA file without certificates is bad input (2).
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let (code, _, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "--ca-cert",
        empty.to_str().unwrap(),
        "get",
        "-f",
        f,
    ])
    .await;
    assert_eq!(code, 2, "{err}");
}

/// A multipart upload of a file several times the chunk size arrives whole, with the metadata
/// part first and a Content-Length that matches.
#[tokio::test]
async fn large_uploads_arrive_whole() {
    use axum::body::Bytes;
    use sha2::Digest;
    let app = axum::Router::new().route(
        "/v2/projects/p/composite-apps/ca/v1/apps",
        axum::routing::post(|headers: http::HeaderMap, body: Bytes| async move {
            let length: usize = headers[http::header::CONTENT_LENGTH]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let ctype = headers[http::header::CONTENT_TYPE].to_str().unwrap();
            let boundary = ctype.split("boundary=").nth(1).unwrap().to_owned();
            let marker = format!("\r\n--{boundary}\r\n");
            let text = body.as_ref();
            let start = text
                .windows(marker.len())
                .position(|w| w == marker.as_bytes())
                .unwrap();
            let rest = &text[start + marker.len()..];
            let data_at = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let end = format!("\r\n--{boundary}--\r\n");
            let data = &rest[data_at..rest.len() - end.len()];
            let digest = hex(&sha2::Sha256::digest(data));
            (
                http::StatusCode::CREATED,
                format!("{length} {} {digest}", body.len()),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.layer(axum::extract::DefaultBodyLimit::disable()),
        )
        .await
    });
    let dir = tempfile::tempdir().unwrap();
    let chart: Vec<u8> = (0..(5 * emcoctl::client::UPLOAD_CHUNK + 3))
        .map(|i| (i * 7 % 256) as u8)
        .collect();
    std::fs::write(dir.path().join("chart.tgz"), &chart).unwrap();
    let file = dir.path().join("app.yaml");
    std::fs::write(
        &file,
        "version: emco/v2\nresourceContext:\n  anchor: projects/p/composite-apps/ca/v1/apps\nmetadata:\n  name: a\nfile: chart.tgz\n",
    )
    .unwrap();
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "apply",
        "-f",
        file.to_str().unwrap(),
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let answer = out.split("-> 201 ").nth(1).unwrap().trim().to_owned();
    let parts: Vec<&str> = answer.split(' ').collect();
    assert_eq!(parts[0], parts[1], "Content-Length is the body's length");
    assert_eq!(parts[2], hex(&sha2::Sha256::digest(&chart)));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The test-dependency example end to end through the command line, its files unchanged (the
/// app dependencies left out: their 10 s waits only slow the test): onboarding applied against
/// an emco-server whose clusters are kubesim's, the logical cloud instantiated and watched, the
/// DIG instantiated and watched until Instantiated and Ready, its status printed, and one
/// delete over every file that terminates before it deletes.
#[tokio::test]
async fn test_dependency_instantiate_watch_status_delete() {
    use std::time::Duration;
    let fleet = kubesim::Fleet::start(kubesim::FleetConfig {
        clusters: 2,
        ready_delay: Duration::from_millis(200),
        ..kubesim::FleetConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut kubeconfigs = Vec::new();
    for name in ["c1", "c2"] {
        let path = dir.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&path, fleet.kubeconfig(name).unwrap()).unwrap();
        kubeconfigs.push(path);
    }
    let values = test_dependency_values(dir.path(), [&kubeconfigs[0], &kubeconfigs[1]]);
    let orch = Orchestrator::builder(std::sync::Arc::new(emco_store::InMemoryResourceStore::new()))
        .rsync(emco_testkit::fast_rsync)
        .build()
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    orch.start(cancel.clone()).await.unwrap();
    let app = emco_service::app(orch, &Config::default(), Metrics::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let example = |f: &str| format!("{EXAMPLES}/test-dependency/{f}.yaml");
    let v = values.to_str().unwrap();
    // The onboarding without the dependency documents, through stdin.
    let files: Vec<PathBuf> = ["clusters", "logicalclouds", "apps", "intents"]
        .iter()
        .map(|f| PathBuf::from(example(f)))
        .collect();
    let docs = load_documents(&files, Some(&values)).unwrap();
    let client = Client::new(&server, None).unwrap();
    let onboard: Vec<_> = docs
        .iter()
        .filter(|d| !d.anchor.ends_with("/dependency"))
        .cloned()
        .collect();
    let applied = run(&client, Command::Apply, &onboard).await;
    assert!(applied.iter().all(Outcome::ok), "{}", lines(&applied));

    let lc = example("instantiatelc");
    // -w waits until the operation settles (an admin cloud settles at once).
    let (code, out, err) = cli(&[
        "emcoctl", "--server", &server, "apply", "-w", "60", "-f", &lc, "-v", v,
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("/lc1/instantiate -> 202 (waited: Instantiated)"),
        "{out}"
    );
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "watch",
        "-f",
        &lc,
        "-v",
        v,
        "--interval",
        "0.2",
        "--timeout",
        "120",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("logical-clouds/lc1: done"), "{out}");

    let inst = example("instantiate");
    // -w on a DIG waits for rsync to apply everything (not for readiness: watch's job).
    let (code, out, err) = cli(&[
        "emcoctl", "--server", &server, "apply", "-w", "120", "-o", "json", "-f", &inst, "-v", v,
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json[0]["status"], 202, "{out}");
    assert!(
        json[0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/dig/instantiate"),
        "{out}"
    );
    assert_eq!(
        json[0]["waited"],
        serde_json::json!({"result": "settled", "status": "Instantiated"}),
        "{out}"
    );
    let (code, out, err) = cli(&[
        "emcoctl",
        "--server",
        &server,
        "watch",
        "-f",
        &inst,
        "-v",
        v,
        "--interval",
        "0.2",
        "--timeout",
        "120",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let last = out.lines().last().unwrap();
    assert!(
        last.contains(
            "deployment-intent-groups/dig: done: Instantiated, deployed Instantiated, Ready"
        ),
        "{out}"
    );
    // collectd and nginx on both clusters, operator on cluster1.
    for cell in [
        "collectd @ provider1+cluster1",
        "collectd @ provider1+cluster2",
        "operator @ provider1+cluster1",
        "nginx @ provider1+cluster2",
    ] {
        assert!(out.contains(cell), "{cell}: {out}");
    }

    let (code, out, err) = cli(&[
        "emcoctl", "--server", &server, "status", "-f", &inst, "-v", v, "--status", "deployed",
        "-o", "json",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let body = &json[0]["body"];
    assert_eq!(body["deployedStatus"], "Instantiated", "{out}");
    assert_eq!(body["apps"].as_array().unwrap().len(), 3, "{out}");
    let (code, out, err) = cli(&[
        "emcoctl", "--server", &server, "status", "-f", &inst, "-v", v, "--apps",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    for app in ["collectd", "operator", "nginx"] {
        assert!(out.lines().any(|l| l.trim() == app), "{app}: {out}");
    }

    // One delete over everything, in file order: the DIG's terminate comes first and is
    // waited for, then the DIG and the rest go; the cloud is terminated before it is deleted.
    let mut args = vec!["emcoctl", "--server", &server, "delete", "-v", v];
    let all: Vec<String> = [
        "clusters",
        "logicalclouds",
        "instantiatelc",
        "apps",
        "intents",
        "instantiate",
    ]
    .iter()
    .map(|f| example(f))
    .collect();
    for f in &all {
        args.extend(["-f", f.as_str()]);
    }
    let (code, out, err) = cli(&args).await;
    let failed: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("-> 4") && !l.contains("/dependency/"))
        .collect();
    assert!(failed.is_empty(), "{out}{err}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("/dig/terminate -> 202"),
        "{out}"
    );
    assert!(
        out.lines().next().unwrap().contains("(waited: Terminated)"),
        "{out}"
    );
    // The dependency documents were never applied: their deletes are the only failures.
    assert_eq!(code, 1, "{out}{err}");
    let gone = run(&client, Command::Get, &onboard).await;
    let codes = statuses(&gone);
    assert!(
        codes[..codes.len() - 1].iter().all(|c| *c == Some(404)),
        "{}",
        lines(&gone)
    );
    cancel.cancel();
    fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// EMCO's hpa example networks (`hpa/hpa-vfw-networks.yaml`, three ovn4nfv networks on each of
/// two clusters, then `apply` on both) with the values of EMCO's vfw setup: applied, read back
/// and deleted (delete turns `apply` into `terminate`, as EMCO's emcoctl).
#[tokio::test]
async fn ncm_networks_apply_and_delete() {
    let file = PathBuf::from(format!("{EXAMPLES}/hpa/hpa-vfw-networks.yaml"));
    if !file.exists() {
        assert!(
            std::env::var("CI").is_err(),
            "{} is missing in CI",
            file.display()
        );
        eprintln!("SKIPPED: {} is missing", file.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let clusters = dir.path().join("clusters.yaml");
    let mut text = "version: emco/v2\nresourceContext:\n  anchor: cluster-providers\nmetadata:\n  name: vfw-provider\n".to_owned();
    for c in ["edge01", "edge02"] {
        text.push_str(&format!(
            "---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/vfw-provider/clusters\nmetadata:\n  name: {c}\nfile: {}\n",
            kubeconfig.display()
        ));
    }
    std::fs::write(&clusters, text).unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        "ClusterProvider: vfw-provider\nCluster1: edge01\nCluster2: edge02\n\
         EmcoPrivateNet: emco-private-net\nEmcoPrivateSubnet: 10.10.20.0/24\n\
         EmcoPrivateSubnetName: subnet1\nEmcoPrivateGateway: 10.10.20.1/24\n\
         UnprotectedPrivateNet: unprotected-private-net\nUnprotectedPrivateSubnet: 192.168.10.0/24\n\
         UnprotectedPrivateSubnetName: subnet1\nUnprotectedPrivateGateway: 192.168.10.1/24\n\
         ProtectedPrivateNet: protected-private-net\nProtectedPrivateSubnet: 192.168.20.0/24\n\
         ProtectedPrivateSubnetName: subnet1\nProtectedPrivateGateway: 192.168.20.1/24\n",
    )
    .unwrap();
    let client = Client::new(&server, None).unwrap();
    let setup = load_documents(std::slice::from_ref(&clusters), None).unwrap();
    let made = run(&client, Command::Apply, &setup).await;
    assert_eq!(statuses(&made), [Some(201); 3], "{}", lines(&made));

    let docs = load_documents(std::slice::from_ref(&file), Some(&values)).unwrap();
    let applied = run(&client, Command::Apply, &docs).await;
    let mut expected = vec![Some(201); 6];
    expected.extend([Some(204); 2]);
    assert_eq!(statuses(&applied), expected, "{}", lines(&applied));
    let got = run(&client, Command::Get, &docs).await;
    let mut expected = vec![Some(200); 6];
    expected.extend([None, None]); // nothing to get for `apply`
    assert_eq!(statuses(&got), expected, "{}", lines(&got));
    // While applied, the networks stay.
    let refused = run(&client, Command::Delete, &docs[..1]).await;
    assert_eq!(statuses(&refused), [Some(409)], "{}", lines(&refused));

    let deleted = run(&client, Command::Delete, &docs).await;
    assert_eq!(
        statuses(&deleted),
        [
            Some(204),
            Some(204),
            Some(204),
            Some(204),
            Some(204),
            Some(204),
            Some(204),
            Some(204)
        ],
        "{}",
        lines(&deleted)
    );
    assert!(
        deleted[0].line().contains("POST") && deleted[0].line().contains("edge02/terminate"),
        "{}",
        deleted[0].line()
    );
    let gone = run(&client, Command::Get, &docs).await;
    assert_eq!(
        statuses(&gone).into_iter().flatten().collect::<Vec<_>>(),
        [404; 6],
        "{}",
        lines(&gone)
    );
}
