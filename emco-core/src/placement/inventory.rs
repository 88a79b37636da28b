//! [`Inventory`]: the clusters placement may choose from, indexed for fast label lookups.

use std::collections::HashMap;

use super::cluster::ClusterRef;

/// Dense index of a cluster in an [`Inventory`]. Ids follow the clusters' sort order, so sorting
/// ids sorts clusters.
pub(crate) type ClusterId = u32;

/// The clusters of one provider.
#[derive(Debug, Default)]
struct ProviderIndex {
    clusters: HashMap<String, ClusterId>,
    /// Label -> ids of the clusters carrying it, ascending.
    labels: HashMap<String, Vec<ClusterId>>,
}

/// Cluster providers, their clusters and the clusters' labels, plus (optionally) the clusters of
/// the deployment intent group's logical cloud.
///
/// Built once per instantiate and then queried per app: a label lookup costs O(number of clusters
/// carrying the label), a name lookup O(1).
///
/// ```
/// use emco_core::placement::{ClusterRef, Inventory};
///
/// let inv = Inventory::builder()
///     .cluster("edge", "c1", ["east"])
///     .cluster("edge", "c2", ["east", "gpu"])
///     .cluster("cloud", "k1", Vec::<String>::new())
///     .logical_cloud([ClusterRef::new("edge", "c1"), ClusterRef::new("edge", "c2")])
///     .build();
/// let east: Vec<String> = inv.clusters_with_label("edge", "east").map(ToString::to_string).collect();
/// assert_eq!(east, ["edge+c1", "edge+c2"]);
/// assert!(!inv.in_logical_cloud(&ClusterRef::new("cloud", "k1")));
/// ```
#[derive(Debug, Default)]
pub struct Inventory {
    /// Sorted by string form; the index is the [`ClusterId`].
    clusters: Vec<ClusterRef>,
    providers: HashMap<String, ProviderIndex>,
    /// Membership by id; `None` when no logical cloud restricts placement.
    members: Option<Vec<bool>>,
}

/// Collects clusters and labels for an [`Inventory`]. Duplicate clusters are merged (their labels
/// united); logical cloud members that are not in the inventory are ignored, since nothing can be
/// placed on them.
#[derive(Debug, Default)]
pub struct InventoryBuilder {
    entries: Vec<(ClusterRef, Vec<String>)>,
    members: Option<Vec<ClusterRef>>,
}

impl InventoryBuilder {
    /// Adds `provider+cluster` with its labels.
    #[must_use]
    pub fn cluster<L>(mut self, provider: &str, cluster: &str, labels: L) -> Self
    where
        L: IntoIterator,
        L::Item: Into<String>,
    {
        self.add_cluster(ClusterRef::new(provider, cluster), labels);
        self
    }

    /// Adds a cluster with its labels, by mutable reference (for loops).
    pub fn add_cluster<L>(&mut self, cluster: ClusterRef, labels: L)
    where
        L: IntoIterator,
        L::Item: Into<String>,
    {
        self.entries
            .push((cluster, labels.into_iter().map(Into::into).collect()));
    }

    /// Restricts placement to these clusters (the logical cloud's cluster references). Calling it
    /// again adds members.
    #[must_use]
    pub fn logical_cloud(mut self, members: impl IntoIterator<Item = ClusterRef>) -> Self {
        self.members.get_or_insert_with(Vec::new).extend(members);
        self
    }

    /// Builds the indexes.
    #[must_use]
    pub fn build(mut self) -> Inventory {
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut clusters: Vec<ClusterRef> = Vec::with_capacity(self.entries.len());
        let mut providers: HashMap<String, ProviderIndex> = HashMap::new();
        for (cluster, labels) in self.entries {
            // Sorted input: a duplicate is always the previous entry.
            let id = match clusters.last() {
                Some(last) if *last == cluster => index_to_id(clusters.len() - 1),
                _ => {
                    clusters.push(cluster.clone());
                    index_to_id(clusters.len() - 1)
                }
            };
            let p = providers.entry(cluster.provider().to_owned()).or_default();
            p.clusters.insert(cluster.cluster().to_owned(), id);
            for label in labels {
                let ids = p.labels.entry(label).or_default();
                // Ids arrive ascending; a repeated label on the same cluster repeats the last id.
                if ids.last() != Some(&id) {
                    ids.push(id);
                }
            }
        }
        let mut inv = Inventory {
            clusters,
            providers,
            members: None,
        };
        if let Some(members) = self.members {
            let mut set = vec![false; inv.clusters.len()];
            for m in &members {
                if let Some(id) = inv.id_of(m.provider(), m.cluster()) {
                    set[id as usize] = true;
                }
            }
            inv.members = Some(set);
        }
        inv
    }
}

