//! The table of resource types a simulated cluster serves: the built-in types of a standard
//! cluster plus, per cluster, the types its CustomResourceDefinitions add.

use std::sync::{Arc, LazyLock};

/// One served resource type (one group, version and plural).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    /// API group, empty for the core group.
    pub group: String,
    /// API version within the group (`v1`, `v2`, ...).
    pub version: String,
    /// Plural resource name used in URLs (`deployments`).
    pub plural: String,
    /// Singular name (`deployment`).
    pub singular: String,
    /// Kind of the objects (`Deployment`).
    pub kind: String,
    /// Whether the objects live in a namespace.
    pub namespaced: bool,
    /// Short names (`deploy`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether the type has a `status` subresource (status is then only written through it).
    pub status: bool,
    /// Whether a CustomResourceDefinition defines the type.
    pub custom: bool,
    /// Where the `scale` subresource finds replicas and selector, if the type has one.
    pub scale: Option<ScalePaths>,
}

/// The fields behind a type's `scale` subresource, as JSON paths (`.spec.replicas`), the form
/// of a CRD's `subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `spec.replicas` of the Scale.
    pub spec_replicas: String,
    /// `status.replicas` of the Scale.
    pub status_replicas: String,
    /// `status.selector` of the Scale: a label selector object (built-in types) or string.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of the built-in scalable workloads.
    fn builtin() -> Self {
        Self {
            spec_replicas: ".spec.replicas".to_owned(),
            status_replicas: ".status.replicas".to_owned(),
            label_selector: Some(".spec.selector".to_owned()),
        }
    }
}

impl ResourceType {
    /// `group/version`, or just `version` for the core group.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The `plural.group` name used in messages (`deployments.apps`, `configmaps`).
    #[must_use]
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether the server tracks `metadata.generation` for this type (types with a spec).
    #[must_use]
    pub fn has_generation(&self) -> bool {
        self.status || self.custom || self.plural == "networkpolicies"
    }
}

/// The verbs every stored type supports.
pub(crate) const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// (group, version, plural, kind, namespaced, short names, has status, in category "all")
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
    bool,
);

const BUILTIN: &[Row] = &[
    (
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        true,
        &["cm"],
        false,
        false,
    ),
    (
        "",
        "v1",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        false,
        false,
    ),
    ("", "v1", "events", "Event", true, &["ev"], false, false),
    (
        "",
        "v1",
        "limitranges",
        "LimitRange",
        true,
        &["limits"],
        false,
        false,
    ),
    (
        "",
        "v1",
        "namespaces",
        "Namespace",
        false,
        &["ns"],
        true,
        false,
    ),
    ("", "v1", "nodes", "Node", false, &["no"], true, false),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        true,
        false,
    ),
    (
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        &["pv"],
        true,
        false,
    ),
    ("", "v1", "pods", "Pod", true, &["po"], true, true),
    (
        "",
        "v1",
        "podtemplates",
        "PodTemplate",
        true,
        &[],
        false,
        false,
    ),
    (
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        true,
        &["rc"],
        true,
        true,
    ),
    (
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        true,
        &["quota"],
        true,
        false,
    ),
    ("", "v1", "secrets", "Secret", true, &[], false, false),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        false,
        false,
    ),
    ("", "v1", "services", "Service", true, &["svc"], true, true),
    (
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        true,
        &[],
        false,
        false,
    ),
    (
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        true,
        &["ds"],
        true,
        true,
    ),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        true,
        true,
    ),
    (
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        true,
        true,
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        true,
        true,
    ),
    (
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        true,
        &["cj"],
        true,
        true,
    ),
    ("batch", "v1", "jobs", "Job", true, &[], true, true),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        true,
        true,
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        true,
        false,
    ),
    // Served by every cluster up to Kubernetes 1.24 and still used by charts of that era.
    (
        "policy",
        "v1beta1",
        "podsecuritypolicies",
        "PodSecurityPolicy",
        false,
        &["psp"],
        false,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        false,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        &[],
        false,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        &[],
        false,
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        &[],
        false,
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
        &[],
        false,
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        true,
        &["ing"],
        true,
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        &["netpol"],
        false,
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
        &[],
        false,
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        &[],
        false,
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        false,
        &[],
        true,
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        false,
        &[],
        false,
        false,
    ),
    (
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        false,
        &["csr"],
        true,
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
        false,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        &[],
        false,
        false,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false,
        &["pc"],
        false,
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "csidrivers",
        "CSIDriver",
        false,
        &[],
        false,
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "csinodes",
        "CSINode",
        false,
        &[],
        false,
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
        true,
        &[],
        false,
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        &["sc"],
        false,
        false,
    ),
    (
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        false,
        &[],
        true,
        false,
    ),
    (
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
        &[],
        false,
        false,
    ),
    (
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        &["ev"],
        false,
        false,
    ),
    (
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        "RuntimeClass",
        false,
        &[],
        false,
        false,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "flowschemas",
        "FlowSchema",
        false,
        &[],
        true,
        false,
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        false,
        &[],
        true,
        false,
    ),
];

