//! What the simulated controllers do: defaults the server fills in, and the status workloads
//! reach (at once when not yet ready, and again after the ready delay).

use std::time::Duration;

use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::store::Store;
use crate::util::now_rfc3339;

/// What the server fills in on create: the type's defaults (see `defaults`), then what only a
/// new object gets (cluster IPs, namespace phase, ...).
pub(crate) fn defaults_on_create(rt: &ResourceType, obj: &mut Value, store: &mut Store) {
    crate::defaults::apply(rt, obj);
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "services") => {
            let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
                return;
            };
            let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
            let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
            if !headless
                && !external
                && spec
                    .get("clusterIP")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
            {
                let ip = store.allocate_ip();
                spec.insert("clusterIP".to_owned(), json!(ip));
                spec.insert("clusterIPs".to_owned(), json!([ip]));
            }
            if headless {
                spec.entry("clusterIPs").or_insert_with(|| json!(["None"]));
            }
            // As kube-apiserver: a headless Service without a selector (its Endpoints written
            // by hand, as sds does) allocates nothing, so it takes every family.
            let selectorless = spec.get("selector").is_none_or(|s| {
                s.is_null() || s.as_object().is_some_and(serde_json::Map::is_empty)
            });
            if headless && selectorless {
                spec.entry("ipFamilies")
                    .or_insert_with(|| json!(["IPv4", "IPv6"]));
                spec.entry("ipFamilyPolicy")
                    .or_insert_with(|| json!("RequireDualStack"));
            }
            if !external {
                spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
                spec.entry("ipFamilyPolicy")
                    .or_insert_with(|| json!("SingleStack"));
                spec.entry("internalTrafficPolicy")
                    .or_insert_with(|| json!("Cluster"));
            }
        }
        ("", "namespaces") => {
            let name = obj
                .pointer("/metadata/name")
                .cloned()
                .unwrap_or(Value::Null);
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".to_owned(), name);
                }
            }
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        _ => {}
    }
}

/// What the server fills in when an object is written over: the type's defaults, and what the
/// object was given on create (a Service's cluster IPs) when the new body leaves it out.
pub(crate) fn defaults_on_update(rt: &ResourceType, old: &Value, new: &mut Value) {
    crate::defaults::apply(rt, new);
    if (rt.group.as_str(), rt.plural.as_str()) != ("", "services") {
        return;
    }
    let (Some(old_spec), Some(spec)) = (
        old.get("spec").and_then(Value::as_object),
        new.get_mut("spec").and_then(Value::as_object_mut),
    ) else {
        return;
    };
    for f in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "internalTrafficPolicy",
    ] {
        if let Some(v) = old_spec.get(f)
            && spec.get(f).is_none_or(|n| n.as_str() == Some(""))
        {
            spec.insert(f.to_owned(), v.clone());
        }
    }
}

fn replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn condition(kind: &str, status: bool, reason: &str, message: &str) -> Value {
    let now = now_rfc3339();
    json!({"type": kind, "status": if status { "True" } else { "False" }, "reason": reason,
           "message": message, "lastTransitionTime": now, "lastUpdateTime": now})
}

/// Whether the simulation manages the status of this type.
pub(crate) fn simulated(rt: &ResourceType) -> bool {
    matches!(
        (rt.group.as_str(), rt.plural.as_str()),
        (
            "apps",
            "deployments" | "replicasets" | "statefulsets" | "daemonsets"
        ) | ("batch", "jobs")
            | (
                "",
                "pods" | "persistentvolumeclaims" | "services" | "replicationcontrollers"
            )
    )
}

