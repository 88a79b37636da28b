//! What a preview (what-if) of a deployment intent group answers (`GET DIG/preview`, ours):
//! the placement per app with the intent entries that chose each cluster, and the changes per
//! cluster as unified diffs, clusters with the same changes together; shared by the server and
//! its clients.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::placement::Reason;

/// The most clusters one page of the per-cluster detail holds.
pub const MAX_PAGE: usize = 1000;
/// The page size when none is asked for.
pub const DEFAULT_PAGE: usize = 100;

/// What a preview answers besides the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// Changes grouped by identical clusters (the default).
    #[default]
    Summary,
    /// One page of the clusters, each with its own changes and placement reasons.
    Clusters,
}

/// The options of a preview (`GET DIG/preview?detail=clusters&offset=0&limit=100`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewOptions {
    /// Summary or per-cluster detail.
    pub detail: Detail,
    /// The first cluster of the page (clusters sorted by name).
    pub offset: usize,
    /// The clusters per page, 1 to [`MAX_PAGE`].
    pub limit: usize,
    /// Whether each object to create or change is also checked by its cluster, changing
    /// nothing there (a server-side dry run, `dryRun=All`).
    pub dry_run: bool,
}

impl Default for PreviewOptions {
    fn default() -> Self {
        Self {
            detail: Detail::Summary,
            offset: 0,
            limit: DEFAULT_PAGE,
            dry_run: false,
        }
    }
}

impl PreviewOptions {
    /// The options of a query string's pairs.
    ///
    /// # Errors
    /// InvalidArgument naming the parameter for an unknown one or a bad value.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Self> {
        let mut out = Self::default();
        let number = |name: &str, v: &str| {
            v.parse::<usize>().map_err(|_| {
                Error::invalid(format!("{name} {v:?} is not a whole number")).with_field(name)
            })
        };
        for (name, value) in pairs {
            match name.as_str() {
                "detail" => {
                    out.detail = match value.as_str() {
                        "summary" | "" => Detail::Summary,
                        "clusters" => Detail::Clusters,
                        other => {
                            return Err(Error::invalid(format!(
                                "detail {other:?} is not one of summary, clusters"
                            ))
                            .with_field("detail"));
                        }
                    };
                }
                "offset" => out.offset = number("offset", value)?,
                "dryRun" => {
                    out.dry_run = match value.as_str() {
                        "true" | "All" | "" => true,
                        "false" => false,
                        other => {
                            return Err(Error::invalid(format!(
                                "dryRun {other:?} is not one of true, false, All"
                            ))
                            .with_field("dryRun"));
                        }
                    };
                }
                "limit" => {
                    out.limit = number("limit", value)?;
                    if out.limit == 0 || out.limit > MAX_PAGE {
                        return Err(Error::invalid(format!(
                            "limit {} is not between 1 and {MAX_PAGE}",
                            out.limit
                        ))
                        .with_field("limit"));
                    }
                }
                other => {
                    return Err(Error::invalid(format!(
                        "unknown query parameter {other:?}: use detail, offset, limit or dryRun"
                    ))
                    .with_field(other));
                }
            }
        }
        Ok(out)
    }
}

/// What a preview answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preview {
    /// The operation previewed: `instantiate` or `update`.
    pub operation: String,
    /// The revision deployed now (an update's), absent before the first instantiate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_revision: Option<i64>,
    /// Whether the scratch context had to be written to the AppContext store (and deleted)
    /// because controllers called over gRPC read it there; empty when nothing was written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub written_for: Vec<String>,
    /// Counts over the whole fleet.
    pub summary: Summary,
    /// Per app: where it goes, what it gains and loses, and why.
    pub placement: Vec<AppPlacement>,
    /// The changes, clusters with the same changes together (summary detail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<ChangeGroup>>,
    /// One page of the clusters (cluster detail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<ClusterPage>,
    /// What the clusters said of the objects to create or change, when asked (`dryRun`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRun>,
}

