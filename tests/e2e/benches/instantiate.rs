//! Instantiate of a composite app of 10 apps on 100 kubesim clusters, on the embedded store,
//! over HTTP: time to Instantiated (every resource applied) and to Ready (every resource ready),
//! then time to Terminated. The apps are copies of the testdata's http-client chart renamed
//! `app01` .. `app10`, onboarded and placed with the multi-cluster example's files.
//!
//! `cargo bench -p emco-e2e --bench instantiate` prints a table and writes
//! `bench-results/instantiate.txt`.

#![allow(clippy::unwrap_used)] // A bench that cannot set up has nothing to report.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use emco_e2e::{Backends, Env, EnvConfig, Phases, examples, load, package_renamed_chart, tgz};
use serde_json::{Value, json};

const CLUSTERS: usize = 100;
const APPS: usize = 10;
const DEADLINE: Duration = Duration::from_secs(600);

/// Polls the DIG's status every 250 ms until `done`; returns the time since `start`.
async fn until(
    env: &Env,
    dig: &str,
    query: &str,
    start: Instant,
    done: impl Fn(&Value) -> bool,
) -> Duration {
    env.wait_status(dig, query, DEADLINE, |s| done(s))
        .await
        .unwrap();
    start.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = runtime.block_on(bench());
    print!("{report}");
    let out = emco_e2e::workspace().join("bench-results");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("instantiate.txt"), report).unwrap();
}

async fn bench() -> String {
    let setup = Instant::now();
    let mut config = EnvConfig::new(Backends::Embedded, CLUSTERS);
    config.ready_delay = Duration::from_millis(500);
    let env = Env::start(config).await.unwrap().unwrap();
    let started_in = setup.elapsed();

    let out = env.dir().join("output");
    std::fs::create_dir_all(&out).unwrap();
    let names: Vec<String> = (1..=APPS).map(|i| format!("app{i:02}")).collect();
    let chart = examples().join("helm_charts/http-client/helm/http-client");
    for app in &names {
        package_renamed_chart(&chart, app, &out.join(format!("{app}.tar.gz"))).unwrap();
        tgz(
            &examples().join("profiles/default/profile"),
            ".",
            &out.join(format!("{app}_profile.tar.gz")),
        )
        .unwrap();
    }
    let cluster_names: Vec<String> = (1..=CLUSTERS).map(|i| format!("cluster{i}")).collect();
    let clusters: Vec<Value> = env
        .clusters
        .names()
        .iter()
        .map(|c| json!({"Name": c.replace('c', "cluster"), "KubeConfig": env.kubeconfig_path(c)}))
        .collect();
    let applist: Vec<Value> = names
        .iter()
        .map(|n| json!({"Name": n, "Cluster": cluster_names}))
        .collect();
    let values = env
        .write_values(
            "values.yaml",
            &json!({
                "HostIP": "127.0.0.1", "RsyncPort": 9031, "GacPort": 9033, "OvnPort": 9032,
                "DtcPort": 9048, "NpsPort": 9062,
                "ProjectName": "proj1", "ClusterProvider": "provider1", "ClusterLabel": "edge",
                "AdminCloud": "default", "CompositeApp": "bench", "CompositeProfile": "bench-profile",
                "DeploymentIntent": "bench-dig", "Intent": "intent",
                "GenericPlacementIntent": "placement",
                "PackagesPath": out, "Clusters": clusters, "Applist": applist,
            }),
        )
        .unwrap();
    let files: Vec<_> = [
        "01-prerequisites.yaml",
        "02-instantiate-lc.yaml",
        "03-deployment-intent.yaml",
        "04-deployment-instantiate.yaml",
    ]
    .iter()
    .map(|f| examples().join("multi-cluster").join(f))
    .collect();
    let phases = Phases::split(load(&files, &values).unwrap());
    let dig = phases.dig_paths()[0].clone();

    let onboard = Instant::now();
    env.apply(&phases.onboard).await.unwrap();
    env.apply(&phases.clouds).await.unwrap();
    for lc in phases.cloud_paths() {
        env.wait_cloud(&lc, "Instantiated").await.unwrap();
    }
    let onboarded_in = onboard.elapsed();

    let start = Instant::now();
    env.apply(&phases.digs).await.unwrap();
    let accepted = start.elapsed();
    let instantiated = until(&env, &dig, "status=deployed&output=summary", start, |s| {
        s["deployedStatus"] == "Instantiated"
    })
    .await;
    let ready = until(&env, &dig, "status=ready&output=summary", start, |s| {
        s["readyStatus"] == "Ready"
    })
    .await;
    let objects = env.labelled_objects("c1").await.unwrap().len();

    let stop = Instant::now();
    env.delete(&phases.digs).await.unwrap();
    let terminated = until(&env, &dig, "status=deployed&output=summary", stop, |s| {
        s["deployedStatus"] == "Terminated"
    })
    .await;
    env.expect_no_leftovers(&[]).await.unwrap();

    let resources = objects * CLUSTERS;
    let mut r = String::new();
    writeln!(r, "instantiate: {APPS} apps (http-client copies) on {CLUSTERS} kubesim TLS clusters, embedded store, over HTTP").unwrap();
    writeln!(r, "{resources} resources ({objects} per cluster); kubesim ready delay 500 ms; emco-server defaults (readiness from watches)").unwrap();
    writeln!(r, "{:<44} {:>10}", "step", "time").unwrap();
    let row = |r: &mut String, step: &str, d: Duration| {
        writeln!(r, "{step:<44} {:>8.2} s", d.as_secs_f64()).unwrap();
    };
    row(&mut r, "fleet + server start", started_in);
    row(
        &mut r,
        "onboarding (100 clusters, 10 apps, intents)",
        onboarded_in,
    );
    row(&mut r, "approve + instantiate answered", accepted);
    row(
        &mut r,
        "to Instantiated (all resources applied)",
        instantiated,
    );
    row(&mut r, "to Ready (all resources ready)", ready);
    row(&mut r, "terminate to Terminated", terminated);
    writeln!(
        r,
        "applied: {:.0} resources/s to Instantiated",
        resources as f64 / instantiated.as_secs_f64()
    )
    .unwrap();
    r
}
