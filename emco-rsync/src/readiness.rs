//! Readiness of live Kubernetes objects, following the rules of `kubectl rollout status` and
//! `helm --wait`.
//!
//! [`readiness`] is a pure function of the object as read from the cluster (with `status`):
//!
//! | kind | ready when |
//! |---|---|
//! | Deployment | the controller saw the latest spec, all `spec.replicas` are updated, no old replicas remain, and all updated replicas are available |
//! | StatefulSet | the controller saw the latest spec, `readyReplicas` reached `spec.replicas`, and the rollout finished (`updatedReplicas` past the partition, or `currentRevision == updateRevision`) |
//! | DaemonSet | the controller saw the latest spec, `updatedNumberScheduled` and `numberReady` reached `desiredNumberScheduled` |
//! | ReplicaSet, ReplicationController | the controller saw the latest spec and `readyReplicas` reached `spec.replicas` |
//! | Job | condition `Complete` is true (`Failed` true has failed for good) |
//! | Pod | condition `Ready` is true, or phase `Succeeded` (phase `Failed` has failed for good) |
//! | Service | `ExternalName`, or a cluster IP is assigned; `LoadBalancer` also needs an ingress |
//! | PersistentVolumeClaim | phase `Bound` |
//! | CustomResourceDefinition | condition `Established` is true |
//! | Namespace | phase `Active` (or no phase reported) |
//! | anything else | present |
//!
//! An object that is being deleted (`metadata.deletionTimestamp`) is never ready.

use serde_json::Value;

/// Whether an object is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The object is ready.
    Ready,
    /// The object is not ready yet; the reason says why.
    NotReady(String),
    /// The object will never be ready (a Job or Pod that failed); the reason says why, starting
    /// with `failed: `.
    Failed(String),
    /// The value is not a Kubernetes object (it has no `kind`), so readiness cannot be judged.
    NotApplicable,
}

impl Readiness {
    /// Whether this is [`Readiness::Ready`].
    #[must_use]
    pub const fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }
}

/// The readiness of `obj`, an object as read from the cluster. See the module documentation for
/// the rules.
#[must_use]
pub fn readiness(obj: &Value) -> Readiness {
    let Some(kind) = obj.get("kind").and_then(Value::as_str) else {
        return Readiness::NotApplicable;
    };
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return not_ready("being deleted");
    }
    let api_version = text(obj, "/apiVersion");
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        ("apps" | "extensions", "Deployment") => deployment(obj),
        ("apps", "StatefulSet") => stateful_set(obj),
        ("apps" | "extensions", "DaemonSet") => daemon_set(obj),
        ("apps" | "extensions", "ReplicaSet") | ("", "ReplicationController") => replica_set(obj),
        ("batch", "Job") => job(obj),
        ("", "Pod") => pod(obj),
        ("", "Service") => service(obj),
        ("", "PersistentVolumeClaim") => match text(obj, "/status/phase") {
            "Bound" => Readiness::Ready,
            "" => not_ready("not bound yet"),
            phase => not_ready(format!("phase is {phase}, not Bound")),
        },
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            match condition(obj, "Established") {
                Some(c) if c.is_true() => Readiness::Ready,
                _ => not_ready("not established yet"),
            }
        }
        ("", "Namespace") => match text(obj, "/status/phase") {
            "Active" | "" => Readiness::Ready,
            phase => not_ready(format!("phase is {phase}")),
        },
        _ => Readiness::Ready,
    }
}

fn not_ready(reason: impl Into<String>) -> Readiness {
    Readiness::NotReady(reason.into())
}

/// The string at `pointer`, or `""`.
fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The integer at `pointer`, or `default` when absent (the API server omits zero counts).
fn int(obj: &Value, pointer: &str, default: i64) -> i64 {
    obj.pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

/// `spec.replicas`, which defaults to 1.
fn desired_replicas(obj: &Value) -> i64 {
    int(obj, "/spec/replicas", 1)
}

/// Not ready while the controller has not seen the latest spec: its counts would describe the
/// previous one.
fn generation_observed(obj: &Value) -> Option<Readiness> {
    let generation = int(obj, "/metadata/generation", 0);
    let observed = int(obj, "/status/observedGeneration", 0);
    (observed < generation)
        .then(|| not_ready("waiting for the controller to observe the latest spec"))
}

struct Condition<'a> {
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

impl Condition<'_> {
    fn is_true(&self) -> bool {
        self.status == "True"
    }
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<Condition<'a>> {
    let c = obj
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))?;
    Some(Condition {
        status: text(c, "/status"),
        reason: text(c, "/reason"),
        message: text(c, "/message"),
    })
}

