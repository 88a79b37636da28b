//! Logical clouds (dcm) and their cluster references, user permissions and cluster quotas.
//! Logical cloud kv-pairs are [`KvPair`](crate::model::KvPair)s.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::model::{check_reference, string_or_int};
use crate::validate::{NAME_MAX, check_max_len, check_one_of, check_required};

/// `spec.level` of an admin logical cloud.
pub const LEVEL_ADMIN: &str = "0";
/// `spec.level` of a standard or privileged logical cloud; EMCO's default when `level` is absent.
pub const LEVEL_CUSTOM: &str = "1";
/// The only user type EMCO implements, and the default.
pub const USER_TYPE_CERTIFICATE: &str = "certificate";
/// Longest `spec.user.userName` (EMCO's OpenAPI).
pub const USER_NAME_MAX: usize = 20;

/// The level of a logical cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogicalCloudLevel {
    /// Level 0: the whole clusters, with the admin's credentials. No namespace or user needed.
    Admin,
    /// Level 1: a namespace per cluster and a user with a generated certificate.
    Custom,
}

/// What a logical cloud is, given its level and user permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogicalCloudKind {
    /// Level 0.
    Admin,
    /// Level 1 whose permissions all stay inside its own namespace.
    Standard,
    /// Level 1 with a permission cluster-wide (empty namespace) or in another namespace.
    Privileged,
}

/// `/projects/{project}/logical-clouds/{lc}`: `{metadata, spec:{namespace, level, labels, user}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::LOGICAL_CLOUD)]
#[serde(rename_all = "camelCase")]
pub struct LogicalCloud {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// Level, namespace and user.
    #[serde(default)]
    pub spec: LogicalCloudSpec,
}

/// The `spec` of a [`LogicalCloud`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogicalCloudSpec {
    /// The namespace created on every cluster (level 1).
    #[serde(default)]
    pub namespace: String,
    /// `"0"` (admin) or `"1"` (standard/privileged); absent means `"1"` as in EMCO. A bare number
    /// is accepted too.
    #[serde(default, deserialize_with = "string_or_int::deserialize")]
    pub level: String,
    /// Labels put on the namespace; `None` (written `null`, as Go writes a nil map) when the
    /// body had none.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// The user of a level-1 logical cloud.
    #[serde(default)]
    pub user: LogicalCloudUser,
}

/// `spec.user` of a [`LogicalCloud`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogicalCloudUser {
    /// The Kubernetes user name the certificate is issued to (older EMCO: `user-name`).
    #[serde(default, alias = "user-name")]
    pub user_name: String,
    /// Authentication type; only `certificate` (the default when empty).
    #[serde(default, rename = "type")]
    pub kind: String,
}

impl LogicalCloud {
    /// The typed level, `None` when `spec.level` is not a valid value. Empty reads as level 1.
    #[must_use]
    pub fn level(&self) -> Option<LogicalCloudLevel> {
        match self.spec.level.as_str() {
            LEVEL_ADMIN => Some(LogicalCloudLevel::Admin),
            LEVEL_CUSTOM | "" => Some(LogicalCloudLevel::Custom),
            _ => None,
        }
    }

    /// The Kubernetes user of a standard cloud: `spec.user.userName`, else the cloud's name.
    /// EMCO takes a cloud without a user too (its test-cert example's clouds have none) and
    /// binds the empty name, which the API server refuses; a named user lets them instantiate.
    #[must_use]
    pub fn user_name(&self) -> &str {
        if self.spec.user.user_name.is_empty() {
            &self.metadata.name
        } else {
            &self.spec.user.user_name
        }
    }

    /// Whether the logical cloud is an admin (level 0) one.
    #[must_use]
    pub fn is_admin(&self) -> bool {
        self.level() == Some(LogicalCloudLevel::Admin)
    }

