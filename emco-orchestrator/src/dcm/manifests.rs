//! The Kubernetes objects of a standard or privileged logical cloud on each of its clusters.
//!
//! | object | from |
//! |---|---|
//! | Namespace `spec.namespace` (labels `spec.labels`) | the logical cloud |
//! | Role + RoleBinding in the permission's namespace | a user permission with a namespace |
//! | ClusterRole + ClusterRoleBinding | a user permission without a namespace (cluster-wide) |
//! | ResourceQuota in the cloud's namespace | a cluster quota |
//! | CertificateSigningRequest (`kubernetes.io/kube-apiserver-client`, `client auth`) | the user's key for that cluster |
//!
//! Cluster-scoped names carry the project and the cloud so that two clouds on one cluster do
//! not share (and then delete each other's) objects. Every name is made a valid Kubernetes name.

use base64::Engine;
use emco_core::ResourceName;
use emco_core::model::{ClusterQuota, LogicalCloud, UserPermission};
use emco_core::{ContextId, Error, Result};
use serde_json::{Value, json};

/// One object, with the `name+Kind` that identifies it in the AppContext.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Manifest {
    /// `name+Kind`.
    pub(crate) key: String,
    /// The object as YAML text.
    pub(crate) yaml: String,
}

impl Manifest {
    pub(crate) fn new(object: &Value) -> Result<Self> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let yaml = emco_go::yaml::to_string(object)
            .map_err(|e| Error::internal("cannot write a manifest as YAML").with_source(e))?;
        Ok(Self {
            key: ResourceName::new(name, kind).to_string(),
            yaml,
        })
    }
}

/// `parts` joined by `-` as a Kubernetes object name: lowercase letters, digits, `-` and `.`,
/// alphanumeric at both ends, at most 253 characters.
pub(crate) fn object_name(parts: &[&str]) -> String {
    let joined = parts.join("-").to_ascii_lowercase();
    let mapped: String = joined
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut name: String = mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(253)
        .collect();
    while name.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        name.pop();
    }
    if name.is_empty() {
        "emco".to_owned()
    } else {
        name
    }
}

/// The name of a CertificateSigningRequest of logical cloud `cloud` of `project`, first made
/// for its context `ctx_id`.
pub(crate) fn csr_name(project: &str, cloud: &str, ctx_id: ContextId) -> String {
    object_name(&["emco", project, cloud, &ctx_id.to_string()])
}

/// Everything but the CSR, in apply order: the namespace first, then roles before their
/// bindings, then quotas. Terminate deletes in reverse order.
pub(crate) fn cloud_objects(
    project: &str,
    lc: &LogicalCloud,
    permissions: &[UserPermission],
    quotas: &[ClusterQuota],
) -> Result<Vec<Manifest>> {
    let ns = &lc.spec.namespace;
    let user = lc.user_name();
    let cloud = &lc.metadata.name;
    let subject = json!([{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]);
    let mut out = vec![Manifest::new(&json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ns, "labels": lc.spec.labels.clone().unwrap_or_default()},
    }))?];
    let mut roles = Vec::new();
    let mut bindings = Vec::new();
    for p in permissions {
        let rule = json!([{
            "apiGroups": p.spec.api_groups,
            "resources": p.spec.resources,
            "verbs": p.spec.verbs,
        }]);
        if p.is_cluster_wide() {
            let name = object_name(&[project, cloud, &p.metadata.name]);
            roles.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": rule,
            }));
            bindings.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            }));
        } else {
            let name = object_name(&[cloud, &p.metadata.name]);
            roles.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": name, "namespace": p.spec.namespace},
                "rules": rule,
            }));
            bindings.push(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": p.spec.namespace},
                "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            }));
        }
    }
    for object in roles.iter().chain(&bindings) {
        out.push(Manifest::new(object)?);
    }
    for q in quotas {
        out.push(Manifest::new(&json!({
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": object_name(&[cloud, &q.metadata.name]), "namespace": ns},
            "spec": {"hard": q.spec},
        }))?);
    }
    Ok(out)
}

/// The CertificateSigningRequest `name` for `csr_pem`: a client certificate signed by the
/// cluster's API server signer.
pub(crate) fn csr(name: &str, csr_pem: &str) -> Result<Manifest> {
    Manifest::new(&json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(csr_pem),
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use emco_core::Metadata;

    #[test]
    fn names_are_valid_kubernetes_names() {
        assert_eq!(object_name(&["P_1", "Cloud.A", "perm"]), "p-1-cloud.a-perm");
        assert_eq!(object_name(&["-x-", ""]), "x");
        assert_eq!(object_name(&["__"]), "emco");
        assert!(object_name(&["a"; 300]).len() <= 253);
    }

    #[test]
    fn permissions_become_roles_or_cluster_roles() {
        let mut lc = LogicalCloud {
            metadata: Metadata::named("lc1"),
            ..LogicalCloud::default()
        };
        lc.spec.namespace = "ns1".to_owned();
        lc.spec.user.user_name = "alice".to_owned();
        let mut local = UserPermission {
            metadata: Metadata::named("local"),
            ..UserPermission::default()
        };
        local.spec.namespace = "ns1".to_owned();
        local.spec.verbs = vec!["get".to_owned()];
        let wide = UserPermission {
            metadata: Metadata::named("wide"),
            ..UserPermission::default()
        };
        let mut quota = ClusterQuota {
            metadata: Metadata::named("q"),
            ..ClusterQuota::default()
        };
        quota.spec.insert("pods".to_owned(), "10".to_owned());
        let keys: Vec<String> = cloud_objects("p1", &lc, &[local, wide], &[quota])
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(
            keys,
            [
                "ns1+Namespace",
                "lc1-local+Role",
                "p1-lc1-wide+ClusterRole",
                "lc1-local+RoleBinding",
                "p1-lc1-wide+ClusterRoleBinding",
                "lc1-q+ResourceQuota",
            ]
        );
        let csr = csr(&csr_name("p1", "lc1", ContextId::new(42)), "PEM").unwrap();
        assert_eq!(csr.key, "emco-p1-lc1-42+CertificateSigningRequest");
        assert!(csr.yaml.contains("kube-apiserver-client"));
    }
}
