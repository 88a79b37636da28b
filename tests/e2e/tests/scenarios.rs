//! EMCO's example scenarios end to end: the emcoctl files of `../shared/testdata/emco-examples`,
//! unchanged, rendered with a generated values file that points them at in-process kubesim
//! clusters, applied over HTTP to an in-process emco-server; then status, terminate, and nothing
//! of ours left on the clusters. Each scenario runs on the embedded store and on etcd + MongoDB
//! (skipped, loudly, when `EMCO_TEST_ETCD` / `EMCO_TEST_MONGO` are unset).
//!
//! EMCO examples whose files are not in the test data (ca-certs' test-cert) are written here in
//! their emcoctl shapes.
//!
//! Documents left out, with the reason where it is done: hpa's intents and controller
//! registrations (kubesim clusters have none of the hardware the intents require).

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::path::PathBuf;

use emco_core::{Error, Result};
use emco_e2e::{
    Backends, DEADLINE, Env, EnvConfig, Phases, RealClusters, examples, load, set_values, tgz,
    without,
};
use serde_json::{Value, json};

#[path = "scenarios/drift.rs"]
mod drift;
#[path = "scenarios/preview.rs"]
mod preview;
use drift::drift_is_reported;
use preview::preview_of_each_change;

/// Runs `scenario` on both store setups, one test each.
macro_rules! on_both_stores {
    ($($scenario:ident),+ $(,)?) => {$(
        mod $scenario {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                super::run(Backends::Embedded, super::$scenario).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn etcd_mongo() {
                super::run(Backends::EtcdMongo, super::$scenario).await;
            }
        }
    )+};
}

on_both_stores!(
    preview_of_each_change,
    drift_is_reported,
    single_cluster,
    single_cluster_standard_cloud,
    single_cluster_dtc,
    single_cluster_vfw,
    multi_cluster,
    test_dependency,
    test_update,
    hpa_simple,
    hpa_vfw_networks,
    own_example,
    hundred_digs,
    ca_certs_example,
    service_discovery_example,
    istio_traffic_example,
    sdewan_example,
    sfc_example,
    rollout_of_two_waves
);

/// The real-cluster tier: every scenario against three real Kubernetes control planes
/// (`../shared/kube`: kube-apiserver and kube-controller-manager, no nodes), one after the other
/// in one environment. Workloads never run there, so each deployment is followed to
/// Instantiated with every resource Applied; a standard logical cloud's certificate is signed by
/// the real kube-controller-manager; terminate leaves nothing labelled behind. Each scenario
/// gets its own server and store over the same clusters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_clusters() {
    let Some(real) = RealClusters::start(3).unwrap() else {
        return;
    };
    let real = std::sync::Arc::new(real);
    let mut failures = Vec::new();
    macro_rules! each {
        ($($scenario:ident),+) => {$(
            let config = EnvConfig {
                real: Some(std::sync::Arc::clone(&real)),
                ..EnvConfig::new(Backends::Embedded, 3)
            };
            let env = Env::start(config).await.unwrap().unwrap();
            let started = std::time::Instant::now();
            // A hung scenario must not hold the clusters past the test's own limit.
            match tokio::time::timeout(DEADLINE, $scenario(&env)).await {
                Ok(Ok(())) => eprintln!(
                    "real clusters: {} passed in {:?}",
                    stringify!($scenario),
                    started.elapsed()
                ),
                Ok(Err(e)) => failures.push(format!("{}: {e}", stringify!($scenario))),
                Err(_) => failures.push(format!("{}: not done in {DEADLINE:?}", stringify!($scenario))),
            }
        )+};
    }
    // single-cluster ends InstantiateFailed there, as `helm install` of its chart does (see
    // `single_cluster_on_real_clusters`). Not here: test-dependency (each app waits for the one
    // before to be Ready, which no workload becomes without nodes), service-discovery (sds
    // waits for the server to be ready, likewise), ca-certs (no cert-manager signs there) and
    // hundred-digs (a load test).
    each!(
        single_cluster,
        single_cluster_standard_cloud,
        single_cluster_dtc,
        single_cluster_vfw,
        multi_cluster,
        test_update,
        hpa_simple,
        hpa_vfw_networks,
        istio_traffic_example,
        sdewan_example,
        sfc_example,
        rollout_of_two_waves,
        preview_of_each_change,
        drift_is_reported
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Starts an environment of three clusters on `stores` and runs `scenario` in it; a skipped
/// store setup returns.
async fn run(stores: Backends, scenario: impl AsyncFnOnce(&Env) -> Result<()>) {
    let Some(env) = Env::start(EnvConfig::new(stores, 3)).await.unwrap() else {
        return;
    };
    if let Err(e) = scenario(&env).await {
        panic!("[{stores}] {e}");
    }
}

fn packages(env: &Env) -> PathBuf {
    let dir = env.dir().join("output");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn chart(name: &str) -> PathBuf {
    examples().join("helm_charts").join(name)
}

/// A values file in the shape of the multi-cluster examples (multi-cluster, test-update,
/// test-dependency): every kubesim cluster `cN` registered as `clusterN`, and `extra` merged in.
fn cluster_values(env: &Env, extra: Value) -> PathBuf {
    let clusters: Vec<Value> = env
        .clusters
        .names()
        .iter()
        .map(|c| {
            json!({
                "Name": c.replace('c', "cluster"),
                "KubeConfig": env.kubeconfig_path(c),
            })
        })
        .collect();
    let mut values = json!({
        "HostIP": "127.0.0.1",
        "RsyncPort": 9031,
        "GacPort": 9033,
        "OvnPort": 9032,
        "DtcPort": 9048,
        "NpsPort": 9062,
        "ProjectName": "proj1",
        "ClusterProvider": "provider1",
        "ClusterLabel": "edge-cluster",
        "AdminCloud": "default",
        "LogicalCloud": "lc1",
        "CompositeApp": "collection-composite-app",
        "CompositeProfile": "collection-composite-profile",
        "DeploymentIntent": "collection-deployment-intent-group",
        "DeploymentIntentGroup": "collection-deployment-intent-group",
        "GenericPlacementIntent": "collection-placement-intent",
        "Intent": "collection-deployment-intent",
        "PackagesPath": packages(env),
        "Clusters": clusters,
    });
    let (Value::Object(base), Value::Object(extra)) = (&mut values, extra) else {
        unreachable!("both are objects");
    };
    base.extend(extra);
    env.write_values("values.yaml", &values).unwrap()
}

fn files(dir: &str, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| examples().join(dir).join(n)).collect()
}

/// single-cluster's `values-novars.yaml` pointed at this environment (cluster c1, local
/// ports) with the packages `files`; the values file's path.
fn single_cluster_values(env: &Env, files: &[(&str, PathBuf)]) -> PathBuf {
    let ex = examples().join("single-cluster");
    let novars = std::fs::read_to_string(ex.join("templates/values-novars.yaml")).unwrap();
    let mut set = vec![
        ("HostIP", "127.0.0.1".to_owned()),
        ("RsyncPort", "9031".to_owned()),
        ("DtcPort", "9048".to_owned()),
        ("NpsPort", "9062".to_owned()),
        ("OvnPort", "9032".to_owned()),
        (
            "KubeConfig",
            env.kubeconfig_path("c1").display().to_string(),
        ),
    ];
    set.extend(files.iter().map(|(k, p)| (*k, p.display().to_string())));
    let path = env.dir().join("values.yaml");
    std::fs::write(&path, set_values(&novars, &set)).unwrap();
    path
}

/// A single-cluster use case through the admin logical cloud: the prerequisites, the cloud,
/// then `test-<use_case>-deployment.yaml` and `test-<use_case>-instantiate.yaml`, rendered with
/// `values`.
fn admin_cloud_use_case(values: &std::path::Path, use_case: &str) -> Result<Phases> {
    let deployment = format!("test-{use_case}-deployment.yaml");
    let instantiate = format!("test-{use_case}-instantiate.yaml");
    let docs = load(
        &files(
            "single-cluster",
            &[
                "templates/prerequisites-common.yaml",
                "templates/prerequisites-lc-admin.yaml",
                "instantiate-lc.yaml",
                &deployment,
                &instantiate,
            ],
        ),
        values,
    )?;
    Ok(Phases::split(docs))
}

/// single-cluster: prometheus-operator (as kube-prometheus-stack) and collectd on one cluster
/// through an admin logical cloud, as the README's first use case.
async fn single_cluster(env: &Env) -> Result<()> {
    let out = packages(env);
    for (app, src) in [
        ("kube-prometheus-stack", "prometheus-operator"),
        ("collectd", "collectd"),
    ] {
        tgz(
            &chart(src).join("helm"),
            ".",
            &out.join(format!("{app}.tar.gz")),
        )?;
        tgz(
            &chart(src).join("profile"),
            ".",
            &out.join(format!("{app}_profile.tar.gz")),
        )?;
    }
    let values_path = single_cluster_values(
        env,
        &[
            ("HelmApp1", out.join("kube-prometheus-stack.tar.gz")),
            ("HelmApp2", out.join("collectd.tar.gz")),
            (
                "ProfileApp1",
                out.join("kube-prometheus-stack_profile.tar.gz"),
            ),
            ("ProfileApp2", out.join("collectd_profile.tar.gz")),
        ],
    );
    let phases = admin_cloud_use_case(&values_path, "prometheus-collectd")?;
    if env.is_real() {
        return single_cluster_on_real_clusters(env, &phases).await;
    }
    env.deploy(&phases).await?;
    env.wait_placement(
        &[("kube-prometheus-stack", &["c1"]), ("collectd", &["c1"])],
        DEADLINE,
    )
    .await?;
    env.remove(&phases).await
}

/// single-cluster on v1.32 control planes ends as `helm install` of its 2020 chart ends there:
/// kube-prometheus-stack's pre-install hooks include a `policy/v1beta1` PodSecurityPolicy, a
/// kind Kubernetes 1.25 removed, so its install stops at that hook and the DIG is
/// InstantiateFailed, while collectd deploys. The terminate runs the chart's pre-delete
/// cleanup Job, which never completes without nodes: after the hook timeout it deletes
/// everything all the same and ends TerminateFailed.
async fn single_cluster_on_real_clusters(env: &Env, phases: &Phases) -> Result<()> {
    env.begin(phases).await?;
    let dig = &phases.dig_paths()[0];
    env.wait_status(dig, "status=deployed", DEADLINE, |s| {
        s["deployedStatus"] == "InstantiateFailed"
    })
    .await?;
    // What failed: the hooks' removed kind, and what the failed hook phase held back.
    let detail = env.status(dig, "status=deployed&output=detail").await?;
    let mut seen = Vec::new();
    for app in detail["apps"].as_array().into_iter().flatten() {
        let resources = app["clusters"][0]["resources"].as_array().unwrap();
        let deployed = |s: &str| {
            resources
                .iter()
                .filter(|r| r["deployedStatus"] == s)
                .count()
        };
        let psp_failed = resources
            .iter()
            .any(|r| r["GVK"]["Kind"] == "PodSecurityPolicy" && r["deployedStatus"] == "Failed");
        seen.push((
            app["name"].as_str().unwrap().to_owned(),
            deployed("Applied") == resources.len(),
            deployed("Failed") == resources.len() && psp_failed,
        ));
    }
    seen.sort();
    let want = [
        ("collectd".to_owned(), true, false),
        ("kube-prometheus-stack".to_owned(), false, true),
    ];
    if seen != want {
        return Err(Error::internal(format!(
            "expected collectd applied and kube-prometheus-stack failed at its hooks: {seen:?}"
        )));
    }
    env.remove_as(phases, "TerminateFailed").await
}

/// single-cluster with `LOGICAL_CLOUD_LEVEL=standard`: a standard logical cloud (namespace,
/// user with a certificate, permission) and the monitor use case deployed into it through the
/// kubeconfig dcm made for the cloud. EMCO's monitor chart is built from its sources and is not
/// in the testdata; collectd stands in for it.
async fn single_cluster_standard_cloud(env: &Env) -> Result<()> {
    const NAMESPACE: &str = "standard-lc-ns";
    let ex = examples().join("single-cluster");
    let out = packages(env);
    tgz(&chart("collectd/helm"), ".", &out.join("monitor.tar.gz"))?;
    tgz(
        &chart("collectd/profile"),
        ".",
        &out.join("monitor_profile.tar.gz"),
    )?;
    let novars = std::fs::read_to_string(ex.join("templates/values-novars.yaml")).unwrap();
    let path = |p: PathBuf| p.display().to_string();
    let values = set_values(
        &novars,
        &[
            ("HostIP", "127.0.0.1".to_owned()),
            ("RsyncPort", "9031".to_owned()),
            ("DtcPort", "9048".to_owned()),
            ("NpsPort", "9062".to_owned()),
            ("StandardNamespace", NAMESPACE.to_owned()),
            ("KubeConfig", path(env.kubeconfig_path("c1"))),
            ("HelmAppMonitor", path(out.join("monitor.tar.gz"))),
            ("ProfileApp3", path(out.join("monitor_profile.tar.gz"))),
        ],
    );
    let values_path = env.dir().join("values.yaml");
    std::fs::write(&values_path, values).unwrap();
    let docs = load(
        &files(
            "single-cluster",
            &[
                "templates/prerequisites-common.yaml",
                "templates/prerequisites-lc-standard.yaml",
                "instantiate-lc.yaml",
                "monitor-deployment.yaml",
                "monitor-instantiate.yaml",
            ],
        ),
        &values_path,
    )?;
    let phases = Phases::split(docs);
    env.deploy(&phases).await?;
    env.wait_placement(&[("monitor", &["c1"])], DEADLINE)
        .await?;
    let outside: Vec<String> = env
        .labelled_objects("c1")
        .await?
        .iter()
        .filter(|o| o.app() == "monitor" && o.namespace != NAMESPACE)
        .map(ToString::to_string)
        .collect();
    if !outside.is_empty() {
        return Err(Error::internal(format!(
            "monitor objects outside the cloud's namespace {NAMESPACE}: {}",
            outside.join(", ")
        )));
    }
    env.remove(&phases).await?;
    if env.namespace_exists("c1", NAMESPACE).await? {
        return Err(Error::internal(format!(
            "the cloud's namespace {NAMESPACE} is left on c1"
        )));
    }
    Ok(())
}

/// single-cluster's dtc use case (`test-dtc-deployment.yaml`): http-client and http-server
/// through the admin cloud, a traffic group whose inbound intent lets http-client reach
/// http-server on 3333/TCP, dtc registered as an action controller with nps as its
/// sub-controller and cluster1 labelled `networkpolicy-supported`: nps's NetworkPolicy reaches
/// the cluster, and goes with the terminate.
async fn single_cluster_dtc(env: &Env) -> Result<()> {
    let out = packages(env);
    for (app, profile) in [
        (
            "http-client",
            "network_policy_overrides/http-client-profile",
        ),
        (
            "http-server",
            "network_policy_overrides/http-server-profile",
        ),
    ] {
        tgz(
            &chart(app).join("helm"),
            ".",
            &out.join(format!("{app}.tar.gz")),
        )?;
        tgz(
            &chart(app).join("profile").join(profile),
            ".",
            &out.join(format!("{app}-profile.tar.gz")),
        )?;
    }
    let values_path = single_cluster_values(
        env,
        &[
            ("HelmApp4", out.join("http-client.tar.gz")),
            ("HelmApp5", out.join("http-server.tar.gz")),
            ("ProfileApp4", out.join("http-client-profile.tar.gz")),
            ("ProfileApp5", out.join("http-server-profile.tar.gz")),
        ],
    );
    let phases = admin_cloud_use_case(&values_path, "dtc")?;
    env.deploy(&phases).await?;
    env.wait_placement(
        &[("http-client", &["c1"]), ("http-server", &["c1"])],
        DEADLINE,
    )
    .await?;
    // nps's policy (src/nps/internal/networkpolicy): the server's pods admit the client's, and
    // any source, as the server has no externalSupport; protocol and port are two entries (the
    // API server defaults the second's protocol to TCP).
    let policies: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        env.kube("c1").await?,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
        )),
    );
    let list = policies
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| Error::unavailable("NetworkPolicies of c1").with_source(e))?;
    let found: Vec<Value> = list
        .items
        .iter()
        .filter(|p| p.metadata.name.as_deref() == Some("collectd-dtc-intent-serverin"))
        .map(|p| p.data["spec"].clone())
        .collect();
    let want = json!({
        "podSelector": {"matchLabels": {"app": "http-server"}},
        "policyTypes": ["Ingress"],
        "ingress": [{
            "from": [{"podSelector": {"matchLabels": {"app": "http-client"}}},
                     {"ipBlock": {"cidr": "0.0.0.0/0"}}],
            "ports": [{"protocol": "TCP"}, {"protocol": "TCP", "port": 3333}],
        }],
    });
    if found != [want.clone()] {
        return Err(Error::internal(format!(
            "expected nps's NetworkPolicy collectd-dtc-intent-serverin {want} on c1, found {found:?}"
        )));
    }
    env.remove(&phases).await
}

