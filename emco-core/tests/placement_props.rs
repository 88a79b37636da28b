//! Property tests of placement: `resolve` against an independent model of EMCO.md section 4, and
//! `finalize`'s invariants (nothing outside the inventory or logical cloud, every surviving
//! mandatory cluster placed, exactly one cluster per anyOf group with survivors, order
//! independence).

use std::collections::{BTreeMap, BTreeSet};

use emco_core::placement::{
    AllOf, AnyOf, AppPlacementIntent, AppPlacementSpec, ClusterRef, FinalPlacement,
    FirstLexicographic, Inventory, Placement, PlacementIntent, finalize, resolve,
};
use emco_core::{ErrorKind, Metadata, Result};
use proptest::prelude::*;

/// A cluster of the generated inventory.
#[derive(Debug, Clone)]
struct Cl {
    provider: String,
    cluster: String,
    labels: Vec<String>,
    in_lc: bool,
    removed: bool,
}

impl Cl {
    fn r(&self) -> ClusterRef {
        ClusterRef::new(self.provider.as_str(), self.cluster.as_str())
    }
}

#[derive(Debug, Clone)]
struct Case {
    clusters: Vec<Cl>,
    use_lc: bool,
    intents: Vec<AppPlacementIntent>,
}

/// An entry pointing at inventory cluster `idx`: by its name, or by a label of its provider.
fn entry(clusters: &[Cl], (idx, by_label, label): (usize, bool, u8)) -> AnyOf {
    let c = &clusters[idx % clusters.len()];
    AnyOf {
        cluster_provider: c.provider.clone(),
        cluster: if by_label {
            String::new()
        } else {
            c.cluster.clone()
        },
        cluster_label: if by_label {
            format!("l{label}")
        } else {
            String::new()
        },
    }
}

fn case() -> impl Strategy<Value = Case> {
    let cl = (
        0..3u8,
        0..8u8,
        prop::collection::vec(0..4u8, 0..3),
        any::<bool>(),
        prop::bool::weighted(0.2),
    );
    (prop::collection::vec(cl, 1..25), any::<bool>()).prop_flat_map(|(raw, use_lc)| {
        let clusters: Vec<Cl> = raw
            .into_iter()
            .map(|(p, c, labels, in_lc, removed)| Cl {
                provider: format!("p{p}"),
                cluster: format!("c{c}"),
                labels: labels.into_iter().map(|l| format!("l{l}")).collect(),
                in_lc,
                removed,
            })
            .collect();
        let e = (0..64usize, any::<bool>(), 0..4u8);
        let all_of = (
            e.clone(),
            any::<bool>(),
            prop::collection::vec(e.clone(), 0..3),
        );
        let intent = (
            0..3u8,
            prop::collection::vec(all_of, 0..3),
            prop::collection::vec(e, 0..3),
        );
        let cls = clusters.clone();
        prop::collection::vec(intent, 1..6).prop_map(move |raw_intents| {
            let intents = raw_intents
                .into_iter()
                .enumerate()
                .map(|(n, (app, all_of, any_of))| AppPlacementIntent {
                    metadata: Metadata::named(format!("i{n}")),
                    spec: AppPlacementSpec {
                        app: format!("a{app}"),
                        intent: PlacementIntent {
                            all_of: all_of
                                .into_iter()
                                .map(|(target, holder, nested)| {
                                    let nested: Vec<AnyOf> =
                                        nested.into_iter().map(|x| entry(&cls, x)).collect();
                                    // A holder element names no cluster, only its nested group.
                                    let t = if holder && !nested.is_empty() {
                                        AnyOf::default()
                                    } else {
                                        entry(&cls, target)
                                    };
                                    AllOf {
                                        cluster_provider: t.cluster_provider,
                                        cluster: t.cluster,
                                        cluster_label: t.cluster_label,
                                        any_of: nested,
                                    }
                                })
                                .collect(),
                            any_of: any_of.into_iter().map(|x| entry(&cls, x)).collect(),
                        },
                    },
                })
                .collect();
            Case {
                clusters: clusters.clone(),
                use_lc,
                intents,
            }
        })
    })
}

fn inventory(case: &Case, order: &[usize]) -> Inventory {
    let mut b = Inventory::builder();
    for &i in order {
        let c = &case.clusters[i];
        b.add_cluster(c.r(), c.labels.iter().cloned());
    }
    if case.use_lc {
        // Membership is per distinct cluster: a duplicate entry counts if any copy is a member.
        b = b.logical_cloud(
            order
                .iter()
                .map(|&i| &case.clusters[i])
                .filter(|c| c.in_lc)
                .map(Cl::r),
        );
    }
    b.build()
}

/// Distinct clusters of the case with their merged labels, membership and removal.
fn model_inventory(case: &Case) -> BTreeMap<ClusterRef, (BTreeSet<String>, bool, bool)> {
    let mut m: BTreeMap<ClusterRef, (BTreeSet<String>, bool, bool)> = BTreeMap::new();
    for c in &case.clusters {
        let e = m
            .entry(c.r())
            .or_insert_with(|| (BTreeSet::new(), !case.use_lc, false));
        e.0.extend(c.labels.iter().cloned());
        e.1 |= c.in_lc;
        e.2 |= c.removed;
    }
    m
}

