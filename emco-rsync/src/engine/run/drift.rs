//! What a readiness follower does about the drift its eyes see, by the group's drift policy
//! (`emco_core::drift`, carried in the context): an object that was on the cluster and is gone
//! is drift too (path `""`, removed), ignored fields and objects are taken out of the entries, `correct` applies a drifted object again (at most once per interval; after the drift
//! came back `maxCorrections` times in a row it gives up and says so), and each newly drifted or
//! corrected object is counted in the metrics.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use emco_core::drift::{DriftAction, DriftRule, DriftSpec};
use emco_core::model::status::DriftedField;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::Run;
use crate::connector::{Batch, Connector, Resource, ResourceId};

/// How many intervals without drift end a fight: the corrections count from zero again.
const CALM_INTERVALS: u32 = 4;

/// One object the follower has seen drift.
#[derive(Debug)]
struct Drifting {
    /// Corrections in a row.
    corrections: u32,
    /// When it was last corrected.
    last: Option<Instant>,
    /// When it last had drift.
    seen: Instant,
    /// Why emco-rs stopped correcting it.
    gave_up: Option<String>,
}

/// The drift keeping of one follower (an app on a cluster).
#[derive(Debug)]
pub(super) struct Keeper {
    policy: Option<Arc<DriftSpec>>,
    interval: Duration,
    objects: HashMap<String, Drifting>,
    /// Per resource (in the follower's order): whether it was seen on the cluster.
    present: Vec<bool>,
}

impl Keeper {
    pub(super) fn new(policy: Option<Arc<DriftSpec>>) -> Self {
        let interval = policy
            .as_ref()
            .and_then(|p| p.correct_interval().ok())
            .unwrap_or(Duration::from_secs(30));
        Self {
            policy,
            interval,
            objects: HashMap::new(),
            present: Vec::new(),
        }
    }

    /// Takes the first `n` resources as seen on the cluster: a follower started again after a
    /// restart follows objects its deploy applied, so one missing at its first look was
    /// deleted meanwhile.
    pub(super) fn applied_before(mut self, n: usize) -> Self {
        self.present = vec![true; n];
        self
    }

    /// Marks `entry` (of resource `i`, `id`) as drift when the object was on the cluster and is
    /// gone: someone deleted it (emco-rs stops following before it deletes). Jobs and Pods end
    /// by themselves (a finished Job's time to live), so their going is no drift.
    fn deleted(&mut self, i: usize, id: &ResourceId, entry: &mut Value) {
        let present = entry.get("present").and_then(Value::as_bool) == Some(true);
        // Seen absent, not unknown nor failed to look at (an unreachable cluster, a type that
        // cannot be watched: those carry a reason).
        let known = entry.get("unknown").and_then(Value::as_bool) != Some(true)
            && entry.get("reason").is_none();
        if present {
            self.present[i] = true;
        } else if known && self.present[i] && !matches!(id.kind.as_str(), "Job" | "Pod") {
            entry["drift"] = json!([{"path": "", "manager": "unknown", "removed": true}]);
        }
    }

    fn rule(&self, app: &str, kind: &str) -> DriftRule {
        self.policy.as_ref().map_or(
            DriftRule {
                action: DriftAction::Report,
                ignore_fields: Vec::new(),
            },
            |p| p.rule_for(app, kind),
        )
    }