/// single-cluster's vfw use case (`test-vfw-deployment.yaml`): ovnaction registered, three
/// ovn4nfv networks applied to cluster1 through ncm (the cluster has the CRDs), and the
/// three-app network function chain (packetgen, firewall, sink: charts written for these
/// tests in `tests/charts/vfw`, as the example's charts are not in the test data) through the
/// admin cloud with ovnaction's workload and interface intents. Each Deployment's pod template
/// carries exactly its intents' interfaces (ovn4nfv's nfn-network annotation) and multus'
/// selection of ovn-networkobj; the overrides reach the rendered objects; terminate leaves
/// nothing.
async fn single_cluster_vfw(env: &Env) -> Result<()> {
    const CRDS: &str = include_str!("../../crds/ncm.yaml");
    env.install_crds("c1", CRDS).await?;
    let out = packages(env);
    let charts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/vfw");
    for app in ["packetgen", "firewall", "sink"] {
        tgz(&charts.join(app), app, &out.join(format!("{app}.tar.gz")))?;
    }
    tgz(
        &examples().join("profiles/default/profile"),
        ".",
        &out.join("profile.tar.gz"),
    )?;
    let values_path = single_cluster_values(
        env,
        &[
            ("HelmAppPacketgen", out.join("packetgen.tar.gz")),
            ("HelmAppFirewall", out.join("firewall.tar.gz")),
            ("HelmAppSink", out.join("sink.tar.gz")),
            ("ProfileFw", out.join("profile.tar.gz")),
        ],
    );
    let phases = admin_cloud_use_case(&values_path, "vfw")?;
    env.deploy(&phases).await?;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(env.kube("c1").await?, "default");
    let interface = |interface: &str, network: &str, ip: &str| {
        json!({"interface": interface, "name": network, "defaultGateway": "false",
            "ipAddress": ip})
    };
    // The interfaces in the order the file creates them, as EMCO lists them (insertion order).
    for (name, want) in [
        (
            "r1-packetgen",
            vec![
                interface("eth1", "unprotected-private-net", "192.168.10.2"),
                interface("eth2", "emco-private-net", "10.10.20.2"),
            ],
        ),
        (
            "r1-firewall",
            vec![
                interface("eth3", "emco-private-net", "10.10.20.3"),
                interface("eth1", "unprotected-private-net", "192.168.10.3"),
                interface("eth2", "protected-private-net", "192.168.20.2"),
            ],
        ),
        (
            "r1-sink",
            vec![
                interface("eth1", "protected-private-net", "192.168.20.3"),
                interface("eth2", "emco-private-net", "10.10.20.4"),
            ],
        ),
    ] {
        let d = deployments
            .get(name)
            .await
            .map_err(|e| Error::unavailable(format!("Deployment {name} on c1")).with_source(e))?;
        let d = serde_json::to_value(&d).unwrap_or_default();
        let annotations: std::collections::BTreeMap<String, String> = d
            .pointer("/spec/template/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let nfn: Value = annotations
            .get("k8s.plugin.opnfv.org/nfn-network")
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null);
        let networks = annotations
            .get("k8s.v1.cni.cncf.io/networks")
            .map(String::as_str);
        if nfn != json!({"type": "ovn4nfv", "interface": want})
            || networks
                != Some(r#"[{"name":"ovn-networkobj","namespace":"default","cni-args":null}]"#)
        {
            return Err(Error::internal(format!(
                "{name}: expected the interfaces {want:?} and multus' ovn-networkobj, found {annotations:?}"
            )));
        }
    }
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(env.kube("c1").await?, "default");
    for (name, port) in [("r1-packetgen", 30888), ("r1-sink", 30677)] {
        let svc = services
            .get(name)
            .await
            .map_err(|e| Error::unavailable(format!("Service {name} on c1")).with_source(e))?;
        let node_port = serde_json::to_value(&svc)
            .unwrap_or_default()
            .pointer("/spec/ports/0/nodePort")
            .and_then(Value::as_i64);
        if node_port != Some(port) {
            return Err(Error::internal(format!(
                "{name}: the override's nodePort {port}, found {node_port:?}"
            )));
        }
    }
    env.remove(&phases).await
}

/// multi-cluster: three apps over three clusters, each app on its own list of clusters.
async fn multi_cluster(env: &Env) -> Result<()> {
    let out = packages(env);
    for (app, helm, profile) in [
        ("collectd", "collectd/helm", "collectd/profile"),
        (
            "http-client",
            "http-client/helm",
            "http-client/profile/network_policy_overrides/http-client-profile",
        ),
        (
            "http-server",
            "http-server/helm",
            "http-server/profile/network_policy_overrides/http-server-profile",
        ),
    ] {
        tgz(&chart(helm), ".", &out.join(format!("{app}.tar.gz")))?;
        tgz(
            &chart(profile),
            ".",
            &out.join(format!("{app}_profile.tar.gz")),
        )?;
    }
    let values = cluster_values(
        env,
        json!({"Applist": [
            {"Name": "collectd", "Cluster": ["cluster1", "cluster2"]},
            {"Name": "http-client", "Cluster": ["cluster1"]},
            {"Name": "http-server", "Cluster": ["cluster2", "cluster3"]},
        ]}),
    );
    let docs = load(
        &files(
            "multi-cluster",
            &[
                "00-controllers.yaml",
                "01-prerequisites.yaml",
                "02-instantiate-lc.yaml",
                "03-deployment-intent.yaml",
                "04-deployment-instantiate.yaml",
            ],
        ),
        &values,
    )?;
    let phases = Phases::split(docs);
    env.deploy(&phases).await?;
    env.wait_placement(
        &[
            ("collectd", &["c1", "c2"]),
            ("http-client", &["c1"]),
            ("http-server", &["c2", "c3"]),
        ],
        DEADLINE,
    )
    .await?;
    env.remove(&phases).await
}

/// test-dependency: collectd -> operator -> nginx, each dependency `Ready` plus 10 s. The
/// example's nginx chart (with hooks) is fetched by its setup script and is not in the
/// testdata; http-server stands in for it, and the DIG's override (`service.type: NodePort`
/// for nginx) must reach its Service over the profile's ClusterIP.
async fn test_dependency(env: &Env) -> Result<()> {
    let out = packages(env);
    for (app, helm, profile) in [
        ("collectd", "collectd/helm", "collectd/profile"),
        (
            "operator",
            "operators-latest/helm",
            "operators-latest/profile",
        ),
        // This profile sets `service.type: ClusterIP`, so a NodePort Service shows that the
        // DIG's override won over the profile.
        (
            "nginx",
            "http-server/helm",
            "http-client/profile/network_policy_overrides/http-client-profile",
        ),
    ] {
        tgz(&chart(helm), ".", &out.join(format!("{app}.tar.gz")))?;
        tgz(
            &chart(profile),
            ".",
            &out.join(format!("{app}_profile.tar.gz")),
        )?;
    }
    let values = cluster_values(
        env,
        json!({
            "APP1": "collectd", "APP2": "operator", "APP3": "nginx",
            "Applist": [
                {"Name": "collectd", "Cluster": ["cluster1", "cluster2"]},
                {"Name": "operator", "Cluster": ["cluster1"]},
                {"Name": "nginx", "Cluster": ["cluster1", "cluster2"]},
            ],
        }),
    );
    let docs = load(
        &files(
            "test-dependency",
            &[
                "controllers.yaml",
                "projects.yaml",
                "clusters.yaml",
                // logicalclouds.yaml ends with the cloud's instantiate, which is all that
                // instantiatelc.yaml holds: the example applies one or the other.
                "logicalclouds.yaml",
                "apps.yaml",
                "intents.yaml",
                "instantiate.yaml",
            ],
        ),
        &values,
    )?;
    let phases = Phases::split(docs);
    env.deploy(&phases).await?;
    let placed = env
        .wait_objects(&["c1", "c2", "c3"], DEADLINE, |all| {
            all[2].is_empty()
                && ["collectd", "operator", "nginx"]
                    .iter()
                    .all(|app| all[0].iter().any(|o| o.app() == *app))
        })
        .await?;
    // Each app started after the one it depends on was ready, plus the 10 s wait.
    let first = |app: &str| {
        placed[0]
            .iter()
            .filter(|o| o.app() == app)
            .map(|o| o.created)
            .min()
    };
    let last = |app: &str| {
        placed[0]
            .iter()
            .filter(|o| o.app() == app)
            .map(|o| o.created)
            .max()
    };
    for (app, dependency) in [("collectd", "operator"), ("operator", "nginx")] {
        let (started, dep) = (first(app).unwrap(), last(dependency).unwrap());
        // Creation times have one-second precision.
        if started < dep + 9 {
            return Err(Error::internal(format!(
                "{app} was created {}s after {dependency}, before its 10 s wait",
                started - dep
            )));
        }
    }
    let client = env.kube("c1").await?;
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client, "default");
    let nginx = services
        .get("http-service")
        .await
        .map_err(|e| Error::internal(format!("nginx's Service: {e}")))?;
    let kind = nginx.spec.and_then(|s| s.type_).unwrap_or_default();
    if kind != "NodePort" {
        return Err(Error::internal(format!(
            "the DIG's override did not reach nginx's Service: type {kind:?}"
        )));
    }
    env.remove(&phases).await
}

/// test-update: collectd on cluster1; an update of its placement intent moves it to cluster2;
/// a rollback to revision 1 moves it back.
async fn test_update(env: &Env) -> Result<()> {
    let out = packages(env);
    tgz(&chart("collectd/helm"), ".", &out.join("collectd.tar.gz"))?;
    tgz(
        &chart("collectd/profile"),
        ".",
        &out.join("collectd_profile.tar.gz"),
    )?;
    let values = cluster_values(
        env,
        json!({"Applist": [
            {"Name": "collectd", "Cluster": ["cluster1"], "UpdateCluster": ["cluster2"]},
        ]}),
    );
    let step = |f: &str| load(&files("test-update", &[f]), &values);
    let mut docs = step("00-controllers.yaml")?;
    for f in [
        "01-prerequisites.yaml",
        "02-deployment-intent.yaml",
        "03-instantiation.yaml",
    ] {
        docs.extend(step(f)?);
    }
    let phases = Phases::split(docs);
    let dig = &phases.dig_paths()[0];
    env.deploy(&phases).await?;
    env.wait_placement(&[("collectd", &["c1"])], DEADLINE)
        .await?;

    env.update(&step("04-update-deployment-intent.yaml")?)
        .await?;
    let updated = env.apply(&step("05-update.yaml")?).await?;
    let answer = match &updated[0].response {
        Some(Ok(r)) => String::from_utf8_lossy(&r.body).trim().to_owned(),
        _ => String::new(),
    };
    if !answer.contains('2') {
        return Err(Error::internal(format!(
            "update answered {answer:?}, not revision 2"
        )));
    }
    env.wait_placement(&[("collectd", &["c2"])], DEADLINE)
        .await?;
    env.wait_deployed(dig, DEADLINE).await?;

    env.apply(&step("06-rollback.yaml")?).await?;
    env.wait_placement(&[("collectd", &["c1"])], DEADLINE)
        .await?;
    env.wait_deployed(dig, DEADLINE).await?;
    env.remove(&phases).await
}

