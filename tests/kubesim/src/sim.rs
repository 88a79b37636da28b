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

/// The tag ending of an image that never gets ready (see [`Health`]).
pub const NEVER_READY: &str = "never-ready";
/// The tag ending of an image that gets ready and then crashes (see [`Health`]).
pub const CRASH_AFTER_READY: &str = "crash-after-ready";

/// How a simulated app behaves, decided by its container images so that a test can deploy a
/// known bad version: an image whose tag ends in [`NEVER_READY`] runs but never gets ready, one
/// whose tag ends in [`CRASH_AFTER_READY`] gets ready and a ready delay later crashes for good;
/// any other image is good. Ordered from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Health {
    Good,
    CrashAfterReady,
    NeverReady,
}

/// How far the simulated rollout of a spec has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Just written.
    Starting,
    /// The ready delay passed: ready unless an image is [`NEVER_READY`].
    Up,
    /// A [`CRASH_AFTER_READY`] app crashed, a further ready delay later; the number is the
    /// restart count its Pods' crashing containers show (it grows as they crash again).
    Crashed(u32),
}

/// The health an image reference promises: its tag decides, the part after the last `:` that
/// follows the last `/` (`registry:5000/app` has no tag), a digest (`@sha256:...`) ignored.
fn image_health(image: &str) -> Health {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let tag = match name.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => tag,
        _ => "",
    };
    if tag.ends_with(NEVER_READY) {
        Health::NeverReady
    } else if tag.ends_with(CRASH_AFTER_READY) {
        Health::CrashAfterReady
    } else {
        Health::Good
    }
}

fn container_health(c: &Value) -> Health {
    c.get("image")
        .and_then(Value::as_str)
        .map_or(Health::Good, image_health)
}