    /// The user type with EMCO's default applied.
    #[must_use]
    pub fn user_type(&self) -> &str {
        if self.spec.user.kind.is_empty() {
            USER_TYPE_CERTIFICATE
        } else {
            &self.spec.user.kind
        }
    }

    /// Fills in EMCO's defaults the way EMCO stores the object: level `"1"` when absent
    /// (src/dcm/pkg/module/logicalcloud.go `Create`; the user type stays as given and
    /// [`Self::user_type`] reads an empty one as `certificate`).
    pub fn apply_defaults(&mut self) {
        if self.spec.level.is_empty() {
            LEVEL_CUSTOM.clone_into(&mut self.spec.level);
        }
    }

    /// Admin, standard or privileged, given the logical cloud's user permissions: a level-1
    /// logical cloud is standard when every permission targets its own namespace.
    #[must_use]
    pub fn kind_with(&self, permissions: &[UserPermission]) -> LogicalCloudKind {
        if self.is_admin() {
            return LogicalCloudKind::Admin;
        }
        if permissions
            .iter()
            .all(|p| p.spec.namespace == self.spec.namespace)
        {
            LogicalCloudKind::Standard
        } else {
            LogicalCloudKind::Privileged
        }
    }
}

/// Checks a Kubernetes namespace name (RFC 1123 label: at most 63 lowercase letters, digits and
/// `-`, starting and ending with a letter or digit).
fn check_namespace(field: &str, ns: &str) -> Result<()> {
    let b = ns.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let edge = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ns.len() <= 63 && edge(b.first()) && edge(b.last()) && b.iter().all(inner) {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{ns:?} is not a valid namespace: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
    ))
    .with_field(field))
}

impl LogicalCloud {
    fn check(&self) -> Result<()> {
        let level = self.level().ok_or_else(|| {
            Error::invalid(format!(
                "{:?} is not one of \"0\" (admin), \"1\"",
                self.spec.level
            ))
            .with_field("spec.level")
        })?;
        if level == LogicalCloudLevel::Custom {
            check_required("spec.namespace", &self.spec.namespace)?;
        }
        if !self.spec.namespace.is_empty() {
            check_namespace("spec.namespace", &self.spec.namespace)?;
        }
        check_max_len(
            "spec.user.userName",
            &self.spec.user.user_name,
            USER_NAME_MAX,
        )?;
        if !self.spec.user.kind.is_empty() {
            check_one_of(
                "spec.user.type",
                &self.spec.user.kind,
                &[USER_TYPE_CERTIFICATE],
            )?;
        }
        if self.spec.labels.iter().flatten().any(|(k, _)| k.is_empty()) {
            return Err(Error::invalid("label keys must not be empty").with_field("spec.labels"));
        }
        Ok(())
    }
}

/// `.../logical-clouds/{lc}/cluster-references/{ref}`:
/// `{metadata, spec:{clusterProvider, cluster, loadBalancerIP, certificate}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::CLUSTER_REFERENCE)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReference {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The cluster.
    #[serde(default)]
    pub spec: ClusterReferenceSpec,
}

/// The `spec` of a [`ClusterReference`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReferenceSpec {
    /// The cluster's provider (older EMCO: `cluster-provider`).
    #[serde(default, alias = "cluster-provider")]
    pub cluster_provider: String,
    /// The cluster's name (older EMCO: `cluster-name`).
    #[serde(default, alias = "cluster-name")]
    pub cluster: String,
    /// IP address of the cluster's load balancer; emcoctl files spell it `loadbalancerIp`, older
    /// EMCO `loadbalancer-ip`.
    #[serde(
        default,
        rename = "loadBalancerIP",
        alias = "loadbalancerIp",
        alias = "loadBalancerIp",
        alias = "loadbalancer-ip"
    )]
    pub load_balancer_ip: String,
    /// The logical cloud user's certificate for this cluster, filled in by dcm.
    #[serde(default)]
    pub certificate: String,
}

