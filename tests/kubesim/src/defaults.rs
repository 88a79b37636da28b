//! The defaults of built-in types that the real API server fills in on every write (create,
//! update, patch, apply) before it stores the object, as `SetDefaults_*` of k8s.io/api do.
//!
//! They run before field ownership is recorded: an Update (create, PUT, patch) then owns the
//! defaults it brought in, as on the real server, whose decoder defaults the request body; an
//! Apply owns only what its configuration names, so defaulted fields stay unowned.

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;

type Obj = Map<String, Value>;

/// Fills in the defaults of `obj`, of type `rt`. Fields already set are kept.
pub(crate) fn apply(rt: &ResourceType, obj: &mut Value) {
    if rt.custom {
        return;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => {
            let Some(spec) = child(obj, "spec") else {
                return;
            };
            set(spec, "replicas", json!(1));
            if let Some(strategy) = child_of(spec, "strategy") {
                set(strategy, "type", json!("RollingUpdate"));
                if strategy["type"] == "RollingUpdate"
                    && let Some(ru) = child_of(strategy, "rollingUpdate")
                {
                    set(ru, "maxUnavailable", json!("25%"));
                    set(ru, "maxSurge", json!("25%"));
                }
            }
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "progressDeadlineSeconds", json!(600));
            template(spec);
        }
        ("apps", "statefulsets") => {
            let Some(spec) = child(obj, "spec") else {
                return;
            };
            set(spec, "replicas", json!(1));
            set(spec, "podManagementPolicy", json!("OrderedReady"));
            if let Some(strategy) = child_of(spec, "updateStrategy") {
                set(strategy, "type", json!("RollingUpdate"));
                if strategy["type"] == "RollingUpdate"
                    && let Some(ru) = child_of(strategy, "rollingUpdate")
                {
                    set(ru, "partition", json!(0));
                }
            }
            set(spec, "revisionHistoryLimit", json!(10));
            if let Some(retention) = child_of(spec, "persistentVolumeClaimRetentionPolicy") {
                set(retention, "whenDeleted", json!("Retain"));
                set(retention, "whenScaled", json!("Retain"));
            }
            for pvc in items(spec, "volumeClaimTemplates") {
                if let Some(s) = child_of(pvc, "spec") {
                    set(s, "volumeMode", json!("Filesystem"));
                }
            }
            template(spec);
        }
        ("apps", "daemonsets") => {
            let Some(spec) = child(obj, "spec") else {
                return;
            };
            if let Some(strategy) = child_of(spec, "updateStrategy") {
                set(strategy, "type", json!("RollingUpdate"));
                if strategy["type"] == "RollingUpdate"
                    && let Some(ru) = child_of(strategy, "rollingUpdate")
                {
                    set(ru, "maxUnavailable", json!(1));
                    set(ru, "maxSurge", json!(0));
                }
            }
            set(spec, "revisionHistoryLimit", json!(10));
            template(spec);
        }
        ("apps", "replicasets") | ("", "replicationcontrollers") => {
            let Some(spec) = child(obj, "spec") else {
                return;
            };
            set(spec, "replicas", json!(1));
            template(spec);
        }
        ("batch", "jobs") => {
            if let Some(spec) = child(obj, "spec") {
                job_spec(spec);
            }
        }
        ("batch", "cronjobs") => {
            let Some(spec) = child(obj, "spec") else {
                return;
            };
            set(spec, "concurrencyPolicy", json!("Allow"));
            set(spec, "suspend", json!(false));
            set(spec, "successfulJobsHistoryLimit", json!(3));
            set(spec, "failedJobsHistoryLimit", json!(1));
            // Only the pod template of the job template is defaulted; the Job's own defaults
            // come when the Job is created from it.
            if let Some(js) = spec
                .get_mut("jobTemplate")
                .and_then(|t| t.get_mut("spec"))
                .and_then(Value::as_object_mut)
            {
                template(js);
            }
        }
        ("", "pods") => {
            let Some(spec) = child(obj, "spec") else {
                return;
            };
            pod_spec(spec);
            set(spec, "enableServiceLinks", json!(true));
        }
        ("", "podtemplates") => {
            if let Some(t) = obj.get_mut("template").and_then(Value::as_object_mut) {
                pod_template(t);
            }
        }
        ("", "services") => {
            if let Some(spec) = child(obj, "spec") {
                service_spec(spec);
            }
        }
        ("", "endpoints") => {
            if let Some(o) = obj.as_object_mut() {
                for subset in items(o, "subsets") {
                    for port in items(subset, "ports") {
                        set(port, "protocol", json!("TCP"));
                    }
                }
            }
        }
        ("", "persistentvolumeclaims") => {
            if let Some(spec) = child(obj, "spec") {
                set(spec, "volumeMode", json!("Filesystem"));
            }
        }
        ("", "secrets") => {
            if let Some(o) = obj.as_object_mut() {
                set(o, "type", json!("Opaque"));
            }
        }
        ("networking.k8s.io", "networkpolicies") => {
            if let Some(spec) = child(obj, "spec") {
                network_policy_spec(spec);
            }
        }
        ("scheduling.k8s.io", "priorityclasses") => {
            if let Some(o) = obj.as_object_mut() {
                set(o, "preemptionPolicy", json!("PreemptLowerPriority"));
            }
        }
        _ => {}
    }
}

