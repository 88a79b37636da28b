//! Cluster registration (clm): cluster providers, clusters and their labels. Cluster kv-pairs and
//! GitOps cluster sync objects are [`KvPair`](crate::model::KvPair)s; clm controllers are in
//! [`controller`](crate::model::controller).

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::Result;
use crate::metadata::Metadata;
use crate::model::check_reference;
use crate::validate::{NAME_MAX, Validate, check_max_len, check_required};

/// `/cluster-providers/{clusterProvider}`: `{metadata}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, schema = crate::schemas::METADATA)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProvider {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../clusters/{cluster}`: `{metadata, spec:{gitOps?}}`. The kubeconfig is a separate multipart
/// `file`, required unless the cluster is reached through GitOps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    metadata,
    check = |c: &Self| c.spec.git_ops.validate().map_err(|e| e.within("spec.gitOps"))
)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// How the cluster is reached.
    #[serde(default)]
    pub spec: ClusterSpec,
}

/// The `spec` of a [`Cluster`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// GitOps settings. EMCO always writes the object and treats an empty `gitOpsType` as "not
    /// GitOps", so the same holds here.
    #[serde(default)]
    pub git_ops: GitOpsSpec,
}

/// `spec.gitOps` of a [`Cluster`]: `{gitOpsType, gitOpsReferenceObject, gitOpsResourceObject}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitOpsSpec {
    /// The GitOps flavour (`fluxcd`, `azureArcV2`, `anthos`, ...); empty when the cluster is
    /// reached through its API server.
    #[serde(default)]
    pub git_ops_type: String,
    /// Name of the cluster sync object holding the repository reference.
    #[serde(default)]
    pub git_ops_reference_object: String,
    /// Name of the cluster sync object holding the resource location.
    #[serde(default)]
    pub git_ops_resource_object: String,
}

impl GitOpsSpec {
    /// Whether every field is empty (no GitOps).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.git_ops_type.is_empty()
            && self.git_ops_reference_object.is_empty()
            && self.git_ops_resource_object.is_empty()
    }
}

impl Cluster {
    /// The GitOps settings, when the cluster is reached through a git repository.
    #[must_use]
    pub fn git_ops(&self) -> Option<&GitOpsSpec> {
        (!self.spec.git_ops.git_ops_type.is_empty()).then_some(&self.spec.git_ops)
    }

    /// Whether the registration needs a kubeconfig file: always, unless GitOps is set.
    #[must_use]
    pub fn needs_kubeconfig(&self) -> bool {
        self.git_ops().is_none()
    }
}

impl Validate for GitOpsSpec {
    /// An all-empty spec (no GitOps) is valid; otherwise all three fields are required.
    fn validate(&self) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        check_required("gitOpsType", &self.git_ops_type)?;
        check_max_len("gitOpsType", &self.git_ops_type, NAME_MAX)?;
        check_reference("gitOpsReferenceObject", &self.git_ops_reference_object)?;
        check_reference("gitOpsResourceObject", &self.git_ops_resource_object)
    }
}

/// `.../clusters/{cluster}/labels/{clusterLabel}`: `{"clusterLabel": "..."}` (older clients:
/// `label-name`). The label is its own name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    name = cluster_label,
    check = |l: &Self| check_reference("clusterLabel", &l.cluster_label),
    schema = crate::schemas::CLUSTER_LABEL
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterLabel {
    /// The label.
    #[serde(default, alias = "label-name")]
    pub cluster_label: String,
}

impl ClusterLabel {
    /// A label with the given text.
    pub fn new(label: impl Into<String>) -> Self {
        Self {
            cluster_label: label.into(),
        }
    }
}

/// An item of `GET .../clusters?withLabels=true`: `{metadata, labels:[{clusterLabel}]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWithLabels {
    /// The cluster's metadata.
    #[serde(default)]
    pub metadata: Metadata,
    /// Its labels.
    #[serde(default)]
    pub labels: Vec<ClusterLabel>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::Named;
    use crate::model::test_util::assert_invalid;

    #[test]
    fn provider_and_plain_cluster() {
        let p: ClusterProvider =
            serde_json::from_value(json!({"metadata": {"name": "provider1"}})).unwrap();
        assert!(p.validate().is_ok());
        assert_eq!(p.name(), "provider1");

        let c: Cluster = serde_json::from_value(json!({"metadata": {"name": "cluster1"}})).unwrap();
        assert!(c.validate().is_ok());
        assert!(c.needs_kubeconfig());
        assert!(c.git_ops().is_none());
        assert_eq!(
            serde_json::to_value(&c).unwrap()["spec"],
            json!({"gitOps": {"gitOpsType": "", "gitOpsReferenceObject": "", "gitOpsResourceObject": ""}})
        );
        let echoed: Cluster = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert!(echoed.validate().is_ok());
        assert!(echoed.needs_kubeconfig());
        assert_invalid(&Cluster::default(), "metadata.name");
    }

    #[test]
    fn gitops_cluster() {
        let c: Cluster = serde_json::from_value(json!({
            "metadata": {"name": "cluster2"},
            "spec": {"gitOps": {"gitOpsType": "fluxcd", "gitOpsReferenceObject": "gitObj1",
                                "gitOpsResourceObject": "gitObj1"}}
        }))
        .unwrap();
        assert!(c.validate().is_ok());
        assert!(!c.needs_kubeconfig());
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["spec"]["gitOps"]["gitOpsType"], "fluxcd");
        assert_eq!(serde_json::from_value::<Cluster>(json).unwrap(), c);

        assert_eq!(c.git_ops().map(|g| g.git_ops_type.as_str()), Some("fluxcd"));

        let mut bad = c.clone();
        bad.spec.git_ops.git_ops_type.clear();
        assert_invalid(&bad, "spec.gitOps.gitOpsType");
        let mut bad = c.clone();
        bad.spec.git_ops.git_ops_reference_object.clear();
        assert_invalid(&bad, "spec.gitOps.gitOpsReferenceObject");
        let mut bad = c;
        bad.spec.git_ops.git_ops_resource_object = "a b".into();
        assert_invalid(&bad, "spec.gitOps.gitOpsResourceObject");
    }

    #[test]
    fn cluster_with_labels() {
        let c = ClusterWithLabels {
            metadata: Metadata::named("cluster1"),
            labels: vec![ClusterLabel::new("edge"), ClusterLabel::new("east")],
        };
        assert_eq!(c.name(), "cluster1");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json["labels"],
            json!([{"clusterLabel": "edge"}, {"clusterLabel": "east"}])
        );
        assert_eq!(
            serde_json::from_value::<ClusterWithLabels>(json).unwrap(),
            c
        );
    }

    #[test]
    fn labels() {
        let l: ClusterLabel =
            serde_json::from_value(json!({"clusterLabel": "edge-cluster"})).unwrap();
        assert!(l.validate().is_ok());
        assert_eq!(l.name(), "edge-cluster");
        assert_eq!(
            serde_json::to_value(&l).unwrap(),
            json!({"clusterLabel": "edge-cluster"})
        );
        let old: ClusterLabel = serde_json::from_value(json!({"label-name": "east"})).unwrap();
        assert_eq!(old, ClusterLabel::new("east"));
        assert_invalid(&ClusterLabel::default(), "clusterLabel");
        assert_invalid(&ClusterLabel::new("bad label"), "clusterLabel");
    }
}