/// hpa-test-simple without its hpa intents: http-client placed with anyOf over two
/// labels (one cluster is kept: cluster1, the first), http-server with allOf on cluster1's
/// label. The files name their packages relative to themselves (`output/...`), so they are
/// copied, unchanged, beside the packages.
/// The values of EMCO's hpa example files (prerequisites and intents) in this environment.
fn hpa_values(env: &Env) -> Value {
    json!({
            "ProjectName": "proj1",
            "ClusterProvider": "provider1",
            "RsyncPort": 9031,
            "OvnActionPort": 9032,
            "HpaPlacementControllerName": "hpa-placement-controller-1",
            "HpaPlacementPort": 9099,
            "HpaActionControllerName": "hpa-action-controller-1",
            "HpaActionPort": 9042,
            "Cluster1": "cluster1",
            "Cluster2": "cluster2",
            "KubeConfig1": env.kubeconfig_path("c1"),
            "KubeConfig2": env.kubeconfig_path("c2"),
            "ClusterLabel1": "edge-label-1",
            "ClusterLabel2": "edge-label-2",
            "AdminCloud": "default",
            "Cluster1Ref": "cluster1-ref",
            "Cluster2Ref": "cluster2-ref",
        "VfwGenericPlacementIntent": "vfw-placement-intent",
        "VfwHpaActionIntent": "hpa-action-intent",
        "VfwHpaPlacementIntent": "hpa-placement-intent-1",
    })
}

async fn hpa_simple(env: &Env) -> Result<()> {
    let dir = env.dir().join("hpa");
    std::fs::create_dir_all(dir.join("output")).unwrap();
    for f in ["prerequisites.yaml", "hpa-test-simple.yaml"] {
        std::fs::copy(examples().join("hpa").join(f), dir.join(f)).unwrap();
    }
    for app in ["http-client", "http-server"] {
        tgz(
            &chart(app).join("helm"),
            ".",
            &dir.join(format!("output/{app}.tgz")),
        )?;
        tgz(
            &chart(app).join(format!("profile/network_policy_overrides/{app}-profile")),
            ".",
            &dir.join(format!("output/{app}-profile.tar.gz")),
        )?;
    }
    let values = env.write_values("hpa-values.yaml", &hpa_values(env))?;
    let docs = load(
        &[
            dir.join("prerequisites.yaml"),
            dir.join("hpa-test-simple.yaml"),
        ],
        &values,
    )?;
    // The hpa intents (and with them the hpa controllers' registrations, as placement, action
    // and clm controller): they require node features and 4 CPUs that kubesim clusters do not
    // advertise, so hpa would rightly leave no cluster. Unregistered, the controllers the DIG's
    // intents name take no part, and the simple anyOf placement is what this scenario checks.
    let docs = without(
        docs,
        &[
            "clm-controllers",
            "hpa-intents",
            "hpa-resource-consumers",
            "resource-requirements",
        ],
        &["hpa-placement-controller-1", "hpa-action-controller-1"],
    );
    let phases = Phases::split(docs);
    env.deploy(&phases).await?;
    env.wait_placement(
        &[("http-client", &["c1"]), ("http-server", &["c1"])],
        DEADLINE,
    )
    .await?;
    env.remove(&phases).await
}

