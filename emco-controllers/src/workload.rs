//! Where a workload keeps the metadata of its pods: the controllers that label or annotate pods
//! (ovnaction, sfc, sfcclient) reach them through the same table of kinds as client-go's typed
//! objects do in EMCO's Go.

use serde_json::{Map, Value};

/// Where a kind keeps the metadata of its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodMeta {
    /// At this JSON pointer (a built-in workload kind the Go controllers know).
    Typed(&'static str),
    /// A custom resource: client-go's scheme cannot decode it; ovnaction then looks for
    /// `spec.template`, sfc refuses it.
    Custom,
    /// Nowhere: a built-in kind without pods of its own.
    None,
}

/// The API groups of Kubernetes' own kinds (those client-go's scheme decodes).
const BUILTIN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "extensions",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
];

/// The pod metadata of an object of `api_version` and `kind`. As the Go controllers' type
/// switches: CronJob only in `batch/v1beta1`, the apps kinds only in `apps/v1`.
pub(crate) fn pod_meta(api_version: &str, kind: &str) -> PodMeta {
    match (api_version, kind) {
        ("batch/v1", "Job")
        | ("apps/v1", "DaemonSet" | "Deployment" | "ReplicaSet" | "StatefulSet")
        | ("v1", "ReplicationController") => PodMeta::Typed("/spec/template/metadata"),
        ("batch/v1beta1", "CronJob") => PodMeta::Typed("/spec/jobTemplate/spec/template/metadata"),
        ("v1", "Pod") => PodMeta::Typed("/metadata"),
        _ => {
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            if BUILTIN_GROUPS.contains(&group) {
                PodMeta::None
            } else {
                PodMeta::Custom
            }
        }
    }
}

/// An object's `apiVersion` and `kind`.
pub(crate) fn type_of(object: &Value) -> (String, String) {
    let text = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    (text("apiVersion"), text("kind"))
}

/// The JSON object at `pointer` in `object`, created (over nulls too) when absent; `None` when
/// something on the way is not an object.
pub(crate) fn object_at<'a>(
    object: &'a mut Value,
    pointer: &str,
) -> Option<&'a mut Map<String, Value>> {
    let mut at = object;
    for segment in pointer.trim_start_matches('/').split('/') {
        let map = at.as_object_mut()?;
        let next = map
            .entry(segment.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if next.is_null() {
            *next = Value::Object(Map::new());
        }
        at = next;
    }
    at.as_object_mut()
}

/// Sets `labels` on the pods of a built-in workload (sfc's `addLabelToPodTemplates`,
/// sfcclient's `AddLabelsToPodTemplates`): whether it is a kind with pods. A custom resource is
/// `Err(())`: the Go controllers cannot decode it.
pub(crate) fn label_pods<'a>(
    object: &mut Value,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<bool, ()> {
    let (api_version, kind) = type_of(object);
    match pod_meta(&api_version, &kind) {
        PodMeta::Custom => Err(()),
        PodMeta::None => Ok(false),
        PodMeta::Typed(pointer) => {
            let Some(map) = object_at(object, &format!("{pointer}/labels")) else {
                return Ok(false);
            };
            for (k, v) in labels {
                map.insert(k.to_owned(), Value::String(v.to_owned()));
            }
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn pods_are_labelled_where_each_kind_keeps_them() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "spec": {"template": {"metadata": {"labels": {"app": "slb"}}}}});
        assert_eq!(label_pods(&mut d, [("sfc", "head")]), Ok(true));
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"],
            json!({"app": "slb", "sfc": "head"})
        );
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(label_pods(&mut pod, [("a", "b")]), Ok(true));
        assert_eq!(pod["metadata"]["labels"], json!({"a": "b"}));
        let mut cron = json!({"apiVersion": "batch/v1beta1", "kind": "CronJob",
            "spec": {"jobTemplate": {"spec": {"template": null}}}});
        assert_eq!(label_pods(&mut cron, [("a", "b")]), Ok(true));
        assert_eq!(
            cron.pointer("/spec/jobTemplate/spec/template/metadata/labels"),
            Some(&json!({"a": "b"}))
        );
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "spec": {}});
        assert_eq!(label_pods(&mut svc, [("a", "b")]), Ok(false));
        assert_eq!(
            svc,
            json!({"apiVersion": "v1", "kind": "Service", "spec": {}})
        );
        let mut vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine"});
        assert_eq!(label_pods(&mut vm, [("a", "b")]), Err(()));
    }
}
