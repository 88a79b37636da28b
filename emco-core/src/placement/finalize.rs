//! [`finalize`]: after the placement controllers filtered, choose one cluster per anyOf group.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use super::cluster::ClusterRef;
use super::resolve::{AnyOfGroup, Placement};
use crate::error::{Error, Result};

/// Chooses the cluster an anyOf group keeps, among the group's surviving candidates.
///
/// Implement it to place by load, cost or locality; [`FirstLexicographic`] is EMCO's choice.
///
/// ```
/// use emco_core::placement::{AnyOfGroup, AnyOfStrategy, ClusterRef};
///
/// /// Prefers the candidate with the fewest apps already on it.
/// #[derive(Debug)]
/// struct LeastLoaded(std::collections::HashMap<String, usize>);
///
/// impl AnyOfStrategy for LeastLoaded {
///     fn choose(&self, _app: &str, _group: &AnyOfGroup, candidates: &[&ClusterRef]) -> usize {
///         let load = |c: &ClusterRef| self.0.get(c.as_str()).copied().unwrap_or(0);
///         (0..candidates.len()).min_by_key(|&i| load(&candidates[i])).unwrap_or(0)
///     }
/// }
/// ```
pub trait AnyOfStrategy: Debug + Send + Sync {
    /// Returns the index in `candidates` of the cluster to keep. `candidates` is never empty and
    /// is sorted by `provider+cluster`; `group` is the whole group before filtering.
    fn choose(&self, app: &str, group: &AnyOfGroup, candidates: &[&ClusterRef]) -> usize;
}

/// EMCO's choice: the lexicographically first surviving `provider+cluster`. Deterministic.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstLexicographic;

impl AnyOfStrategy for FirstLexicographic {
    fn choose(&self, _app: &str, _group: &AnyOfGroup, _candidates: &[&ClusterRef]) -> usize {
        0
    }
}

/// A cluster an app is deployed to, with the group number for the AppContext `!@#metaGrp` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacedCluster {
    /// The cluster.
    pub cluster: ClusterRef,
    /// Its group: its own mandatory group, or the (smallest) anyOf group that chose it.
    pub group: u32,
}

/// The cluster an anyOf group kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupChoice {
    /// The group number.
    pub group: u32,
    /// The kept cluster.
    pub cluster: ClusterRef,
    /// True when the group was satisfied by a surviving mandatory cluster it contains, so no
    /// extra cluster was added and the strategy was not asked.
    pub by_mandatory: bool,
}

/// The clusters an app is finally deployed to, and what the filtering cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalPlacement {
    /// The app.
    pub app: String,
    /// Where the app goes, sorted by cluster, distinct.
    pub clusters: Vec<PlacedCluster>,
    /// One entry per anyOf group that had survivors, by group number.
    pub choices: Vec<GroupChoice>,
    /// Mandatory clusters a placement controller removed (dropped: the controller's filter wins).
    pub removed_mandatory: Vec<ClusterRef>,
    /// anyOf groups all of whose candidates were removed; they place nothing.
    pub unsatisfied_groups: Vec<u32>,
}

/// Applies the placement controllers' verdict (`keep`) to `placement` and chooses one cluster
/// per anyOf group.
///
/// Rules:
/// - A mandatory cluster `keep` rejects is dropped and listed in `removed_mandatory`: a placement
///   controller (capacity, hardware, policy) knows better than the static intent.
/// - An anyOf group that contains a kept mandatory cluster is satisfied by it (the first such):
///   nothing is added and that cluster is never pruned (EMCO **quirk** fixed: EMCO could prune it).
/// - Otherwise a group with survivors keeps the one `strategy` chooses; a group without survivors
///   places nothing and is listed in `unsatisfied_groups`.
/// - `keep` is only asked about the placement's own clusters; controllers cannot add clusters.
///
/// `placement` must keep the sorted, distinct lists [`resolve`](super::resolve) produces (a
/// hand-built one too): the mandatory/anyOf overlap is found by one merge walk.
///
/// # Errors
/// FailedPrecondition "no compatible clusters" when nothing is left for the app; Internal when
/// `strategy` returns an index outside the candidates.
pub fn finalize(
    placement: &Placement,
    keep: impl Fn(&ClusterRef) -> bool,
    strategy: &dyn AnyOfStrategy,
) -> Result<FinalPlacement> {
    let mut placed: Vec<PlacedCluster> =
        Vec::with_capacity(placement.mandatory.len() + placement.any_of.len());
    let mut removed_mandatory = Vec::new();
    for (i, c) in placement.mandatory.iter().enumerate() {
        if keep(c) {
            placed.push(PlacedCluster {
                cluster: c.clone(),
                group: Placement::mandatory_group(i),
            });
        } else {
            removed_mandatory.push(c.clone());
        }
    }
    // The kept mandatory clusters, still sorted: `placed` holds nothing else yet.
    let kept_mandatory = placed.len();
    let mut choices = Vec::new();
    let mut unsatisfied_groups = Vec::new();
    let mut survivors: Vec<&ClusterRef> = Vec::new();
    for group in &placement.any_of {
        survivors.clear();
        survivors.extend(group.clusters.iter().filter(|c| keep(c)));
        if survivors.is_empty() {
            unsatisfied_groups.push(group.number);
            continue;
        }
        let choice = match first_common(&survivors, &placed[..kept_mandatory]) {
            Some(c) => GroupChoice {
                group: group.number,
                cluster: c.clone(),
                by_mandatory: true,
            },
            None => {
                let i = strategy.choose(&placement.app, group, &survivors);
                let chosen = survivors.get(i).ok_or_else(|| {
                    Error::internal(format!(
                        "anyOf strategy {strategy:?} chose candidate {i} of {} for group {} of app {:?}",
                        survivors.len(),
                        group.number,
                        placement.app
                    ))
                })?;
                GroupChoice {
                    group: group.number,
                    cluster: (*chosen).clone(),
                    by_mandatory: false,
                }
            }
        };
        choices.push(choice);
    }
    placed.extend(
        choices
            .iter()
            .filter(|c| !c.by_mandatory)
            .map(|c| PlacedCluster {
                cluster: c.cluster.clone(),
                group: c.group,
            }),
    );
    // A cluster chosen by several groups is placed once, under the smallest group number.
    placed.sort_by(|a, b| a.cluster.cmp(&b.cluster).then(a.group.cmp(&b.group)));
    placed.dedup_by(|later, first| later.cluster == first.cluster);
    if placed.is_empty() {
        return Err(Error::failed_precondition(format!(
            "no compatible clusters for app {:?}: the placement controllers removed every candidate",
            placement.app
        )));
    }
    Ok(FinalPlacement {
        app: placement.app.clone(),
        clusters: placed,
        choices,
        removed_mandatory,
        unsatisfied_groups,
    })
}

/// The first cluster of `candidates` that is also in `mandatory`; both sorted, so one merge walk
/// (linear, where a search per candidate would cost a logarithm of string comparisons each).
fn first_common<'a>(
    candidates: &[&'a ClusterRef],
    mandatory: &[PlacedCluster],
) -> Option<&'a ClusterRef> {
    let (mut i, mut j) = (0, 0);
    while let (Some(&c), Some(m)) = (candidates.get(i), mandatory.get(j)) {
        match c.cmp(&m.cluster) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return Some(c),
        }
    }
    None
}