/// hpa's vfw networks (`hpa/hpa-vfw-networks.yaml`): three ovn4nfv networks on each of two
/// clusters that have the network CRDs, applied through ncm; on each cluster exactly the
/// Network resources ncm generates, with every resource Applied; then deleted (the `apply`
/// documents terminate), nothing of ours left, and the prerequisites go.
async fn hpa_vfw_networks(env: &Env) -> Result<()> {
    const CRDS: &str = include_str!("../../crds/ncm.yaml");
    for c in ["c1", "c2"] {
        env.install_crds(c, CRDS).await?;
    }
    let mut values = hpa_values(env);
    let networks = json!({
            // EMCO's vfw setup (examples/single-cluster/test-vfw.yaml's networks).
            "EmcoPrivateNet": "emco-private-net",
            "EmcoPrivateSubnet": "10.10.20.0/24",
            "EmcoPrivateSubnetName": "subnet1",
            "EmcoPrivateGateway": "10.10.20.1/24",
            "UnprotectedPrivateNet": "unprotected-private-net",
            "UnprotectedPrivateSubnet": "192.168.10.0/24",
            "UnprotectedPrivateSubnetName": "subnet1",
            "UnprotectedPrivateGateway": "192.168.10.1/24",
            "ProtectedPrivateNet": "protected-private-net",
            "ProtectedPrivateSubnet": "192.168.20.0/24",
            "ProtectedPrivateSubnetName": "subnet1",
            "ProtectedPrivateGateway": "192.168.20.1/24",
    });
    values
        .as_object_mut()
        .unwrap()
        .extend(networks.as_object().unwrap().clone());
    let values = env.write_values("vfw-values.yaml", &values)?;
    let prerequisites = without(
        load(&files("hpa", &["prerequisites.yaml"]), &values)?,
        &["clm-controllers"],
        &["hpa-placement-controller-1", "hpa-action-controller-1"],
    );
    let networks = load(&files("hpa", &["hpa-vfw-networks.yaml"]), &values)?;
    env.apply(&prerequisites).await?;
    env.apply(&networks).await?;
    for (cluster, kube_cluster) in [("cluster1", "c1"), ("cluster2", "c2")] {
        let status = format!("/v2/cluster-providers/provider1/clusters/{cluster}/status");
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let (_, s) = env.request(http::Method::GET, &status).await?;
            if s["status"] == "Instantiated" && s["rsyncStatus"] == json!({"Applied": 3}) {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Error::internal(format!(
                    "{cluster}'s networks not applied: {s}"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let networks: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            env.kube(kube_cluster).await?,
            "default",
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "k8s.plugin.opnfv.org",
                "v1alpha1",
                "Network",
            )),
        );
        let net = networks
            .get("emco-private-net")
            .await
            .map_err(|e| Error::unavailable("the Network emco-private-net").with_source(e))?;
        let want = json!({"cniType": "ovn4nfv", "ipv4Subnets": [{"subnet": "10.10.20.0/24",
            "name": "subnet1", "gateway": "10.10.20.1/24"}]});
        let labelled = net
            .metadata
            .labels
            .unwrap_or_default()
            .get("net")
            .is_some_and(|v| v == "emco-private-net");
        if net.data["spec"] != want || !labelled {
            return Err(Error::internal(format!(
                "{kube_cluster}: expected ncm's Network {want} labelled net=emco-private-net, found {:?}",
                net.data
            )));
        }
    }
    env.delete(&networks).await?;
    for (cluster, kube_cluster) in [("cluster1", "c1"), ("cluster2", "c2")] {
        let status = format!("/v2/cluster-providers/provider1/clusters/{cluster}/status");
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let (_, s) = env.request(http::Method::GET, &status).await?;
            let left = env
                .labelled_objects(kube_cluster)
                .await?
                .into_iter()
                .filter(|o| o.kind == "Network")
                .count();
            if s["status"] == "Terminated" && left == 0 {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Error::internal(format!(
                    "{cluster}'s networks not terminated ({left} left): {s}"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }
    env.delete(&prerequisites).await.map(|_| ())
}

/// The project's own example (`examples/emcoctl` with `examples/charts` and
/// `examples/profiles`), as `scripts/run.sh` serves it from a plain clone: the clusters
/// registered with label `edge`, the example onboarded and deployed to all three, then removed.
async fn own_example(env: &Env) -> Result<()> {
    let root = emco_e2e::workspace().join("examples");
    let packages = env.dir().join("own-packages");
    std::fs::create_dir_all(&packages)
        .map_err(|e| Error::internal("packages dir").with_source(e))?;
    for app in ["http-server", "http-client"] {
        tgz(
            &root.join("charts").join(app),
            app,
            &packages.join(format!("{app}.tgz")),
        )?;
    }
    let (phases, _) = env.example(&packages, &["c1", "c2", "c3"]).await?;
    env.deploy(&phases).await?;
    let all: &[&str] = &["c1", "c2", "c3"];
    env.wait_placement(&[("http-server", all), ("http-client", all)], DEADLINE)
        .await?;
    if let Some(fleet) = env.clusters.fleet() {
        silent_cluster(env, fleet, &phases.dig_paths()[0]).await?;
    }
    env.remove(&phases).await
}

/// The main job's "a cluster fault" step as its user meets it: c2 stops answering; once the
/// grace (2 s in these environments) has passed, the status API reports c2's resources with
/// readiness `Unknown` (the state seen last, since when, why) and the group `Unknown`, not
/// Ready, and `emcoctl status` lists them; once c2 answers again the group is Ready again.
async fn silent_cluster(env: &Env, fleet: &kubesim::Fleet, dig: &str) -> Result<()> {
    env.wait_ready(dig, DEADLINE).await?;
    fleet.set_fault("c2", kubesim::Fault::down())?;
    let seen = env
        .wait_status(dig, "status=ready", DEADLINE, |s| {
            s["readyStatus"] == "Unknown"
        })
        .await?;
    let (mut unknown, mut ready) = (0, 0);
    for app in seen["apps"].as_array().unwrap() {
        for c in app["clusters"].as_array().unwrap() {
            for r in c["resources"].as_array().unwrap() {
                if c["cluster"] == "c2" {
                    unknown += 1;
                    assert_eq!(r["readyStatus"], "Unknown", "{seen}");
                    assert_eq!(r["lastReadyStatus"], "Ready", "{seen}");
                    assert_eq!(r["reason"], "Unreachable", "{seen}");
                    assert!(
                        emco_core::time::parse_rfc3339(r["lastSeen"].as_str().unwrap()).is_some(),
                        "{seen}"
                    );
                } else {
                    ready += 1;
                    assert_eq!(r["readyStatus"], "Ready", "{seen}");
                }
            }
        }
    }
    assert!(unknown > 0, "{seen}");
    assert_eq!(seen["readyCounts"]["Unknown"], unknown, "{seen}");
    assert_eq!(seen["readyCounts"]["Ready"], ready, "{seen}");
    let target = emcoctl::status::Target {
        position: dig.to_owned(),
        object: dig.trim_start_matches("/v2/").to_owned(),
    };
    let query = emco_core::model::status::StatusQuery {
        status: emco_core::model::status::StatusType::Ready,
        ..Default::default()
    };
    let answer = emcoctl::status::query(&env.client, &target, &query).await;
    let mut printed = Vec::new();
    emcoctl::status::print(&[answer], emcoctl::ops::Output::Table, &mut printed)
        .map_err(|e| Error::internal(e.to_string()))?;
    let printed = String::from_utf8_lossy(&printed);
    assert!(printed.contains("ready Unknown"), "{printed}");
    assert!(printed.contains("Unknown="), "{printed}");
    assert!(printed.contains("has not answered since"), "{printed}");
    fleet.set_fault("c2", kubesim::Fault::none())?;
    env.wait_ready(dig, DEADLINE).await.map(drop)
}

/// One composite app, 100 DIGs of it (release names `r0` .. `r99`) instantiated concurrently
/// over HTTP, each reaching Instantiated; then all terminated concurrently.
async fn hundred_digs(env: &Env) -> Result<()> {
    const DIGS: usize = 100;
    let out = packages(env);
    tgz(
        &chart("http-client/helm"),
        ".",
        &out.join("http-client.tar.gz"),
    )?;
    tgz(
        &examples().join("profiles/default/profile"),
        ".",
        &out.join("http-client_profile.tar.gz"),
    )?;
    let applist = json!([{"Name": "http-client", "Cluster": ["cluster1", "cluster2"]}]);
    let values = cluster_values(env, json!({"Applist": applist}));
    let setup = load(
        &files(
            "multi-cluster",
            &["01-prerequisites.yaml", "02-instantiate-lc.yaml"],
        ),
        &values,
    )?;
    let setup = Phases::split(setup);
    env.apply(&setup.onboard).await?;
    env.apply(&setup.clouds).await?;
    for lc in setup.cloud_paths() {
        env.wait_cloud(&lc, "Instantiated").await?;
    }
    let mut digs = Vec::with_capacity(DIGS);
    for i in 0..DIGS {
        let values = env.write_values(
            &format!("values-{i}.yaml"),
            &json!({
                "ProjectName": "proj1", "ClusterProvider": "provider1", "AdminCloud": "default",
                "CompositeApp": "many", "CompositeProfile": "many-profile",
                "DeploymentIntent": format!("dig{i}"), "Intent": "intent",
                "GenericPlacementIntent": "placement", "PackagesPath": out,
                "Applist": applist,
            }),
        )?;
        let mut docs = load(
            &files("multi-cluster", &["03-deployment-intent.yaml"]),
            &values,
        )?;
        if i > 0 {
            // The composite app, its apps and profiles come with the first DIG.
            docs.retain(|d| d.anchor.contains("deployment-intent-groups"));
        }
        for d in &mut docs {
            if d.anchor.ends_with("deployment-intent-groups") {
                d.body["spec"]["version"] = json!(format!("r{i}"));
            }
        }
        env.apply(&docs).await?;
        let dig = emco_e2e::dig_path("proj1", "many", &format!("dig{i}"));
        expect_accepted(env, &format!("{dig}/approve")).await?;
        digs.push(dig);
    }
    let started = futures::future::join_all(
        digs.iter()
            .map(|d| expect_accepted(env, format!("{d}/instantiate"))),
    )
    .await;
    started.into_iter().collect::<Result<Vec<()>>>()?;
    for dig in &digs {
        env.wait_status(dig, "status=deployed&output=summary", DEADLINE, |s| {
            emco_e2e::state(s) == Some("Instantiated") && s["deployedStatus"] == "Instantiated"
        })
        .await?;
    }
    let objects = env.labelled_objects("c1").await?;
    if objects.iter().filter(|o| o.kind == "Deployment").count() != DIGS {
        return Err(Error::internal(format!(
            "cluster c1 holds {} Deployments, not {DIGS}",
            objects.iter().filter(|o| o.kind == "Deployment").count()
        )));
    }
    let stopped = futures::future::join_all(
        digs.iter()
            .map(|d| expect_accepted(env, format!("{d}/terminate"))),
    )
    .await;
    stopped.into_iter().collect::<Result<Vec<()>>>()?;
    for dig in &digs {
        env.wait_terminated(dig, DEADLINE).await?;
    }
    env.expect_no_leftovers(&[]).await
}

/// `POST path` must answer 202.
async fn expect_accepted(env: &Env, path: impl AsRef<str>) -> Result<()> {
    let path = path.as_ref();
    let (code, body) = env.request(http::Method::POST, path).await?;
    if code == 202 {
        Ok(())
    } else {
        Err(Error::internal(format!("POST {path} -> {code} {body}")))
    }
}

/// EMCO's ca-certs example (examples/test-cert: `prerequisites.yaml`,
/// `ca-cert-cluster-provider.yaml` and its enrollment and distribution files) in its emcoctl
/// shapes, written here as the example's files are not in the test data: an issuing cluster
/// `issuer1` (kubesim c1, given the example's `setup-ca-issuers.sh` result: a root CA Secret
/// and the ClusterIssuer `new-istio-system` in `cert-manager`) and three edge clusters
/// (`cluster1` on c2, `cluster2` on c3, `cluster3` on c1; group23 labels 2 and 3); the
/// certificate `cert0` for cluster1 by name and group23 by label is enrolled and distributed,
/// each edge cluster gets its Secret, ClusterIssuer and KNCC ConfigCtrl, and `emcoctl delete`
/// terminates both and removes everything. Then the example's logical-cloud half
/// ([`ca_certs_logical_clouds`]).
async fn ca_certs_example(env: &Env) -> Result<()> {
    use base64::Engine;
    const CRDS: &str = include_str!("../../crds/ca-certs.yaml");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    for c in ["c1", "c2", "c3"] {
        env.install_crds(c, CRDS).await?;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(env.kube(c).await?);
        for ns in ["cert-manager", "istio-system"] {
            let body = json!({"metadata": {"name": ns}});
            create_kept(&namespaces, body, &format!("namespace {ns}")).await?;
        }
    }
    let key = rcgen::KeyPair::generate().map_err(|e| Error::internal(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
        .map_err(|e| Error::internal(e.to_string()))?;
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "new-istio-system-root-ca");
    let root = params
        .self_signed(&key)
        .map_err(|e| Error::internal(e.to_string()))?;
    let issuing = env.kube("c1").await?;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(issuing.clone(), "cert-manager");
    let issuers: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        issuing,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "cert-manager.io",
            "v1",
            "ClusterIssuer",
        )),
    );
    // setup-ca-issuers.sh's issuers: one per root (here one root signs for all three).
    for name in ["new-istio-system", "foo", "foobar"] {
        let secret = json!({"metadata": {"name": format!("{name}-ca")},
            "data": {"tls.crt": b64(&root.pem()), "tls.key": b64(&key.serialize_pem())}});
        create_kept(&secrets, secret, "a root CA secret").await?;
        let issuer = json!({"apiVersion": "cert-manager.io/v1",
            "kind": "ClusterIssuer", "metadata": {"name": name},
            "spec": {"ca": {"secretName": format!("{name}-ca")}}});
        create_kept(&issuers, issuer, "a ClusterIssuer").await?;
    }

    let dir = env.dir().join("test-cert");
    std::fs::create_dir_all(&dir).map_err(|e| Error::internal("test-cert dir").with_source(e))?;
    let write = |name: &str, text: &str| write_file(&dir, name, text);
    let mut prerequisites = String::from(
        "version: emco/v2\nresourceContext:\n  anchor: controllers\nmetadata :\n  name: rsync\nspec:\n  host:  rsync\n  port: 9031\n---\nversion: emco/v2\nresourceContext:\n  anchor: projects\nmetadata :\n  name: {{.ProjectName}}\n---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers\nmetadata :\n  name: {{.ClusterProvider}}\n---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{.ClusterProvider}}/clusters\nmetadata :\n  name: {{.IssuingCluster}}\nfile:\n  {{.IssuingClusterConfig}}\n",
    );
    for (n, label) in [(1, "GroupLabel1"), (2, "GroupLabel23"), (3, "GroupLabel23")] {
        prerequisites.push_str(&format!(
            "---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{{{.ClusterProvider}}}}/clusters\nmetadata :\n  name: {{{{.Cluster{n}}}}}\nfile:\n  {{{{.KubeConfig{n}}}}}\n---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{{{.ClusterProvider}}}}/clusters/{{{{.Cluster{n}}}}}/labels\nclusterLabel: {{{{.{label}}}}}\n"
        ));
    }
    let files = [
        write("prerequisites.yaml", &prerequisites)?,
        write(
            "ca-cert-cluster-provider.yaml",
            "version: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{.ClusterProvider}}/ca-certs\nmetadata:\n  name: {{.CertIntent0}}\nspec:\n  isCA: true\n  issuerRef:\n    name: {{.ClusterIssuer0}}\n    kind: {{.Kind}}\n    group: {{.Group}}\n  duration: \"8760h\"\n  issuingCluster: \n    cluster: {{.IssuingCluster}}\n    clusterProvider: {{.ClusterProvider}}\n  csrInfo: \n    keySize: {{.KeySize}}\n    version: 1\n    dnsNames: []\n    emailAddresses: []\n    keyUsages: []\n    algorithm: \n      publicKeyAlgorithm: RSA\n      signatureAlgorithm: SHA512WithRSA\n    subject:\n      locale: \n        country: []\n        locality: []\n        postalCode: []\n        province: []\n        streetAddress: []\n      names:\n        commonNamePrefix: {{.CommonNamePrefix}}\n      organization:\n        names: []\n        units: []\n---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{.ClusterProvider}}/ca-certs/{{.CertIntent0}}/clusters\nmetadata :\n  name: {{.ClusterGroup0a}}\nspec:\n  scope: name\n  cluster: {{.Cluster1}}\n  clusterProvider: {{.ClusterProvider}}\n---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{.ClusterProvider}}/ca-certs/{{.CertIntent0}}/clusters\nmetadata :\n  name: {{.ClusterGroup0b}}\nspec:\n  scope: label\n  label: {{.GroupLabel23}}\n  clusterProvider: {{.ClusterProvider}}\n",
        )?,
        write(
            "ca-cert-cluster-provider-enrollment.yaml",
            "version: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{.ClusterProvider}}/ca-certs/{{.CertIntent0}}/enrollment/instantiate\n",
        )?,
        write(
            "ca-cert-cluster-provider-distribution.yaml",
            "version: emco/v2\nresourceContext:\n  anchor: cluster-providers/{{.ClusterProvider}}/ca-certs/{{.CertIntent0}}/distribution/instantiate\n",
        )?,
    ];
    let values = env.write_values(
        "test-cert-values.yaml",
        &json!({"ProjectName": "proj1", "ClusterProvider": "provider1",
            "IssuingCluster": "issuer1", "IssuingClusterConfig": env.kubeconfig_path("c1"),
            "Cluster1": "cluster1", "KubeConfig1": env.kubeconfig_path("c2"),
            "Cluster2": "cluster2", "KubeConfig2": env.kubeconfig_path("c3"),
            "Cluster3": "cluster3", "KubeConfig3": env.kubeconfig_path("c1"),
            "GroupLabel1": "group1", "GroupLabel23": "group23",
            "CertIntent0": "cert0", "ClusterIssuer0": "new-istio-system",
            "Kind": "ClusterIssuer", "Group": "cert-manager.io",
            "KeySize": 2048, "CommonNamePrefix": "foo",
            "ClusterGroup0a": "group0a", "ClusterGroup0b": "group0b"}),
    )?;
    let mut all: serde_json::Map<String, Value> =
        serde_json::from_slice(&std::fs::read(&values).unwrap_or_default()).unwrap_or_default();
    for (k, v) in [
        ("CertIntent1", "cert1"),
        ("CertIntent2", "cert2"),
        ("ClusterIssuer1", "foo"),
        ("ClusterIssuer2", "foobar"),
        ("ClusterGroup1a", "group1a"),
        ("ClusterGroup1b", "group1b"),
        ("ClusterGroup1c", "group1c"),
        ("ClusterGroup2a", "group2a"),
        ("ClusterGroup2b", "group2b"),
        ("FooLogicalCloud", "foo"),
        ("BarLogicalCloud", "bar"),
        ("FooBarLogicalCloud", "foobar"),
        ("FooCloud", "foo-ns"),
        ("BarCloud", "bar-ns"),
        ("FooBarCloud", "foobar-ns"),
    ] {
        all.insert(k.to_owned(), json!(v));
    }
    let values = env.write_values("test-cert-values.yaml", &Value::Object(all))?;
    let docs = |i: usize| load(&files[i..=i], &values);
    env.apply(&docs(0)?).await?;
    env.apply(&docs(1)?).await?;
    let cert = "/v2/cluster-providers/provider1/ca-certs/cert0";
    let wait_for = async |cert: &str, lifecycle: &str, deployed: &str| -> Result<Value> {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let (_, s) = env
                .request(http::Method::GET, &format!("{cert}/{lifecycle}/status"))
                .await?;
            let ready = deployed == "Terminated" || s["readyStatus"] == "Ready";
            if s["deployedStatus"] == deployed && ready {
                return Ok(s);
            }
            if tokio::time::Instant::now() > end {
                return Err(Error::internal(format!(
                    "{lifecycle} is not {deployed}: {s}"
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let wait = async |lifecycle: &str, deployed: &str| wait_for(cert, lifecycle, deployed).await;
    env.apply(&docs(2)?).await?;
    wait("enrollment", "Instantiated").await?;
    env.apply(&docs(3)?).await?;
    let distributed = wait("distribution", "Instantiated").await?;
    let dctx = distributed["states"]["statusctxid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let objects = |kube_cluster: &'static str, cluster: &str| {
        let base = format!("{dctx}-cert0-provider1-{cluster}");
        (kube_cluster, base)
    };
    let edges = [
        objects("c2", "cluster1"),
        objects("c3", "cluster2"),
        objects("c1", "cluster3"),
    ];
    for (kube_cluster, base) in &edges {
        let client = env.kube(kube_cluster).await?;
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(client.clone(), "cert-manager");
        let secret = secrets
            .get_opt(&format!("{base}-ca"))
            .await
            .map_err(|e| Error::unavailable("a secret").with_source(e))?
            .ok_or_else(|| Error::internal(format!("no Secret {base}-ca on {kube_cluster}")))?;
        let chain = secret
            .data
            .unwrap_or_default()
            .get("tls.crt")
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default();
        if chain.matches("-----BEGIN CERTIFICATE-----").count() != 2 {
            return Err(Error::internal(format!("{base}-ca holds {chain:?}")));
        }
        let kncc: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            client,
            "istio-system",
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "kncc.k8sappconfig.com.gitlab.com",
                "v1alpha1",
                "ConfigCtrl",
            )),
        );
        let ctrl = kncc
            .get_opt(&format!("{base}-kncc"))
            .await
            .map_err(|e| Error::unavailable("a ConfigCtrl").with_source(e))?
            .ok_or_else(|| {
                Error::internal(format!("no ConfigCtrl {base}-kncc on {kube_cluster}"))
            })?;
        if ctrl.data["spec"]["patch"][1]["value"] != format!("{base}-issuer").as_str() {
            return Err(Error::internal(format!("{base}-kncc is {:?}", ctrl.data)));
        }
    }
    // `emcoctl delete` of the lifecycle files terminates; the certificate goes once they are.
    env.delete(&docs(3)?).await?;
    env.delete(&docs(2)?).await?;
    wait("distribution", "Terminated").await?;
    wait("enrollment", "Terminated").await?;
    env.delete(&docs(1)?).await?;
    ca_certs_logical_clouds(env, &dir, &values, &wait_for).await?;
    env.delete(&docs(0)?).await?;
    for (kube_cluster, base) in &edges {
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(env.kube(kube_cluster).await?, "cert-manager");
        wait_gone(
            &secrets,
            &format!("{base}-ca"),
            &format!("{base}-ca on {kube_cluster}"),
        )
        .await?;
    }
    Ok(())
}

/// The logical-cloud half of EMCO's ca-certs example (examples/test-cert: logical-clouds.yaml,
/// logical-clouds-instantiate.yaml, ca-cert-logical-cloud.yaml and its enrollment and
/// distribution files) after the provider half, in the same prerequisites: standard clouds foo
/// (cluster1, cluster2), bar (cluster2, cluster3) and foobar (cluster1, cluster3); cert1 for
/// foo (cluster1 by name, group23 by label: cluster2 only, cluster3 is not in foo) and bar
/// (group23: cluster2 and cluster3), cert2 for foobar (group23: cluster3, group1: cluster1).
/// Each cluster gets its CA once per certificate, with an Istio ProxyConfig in the namespace of
/// each of its clouds that the certificate covers and no default signer; `emcoctl delete`
/// terminates and removes it all.
async fn ca_certs_logical_clouds(
    env: &Env,
    dir: &std::path::Path,
    values: &std::path::Path,
    wait_for: &impl AsyncFn(&str, &str, &str) -> Result<Value>,
) -> Result<()> {
    let write = |name: &str, text: &str| write_file(dir, name, text);
    let lcs = "projects/{{.ProjectName}}/logical-clouds";
    let mut clouds = String::new();
    let mut instantiate = String::new();
    for (cloud, namespace, lower, members) in [
        ("FooLogicalCloud", "FooCloud", "foo", [1, 2]),
        ("BarLogicalCloud", "BarCloud", "bar", [2, 3]),
        ("FooBarLogicalCloud", "FooBarCloud", "foobar", [1, 3]),
    ] {
        let at = format!("{lcs}/{{{{.{cloud}}}}}");
        clouds += &emco_doc(
            lcs,
            &format!(
                "metadata:\n  name: {{{{.{cloud}}}}}\nspec:\n  namespace: {{{{.{namespace}}}}}\n"
            ),
        );
        clouds += &emco_doc(
            &format!("{at}/cluster-quotas"),
            &format!(
                "metadata:\n    name: {lower}-quota\nspec:\n    pods: '500'\n    secrets: '500'\n"
            ),
        );
        clouds += &emco_doc(
            &format!("{at}/user-permissions"),
            &format!(
                "metadata:\n  name: {lower}-permission\nspec:\n    namespace: {{{{.{namespace}}}}}\n    apiGroups:\n    - \"\"\n    - \"apps\"\n    resources:\n    - secrets\n    - pods\n    - deployments\n    verbs:\n    - get\n    - watch\n    - list\n    - create\n    - delete\n"
            ),
        );
        for n in members {
            clouds += &emco_doc(
                &format!("{at}/cluster-references"),
                &format!(
                    "metadata:\n  name: lc-cl-{lower}{n}\nspec:\n  clusterProvider: {{{{.ClusterProvider}}}}\n  cluster: {{{{.Cluster{n}}}}}\n  loadbalancerIp: \"0.0.0.0\"\n"
                ),
            );
        }
        instantiate += &emco_doc(&format!("{at}/instantiate"), "");
    }
    let certs = "projects/{{.ProjectName}}/ca-certs";
    let mut intents = String::new();
    for (cert, issuer) in [
        ("CertIntent1", "ClusterIssuer1"),
        ("CertIntent2", "ClusterIssuer2"),
    ] {
        intents += &emco_doc(
            certs,
            &format!(
                "metadata:\n  name: {{{{.{cert}}}}}\nspec:\n  isCA: true\n  issuerRef:\n    name: {{{{.{issuer}}}}}\n    kind: {{{{.Kind}}}}\n    group: {{{{.Group}}}}\n  duration: \"8760h\"\n  issuingCluster:\n    cluster: {{{{.IssuingCluster}}}}\n    clusterProvider: {{{{.ClusterProvider}}}}\n  csrInfo:\n    keySize: {{{{.KeySize}}}}\n    version: 1\n    dnsNames: []\n    emailAddresses: []\n    keyUsages: []\n    algorithm:\n      publicKeyAlgorithm: RSA\n      signatureAlgorithm: SHA512WithRSA\n    subject:\n      locale:\n        country: []\n      names:\n        commonNamePrefix: {{{{.CommonNamePrefix}}}}\n      organization:\n        names: []\n        units: []\n"
            ),
        );
    }
    for (cert, cloud) in [
        ("CertIntent1", "FooLogicalCloud"),
        ("CertIntent1", "BarLogicalCloud"),
        ("CertIntent2", "FooBarLogicalCloud"),
    ] {
        intents += &emco_doc(
            &format!("{certs}/{{{{.{cert}}}}}/logical-clouds"),
            &format!(
                "metadata :\n  name: {{{{.{cloud}}}}}\nspec:\n  logicalCloud: {{{{.{cloud}}}}}\n"
            ),
        );
    }
    for (cert, cloud, group, scope) in [
        (
            "CertIntent1",
            "FooLogicalCloud",
            "ClusterGroup1a",
            "scope: name\n  cluster: {{.Cluster1}}",
        ),
        (
            "CertIntent1",
            "FooLogicalCloud",
            "ClusterGroup1b",
            "scope: label\n  label: {{.GroupLabel23}}",
        ),
        (
            "CertIntent1",
            "BarLogicalCloud",
            "ClusterGroup1c",
            "scope: label\n  label: {{.GroupLabel23}}",
        ),
        (
            "CertIntent2",
            "FooBarLogicalCloud",
            "ClusterGroup2a",
            "scope: label\n  label: {{.GroupLabel23}}",
        ),
        (
            "CertIntent2",
            "FooBarLogicalCloud",
            "ClusterGroup2b",
            "scope: label\n  label: {{.GroupLabel1}}",
        ),
    ] {
        intents += &emco_doc(
            &format!("{certs}/{{{{.{cert}}}}}/logical-clouds/{{{{.{cloud}}}}}/clusters"),
            &format!(
                "metadata :\n  name: {{{{.{group}}}}}\nspec:\n  {scope}\n  clusterProvider: {{{{.ClusterProvider}}}}\n"
            ),
        );
    }
    let lifecycle = |what: &str| -> String {
        ["CertIntent1", "CertIntent2"]
            .iter()
            .map(|cert| emco_doc(&format!("{certs}/{{{{.{cert}}}}}/{what}/instantiate"), ""))
            .collect()
    };
    let files = [
        write("logical-clouds.yaml", &clouds)?,
        write("logical-clouds-instantiate.yaml", &instantiate)?,
        write("ca-cert-logical-cloud.yaml", &intents)?,
        write(
            "ca-cert-logical-cloud-enrollment.yaml",
            &lifecycle("enrollment"),
        )?,
        write(
            "ca-cert-logical-cloud-distribution.yaml",
            &lifecycle("distribution"),
        )?,
    ];
    let docs = |i: usize| load(&files[i..=i], values);
    env.apply(&docs(0)?).await?;
    env.apply(&docs(1)?).await?;
    for lc in ["foo", "bar", "foobar"] {
        env.wait_cloud(
            &format!("/v2/projects/proj1/logical-clouds/{lc}"),
            "Instantiated",
        )
        .await?;
    }
    env.apply(&docs(2)?).await?;
    let cert = |name: &str| format!("/v2/projects/proj1/ca-certs/{name}");
    env.apply(&docs(3)?).await?;
    for name in ["cert1", "cert2"] {
        wait_for(&cert(name), "enrollment", "Instantiated").await?;
    }
    env.apply(&docs(4)?).await?;
    let mut contexts = std::collections::BTreeMap::new();
    for name in ["cert1", "cert2"] {
        let status = wait_for(&cert(name), "distribution", "Instantiated").await?;
        let ctx = status["states"]["statusctxid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        contexts.insert(name, ctx);
    }
    // cluster1 is c2, cluster2 c3, cluster3 c1 (the prerequisites' kubeconfigs).
    let proxies = [
        ("cert1", "cluster1", "c2", "foo-ns"),
        ("cert1", "cluster2", "c3", "foo-ns"),
        ("cert1", "cluster2", "c3", "bar-ns"),
        ("cert1", "cluster3", "c1", "bar-ns"),
        ("cert2", "cluster3", "c1", "foobar-ns"),
        ("cert2", "cluster1", "c2", "foobar-ns"),
    ];
    let proxy_api = async |kube_cluster: &str,
                           namespace: &str|
           -> Result<kube::Api<kube::api::DynamicObject>> {
        Ok(kube::Api::namespaced_with(
            env.kube(kube_cluster).await?,
            namespace,
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "networking.istio.io",
                "v1beta1",
                "ProxyConfig",
            )),
        ))
    };
    for (name, cluster, kube_cluster, namespace) in proxies {
        let base = format!("{}-{name}-provider1-{cluster}", contexts[name]);
        let pc = proxy_api(kube_cluster, namespace)
            .await?
            .get_opt(&format!("{base}-{namespace}-pc"))
            .await
            .map_err(|e| Error::unavailable("a ProxyConfig").with_source(e))?
            .ok_or_else(|| {
                Error::internal(format!(
                    "no ProxyConfig of {name} in {namespace} on {cluster}"
                ))
            })?;
        let want =
            json!({"environmentVariables": {"ISTIO_META_CERT_SIGNER": format!("{base}-issuer")}});
        if pc.data["spec"] != want {
            return Err(Error::internal(format!(
                "{name}'s ProxyConfig on {cluster} is {:?}",
                pc.data
            )));
        }
    }
    // Nothing more: cluster3 is not in foo, so cert1 gives it none in foo-ns.
    for kube_cluster in ["c1", "c2", "c3"] {
        let all: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
            env.kube(kube_cluster).await?,
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "networking.istio.io",
                "v1beta1",
                "ProxyConfig",
            )),
        );
        let mut found: Vec<String> = all
            .list(&kube::api::ListParams::default())
            .await
            .map_err(|e| Error::unavailable("ProxyConfigs").with_source(e))?
            .items
            .into_iter()
            .filter_map(|pc| pc.metadata.name)
            .collect();
        found.sort();
        let mut want: Vec<String> = proxies
            .iter()
            .filter(|p| p.2 == kube_cluster)
            .map(|(name, cluster, _, namespace)| {
                format!(
                    "{}-{name}-provider1-{cluster}-{namespace}-pc",
                    contexts[name]
                )
            })
            .collect();
        want.sort();
        if found != want {
            return Err(Error::internal(format!(
                "ProxyConfigs on {kube_cluster}: {found:?}, expected {want:?}"
            )));
        }
    }
    env.delete(&docs(4)?).await?;
    env.delete(&docs(3)?).await?;
    for name in ["cert1", "cert2"] {
        wait_for(&cert(name), "distribution", "Terminated").await?;
        wait_for(&cert(name), "enrollment", "Terminated").await?;
    }
    for (name, cluster, kube_cluster, namespace) in proxies {
        let base = format!("{}-{name}-provider1-{cluster}", contexts[name]);
        let pc = format!("{base}-{namespace}-pc");
        wait_gone(&proxy_api(kube_cluster, namespace).await?, &pc, &pc).await?;
    }
    env.delete(&docs(2)?).await?;
    env.delete(&docs(1)?).await?;
    for lc in ["foo", "bar", "foobar"] {
        env.wait_cloud(
            &format!("/v2/projects/proj1/logical-clouds/{lc}"),
            "Terminated",
        )
        .await?;
    }
    env.delete(&docs(0)?).await.map(drop)
}