/// SetDefaults_NetworkPolicy and _NetworkPolicyPort: TCP ports, and `Ingress` (plus `Egress`
/// when there are egress rules) when no policy type is given.
fn network_policy_spec(spec: &mut Obj) {
    for rules in ["ingress", "egress"] {
        for rule in items(spec, rules) {
            for port in items(rule, "ports") {
                set(port, "protocol", json!("TCP"));
            }
        }
    }
    let none = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if none {
        let mut types = vec![json!("Ingress")];
        if spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty())
        {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".to_owned(), Value::Array(types));
    }
}

fn job_spec(spec: &mut Obj) {
    // Both unset: one pod, once. Only parallelism unset: one at a time.
    if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
        spec.insert("completions".to_owned(), json!(1));
    }
    set(spec, "parallelism", json!(1));
    set(spec, "backoffLimit", json!(6));
    set(spec, "completionMode", json!("NonIndexed"));
    set(spec, "suspend", json!(false));
    if spec.get("podFailurePolicy").is_none() {
        set(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
    }
    template(spec);
}

fn service_spec(spec: &mut Obj) {
    set(spec, "type", json!("ClusterIP"));
    set(spec, "sessionAffinity", json!("None"));
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        set(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    for p in items(spec, "ports") {
        set(p, "protocol", json!("TCP"));
        // An unset target port (or the zero a protobuf body carries) means the port itself.
        let unset = p.get("targetPort").is_none_or(|t| *t == json!(0));
        if unset && let Some(port) = p.get("port").cloned() {
            p.insert("targetPort".to_owned(), port);
        }
    }
}

/// `spec.template` of a workload.
fn template(spec: &mut Obj) {
    if let Some(t) = spec.get_mut("template").and_then(Value::as_object_mut) {
        pod_template(t);
    }
}

fn pod_template(t: &mut Obj) {
    if let Some(spec) = child_of(t, "spec") {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut Obj) {
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "securityContext", json!({}));
    set(spec, "schedulerName", json!("default-scheduler"));
    for key in ["containers", "initContainers"] {
        for c in items(spec, key) {
            container(c);
        }
    }
    for v in items(spec, "volumes") {
        for source in ["secret", "configMap"] {
            if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
                set(s, "defaultMode", json!(420));
            }
        }
    }
}

fn container(c: &mut Obj) {
    set(c, "terminationMessagePath", json!("/dev/termination-log"));
    set(c, "terminationMessagePolicy", json!("File"));
    let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
    let policy = if latest(image) {
        "Always"
    } else {
        "IfNotPresent"
    };
    set(c, "imagePullPolicy", json!(policy));
    set(c, "resources", json!({}));
    for p in items(c, "ports") {
        set(p, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            set(p, "timeoutSeconds", json!(1));
            set(p, "periodSeconds", json!(10));
            set(p, "successThreshold", json!(1));
            set(p, "failureThreshold", json!(3));
            if let Some(h) = p.get_mut("httpGet").and_then(Value::as_object_mut) {
                set(h, "scheme", json!("HTTP"));
            }
        }
    }
}

/// Whether an image reference pulls `:latest`: no tag (nor digest), or the tag `latest`.
fn latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    // A colon before the last slash belongs to the registry's port.
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

fn set(o: &mut Obj, key: &str, v: Value) {
    o.entry(key).or_insert(v);
}

/// The object at `key` of the top level, made if missing; `None` if it is not an object
/// (validation's business, not defaulting's).
fn child<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Obj> {
    child_of(obj.as_object_mut()?, key)
}

fn child_of<'a>(o: &'a mut Obj, key: &str) -> Option<&'a mut Obj> {
    o.entry(key).or_insert_with(|| json!({})).as_object_mut()
}

