//! The workload controllers, when [`crate::FleetConfig::controllers`] is on: Deployments own
//! ReplicaSets (one per pod template, named with its `pod-template-hash`), and ReplicaSets,
//! StatefulSets, DaemonSets and Jobs own Pods, as kube-controller-manager makes them (owner
//! references with `controller: true`, labels from the template).
//!
//! To keep a big fleet cheap a workload gets at most [`MAX_PODS`] Pods whatever its replica
//! count (its status still reports the replicas it asked for), and a DaemonSet one Pod (a
//! single node). Controllers run on the write that changes a workload's spec, under the store
//! lock; the ready delay then brings the Pods and their owner up together. Deleting an owner
//! collects the children through the ordinary garbage collection of owner references.
//!
//! kubesim folds kube-controller-manager into its API server: the controllers run on the API's
//! write path and write their children back through it, hence a module of [`crate::api`].

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{create_child, refers_to, remove_child, update_child};
use crate::cluster::Cluster;
use crate::resources::ResourceType;
use crate::store::{Key, Store};
use crate::util::random_suffix;

/// The most Pods one workload gets.
pub(crate) const MAX_PODS: i64 = 3;

const PODS: &str = "/pods";
const REPLICA_SETS: &str = "apps/replicasets";

/// Brings the children of a workload whose spec was just written in line with it.
pub(crate) fn reconcile(cluster: &Arc<Cluster>, store: &mut Store, rt: &ResourceType, obj: &Value) {
    if !cluster.controllers || obj.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments") => deployment(cluster, store, obj),
        ("apps", "replicasets") => pods(cluster, store, obj, replicas(obj), false, &[]),
        ("apps", "statefulsets") => {
            let revision = format!("{}-{}", str_at(obj, "/metadata/name"), template_hash(obj));
            let labels = [("controller-revision-hash", revision)];
            pods(cluster, store, obj, replicas(obj), true, &labels);
        }
        ("apps", "daemonsets") => pods(cluster, store, obj, 1, false, &[]),
        ("batch", "jobs") => {
            let parallelism = int_at(obj, "/spec/parallelism").unwrap_or(1);
            let completions = int_at(obj, "/spec/completions").unwrap_or(1);
            let name = str_at(obj, "/metadata/name").to_owned();
            let uid = str_at(obj, "/metadata/uid").to_owned();
            let labels = [
                ("batch.kubernetes.io/controller-uid", uid.clone()),
                ("batch.kubernetes.io/job-name", name.clone()),
                ("controller-uid", uid),
                ("job-name", name),
            ];
            pods(
                cluster,
                store,
                obj,
                parallelism.min(completions),
                false,
                &labels,
            );
        }
        _ => {}
    }
}

fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn int_at(obj: &Value, ptr: &str) -> Option<i64> {
    obj.pointer(ptr).and_then(Value::as_i64)
}

fn replicas(obj: &Value) -> i64 {
    int_at(obj, "/spec/replicas").unwrap_or(1)
}