/// The containers of a pod spec, `field` being `containers` or `initContainers`.
fn containers<'a>(spec: Option<&'a Value>, field: &str) -> impl Iterator<Item = &'a Value> {
    spec.and_then(|s| s.get(field))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The health of a simulated object: the worst of its containers' and init containers' (a
/// Pod's own, a workload's pod template's). A workload scaled to zero runs nothing, so it is
/// good whatever its images.
pub(crate) fn health(rt: &ResourceType, obj: &Value) -> Health {
    let spec = if rt.group.is_empty() && rt.plural == "pods" {
        obj.get("spec")
    } else {
        obj.pointer("/spec/template/spec")
    };
    if spec.is_none() || replicas(obj) == 0 {
        return Health::Good;
    }
    containers(spec, "containers")
        .chain(containers(spec, "initContainers"))
        .map(container_health)
        .max()
        .unwrap_or(Health::Good)
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
    let stage = if ready { Stage::Up } else { Stage::Starting };
    status_at(rt, obj, stage, run_time)
}

/// The status a simulated object shows at `stage` of its rollout, given the [`Health`] of its
/// images. A good app is ready at [`Stage::Up`] (as before images mattered); a bad one shows
/// what a real cluster reports for a stuck rollout or a crashed app.
pub(crate) fn status_at(
    rt: &ResourceType,
    obj: &Value,
    stage: Stage,
    run_time: Duration,
) -> Option<Value> {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let health = health(rt, obj);
    // The rollout completed (a crash later does not undo that); the replicas are ready now.
    let rolled_out = stage != Stage::Starting && health != Health::NeverReady;
    let ready = rolled_out && !matches!(stage, Stage::Crashed(_));
    let n = replicas(obj);
    let up = if ready { n } else { 0 };
    let st = match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => {
            let mut s = json!({
                "observedGeneration": generation, "replicas": n, "updatedReplicas": n,
                "conditions": [
                    condition("Available", ready, if ready { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                        if ready { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." }),
                    condition("Progressing", true, if rolled_out { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
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
        ("batch", "jobs") => return Some(job_status(obj, stage, health, run_time)),
        ("", "pods") if health != Health::Good => bad_pod_status(obj, stage, health),
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
/// `DeadlineExceeded` (at once for a deadline of 0). With a bad image it never completes: a
/// [`NEVER_READY`] Pod runs on, a [`CRASH_AFTER_READY`] one runs (ready) until it crashes, and
/// the Job then fails as once its retries are spent (`BackoffLimitExceeded`).
fn job_status(obj: &Value, stage: Stage, health: Health, run_time: Duration) -> Value {
    let ready = stage != Stage::Starting;
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
    if matches!(stage, Stage::Crashed(_)) {
        // Every try failed: the first Pod and the `backoffLimit` (default 6) retries.
        let tries = obj
            .pointer("/spec/backoffLimit")
            .and_then(Value::as_i64)
            .unwrap_or(6)
            + 1;
        let why = "Job has reached the specified backoff limit";
        return json!({"startTime": now, "ready": 0, "terminating": 0, "failed": tries,
                      "uncountedTerminatedPods": {},
                      "conditions": [condition("FailureTarget", true, "BackoffLimitExceeded", why),
                                     condition("Failed", true, "BackoffLimitExceeded", why)]});
    }
    if ready && health == Health::Good {
        json!({"startTime": now, "completionTime": now, "succeeded": completions, "ready": 0,
                   "conditions": [condition("SuccessCriteriaMet", true, "CompletionsReached", "Reached expected number of succeeded pods"),
                                  condition("Complete", true, "CompletionsReached", "Reached expected number of succeeded pods")]})
    } else {
        let running = i64::from(ready && health == Health::CrashAfterReady);
        json!({"startTime": now, "active": 1, "ready": running})
    }
}

/// A Pod with a bad image, after the ready delay: a [`NEVER_READY`] container runs with its
/// readiness probe failing; a [`CRASH_AFTER_READY`] one runs ready, then crashes and is
/// restarted in `CrashLoopBackOff` (or, under `restartPolicy: Never`, stays terminated and the
/// Pod fails). Containers with a good image run ready beside them. No init container statuses
/// are simulated: when only an init container's image is bad, the app containers show its
/// behaviour.
fn bad_pod_status(obj: &Value, stage: Stage, health: Health) -> Value {
    let spec = obj.get("spec");
    let app_bad = containers(spec, "containers").any(|c| container_health(c) != Health::Good);
    let never_restart = spec
        .and_then(|s| s.get("restartPolicy"))
        .and_then(Value::as_str)
        == Some("Never");
    let now = now_rfc3339();
    let terminated = json!({"terminated": {"exitCode": 1, "reason": "Error",
                                           "startedAt": now, "finishedAt": now}});
    let mut unready = Vec::new();
    let statuses: Vec<Value> = containers(spec, "containers")
        .map(|c| {
            let container = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let h = if app_bad { container_health(c) } else { health };
            let (ready, started, state) = match (stage, h) {
                (Stage::Starting, _) => (
                    false,
                    false,
                    json!({"waiting": {"reason": "ContainerCreating"}}),
                ),
                (Stage::Up, Health::NeverReady) => {
                    (false, true, json!({"running": {"startedAt": now}}))
                }
                (Stage::Crashed(_), Health::CrashAfterReady) if never_restart => {
                    (false, false, terminated.clone())
                }
                (Stage::Crashed(restarts), Health::CrashAfterReady) => {
                    // The kubelet's back-off: 10 s, doubling up to five minutes.
                    let back_off = (10u64 << restarts.saturating_sub(1).min(5)).min(300);
                    let message = format!(
                        "back-off {back_off}s restarting failed container={container} pod={}_{}({})",
                        name(obj),
                        text(obj, "/metadata/namespace"),
                        text(obj, "/metadata/uid"),
                    );
                    let waiting = json!({"waiting": {"reason": "CrashLoopBackOff", "message": message}});
                    (false, false, waiting)
                }
                _ => (true, true, json!({"running": {"startedAt": now}})),
            };
            if !ready {
                unready.push(container.to_owned());
            }
            let mut st = json!({"name": container, "image": c.get("image"), "ready": ready,
                                "started": started, "restartCount": 0, "state": state});
            if let Stage::Crashed(restarts) = stage
                && h == Health::CrashAfterReady
                && !never_restart
            {
                st["restartCount"] = json!(restarts);
                st["lastState"] = terminated.clone();
            }
            st
        })
        .collect();
    let failed = !statuses.is_empty()
        && statuses
            .iter()
            .all(|s| s.pointer("/state/terminated").is_some());
    let (phase, ready) = match stage {
        Stage::Starting => ("Pending", condition("Ready", false, "", "")),
        _ if failed => ("Failed", condition("Ready", false, "PodFailed", "")),
        _ if unready.is_empty() => ("Running", condition("Ready", true, "", "")),
        _ => {
            let why = format!("containers with unready status: [{}]", unready.join(" "));
            let ready = condition("Ready", false, "ContainersNotReady", &why);
            ("Running", ready)
        }
    };
    json!({"phase": phase, "podIP": "10.244.0.10", "hostIP": "10.0.0.1",
           "startTime": now, "containerStatuses": statuses,
           "conditions": [condition("PodScheduled", true, "", ""), ready]})
}

fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
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
    fn image_tags_decide_health() {
        for (image, health) in [
            ("nginx", Health::Good),
            ("nginx:1.25", Health::Good),
            ("nginx:1.25-never-ready", Health::NeverReady),
            ("registry:5000/team/app:never-ready", Health::NeverReady),
            (
                "app:2-crash-after-ready@sha256:0123",
                Health::CrashAfterReady,
            ),
            // Only the tag counts: not a repository or registry named so, nor a digest.
            ("registry:5000/never-ready", Health::Good),
            ("never-ready/app:1", Health::Good),
            ("app@sha256:never-ready", Health::Good),
            ("nginx:never-ready-1", Health::Good),
        ] {
            assert_eq!(image_health(image), health, "{image}");
        }
    }

    fn deploy(replicas: i64, images: &[&str], init: &[&str]) -> Value {
        let list = |images: &[&str]| -> Vec<Value> {
            images
                .iter()
                .enumerate()
                .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
                .collect()
        };
        json!({"metadata": {"name": "web", "generation": 1},
               "spec": {"replicas": replicas, "template": {"spec": {
                   "containers": list(images), "initContainers": list(init)}}}})
    }

    #[test]
    fn the_worst_image_of_a_running_workload_decides() {
        let d = rt("deployments");
        assert_eq!(health(d, &deploy(2, &["a:1", "b:2"], &[])), Health::Good);
        assert_eq!(
            health(
                d,
                &deploy(2, &["a:1", "b:crash-after-ready"], &["i:never-ready"])
            ),
            Health::NeverReady
        );
        assert_eq!(
            health(d, &deploy(2, &["a:1"], &["i:crash-after-ready"])),
            Health::CrashAfterReady
        );
        assert_eq!(health(d, &deploy(0, &["a:never-ready"], &[])), Health::Good);
        let pod = json!({"spec": {"containers": [{"name": "c", "image": "a:never-ready"}]}});
        assert_eq!(health(rt("pods"), &pod), Health::NeverReady);
        assert_eq!(health(rt("services"), &pod), Health::Good);
    }

    #[test]
    fn bad_deployments_stay_or_turn_unavailable() {
        let d = rt("deployments");
        let cond = |s: &Value, i: usize| {
            (
                s["conditions"][i]["status"].clone(),
                s["conditions"][i]["reason"].clone(),
            )
        };
        let never = deploy(3, &["nginx:1.25-never-ready"], &[]);
        for stage in [Stage::Starting, Stage::Up] {
            let s = status_at(d, &never, stage, RUN).unwrap();
            assert_eq!(s["updatedReplicas"], 3);
            assert_eq!(s["unavailableReplicas"], 3);
            assert!(s.get("availableReplicas").is_none() && s.get("readyReplicas").is_none());
            assert_eq!(
                cond(&s, 0),
                (json!("False"), json!("MinimumReplicasUnavailable"))
            );
            assert_eq!(cond(&s, 1), (json!("True"), json!("ReplicaSetUpdated")));
        }
        let crash = deploy(3, &["app:2-crash-after-ready"], &[]);
        let s = status_at(d, &crash, Stage::Up, RUN).unwrap();
        assert_eq!(s["availableReplicas"], 3);
        assert_eq!(
            cond(&s, 0),
            (json!("True"), json!("MinimumReplicasAvailable"))
        );
        let s = status_at(d, &crash, Stage::Crashed(1), RUN).unwrap();
        assert!(s.get("availableReplicas").is_none() && s.get("readyReplicas").is_none());
        assert_eq!(
            cond(&s, 0),
            (json!("False"), json!("MinimumReplicasUnavailable"))
        );
        assert_eq!(
            cond(&s, 1),
            (json!("True"), json!("NewReplicaSetAvailable"))
        );
        // The other workloads count no ready replicas.
        let s = status_at(rt("statefulsets"), &never, Stage::Up, RUN).unwrap();
        assert_eq!(
            (s["readyReplicas"].clone(), s["updatedReplicas"].clone()),
            (json!(0), json!(3))
        );
        let s = status_at(rt("daemonsets"), &crash, Stage::Crashed(1), RUN).unwrap();
        assert_eq!(s["numberReady"], 0);
        let s = status_at(rt("replicasets"), &crash, Stage::Up, RUN).unwrap();
        assert_eq!(s["readyReplicas"], 3);
    }

    #[test]
    fn bad_pods_run_unready_or_crash_loop() {
        let p = rt("pods");
        let pod = |images: &[&str], policy: &str| {
            let mut p = deploy(1, images, &[]);
            let spec = p["spec"]["template"]["spec"].take();
            p["spec"] = spec;
            p["spec"]["restartPolicy"] = json!(policy);
            p
        };
        let never = pod(&["side:1", "app:never-ready"], "Always");
        let s = status_at(p, &never, Stage::Starting, RUN).unwrap();
        assert_eq!(s["phase"], "Pending");
        let s = status_at(p, &never, Stage::Up, RUN).unwrap();
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["containerStatuses"][0]["ready"], true);
        assert_eq!(s["containerStatuses"][1]["ready"], false);
        assert!(s["containerStatuses"][1]["state"]["running"].is_object());
        assert_eq!(s["conditions"][1]["status"], "False");
        assert_eq!(s["conditions"][1]["reason"], "ContainersNotReady");
        assert_eq!(
            s["conditions"][1]["message"],
            "containers with unready status: [c1]"
        );

        let crash = pod(&["app:crash-after-ready"], "Always");
        let s = status_at(p, &crash, Stage::Up, RUN).unwrap();
        assert_eq!(s["conditions"][1]["status"], "True");
        let s = status_at(p, &crash, Stage::Crashed(4), RUN).unwrap();
        let c = &s["containerStatuses"][0];
        assert_eq!(s["phase"], "Running");
        assert_eq!(c["restartCount"], 4);
        assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert!(
            c["state"]["waiting"]["message"]
                .as_str()
                .unwrap()
                .starts_with("back-off 80s")
        );
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(s["conditions"][1]["status"], "False");
        // Without restarts it stays terminated and the Pod fails.
        let once = pod(&["app:crash-after-ready"], "Never");
        let s = status_at(p, &once, Stage::Crashed(1), RUN).unwrap();
        assert_eq!(s["phase"], "Failed");
        assert_eq!(s["containerStatuses"][0]["restartCount"], 0);
        assert_eq!(
            s["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Error"
        );
        // An init container's bad image shows on the app containers.
        let mut init = pod(&["app:1"], "Always");
        init["spec"]["initContainers"] = json!([{"name": "i", "image": "init:never-ready"}]);
        let s = status_at(p, &init, Stage::Up, RUN).unwrap();
        assert_eq!(s["containerStatuses"][0]["ready"], false);
    }

    #[test]
    fn bad_jobs_never_complete() {
        let j = rt("jobs");
        let job = |image: &str| {
            let mut d = deploy(1, &[image], &[]);
            d["spec"].as_object_mut().unwrap().remove("replicas");
            d
        };
        let s = status_at(j, &job("task:never-ready"), Stage::Up, RUN).unwrap();
        assert_eq!(
            (s["active"].clone(), s["ready"].clone()),
            (json!(1), json!(0))
        );
        assert!(s.get("conditions").is_none());
        let crash = job("task:crash-after-ready");
        let s = status_at(j, &crash, Stage::Up, RUN).unwrap();
        assert_eq!(
            (s["active"].clone(), s["ready"].clone()),
            (json!(1), json!(1))
        );
        let s = status_at(j, &crash, Stage::Crashed(1), RUN).unwrap();
        assert_eq!(s["failed"], 7);
        assert_eq!(s["conditions"][1]["type"], "Failed");
        assert_eq!(s["conditions"][1]["reason"], "BackoffLimitExceeded");
    }

    #[test]
    fn jobs_complete() {
        let s = status(rt("jobs"), &json!({"spec": {"completions": 2}}), true, RUN).unwrap();
        assert_eq!(s["succeeded"], 2);
        assert_eq!(s["conditions"][1]["type"], "Complete");
        assert!(status(rt("configmaps"), &json!({}), true, RUN).is_none());
    }
}