/// EMCO's service discovery example on private clusters with an admin cloud
/// (examples/dtc/service_discovery/private_cluster/l0_logical_cloud, its placeholders filled):
/// nps and sds registered with dtc, http-client on cluster1 (c1), http-server on cluster2 (c2)
/// behind its NodePort `http-service` on 30083 (the test data's private-cluster overrides);
/// cluster2 has a Node at 10.0.0.12, as its admin would have. Once http-server is ready, c1
/// resolves `http-service` through a headless Service and Endpoints at 10.0.0.12:30083, and
/// nps' NetworkPolicy on c2 admits the client; terminate removes them.
async fn service_discovery_example(env: &Env) -> Result<()> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(env.kube("c2").await?);
    let node = json!({"metadata": {"name": "node-1"},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.12"},
            {"type": "Hostname", "address": "node-1"}]}});
    create_kept(&nodes, node, "the node of c2").await?;
    let phases = deploy_dtc_example(
        env,
        "service_discovery_overrides/private_cluster",
        &[("nps", 30485, 1), ("sds", 30486, 2)],
        None,
        "port: 3333\n  protocol: TCP\n  serviceMesh: none",
        "http-client",
    )
    .await?;
    let client = env.kube("c1").await?;
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "default");
    let endpoints: kube::Api<k8s_openapi::api::core::v1::Endpoints> =
        kube::Api::namespaced(client, "default");
    let end = tokio::time::Instant::now() + DEADLINE;
    let (service, ep) = loop {
        let s = services.get_opt("http-service").await;
        let e = endpoints.get_opt("http-service").await;
        if let (Ok(Some(s)), Ok(Some(e))) = (s, e) {
            break (s, e);
        }
        if tokio::time::Instant::now() > end {
            return Err(Error::internal("no http-service on cluster1"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let service = serde_json::to_value(service).unwrap_or_default();
    let ep = serde_json::to_value(ep).unwrap_or_default();
    let want_ports =
        json!([{"name": "30083", "protocol": "TCP", "port": 30083, "targetPort": 30083}]);
    if service["spec"]["clusterIP"] != "None" || service["spec"]["ports"] != want_ports {
        return Err(Error::internal(format!(
            "http-service on cluster1 is {service}"
        )));
    }
    let want_subsets = json!([{"addresses": [{"ip": "10.0.0.12"}],
        "ports": [{"name": "30083", "port": 30083, "protocol": "TCP"}]}]);
    if ep["subsets"] != want_subsets {
        return Err(Error::internal(format!(
            "http-service's endpoints on cluster1 are {ep}"
        )));
    }
    let policies: kube::Api<k8s_openapi::api::networking::v1::NetworkPolicy> =
        kube::Api::namespaced(env.kube("c2").await?, "default");
    let policy = policies
        .get_opt("testdtc-serverin")
        .await
        .map_err(|e| Error::unavailable("a network policy").with_source(e))?
        .ok_or_else(|| Error::internal("no NetworkPolicy testdtc-serverin on cluster2"))?;
    let from = serde_json::to_value(&policy.spec).unwrap_or_default()["ingress"][0]["from"].clone();
    if from[0] != json!({"podSelector": {"matchLabels": {"app": "http-client"}}}) {
        return Err(Error::internal(format!("testdtc-serverin admits {from}")));
    }
    env.remove(&phases).await?;
    wait_gone(&services, "http-service", "http-service on cluster1").await
}

/// The documents of EMCO's dtc examples (examples/dtc/*/multiple-cluster files), their
/// placeholders filled: the `registrations` with dtc (name, port, priority), rsync and dtc;
/// cluster1 (c1, label edge-cluster, http-client) and cluster2 (c2, label edge-cluster1,
/// http-server), both networkpolicy-supported, cluster2 with the kv-pairs `cluster2_kv` (name
/// and `spec`, if any); the admin cloud `default`; the composite app with the test data's charts and
/// the `profiles` overrides; traffic group `testdtc` with the server intent `serverin`
/// (`server_spec` after its service name) and client `client1` (service `client_service`);
/// approve and instantiate; deployed, with its placement checked.
async fn deploy_dtc_example(
    env: &Env,
    profiles: &str,
    registrations: &[(&str, u16, i64)],
    cluster2_kv: Option<(&str, &str)>,
    server_spec: &str,
    client_service: &str,
) -> Result<Phases> {
    let out = packages(env);
    for app in ["http-client", "http-server"] {
        tgz(
            &chart(app).join("helm"),
            ".",
            &out.join(format!("{app}.tgz")),
        )?;
        tgz(
            &chart(app)
                .join("profile")
                .join(profiles)
                .join(format!("{app}-profile")),
            ".",
            &out.join(format!("{app}-profile.tar.gz")),
        )?;
    }
    let doc = emco_doc;
    let meta = |name: &str| {
        format!(
            "metadata :\n  name: {name}\n  description: test\n  userData1: test1\n  userData2: test2\n"
        )
    };
    let ca = "projects/proj1/composite-apps/collection-composite-app/v1";
    let dig = format!("{ca}/deployment-intent-groups/collection-deployment-intent-group");
    let tg = format!("{dig}/traffic-group-intents/testdtc");
    let mut text = String::new();
    for (name, port, priority) in registrations {
        text += &doc(
            "dtc-controllers",
            &format!(
                "{}spec:\n  host: {{{{.HostIP}}}}\n  port: {port}\n  type: \"action\"\n  priority: {priority}\n",
                meta(name)
            ),
        );
    }
    text += &doc(
        "controllers",
        &format!(
            "{}spec:\n  host: {{{{.HostIP}}}}\n  port: 30441\n",
            meta("rsync")
        ),
    );
    text += &doc(
        "controllers",
        &format!(
            "{}spec:\n  host: {{{{.HostIP}}}}\n  port: 30483\n  type: \"action\"\n  priority: 1\n",
            meta("dtc")
        ),
    );
    text += &doc("cluster-providers", &meta("provider1"));
    for (cluster, label) in [("cluster1", "edge-cluster"), ("cluster2", "edge-cluster1")] {
        let kubeconfig = if cluster == "cluster1" {
            "KubeConfig1"
        } else {
            "KubeConfig2"
        };
        text += &doc(
            "cluster-providers/provider1/clusters",
            &format!("{}file:\n  {{{{.{kubeconfig}}}}}\n", meta(cluster)),
        );
        for l in [label, "networkpolicy-supported"] {
            text += &doc(
                &format!("cluster-providers/provider1/clusters/{cluster}/labels"),
                &format!("clusterLabel: {l}\n"),
            );
        }
    }
    if let Some((name, kv)) = cluster2_kv {
        text += &doc(
            "cluster-providers/provider1/clusters/cluster2/kv-pairs",
            &format!("{}spec:\n{kv}", meta(name)),
        );
    }
    text += &doc("projects", &meta("proj1"));
    text += &doc(
        "projects/proj1/logical-clouds",
        "metadata:\n  name: default\nspec:\n  level: \"0\"\n",
    );
    for (name, cluster) in [("lc-cl-1", "cluster1"), ("lc-cl-2", "cluster2")] {
        text += &doc(
            "projects/proj1/logical-clouds/default/cluster-references",
            &format!(
                "metadata:\n  name: {name}\nspec:\n  clusterProvider: provider1\n  cluster: {cluster}\n  loadbalancerIp: \"0.0.0.0\"\n"
            ),
        );
    }
    text += &doc("projects/proj1/logical-clouds/default/instantiate", "");
    text += &doc(
        "projects/proj1/composite-apps",
        &format!(
            "{}spec:\n  compositeAppVersion: v1\n",
            meta("collection-composite-app")
        ),
    );
    for app in ["http-client", "http-server"] {
        text += &doc(
            &format!("{ca}/apps"),
            &format!("{}file:\n  {{{{.PackagesPath}}}}/{app}.tgz\n", meta(app)),
        );
    }
    text += &doc(
        &format!("{ca}/composite-profiles"),
        &meta("collection-composite-profile"),
    );
    for app in ["http-client", "http-server"] {
        text += &doc(
            &format!("{ca}/composite-profiles/collection-composite-profile/profiles"),
            &format!(
                "{}spec:\n  app: {app}\nfile:\n  {{{{.PackagesPath}}}}/{app}-profile.tar.gz\n",
                meta(&format!("{app}-profile"))
            ),
        );
    }
    text += &doc(
        &format!("{ca}/deployment-intent-groups"),
        &format!(
            "{}spec:\n  compositeProfile: collection-composite-profile\n  version: r1\n  logicalCloud: default\n  overrideValues: []\n",
            meta("collection-deployment-intent-group")
        ),
    );
    text += &doc(
        &format!("{dig}/intents"),
        &format!(
            "{}spec:\n  intent:\n    genericPlacementIntent: collection-placement-intent\n    dtc: testdtc\n",
            meta("collection-deployment-intent")
        ),
    );
    text += &doc(
        &format!("{dig}/generic-placement-intents"),
        &meta("collection-placement-intent"),
    );
    for (app, label) in [
        ("http-client", "edge-cluster"),
        ("http-server", "edge-cluster1"),
    ] {
        text += &doc(
            &format!("{dig}/generic-placement-intents/collection-placement-intent/app-intents"),
            &format!(
                "{}spec:\n  app: {app}\n  intent:\n    allOf:\n    - clusterProvider: provider1\n      clusterLabel: {label}\n",
                meta(&format!("{app}-placement-intent"))
            ),
        );
    }
    text += &doc(&format!("{dig}/traffic-group-intents"), &meta("testdtc"));
    text += &doc(
        &format!("{tg}/inbound-intents"),
        &format!(
            "{}spec:\n  app: http-server\n  appLabel: app=http-server\n  serviceName: http-service\n  {server_spec}\n",
            meta("serverin")
        ),
    );
    text += &doc(
        &format!("{tg}/inbound-intents/serverin/clients"),
        &format!(
            "{}spec:\n  app: http-client\n  appLabel: app=http-client\n  serviceName: {client_service}\n  namespaces: []\n  cidrs: []\n",
            meta("client1")
        ),
    );
    text += &doc(&format!("{dig}/approve"), "");
    text += &doc(&format!("{dig}/instantiate"), "");
    let file = env.dir().join("emco-dtc-multiple-cluster.yaml");
    std::fs::write(&file, text).map_err(|e| Error::internal("the example file").with_source(e))?;
    let values = env.write_values(
        "dtc-values.yaml",
        &json!({"HostIP": "127.0.0.1", "PackagesPath": out,
            "KubeConfig1": env.kubeconfig_path("c1"), "KubeConfig2": env.kubeconfig_path("c2")}),
    )?;
    let phases = Phases::split(load(&[file], &values)?);
    env.deploy(&phases).await?;
    env.wait_placement(
        &[("http-client", &["c1"]), ("http-server", &["c2"])],
        DEADLINE,
    )
    .await?;
    Ok(phases)
}

/// EMCO's Istio traffic example (examples/dtc/istio_traffic/multiple-cluster.yaml, its
/// placeholders filled): its registered with dtc, http-server on cluster2 (c2) in the Istio
/// mesh behind its ingress gateway (the cluster's kv-pairs), http-client on cluster1 (c1).
/// cluster2 gets the Gateway, ServiceEntry and DestinationRule that expose the server through
/// the gateway (in istio-system), cluster1 the ServiceEntries and DestinationRules that route
/// `http-service.default.provider1.cluster2` to 192.168.121.15:32001; terminate removes them.
async fn istio_traffic_example(env: &Env) -> Result<()> {
    const CRDS: &str = include_str!("../../crds/istio.yaml");
    for c in ["c1", "c2"] {
        env.install_crds(c, CRDS).await?;
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(env.kube(c).await?);
        let body = json!({"metadata": {"name": "istio-system"}});
        create_kept(&namespaces, body, "namespace istio-system").await?;
    }
    let phases = deploy_dtc_example(
        env,
        "istio_traffic_overrides",
        &[("its", 30440, 1)],
        Some(("istioingresskvpairs", "  kv:\n    - istioIngressGatewayAddress : \"192.168.121.15\"\n    - istioIngressGatewayPort: \"32001\"\n    - istioIngressGatewayInternalPort: \"15443\"\n")),
        "port: 30083\n  protocol: TCP\n  serviceMesh: istio",
        "http-client-svc",
    )
    .await?;
    // The server side in istio-system, the client side in the deployment's namespace.
    let istio = |cluster: &'static str, kind: &'static str| async move {
        let namespace = if cluster == "c2" {
            "istio-system"
        } else {
            "default"
        };
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            env.kube(cluster).await?,
            namespace,
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "networking.istio.io",
                "v1beta1",
                kind,
            )),
        );
        Ok::<_, Error>(api)
    };
    let get = async |cluster: &'static str, kind: &'static str, name: &str| -> Result<Value> {
        let api = istio(cluster, kind).await?;
        let got = api
            .get_opt(name)
            .await
            .map_err(|e| Error::unavailable(format!("{kind} {name}")).with_source(e))?
            .ok_or_else(|| Error::internal(format!("no {kind} {name} on {cluster}")))?;
        Ok(got.data)
    };
    let gateway = get("c2", "Gateway", "http-service-gateway").await?;
    if gateway["spec"]["servers"][0]["tls"]["mode"] != "AUTO_PASSTHROUGH" {
        return Err(Error::internal(format!(
            "http-service-gateway is {gateway}"
        )));
    }
    get("c2", "ServiceEntry", "http-service-se-server").await?;
    get("c2", "DestinationRule", "http-service-se-server-dr").await?;
    let entry = get("c1", "ServiceEntry", "http-service-se-client0").await?;
    let hosts = &entry["spec"]["hosts"];
    let endpoint = &entry["spec"]["endpoints"][0];
    if hosts != &json!(["http-service.default.provider1.cluster2"])
        || endpoint["address"] != "192.168.121.15"
    {
        return Err(Error::internal(format!(
            "http-service-se-client0 is {entry}"
        )));
    }
    get("c1", "ServiceEntry", "http-service-se-client1").await?;
    env.remove(&phases).await?;
    let api = istio("c1", "ServiceEntry").await?;
    wait_gone(
        &api,
        "http-service-se-client0",
        "http-service-se-client0 on cluster1",
    )
    .await
}

