//! Drift: fields emco-rs applied to an object that something else changed since, read from the
//! object's field ownership (`metadata.managedFields`), as the API server keeps it.
//!
//! After emco-rs writes an object it owns every field it set (its entry, manager
//! [`FIELD_MANAGER`](crate::connector::kube::FIELD_MANAGER)). When another client changes one of
//! those fields (an update or a forced apply: `kubectl edit`, `kubectl scale`, a controller), the
//! API server moves the field to that client's entry; a field removed by another client leaves
//! every entry. So a field that left emco-rs's entry while emco-rs did not write (its entry's time
//! did not move) is drift: [`Follower::observe`] names each with the manager that holds it now
//! and that manager's time (or, for a removed field, the client that wrote last).
//!
//! An object first seen when emco-rs did not write it in this process (after a restart) has no
//! baseline but what emco-rs owns now, which no longer holds a field taken while nobody watched.
//! When other managers hold fields of it then, it stays *unverified* until its manifest is at
//! hand: [`Follower::verify`] counts the fields the manifest sets and another manager holds as
//! drift too (applying a manifest owns each of its fields, so one held by someone else alone was
//! taken after emco-rs's last write).
//!
//! Paths are printed as `spec.replicas`, `data.index.html` or
//! `spec.template.spec.containers[name=server].image`.

use emco_core::poison::lock;
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use emco_core::model::status::DriftedField;
use serde_json::Value;

/// The drift of one object: the fields changed behind emco-rs's back, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Drift {
    /// The fields.
    pub fields: Vec<DriftedField>,
}

impl Drift {
    /// The managers that made it, sorted and distinct.
    #[must_use]
    pub fn managers(&self) -> Vec<&str> {
        let set: BTreeSet<&str> = self.fields.iter().map(|f| f.manager.as_str()).collect();
        set.into_iter().collect()
    }
}

/// One entry of `metadata.managedFields` (main resource only).
struct Entry {
    manager: String,
    time: Option<String>,
    fields: BTreeSet<String>,
}

/// The `metadata.managedFields` entries of `obj` but those of its status (a `scale` entry
/// changes `spec.replicas`).
fn main_entries(obj: &Value) -> impl Iterator<Item = &Value> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("subresource").and_then(Value::as_str) != Some("status"))
}

/// The [`main_entries`] of `obj`, parsed.
fn entries(obj: &Value) -> Vec<Entry> {
    main_entries(obj)
        .map(|e| {
            let mut fields = BTreeSet::new();
            if let Some(v) = e.get("fieldsV1") {
                leaves(v, &mut String::new(), &mut fields);
            }
            Entry {
                manager: e
                    .get("manager")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                time: e.get("time").and_then(Value::as_str).map(str::to_owned),
                fields,
            }
        })
        .collect()
}

/// The leaf paths of a `fieldsV1` tree under `prefix`: `f:` fields, `k:` keyed items and `v:`
/// set items; a `.` marks the item itself, which is no leaf of its own.
fn leaves(v: &Value, prefix: &mut String, out: &mut BTreeSet<String>) {
    let Some(map) = v.as_object() else { return };
    let children: Vec<(&String, &Value)> = map.iter().filter(|(k, _)| *k != ".").collect();
    if children.is_empty() {
        if !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        return;
    }
    for (k, child) in children {
        let len = prefix.len();
        if let Some(name) = k.strip_prefix("f:") {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(name);
        } else if let Some(keys) = k.strip_prefix("k:") {
            prefix.push('[');
            prefix.push_str(&item_key(keys));
            prefix.push(']');
        } else if let Some(value) = k.strip_prefix("v:") {
            prefix.push('[');
            prefix.push_str(value.trim_matches('"'));
            prefix.push(']');
        } else {
            continue;
        }
        leaves(child, prefix, out);
        prefix.truncate(len);
    }
}

/// `{"name":"server","port":80}` as `name=server,port=80`.
fn item_key(json: &str) -> String {
    match serde_json::from_str::<serde_json::Map<String, Value>>(json) {
        Ok(keys) => keys
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(","),
        Err(_) => json.to_owned(),
    }
}