    /// Applies the policy to `entries` (by resource name, `rs` giving each one's id): returns
    /// the resources newly drifted (for the metrics), those to correct now, and when the next
    /// correction falls due.
    pub(super) fn judge(
        &mut self,
        app: &str,
        rs: &[(String, ResourceId)],
        entries: &mut Map<String, Value>,
    ) -> Judged {
        let now = Instant::now();
        let mut out = Judged::default();
        let max = self.policy.as_ref().map_or(3, |p| p.max_corrections);
        self.present.resize(rs.len(), false);
        for (i, (name, id)) in rs.iter().enumerate() {
            let Some(entry) = entries.get_mut(name) else {
                continue;
            };
            self.deleted(i, id, entry);
            let seen: Vec<DriftedField> = entry
                .get("drift")
                .and_then(|d| serde_json::from_value(d.clone()).ok())
                .unwrap_or_default();
            // The rule only matters for an object with drift: most looks have none.
            let rule = (!seen.is_empty()).then(|| self.rule(app, &id.kind));
            let fields: Vec<DriftedField> = match &rule {
                Some(rule) if rule.action != DriftAction::Ignore => seen
                    .into_iter()
                    .filter(|f| !rule.ignores(&f.path))
                    .collect(),
                _ => Vec::new(),
            };
            let Some(map) = entry.as_object_mut() else {
                continue;
            };
            if fields.is_empty() {
                map.remove("drift");
                let calm = self.interval * CALM_INTERVALS;
                if self
                    .objects
                    .get(name)
                    .is_some_and(|d| now.duration_since(d.seen) > calm)
                {
                    self.objects.remove(name);
                }
            } else {
                map.insert("drift".to_owned(), json!(fields));
                let known = self.objects.contains_key(name);
                let d = self.objects.entry(name.clone()).or_insert(Drifting {
                    corrections: 0,
                    last: None,
                    seen: now,
                    gave_up: None,
                });
                if !known || now.duration_since(d.seen) > self.interval * CALM_INTERVALS {
                    out.new_drift.push(id.kind.clone());
                }
                d.seen = now;
                if let Some(rule) = &rule
                    && rule.action == DriftAction::Correct
                    && d.gave_up.is_none()
                {
                    let due = d.last.map_or(now, |l| l + self.interval);
                    if d.corrections >= max {
                        let by: Vec<&str> = fields.iter().map(|f| f.manager.as_str()).collect();
                        d.gave_up = Some(format!(
                            "corrected {} times, changed back each time by {}: left as it is",
                            d.corrections,
                            by.join(", ")
                        ));
                    } else if due <= now {
                        d.corrections += 1;
                        d.last = Some(now);
                        out.correct.push((name.clone(), rule.ignore_fields.clone()));
                    } else {
                        let wait = due - now;
                        out.next = Some(out.next.map_or(wait, |n: Duration| n.min(wait)));
                    }
                }
            }
            if let (Some(d), Some(map)) = (self.objects.get(name), entry.as_object_mut()) {
                if d.corrections > 0 {
                    map.insert("driftCorrections".to_owned(), json!(d.corrections));
                }
                if let Some(why) = &d.gave_up {
                    map.insert("driftGaveUp".to_owned(), json!(why));
                }
            }
        }
        out
    }
}

/// What [`Keeper::judge`] found.
#[derive(Debug, Default)]
pub(super) struct Judged {
    /// The kinds of the objects that newly drifted.
    pub(super) new_drift: Vec<String>,
    /// The objects to apply again now, each with the fields to leave out.
    pub(super) correct: Vec<(String, Vec<String>)>,
    /// When the next correction falls due.
    pub(super) next: Option<Duration>,
}

/// Removes the field at dotted `path` from `manifest` (a path through lists is left alone: the
/// object keeps what it has there).
fn strip(manifest: &mut Value, path: &str) {
    if path.contains('[') {
        return;
    }
    let mut parts: Vec<&str> = path.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut at = manifest;
    for p in parts {
        match at.get_mut(p) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(last);
    }
}

impl Run {
    /// The drift policy of the context, read once per operation.
    pub(super) async fn drift_policy(&self) -> Option<Arc<DriftSpec>> {
        self.drift
            .get_or_init(|| async {
                match self.ctx.drift_policy::<DriftSpec>().await {
                    Ok(p) => p.map(Arc::new),
                    Err(e) => {
                        tracing::warn!(ctx = %self.ctx.id(), error = %e, "cannot read the drift policy: drift is reported");
                        None
                    }
                }
            })
            .await
            .clone()
    }

    /// The group the context deploys, as the drift metrics label it.
    pub(super) fn group_label(&self) -> String {
        format!(
            "{}/{}/{}",
            self.meta.project, self.meta.composite_app, self.meta.deployment_intent_group
        )
    }