/// Waits until `name` is gone from `api` (`what` names it in the error).
async fn wait_gone<K>(api: &kube::Api<K>, name: &str, what: &str) -> Result<()>
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let end = tokio::time::Instant::now() + DEADLINE;
    while api
        .get_opt(name)
        .await
        .map_err(|e| Error::unavailable(what.to_owned()).with_source(e))?
        .is_some()
    {
        if tokio::time::Instant::now() > end {
            return Err(Error::internal(format!("{what} stays after terminate")));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates `body` with `api` as a cluster admin would, keeping one that exists (`what` names
/// it in the error).
async fn create_kept<K>(api: &kube::Api<K>, body: Value, what: &str) -> Result<()>
where
    K: Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(body)
        .map_err(|e| Error::internal(what.to_owned()).with_source(e))?;
    match api.create(&kube::api::PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(Error::unavailable(what.to_owned()).with_source(e)),
    }
}

/// EMCO's SD-EWAN example (examples/dtc/sdewan/multiple-cluster.yaml, its placeholders filled,
/// over two clusters where the example has one): swc registered with dtc, http-server on
/// cluster2 (c2) behind its SD-EWAN CNF (the cluster's kv-pairs `SdewanCnfPort`,
/// `SdewanServicePort`, `SdewanServiceAllowedCidr`), http-client on cluster1 (c1). cluster2 gets
/// the CNFService exposing `http-service.default.svc.cluster.local` on the CNF's port, cluster1
/// the SdewanApplication selecting the server's pods; terminate removes them.
async fn sdewan_example(env: &Env) -> Result<()> {
    const CRDS: &str = include_str!("../../crds/sdewan.yaml");
    for c in ["c1", "c2"] {
        env.install_crds(c, CRDS).await?;
    }
    let phases = deploy_dtc_example(
        env,
        "sdewan_overrides",
        &[("swc", 30488, 1)],
        Some((
            "sdewankvpairs",
            "  kv:\n    - SdewanCnfPort: \"12354\"\n    - SdewanServicePort: \"31333\"\n    - SdewanServiceAllowedCidr: \"192.168.22.22/24\"\n",
        )),
        "port: 3333\n  protocol: TCP\n  edgeCNF: sdewan",
        "http-client",
    )
    .await?;
    let sdewan = async |cluster: &str, kind: &str| -> Result<kube::Api<kube::api::DynamicObject>> {
        Ok(kube::Api::namespaced_with(
            env.kube(cluster).await?,
            "default",
            &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
                "batch.sdewan.akraino.org",
                "v1alpha1",
                kind,
            )),
        ))
    };
    let fullname = "http-service.default.svc.cluster.local";
    let services = sdewan("c2", "CNFService").await?;
    let service = services
        .get_opt(fullname)
        .await
        .map_err(|e| Error::unavailable("a CNFService").with_source(e))?
        .ok_or_else(|| Error::internal("no CNFService on cluster2"))?;
    let want = json!({"fullname": fullname, "port": "12354", "dport": "31333",
        "cidr": "192.168.22.22/24"});
    if service.data["spec"] != want {
        return Err(Error::internal(format!(
            "the CNFService is {:?}",
            service.data
        )));
    }
    let apps = sdewan("c1", "SdewanApplication").await?;
    let app = apps
        .get_opt("http-service")
        .await
        .map_err(|e| Error::unavailable("a SdewanApplication").with_source(e))?
        .ok_or_else(|| Error::internal("no SdewanApplication on cluster1"))?;
    let want = json!({"appNamespace": "default",
        "podSelector": {"matchLabels": {"app": "http-server"}},
        "servicePort": "31333", "cnfPort": "12354"});
    if app.data["spec"] != want {
        return Err(Error::internal(format!(
            "the SdewanApplication is {:?}",
            app.data
        )));
    }
    env.remove(&phases).await?;
    wait_gone(&services, fullname, "the CNFService on cluster2").await?;
    wait_gone(&apps, "http-service", "the SdewanApplication on cluster1").await
}

/// Writes `text` as `dir/name`, an example file written here; answers its path.
fn write_file(dir: &std::path::Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| Error::internal(name.to_owned()).with_source(e))?;
    Ok(path)
}

/// An emcoctl document of the examples written here: `---`, the API version, the anchor, then
/// `rest`.
fn emco_doc(anchor: &str, rest: &str) -> String {
    format!("---\nversion: emco/v2\nresourceContext:\n  anchor: {anchor}\n{rest}")
}

/// The documents of one composite app of EMCO's sfc example (sfc-networks.yaml,
/// sfc-ca.yaml, sfc-left-client.yaml, ...) in their emcoctl shape: the composite app `ca`, its
/// `apps` (name, chart value) with a profile each, the DIG `dig` on `cloud` with `overrides`
/// (one `values:` block per app), its intents (`intents`: more `key: value` lines after the
/// placement), every app placed on `{{.Cluster1}}`, then `middle` (the controllers' intents)
/// and approve and instantiate.
fn sfc_example_app(
    ca: &str,
    apps: &[(&str, &str)],
    dig: &str,
    cloud: &str,
    overrides: &str,
    intents: &str,
    middle: &str,
) -> String {
    let base = "projects/{{.ProjectName}}/composite-apps";
    let version = format!("{base}/{{{{.{ca}}}}}/v1");
    let dig_path = format!("{version}/deployment-intent-groups/{{{{.{dig}}}}}");
    let mut text = emco_doc(
        base,
        &format!("metadata :\n  name: {{{{.{ca}}}}}\nspec:\n  compositeAppVersion: v1\n"),
    );
    for (app, chart) in apps {
        text += &emco_doc(
            &format!("{version}/apps"),
            &format!("metadata :\n  name: {{{{.{app}}}}}\nfile:\n  {{{{.{chart}}}}}\n"),
        );
    }
    text += &emco_doc(
        &format!("{version}/composite-profiles"),
        "metadata :\n  name: profile\n",
    );
    for (app, _) in apps {
        text += &emco_doc(
            &format!("{version}/composite-profiles/profile/profiles"),
            &format!(
                "metadata :\n  name: {{{{.{app}}}}}\nspec:\n  app: {{{{.{app}}}}}\nfile:\n  {{{{.Profile}}}}\n"
            ),
        );
    }
    text += &emco_doc(
        &format!("{version}/deployment-intent-groups"),
        &format!(
            "metadata :\n  name: {{{{.{dig}}}}}\nspec:\n  compositeProfile: profile\n  version: r1\n  logicalCloud: {{{{.{cloud}}}}}\n  overrideValues:\n{overrides}"
        ),
    );
    text += &emco_doc(
        &format!("{dig_path}/intents"),
        &format!(
            "metadata :\n  name: {{{{.{dig}}}}}\nspec:\n  intent:\n    genericPlacementIntent: placement\n{intents}"
        ),
    );
    text += &emco_doc(
        &format!("{dig_path}/generic-placement-intents"),
        "metadata :\n  name: placement\n",
    );
    for (app, _) in apps {
        text += &emco_doc(
            &format!("{dig_path}/generic-placement-intents/placement/app-intents"),
            &format!(
                "metadata:\n  name: {{{{.{app}}}}}-placement\nspec:\n  app: {{{{.{app}}}}}\n  intent:\n    allOf:\n    - clusterProvider: {{{{.ClusterProvider}}}}\n      cluster: {{{{.Cluster1}}}}\n"
            ),
        );
    }
    text += middle;
    for op in ["approve", "instantiate"] {
        text += &emco_doc(&format!("{dig_path}/{op}"), "");
    }
    text
}