/// The leaf paths of the `fieldsV1` tree `fields` (under `prefix`) that `manifest` sets: `f:`
/// fields it has, `k:` items of its lists whose key fields are equal, `v:` values its lists hold.
fn set_in(fields: &Value, manifest: &Value, prefix: &mut String, out: &mut BTreeSet<String>) {
    let Some(map) = fields.as_object() else {
        return;
    };
    for (k, child) in map.iter().filter(|(k, _)| *k != ".") {
        let len = prefix.len();
        let within = if let Some(name) = k.strip_prefix("f:") {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(name);
            manifest.get(name)
        } else if let Some(keys) = k.strip_prefix("k:") {
            prefix.push('[');
            prefix.push_str(&item_key(keys));
            prefix.push(']');
            let keys: serde_json::Map<String, Value> =
                serde_json::from_str(keys).unwrap_or_default();
            manifest.as_array().and_then(|items| {
                items.iter().find(|item| {
                    !keys.is_empty() && keys.iter().all(|(key, v)| item.get(key) == Some(v))
                })
            })
        } else if let Some(value) = k.strip_prefix("v:") {
            prefix.push('[');
            prefix.push_str(value.trim_matches('"'));
            prefix.push(']');
            let value: Option<Value> = serde_json::from_str(value).ok();
            manifest
                .as_array()
                .and_then(|items| items.iter().find(|item| Some(*item) == value.as_ref()))
        } else {
            None
        };
        if let Some(within) = within {
            let leaf = child.as_object().is_none_or(|m| m.keys().all(|k| k == "."));
            if leaf {
                out.insert(prefix.clone());
            } else {
                set_in(child, within, prefix, out);
            }
        }
        prefix.truncate(len);
    }
}

/// Whether `a` is `b` or one contains the other (a path and its descendants).
fn overlaps(a: &str, b: &str) -> bool {
    let within = |long: &str, short: &str| {
        long.strip_prefix(short)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    within(a, b) || within(b, a)
}

/// The field sets emco-rs owns, each kept once however many objects share it: the same manifest
/// on many clusters owns the same fields.
#[derive(Debug, Default)]
pub struct Interner(Mutex<HashSet<Arc<BTreeSet<String>>>>);

impl Interner {
    fn intern(&self, set: BTreeSet<String>) -> Arc<BTreeSet<String>> {
        let mut sets = lock(&self.0);
        if let Some(known) = sets.get(&set) {
            return Arc::clone(known);
        }
        let set = Arc::new(set);
        sets.insert(Arc::clone(&set));
        set
    }

    /// Drops the sets no object holds any more.
    pub fn prune(&self) {
        lock(&self.0).retain(|s| Arc::strong_count(s) > 1);
    }
}

/// What emco-rs owned of one object as of its last write: the baseline drift is measured from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Follower {
    /// Its field set then.
    owned: Option<Arc<BTreeSet<String>>>,
    /// Its entry's time then.
    time: Option<String>,
    /// The digest of the object's ownership (every entry but the status ones) at the last look:
    /// most events change only the status, and are then judged without reading the field sets.
    digest: u64,
    /// The ownership entries of an object first seen with other managers' fields, until its
    /// manifest tells which of those emco-rs applied ([`Follower::verify`]).
    unverified: Option<Box<Value>>,
}

/// What a look at an object found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Its field ownership is as at the last look: its drift is unchanged.
    Unchanged,
    /// Its drift now (`None`: none).
    Now(Option<Drift>),
}