impl Preview {
    /// Whether the operation would change anything on any cluster.
    #[must_use]
    pub fn changes_anything(&self) -> bool {
        self.summary.clusters_changed > 0
    }
}

/// Counts of a preview.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Clusters that have the group's apps now or would have them.
    pub clusters: usize,
    /// Of them, those where something would change.
    pub clusters_changed: usize,
    /// Objects that would be created.
    pub added: usize,
    /// Objects that would be changed.
    pub changed: usize,
    /// Objects that would be deleted.
    pub removed: usize,
    /// Objects that would stay as they are.
    pub unchanged: usize,
}

/// Where one app would go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppPlacement {
    /// The app.
    pub app: String,
    /// How many clusters it would be on.
    pub clusters: usize,
    /// Clusters it would be added to.
    pub gains: Vec<String>,
    /// Clusters it would be removed from.
    pub loses: Vec<String>,
    /// Why it goes where it goes: clusters picked by the same intent entries together.
    pub picked_by: Vec<PickedBy>,
}

/// Clusters an app goes to for the same reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PickedBy {
    /// The app placement intent entries that select these clusters (none: a placement
    /// controller or an action controller put it there).
    pub reasons: Vec<Reason>,
    /// How many clusters.
    pub count: usize,
    /// Their names, sorted.
    pub clusters: Vec<String>,
}

/// What happens to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// Created.
    Added,
    /// Changed in place.
    Changed,
    /// Deleted.
    Removed,
}

/// One object that would change on a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectChange {
    /// The app it belongs to.
    pub app: String,
    /// Its `name+Kind`.
    pub resource: String,
    /// Added, changed or removed.
    pub change: Change,
    /// The unified diff of its YAML (keys sorted, as Kubernetes prints it).
    pub diff: String,
}

/// Clusters that get the same changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeGroup {
    /// How many clusters.
    pub count: usize,
    /// Their names, sorted.
    pub clusters: Vec<String>,
    /// The changes each of them gets.
    pub objects: Vec<ObjectChange>,
}

/// One page of clusters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPage {
    /// The first cluster's index.
    pub offset: usize,
    /// The page size asked for.
    pub limit: usize,
    /// The clusters in all.
    pub total: usize,
    /// The clusters of the page, sorted by name.
    pub items: Vec<ClusterPreview>,
}

/// One cluster of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPreview {
    /// The cluster (`provider+name`).
    pub cluster: String,
    /// The apps it would have, each with why.
    pub apps: Vec<ClusterApp>,
    /// What would change on it.
    pub objects: Vec<ObjectChange>,
}

/// An app on one cluster of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterApp {
    /// The app.
    pub app: String,
    /// The intent entries that select the cluster for it.
    pub reasons: Vec<Reason>,
}

/// What the clusters said, in a server-side dry run, of the objects a preview would create or
/// change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    /// The clusters asked (those with something to create or change).
    pub clusters: usize,
    /// The objects they would refuse, the same refusal of the same object together.
    pub refusals: Vec<Refusal>,
    /// The clusters that could not check (not answering, or a connector that cannot), the same
    /// reason together.
    pub unchecked: Vec<Unchecked>,
}

impl DryRun {
    /// Whether every cluster asked checked every object and took it.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.refusals.is_empty() && self.unchecked.is_empty()
    }
}

/// One object some clusters would refuse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    /// The app.
    pub app: String,
    /// The object's `name+Kind`.
    pub resource: String,
    /// What the cluster answered.
    pub reason: String,
    /// How many clusters.
    pub count: usize,
    /// Their names, sorted.
    pub clusters: Vec<String>,
}

/// Clusters that could not check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unchecked {
    /// Why.
    pub reason: String,
    /// How many clusters.
    pub count: usize,
    /// Their names, sorted.
    pub clusters: Vec<String>,
}