fn select(
    inv: &BTreeMap<ClusterRef, (BTreeSet<String>, bool, bool)>,
    provider: &str,
    cluster: &str,
    label: &str,
) -> Vec<ClusterRef> {
    inv.iter()
        .filter(|(r, (labels, _, _))| {
            r.provider() == provider
                && if label.is_empty() {
                    r.cluster() == cluster
                } else {
                    labels.contains(label)
                }
        })
        .map(|(r, _)| r.clone())
        .collect()
}

/// EMCO.md section 4 written the simple way: the expected result per app, or the expected error
/// kind of the first failing app.
fn model(case: &Case) -> std::result::Result<Vec<Placement>, ErrorKind> {
    let inv = model_inventory(case);
    let member = |r: &ClusterRef| inv.get(r).is_some_and(|e| e.1);
    let mut apps: BTreeMap<String, (BTreeSet<ClusterRef>, BTreeSet<Vec<ClusterRef>>)> =
        BTreeMap::new();
    for i in &case.intents {
        apps.entry(i.spec.app.clone()).or_default();
    }
    let mut out = Vec::new();
    for (app, (mut mandatory, mut groups)) in apps {
        let mut intents: Vec<&AppPlacementIntent> =
            case.intents.iter().filter(|i| i.spec.app == app).collect();
        intents.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for i in intents {
            if i.spec.intent.all_of.is_empty() && i.spec.intent.any_of.is_empty() {
                return Err(ErrorKind::InvalidArgument);
            }
            let mut lists: Vec<&[AnyOf]> = vec![&i.spec.intent.any_of];
            for a in &i.spec.intent.all_of {
                if !(a.cluster.is_empty() && a.cluster_label.is_empty()) {
                    let sel = select(&inv, &a.cluster_provider, &a.cluster, &a.cluster_label);
                    if sel.iter().any(|r| !member(r)) {
                        return Err(ErrorKind::InvalidArgument);
                    }
                    mandatory.extend(sel);
                }
                lists.push(&a.any_of);
            }
            for list in lists {
                let g: BTreeSet<ClusterRef> = list
                    .iter()
                    .flat_map(|e| select(&inv, &e.cluster_provider, &e.cluster, &e.cluster_label))
                    .filter(|r| member(r))
                    .collect();
                if !g.is_empty() {
                    groups.insert(g.into_iter().collect());
                }
            }
        }
        if mandatory.is_empty() && groups.is_empty() {
            return Err(ErrorKind::FailedPrecondition);
        }
        let m = u32::try_from(mandatory.len()).expect("few clusters");
        out.push(Placement {
            app,
            mandatory: mandatory.into_iter().collect(),
            any_of: groups
                .into_iter()
                .zip(m + 1..)
                .map(|(clusters, number)| emco_core::placement::AnyOfGroup { number, clusters })
                .collect(),
        });
    }
    Ok(out)
}

fn run(
    case: &Case,
    order: &[usize],
    intents: &[AppPlacementIntent],
) -> Result<Vec<(Placement, Result<FinalPlacement>)>> {
    let inv = inventory(case, order);
    let removed: BTreeSet<ClusterRef> = case
        .clusters
        .iter()
        .filter(|c| c.removed)
        .map(Cl::r)
        .collect();
    let placements = resolve(intents, &inv)?;
    Ok(placements
        .into_iter()
        .map(|p| {
            let f = finalize(&p, |c| !removed.contains(c), &FirstLexicographic);
            (p, f)
        })
        .collect())
}

