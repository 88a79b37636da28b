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

/// kubectl's imperative `create` commands send protobuf bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_imperative_create_sends_protobuf() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(300)).await;
    let kc = sim.kubeconfig_path("c1");
    let out = ok(&kc, &["create", "namespace", "team-x"]).await;
    assert!(out.contains("namespace/team-x created"), "{out}");
    let bin = sim.dir.path().join("blob.bin");
    std::fs::write(&bin, [0u8, 159, 146, 150]).unwrap();
    let blob = format!("--from-file=blob={}", bin.display());
    ok(
        &kc,
        &[
            "create",
            "configmap",
            "cm",
            "-n",
            "team-x",
            "--from-literal=a=b",
            &blob,
        ],
    )
    .await;
    let cm: serde_json::Value = serde_json::from_str(
        &ok(
            &kc,
            &["get", "configmap", "cm", "-n", "team-x", "-o", "json"],
        )
        .await,
    )
    .unwrap();
    assert_eq!(cm["data"]["a"], "b");
    assert_eq!(cm["binaryData"]["blob"], "AJ+Slg==");
    ok(
        &kc,
        &[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            "team-x",
            "--from-literal=k=v",
        ],
    )
    .await;
    assert_eq!(
        ok(
            &kc,
            &[
                "get",
                "secret",
                "s",
                "-n",
                "team-x",
                "-o",
                "jsonpath={.type} {.data.k}"
            ]
        )
        .await,
        "Opaque dg=="
    );
    ok(&kc, &["create", "serviceaccount", "robot", "-n", "team-x"]).await;
    ok(
        &kc,
        &[
            "create",
            "role",
            "reader",
            "-n",
            "team-x",
            "--verb=get,list",
            "--resource=pods,deployments.apps",
            "--resource-name=p1",
        ],
    )
    .await;
    let role: serde_json::Value = serde_json::from_str(
        &ok(
            &kc,
            &["get", "role", "reader", "-n", "team-x", "-o", "json"],
        )
        .await,
    )
    .unwrap();
    let rules = role["rules"].as_array().unwrap();
    assert!(
        rules
            .iter()
            .any(|r| r["verbs"] == serde_json::json!(["get", "list"])
                && r["resources"] == serde_json::json!(["deployments"])
                && r["apiGroups"] == serde_json::json!(["apps"])
                && r["resourceNames"] == serde_json::json!(["p1"])),
        "{rules:?}"
    );
    ok(
        &kc,
        &[
            "create",
            "rolebinding",
            "rb",
            "-n",
            "team-x",
            "--role=reader",
            "--serviceaccount=team-x:robot",
            "--user=alice",
        ],
    )
    .await;
    let rb: serde_json::Value = serde_json::from_str(
        &ok(
            &kc,
            &["get", "rolebinding", "rb", "-n", "team-x", "-o", "json"],
        )
        .await,
    )
    .unwrap();
    assert_eq!(rb["roleRef"]["name"], "reader");
    assert_eq!(rb["subjects"].as_array().unwrap().len(), 2);
    // A duplicate is answered 409 like any create.
    let dup = kubectl(&kc, &["create", "namespace", "team-x"]).await;
    assert!(!dup.status.success());
    assert!(String::from_utf8_lossy(&dup.stderr).contains("AlreadyExists"));
    // Kinds without a protobuf schema here get the real server's 415 rather than a wrong object.
    let dep = kubectl(
        &kc,
        &["create", "deployment", "d", "--image=nginx", "-n", "team-x"],
    )
    .await;
    if !dep.status.success() {
        let err = String::from_utf8_lossy(&dep.stderr);
        assert!(err.contains("unknown format"), "{err}");
    }
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Unknown fields: kubectl asks for Strict validation by default; Warn stores the object
/// without them and says so in a warning; Ignore drops them silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_field_validation() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let path = sim.dir.path().join("typo.yaml");
    std::fs::write(
        &path,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: typo\nspec:\n  replica: 2\n  \
         selector: {matchLabels: {app: typo}}\n  template:\n    metadata: {labels: {app: typo}}\n    \
         spec: {containers: [{name: c, image: nginx}]}\n",
    )
    .unwrap();
    let file = path.to_string_lossy().into_owned();
    for args in [
        vec!["apply", "-f", &file],
        vec!["apply", "--server-side", "-f", &file],
        vec!["create", "-f", &file],
    ] {
        let strict = kubectl(&kc, &args).await;
        assert!(!strict.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&strict.stderr);
        assert!(
            err.contains("spec.replica") && !err.contains("spec.replicas"),
            "{err}"
        );
    }
    let warn = kubectl(&kc, &["apply", "--validate=warn", "-f", &file]).await;
    assert!(warn.status.success());
    let err = String::from_utf8_lossy(&warn.stderr);
    assert!(err.contains("unknown field \"spec.replica\""), "{err}");
    let stored = ok(&kc, &["get", "deployment", "typo", "-o", "json"]).await;
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert!(stored["spec"].get("replica").is_none());
    ok(&kc, &["delete", "deployment", "typo"]).await;
    let ignore = kubectl(&kc, &["apply", "--validate=false", "-f", &file]).await;
    assert!(ignore.status.success());
    assert!(!String::from_utf8_lossy(&ignore.stderr).contains("unknown field"));
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

