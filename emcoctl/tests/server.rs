//! emcoctl against the real emco-server, in process on 127.0.0.1 with a temporary store.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::path::{Path, PathBuf};

use emco_orchestrator::Orchestrator;
use emco_server::{Config, Metrics};
use emcoctl::cli::load_documents;
use emcoctl::client::Client;
use emcoctl::ops::{self, Command, Options, Outcome};

const EXAMPLES: &str = "/work/shared/testdata/emco-examples";

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";

/// Serves a fresh emco-server; returns its URL (the temp dir must outlive the test).
async fn serve(dir: &Path) -> String {
    let config = Config {
        data_dir: dir.join("data"),
        ..Config::default()
    };
    let store = emco_server::open_store(&config).await.unwrap();
    let app = emco_server::app(Orchestrator::new(store), &config, Metrics::new());
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
    // dtc's controllers are not served by emco-rs yet: 404.
    let applied = run(&client, Command::Apply, &docs).await;
    assert_eq!(
        statuses(&applied),
        [
            Some(201),
            Some(201),
            Some(201),
            Some(404),
            Some(201),
            Some(201),
            Some(201)
        ],
        "{}",
        lines(&applied)
    );
    let got = run(&client, Command::Get, &docs).await;
    assert_eq!(
        statuses(&got),
        [
            Some(200),
            Some(200),
            Some(200),
            Some(404),
            Some(200),
            Some(200),
            Some(200)
        ],
        "{}",
        lines(&got)
    );
    let deleted = run(&client, Command::Delete, &docs).await;
    let mut codes = statuses(&deleted);
    codes.reverse();
    assert!(
        codes.iter().enumerate().all(|(i, c)| if i == 3 {
            *c == Some(404)
        } else {
            c.is_some_and(|c| c == 204 || c == 200)
        }),
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

/// A gzipped tar of `dir`, its entries under `prefix`.
fn tgz(dir: &Path, prefix: &str, out: &Path) {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    b.append_dir_all(prefix, dir).unwrap();
    std::fs::write(out, b.into_inner().unwrap().finish().unwrap()).unwrap();
}

/// The test-dependency example's onboarding files, unchanged, with a values file naming temp
/// charts, profiles and kubeconfigs: apply (multipart uploads included) then delete.
#[tokio::test]
async fn test_dependency_onboarding_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(dir.path()).await;
    let charts = format!("{EXAMPLES}/helm_charts/collectd");
    let packages = dir.path().join("packages");
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
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(
        &values,
        format!(
            "ProjectName: proj1\nClusterProvider: provider1\nClusterLabel: edge\nLogicalCloud: lc1\n\
             CompositeApp: ca\nCompositeProfile: cp\nDeploymentIntentGroup: dig\nIntent: i\n\
             GenericPlacementIntent: gpi\nPackagesPath: {}\nAPP1: collectd\nAPP2: operator\nAPP3: nginx\n\
             Clusters:\n- Name: cluster1\n  KubeConfig: {k}\n- Name: cluster2\n  KubeConfig: {k}\n\
             Applist:\n- Name: collectd\n  Cluster: [cluster1, cluster2]\n- Name: operator\n  Cluster: [cluster1]\n\
             - Name: nginx\n  Cluster: [cluster1, cluster2]\n",
            packages.display(),
            k = kubeconfig.display()
        ),
    )
    .unwrap();
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
    // The lifecycle routes are not served yet: instantiate and its terminate answer 404.
    let lifecycle = load_documents(
        &[PathBuf::from(format!(
            "{EXAMPLES}/test-dependency/instantiate.yaml"
        ))],
        Some(&values),
    )
    .unwrap();
    let instantiated = run(&client, Command::Apply, &lifecycle).await;
    assert!(
        instantiated[0].line().contains("/dig/instantiate -> 404"),
        "{}",
        lines(&instantiated)
    );
    let terminated = run(&client, Command::Delete, &lifecycle).await;
    assert!(
        terminated[0].line().contains("POST ")
            && terminated[0].line().contains("/dig/terminate -> 404"),
        "{}",
        lines(&terminated)
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
