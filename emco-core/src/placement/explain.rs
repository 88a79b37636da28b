//! [`explain`]: which entries of the app placement intents select a cluster for an app, for a
//! preview to say why each cluster gets it.

use serde::{Deserialize, Serialize};

use super::cluster::ClusterRef;
use super::intent::{AnyOf, AppPlacementIntent, Target};
use super::inventory::Inventory;

/// How an entry places an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Rule {
    /// An allOf entry: the cluster is mandatory.
    AllOf,
    /// An anyOf entry: the cluster is one alternative of a group of which one is kept.
    AnyOf,
}

/// One entry of an app placement intent that selects a cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reason {
    /// The app placement intent.
    pub intent: String,
    /// The entry's field path in it, e.g. `spec.intent.allOf[0]` or
    /// `spec.intent.allOf[1].anyOf[0]`.
    pub path: String,
    /// Whether it makes the cluster mandatory or one alternative.
    pub rule: Rule,
    /// The cluster the entry names, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The label the entry selects by, when it selects by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_label: Option<String>,
}

/// The entries of the intents for `app` that select `cluster`, in intent-name then field order.
/// Entries that do not validate select nothing (resolving them fails first).
#[must_use]
pub fn explain(
    intents: &[AppPlacementIntent],
    inventory: &Inventory,
    app: &str,
    cluster: &ClusterRef,
) -> Vec<Reason> {
    let mut intents: Vec<&AppPlacementIntent> =
        intents.iter().filter(|i| i.spec.app == app).collect();
    intents.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let id = inventory.id_of(cluster.provider(), cluster.cluster());
    let selects = |provider: &str, target: Target<'_>| {
        provider == cluster.provider()
            && match target {
                Target::Cluster(c) => c == cluster.cluster(),
                // Label lists are sorted by id: a search, not a scan, per cluster.
                Target::Label(l) => {
                    id.is_some_and(|id| inventory.label_ids(provider, l).binary_search(&id).is_ok())
                }
            }
    };
    let reason = |intent: &AppPlacementIntent, path: String, rule: Rule, target: Target<'_>| {
        let (named, label) = match target {
            Target::Cluster(c) => (Some(c.to_owned()), None),
            Target::Label(l) => (None, Some(l.to_owned())),
        };
        Reason {
            intent: intent.metadata.name.clone(),
            path,
            rule,
            cluster: named,
            cluster_label: label,
        }
    };
    let mut out = Vec::new();
    let any_of = |intent: &AppPlacementIntent, at: &str, entries: &[AnyOf], out: &mut Vec<_>| {
        for (i, e) in entries.iter().enumerate() {
            if let Ok(t) = e.target()
                && selects(&e.cluster_provider, t)
            {
                out.push(reason(intent, format!("{at}[{i}]"), Rule::AnyOf, t));
            }
        }
    };
    for intent in intents {
        for (i, all_of) in intent.spec.intent.all_of.iter().enumerate() {
            let at = format!("spec.intent.allOf[{i}]");
            if let Ok(Some(t)) = all_of.target()
                && selects(&all_of.cluster_provider, t)
            {
                out.push(reason(intent, at.clone(), Rule::AllOf, t));
            }
            any_of(intent, &format!("{at}.anyOf"), &all_of.any_of, &mut out);
        }
        any_of(
            intent,
            "spec.intent.anyOf",
            &intent.spec.intent.any_of,
            &mut out,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_selecting_the_cluster_is_named() {
        let inv = Inventory::builder()
            .cluster("edge", "c1", ["east"])
            .cluster("edge", "c2", ["west"])
            .build();
        let intent: AppPlacementIntent = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "fw"},
            "spec": {"app": "firewall", "intent": {
                "allOf": [{"clusterProvider": "edge", "clusterLabel": "east"},
                          {"anyOf": [{"clusterProvider": "edge", "cluster": "c2"}]}],
                "anyOf": [{"clusterProvider": "other", "cluster": "c1"},
                          {"clusterProvider": "edge", "cluster": "c1"}]}}}))
        .unwrap();
        let c1 = explain(
            std::slice::from_ref(&intent),
            &inv,
            "firewall",
            &ClusterRef::new("edge", "c1"),
        );
        let paths: Vec<(&str, Rule)> = c1.iter().map(|r| (r.path.as_str(), r.rule)).collect();
        assert_eq!(
            paths,
            [
                ("spec.intent.allOf[0]", Rule::AllOf),
                ("spec.intent.anyOf[1]", Rule::AnyOf)
            ]
        );
        assert_eq!(c1[0].cluster_label.as_deref(), Some("east"));
        assert_eq!(c1[1].cluster.as_deref(), Some("c1"));
        let c2 = explain(
            std::slice::from_ref(&intent),
            &inv,
            "firewall",
            &ClusterRef::new("edge", "c2"),
        );
        assert_eq!(c2.len(), 1);
        assert_eq!(c2[0].path, "spec.intent.allOf[1].anyOf[0]");
        assert!(explain(&[intent], &inv, "other-app", &ClusterRef::new("edge", "c1")).is_empty());
    }
}