fn deployment(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    if let Some(c) = condition(obj, "Progressing")
        && c.reason == "ProgressDeadlineExceeded"
    {
        return not_ready(format!("progress deadline exceeded: {}", c.message));
    }
    let want = desired_replicas(obj);
    let updated = int(obj, "/status/updatedReplicas", 0);
    let total = int(obj, "/status/replicas", 0);
    let available = int(obj, "/status/availableReplicas", 0);
    if updated < want {
        not_ready(format!("{updated} of {want} replicas updated"))
    } else if total > updated {
        not_ready(format!(
            "{} old replicas pending termination",
            total - updated
        ))
    } else if available < updated {
        not_ready(format!(
            "{available} of {updated} updated replicas available"
        ))
    } else {
        Readiness::Ready
    }
}

fn stateful_set(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let want = desired_replicas(obj);
    let ready = int(obj, "/status/readyReplicas", 0);
    if ready < want {
        return not_ready(format!("{ready} of {want} replicas ready"));
    }
    let strategy = text(obj, "/spec/updateStrategy/type");
    if strategy == "OnDelete" {
        // Pods are only replaced when deleted by hand: there is no rollout to wait for.
        return Readiness::Ready;
    }
    let updated = int(obj, "/status/updatedReplicas", 0);
    match obj
        .pointer("/spec/updateStrategy/rollingUpdate/partition")
        .and_then(Value::as_i64)
    {
        Some(partition) if partition > 0 => {
            let expected = (want - partition).max(0);
            if updated < expected {
                not_ready(format!(
                    "{updated} of {expected} replicas above the partition updated"
                ))
            } else {
                Readiness::Ready
            }
        }
        _ => {
            let current = text(obj, "/status/currentRevision");
            let update = text(obj, "/status/updateRevision");
            if current == update {
                Readiness::Ready
            } else {
                not_ready(format!(
                    "{updated} of {want} replicas updated to revision {update}"
                ))
            }
        }
    }
}

fn daemon_set(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let desired = int(obj, "/status/desiredNumberScheduled", 0);
    let updated = int(obj, "/status/updatedNumberScheduled", 0);
    let ready = int(obj, "/status/numberReady", 0);
    if text(obj, "/spec/updateStrategy/type") != "OnDelete" && updated < desired {
        not_ready(format!("{updated} of {desired} pods updated"))
    } else if ready < desired {
        not_ready(format!("{ready} of {desired} pods ready"))
    } else {
        Readiness::Ready
    }
}

fn replica_set(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let want = desired_replicas(obj);
    let ready = int(obj, "/status/readyReplicas", 0);
    if ready < want {
        not_ready(format!("{ready} of {want} replicas ready"))
    } else {
        Readiness::Ready
    }
}

fn job(obj: &Value) -> Readiness {
    if condition(obj, "Complete").is_some_and(|c| c.is_true()) {
        return Readiness::Ready;
    }
    match condition(obj, "Failed") {
        Some(c) if c.is_true() => Readiness::Failed(format!("failed: {}: {}", c.reason, c.message)),
        _ => not_ready("not complete"),
    }
}

fn pod(obj: &Value) -> Readiness {
    match text(obj, "/status/phase") {
        "Succeeded" => return Readiness::Ready,
        "Failed" => {
            return Readiness::Failed(format!("failed: {}", text(obj, "/status/reason")));
        }
        _ => {}
    }
    match condition(obj, "Ready") {
        Some(c) if c.is_true() => Readiness::Ready,
        Some(c) if !c.reason.is_empty() => not_ready(format!("not ready: {}", c.reason)),
        _ => not_ready("not ready"),
    }
}