/// The built-in types, built once per process and shared by every cluster.
pub(crate) static BUILTIN_TYPES: LazyLock<Vec<Arc<ResourceType>>> = LazyLock::new(|| {
    BUILTIN
        .iter()
        .map(
            |&(group, version, plural, kind, namespaced, short, status, all)| {
                Arc::new(ResourceType {
                    group: group.to_owned(),
                    version: version.to_owned(),
                    plural: plural.to_owned(),
                    singular: kind.to_ascii_lowercase(),
                    kind: kind.to_owned(),
                    namespaced,
                    short_names: short.iter().map(|s| (*s).to_owned()).collect(),
                    categories: if all {
                        vec!["all".to_owned()]
                    } else {
                        Vec::new()
                    },
                    status,
                    custom: false,
                    scale: matches!(
                        (group, plural),
                        ("apps", "deployments" | "replicasets" | "statefulsets")
                            | ("", "replicationcontrollers")
                    )
                    .then(ScalePaths::builtin),
                })
            },
        )
        .collect()
});

/// The key field that identifies the items of a well-known list of a built-in type, for strategic
/// merge patch and server-side apply. `None` means the list is atomic (replaced as a whole).
/// `first` is the list's first item, used to tell container ports from service ports.
pub(crate) fn list_merge_key(
    field: &str,
    first: Option<&serde_json::Value>,
) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "volumeClaimTemplates" => Some("name"),
        "volumeMounts" | "volumeDevices" => Some("mountPath"),
        "hostAliases" => Some("ip"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "ports" => match first {
            Some(item) if item.get("containerPort").is_some() => Some("containerPort"),
            _ => Some("port"),
        },
        _ => None,
    }
}

/// Lists of scalars that merge as sets rather than being replaced.
pub(crate) fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// How a list merges in strategic merge patch and server-side apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// Replaced as a whole.
    Atomic,
    /// Scalars merged as a set.
    Set,
    /// Items merged by the values of these keys.
    Map(Vec<String>),
}

/// Where list types come from at one point of an object: the well-known lists of built-in types
/// (by field name), or a CRD's structural schema (`x-kubernetes-list-type` and
/// `x-kubernetes-list-map-keys`), where lists the schema does not describe are atomic.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lists<'a> {
    Builtin,
    Schema {
        /// The schema of this point of the object, if the CRD describes it.
        schema: Option<&'a serde_json::Value>,
        /// Whether this is the object itself, whose `metadata` is the built-in ObjectMeta.
        root: bool,
    },
}

impl<'a> Lists<'a> {
    /// The rules of a custom resource whose CRD version has this `openAPIV3Schema`.
    pub(crate) fn custom(schema: Option<&'a serde_json::Value>) -> Self {
        Self::Schema { schema, root: true }
    }

    /// The rules of the value of field `key` of this object.
    #[must_use]
    pub(crate) fn field(self, key: &str) -> Self {
        match self {
            Self::Builtin => Self::Builtin,
            Self::Schema { root: true, .. } if key == "metadata" => Self::Builtin,
            Self::Schema { schema, .. } => Self::Schema {
                schema: schema.and_then(|s| {
                    s.get("properties")
                        .and_then(|p| p.get(key))
                        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
                }),
                root: false,
            },
        }
    }

    /// The rules of the items of this list.
    #[must_use]
    pub(crate) fn items(self) -> Self {
        match self {
            Self::Builtin => Self::Builtin,
            Self::Schema { schema, .. } => Self::Schema {
                schema: schema.and_then(|s| s.get("items")),
                root: false,
            },
        }
    }

    /// The type of this list, the value of field `key`; `first` is one of its items.
    pub(crate) fn list_type(self, key: &str, first: Option<&serde_json::Value>) -> ListType {
        match self {
            Self::Builtin => match list_merge_key(key, first) {
                Some(k) => ListType::Map(vec![k.to_owned()]),
                None if is_set_list(key) => ListType::Set,
                None => ListType::Atomic,
            },
            Self::Schema { schema, .. } => {
                let kind = schema
                    .and_then(|s| s.get("x-kubernetes-list-type"))
                    .and_then(serde_json::Value::as_str);
                match kind {
                    Some("set") => ListType::Set,
                    Some("map") => {
                        let keys: Vec<String> = schema
                            .and_then(|s| s.get("x-kubernetes-list-map-keys"))
                            .and_then(serde_json::Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|k| k.as_str().map(str::to_owned))
                            .collect();
                        if keys.is_empty() {
                            ListType::Atomic
                        } else {
                            ListType::Map(keys)
                        }
                    }
                    _ => ListType::Atomic,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_is_consistent() {
        let types = &*BUILTIN_TYPES;
        assert!(types.len() > 40);
        let deploy = types.iter().find(|t| t.plural == "deployments").unwrap();
        assert_eq!(deploy.api_version(), "apps/v1");
        assert_eq!(deploy.qualified(), "deployments.apps");
        assert_eq!(deploy.singular, "deployment");
    }

    #[test]
    fn merge_keys() {
        let port = serde_json::json!({"containerPort": 80});
        assert_eq!(list_merge_key("ports", Some(&port)), Some("containerPort"));
        assert_eq!(list_merge_key("ports", None), Some("port"));
        assert_eq!(list_merge_key("args", None), None);
    }
}