const LEGACY: &str = r#"
apiVersion: policy/v1beta1
kind: PodSecurityPolicy
metadata:
  name: old-psp
spec:
  privileged: false
  seLinux: {rule: RunAsAny}
  runAsUser: {rule: RunAsAny}
  supplementalGroups: {rule: RunAsAny}
  fsGroup: {rule: RunAsAny}
  volumes: ['*']
---
apiVersion: rbac.authorization.k8s.io/v1beta1
kind: ClusterRole
metadata:
  name: old-psp-user
rules:
- apiGroups: [policy]
  resources: [podsecuritypolicies]
  verbs: [use]
  resourceNames: [old-psp]
---
apiVersion: rbac.authorization.k8s.io/v1beta1
kind: RoleBinding
metadata:
  name: old-psp-user
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: old-psp-user}
subjects:
- {kind: ServiceAccount, name: default, namespace: default}
---
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  version: v1
  scope: Namespaced
  names: {plural: things, kind: Thing, shortNames: [th]}
  validation:
    openAPIV3Schema:
      type: object
"#;

/// A chart of the Kubernetes 1.20 era: PodSecurityPolicy, v1beta1 RBAC and a v1beta1 CRD apply
/// unchanged, and what they created reads through the v1 versions too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_legacy_versions() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let path = sim.dir.path().join("legacy.yaml");
    std::fs::write(&path, LEGACY).unwrap();
    let file = path.to_string_lossy().into_owned();
    let out = ok(&kc, &["apply", "-f", &file]).await;
    assert!(
        out.contains("podsecuritypolicy.policy/old-psp created"),
        "{out}"
    );
    assert!(
        out.contains("clusterrole.rbac.authorization.k8s.io/old-psp-user created"),
        "{out}"
    );
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/things.example.com created"),
        "{out}"
    );
    let again = ok(&kc, &["apply", "-f", &file]).await;
    assert!(
        again.contains("rolebinding.rbac.authorization.k8s.io/old-psp-user unchanged"),
        "{again}"
    );
    let psp = ok(
        &kc,
        &["get", "psp", "old-psp", "-o", "jsonpath={.apiVersion}"],
    )
    .await;
    assert_eq!(psp, "policy/v1beta1");
    // The preferred version (v1) shows what v1beta1 created, and v1beta1 stays readable.
    let role = ok(
        &kc,
        &[
            "get",
            "clusterrole",
            "old-psp-user",
            "-o",
            "jsonpath={.apiVersion} {.rules[0].verbs[0]}",
        ],
    )
    .await;
    assert_eq!(role, "rbac.authorization.k8s.io/v1 use");
    let beta = ok(
        &kc,
        &[
            "get",
            "rolebindings.v1beta1.rbac.authorization.k8s.io",
            "old-psp-user",
            "-o",
            "jsonpath={.apiVersion}",
        ],
    )
    .await;
    assert_eq!(beta, "rbac.authorization.k8s.io/v1beta1");
    let versions = ok(&kc, &["api-versions"]).await;
    assert!(
        versions
            .lines()
            .any(|l| l == "rbac.authorization.k8s.io/v1beta1"),
        "{versions}"
    );
    ok(
        &kc,
        &[
            "wait",
            "--for=condition=Established",
            "crd/things.example.com",
            "--timeout=60s",
        ],
    )
    .await;
    let crd = ok(
        &kc,
        &[
            "get",
            "crd",
            "things.example.com",
            "-o",
            "jsonpath={.spec.versions[0].name}",
        ],
    )
    .await;
    assert_eq!(crd, "v1");
    let thing = sim.dir.path().join("thing.yaml");
    std::fs::write(
        &thing,
        "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t1}\nspec: {size: 1}\n",
    )
    .unwrap();
    ok(&kc, &["apply", "-f", &thing.to_string_lossy()]).await;
    let got = ok(&kc, &["get", "th", "t1", "-o", "jsonpath={.spec.size}"]).await;
    assert_eq!(got, "1");
    ok(
        &kc,
        &["delete", "-f", &file, "--wait=true", "--timeout=60s"],
    )
    .await;
    let gone = kubectl(&kc, &["get", "clusterrole", "old-psp-user"]).await;
    assert!(!gone.status.success());
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}