/// The reference a child carries to its controller.
fn owner_reference(owner: &Value) -> Value {
    json!({
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": str_at(owner, "/metadata/name"),
        "uid": str_at(owner, "/metadata/uid"),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The children of type `tk` that `owner` controls.
fn owned(store: &Store, tk: &str, owner: &Value) -> Vec<(Key, Arc<Value>)> {
    let ns = str_at(owner, "/metadata/namespace");
    let uid = str_at(owner, "/metadata/uid");
    store
        .list(tk, Some(ns))
        .filter(|(_, o)| {
            refers_to(o, uid, |r| {
                r.get("controller").and_then(Value::as_bool) == Some(true)
            })
        })
        .map(|(k, o)| (k.clone(), o.clone()))
        .collect()
}

/// The pod template's hash as the Deployment controller spells it: FNV-1a (32 bits) of the
/// template, its decimal digits mapped to consonants and digits that form no words.
fn template_hash(obj: &Value) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let template = obj.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut h: u32 = 0x811c_9dc5;
    for b in template.to_string().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

/// The template's labels plus `extra`.
fn labels_with(template: &Value, extra: &[(&str, String)]) -> Map<String, Value> {
    let mut labels = template
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in extra {
        labels.insert((*k).to_owned(), json!(v));
    }
    labels
}

/// A Deployment: the ReplicaSet of its current template gets its replicas, the others none.
fn deployment(cluster: &Arc<Cluster>, store: &mut Store, d: &Value) {
    let hash = template_hash(d);
    let name = format!("{}-{hash}", str_at(d, "/metadata/name"));
    let ns = str_at(d, "/metadata/namespace").to_owned();
    let n = replicas(d);
    let children = owned(store, REPLICA_SETS, d);
    // Each new template's ReplicaSet is the next revision.
    let revision = 1 + children
        .iter()
        .filter_map(|(_, rs)| {
            rs.pointer("/metadata/annotations/deployment.kubernetes.io~1revision")
                .and_then(Value::as_str)
                .and_then(|r| r.parse::<u64>().ok())
        })
        .max()
        .unwrap_or(0);
    for (k, rs) in children {
        let want = if k.2 == name { n } else { 0 };
        if replicas(&rs) != want {
            let mut rs = (*rs).clone();
            rs["spec"]["replicas"] = json!(want);
            update_child(cluster, store, k, rs);
        }
    }
    let key: Key = (REPLICA_SETS.to_owned(), ns.clone(), name.clone());
    if store.get(&key).is_some() {
        return;
    }
    let extra = [("pod-template-hash", hash.clone())];
    let mut template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let labels = labels_with(&template, &extra);
    template["metadata"]["labels"] = Value::Object(labels.clone());
    let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let rs = json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": revision.to_string()},
            "ownerReferences": [owner_reference(d)],
        },
        "spec": {"replicas": n, "selector": selector, "template": template},
    });
    create_child(cluster, store, REPLICA_SETS, &ns, rs);
}

/// Pods of `owner` from its template: `want` of them (at most [`MAX_PODS`]), named
/// `<owner>-<ordinal>` if `ordinal` (StatefulSets), else `<owner>-<random>`.
fn pods(
    cluster: &Arc<Cluster>,
    store: &mut Store,
    owner: &Value,
    want: i64,
    ordinal: bool,
    extra: &[(&str, String)],
) {
    let want = usize::try_from(want.clamp(0, MAX_PODS)).unwrap_or_default();
    let owner_name = str_at(owner, "/metadata/name").to_owned();
    let ns = str_at(owner, "/metadata/namespace").to_owned();
    let mut existing = owned(store, PODS, owner);
    let mut names: Vec<String> = if ordinal {
        (0..want).map(|i| format!("{owner_name}-{i}")).collect()
    } else {
        existing
            .iter()
            .take(want)
            .map(|(k, _)| k.2.clone())
            .collect()
    };
    // Pods beyond the wanted ones go. Pods of an older template stay (a Deployment replaces
    // them through a new ReplicaSet; StatefulSet rolling updates are not simulated).
    existing.retain(|(k, _)| !names.contains(&k.2));
    for (k, _) in existing {
        remove_child(store, &k);
    }
    while !ordinal && names.len() < want {
        names.push(format!("{owner_name}-{}", random_suffix(5)));
    }
    let template = owner
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(json!({}));
    for name in names {
        let key: Key = (PODS.to_owned(), ns.clone(), name.clone());
        if store.get(&key).is_some() {
            continue;
        }
        let mut labels = labels_with(&template, extra);
        if ordinal {
            labels.insert("statefulset.kubernetes.io/pod-name".to_owned(), json!(name));
        }
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "ownerReferences": [owner_reference(owner)],
            },
            "spec": template.get("spec").cloned().unwrap_or(json!({})),
        });
        create_child(cluster, store, PODS, &ns, pod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hashes_are_stable_and_safe() {
        let a = json!({"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}});
        let b = json!({"spec": {"template": {"metadata": {"labels": {"app": "api"}}}}});
        assert_eq!(template_hash(&a), template_hash(&a));
        assert_ne!(template_hash(&a), template_hash(&b));
        assert!(
            template_hash(&a)
                .bytes()
                .all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c))
        );
    }
}