    /// Applies the resources `which` of `app` on `cluster` again, as the context has them, each
    /// without its fields to leave out; a failure is logged (the next drift tries again).
    pub(super) async fn correct_drift(
        &self,
        conn: &Arc<dyn Connector>,
        app: &str,
        cluster: &str,
        which: &[(String, Vec<String>)],
    ) {
        let mut batch = Batch::new(self.scope(app));
        for (name, leave_out) in which {
            let resource = match self.ctx.resource(app, cluster, name).await {
                Ok(Some(yaml)) => Resource::from_yaml(&yaml).and_then(|r| {
                    let mut manifest = r.manifest().clone();
                    for path in leave_out {
                        strip(&mut manifest, path);
                    }
                    Resource::from_value(manifest)
                }),
                Ok(None) => continue,
                Err(e) => Err(e),
            };
            match resource {
                Ok(r) => batch.resources.push(r),
                Err(e) => {
                    tracing::warn!(app, cluster, resource = %name, error = %e, "cannot correct drift");
                }
            }
        }
        if batch.resources.is_empty() {
            return;
        }
        let result = {
            let _permits = self.permits(cluster).await;
            match self.leased(conn.apply(&batch)).await {
                Some(r) => r,
                None => return,
            }
        };
        let group = self.group_label();
        let done = match &result {
            Ok(_) => batch.resources.len(),
            Err(e) => e.done,
        };
        for r in &batch.resources[..done] {
            tracing::info!(app, cluster, resource = %r.id(), "drift corrected: applied again");
            self.inner
                .metrics
                .drift_corrected
                .inc(&[&group, cluster, &r.id().kind]);
        }
        if let Err(e) = result {
            tracing::warn!(app, cluster, error = %e.error, "a drift correction failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str) -> ResourceId {
        ResourceId {
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            namespace: None,
            name: "x".to_owned(),
        }
    }

    fn drifted(paths: &[&str]) -> Value {
        let fields: Vec<Value> = paths
            .iter()
            .map(|p| json!({"path": p, "manager": "hand"}))
            .collect();
        json!({"present": true, "ready": true, "drift": fields})
    }

    #[test]
    fn ignored_fields_and_objects_are_no_drift() {
        let policy: DriftSpec = serde_json::from_value(json!({
            "ignoreFields": ["spec.replicas"],
            "overrides": [{"kind": "Secret", "action": "ignore"}]}))
        .unwrap();
        let mut k = Keeper::new(Some(Arc::new(policy)));
        let rs = vec![
            ("d+Deployment".to_owned(), id("Deployment")),
            ("s+Secret".to_owned(), id("Secret")),
            ("c+ConfigMap".to_owned(), id("ConfigMap")),
        ];
        let mut entries = Map::new();
        entries.insert("d+Deployment".to_owned(), drifted(&["spec.replicas"]));
        entries.insert("s+Secret".to_owned(), drifted(&["data.k"]));
        entries.insert("c+ConfigMap".to_owned(), drifted(&["data.k"]));
        let judged = k.judge("a", &rs, &mut entries);
        assert!(entries["d+Deployment"].get("drift").is_none());
        assert!(entries["s+Secret"].get("drift").is_none());
        assert_eq!(entries["c+ConfigMap"]["drift"][0]["path"], "data.k");
        assert_eq!(judged.new_drift, ["ConfigMap"]);
        assert!(judged.correct.is_empty(), "report only");
        // Seen again: not new.
        assert!(k.judge("a", &rs, &mut entries).new_drift.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn corrections_wait_their_interval_and_give_up_on_a_fight() {
        let policy: DriftSpec = serde_json::from_value(json!({
            "action": "correct", "correctInterval": "10s", "maxCorrections": 2,
            "ignoreFields": ["metadata.labels.x"]}))
        .unwrap();
        let mut k = Keeper::new(Some(Arc::new(policy)));
        let rs = vec![("c+ConfigMap".to_owned(), id("ConfigMap"))];
        let look = |k: &mut Keeper| {
            let mut entries = Map::new();
            entries.insert("c+ConfigMap".to_owned(), drifted(&["data.k"]));
            let j = k.judge("a", &rs, &mut entries);
            (j, entries.remove("c+ConfigMap").unwrap())
        };
        let (j, _) = look(&mut k);
        assert_eq!(
            j.correct,
            [(
                "c+ConfigMap".to_owned(),
                vec!["metadata.labels.x".to_owned()]
            )]
        );
        // Back at once: not before the interval.
        tokio::time::advance(Duration::from_secs(3)).await;
        let (j, e) = look(&mut k);
        assert!(j.correct.is_empty());
        assert_eq!(j.next, Some(Duration::from_secs(7)));
        assert_eq!(e["driftCorrections"], 1);
        tokio::time::advance(Duration::from_secs(7)).await;
        assert_eq!(look(&mut k).0.correct.len(), 1);
        // Back again after two corrections: a fight, given up.
        tokio::time::advance(Duration::from_secs(10)).await;
        let (j, e) = look(&mut k);
        assert!(j.correct.is_empty());
        assert_eq!(
            e["driftGaveUp"],
            "corrected 2 times, changed back each time by hand: left as it is"
        );
    }

    #[test]
    fn a_deleted_object_is_drift_and_is_corrected() {
        let policy: DriftSpec = serde_json::from_value(json!({"action": "correct"})).unwrap();
        let mut k = Keeper::new(Some(Arc::new(policy)));
        let rs = vec![
            ("c+ConfigMap".to_owned(), id("ConfigMap")),
            ("j+Job".to_owned(), id("Job")),
        ];
        let look = |k: &mut Keeper, present: bool| {
            let mut entries = Map::new();
            for (n, _) in &rs {
                entries.insert(n.clone(), json!({"present": present, "ready": present}));
            }
            let j = k.judge("a", &rs, &mut entries);
            (j, entries)
        };
        // Absent before it was ever seen (not applied yet): nothing.
        assert!(look(&mut k, false).0.correct.is_empty());
        look(&mut k, true);
        let (j, e) = look(&mut k, false);
        assert_eq!(e["c+ConfigMap"]["drift"][0]["removed"], true);
        assert_eq!(e["c+ConfigMap"]["drift"][0]["path"], "");
        assert!(e["j+Job"].get("drift").is_none(), "a Job ends by itself");
        assert_eq!(
            j.correct,
            [("c+ConfigMap".to_owned(), Vec::<String>::new())]
        );
    }

    #[test]
    fn after_a_restart_an_object_applied_before_and_missing_is_drift() {
        let mut k = Keeper::new(None).applied_before(2);
        let rs = vec![
            ("c+ConfigMap".to_owned(), id("ConfigMap")),
            ("d+ConfigMap".to_owned(), id("ConfigMap")),
        ];
        // The cluster cannot be asked yet (a reason) or not listed yet (unknown): no drift.
        let mut entries = Map::new();
        entries.insert(
            "c+ConfigMap".to_owned(),
            json!({"present": false, "ready": false, "reason": "connection refused"}),
        );
        entries.insert(
            "d+ConfigMap".to_owned(),
            json!({"present": false, "ready": false, "unknown": true}),
        );
        k.judge("a", &rs, &mut entries);
        assert!(
            entries.values().all(|e| e.get("drift").is_none()),
            "{entries:?}"
        );
        // Listed: one is there, the other was deleted while nobody watched.
        entries.insert(
            "c+ConfigMap".to_owned(),
            json!({"present": true, "ready": true}),
        );
        entries.insert(
            "d+ConfigMap".to_owned(),
            json!({"present": false, "ready": false}),
        );
        let judged = k.judge("a", &rs, &mut entries);
        assert!(entries["c+ConfigMap"].get("drift").is_none());
        assert_eq!(entries["d+ConfigMap"]["drift"][0]["removed"], true);
        assert_eq!(judged.new_drift, ["ConfigMap"]);
    }

    #[test]
    fn stripping_leaves_out_map_fields_only() {
        let mut m = json!({"spec": {"replicas": 3, "template": {}}, "metadata": {"labels": {"x": "1", "y": "2"}}});
        strip(&mut m, "spec.replicas");
        strip(&mut m, "metadata.labels.x");
        strip(&mut m, "spec.containers[name=a].image");
        strip(&mut m, "nothing.here");
        assert_eq!(
            m,
            json!({"spec": {"template": {}}, "metadata": {"labels": {"y": "2"}}})
        );
    }
}
