//! kubectl against kubesim, through the kubeconfig files kubesim writes.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::Sim;

const APP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hello
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: REPLICAS
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 80
"#;

fn kubectl_available() -> bool {
    let ok = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("\n\n*** SKIPPING kubectl TEST: kubectl is not installed on this machine ***\n");
    }
    ok
}

async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
    let out = cmd.output().await.unwrap();
    eprintln!(
        "$ kubectl {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

async fn ok(kubeconfig: &Path, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args).await;
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn manifest(dir: &Path, replicas: u32) -> String {
    let path = dir.join(format!("app-{replicas}.yaml"));
    std::fs::write(&path, APP.replace("REPLICAS", &replicas.to_string())).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_wait_delete() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(2, Duration::from_millis(300)).await;
    let kc = sim.kubeconfig_path("c1");
    let m2 = manifest(sim.dir.path(), 2);
    let out = ok(&kc, &["apply", "-f", &m2]).await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    assert!(out.contains("service/web created"), "{out}");
    assert!(out.contains("configmap/web-config created"), "{out}");
    ok(
        &kc,
        &[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=20s",
        ],
    )
    .await;
    let ready = ok(
        &kc,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
    )
    .await;
    assert_eq!(ready, "2");
    let ip = ok(
        &kc,
        &["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"],
    )
    .await;
    assert!(ip.starts_with("10.96."), "{ip}");
    let table = ok(&kc, &["get", "deployments"]).await;
    assert!(table.contains("READY") && table.contains("2/2"), "{table}");
    // A changed manifest goes through kubectl's strategic-merge-patch path.
    let m3 = manifest(sim.dir.path(), 3);
    let out = ok(&kc, &["apply", "-f", &m3]).await;
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    assert!(out.contains("configmap/web-config unchanged"), "{out}");
    let generation = ok(
        &kc,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.metadata.generation} {.spec.replicas}",
        ],
    )
    .await;
    assert_eq!(generation, "2 3");
    ok(
        &kc,
        &[
            "wait",
            "--for=jsonpath={.status.availableReplicas}=3",
            "deployment/web",
            "--timeout=20s",
        ],
    )
    .await;
    // The other cluster is separate.
    let other = kubectl(&sim.kubeconfig_path("c2"), &["get", "deployment", "web"]).await;
    assert!(!other.status.success());
    assert!(String::from_utf8_lossy(&other.stderr).contains("NotFound"));
    ok(&kc, &["delete", "-f", &m3, "--wait=true", "--timeout=20s"]).await;
    let gone = kubectl(&kc, &["get", "deployment", "web"]).await;
    assert!(String::from_utf8_lossy(&gone.stderr).contains("deployments.apps \"web\" not found"));
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_with_conflicts() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let m2 = manifest(sim.dir.path(), 2);
    let out = ok(
        &kc,
        &[
            "apply",
            "--server-side",
            "--field-manager=team-a",
            "-f",
            &m2,
        ],
    )
    .await;
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    ok(
        &kc,
        &[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=20s",
        ],
    )
    .await;
    // Same values from another manager: shared ownership, no conflict.
    ok(
        &kc,
        &[
            "apply",
            "--server-side",
            "--field-manager=team-b",
            "-f",
            &m2,
        ],
    )
    .await;
    let m3 = manifest(sim.dir.path(), 3);
    let out = kubectl(
        &kc,
        &[
            "apply",
            "--server-side",
            "--field-manager=team-b",
            "-f",
            &m3,
        ],
    )
    .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"team-a\""),
        "{err}"
    );
    assert!(err.contains(".spec.replicas"), "{err}");
    ok(
        &kc,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=team-b",
            "-f",
            &m3,
        ],
    )
    .await;
    let managed = ok(
        &kc,
        &[
            "get",
            "deployment",
            "web",
            "--show-managed-fields",
            "-o",
            "json",
        ],
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&managed).unwrap();
    assert_eq!(v["spec"]["replicas"], 3);
    let managers: Vec<&str> = v["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert!(
        managers.contains(&"team-a") && managers.contains(&"team-b"),
        "{managers:?}"
    );
    // Dry-run changes nothing.
    let m4 = manifest(sim.dir.path(), 4);
    ok(
        &kc,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=team-b",
            "--dry-run=server",
            "-f",
            &m4,
        ],
    )
    .await;
    assert_eq!(
        ok(
            &kc,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas}"
            ]
        )
        .await,
        "3"
    );
    ok(&kc, &["delete", "-f", &m3]).await;
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}