/// A digest of `obj`'s field ownership: each entry's manager, operation and time, and its field
/// set, but those of the status subresource.
fn ownership_digest(obj: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    fn tree(v: &Value, h: &mut std::collections::hash_map::DefaultHasher) {
        if let Some(map) = v.as_object() {
            map.len().hash(h);
            for (k, child) in map {
                k.hash(h);
                tree(child, h);
            }
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for e in main_entries(obj) {
        for k in ["manager", "operation", "time"] {
            e.get(k).and_then(Value::as_str).hash(&mut h);
        }
        if let Some(f) = e.get("fieldsV1") {
            tree(f, &mut h);
        }
    }
    h.finish()
}

impl Follower {
    /// Takes in `obj` as the cluster reports it now: its drift from what emco-rs (manager
    /// `manager`) last wrote. An object emco-rs wrote since the last look (its entry's time
    /// moved) becomes the new baseline: what it applied is what it owns.
    pub fn observe(&mut self, obj: &Value, manager: &str, sets: &Interner) -> Observed {
        let digest = ownership_digest(obj);
        if self.owned.is_some() && digest == self.digest {
            return Observed::Unchanged;
        }
        self.digest = digest;
        Observed::Now(self.measure(obj, manager, sets))
    }

    /// Whether the object waits for its manifest to be judged (see the module documentation).
    #[must_use]
    pub fn is_unverified(&self) -> bool {
        self.unverified.is_some()
    }

    /// Judges an unverified object against `manifest`, what emco-rs (manager `manager`) last
    /// applied: the fields it sets that only other managers hold become part of the baseline,
    /// and so drift. Its drift now; `None` for an object that was not unverified.
    pub fn verify(&mut self, manifest: &Value, manager: &str, sets: &Interner) -> Option<Drift> {
        let fields = self.unverified.take()?;
        let obj = serde_json::json!({"metadata": {"managedFields": *fields}});
        let mut taken = BTreeSet::new();
        // Kept without the status entries (see `measure`).
        for e in fields
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e.get("manager").and_then(Value::as_str) != Some(manager))
        {
            if let Some(tree) = e.get("fieldsV1") {
                set_in(tree, manifest, &mut String::new(), &mut taken);
            }
        }
        let owned = self.owned.as_deref()?;
        if taken.iter().all(|p| owned.contains(p)) {
            return None;
        }
        taken.extend(owned.iter().cloned());
        self.owned = Some(sets.intern(taken));
        self.measure(&obj, manager, sets)
    }

    fn measure(&mut self, obj: &Value, manager: &str, sets: &Interner) -> Option<Drift> {
        let entries = entries(obj);
        let mut ours = BTreeSet::new();
        let mut time: Option<&str> = None;
        for e in entries.iter().filter(|e| e.manager == manager) {
            ours.extend(e.fields.iter().cloned());
            time = time.max(e.time.as_deref());
        }
        let first = self.owned.is_none();
        let wrote = first || time != self.time.as_deref();
        if wrote {
            if !ours.is_empty() {
                // Seen first with fields of others: some may have been ours (see the module
                // documentation). A write of ours since settles it.
                self.unverified = (first
                    && entries
                        .iter()
                        .any(|e| e.manager != manager && !e.fields.is_empty()))
                .then(|| Box::new(Value::Array(main_entries(obj).cloned().collect())));
                self.owned = Some(sets.intern(ours));
                self.time = time.map(str::to_owned);
            }
            return None;
        }
        let owned = self.owned.as_ref()?;
        let lost: Vec<&String> = owned.iter().filter(|p| !ours.contains(*p)).collect();
        if lost.is_empty() {
            return None;
        }
        let others: Vec<&Entry> = entries.iter().filter(|e| e.manager != manager).collect();
        let last = others.iter().max_by(|a, b| a.time.cmp(&b.time));
        let mut fields: Vec<DriftedField> = lost
            .into_iter()
            .map(|path| {
                let holder = others
                    .iter()
                    .filter(|e| e.fields.iter().any(|f| overlaps(f, path)))
                    .max_by(|a, b| a.time.cmp(&b.time));
                let by = holder.or(last);
                DriftedField {
                    path: path.clone(),
                    manager: by.map_or_else(|| "unknown".to_owned(), |e| e.manager.clone()),
                    time: by.and_then(|e| e.time.clone()),
                    removed: holder.is_none(),
                }
            })
            .collect();
        fields.sort();
        Some(Drift { fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(entries: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "managedFields": entries}})
    }

    fn entry(manager: &str, operation: &str, time: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "time": time,
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    const APPLIED: &str = "2026-12-06T10:00:00Z";

    fn applied() -> Value {
        entry(
            "emco",
            "Apply",
            APPLIED,
            json!({"f:data": {"f:a": {}, "f:b": {}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"server\"}": {
                       ".": {}, "f:image": {}, "f:name": {}}}}}),
        )
    }

    /// [`applied`] after kubectl edit took `data.a` and the image, beside a controller's
    /// annotation.
    fn edited() -> Value {
        object(json!([
            entry(
                "emco",
                "Apply",
                APPLIED,
                json!({"f:data": {"f:b": {}},
                         "f:spec": {"f:containers": {"k:{\"name\":\"server\"}": {".": {}, "f:name": {}}}}})
            ),
            entry(
                "kubectl-edit",
                "Update",
                "2026-12-06T10:05:00Z",
                json!({"f:data": {"f:a": {}},
                         "f:spec": {"f:containers": {"k:{\"name\":\"server\"}": {"f:image": {}}}}})
            ),
            entry(
                "kube-controller-manager",
                "Update",
                "2026-12-06T10:01:00Z",
                json!({"f:metadata": {"f:annotations": {"f:rev": {}}}})
            ),
        ]))
    }

    #[test]
    fn field_sets_print_as_paths() {
        let mut out = BTreeSet::new();
        leaves(
            applied().get("fieldsV1").unwrap(),
            &mut String::new(),
            &mut out,
        );
        let paths: Vec<&str> = out.iter().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "data.a",
                "data.b",
                "spec.containers[name=server].image",
                "spec.containers[name=server].name"
            ]
        );
        assert!(overlaps(
            "spec.containers",
            "spec.containers[name=server].image"
        ));
        assert!(!overlaps("data.a", "data.ab"));
    }

    #[test]
    fn a_field_another_manager_took_is_drift_named_after_it() {
        let sets = Interner::default();
        let mut f = Follower::default();
        assert_eq!(
            f.observe(&object(json!([applied()])), "emco", &sets),
            Observed::Now(None)
        );
        // Unchanged ownership: judged without the field sets.
        assert_eq!(
            f.observe(&object(json!([applied()])), "emco", &sets),
            Observed::Unchanged
        );
        // kubectl edit took data.a and the image; a controller's annotation is none of ours.
        let edited = edited();
        let Observed::Now(Some(drift)) = f.observe(&edited, "emco", &sets) else {
            panic!("drift");
        };
        assert_eq!(f.observe(&edited, "emco", &sets), Observed::Unchanged);
        let got: Vec<(&str, &str, bool)> = drift
            .fields
            .iter()
            .map(|d| (d.path.as_str(), d.manager.as_str(), d.removed))
            .collect();
        assert_eq!(
            got,
            [
                ("data.a", "kubectl-edit", false),
                ("spec.containers[name=server].image", "kubectl-edit", false)
            ]
        );
        assert_eq!(
            drift.fields[0].time.as_deref(),
            Some("2026-12-06T10:05:00Z")
        );
        assert_eq!(drift.managers(), ["kubectl-edit"]);
        // emco-rs applies again (its time moves): the new baseline, no drift.
        let fixed = object(json!([entry(
            "emco",
            "Apply",
            "2026-12-06T10:06:00Z",
            applied()["fieldsV1"].clone()
        )]));
        assert_eq!(f.observe(&fixed, "emco", &sets), Observed::Now(None));
        assert_eq!(f.observe(&fixed, "emco", &sets), Observed::Unchanged);
    }

    #[test]
    fn a_removed_field_is_drift_of_the_last_writer() {
        let sets = Interner::default();
        let mut f = Follower::default();
        f.observe(&object(json!([applied()])), "emco", &sets);
        let removed = object(json!([
            entry(
                "emco",
                "Apply",
                APPLIED,
                json!({"f:data": {"f:a": {}},
                         "f:spec": {"f:containers": {"k:{\"name\":\"server\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
            ),
            entry(
                "kubectl-patch",
                "Update",
                "2026-12-06T10:07:00Z",
                json!({"f:data": {"f:c": {}}})
            ),
        ]));
        let Observed::Now(Some(drift)) = f.observe(&removed, "emco", &sets) else {
            panic!("drift");
        };
        assert_eq!(drift.fields.len(), 1);
        let d = &drift.fields[0];
        assert_eq!(
            (d.path.as_str(), d.manager.as_str(), d.removed),
            ("data.b", "kubectl-patch", true)
        );
    }

    #[test]
    fn a_field_taken_while_nobody_watched_is_told_by_the_manifest() {
        let sets = Interner::default();
        // First seen (after a restart): kubectl-edit holds data.a and the image, a controller
        // an annotation; emco-rs what is left of what it applied.
        let seen = edited();
        let mut f = Follower::default();
        assert_eq!(f.observe(&seen, "emco", &sets), Observed::Now(None));
        assert!(f.is_unverified());
        let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}, "data": {"a": "1", "b": "2"},
            "spec": {"containers": [{"name": "other"}, {"name": "server", "image": "web:1"}]}});
        let drift = f.verify(&manifest, "emco", &sets).expect("drift");
        assert!(!f.is_unverified());
        let got: Vec<(&str, &str)> = drift
            .fields
            .iter()
            .map(|d| (d.path.as_str(), d.manager.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("data.a", "kubectl-edit"),
                ("spec.containers[name=server].image", "kubectl-edit")
            ]
        );
        // The next looks keep it, as for drift seen live.
        assert_eq!(f.observe(&seen, "emco", &sets), Observed::Unchanged);

        // Fields the manifest does not set are nobody's drift: the annotation, or the image
        // when emco-rs applies none.
        let mut g = Follower::default();
        g.observe(&seen, "emco", &sets);
        let without = json!({"data": {"b": "2"},
            "spec": {"containers": [{"name": "server"}]}});
        assert_eq!(g.verify(&without, "emco", &sets), None);
        assert_eq!(g.observe(&seen, "emco", &sets), Observed::Unchanged);
        // An object emco-rs alone holds is judged at once, as before.
        let mut h = Follower::default();
        h.observe(&object(json!([applied()])), "emco", &sets);
        assert!(!h.is_unverified());
    }

    #[test]
    fn objects_with_the_same_fields_share_one_set() {
        let sets = Interner::default();
        let (mut a, mut b) = (Follower::default(), Follower::default());
        a.observe(&object(json!([applied()])), "emco", &sets);
        b.observe(&object(json!([applied()])), "emco", &sets);
        assert!(Arc::ptr_eq(
            a.owned.as_ref().unwrap(),
            b.owned.as_ref().unwrap()
        ));
        drop(a);
        drop(b);
        sets.prune();
        assert!(sets.0.lock().unwrap().is_empty());
    }
}