/// EMCO's service function chaining example (examples/sfc: prerequisites, logical clouds,
/// networks, the chain, its two clients) in its emcoctl shapes, written here as the example's
/// files and charts are not in the test data (charts: tests/charts/sfc), all on cluster1 (c1):
/// the admin cloud `default` and the standard clouds `left` (namespace sfc-head, labels
/// sfc=head) and `right` (sfc-tail, sfc=tail); the `nets` app's networks; the chain's
/// functions slb, ngfw and sdewan with ovnaction's interfaces from a template `range` over
/// `.Applist` (as sfc-ca.yaml writes them) and the chain `sfc-intent` (three links, four client
/// selectors, two provider networks); the clients left-nginx and right-nginx with sfcclient
/// intents. Then: Nodus' NetworkChaining on c1 with the chain in link order and both ends'
/// selectors and provider networks, each function's pods on its interfaces, each client's pods
/// labelled for their end, the clouds' namespaces labelled; terminate leaves nothing. The
/// clients' cloud users may get, list, create and delete but not patch (the example's user
/// permissions), so rsync creates their new objects, as EMCO's rsync does (src/rsync/pkg/client:
/// get, create when missing), where its server-side apply is forbidden.
async fn sfc_example(env: &Env) -> Result<()> {
    for crds in [
        include_str!("../../crds/ncm.yaml"),
        include_str!("../../crds/sfc.yaml"),
    ] {
        env.install_crds("c1", crds).await?;
    }
    let out = packages(env);
    let charts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/sfc");
    for (chart, name) in [
        ("function", "slb"),
        ("function", "ngfw"),
        ("function", "sdewan"),
        ("client", "left-nginx"),
        ("client", "right-nginx"),
        ("nets", "nets"),
    ] {
        emco_e2e::package_renamed_chart(
            &charts.join(chart),
            name,
            &out.join(format!("{name}.tar.gz")),
        )?;
    }
    tgz(
        &examples().join("profiles/default/profile"),
        ".",
        &out.join("profile.tar.gz"),
    )?;

    let dir = env.dir().join("sfc");
    std::fs::create_dir_all(&dir).map_err(|e| Error::internal("sfc dir").with_source(e))?;
    let write = |name: &str, text: &str| write_file(&dir, name, text);
    let meta = |name: &str| format!("metadata :\n  name: {name}\n");
    let mut prerequisites = emco_doc("projects", &meta("{{.ProjectName}}"));
    prerequisites += &emco_doc(
        "controllers",
        &format!(
            "{}spec:\n  host:  rsync\n  port: {{{{.RsyncPort}}}}\n",
            meta("rsync")
        ),
    );
    for (name, port, priority) in [
        ("ovnaction", "OvnPort", 1),
        ("sfc", "SfcPort", 2),
        ("sfcclient", "SfcClientPort", 2),
    ] {
        prerequisites += &emco_doc(
            "controllers",
            &format!(
                "{}spec:\n  host: {name}\n  port: {{{{.{port}}}}}\n  type: \"action\"\n  priority: {priority}\n",
                meta(name)
            ),
        );
    }
    prerequisites += &emco_doc("cluster-providers", &meta("{{.ClusterProvider}}"));
    prerequisites += &emco_doc(
        "cluster-providers/{{.ClusterProvider}}/clusters",
        &format!("{}file:\n  {{{{.KubeConfig}}}}\n", meta("{{.Cluster1}}")),
    );
    for (net, n) in [("SfcLeftPNet", 1), ("SfcRightPNet", 2)] {
        prerequisites += &emco_doc(
            "cluster-providers/{{.ClusterProvider}}/clusters/{{.Cluster1}}/provider-networks",
            &format!(
                "{}spec:\n  cniType: ovn4nfv\n  ipv4Subnets:\n  - subnet: 172.30.{n}0.0/24\n    name: subnet1\n    gateway: 172.30.{n}0.1/24\n    excludeIps: 172.30.{n}0.2\n  providerNetType: VLAN\n  vlan:\n    vlanId: \"{n}00\"\n    providerInterfaceName: eth1\n    logicalInterfaceName: eth1.{n}00\n    vlanNodeSelector: specific\n    nodeLabelList:\n    - kubernetes.io/os=linux\n",
                meta(&format!("{{{{.{net}}}}}"))
            ),
        );
    }

    let lcs = "projects/{{.ProjectName}}/logical-clouds";
    let reference = |name: &str| {
        format!(
            "metadata:\n  name: {name}\nspec:\n  clusterProvider: {{{{.ClusterProvider}}}}\n  cluster: {{{{.Cluster1}}}}\n  loadbalancerIp: \"0.0.0.0\"\n"
        )
    };
    let mut clouds = emco_doc(
        lcs,
        "metadata:\n  name: {{.AdminCloud}}\nspec:\n  level: \"0\"\n",
    );
    clouds += &emco_doc(
        &format!("{lcs}/{{{{.AdminCloud}}}}/cluster-references"),
        &reference("lc-cl-1"),
    );
    for (side, label) in [("Left", "head"), ("Right", "tail")] {
        let lower = side.to_lowercase();
        let cloud = format!("{{{{.{side}Cloud}}}}");
        clouds += &emco_doc(
            lcs,
            &format!(
                "metadata:\n  name: {cloud}\nspec:\n  namespace: {{{{.{side}Namespace}}}}\n  labels:\n    sfc: {label}\n  user:\n    userName: {lower}-user\n    type: certificate\n"
            ),
        );
        clouds += &emco_doc(
            &format!("{lcs}/{cloud}/cluster-quotas"),
            &format!(
                "metadata:\n    name: {lower}-quota\nspec:\n    pods: '500'\n    services: '500'\n    count/deployments.apps: '500'\n"
            ),
        );
        clouds += &emco_doc(
            &format!("{lcs}/{cloud}/user-permissions"),
            &format!(
                "metadata:\n  name: {lower}-permission\nspec:\n    namespace: {{{{.{side}Namespace}}}}\n    apiGroups:\n    - \"\"\n    - \"apps\"\n    - \"k8splugin.io\"\n    resources:\n    - secrets\n    - pods\n    - configmaps\n    - services\n    - deployments\n    - resourcebundlestates\n    verbs:\n    - get\n    - watch\n    - list\n    - create\n    - delete\n"
            ),
        );
        clouds += &emco_doc(
            &format!("{lcs}/{cloud}/cluster-references"),
            &reference(&format!("lc-cl-{lower}")),
        );
    }
    for cloud in ["AdminCloud", "LeftCloud", "RightCloud"] {
        clouds += &emco_doc(&format!("{lcs}/{{{{.{cloud}}}}}/instantiate"), "");
    }

    let nets = sfc_example_app(
        "NetsCompositeApp",
        &[("AppNets", "HelmNets")],
        "NetsDeploymentIntentGroup",
        "AdminCloud",
        "  - app: {{.AppNets}}\n    values:\n      \".Values.replicaCount\": '1'\n",
        "",
        "",
    );

    let dig = "projects/{{.ProjectName}}/composite-apps/{{.SfcCompositeApp}}/v1/deployment-intent-groups/{{.SfcDeploymentIntentGroup}}";
    let mut chain = emco_doc(
        &format!("{dig}/network-controller-intent"),
        "metadata :\n  name: {{.OvnSfcFnIntent}}\n",
    );
    // As sfc-ca.yaml: one workload intent per function and one interface intent per network,
    // from a `range` over the values' app list, with `$` for the top-level values.
    chain += "{{- range $index, $app := .Applist }}\n---\nversion: emco/v2\nresourceContext:\n  anchor: projects/{{ $.ProjectName }}/composite-apps/{{ $.SfcCompositeApp }}/v1/deployment-intent-groups/{{ $.SfcDeploymentIntentGroup }}/network-controller-intent/{{ $.OvnSfcFnIntent }}/workload-intents\nmetadata :\n  name: {{ $app.Name }}_workload_intent\nspec:\n  app: {{ $app.Name }}\n  workloadResource: {{ $app.Name }}\n  type: Deployment\n{{- range $index1, $if := $app.Ifs }}\n---\nversion: emco/v2\nresourceContext:\n  anchor: projects/{{ $.ProjectName }}/composite-apps/{{ $.SfcCompositeApp }}/v1/deployment-intent-groups/{{ $.SfcDeploymentIntentGroup }}/network-controller-intent/{{ $.OvnSfcFnIntent }}/workload-intents/{{ $app.Name }}_workload_intent/interfaces\nmetadata :\n  name: {{ $app.Name }}_{{ $if.Network }}_{{ $if.If }}\nspec:\n  interface: {{ $if.If }}\n  name: {{ $if.Network }}\n  defaultGateway: \"false\"\n{{- end }}\n{{- end }}\n";
    let chains = format!("{dig}/network-chains");
    chain += &emco_doc(
        &chains,
        "metadata :\n  name: {{.SfcIntent}}\nspec:\n  chainType: Routing\n  namespace: default\n",
    );
    for (link, left, right, app) in [
        ("SfcLinkSlb", "SfcVirNet1", "SfcDynNet1", "slb"),
        ("SfcLinkNgfw", "SfcDynNet1", "SfcDynNet2", "ngfw"),
        ("SfcLinkSdewan", "SfcDynNet2", "SfcVirNet2", "sdewan"),
    ] {
        chain += &emco_doc(
            &format!("{chains}/{{{{.SfcIntent}}}}/links"),
            &format!(
                "metadata :\n  name: {{{{.{link}}}}}\nspec:\n  leftNet: {{{{.{left}}}}}\n  rightNet: {{{{.{right}}}}}\n  app: {app}\n  linkLabel: app={app}\n  workloadResource: {app}\n  resourceType: Deployment\n"
            ),
        );
    }
    for (name, end, label) in [
        ("leftclient2", "left", "head2"),
        ("{{.SfcLeftClientSelectorIntent}}", "left", "head"),
        ("{{.SfcRightClientSelectorIntent}}", "right", "tail"),
        ("rightclient2", "right", "tail2"),
    ] {
        chain += &emco_doc(
            &format!("{chains}/{{{{.SfcIntent}}}}/client-selectors"),
            &format!(
                "metadata :\n  name: {name}\nspec:\n  chainEnd: {end}\n  podSelector:\n    matchLabels:\n      sfc: {label}\n  namespaceSelector:\n    matchLabels:\n      sfc: {label}\n"
            ),
        );
    }
    for (name, end, n) in [
        ("SfcLeftProviderNetworkIntent", "left", 1),
        ("SfcRightProviderNetworkIntent", "right", 2),
    ] {
        chain += &emco_doc(
            &format!("{chains}/{{{{.SfcIntent}}}}/provider-networks"),
            &format!(
                "metadata :\n  name: {{{{.{name}}}}}\nspec:\n  chainEnd: {end}\n  providerNetwork: {end}-pnetwork\n  gatewayIp: 172.30.{n}0.2\n  subnet: 172.30.{n}0.0/24\n"
            ),
        );
    }
    let replicas = |apps: &[&str]| -> String {
        apps.iter()
            .map(|a| format!("  - app: {{{{.{a}}}}}\n    values:\n      \"replicaCount\": '1'\n"))
            .collect()
    };
    let chain = sfc_example_app(
        "SfcCompositeApp",
        &[
            ("FnNgfw", "HelmAppNgfw"),
            ("FnSdewan", "HelmAppSdewan"),
            ("FnSlb", "HelmAppSlb"),
        ],
        "SfcDeploymentIntentGroup",
        "AdminCloud",
        &replicas(&["FnNgfw", "FnSdewan", "FnSlb"]),
        "    ovnaction: {{.OvnSfcFnIntent}}\n    sfc: {{.OvnactionSfcChain}}\n",
        &chain,
    );
    let client = |side: &str, end: &str| {
        let dig = format!(
            "projects/{{{{.ProjectName}}}}/composite-apps/{{{{.Sfc{side}ClientCA}}}}/v1/deployment-intent-groups/{{{{.Sfc{side}Dig}}}}"
        );
        let intent = emco_doc(
            &format!("{dig}/sfc-clients"),
            &format!(
                "metadata :\n  name: {{{{.Sfc{side}ClientIntent}}}}\nspec:\n  chainEnd: {end}\n  sfcIntent: {{{{.SfcIntent}}}}\n  compositeApp: {{{{.SfcCompositeApp}}}}\n  compositeAppVersion: v1\n  deploymentIntentGroup: {{{{.SfcDeploymentIntentGroup}}}}\n  app: {{{{.{side}Nginx}}}}\n  workloadResource: {{{{.{side}Nginx}}}}\n  resourceType: Deployment\n"
            ),
        );
        sfc_example_app(
            &format!("Sfc{side}ClientCA"),
            &[(&format!("{side}Nginx"), &format!("HelmApp{side}Nginx"))],
            &format!("Sfc{side}Dig"),
            &format!("{side}Cloud"),
            &format!(
                "  - app: {{{{.{side}Nginx}}}}\n    values:\n      \".Values.Namespace\": \"{{{{.{side}Namespace}}}}\"\n"
            ),
            "    sfcclient: {{.OvnactionSfcClient}}\n",
            &intent,
        )
    };
    let files = [
        write("prerequisites.yaml", &prerequisites)?,
        write("sfc-logical-clouds.yaml", &clouds)?,
        write("sfc-networks.yaml", &nets)?,
        write("sfc-ca.yaml", &chain)?,
        write("sfc-left-client.yaml", &client("Left", "left"))?,
        write("sfc-right-client.yaml", &client("Right", "right"))?,
    ];
    let chart = |name: &str| out.join(format!("{name}.tar.gz")).display().to_string();
    let interfaces = |list: &[(&str, &str)]| -> Vec<Value> {
        list.iter()
            .map(|(net, interface)| json!({"Network": net, "If": interface}))
            .collect()
    };
    let slb = [
        ("virtual-net1", "net2"),
        ("dynamic-net1", "net4"),
        ("left-pnetwork", "net3"),
    ];
    let ngfw = [("dynamic-net1", "net2"), ("dynamic-net2", "net3")];
    let sdewan = [
        ("dynamic-net2", "net3"),
        ("virtual-net2", "net2"),
        ("right-pnetwork", "net4"),
    ];
    // The values of the example's setup.sh, with the charts and kubeconfig of this run and the
    // app list sfc-ca.yaml ranges over.
    let mut values: serde_json::Map<String, Value> = [
        ("ClusterProvider", "provider1"),
        ("Cluster1", "cluster1"),
        ("AdminCloud", "default"),
        ("LeftCloud", "left"),
        ("RightCloud", "right"),
        ("LeftNamespace", "sfc-head"),
        ("RightNamespace", "sfc-tail"),
        ("SfcDynNet1", "dynamic-net1"),
        ("SfcDynNet2", "dynamic-net2"),
        ("SfcVirNet1", "virtual-net1"),
        ("SfcVirNet2", "virtual-net2"),
        ("SfcLinkSlb", "linkSlb"),
        ("SfcLinkNgfw", "linkNgfw"),
        ("SfcLinkSdewan", "linkSdewan"),
        ("SfcLeftPNet", "left-pnetwork"),
        ("SfcRightPNet", "right-pnetwork"),
        ("ProjectName", "proj1"),
        ("SfcCompositeApp", "sfc-ca"),
        ("FnNgfw", "ngfw"),
        ("FnSdewan", "sdewan"),
        ("FnSlb", "slb"),
        ("NetsCompositeApp", "nets-ca"),
        ("AppNets", "nets"),
        ("NetsDeploymentIntentGroup", "nets-deployment-intent-group"),
        ("SfcDeploymentIntentGroup", "sfc-deployment-intent-group"),
        ("OvnSfcFnIntent", "sfc-fn-intent"),
        ("OvnactionSfcChain", "sfc-chain"),
        ("SfcIntent", "sfc-intent"),
        ("SfcLeftClientSelectorIntent", "left-client-selector"),
        ("SfcRightClientSelectorIntent", "right-client-selector"),
        ("SfcLeftProviderNetworkIntent", "right-provider-network"),
        ("SfcRightProviderNetworkIntent", "left-provider-network"),
        ("SfcLeftClientCA", "sfc-left-client-ca"),
        ("SfcRightClientCA", "sfc-right-client-ca"),
        ("LeftNginx", "left-nginx"),
        ("RightNginx", "right-nginx"),
        ("SfcLeftDig", "sfc-left-dig"),
        ("SfcRightDig", "sfc-right-dig"),
        ("SfcLeftClientIntent", "sfc-left-client-intent"),
        ("SfcRightClientIntent", "sfc-right-client-intent"),
        ("OvnactionSfcClient", "sfc-client"),
        ("RsyncPort", "9031"),
        ("OvnPort", "9053"),
        ("SfcPort", "9056"),
        ("SfcClientPort", "9058"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), json!(v)))
    .collect();
    for (key, name) in [
        ("HelmAppNgfw", "ngfw"),
        ("HelmAppSdewan", "sdewan"),
        ("HelmAppSlb", "slb"),
        ("HelmNets", "nets"),
        ("HelmAppLeftNginx", "left-nginx"),
        ("HelmAppRightNginx", "right-nginx"),
        ("Profile", "profile"),
    ] {
        values.insert(key.to_owned(), json!(chart(name)));
    }
    values.insert("KubeConfig".to_owned(), json!(env.kubeconfig_path("c1")));
    values.insert(
        "Applist".to_owned(),
        json!([
            {"Name": "slb", "Ifs": interfaces(&slb)},
            {"Name": "ngfw", "Ifs": interfaces(&ngfw)},
            {"Name": "sdewan", "Ifs": interfaces(&sdewan)},
        ]),
    );
    let values = env.write_values("sfc-values.yaml", &Value::Object(values))?;
    let phases = Phases::split(load(&files, &values)?);
    env.deploy(&phases).await?;

    let c1 = env.kube("c1").await?;
    let chainings: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        c1.clone(),
        "default",
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "k8s.plugin.opnfv.org",
            "v1alpha1",
            "NetworkChaining",
        )),
    );
    let chaining = chainings
        .get_opt("sfc-intent")
        .await
        .map_err(|e| Error::unavailable("a NetworkChaining").with_source(e))?
        .ok_or_else(|| Error::internal("no NetworkChaining sfc-intent on cluster1"))?;
    let selector = |v: &str| json!({"matchLabels": {"sfc": v}});
    let end = |v: &str, network: Option<(&str, u8)>| {
        let (name, gateway, subnet) =
            network.map_or((String::new(), String::new(), String::new()), |(n, k)| {
                (
                    n.to_owned(),
                    format!("172.30.{k}0.2"),
                    format!("172.30.{k}0.0/24"),
                )
            });
        json!({"gatewayIp": gateway, "networkName": name, "subnet": subnet,
            "podSelector": selector(v), "namespaceSelector": selector(v)})
    };
    // One entry per client selector of the end in the order they were created (leftclient2
    // first, as EMCO lists them), the provider networks on the first ones.
    let want = json!({"chainType": "Routing", "routingSpec": {
        "namespace": "default",
        "networkChain": "net=virtual-net1,app=slb,net=dynamic-net1,app=ngfw,net=dynamic-net2,app=sdewan,net=virtual-net2",
        "left": [end("head2", Some(("left-pnetwork", 1))), end("head", None)],
        "right": [end("tail", Some(("right-pnetwork", 2))), end("tail2", None)]}});
    if chaining.data["spec"] != want {
        return Err(Error::internal(format!(
            "the NetworkChaining is {:?}, expected the spec {want}",
            chaining.data
        )));
    }
    let pod_template = async |namespace: &str, name: &str| -> Result<Value> {
        let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
            kube::Api::namespaced(c1.clone(), namespace);
        let d = api
            .get(name)
            .await
            .map_err(|e| Error::unavailable(format!("Deployment {name} on c1")).with_source(e))?;
        Ok(serde_json::to_value(&d).unwrap_or_default()["spec"]["template"]["metadata"].clone())
    };
    for (name, ifs) in [
        ("slb", &slb[..]),
        ("ngfw", &ngfw[..]),
        ("sdewan", &sdewan[..]),
    ] {
        // In the order the file creates the interface intents, as EMCO lists them.
        let want: Vec<Value> = ifs
            .iter()
            .map(|(net, i)| json!({"interface": i, "name": net, "defaultGateway": "false"}))
            .collect();
        let meta = pod_template("default", name).await?;
        let nfn: Value = meta["annotations"]["k8s.plugin.opnfv.org/nfn-network"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null);
        if nfn != json!({"type": "ovn4nfv", "interface": want}) || meta["labels"]["app"] != name {
            return Err(Error::internal(format!(
                "{name}'s pods: expected the link label and the interfaces {want:?}, found {meta}"
            )));
        }
    }
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(c1.clone());
    for (name, namespace, label) in [
        ("left-nginx", "sfc-head", "head"),
        ("right-nginx", "sfc-tail", "tail"),
    ] {
        let meta = pod_template(namespace, name).await?;
        if meta["labels"]["sfc"] != label || meta["labels"]["app"] != name {
            return Err(Error::internal(format!(
                "{name}'s pods: expected sfc={label}, found {meta}"
            )));
        }
        let ns = namespaces
            .get(namespace)
            .await
            .map_err(|e| Error::unavailable(format!("namespace {namespace}")).with_source(e))?;
        if ns
            .metadata
            .labels
            .unwrap_or_default()
            .get("sfc")
            .map(String::as_str)
            != Some(label)
        {
            return Err(Error::internal(format!(
                "namespace {namespace} is not labelled sfc={label}"
            )));
        }
    }
    let networks: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        c1,
        "default",
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "k8s.plugin.opnfv.org",
            "v1alpha1",
            "Network",
        )),
    );
    for net in [
        "virtual-net1",
        "dynamic-net1",
        "dynamic-net2",
        "virtual-net2",
    ] {
        networks
            .get_opt(net)
            .await
            .map_err(|e| Error::unavailable("a Network").with_source(e))?
            .ok_or_else(|| Error::internal(format!("no Network {net} on cluster1")))?;
    }
    env.remove(&phases).await?;
    wait_gone(&chainings, "sfc-intent", "the NetworkChaining on cluster1").await
}