/// The object items of the list at `key`.
fn items<'a>(o: &'a mut Obj, key: &str) -> impl Iterator<Item = &'a mut Obj> {
    o.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;

    fn rt(plural: &str) -> &'static ResourceType {
        BUILTIN_TYPES.iter().find(|t| t.plural == plural).unwrap()
    }

    /// As kube-apiserver answered sds' Endpoints (`../shared/kube`): ports default to TCP.
    #[test]
    fn endpoints_ports_default_to_tcp() {
        let mut e = json!({"subsets": [{"addresses": [{"ip": "10.0.0.12"}],
            "ports": [{"name": "30083", "port": 30083}, {"port": 53, "protocol": "UDP"}]}]});
        apply(rt("endpoints"), &mut e);
        assert_eq!(
            e["subsets"][0]["ports"],
            json!([{"name": "30083", "port": 30083, "protocol": "TCP"},
                {"port": 53, "protocol": "UDP"}])
        );
    }

    #[test]
    fn deployment_defaults() {
        let mut d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "reg:5000/x/nginx:1.27", "imagePullPolicy": "Never"},
            {"name": "c", "image": "nginx:latest"},
            {"name": "d", "image": "nginx@sha256:abc"}]}}}});
        apply(rt("deployments"), &mut d);
        let s = &d["spec"];
        assert_eq!(s["replicas"], 1);
        assert_eq!(
            s["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(s["revisionHistoryLimit"], 10);
        assert_eq!(s["progressDeadlineSeconds"], 600);
        let ps = &s["template"]["spec"];
        assert_eq!(ps["restartPolicy"], "Always");
        assert_eq!(ps["dnsPolicy"], "ClusterFirst");
        assert_eq!(ps["terminationGracePeriodSeconds"], 30);
        assert_eq!(ps["schedulerName"], "default-scheduler");
        assert_eq!(ps["securityContext"], json!({}));
        let c = &ps["containers"];
        assert_eq!(c[0]["imagePullPolicy"], "Always");
        assert_eq!(c[0]["ports"][0]["protocol"], "TCP");
        assert_eq!(c[0]["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c[0]["terminationMessagePolicy"], "File");
        assert_eq!(c[1]["imagePullPolicy"], "Never");
        assert_eq!(c[2]["imagePullPolicy"], "Always");
        assert_eq!(c[3]["imagePullPolicy"], "IfNotPresent");
        // Idempotent, and a Recreate strategy gets no rollingUpdate.
        let again = d.clone();
        apply(rt("deployments"), &mut d);
        assert_eq!(d, again);
        let mut r = json!({"spec": {"strategy": {"type": "Recreate"}}});
        apply(rt("deployments"), &mut r);
        assert!(r["spec"]["strategy"].get("rollingUpdate").is_none());
    }

    /// As a v1.32 kube-apiserver stores them (`../shared/kube`).
    #[test]
    fn network_policy_defaults() {
        let mut np = json!({"spec": {"podSelector": {},
            "ingress": [{"ports": [{"protocol": "UDP"}, {"port": 80}]}],
            "egress": [{"ports": [{"port": 53}]}]}});
        apply(rt("networkpolicies"), &mut np);
        assert_eq!(
            np["spec"]["ingress"][0]["ports"],
            json!([{"protocol": "UDP"}, {"protocol": "TCP", "port": 80}])
        );
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    }

    #[test]
    fn job_cronjob_and_service_defaults() {
        let mut j = json!({"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "a", "image": "busybox:1"}]}}}});
        apply(rt("jobs"), &mut j);
        assert_eq!(j["spec"]["backoffLimit"], 6);
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(j["spec"]["parallelism"], 1);
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let mut only_parallelism = json!({"spec": {"parallelism": 3}});
        apply(rt("jobs"), &mut only_parallelism);
        assert!(only_parallelism["spec"].get("completions").is_none());
        let mut cj = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
            "template": {"spec": {"containers": [{"name": "a", "image": "busybox"}]}}}}}});
        apply(rt("cronjobs"), &mut cj);
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["suspend"], false);
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
        assert!(
            cj["spec"]["jobTemplate"]["spec"]
                .get("backoffLimit")
                .is_none()
        );
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        let mut svc =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": 0}]}});
        apply(rt("services"), &mut svc);
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        assert_eq!(svc["spec"]["sessionAffinity"], "None");
        assert_eq!(svc["spec"]["externalTrafficPolicy"], "Cluster");
    }
}
