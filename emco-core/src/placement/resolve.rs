//! [`resolve`]: app placement intents + inventory -> per app mandatory clusters and anyOf groups.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::ClusterRef;
use super::intent::{AnyOf, AppPlacementIntent, Target};
use super::inventory::{ClusterId, Inventory};
use crate::error::{Error, Result};
use crate::validate::Validate;

/// One anyOf group of an app: exactly one of its clusters is kept after the placement
/// controllers ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnyOfGroup {
    /// The group number written under the AppContext key `!@#metaGrp` of the chosen cluster.
    pub number: u32,
    /// Candidate clusters, sorted and distinct.
    pub clusters: Vec<ClusterRef>,
}

/// Where an app may go, before placement controllers filter.
///
/// Group numbers are stable for a given input: mandatory cluster `i` (in sorted order) is group
/// `i + 1`, and the anyOf groups, sorted by their cluster lists, follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// The app.
    pub app: String,
    /// Clusters the app must go to, sorted and distinct; each is its own group.
    pub mandatory: Vec<ClusterRef>,
    /// Groups of which one cluster each is chosen, distinct.
    pub any_of: Vec<AnyOfGroup>,
}

impl Placement {
    /// The group number of `mandatory[index]`.
    #[must_use]
    pub fn mandatory_group(index: usize) -> u32 {
        u32::try_from(index).map_or(u32::MAX, |i| i.saturating_add(1))
    }

    /// Every cluster the app may go to (mandatory and candidates), sorted and distinct: what the
    /// placement controllers are asked to filter.
    #[must_use]
    pub fn candidates(&self) -> Vec<ClusterRef> {
        let mut all: Vec<ClusterRef> = self.mandatory.clone();
        all.extend(self.any_of.iter().flat_map(|g| g.clusters.iter().cloned()));
        all.sort();
        all.dedup();
        all
    }
}

/// Resolves the app placement intents of a deployment intent group against `inventory`.
/// Several intents for the same app are merged. The result is sorted by app and does not depend
/// on the order of `intents` or of their entries.
///
/// Rules (EMCO.md section 4, with EMCO's quirks fixed):
/// - allOf `cluster`: that cluster is mandatory. allOf `clusterLabel`: every cluster of that
///   provider with the label is mandatory. Each mandatory cluster is its own group.
/// - anyOf, at the top level or nested in an allOf element: all its entries (names and labels)
///   form one group. Candidates outside the logical cloud are dropped; a group left empty is
///   dropped; identical groups are merged.
/// - Every mandatory cluster, named or selected by label, must be in the logical cloud:
///   InvalidArgument otherwise (EMCO answers 400).
/// - A named cluster or a provider missing from the inventory: NotFound (a reference to an object
///   that does not exist), with the entry's field path.
/// - An entry naming both `cluster` and `clusterLabel`: InvalidArgument (EMCO silently adds
///   nothing). Every intent is validated first.
/// - No cluster at all for an app: FailedPrecondition "no compatible clusters": the intent is
///   well-formed, but the inventory or logical cloud offers nothing it selects.
///
/// # Errors
/// As listed above; messages name the intent and app, field paths the entry.
pub fn resolve(intents: &[AppPlacementIntent], inventory: &Inventory) -> Result<Vec<Placement>> {
    let mut by_app: BTreeMap<&str, Vec<&AppPlacementIntent>> = BTreeMap::new();
    for intent in intents {
        by_app
            .entry(intent.spec.app.as_str())
            .or_default()
            .push(intent);
    }
    by_app
        .into_iter()
        .map(|(app, mut group)| {
            // Sorted so that which error is reported first does not depend on input order.
            group.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            resolve_app(app, &group, inventory)
        })
        .collect()
}