/// A comparable rendering of a run. A resolve error is compared by kind: when several entries
/// are wrong, which one is reported first follows the entry order.
fn render(r: &Result<Vec<(Placement, Result<FinalPlacement>)>>) -> String {
    match r {
        Ok(v) => v
            .iter()
            .map(|(p, f)| {
                format!(
                    "{p:?} => {:?}",
                    f.as_ref().map_err(|e| (e.kind(), e.to_string()))
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("error {:?}", e.kind()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn resolve_matches_the_model(case in case()) {
        let order: Vec<usize> = (0..case.clusters.len()).collect();
        let inv = inventory(&case, &order);
        match (resolve(&case.intents, &inv), model(&case)) {
            (Ok(got), Ok(want)) => prop_assert_eq!(got, want),
            (Err(e), Err(kind)) => prop_assert_eq!(e.kind(), kind, "{}", e),
            (got, want) => prop_assert!(false, "resolve {:?} but model {:?}", got.map(|_| ()), want.map(|_| ())),
        }
    }

    #[test]
    fn placements_stay_inside_inventory_and_logical_cloud(case in case()) {
        let order: Vec<usize> = (0..case.clusters.len()).collect();
        let inv = inventory(&case, &order);
        let Ok(results) = run(&case, &order, &case.intents) else { return Ok(()); };
        for (p, f) in results {
            for c in p.candidates() {
                prop_assert!(inv.contains(&c) && inv.in_logical_cloud(&c), "{c} placed for {}", p.app);
            }
            if let Ok(f) = f {
                for pc in &f.clusters {
                    prop_assert!(inv.in_logical_cloud(&pc.cluster));
                }
            }
        }
    }

    #[test]
    fn finalize_keeps_mandatory_and_one_per_group(case in case()) {
        let order: Vec<usize> = (0..case.clusters.len()).collect();
        let removed: BTreeSet<ClusterRef> = case.clusters.iter().filter(|c| c.removed).map(Cl::r).collect();
        let Ok(results) = run(&case, &order, &case.intents) else { return Ok(()); };
        for (p, f) in results {
            let kept_mandatory: BTreeSet<ClusterRef> = p.mandatory.iter().filter(|c| !removed.contains(*c)).cloned().collect();
            let mut expected: BTreeSet<ClusterRef> = kept_mandatory.clone();
            let mut choices = BTreeMap::new();
            match &f {
                Ok(f) => {
                    let placed: BTreeSet<ClusterRef> = f.clusters.iter().map(|c| c.cluster.clone()).collect();
                    prop_assert_eq!(placed.len(), f.clusters.len(), "distinct");
                    prop_assert!(kept_mandatory.is_subset(&placed), "every surviving mandatory cluster is placed");
                    let removed_m: Vec<ClusterRef> = p.mandatory.iter().filter(|c| removed.contains(*c)).cloned().collect();
                    prop_assert_eq!(&f.removed_mandatory, &removed_m);
                    for ch in &f.choices {
                        prop_assert!(choices.insert(ch.group, ch.clone()).is_none(), "one choice per group");
                    }
                    for g in &p.any_of {
                        let survivors: Vec<&ClusterRef> = g.clusters.iter().filter(|c| !removed.contains(*c)).collect();
                        if survivors.is_empty() {
                            prop_assert!(!choices.contains_key(&g.number));
                            prop_assert!(f.unsatisfied_groups.contains(&g.number));
                            continue;
                        }
                        let ch = &choices[&g.number];
                        prop_assert!(survivors.contains(&&ch.cluster));
                        let holds_mandatory = survivors.iter().any(|c| kept_mandatory.contains(*c));
                        prop_assert_eq!(ch.by_mandatory, holds_mandatory, "a surviving mandatory member satisfies the group");
                        if !holds_mandatory {
                            prop_assert_eq!(&ch.cluster, survivors[0], "default strategy: first survivor");
                        }
                        expected.insert(ch.cluster.clone());
                    }
                    prop_assert_eq!(placed, expected);
                }
                Err(e) => {
                    prop_assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
                    prop_assert!(kept_mandatory.is_empty());
                    prop_assert!(p.any_of.iter().all(|g| g.clusters.iter().all(|c| removed.contains(c))));
                }
            }
        }
    }

    #[test]
    fn order_does_not_matter(case in case(), seed in any::<u64>()) {
        let n = case.clusters.len();
        let order: Vec<usize> = (0..n).collect();
        // A deterministic shuffle from the seed (an LCG), and reversed entries in every intent.
        let mut shuffled = order.clone();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            shuffled.swap(i, usize::try_from(s >> 33).unwrap() % (i + 1));
        }
        let mut intents = case.intents.clone();
        intents.reverse();
        for i in &mut intents {
            i.spec.intent.all_of.reverse();
            i.spec.intent.any_of.reverse();
            for a in &mut i.spec.intent.all_of {
                a.any_of.reverse();
            }
        }
        let a = render(&run(&case, &order, &case.intents));
        let b = render(&run(&case, &shuffled, &intents));
        prop_assert_eq!(a, b);
    }
}

/// The generator must reach both successes (with groups, with removals) and each error kind,
/// or the properties above would hold vacuously.
#[test]
fn generator_covers_the_interesting_cases() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = case();
    let (mut ok_groups, mut removed_mandatory, mut invalid, mut none) = (0, 0, 0, 0);
    for _ in 0..500 {
        let c = strategy.new_tree(&mut runner).unwrap().current();
        let order: Vec<usize> = (0..c.clusters.len()).collect();
        match run(&c, &order, &c.intents) {
            Ok(v) => {
                ok_groups += usize::from(v.iter().any(|(p, _)| !p.any_of.is_empty()));
                removed_mandatory += usize::from(
                    v.iter()
                        .any(|(_, f)| f.as_ref().is_ok_and(|f| !f.removed_mandatory.is_empty())),
                );
            }
            Err(e) if e.kind() == ErrorKind::InvalidArgument => invalid += 1,
            Err(e) if e.kind() == ErrorKind::FailedPrecondition => none += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(
        ok_groups > 50 && removed_mandatory > 10 && invalid > 10 && none > 0,
        "{ok_groups} {removed_mandatory} {invalid} {none}"
    );
}