/// The status a simulated workload shows: `ready == false` right after a change of its spec,
/// `ready == true` once the ready delay `run_time` passed. `None` for types without simulated
/// status (and for services that are not load balancers while not ready).
pub(crate) fn status(
    rt: &ResourceType,
    obj: &Value,
    ready: bool,
    run_time: Duration,
) -> Option<Value> {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let n = replicas(obj);
    let up = if ready { n } else { 0 };
    let st = match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => {
            let mut s = json!({
                "observedGeneration": generation, "replicas": n, "updatedReplicas": n,
                "conditions": [
                    condition("Available", ready, if ready { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                        if ready { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." }),
                    condition("Progressing", true, if ready { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
                        "ReplicaSet is progressing."),
                ],
            });
            if ready {
                s["readyReplicas"] = json!(n);
                s["availableReplicas"] = json!(n);
            } else {
                s["unavailableReplicas"] = json!(n);
            }
            s
        }
        ("apps", "replicasets") | ("", "replicationcontrollers") => json!({
            "observedGeneration": generation, "replicas": n, "fullyLabeledReplicas": n,
            "readyReplicas": up, "availableReplicas": up,
        }),
        ("apps", "statefulsets") => json!({
            "observedGeneration": generation, "replicas": n, "readyReplicas": up, "currentReplicas": n,
            "updatedReplicas": n, "availableReplicas": up,
            "currentRevision": format!("{}-{generation}", name(obj)), "updateRevision": format!("{}-{generation}", name(obj)),
            "collisionCount": 0,
        }),
        ("apps", "daemonsets") => json!({
            "observedGeneration": generation, "desiredNumberScheduled": 1, "currentNumberScheduled": 1,
            "updatedNumberScheduled": 1, "numberReady": i64::from(ready), "numberAvailable": i64::from(ready),
            "numberMisscheduled": 0,
        }),
        ("batch", "jobs") => return Some(job_status(obj, ready, run_time)),
        ("", "pods") if ready && owned_by_job(obj) => {
            // A Job's Pod runs to completion.
            let containers: Vec<Value> = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| json!({"name": c.get("name"), "image": c.get("image"), "ready": false,
                               "started": false, "restartCount": 0,
                               "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                        "startedAt": now_rfc3339(), "finishedAt": now_rfc3339()}}}))
                .collect();
            json!({"phase": "Succeeded", "podIP": "10.244.0.10", "hostIP": "10.0.0.1",
                   "startTime": now_rfc3339(), "containerStatuses": containers,
                   "conditions": [condition("PodScheduled", true, "", ""), condition("Ready", false, "PodCompleted", "")]})
        }
        ("", "pods") => {
            let containers: Vec<Value> = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| json!({"name": c.get("name"), "image": c.get("image"), "ready": ready,
                               "started": ready, "restartCount": 0,
                               "state": if ready { json!({"running": {"startedAt": now_rfc3339()}}) }
                                        else { json!({"waiting": {"reason": "ContainerCreating"}}) }}))
                .collect();
            json!({"phase": if ready { "Running" } else { "Pending" }, "podIP": "10.244.0.10", "hostIP": "10.0.0.1",
                   "startTime": now_rfc3339(), "containerStatuses": containers,
                   "conditions": [condition("PodScheduled", true, "", ""), condition("Ready", ready, "", "")]})
        }
        ("", "persistentvolumeclaims") => {
            let size = obj
                .pointer("/spec/resources/requests/storage")
                .cloned()
                .unwrap_or(json!("1Gi"));
            if ready {
                json!({"phase": "Bound", "capacity": {"storage": size}, "accessModes": obj.pointer("/spec/accessModes")})
            } else {
                json!({"phase": "Pending"})
            }
        }
        ("", "services") => {
            let lb = obj.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer");
            if lb && ready {
                json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10", "ipMode": "VIP"}]}})
            } else {
                json!({"loadBalancer": {}})
            }
        }
        _ => return None,
    };
    Some(st)
}

/// A Job runs for the ready delay, then completes; as the real Job controller, a suspended Job
/// never starts, and one whose `activeDeadlineSeconds` is not longer than its run fails with
/// `DeadlineExceeded` (at once for a deadline of 0).
fn job_status(obj: &Value, ready: bool, run_time: Duration) -> Value {
    if obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return json!({"ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
                      "conditions": [condition("Suspended", true, "JobSuspended", "Job suspended")]});
    }
    let deadline = obj
        .pointer("/spec/activeDeadlineSeconds")
        .and_then(Value::as_u64);
    if let Some(d) = deadline
        && Duration::from_secs(d) <= run_time
        && (ready || d == 0)
    {
        let why = "Job was active longer than specified deadline";
        return json!({"startTime": now_rfc3339(), "ready": 0, "terminating": 0,
                      "failed": i64::from(d > 0), "uncountedTerminatedPods": {},
                      "conditions": [condition("FailureTarget", true, "DeadlineExceeded", why),
                                     condition("Failed", true, "DeadlineExceeded", why)]});
    }
    let completions = obj
        .pointer("/spec/completions")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let now = now_rfc3339();
    if ready {
        json!({"startTime": now, "completionTime": now, "succeeded": completions, "ready": 0,
                   "conditions": [condition("SuccessCriteriaMet", true, "CompletionsReached", "Reached expected number of succeeded pods"),
                                  condition("Complete", true, "CompletionsReached", "Reached expected number of succeeded pods")]})
    } else {
        json!({"startTime": now, "active": 1, "ready": 0})
    }
}

fn owned_by_job(obj: &Value) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| r["kind"] == "Job"))
}

fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The status of a CustomResourceDefinition the server accepted.
pub(crate) fn crd_status(obj: &Value) -> Value {
    let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let versions: Vec<Value> = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").cloned())
        .collect();
    json!({
        "acceptedNames": names,
        "storedVersions": versions,
        "conditions": [
            condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
            condition("Established", true, "InitialNamesAccepted", "the initial names have been accepted"),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;

    fn rt(plural: &str) -> &'static ResourceType {
        BUILTIN_TYPES.iter().find(|t| t.plural == plural).unwrap()
    }

    const RUN: Duration = Duration::from_millis(500);

    /// As a v1.32 kube-controller-manager answered (`../shared/kube`, no nodes).
    #[test]
    fn suspended_jobs_wait_and_deadlines_fail_them() {
        let job = |spec: Value| json!({"metadata": {"name": "j"}, "spec": spec});
        let suspended = job(json!({"suspend": true}));
        for ready in [false, true] {
            let s = status(rt("jobs"), &suspended, ready, RUN).unwrap();
            assert_eq!(s["conditions"][0]["type"], "Suspended");
            assert_eq!(s["conditions"][0]["reason"], "JobSuspended");
            assert!(s.get("startTime").is_none());
        }
        // A deadline of 0 fails at once; one within the run fails when the run would end; a
        // longer one does not matter.
        let failed = |s: &Value| {
            s["conditions"][1]["type"] == "Failed"
                && s["conditions"][1]["reason"] == "DeadlineExceeded"
                && s["conditions"][1]["message"] == "Job was active longer than specified deadline"
        };
        let zero = job(json!({"activeDeadlineSeconds": 0}));
        assert!(failed(&status(rt("jobs"), &zero, false, RUN).unwrap()));
        let one = job(json!({"activeDeadlineSeconds": 1}));
        let long_run = Duration::from_secs(2);
        assert!(!failed(&status(rt("jobs"), &one, false, long_run).unwrap()));
        let s = status(rt("jobs"), &one, true, long_run).unwrap();
        assert!(failed(&s));
        assert_eq!(s["failed"], 1);
        let s = status(rt("jobs"), &one, true, RUN).unwrap();
        assert_eq!(s["conditions"][1]["type"], "Complete");
    }

    #[test]
    fn deployment_becomes_available() {
        let d = json!({"metadata": {"name": "web", "generation": 2}, "spec": {"replicas": 3}});
        let s = status(rt("deployments"), &d, false, RUN).unwrap();
        assert_eq!(s["conditions"][0]["status"], "False");
        assert!(s.get("availableReplicas").is_none());
        let s = status(rt("deployments"), &d, true, RUN).unwrap();
        assert_eq!(s["availableReplicas"], 3);
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(s["conditions"][0]["type"], "Available");
        assert_eq!(s["conditions"][0]["status"], "True");
    }

    #[test]
    fn services_get_cluster_ips() {
        let mut store = Store::default();
        let mut svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
        defaults_on_create(rt("services"), &mut svc, &mut store);
        assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        let mut headless = json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}});
        defaults_on_create(rt("services"), &mut headless, &mut store);
        assert_eq!(headless["spec"]["clusterIP"], "None");
    }

    #[test]
    fn jobs_complete() {
        let s = status(rt("jobs"), &json!({"spec": {"completions": 2}}), true, RUN).unwrap();
        assert_eq!(s["succeeded"], 2);
        assert_eq!(s["conditions"][1]["type"], "Complete");
        assert!(status(rt("configmaps"), &json!({}), true, RUN).is_none());
    }
}