impl ClusterReference {
    fn check(&self) -> Result<()> {
        check_reference("spec.clusterProvider", &self.spec.cluster_provider)?;
        check_reference("spec.cluster", &self.spec.cluster)?;
        let ip = &self.spec.load_balancer_ip;
        if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
            return Err(Error::invalid(format!("{ip:?} is not an IP address"))
                .with_field("spec.loadBalancerIP"));
        }
        Ok(())
    }
}

/// `.../logical-clouds/{lc}/user-permissions/{perm}`:
/// `{metadata, spec:{namespace, apiGroups, resources, verbs}}`: one RBAC rule for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::USER_PERMISSION)]
#[serde(rename_all = "camelCase")]
pub struct UserPermission {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The rule.
    #[serde(default)]
    pub spec: UserPermissionSpec,
}

/// The `spec` of a [`UserPermission`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserPermissionSpec {
    /// The namespace the rule applies in; empty means cluster-wide.
    #[serde(default)]
    pub namespace: String,
    /// API groups (`""` is the core group, `"*"` all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `*`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Verbs (`get`, `*`).
    #[serde(default)]
    pub verbs: Vec<String>,
}

impl UserPermission {
    /// Whether the rule is cluster-wide (a ClusterRole) rather than namespaced.
    #[must_use]
    pub fn is_cluster_wide(&self) -> bool {
        self.spec.namespace.is_empty()
    }
}

/// Checks that every item of a list is non-empty.
fn check_items(field: &str, items: &[String]) -> Result<()> {
    match items.iter().position(|s| s.trim().is_empty()) {
        Some(i) => Err(Error::invalid("must not be empty").with_field(format!("{field}[{i}]"))),
        None => Ok(()),
    }
}

impl UserPermission {
    fn check(&self) -> Result<()> {
        if !self.spec.namespace.is_empty() {
            check_namespace("spec.namespace", &self.spec.namespace)?;
        }
        check_items("spec.resources", &self.spec.resources)?;
        check_items("spec.verbs", &self.spec.verbs)
    }
}

/// The ResourceQuota keys EMCO's OpenAPI lists for a cluster quota. Other keys (extended
/// resources such as `requests.nvidia.com/gpu`) are accepted too, as Kubernetes does.
pub const DOCUMENTED_QUOTA_KEYS: [&str; 23] = [
    "limits.cpu",
    "limits.memory",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.ephemeral-storage",
    "persistentvolumeclaims",
    "pods",
    "configmaps",
    "replicationcontrollers",
    "resourcequotas",
    "services",
    "services.loadbalancers",
    "services.nodeports",
    "secrets",
    "count/replicationcontrollers",
    "count/deployments.apps",
    "count/replicasets.apps",
    "count/statefulsets.apps",
    "count/jobs.batch",
    "count/cronjobs.batch",
    "count/deployments.extensions",
];

/// `.../logical-clouds/{lc}/cluster-quotas/{quota}`: `{metadata, spec:{"limits.cpu": "400", ...}}`,
/// the ResourceQuota of the logical cloud's namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = Self::check, schema = crate::schemas::CLUSTER_QUOTA)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQuota {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// ResourceQuota `hard` keys to quantities.
    #[serde(default)]
    pub spec: BTreeMap<String, String>,
}

