//! One test per placement rule of EMCO.md section 4, including the EMCO quirks we fix.

use emco_core::ErrorKind;
use emco_core::placement::{
    AnyOfGroup, AnyOfStrategy, AppPlacementIntent, ClusterRef, FirstLexicographic, Inventory,
    Placement, finalize, resolve,
};
use serde_json::json;

fn inv() -> Inventory {
    Inventory::builder()
        .cluster("edge", "e1", ["east", "gpu"])
        .cluster("edge", "e2", ["east"])
        .cluster("edge", "e3", ["west"])
        .cluster("edge", "e4", ["west", "gpu"])
        .cluster("cloud", "k1", ["east"])
        .cluster("cloud", "k2", Vec::<String>::new())
        .build()
}

fn intent(name: &str, app: &str, intent: serde_json::Value) -> AppPlacementIntent {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"app": app, "intent": intent}}),
    )
    .expect("intent JSON")
}

fn names(v: &[ClusterRef]) -> Vec<String> {
    v.iter().map(ToString::to_string).collect()
}

fn one(intents: &[AppPlacementIntent], inv: &Inventory) -> Placement {
    let mut v = resolve(intents, inv).expect("resolves");
    assert_eq!(v.len(), 1);
    v.remove(0)
}

#[test]
fn named_cluster_and_label_are_mandatory_each_its_own_group() {
    let p = one(
        &[intent(
            "i",
            "a",
            json!({"allOf": [
            {"clusterProvider": "cloud", "cluster": "k2"},
            {"clusterProvider": "edge", "clusterLabel": "east"}]}),
        )],
        &inv(),
    );
    assert_eq!(names(&p.mandatory), ["cloud+k2", "edge+e1", "edge+e2"]);
    assert!(p.any_of.is_empty());
    let f = finalize(&p, |_| true, &FirstLexicographic).unwrap();
    let groups: Vec<(String, u32)> = f
        .clusters
        .iter()
        .map(|c| (c.cluster.to_string(), c.group))
        .collect();
    assert_eq!(
        groups,
        [
            ("cloud+k2".into(), 1),
            ("edge+e1".into(), 2),
            ("edge+e2".into(), 3)
        ]
    );
}

#[test]
fn label_is_scoped_to_its_provider() {
    let p = one(
        &[intent(
            "i",
            "a",
            json!({"allOf": [{"clusterProvider": "cloud", "clusterLabel": "east"}]}),
        )],
        &inv(),
    );
    assert_eq!(names(&p.mandatory), ["cloud+k1"]);
}

#[test]
fn cluster_and_label_together_are_rejected() {
    // EMCO quirk: it silently adds nothing. We answer InvalidArgument with the entry's path.
    let e = resolve(
        &[intent("i", "a", json!({"allOf": [{"clusterProvider": "edge", "cluster": "e1", "clusterLabel": "east"}]}))],
        &inv(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(e.field(), Some("spec.intent.allOf[0]"));
    assert!(e.to_string().contains("\"i\""), "{e}");
}

#[test]
fn any_of_forms_one_group_top_level_and_nested() {
    let p = one(
        &[intent(
            "i",
            "a",
            json!({
            "allOf": [{"clusterProvider": "cloud", "cluster": "k2",
                       "anyOf": [{"clusterProvider": "edge", "clusterLabel": "west"}]}],
            "anyOf": [{"clusterProvider": "edge", "cluster": "e2"}, {"clusterProvider": "cloud", "cluster": "k1"}]}),
        )],
        &inv(),
    );
    assert_eq!(names(&p.mandatory), ["cloud+k2"]);
    let groups: Vec<(u32, Vec<String>)> = p
        .any_of
        .iter()
        .map(|g| (g.number, names(&g.clusters)))
        .collect();
    assert_eq!(
        groups,
        [
            (2, vec!["cloud+k1".to_owned(), "edge+e2".to_owned()]),
            (3, vec!["edge+e3".to_owned(), "edge+e4".to_owned()])
        ]
    );
    let f = finalize(&p, |c| c.cluster() != "e3", &FirstLexicographic).unwrap();
    let placed: Vec<(String, u32)> = f
        .clusters
        .iter()
        .map(|c| (c.cluster.to_string(), c.group))
        .collect();
    assert_eq!(
        placed,
        [
            ("cloud+k1".into(), 2),
            ("cloud+k2".into(), 1),
            ("edge+e4".into(), 3)
        ]
    );
}

#[test]
fn no_compatible_clusters() {
    let e = resolve(
        &[intent(
            "i",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "clusterLabel": "nolabel"}]}),
        )],
        &inv(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
    assert!(e.message().contains("no compatible clusters"), "{e}");
}

