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

/// `kubectl apply --server-side --field-manager=MANAGER EXTRA... -f FILE`.
async fn apply_as(kubeconfig: &Path, manager: &str, file: &str, extra: &[&str]) -> Output {
    let manager = format!("--field-manager={manager}");
    let mut args = vec!["apply", "--server-side", manager.as_str()];
    args.extend_from_slice(extra);
    args.extend(["-f", file]);
    kubectl(kubeconfig, &args).await
}

/// [`apply_as`] that must succeed; its standard output.
async fn apply_ok(kubeconfig: &Path, manager: &str, file: &str, extra: &[&str]) -> String {
    let out = apply_as(kubeconfig, manager, file, extra).await;
    assert!(
        out.status.success(),
        "server-side apply of {file} as {manager} failed: {}",
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
    let out = apply_ok(&kc, "team-a", &m2, &[]).await;
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
    apply_ok(&kc, "team-b", &m2, &[]).await;
    let m3 = manifest(sim.dir.path(), 3);
    let out = apply_as(&kc, "team-b", &m3, &[]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"team-a\""),
        "{err}"
    );
    assert!(err.contains(".spec.replicas"), "{err}");
    apply_ok(&kc, "team-b", &m3, &["--force-conflicts"]).await;
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
    apply_ok(
        &kc,
        "team-b",
        &m4,
        &["--force-conflicts", "--dry-run=server"],
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
    // A TokenRequest (protobuf too) gives a token that authenticates as the account.
    let token = ok(&kc, &["create", "token", "robot", "-n", "team-x"]).await;
    let who = ok(
        &kc,
        &[
            "--token",
            token.trim(),
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    )
    .await;
    assert_eq!(who, "system:serviceaccount:team-x:robot");
    // What the account may do is RBAC's to decide, with the real server's answers: the role
    // binds get and list of pods and deployments named p1 in team-x, nothing else.
    let as_robot = |args: &[&str]| {
        let mut all = vec!["--token", token.trim()];
        all.extend_from_slice(args);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let refused = async |args: &[&str]| {
        let args = as_robot(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = kubectl(&kc, &args).await;
        assert!(!out.status.success(), "{args:?} was allowed");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let allowed = kubectl(
        &kc,
        &as_robot(&["get", "deployment", "p1", "-n", "team-x"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )
    .await;
    assert!(
        String::from_utf8_lossy(&allowed.stderr).contains(r#"deployments.apps "p1" not found"#),
        "{allowed:?}"
    );
    let robot = r#"User "system:serviceaccount:team-x:robot""#;
    for (args, said) in [
        (
            &["get", "pod", "p2", "-n", "team-x"][..],
            format!(
                r#"pods "p2" is forbidden: {robot} cannot get resource "pods" in API group "" in the namespace "team-x""#
            ),
        ),
        (
            &["get", "deployments", "-n", "team-x"][..],
            format!(
                r#"deployments.apps is forbidden: {robot} cannot list resource "deployments" in API group "apps" in the namespace "team-x""#
            ),
        ),
        (
            &["create", "configmap", "c", "-n", "team-x"][..],
            format!(
                r#"configmaps is forbidden: {robot} cannot create resource "configmaps" in API group "" in the namespace "team-x""#
            ),
        ),
        (
            &["get", "clusterroles"][..],
            format!(
                r#"clusterroles.rbac.authorization.k8s.io is forbidden: {robot} cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#
            ),
        ),
    ] {
        let stderr = refused(args).await;
        assert!(stderr.contains(&said), "{args:?}: {stderr}");
    }
    // A binding of the built-in cluster-admin lets the account do anything.
    ok(
        &kc,
        &[
            "create",
            "clusterrolebinding",
            "robot-admin",
            "--clusterrole=cluster-admin",
            "--serviceaccount=team-x:robot",
        ],
    )
    .await;
    let args = as_robot(&["create", "configmap", "c", "-n", "team-x"]);
    ok(&kc, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let short = kubectl(
        &kc,
        &["create", "token", "robot", "-n", "team-x", "--duration=1m"],
    )
    .await;
    assert!(!short.status.success());
    // A duplicate is answered 409 like any create.
    let dup = kubectl(&kc, &["create", "namespace", "team-x"]).await;
    assert!(!dup.status.success());
    assert!(String::from_utf8_lossy(&dup.stderr).contains("AlreadyExists"));
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

async fn get_json(kubeconfig: &Path, what: &[&str]) -> serde_json::Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok(kubeconfig, &args).await).unwrap()
}

/// The pod template defaults the real server fills in, checked on `spec` (a PodSpec).
fn assert_pod_defaults(spec: &serde_json::Value, pull: &str) {
    assert_eq!(spec["dnsPolicy"], "ClusterFirst", "{spec}");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30, "{spec}");
    assert_eq!(spec["schedulerName"], "default-scheduler", "{spec}");
    assert_eq!(spec["securityContext"], serde_json::json!({}), "{spec}");
    let c = &spec["containers"][0];
    assert_eq!(c["imagePullPolicy"], pull, "{c}");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log", "{c}");
    assert_eq!(c["terminationMessagePolicy"], "File", "{c}");
}

/// kubectl's imperative workload, service and policy commands (protobuf bodies): what they
/// set and the defaults the server adds read back through `kubectl get -o json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_imperative_commands_store_their_fields_and_defaults() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(200)).await;
    let kc = sim.kubeconfig_path("c1");
    let out = ok(
        &kc,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx",
            "--replicas=2",
            "--port=80",
        ],
    )
    .await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let d = get_json(&kc, &["deployment", "web"]).await;
    let s = &d["spec"];
    assert_eq!(s["replicas"], 2);
    assert_eq!(s["selector"]["matchLabels"]["app"], "web");
    assert_eq!(
        s["strategy"],
        serde_json::json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(s["revisionHistoryLimit"], 10);
    assert_eq!(s["progressDeadlineSeconds"], 600);
    let pod = &s["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["containers"][0]["image"], "nginx");
    assert_eq!(
        pod["containers"][0]["ports"],
        serde_json::json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_pod_defaults(pod, "Always");
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
    // An explicit zero travels as a set pointer and stays zero.
    ok(
        &kc,
        &[
            "create",
            "deployment",
            "idle",
            "--image=nginx:1.27",
            "--replicas=0",
        ],
    )
    .await;
    let idle = get_json(&kc, &["deployment", "idle"]).await;
    assert_eq!(idle["spec"]["replicas"], 0);
    assert_pod_defaults(&idle["spec"]["template"]["spec"], "IfNotPresent");

    ok(
        &kc,
        &[
            "create",
            "job",
            "once",
            "--image=busybox:1.36",
            "--",
            "echo",
            "hi",
        ],
    )
    .await;
    let job = get_json(&kc, &["job", "once"]).await;
    assert_eq!(job["spec"]["backoffLimit"], 6);
    assert_eq!(job["spec"]["completions"], 1);
    assert_eq!(job["spec"]["parallelism"], 1);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(
        pod["containers"][0]["command"],
        serde_json::json!(["echo", "hi"])
    );
    assert_pod_defaults(pod, "IfNotPresent");
    ok(
        &kc,
        &[
            "create",
            "cronjob",
            "tick",
            "--image=busybox",
            "--schedule=*/5 * * * *",
            "--",
            "date",
        ],
    )
    .await;
    let cj = get_json(&kc, &["cronjob", "tick"]).await;
    let s = &cj["spec"];
    assert_eq!(s["schedule"], "*/5 * * * *");
    assert_eq!(s["concurrencyPolicy"], "Allow");
    assert_eq!(s["suspend"], false);
    assert_eq!(s["successfulJobsHistoryLimit"], 3);
    assert_eq!(s["failedJobsHistoryLimit"], 1);
    let pod = &s["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "OnFailure");
    assert_pod_defaults(pod, "Always");
    ok(&kc, &["create", "job", "manual", "--from=cronjob/tick"]).await;
    let manual = get_json(&kc, &["job", "manual"]).await;
    assert_eq!(manual["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    assert_eq!(
        manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
        "manual"
    );
    assert_eq!(manual["spec"]["backoffLimit"], 6);

    ok(
        &kc,
        &["create", "service", "clusterip", "s1", "--tcp=80:8080"],
    )
    .await;
    let s1 = get_json(&kc, &["service", "s1"]).await;
    let s = &s1["spec"];
    assert_eq!(s["type"], "ClusterIP");
    assert_eq!(s["sessionAffinity"], "None");
    assert_eq!(s["ipFamilies"], serde_json::json!(["IPv4"]));
    assert_eq!(s["ipFamilyPolicy"], "SingleStack");
    assert!(
        s["clusterIP"].as_str().unwrap().starts_with("10.96."),
        "{s}"
    );
    assert_eq!(
        s["ports"],
        serde_json::json!([{"name": "80-8080", "port": 80, "targetPort": 8080, "protocol": "TCP"}])
    );
    ok(
        &kc,
        &[
            "create",
            "service",
            "nodeport",
            "s2",
            "--tcp=80:8080",
            "--node-port=30080",
        ],
    )
    .await;
    let s2 = get_json(&kc, &["service", "s2"]).await;
    assert_eq!(s2["spec"]["type"], "NodePort");
    assert_eq!(s2["spec"]["ports"][0]["nodePort"], 30080);
    assert_eq!(s2["spec"]["externalTrafficPolicy"], "Cluster");
    ok(
        &kc,
        &["create", "service", "loadbalancer", "s3", "--tcp=443:8443"],
    )
    .await;
    let s3 = get_json(&kc, &["service", "s3"]).await;
    assert_eq!(s3["spec"]["type"], "LoadBalancer");
    assert_eq!(s3["spec"]["ports"][0]["targetPort"], 8443);
    ok(
        &kc,
        &[
            "create",
            "service",
            "externalname",
            "s4",
            "--external-name=example.com",
        ],
    )
    .await;
    let s4 = get_json(&kc, &["service", "s4"]).await;
    assert_eq!(s4["spec"]["externalName"], "example.com");
    assert!(s4["spec"].get("clusterIP").is_none(), "{s4}");
    ok(
        &kc,
        &[
            "expose",
            "deployment",
            "web",
            "--name=web-svc",
            "--port=8080",
            "--target-port=80",
        ],
    )
    .await;
    let exposed = get_json(&kc, &["service", "web-svc"]).await;
    assert_eq!(exposed["spec"]["selector"]["app"], "web");
    assert_eq!(exposed["spec"]["ports"][0]["targetPort"], 80);
    assert_eq!(exposed["spec"]["ports"][0]["protocol"], "TCP");

    ok(
        &kc,
        &[
            "create",
            "ingress",
            "ing",
            "--class=nginx",
            "--rule=foo.com/bar*=svc1:8080,tls=my-cert",
            "--default-backend=defsvc:http",
        ],
    )
    .await;
    let ing = get_json(&kc, &["ingress", "ing"]).await;
    assert_eq!(
        ing["spec"],
        serde_json::json!({
            "ingressClassName": "nginx",
            "defaultBackend": {"service": {"name": "defsvc", "port": {"name": "http"}}},
            "rules": [{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Prefix",
                "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}],
            "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}],
        })
    );
    ok(
        &kc,
        &[
            "create",
            "pdb",
            "pdb",
            "--selector=app=web",
            "--min-available=50%",
        ],
    )
    .await;
    let pdb = get_json(&kc, &["pdb", "pdb"]).await;
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    assert_eq!(pdb["spec"]["selector"]["matchLabels"]["app"], "web");
    ok(
        &kc,
        &[
            "create",
            "pdb",
            "pdb1",
            "--selector=app=web",
            "--max-unavailable=1",
        ],
    )
    .await;
    let pdb1 = get_json(&kc, &["pdb", "pdb1"]).await;
    assert_eq!(pdb1["spec"]["maxUnavailable"], 1);
    ok(
        &kc,
        &[
            "create",
            "priorityclass",
            "high",
            "--value=1000",
            "--description=important",
        ],
    )
    .await;
    let pc = get_json(&kc, &["priorityclass", "high"]).await;
    assert_eq!(pc["value"], 1000);
    assert_eq!(pc["description"], "important");
    assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
    assert!(pc.get("globalDefault").is_none(), "{pc}");
    ok(
        &kc,
        &[
            "create",
            "quota",
            "q",
            "--hard=cpu=1,memory=1G,pods=2",
            "--scopes=BestEffort",
        ],
    )
    .await;
    let q = get_json(&kc, &["quota", "q"]).await;
    assert_eq!(
        q["spec"],
        serde_json::json!({"hard": {"cpu": "1", "memory": "1G", "pods": "2"}, "scopes": ["BestEffort"]})
    );
    ok(
        &kc,
        &[
            "create",
            "clusterrole",
            "agg",
            "--aggregation-rule=rbac.example.com/aggregate=true",
        ],
    )
    .await;
    let agg = get_json(&kc, &["clusterrole", "agg"]).await;
    assert_eq!(
        agg["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["rbac.example.com/aggregate"],
        "true"
    );
    ok(
        &kc,
        &[
            "create",
            "clusterrolebinding",
            "agg",
            "--clusterrole=agg",
            "--group=devs",
        ],
    )
    .await;
    let crb = get_json(&kc, &["clusterrolebinding", "agg"]).await;
    assert_eq!(crb["subjects"][0]["kind"], "Group");
    assert_eq!(crb["roleRef"]["kind"], "ClusterRole");

    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["web.example".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (
        sim.dir.path().join("tls.crt"),
        sim.dir.path().join("tls.key"),
    );
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let cert_arg = format!("--cert={}", cert_path.display());
    let key_arg = format!("--key={}", key_path.display());
    ok(
        &kc,
        &["create", "secret", "tls", "web-tls", &cert_arg, &key_arg],
    )
    .await;
    let tls = get_json(&kc, &["secret", "web-tls"]).await;
    assert_eq!(tls["type"], "kubernetes.io/tls");
    assert!(
        tls["data"]["tls.crt"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "{tls}"
    );
    ok(
        &kc,
        &[
            "create",
            "secret",
            "docker-registry",
            "pull",
            "--docker-server=registry.example",
            "--docker-username=u",
            "--docker-password=p",
        ],
    )
    .await;
    let pull = get_json(&kc, &["secret", "pull"]).await;
    assert_eq!(pull["type"], "kubernetes.io/dockerconfigjson");
    assert!(pull["data"][".dockerconfigjson"].is_string(), "{pull}");

    // kubectl run sends JSON; the same defaults apply, plus the Pod's own.
    ok(
        &kc,
        &[
            "run",
            "shell",
            "--image=busybox",
            "--port=80",
            "--env=A=B",
            "--labels=x=y",
            "--",
            "sleep",
            "1000",
        ],
    )
    .await;
    let pod = get_json(&kc, &["pod", "shell"]).await;
    assert_eq!(pod["spec"]["restartPolicy"], "Always");
    assert_eq!(pod["spec"]["enableServiceLinks"], true);
    assert_eq!(pod["spec"]["containers"][0]["env"][0]["value"], "B");
    assert_pod_defaults(&pod["spec"], "Always");
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// `kubectl certificate approve` writes the approval in protobuf; the cluster signs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_certificate_approve() {
    use base64::Engine;
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let csr = serde_json::json!({"apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest", "metadata": {"name": "alice"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
                 "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}});
    let path = sim.dir.path().join("csr.json");
    std::fs::write(&path, csr.to_string()).unwrap();
    ok(&kc, &["create", "-f", &path.to_string_lossy()]).await;
    let out = ok(&kc, &["certificate", "approve", "alice"]).await;
    assert!(out.contains("approved"), "{out}");
    let got = get_json(&kc, &["csr", "alice"]).await;
    assert_eq!(got["status"]["conditions"][0]["type"], "Approved");
    assert!(got["status"]["certificate"].is_string(), "{got}");
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Server-side apply leaves defaulted fields unowned, while an Update (kubectl create) owns
/// the defaults it brought in, as on the real server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_defaults_and_field_ownership() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let m2 = manifest(sim.dir.path(), 2);
    apply_ok(&kc, "team-a", &m2, &[]).await;
    let out = ok(
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
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    let fields = &d["metadata"]["managedFields"][0];
    assert_eq!(fields["manager"], "team-a");
    let spec = &fields["fieldsV1"]["f:spec"];
    assert!(spec.get("f:replicas").is_some(), "{spec}");
    assert!(spec.get("f:revisionHistoryLimit").is_none(), "{spec}");
    assert!(spec.get("f:strategy").is_none(), "{spec}");
    // Nobody owns the default, so another manager may change it without a conflict.
    let path = sim.dir.path().join("history.yaml");
    std::fs::write(
        &path,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {revisionHistoryLimit: 5}\n",
    )
    .unwrap();
    let file = path.to_string_lossy().into_owned();
    apply_ok(&kc, "team-b", &file, &[]).await;
    let history = ok(
        &kc,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.revisionHistoryLimit}",
        ],
    )
    .await;
    assert_eq!(history, "5");
    // A re-apply by team-a that still leaves the field out keeps it.
    apply_ok(&kc, "team-a", &m2, &[]).await;
    let history = ok(
        &kc,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.revisionHistoryLimit}",
        ],
    )
    .await;
    assert_eq!(history, "5");
    // kubectl create owns what it stored, defaults included.
    ok(&kc, &["create", "deployment", "made", "--image=nginx"]).await;
    std::fs::write(
        &path,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: made}\nspec: {revisionHistoryLimit: 5}\n",
    )
    .unwrap();
    let conflict = apply_as(&kc, "team-b", &file, &[]).await;
    assert!(!conflict.status.success());
    let err = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        err.contains("conflict with \"kubectl-create\"")
            && err.contains(".spec.revisionHistoryLimit"),
        "{err}"
    );
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

const ROUTES_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gateways.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gateways, singular: gateway, kind: Gateway}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              routes:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [host, port]
                items:
                  type: object
                  properties:
                    host: {type: string}
                    port: {type: integer}
                    backend: {type: string}
              hosts:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
"#;

/// Server-side apply of a custom resource merges the lists its CRD declares as maps (by their
/// keys) and sets, so that two managers can each own their items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_merges_crd_list_types() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let write = |name: &str, text: &str| {
        let path = sim.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let crd = write("crd.yaml", ROUTES_CRD);
    ok(&kc, &["apply", "--server-side", "-f", &crd]).await;
    ok(
        &kc,
        &[
            "wait",
            "--for=condition=Established",
            "crd/gateways.example.com",
            "--timeout=60s",
        ],
    )
    .await;
    let gw = |routes: &str, hosts: &str| {
        format!(
            "apiVersion: example.com/v1\nkind: Gateway\nmetadata: {{name: gw}}\nspec:\n  routes: {routes}\n  hosts: {hosts}\n"
        )
    };
    let a = write(
        "a.yaml",
        &gw("[{host: a.example, port: 80, backend: web}]", "[a.example]"),
    );
    let b = write(
        "b.yaml",
        &gw(
            "[{host: a.example, port: 443, backend: tls}]",
            "[b.example]",
        ),
    );
    apply_ok(&kc, "team-a", &a, &[]).await;
    apply_ok(&kc, "team-b", &b, &[]).await;
    let got = get_json(&kc, &["gateway", "gw"]).await;
    assert_eq!(
        got["spec"]["routes"],
        serde_json::json!([{"host": "a.example", "port": 80, "backend": "web"},
                           {"host": "a.example", "port": 443, "backend": "tls"}])
    );
    assert_eq!(
        got["spec"]["hosts"],
        serde_json::json!(["a.example", "b.example"])
    );
    // team-b may not change team-a's route without forcing.
    let steal = write(
        "steal.yaml",
        &gw("[{host: a.example, port: 80, backend: other}]", "[]"),
    );
    let out = apply_as(&kc, "team-b", &steal, &[]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("conflict with \"team-a\"")
            && err.contains(r#".spec.routes[host="a.example",port=80].backend"#),
        "{err}"
    );
    // team-a withdrawing its items leaves team-b's.
    let none = write("none.yaml", &gw("[]", "[]"));
    apply_ok(&kc, "team-a", &none, &[]).await;
    let got = get_json(&kc, &["gateway", "gw"]).await;
    assert_eq!(
        got["spec"]["routes"],
        serde_json::json!([{"host": "a.example", "port": 443, "backend": "tls"}])
    );
    assert_eq!(got["spec"]["hosts"], serde_json::json!(["b.example"]));
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

const SCALABLE: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 1
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - {name: db, image: postgres:16}
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: old
spec:
  replicas: 1
  selector: {app: old}
  template:
    metadata:
      labels: {app: old}
    spec:
      containers:
      - {name: old, image: nginx}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.size
        statusReplicasPath: .status.count
        labelSelectorPath: .status.selector
"#;

/// `kubectl scale` (merge patch, and with `--current-replicas` a GET and a PUT carrying the
/// resourceVersion), `kubectl patch --subresource=scale`, scaling of custom resources through
/// their CRD's scale paths, and `kubectl autoscale` (an autoscaling/v1 HPA in protobuf).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_and_autoscale() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(300)).await;
    let kc = sim.kubeconfig_path("c1");
    ok(&kc, &["create", "deployment", "web", "--image=nginx"]).await;
    let out = ok(&kc, &["scale", "deployment/web", "--replicas=3"]).await;
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    // The simulation follows the new count after the ready delay.
    ok(
        &kc,
        &[
            "wait",
            "--for=jsonpath={.status.readyReplicas}=3",
            "deployment/web",
            "--timeout=20s",
        ],
    )
    .await;
    let stale = kubectl(
        &kc,
        &[
            "scale",
            "deployment/web",
            "--current-replicas=2",
            "--replicas=5",
        ],
    )
    .await;
    assert!(!stale.status.success());
    let err = String::from_utf8_lossy(&stale.stderr);
    assert!(err.contains("Expected replicas to be 2, was 3"), "{err}");
    ok(
        &kc,
        &[
            "scale",
            "deployment/web",
            "--current-replicas=3",
            "--replicas=1",
        ],
    )
    .await;
    let raw = ok(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
        ],
    )
    .await;
    let scale: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(scale["status"]["selector"], "app=web");
    let d = get_json(&kc, &["deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 1);
    // The Scale carries the workload's resourceVersion (the ready timer may have moved it on).
    assert!(
        scale["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty())
    );
    ok(
        &kc,
        &[
            "wait",
            "--for=jsonpath={.status.replicas}=1",
            "deployment/web",
            "--timeout=20s",
        ],
    )
    .await;
    for (kind, patch) in [
        ("merge", r#"{"spec":{"replicas":2}}"#),
        (
            "json",
            r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#,
        ),
        ("strategic", r#"{"spec":{"replicas":3}}"#),
    ] {
        ok(
            &kc,
            &[
                "patch",
                "deployment",
                "web",
                "--subresource=scale",
                "--type",
                kind,
                "-p",
                patch,
            ],
        )
        .await;
    }
    let d = get_json(&kc, &["deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 3);
    // A Scale written with an old resourceVersion conflicts like the workload itself.
    let mut old = scale.clone();
    old["spec"]["replicas"] = serde_json::json!(7);
    let path = sim.dir.path().join("scale.json");
    std::fs::write(&path, old.to_string()).unwrap();
    let conflict = kubectl(
        &kc,
        &[
            "replace",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/web/scale",
            "-f",
            &path.to_string_lossy(),
        ],
    )
    .await;
    assert!(!conflict.status.success());
    let err = String::from_utf8_lossy(&conflict.stderr);
    assert!(err.contains("the object has been modified"), "{err}");
    let negative = kubectl(
        &kc,
        &[
            "patch",
            "deployment",
            "web",
            "--subresource=scale",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":-1}}"#,
        ],
    )
    .await;
    let err = String::from_utf8_lossy(&negative.stderr);
    assert!(
        err.contains("spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        "{err}"
    );

    // StatefulSets, ReplicationControllers and a custom resource with a scale subresource.
    let file = sim.dir.path().join("scalable.yaml");
    std::fs::write(&file, SCALABLE).unwrap();
    ok(&kc, &["apply", "-f", &file.to_string_lossy()]).await;
    ok(&kc, &["scale", "statefulset/db", "--replicas=2"]).await;
    ok(&kc, &["scale", "rc/old", "--replicas=2"]).await;
    ok(
        &kc,
        &[
            "wait",
            "--for=jsonpath={.status.readyReplicas}=2",
            "statefulset/db",
            "rc/old",
            "--timeout=20s",
        ],
    )
    .await;
    let widget = sim.dir.path().join("widget.yaml");
    std::fs::write(
        &widget,
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}\n",
    )
    .unwrap();
    ok(&kc, &["apply", "-f", &widget.to_string_lossy()]).await;
    ok(&kc, &["scale", "widgets/w", "--replicas=4"]).await;
    let w = get_json(&kc, &["widgets", "w"]).await;
    assert_eq!(w["spec"]["size"], 4);
    let raw = ok(
        &kc,
        &[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/default/widgets/w/scale",
        ],
    )
    .await;
    let scale: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"]["replicas"], 0);

    let out = ok(
        &kc,
        &[
            "autoscale",
            "deployment",
            "web",
            "--min=1",
            "--max=5",
            "--cpu-percent=80",
        ],
    )
    .await;
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{out}"
    );
    let hpa = get_json(&kc, &["hpa", "web"]).await;
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(
        hpa["spec"]["scaleTargetRef"],
        serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
    );
    assert_eq!(
        (&hpa["spec"]["minReplicas"], &hpa["spec"]["maxReplicas"]),
        (&serde_json::json!(1), &serde_json::json!(5))
    );
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    let table = ok(&kc, &["get", "hpa"]).await;
    assert!(
        table.contains("REFERENCE") && table.contains("Deployment/web"),
        "{table}"
    );
    assert!(table.contains("cpu: <unknown>/80%"), "{table}");
    let v1 = get_json(&kc, &["hpa.v1.autoscaling", "web"]).await;
    assert_eq!(v1["spec"]["maxReplicas"], 5);
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Writes `yaml` to a file and runs `kubectl VERB -f FILE`, expecting it to fail; returns stderr.
async fn rejected(kc: &Path, dir: &Path, verb: &[&str], yaml: &str) -> String {
    let file = dir.join("invalid.yaml");
    std::fs::write(&file, yaml).unwrap();
    let mut args = verb.to_vec();
    let f = file.to_string_lossy().into_owned();
    args.extend_from_slice(&["-f", &f]);
    let out = kubectl(kc, &args).await;
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const MISMATCH: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  \
    selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: other}}\n    \
    spec: {containers: [{name: web, image: nginx}]}\n";

/// The real server's 422 answers as kubectl prints them, on create, client-side apply (a
/// patch), server-side apply and update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rejects_invalid_objects() {
    if !kubectl_available() {
        return;
    }
    let sim = Sim::start(1, Duration::from_millis(100)).await;
    let kc = sim.kubeconfig_path("c1");
    let dir = sim.dir.path();
    let want = "The Deployment \"bad\" is invalid: spec.template.metadata.labels: Invalid value: \
                map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`";
    for verb in [&["create"][..], &["apply"], &["apply", "--server-side"]] {
        let err = rejected(&kc, dir, verb, MISMATCH).await;
        assert!(err.contains(want), "{verb:?}: {err}");
    }
    // Several causes: kubectl lists them one a line.
    let no_selector = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  \
        template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web}]}\n";
    let err = rejected(&kc, dir, &["create"], no_selector).await;
    assert!(
        err.contains("The Deployment \"bad\" is invalid: \n"),
        "{err}"
    );
    for line in [
        "* spec.selector: Required value",
        "* spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`",
        "* spec.template.spec.containers[0].image: Required value",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
    let dup = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, image: x}\n  - {name: a, image: b}\n";
    let err = rejected(&kc, dir, &["apply"], dup).await;
    assert!(
        err.contains("The Pod \"p\" is invalid: spec.containers[1].name: Duplicate value: \"a\"\n"),
        "{err}"
    );
    let port =
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{targetPort: 80}]\n";
    let err = rejected(&kc, dir, &["apply"], port).await;
    assert!(
        err.contains(
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"
        ),
        "{err}"
    );
    let bad_name = kubectl(&kc, &["create", "configmap", "Bad_Name"]).await;
    let err = String::from_utf8_lossy(&bad_name.stderr);
    assert!(
        err.contains("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of"),
        "{err}"
    );
    let long = "x".repeat(254);
    let too_long = kubectl(&kc, &["create", "namespace", &long[..64]]).await;
    let err = String::from_utf8_lossy(&too_long.stderr);
    assert!(err.contains("must be no more than 63 characters"), "{err}");
    assert!(
        get_all_names(&kc).await.is_empty(),
        "nothing invalid was stored"
    );

    // Immutable fields on update: a Deployment's selector, a Service's cluster IP.
    ok(&kc, &["create", "deployment", "web", "--image=nginx"]).await;
    let moved = kubectl(
        &kc,
        &[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"matchLabels":{"app":"x"}},"template":{"metadata":{"labels":{"app":"x"}}}}}"#,
        ],
    )
    .await;
    let err = String::from_utf8_lossy(&moved.stderr);
    assert!(
        err.contains("The Deployment \"web\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"),
        "{err}"
    );
    // The same through client-side apply (a strategic merge patch) and replace (a PUT).
    let err = rejected(
        &kc,
        dir,
        &["apply"],
        &MISMATCH
            .replace("name: bad", "name: web")
            .replace("{app: web}", "{app: x}")
            .replace("other", "x"),
    )
    .await;
    assert!(
        err.contains("The Deployment \"web\" is invalid: spec.selector: Invalid value:")
            && err.contains("field is immutable"),
        "{err}"
    );
    let mut current = get_json(&kc, &["deployment", "web"]).await;
    current["spec"]["template"]["metadata"]["labels"] = serde_json::json!({"app": "moved"});
    let err = rejected(&kc, dir, &["replace"], &current.to_string()).await;
    assert!(
        err.contains("The Deployment \"web\" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"moved\"}: `selector` does not match template `labels`"),
        "{err}"
    );
    ok(
        &kc,
        &["create", "service", "clusterip", "web", "--tcp=80:80"],
    )
    .await;
    let ip = kubectl(
        &kc,
        &[
            "patch",
            "service",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"clusterIP":"10.96.250.250"}}"#,
        ],
    )
    .await;
    let err = String::from_utf8_lossy(&ip.stderr);
    assert!(
        err.contains("spec.clusterIPs[0]: Invalid value: []string{\"10.96.250.250\"}: may not change once set"),
        "{err}"
    );
    // The status subresource is not validated: the object's spec is not what it writes.
    ok(
        &kc,
        &[
            "patch",
            "deployment",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"observedGeneration":1}}"#,
        ],
    )
    .await;
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// The names of the Deployments, Pods, Services and ConfigMaps the tests created in `default`.
async fn get_all_names(kc: &Path) -> String {
    ok(
        kc,
        &[
            "get",
            "deployments,pods,services,configmaps",
            "-o",
            "name",
            "--field-selector=metadata.name!=kubernetes,metadata.name!=kube-root-ca.crt",
        ],
    )
    .await
}