/// A chart `name` of a ConfigMap (data `page: <page>`) and a Service: kinds a control plane
/// without nodes makes ready, packed into `out`.
fn page_chart(work: &std::path::Path, name: &str, page: &str, out: &std::path::Path) -> Result<()> {
    let dir = work.join(format!("{name}-{page}"));
    let templates = dir.join("templates");
    let io = |e: std::io::Error| Error::internal(e.to_string());
    std::fs::create_dir_all(&templates).map_err(io)?;
    std::fs::write(
        dir.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
    )
    .map_err(io)?;
    std::fs::write(dir.join("values.yaml"), format!("page: {page}\n")).map_err(io)?;
    std::fs::write(
        templates.join("configmap.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-page\ndata:\n  page: {{{{ .Values.page }}}}\n"
        ),
    )
    .map_err(io)?;
    std::fs::write(
        templates.join("service.yaml"),
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector:\n    app: {name}\n  ports:\n  - port: 8080\n"
        ),
    )
    .map_err(io)?;
    tgz(&dir, name, out)
}

/// Progressive delivery on real control planes: the example project (its apps made of
/// ConfigMaps and Services, which a control plane without nodes makes ready) with a rollout
/// policy of 2 waves (`c1`, then the rest), instantiated and then updated wave by wave; every
/// cluster ends with the new page.
async fn rollout_of_two_waves(env: &Env) -> Result<()> {
    use emco_core::Metadata;
    let packages = env.dir().join("rollout-packages");
    std::fs::create_dir_all(&packages)
        .map_err(|e| Error::internal("packages dir").with_source(e))?;
    for app in ["http-server", "http-client"] {
        page_chart(env.dir(), app, "v1", &packages.join(format!("{app}.tgz")))?;
    }
    let (phases, _) = env.example(&packages, &["c1", "c2", "c3"]).await?;
    env.apply(&phases.onboard).await?;
    let dig = phases.dig_paths()[0].clone();
    let policy = json!({"metadata": {"name": "two"}, "spec": {
        "waves": [{"clusters": ["c1"]}, {}],
        "gates": {"progressDeadline": "60s", "bakeTime": "1s"},
        "onFailure": "rollback"
    }});
    let send = |method: http::Method, path: String, body: Option<Value>| async move {
        let body = body.map_or(emcoctl::client::Body::Empty, |b| {
            emcoctl::client::Body::Json(b.to_string().into_bytes())
        });
        let r = env
            .client
            .send(method, &path, body)
            .await
            .map_err(|e| Error::unavailable(e.to_string()))?;
        Ok::<_, Error>((r.status, String::from_utf8_lossy(&r.body).into_owned()))
    };
    let (code, body) = send(
        http::Method::POST,
        format!("{dig}/rollout-policies"),
        Some(policy),
    )
    .await?;
    if code != 201 {
        return Err(Error::internal(format!("policy: {code} {body}")));
    }
    let succeeded = async |what: &str| -> Result<Value> {
        let deadline = std::time::Instant::now() + DEADLINE;
        loop {
            let (code, run) = env
                .request(http::Method::GET, &format!("{dig}/rollout"))
                .await?;
            if code == 200 && run["state"] == "Succeeded" {
                return Ok(run);
            }
            if code == 200 && run["state"] == "RolledBack" || std::time::Instant::now() > deadline {
                return Err(Error::internal(format!("{what}: {code} {run}")));
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    };
    let lifecycle = Phases {
        onboard: Vec::new(),
        clouds: phases.clouds.clone(),
        digs: phases.digs.clone(),
    };
    env.begin(&lifecycle).await?;
    let run = succeeded("instantiate").await?;
    if run["waves"].as_array().map(Vec::len) != Some(2) {
        return Err(Error::internal(format!("not 2 waves: {run}")));
    }
    // A new page, rolled out wave by wave.
    let v2 = env.dir().join("http-server-v2.tgz");
    page_chart(env.dir(), "http-server", "v2", &v2)?;
    let ca = emco_orchestrator::keys::composite_app("demo", "http", "v1");
    env.orch
        .onboarding()
        .put_app(
            &ca,
            "http-server",
            &emco_core::model::App {
                metadata: Metadata::named("http-server"),
            },
            &v2,
        )
        .await?;
    let (code, body) = send(http::Method::POST, format!("{dig}/update"), None).await?;
    if code != 202 {
        return Err(Error::internal(format!("update: {code} {body}")));
    }
    let run = succeeded("update").await?;
    let first_done = run["waves"][0]["finished"].as_str().unwrap_or_default();
    let second_start = run["waves"][1]["started"].as_str().unwrap_or_default();
    if second_start < first_done {
        return Err(Error::internal(format!("the waves overlapped: {run}")));
    }
    for c in ["c1", "c2", "c3"] {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::default_namespaced(env.kube(c).await?);
        let page = api
            .get("http-server-page")
            .await
            .map_err(|e| Error::internal(e.to_string()))?
            .data
            .and_then(|d| d.get("page").cloned());
        if page.as_deref() != Some("v2") {
            return Err(Error::internal(format!("{c} has page {page:?}")));
        }
    }
    let (code, body) = send(
        http::Method::DELETE,
        format!("{dig}/rollout-policies/two"),
        None,
    )
    .await?;
    if code != 204 {
        return Err(Error::internal(format!("policy delete: {code} {body}")));
    }
    env.remove(&phases).await
}