#[test]
fn mandatory_clusters_must_be_in_the_logical_cloud() {
    let inv = Inventory::builder()
        .cluster("edge", "e1", ["east"])
        .cluster("edge", "e2", ["east"])
        .cluster("edge", "e3", ["west"])
        .logical_cloud([ClusterRef::new("edge", "e1"), ClusterRef::new("edge", "e3")])
        .build();
    let named = resolve(
        &[intent(
            "i",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "cluster": "e2"}]}),
        )],
        &inv,
    )
    .unwrap_err();
    assert_eq!(named.kind(), ErrorKind::InvalidArgument);
    assert_eq!(named.field(), Some("spec.intent.allOf[0].cluster"));
    let label = resolve(
        &[intent(
            "i",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "clusterLabel": "east"}]}),
        )],
        &inv,
    )
    .unwrap_err();
    assert_eq!(label.kind(), ErrorKind::InvalidArgument);
    assert!(label.message().contains("edge+e2"), "{label}");
    // anyOf candidates outside the logical cloud are dropped instead.
    let p = one(
        &[intent(
            "i",
            "a",
            json!({"anyOf": [{"clusterProvider": "edge", "clusterLabel": "east"}]}),
        )],
        &inv,
    );
    assert_eq!(names(&p.any_of[0].clusters), ["edge+e1"]);
    // A group left empty is dropped; nothing left at all is "no compatible clusters".
    let e = resolve(
        &[intent(
            "i",
            "a",
            json!({"anyOf": [{"clusterProvider": "edge", "cluster": "e2"}]}),
        )],
        &inv,
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
}