/// Ids are u32 to keep the per-app lists small; an inventory beyond 4 billion clusters saturates
/// rather than wrapping (and cannot be built in memory anyway).
fn index_to_id(i: usize) -> ClusterId {
    ClusterId::try_from(i).unwrap_or(ClusterId::MAX)
}

impl Inventory {
    /// Starts an empty builder.
    #[must_use]
    pub fn builder() -> InventoryBuilder {
        InventoryBuilder::default()
    }

    /// An inventory from `(cluster, labels)` pairs, with no logical cloud restriction.
    pub fn from_clusters<I, L>(clusters: I) -> Self
    where
        I: IntoIterator<Item = (ClusterRef, L)>,
        L: IntoIterator,
        L::Item: Into<String>,
    {
        let mut b = InventoryBuilder::default();
        for (c, labels) in clusters {
            b.add_cluster(c, labels);
        }
        b.build()
    }

    /// Number of distinct clusters.
    #[must_use]
    pub fn len(&self) -> usize {
        self.clusters.len()
    }

    /// True when there are no clusters.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
    }

    /// All clusters, sorted by their `provider+cluster` form.
    #[must_use]
    pub fn clusters(&self) -> &[ClusterRef] {
        &self.clusters
    }

    /// True when the provider has at least one cluster here.
    #[must_use]
    pub fn has_provider(&self, provider: &str) -> bool {
        self.providers.contains_key(provider)
    }

    /// True when `cluster` is in the inventory.
    #[must_use]
    pub fn contains(&self, cluster: &ClusterRef) -> bool {
        self.id_of(cluster.provider(), cluster.cluster()).is_some()
    }

    /// True when a logical cloud restricts placement.
    #[must_use]
    pub fn has_logical_cloud(&self) -> bool {
        self.members.is_some()
    }

    /// True when `cluster` is in the inventory and in the logical cloud (or no logical cloud
    /// restricts placement).
    #[must_use]
    pub fn in_logical_cloud(&self, cluster: &ClusterRef) -> bool {
        self.id_of(cluster.provider(), cluster.cluster())
            .is_some_and(|id| self.is_member(id))
    }

    /// The clusters of `provider` carrying `label`, sorted.
    pub fn clusters_with_label<'a>(
        &'a self,
        provider: &str,
        label: &str,
    ) -> impl Iterator<Item = &'a ClusterRef> + 'a {
        self.label_ids(provider, label)
            .iter()
            .map(|&id| self.get(id))
    }

    pub(crate) fn id_of(&self, provider: &str, cluster: &str) -> Option<ClusterId> {
        self.providers.get(provider)?.clusters.get(cluster).copied()
    }

    pub(crate) fn label_ids(&self, provider: &str, label: &str) -> &[ClusterId] {
        self.providers
            .get(provider)
            .and_then(|p| p.labels.get(label))
            .map_or(&[], Vec::as_slice)
    }

    pub(crate) fn is_member(&self, id: ClusterId) -> bool {
        self.members
            .as_ref()
            .is_none_or(|m| m.get(id as usize).copied().unwrap_or(false))
    }

    /// The cluster of an id handed out by this inventory.
    pub(crate) fn get(&self, id: ClusterId) -> &ClusterRef {
        &self.clusters[id as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_merge_and_labels_index() {
        let inv = Inventory::builder()
            .cluster("p", "b", ["x"])
            .cluster("p", "a", ["x", "x"])
            .cluster("p", "b", ["y"])
            .cluster("q", "a", ["x"])
            .build();
        assert_eq!(inv.len(), 3);
        let x: Vec<String> = inv
            .clusters_with_label("p", "x")
            .map(ToString::to_string)
            .collect();
        assert_eq!(x, ["p+a", "p+b"]);
        let y: Vec<String> = inv
            .clusters_with_label("p", "y")
            .map(ToString::to_string)
            .collect();
        assert_eq!(y, ["p+b"]);
        assert_eq!(inv.clusters_with_label("r", "x").count(), 0);
        assert!(inv.has_provider("q") && !inv.has_provider("r"));
        assert!(!inv.has_logical_cloud());
        assert!(inv.in_logical_cloud(&ClusterRef::new("q", "a")));
        assert!(!inv.in_logical_cloud(&ClusterRef::new("q", "zz")));
    }

    #[test]
    fn logical_cloud_membership() {
        let inv = Inventory::builder()
            .cluster("p", "a", Vec::<String>::new())
            .cluster("p", "b", Vec::<String>::new())
            .logical_cloud([ClusterRef::new("p", "b"), ClusterRef::new("p", "ghost")])
            .build();
        assert!(inv.has_logical_cloud());
        assert!(inv.in_logical_cloud(&ClusterRef::new("p", "b")));
        assert!(!inv.in_logical_cloud(&ClusterRef::new("p", "a")));
        assert!(!inv.contains(&ClusterRef::new("p", "ghost")));
    }
}