impl ClusterQuota {
    fn check(&self) -> Result<()> {
        for (key, value) in &self.spec {
            if key.trim().is_empty() {
                return Err(Error::invalid("quota keys must not be empty").with_field("spec"));
            }
            check_max_len("spec", key, NAME_MAX)?;
            check_required(&format!("spec.{key}"), value.trim())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::Named;
    use crate::model::test_util::assert_invalid;
    use crate::validate::Validate;

    fn standard() -> LogicalCloud {
        serde_json::from_value(json!({
            "metadata": {"name": "standard-lc"},
            "spec": {"namespace": "standard-lc-ns", "user": {"userName": "user-1", "type": "certificate"}}
        }))
        .unwrap()
    }

    fn permission(ns: &str) -> UserPermission {
        serde_json::from_value(json!({
            "metadata": {"name": "perm"},
            "spec": {"namespace": ns, "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
        }))
        .unwrap()
    }

    #[test]
    fn admin_cloud() {
        let lc: LogicalCloud =
            serde_json::from_value(json!({"metadata": {"name": "lc1"}, "spec": {"level": "0"}}))
                .unwrap();
        assert!(lc.validate().is_ok());
        assert!(lc.is_admin());
        assert_eq!(lc.kind_with(&[]), LogicalCloudKind::Admin);
        let numeric: LogicalCloud =
            serde_json::from_value(json!({"metadata": {"name": "lc1"}, "spec": {"level": 0}}))
                .unwrap();
        assert_eq!(numeric, lc);
        let json = serde_json::to_value(&lc).unwrap();
        assert_eq!(
            json["spec"],
            json!({"namespace": "", "labels": null, "level": "0", "user": {"userName": "", "type": ""}})
        );
    }

    #[test]
    fn level_one_defaults_and_kinds() {
        let mut lc = standard();
        assert!(lc.validate().is_ok());
        assert_eq!(lc.level(), Some(LogicalCloudLevel::Custom));
        assert_eq!(lc.user_type(), "certificate");
        lc.apply_defaults();
        assert_eq!(lc.spec.level, "1");
        assert_eq!(
            lc.kind_with(&[permission("standard-lc-ns")]),
            LogicalCloudKind::Standard
        );
        assert_eq!(
            lc.kind_with(&[permission("standard-lc-ns"), permission("kube-system")]),
            LogicalCloudKind::Privileged
        );
        assert_eq!(
            lc.kind_with(&[permission("")]),
            LogicalCloudKind::Privileged
        );
        let old: LogicalCloud = serde_json::from_value(json!({
            "metadata": {"name": "standard-lc"},
            "spec": {"namespace": "standard-lc-ns", "user": {"user-name": "user-1", "type": "certificate"}}
        }))
        .unwrap();
        assert_eq!(old, standard());
        let mut no_type = standard();
        no_type.spec.user.kind.clear();
        assert_eq!(no_type.user_type(), "certificate");
        no_type.apply_defaults();
        assert!(
            no_type.spec.user.kind.is_empty(),
            "stored as given, as EMCO does"
        );
        let back: LogicalCloud =
            serde_json::from_value(serde_json::to_value(&lc).unwrap()).unwrap();
        assert_eq!(back, lc);
    }

    #[test]
    fn logical_cloud_rules() {
        let mut lc = standard();
        lc.spec.level = "2".into();
        assert_invalid(&lc, "spec.level");
        assert_eq!(lc.level(), None);
        let mut lc = standard();
        lc.spec.namespace.clear();
        assert_invalid(&lc, "spec.namespace");
        let mut lc = standard();
        lc.spec.namespace = "Bad_NS".into();
        assert_invalid(&lc, "spec.namespace");
        // As EMCO: a standard cloud without a user is taken; it is its own user.
        let mut lc = standard();
        lc.spec.user.user_name.clear();
        assert!(lc.validate().is_ok());
        assert_eq!(lc.user_name(), lc.metadata.name);
        let mut lc = standard();
        lc.spec.user.user_name = "u".repeat(21);
        assert_invalid(&lc, "spec.user.userName");
        let mut lc = standard();
        lc.spec.user.kind = "token".into();
        assert_invalid(&lc, "spec.user.type");
        let mut lc = standard();
        lc.spec.labels = Some(BTreeMap::from([(String::new(), "x".into())]));
        assert_invalid(&lc, "spec.labels");
        let mut lc = standard();
        lc.spec.labels = Some(BTreeMap::from([("team".into(), "edge".into())]));
        assert!(lc.validate().is_ok());
        assert_eq!(
            serde_json::to_value(&lc).unwrap()["spec"]["labels"],
            json!({"team": "edge"})
        );
        let mut lc = standard();
        lc.metadata.name.clear();
        assert_invalid(&lc, "metadata.name");
    }

    #[test]
    fn cluster_reference_spellings() {
        let r: ClusterReference = serde_json::from_value(json!({
            "metadata": {"name": "cluster1-ref"},
            "spec": {"clusterProvider": "provider1", "cluster": "cluster1", "loadbalancerIp": "0.0.0.0"}
        }))
        .unwrap();
        assert!(r.validate().is_ok());
        assert_eq!(r.name(), "cluster1-ref");
        assert_eq!(r.spec.load_balancer_ip, "0.0.0.0");
        assert_eq!(
            serde_json::to_value(&r).unwrap()["spec"],
            json!({"clusterProvider": "provider1", "cluster": "cluster1", "loadBalancerIP": "0.0.0.0", "certificate": ""})
        );
        let current: ClusterReference = serde_json::from_value(json!({
            "metadata": {"name": "cluster1-ref"},
            "spec": {"clusterProvider": "provider1", "cluster": "cluster1", "loadBalancerIP": "0.0.0.0"}
        }))
        .unwrap();
        assert_eq!(current, r);
        let old: ClusterReference = serde_json::from_value(json!({
            "metadata": {"name": "cluster1-ref"},
            "spec": {"cluster-provider": "provider1", "cluster-name": "cluster1", "loadbalancer-ip": "0.0.0.0"}
        }))
        .unwrap();
        assert_eq!(old, r);

        let mut bad = r.clone();
        bad.spec.load_balancer_ip = "1.2.3".into();
        assert_invalid(&bad, "spec.loadBalancerIP");
        let mut bad = r.clone();
        bad.spec.cluster_provider.clear();
        assert_invalid(&bad, "spec.clusterProvider");
        let mut bad = r;
        bad.spec.cluster = "c 1".into();
        assert_invalid(&bad, "spec.cluster");
    }

    #[test]
    fn user_permissions() {
        let p = permission("privileged-lc-ns");
        assert!(p.validate().is_ok());
        assert!(!p.is_cluster_wide());
        assert_eq!(
            serde_json::to_value(&p).unwrap()["spec"],
            json!({"namespace": "privileged-lc-ns", "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
        );
        let cw = permission("");
        assert!(cw.validate().is_ok());
        assert!(cw.is_cluster_wide());
        let mut core = permission("ns");
        core.spec.api_groups = vec![String::new(), "apps".into()];
        assert!(core.validate().is_ok());
        let mut bad = permission("ns");
        bad.spec.verbs.push(" ".into());
        assert_invalid(&bad, "spec.verbs[1]");
        let mut bad = permission("ns");
        bad.spec.resources[0].clear();
        assert_invalid(&bad, "spec.resources[0]");
        assert_invalid(&permission("NS!"), "spec.namespace");
    }

    #[test]
    fn cluster_quotas() {
        let q: ClusterQuota = serde_json::from_value(json!({
            "metadata": {"name": "quota1"},
            "spec": {"limits.cpu": "400", "pods": "500", "count/deployments.apps": "10", "requests.nvidia.com/gpu": "2"}
        }))
        .unwrap();
        assert!(q.validate().is_ok());
        assert!(
            q.spec
                .keys()
                .filter(|k| DOCUMENTED_QUOTA_KEYS.contains(&k.as_str()))
                .count()
                == 3
        );
        assert_eq!(
            serde_json::from_value::<ClusterQuota>(serde_json::to_value(&q).unwrap()).unwrap(),
            q
        );
        let mut bad = q.clone();
        bad.spec.insert(String::new(), "1".into());
        assert_invalid(&bad, "spec");
        let mut bad = q;
        bad.spec.insert("pods".into(), String::new());
        assert_invalid(&bad, "spec.pods");
    }
}