#[test]
fn unknown_clusters_and_providers_are_not_found() {
    let e = resolve(
        &[intent(
            "i",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "cluster": "nope"}]}),
        )],
        &inv(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.field(), Some("spec.intent.allOf[0].cluster"));
    let e = resolve(
        &[intent("i", "a", json!({"anyOf": [{"clusterProvider": "edge", "cluster": "e1"}, {"clusterProvider": "mars", "clusterLabel": "x"}]}))],
        &inv(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(e.field(), Some("spec.intent.anyOf[1].clusterProvider"));
}

#[test]
fn mandatory_member_of_an_any_of_group_is_never_pruned() {
    // EMCO quirk: the anyOf pruning could remove a cluster that is also mandatory. Here the group
    // {e1, e2} contains mandatory e2: the group is satisfied by e2 and e1 is not added.
    let p = one(
        &[intent(
            "i",
            "a",
            json!({
            "allOf": [{"clusterProvider": "edge", "cluster": "e2"}],
            "anyOf": [{"clusterProvider": "edge", "clusterLabel": "east"}]}),
        )],
        &inv(),
    );
    let f = finalize(&p, |_| true, &FirstLexicographic).unwrap();
    assert_eq!(f.clusters.len(), 1);
    assert_eq!(f.clusters[0].cluster.to_string(), "edge+e2");
    assert_eq!(f.clusters[0].group, 1);
    assert!(f.choices[0].by_mandatory);
    // When a controller removes the mandatory member, the group chooses among its survivors.
    let f = finalize(&p, |c| c.cluster() != "e2", &FirstLexicographic).unwrap();
    assert_eq!(names(&f.removed_mandatory), ["edge+e2"]);
    assert_eq!(f.clusters[0].cluster.to_string(), "edge+e1");
    assert!(!f.choices[0].by_mandatory);
}

#[test]
fn intents_of_one_app_merge_and_identical_groups_collapse() {
    let intents = [
        intent(
            "i1",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "cluster": "e1"}],
                                  "anyOf": [{"clusterProvider": "edge", "clusterLabel": "west"}]}),
        ),
        intent(
            "i2",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "cluster": "e1"}, {"clusterProvider": "cloud", "cluster": "k1"}],
                                  "anyOf": [{"clusterProvider": "edge", "cluster": "e4"}, {"clusterProvider": "edge", "cluster": "e3"}]}),
        ),
        intent(
            "i3",
            "b",
            json!({"anyOf": [{"clusterProvider": "cloud", "cluster": "k2"}]}),
        ),
    ];
    let v = resolve(&intents, &inv()).unwrap();
    assert_eq!(
        v.iter().map(|p| p.app.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(names(&v[0].mandatory), ["cloud+k1", "edge+e1"]);
    assert_eq!(v[0].any_of.len(), 1);
    assert_eq!(v[0].any_of[0].number, 3);
    assert_eq!(v[1].any_of[0].number, 1);
}

#[test]
fn controllers_win_over_mandatory_and_empty_groups_are_reported() {
    let p = one(
        &[intent(
            "i",
            "a",
            json!({
            "allOf": [{"clusterProvider": "edge", "clusterLabel": "east"}],
            "anyOf": [{"clusterProvider": "cloud", "cluster": "k2"}]}),
        )],
        &inv(),
    );
    let f = finalize(&p, |c| c.cluster() == "e2", &FirstLexicographic).unwrap();
    assert_eq!(names(&f.removed_mandatory), ["edge+e1"]);
    assert_eq!(f.unsatisfied_groups, [3]);
    assert_eq!(f.clusters.len(), 1);
    let e = finalize(&p, |_| false, &FirstLexicographic).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
    assert!(e.message().contains("no compatible clusters"));
}

#[derive(Debug)]
struct Last;
impl AnyOfStrategy for Last {
    fn choose(&self, _app: &str, _group: &AnyOfGroup, candidates: &[&ClusterRef]) -> usize {
        candidates.len() - 1
    }
}

#[derive(Debug)]
struct OutOfRange;
impl AnyOfStrategy for OutOfRange {
    fn choose(&self, _app: &str, _group: &AnyOfGroup, candidates: &[&ClusterRef]) -> usize {
        candidates.len()
    }
}

#[test]
fn strategy_is_pluggable_and_checked() {
    let p = one(
        &[intent(
            "i",
            "a",
            json!({"anyOf": [{"clusterProvider": "edge", "clusterLabel": "gpu"}, {"clusterProvider": "edge", "cluster": "e3"}]}),
        )],
        &inv(),
    );
    assert_eq!(
        names(&p.any_of[0].clusters),
        ["edge+e1", "edge+e3", "edge+e4"]
    );
    let first = finalize(&p, |_| true, &FirstLexicographic).unwrap();
    assert_eq!(first.clusters[0].cluster.to_string(), "edge+e1");
    let last = finalize(&p, |_| true, &Last).unwrap();
    assert_eq!(last.clusters[0].cluster.to_string(), "edge+e4");
    assert_eq!(last.clusters[0].group, 1);
    let e = finalize(&p, |_| true, &OutOfRange).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Internal);
}

#[test]
fn candidates_lists_everything_once() {
    let p = one(
        &[intent(
            "i",
            "a",
            json!({"allOf": [{"clusterProvider": "edge", "cluster": "e1"}],
                                   "anyOf": [{"clusterProvider": "edge", "clusterLabel": "gpu"}]}),
        )],
        &inv(),
    );
    assert_eq!(names(&p.candidates()), ["edge+e1", "edge+e4"]);
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["anyOf"][0]["clusters"], json!(["edge+e1", "edge+e4"]));
    assert_eq!(serde_json::from_value::<Placement>(json).unwrap(), p);
}