fn service(obj: &Value) -> Readiness {
    let kind = text(obj, "/spec/type");
    if kind == "ExternalName" {
        return Readiness::Ready;
    }
    if text(obj, "/spec/clusterIP").is_empty() {
        return not_ready("no cluster IP assigned");
    }
    let has_ingress = obj
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .is_some_and(|i| !i.is_empty());
    if kind == "LoadBalancer" && !has_ingress {
        return not_ready("waiting for a load balancer ingress");
    }
    Readiness::Ready
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ready(obj: &Value) -> bool {
        readiness(obj).is_ready()
    }

    fn reason(obj: &Value) -> String {
        match readiness(obj) {
            Readiness::NotReady(r) | Readiness::Failed(r) => r,
            other => panic!("expected NotReady or Failed, got {other:?}"),
        }
    }

    fn deploy(spec_replicas: i64, generation: i64, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "generation": generation},
            "spec": {"replicas": spec_replicas, "template": {}},
            "status": status})
    }

    #[test]
    fn deployments() {
        let done = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
            "readyReplicas": 3, "availableReplicas": 3,
            "conditions": [{"type": "Available", "status": "True"},
                           {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]});
        assert!(ready(&deploy(3, 2, done.clone())));
        assert!(reason(&deploy(3, 3, done.clone())).contains("observe"));
        let table = [
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "availableReplicas": 3}),
                "1 of 3 replicas updated",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
                "1 old replicas pending termination",
            ),
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2}),
                "2 of 3 updated replicas available",
            ),
            (json!({"observedGeneration": 2}), "0 of 3 replicas updated"),
            (
                json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
                    "conditions": [{"type": "Progressing", "status": "False",
                                    "reason": "ProgressDeadlineExceeded", "message": "rs web-1 timed out"}]}),
                "progress deadline exceeded: rs web-1 timed out",
            ),
        ];
        for (status, why) in table {
            assert_eq!(reason(&deploy(3, 2, status)), why);
        }
        // spec.replicas defaults to 1; zero replicas is ready at once.
        let mut one = deploy(
            1,
            1,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
            "availableReplicas": 1}),
        );
        one["spec"].as_object_mut().unwrap().remove("replicas");
        assert!(ready(&one));
        assert!(ready(&deploy(0, 1, json!({"observedGeneration": 1}))));
        // A custom kind named Deployment in another group is not judged as one.
        let mut other = deploy(3, 2, json!({}));
        other["apiVersion"] = json!("example.com/v1");
        assert!(ready(&other));
    }

    fn sts(strategy: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "generation": 1},
            "spec": {"replicas": 3, "updateStrategy": strategy}, "status": status})
    }

    #[test]
    fn stateful_sets() {
        let rolling = json!({"type": "RollingUpdate"});
        let done = json!({"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
            "currentRevision": "db-7d9", "updateRevision": "db-7d9"});
        assert!(ready(&sts(rolling.clone(), done)));
        assert_eq!(
            reason(&sts(
                rolling.clone(),
                json!({"observedGeneration": 1, "readyReplicas": 2})
            )),
            "2 of 3 replicas ready"
        );
        let rolling_on = json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 1,
            "currentRevision": "db-7d9", "updateRevision": "db-8aa"});
        assert_eq!(
            reason(&sts(rolling.clone(), rolling_on.clone())),
            "1 of 3 replicas updated to revision db-8aa"
        );
        assert!(ready(&sts(json!({"type": "OnDelete"}), rolling_on.clone())));
        let partitioned = json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}});
        assert!(ready(&sts(partitioned.clone(), rolling_on)));
        assert!(
            reason(&sts(
                partitioned,
                json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 0})
            ))
            .contains("above the partition")
        );
        assert!(reason(&sts(rolling, json!({}))).contains("observe"));
    }

    #[test]
    fn daemon_sets() {
        let ds = |status: Value| {
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "generation": 4},
                "spec": {"updateStrategy": {"type": "RollingUpdate"}}, "status": status})
        };
        assert!(ready(&ds(
            json!({"observedGeneration": 4, "desiredNumberScheduled": 5,
            "currentNumberScheduled": 5, "updatedNumberScheduled": 5, "numberReady": 5, "numberAvailable": 5})
        )));
        assert_eq!(
            reason(&ds(
                json!({"observedGeneration": 4, "desiredNumberScheduled": 5,
                "updatedNumberScheduled": 3, "numberReady": 5})
            )),
            "3 of 5 pods updated"
        );
        assert_eq!(
            reason(&ds(
                json!({"observedGeneration": 4, "desiredNumberScheduled": 5,
                "updatedNumberScheduled": 5, "numberReady": 4})
            )),
            "4 of 5 pods ready"
        );
        // No node matches: nothing to wait for.
        assert!(ready(&ds(
            json!({"observedGeneration": 4, "desiredNumberScheduled": 0})
        )));
    }

    #[test]
    fn replica_sets_and_replication_controllers() {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "a", "generation": 1},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2}});
        assert!(ready(&rs));
        let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "a", "generation": 1},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 1}});
        assert_eq!(reason(&rc), "1 of 2 replicas ready");
    }

    #[test]
    fn jobs() {
        let job = |conditions: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
                "status": {"conditions": conditions}})
        };
        assert!(ready(&job(
            json!([{"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"}])
        )));
        // A failed Job never completes: waiting for it is pointless.
        assert_eq!(
            readiness(&job(
                json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit"}])
            )),
            Readiness::Failed(
                "failed: BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            )
        );
        assert_eq!(reason(&job(json!([]))), "not complete");
        assert_eq!(
            reason(&job(json!([{"type": "Complete", "status": "False"}]))),
            "not complete"
        );
    }

    #[test]
    fn pods() {
        let pod = |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": status});
        assert!(ready(&pod(json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}))));
        assert!(ready(&pod(
            json!({"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "False"}]})
        )));
        assert_eq!(
            reason(&pod(json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}))),
            "not ready: ContainersNotReady"
        );
        assert_eq!(
            readiness(&pod(json!({"phase": "Failed", "reason": "Evicted"}))),
            Readiness::Failed("failed: Evicted".into())
        );
        assert_eq!(reason(&pod(json!({"phase": "Pending"}))), "not ready");
    }

    #[test]
    fn services() {
        let svc = |spec: Value, status: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec, "status": status});
        assert!(ready(&svc(
            json!({"type": "ClusterIP", "clusterIP": "10.96.0.12"}),
            json!({})
        )));
        assert!(
            ready(&svc(json!({"clusterIP": "None"}), json!({}))),
            "headless"
        );
        assert!(ready(&svc(
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
            json!({})
        )));
        assert_eq!(
            reason(&svc(json!({"type": "ClusterIP"}), json!({}))),
            "no cluster IP assigned"
        );
        let lb = json!({"type": "LoadBalancer", "clusterIP": "10.96.0.13"});
        assert_eq!(
            reason(&svc(lb.clone(), json!({"loadBalancer": {}}))),
            "waiting for a load balancer ingress"
        );
        assert!(ready(&svc(
            lb,
            json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}})
        )));
    }

    #[test]
    fn claims_crds_namespaces_and_others() {
        let pvc = |phase: &str| {
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                "status": {"phase": phase}})
        };
        assert!(ready(&pvc("Bound")));
        assert_eq!(reason(&pvc("Pending")), "phase is Pending, not Bound");
        let crd = |status: &str| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                          {"type": "Established", "status": status}]}})
        };
        assert!(ready(&crd("True")));
        assert_eq!(reason(&crd("False")), "not established yet");
        let ns = |phase: Value| {
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"},
            "status": {"phase": phase}})
        };
        assert!(ready(&ns(json!("Active"))));
        assert!(ready(&ns(Value::Null)));
        assert_eq!(reason(&ns(json!("Terminating"))), "phase is Terminating");
        let cm =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}});
        assert!(ready(&cm));
        let mut gone = cm.clone();
        gone["metadata"]["deletionTimestamp"] = json!("2026-11-21T13:00:00Z");
        assert_eq!(reason(&gone), "being deleted");
        assert_eq!(readiness(&json!({"data": 1})), Readiness::NotApplicable);
        assert_eq!(readiness(&json!("text")), Readiness::NotApplicable);
    }
}
