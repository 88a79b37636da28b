//! kubesim against a real API server: the same requests to a kubesim cluster and to a real
//! control plane (`../shared/kube`, kube-apiserver v1.32), compared on status code and on the
//! body, normalised for what differs by nature (uids, times, resource versions, field
//! ownership). Each case is a behaviour emco-rs depends on.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use emco_e2e::RealClusters;
use http::Request;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::{Fleet, FleetConfig};
use serde_json::{Value, json};

async fn client(kubeconfig: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Sends one request; returns the status and the body as JSON (`null` when it is not JSON).
async fn send(c: &kube::Client, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(bytes)
        .unwrap();
    let resp = c.send(req.map(kube::client::Body::from)).await.unwrap();
    let status = resp.status().as_u16();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Leaves out what differs by nature between two servers: identities and times, and `status`,
/// which controllers write on their own time (kubesim's at once). Go's typed encoding also writes
/// a pod template's zero `creationTimestamp` as `null`; that artefact is left out too.
fn normalise(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut()
        && o.get("kind").and_then(Value::as_str) != Some("Status")
    {
        o.remove("status");
    }
    if let Some(t) = v
        .pointer_mut("/spec/template/metadata")
        .and_then(Value::as_object_mut)
        && t.get("creationTimestamp") == Some(&Value::Null)
    {
        t.remove("creationTimestamp");
    }
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            m.remove(k);
        }
    }
    if let Some(d) = v.get_mut("details").and_then(Value::as_object_mut) {
        d.remove("uid");
    }
    // The real server lists a typed patch's errors in Go map order, which is random: compare
    // them as a set.
    if let Some(m) = v.get_mut("message")
        && let Some((head, list)) = m.as_str().and_then(|t| t.split_once("errors:\n"))
    {
        let mut lines: Vec<&str> = list.split('\n').collect();
        lines.sort_unstable();
        *m = Value::String(format!("{head}errors:\n{}", lines.join("\n")));
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubesim_answers_as_kube_apiserver() {
    let Some(real) = RealClusters::start(1).unwrap() else {
        return;
    };
    let fleet = Fleet::start(FleetConfig {
        clusters: 1,
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let real = client(&std::fs::read_to_string(real.kubeconfig_path("c1")).unwrap()).await;
    let sim = client(&fleet.kubeconfig("c1").unwrap()).await;

    const JSON: &str = "application/json";
    const APPLY: &str = "application/apply-patch+yaml";
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}});
    let mut with_unknown = cm("extra");
    with_unknown["spec"] = json!({"x": 1});
    let daemon = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "ds1", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    const SMP: &str = "application/strategic-merge-patch+json";
    let deploys = "/apis/apps/v1/namespaces/default/deployments";
    // A Deployment with extra fields in its container, pod spec and spec.
    let deployment = |name: &str, container: Value, pod: Value, spec: Value| {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "w"}},
                "template": {"metadata": {"labels": {"app": "w"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let merge = |at: &mut Value, extra: Value| {
            if let (Some(o), Value::Object(e)) = (at.as_object_mut(), extra) {
                o.extend(e);
            }
        };
        merge(
            &mut d["spec"]["template"]["spec"]["containers"][0],
            container,
        );
        merge(&mut d["spec"]["template"]["spec"], pod);
        merge(&mut d["spec"], spec);
        d
    };
    let cases: Vec<(&str, &str, String, &str, Value)> = vec![
        (
            "a missing object",
            "GET",
            format!("{cms}/missing"),
            JSON,
            Value::Null,
        ),
        ("a create", "POST", cms.to_owned(), JSON, cm("one")),
        (
            "a NetworkPolicy as nps writes it: its ports and policy types defaulted",
            "POST",
            "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies".to_owned(),
            JSON,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "np1"},
                "spec": {"podSelector": {"matchLabels": {"app": "s"}},
                    "ingress": [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}],
                        "ports": [{"protocol": "UDP"}, {"port": 53}]}]}}),
        ),
        (
            "a headless Service as sds writes it",
            "PATCH",
            "/api/v1/namespaces/default/services/srv-svc?fieldManager=t".to_owned(),
            APPLY,
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "srv-svc", "namespace": "default"},
                "spec": {"clusterIP": "None", "ports": [{"name": "30083", "protocol": "TCP",
                    "port": 30083, "targetPort": 30083}],
                    "sessionAffinity": "None", "type": "ClusterIP"}}),
        ),
        (
            "Endpoints as sds writes them: the port's protocol defaulted",
            "PATCH",
            "/api/v1/namespaces/default/endpoints/srv-svc?fieldManager=t".to_owned(),
            APPLY,
            json!({"apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "srv-svc", "namespace": "default"},
                "subsets": [{"addresses": [{"ip": "10.0.0.12"}],
                    "ports": [{"name": "30083", "port": 30083}]}]}),
        ),
        (
            "a duplicate create",
            "POST",
            cms.to_owned(),
            JSON,
            cm("one"),
        ),
        (
            "an unknown field, fieldValidation=Strict",
            "POST",
            format!("{cms}?fieldValidation=Strict"),
            JSON,
            with_unknown.clone(),
        ),
        (
            "an unknown field, dropped by default",
            "POST",
            cms.to_owned(),
            JSON,
            with_unknown,
        ),
        (
            "server-side apply of a field the kind lacks",
            "PATCH",
            "/apis/apps/v1/namespaces/default/daemonsets/ds1?fieldManager=t".to_owned(),
            APPLY,
            daemon,
        ),
        (
            "a create with a number where the Go type has a string",
            "POST",
            cms.to_owned(),
            JSON,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}, "data": {"a": 1}}),
        ),
        (
            "server-side apply of a number where the schema has a string",
            "PATCH",
            format!("{cms}/n?fieldManager=t"),
            APPLY,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}, "data": {"a": 1}}),
        ),
        (
            "a create with a string where the Go type has an integer, deep in a list",
            "POST",
            deploys.to_owned(),
            JSON,
            deployment(
                "d1",
                json!({"ports": [{"containerPort": "80"}]}),
                json!({}),
                json!({}),
            ),
        ),
        (
            "a create with a fraction for an integer",
            "POST",
            deploys.to_owned(),
            JSON,
            deployment("d1", json!({}), json!({}), json!({"replicas": 1.5})),
        ),
        (
            "a create with an invalid quantity",
            "POST",
            deploys.to_owned(),
            JSON,
            deployment(
                "d1",
                json!({"resources": {"limits": {"cpu": "abc"}}}),
                json!({}),
                json!({}),
            ),
        ),
        (
            "server-side apply of a file mode as a string (EMCO's collectd chart)",
            "PATCH",
            format!("{deploys}/d1?fieldManager=t"),
            APPLY,
            deployment(
                "d1",
                json!({}),
                json!({"volumes": [{"name": "v", "configMap": {"name": "x", "defaultMode": "0744"}}]}),
                json!({}),
            ),
        ),
        (
            "server-side apply with type errors in several places",
            "PATCH",
            format!("{deploys}/d1?fieldManager=t"),
            APPLY,
            deployment(
                "d1",
                json!({"env": [{"name": "A", "value": 5}], "args": "x"}),
                json!({"hostNetwork": "true"}),
                json!({"replicas": "2"}),
            ),
        ),
        (
            "server-side apply of a value the Go type cannot hold",
            "PATCH",
            format!("{deploys}/d1?fieldManager=t"),
            APPLY,
            deployment(
                "d1",
                json!({}),
                json!({}),
                json!({"strategy": {"rollingUpdate": {"maxSurge": true}}}),
            ),
        ),
        (
            "a delete",
            "DELETE",
            format!("{cms}/one"),
            JSON,
            Value::Null,
        ),
        (
            "a workload",
            "POST",
            "/apis/apps/v1/namespaces/default/deployments".to_owned(),
            JSON,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "w"}},
                    "template": {"metadata": {"labels": {"app": "w"}},
                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        ),
        (
            "a strategic merge patch of the wrong type",
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web".to_owned(),
            SMP,
            json!({"spec": {"replicas": "3", "template": {"spec": {"hostname": 5}}}}),
        ),
        (
            "a strategic merge patch with a string for a struct",
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/web".to_owned(),
            SMP,
            json!({"spec": {"selector": "x"}}),
        ),
        (
            "an update with a string for an integer",
            "PUT",
            "/apis/apps/v1/namespaces/default/deployments/web".to_owned(),
            JSON,
            deployment("web", json!({}), json!({}), json!({"replicas": "3"})),
        ),
        (
            "a delete of a workload",
            "DELETE",
            "/apis/apps/v1/namespaces/default/deployments/web".to_owned(),
            JSON,
            Value::Null,
        ),
        (
            "a delete of a missing object",
            "DELETE",
            format!("{cms}/one"),
            JSON,
            Value::Null,
        ),
    ];
    let mut differences = Vec::new();
    for (what, method, path, ct, body) in cases {
        let (rc, rb) = send(&real, method, &path, ct, &body).await;
        let (sc, sb) = send(&sim, method, &path, ct, &body).await;
        let (rb, sb) = (normalise(rb), normalise(sb));
        if rc != sc || rb != sb {
            differences.push(format!(
                "{what}: {method} {path}\n  real:    {rc} {rb}\n  kubesim: {sc} {sb}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