/// Resolves the merged intents of one app.
fn resolve_app(app: &str, intents: &[&AppPlacementIntent], inv: &Inventory) -> Result<Placement> {
    let mut mandatory: Vec<ClusterId> = Vec::new();
    let mut groups: Vec<Vec<ClusterId>> = Vec::new();
    for intent in intents {
        let ctx = |e: Error| -> Error {
            let msg = format!(
                "app placement intent {:?} (app {app:?}): {}",
                intent.metadata.name,
                e.message()
            );
            let mut out = Error::new(e.kind(), msg);
            if let Some(f) = e.field() {
                out = out.with_field(f);
            }
            out
        };
        intent.validate().map_err(ctx)?;
        for (i, all_of) in intent.spec.intent.all_of.iter().enumerate() {
            let path = format!("spec.intent.allOf[{i}]");
            if let Some(target) = all_of.target().map_err(|e| ctx(e.within(&path)))? {
                add_mandatory(inv, &all_of.cluster_provider, target, &mut mandatory)
                    .map_err(|e| ctx(e.within(&path)))?;
            }
            push_group(inv, &all_of.any_of, &mut groups)
                .map_err(|e| ctx(e.within(&format!("{path}.anyOf"))))?;
        }
        push_group(inv, &intent.spec.intent.any_of, &mut groups)
            .map_err(|e| ctx(e.within("spec.intent.anyOf")))?;
    }
    mandatory.sort_unstable();
    mandatory.dedup();
    groups.sort_unstable();
    groups.dedup();
    if mandatory.is_empty() && groups.is_empty() {
        return Err(Error::failed_precondition(format!(
            "no compatible clusters for app {app:?}: its placement intents select no cluster{}",
            if inv.has_logical_cloud() {
                " of the logical cloud"
            } else {
                ""
            }
        )));
    }
    let first_group = Placement::mandatory_group(mandatory.len());
    Ok(Placement {
        app: app.to_owned(),
        mandatory: mandatory.iter().map(|&id| inv.get(id).clone()).collect(),
        any_of: groups
            .into_iter()
            .zip(first_group..)
            .map(|(ids, number)| AnyOfGroup {
                number,
                clusters: ids.iter().map(|&id| inv.get(id).clone()).collect(),
            })
            .collect(),
    })
}

/// The provider's index entry or NotFound at `clusterProvider`.
fn check_provider(inv: &Inventory, provider: &str) -> Result<()> {
    if inv.has_provider(provider) {
        Ok(())
    } else {
        Err(
            Error::not_found(format!("cluster provider {provider:?} has no clusters"))
                .with_field("clusterProvider"),
        )
    }
}

/// The id of a named cluster, or NotFound at `cluster`.
fn named(inv: &Inventory, provider: &str, cluster: &str) -> Result<ClusterId> {
    check_provider(inv, provider)?;
    inv.id_of(provider, cluster).ok_or_else(|| {
        Error::not_found(format!("cluster \"{provider}+{cluster}\" does not exist"))
            .with_field("cluster")
    })
}

fn add_mandatory(
    inv: &Inventory,
    provider: &str,
    target: Target<'_>,
    out: &mut Vec<ClusterId>,
) -> Result<()> {
    let outside = |id: ClusterId, field: &str| {
        Error::invalid(format!(
            "mandatory cluster \"{}\" is not in the logical cloud",
            inv.get(id)
        ))
        .with_field(field)
    };
    match target {
        Target::Cluster(cluster) => {
            let id = named(inv, provider, cluster)?;
            if !inv.is_member(id) {
                return Err(outside(id, "cluster"));
            }
            out.push(id);
        }
        Target::Label(label) => {
            check_provider(inv, provider)?;
            let ids = inv.label_ids(provider, label);
            if let Some(&id) = ids.iter().find(|&&id| !inv.is_member(id)) {
                return Err(outside(id, "clusterLabel"));
            }
            out.extend_from_slice(ids);
        }
    }
    Ok(())
}

/// Adds the group formed by `entries` (if any candidate survives the logical cloud filter).
fn push_group(inv: &Inventory, entries: &[AnyOf], groups: &mut Vec<Vec<ClusterId>>) -> Result<()> {
    let mut ids: Vec<ClusterId> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = |e: Error| e.within(&format!("[{i}]"));
        match entry.target().map_err(at)? {
            Target::Cluster(c) => ids.push(named(inv, &entry.cluster_provider, c).map_err(at)?),
            Target::Label(l) => {
                check_provider(inv, &entry.cluster_provider).map_err(at)?;
                ids.extend_from_slice(inv.label_ids(&entry.cluster_provider, l));
            }
        }
    }
    ids.retain(|&id| inv.is_member(id));
    ids.sort_unstable();
    ids.dedup();
    if !ids.is_empty() {
        groups.push(ids);
    }
    Ok(())
}
