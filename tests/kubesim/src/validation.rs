//! Unknown-field detection for built-in types (`fieldValidation=Strict|Warn|Ignore`).
//!
//! The real server decodes built-in objects into their Go types, so fields the type does not
//! have are reported (Strict: 400; Warn, the default: a `Warning` header) and dropped. Here the
//! top level and `metadata` of the common kinds, and the `spec` of the common workloads and
//! Services, are checked; deeper levels, other kinds and custom resources are taken as they are.

use serde_json::Value;

use crate::resources::ResourceType;

const METADATA: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The top-level fields of a kind besides apiVersion, kind and metadata.
fn top_level(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    const SPEC_STATUS: &[&str] = &["spec", "status"];
    Some(match (group, kind) {
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job" | "CronJob")
        | (
            "",
            "Service"
            | "Pod"
            | "PersistentVolumeClaim"
            | "PersistentVolume"
            | "Namespace"
            | "ResourceQuota"
            | "ReplicationController"
            | "Node",
        )
        | ("autoscaling", "HorizontalPodAutoscaler")
        | ("policy", "PodDisruptionBudget")
        | ("networking.k8s.io", "Ingress" | "NetworkPolicy")
        | ("certificates.k8s.io", "CertificateSigningRequest")
        | ("apiextensions.k8s.io", "CustomResourceDefinition") => SPEC_STATUS,
        ("", "LimitRange") | ("coordination.k8s.io", "Lease") => &["spec"],
        ("", "ConfigMap") => &["data", "binaryData", "immutable"],
        ("", "Secret") => &["data", "stringData", "type", "immutable"],
        ("", "ServiceAccount") => &[
            "secrets",
            "imagePullSecrets",
            "automountServiceAccountToken",
        ],
        ("", "Endpoints") => &["subsets"],
        ("rbac.authorization.k8s.io", "Role") => &["rules"],
        ("rbac.authorization.k8s.io", "ClusterRole") => &["rules", "aggregationRule"],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            &["subjects", "roleRef"]
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            &["value", "globalDefault", "description", "preemptionPolicy"]
        }
        ("storage.k8s.io", "StorageClass") => &[
            "provisioner",
            "parameters",
            "reclaimPolicy",
            "mountOptions",
            "allowVolumeExpansion",
            "volumeBindingMode",
            "allowedTopologies",
        ],
        _ => return None,
    })
}

/// The `spec` fields of the common workloads and Services.
fn spec(group: &str, kind: &str) -> Option<&'static [&'static str]> {
    Some(match (group, kind) {
        ("apps", "Deployment") => &[
            "replicas",
            "selector",
            "template",
            "strategy",
            "minReadySeconds",
            "revisionHistoryLimit",
            "paused",
            "progressDeadlineSeconds",
        ],
        ("apps", "ReplicaSet") => &["replicas", "minReadySeconds", "selector", "template"],
        ("apps", "StatefulSet") => &[
            "replicas",
            "selector",
            "template",
            "volumeClaimTemplates",
            "serviceName",
            "podManagementPolicy",
            "updateStrategy",
            "revisionHistoryLimit",
            "minReadySeconds",
            "persistentVolumeClaimRetentionPolicy",
            "ordinals",
        ],
        ("apps", "DaemonSet") => &[
            "selector",
            "template",
            "updateStrategy",
            "minReadySeconds",
            "revisionHistoryLimit",
        ],
        ("batch", "Job") => &[
            "parallelism",
            "completions",
            "activeDeadlineSeconds",
            "podFailurePolicy",
            "successPolicy",
            "backoffLimit",
            "backoffLimitPerIndex",
            "maxFailedIndexes",
            "selector",
            "manualSelector",
            "template",
            "ttlSecondsAfterFinished",
            "completionMode",
            "suspend",
            "podReplacementPolicy",
            "managedBy",
        ],
        ("batch", "CronJob") => &[
            "schedule",
            "timeZone",
            "startingDeadlineSeconds",
            "concurrencyPolicy",
            "suspend",
            "jobTemplate",
            "successfulJobsHistoryLimit",
            "failedJobsHistoryLimit",
        ],
        ("", "Service") => &[
            "ports",
            "selector",
            "clusterIP",
            "clusterIPs",
            "type",
            "externalIPs",
            "sessionAffinity",
            "loadBalancerIP",
            "loadBalancerSourceRanges",
            "externalName",
            "externalTrafficPolicy",
            "healthCheckNodePort",
            "publishNotReadyAddresses",
            "sessionAffinityConfig",
            "ipFamilies",
            "ipFamilyPolicy",
            "allocateLoadBalancerNodePorts",
            "loadBalancerClass",
            "internalTrafficPolicy",
            "trafficDistribution",
        ],
        _ => return None,
    })
}

/// The unknown fields of `obj`, as dotted paths (`spec.replica`, `metadata.lables`, `foo`).
pub(crate) fn unknown_fields(rt: &ResourceType, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if rt.custom {
        return out;
    }
    let Some(top) = top_level(&rt.group, &rt.kind) else {
        return out;
    };
    let check = |prefix: &str, v: Option<&Value>, known: &[&str], out: &mut Vec<String>| {
        for k in v
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|o| o.keys())
        {
            if !known.contains(&k.as_str()) {
                out.push(format!("{prefix}{k}"));
            }
        }
    };
    let mut all = vec!["apiVersion", "kind", "metadata"];
    all.extend_from_slice(top);
    check("", Some(obj), &all, &mut out);
    check("metadata.", obj.get("metadata"), METADATA, &mut out);
    if let Some(fields) = spec(&rt.group, &rt.kind) {
        check("spec.", obj.get("spec"), fields, &mut out);
    }
    out
}

/// Drops the fields [`unknown_fields`] found, as decoding into the Go type does.
pub(crate) fn prune(obj: &mut Value, paths: &[String]) {
    for path in paths {
        let (parent, field) = match path.rsplit_once('.') {
            Some((p, f)) => (obj.get_mut(p), f),
            None => (Some(&mut *obj), path.as_str()),
        };
        if let Some(o) = parent.and_then(Value::as_object_mut) {
            o.remove(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;
    use serde_json::json;

    fn rt(plural: &str) -> &'static ResourceType {
        BUILTIN_TYPES.iter().find(|t| t.plural == plural).unwrap()
    }

    #[test]
    fn finds_and_prunes_unknown_fields() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "lables": {}}, "spec": {"replica": 2, "replicas": 1},
            "extra": true, "status": {}});
        let unknown = unknown_fields(rt("deployments"), &d);
        assert_eq!(unknown, vec!["extra", "metadata.lables", "spec.replica"]);
        prune(&mut d, &unknown);
        assert!(unknown_fields(rt("deployments"), &d).is_empty());
        assert_eq!(d["spec"], json!({"replicas": 1}));
        let cm =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"x": "1"}});
        assert!(unknown_fields(rt("configmaps"), &cm).is_empty());
        assert_eq!(
            unknown_fields(rt("configmaps"), &json!({"spec": {}})),
            vec!["spec"]
        );
    }
}
