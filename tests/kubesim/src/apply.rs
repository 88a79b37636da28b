//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! A field set is a set of paths; a path is a list of `fieldsV1` elements: `f:name` for a map
//! field, `k:{"name":"x"}` for an item of a keyed list, `v:"x"` for an item of a set list, and a
//! trailing `.` for a keyed item itself. Leaves are scalars, atomic lists and empty maps.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::patch::merge_with;
use crate::resources::{ListType, Lists};
use crate::util::now_rfc3339;

type Path = Vec<String>;
/// A set of owned field paths.
pub(crate) type FieldSet = BTreeSet<Path>;

/// Metadata fields the server owns; never part of a field set.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Which part of the object a write touches: the main resource (everything but status) or the
/// status subresource (only status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Main,
    Status,
}

impl Part {
    fn subresource(self) -> Option<&'static str> {
        match self {
            Self::Main => None,
            Self::Status => Some("status"),
        }
    }
}

/// The field paths an object sets, restricted to `part`; `lists` says how its lists merge.
pub(crate) fn field_set(obj: &Value, part: Part, lists: Lists<'_>) -> FieldSet {
    let mut set = FieldSet::new();
    let Some(m) = obj.as_object() else { return set };
    for (k, v) in m {
        let keep = match part {
            Part::Main => !matches!(k.as_str(), "apiVersion" | "kind" | "status"),
            Part::Status => k == "status",
        };
        if !keep {
            continue;
        }
        if k == "metadata" {
            if let Some(meta) = v.as_object() {
                let meta_lists = lists.field(k);
                for (mk, mv) in meta {
                    if !SERVER_METADATA.contains(&mk.as_str()) {
                        let path = &mut vec!["f:metadata".to_owned()];
                        walk(mk, mv, path, &mut set, meta_lists.field(mk));
                    }
                }
            }
        } else {
            walk(k, v, &mut Vec::new(), &mut set, lists.field(k));
        }
    }
    set
}

/// Adds the paths of field `key`, of value `v` whose lists merge as `lists` says.
fn walk(key: &str, v: &Value, prefix: &mut Path, out: &mut FieldSet, lists: Lists<'_>) {
    prefix.push(format!("f:{key}"));
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                walk(k, c, prefix, out, lists.field(k));
            }
        }
        Value::Array(items) if !items.is_empty() => match lists.list_type(key, items.first()) {
            ListType::Map(keys) => {
                let item_lists = lists.items();
                for item in items {
                    prefix.push(item_key(&keys, item));
                    out.insert(with(prefix, "."));
                    if let Some(fields) = item.as_object() {
                        for (k, c) in fields {
                            walk(k, c, prefix, out, item_lists.field(k));
                        }
                    }
                    prefix.pop();
                }
            }
            ListType::Set => {
                for item in items {
                    out.insert(with(prefix, &format!("v:{item}")));
                }
            }
            ListType::Atomic => {
                out.insert(prefix.clone());
            }
        },
        _ => {
            out.insert(prefix.clone());
        }
    }
    prefix.pop();
}

fn with(prefix: &Path, last: &str) -> Path {
    let mut p = prefix.clone();
    p.push(last.to_owned());
    p
}

fn item_key(keys: &[String], item: &Value) -> String {
    let mut m = Map::new();
    for key in keys {
        m.insert(key.clone(), item.get(key).cloned().unwrap_or(Value::Null));
    }
    format!("k:{}", Value::Object(m))
}

/// The value a path designates in `obj`, if present.
fn lookup<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = step(cur, el)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, el: &str) -> Option<&'a Value> {
    if el == "." {
        return Some(cur);
    }
    if let Some(f) = el.strip_prefix("f:") {
        return cur.get(f);
    }
    let items = cur.as_array()?;
    if let Some(k) = el.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items
            .iter()
            .find(|i| key.iter().all(|(kk, kv)| i.get(kk) == Some(kv)));
    }
    let v: Value = serde_json::from_str(el.strip_prefix("v:")?).ok()?;
    items.iter().find(|i| **i == v)
}

/// Removes the field or item a path designates.
fn remove_path(obj: &mut Value, path: &[String]) {
    let (path, last) = match path.split_last() {
        Some((l, rest)) if l == "." => match rest.split_last() {
            Some((item, parent)) => (parent, item),
            None => return,
        },
        Some((l, rest)) => (rest, l),
        None => return,
    };
    let mut cur = obj;
    for el in path {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            let probe = step(cur, el).cloned();
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|i| Some(&**i) == probe.as_ref()))
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(target) = step(cur, last).cloned()
        && let Some(a) = cur.as_array_mut()
    {
        a.retain(|i| *i != target);
    }
}

/// Renders a field set as a `fieldsV1` tree.
pub(crate) fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for el in path {
            let entry = cur
                .entry(el.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            match entry {
                Value::Object(m) => cur = m,
                _ => break,
            }
        }
    }
    Value::Object(root)
}

/// Parses a `fieldsV1` tree back into a field set.
pub(crate) fn from_fields_v1(v: &Value) -> FieldSet {
    fn go(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, c) in m {
                    prefix.push(k.clone());
                    go(c, prefix, out);
                    prefix.pop();
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        }
    }
    let mut out = FieldSet::new();
    go(v, &mut Vec::new(), &mut out);
    out
}

/// Formats a path the way conflict messages show it (`.spec.containers[name="a"].image`).
fn display_path(path: &[String]) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let inner: Vec<String> = key.iter().map(|(kk, kv)| format!("{kk}={kv}")).collect();
            s.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn same_slot(&self, manager: &str, operation: &str, part: Part) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == part.subresource()
    }
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: str_field(e, "manager"),
            operation: str_field(e, "operation"),
            api_version: str_field(e, "apiVersion"),
            time: str_field(e, "time"),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .map(str::to_owned),
            fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
        .collect()
}

fn str_field(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "time": e.time, "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(s) = &e.subresource {
                v["subresource"] = json!(s);
            }
            v
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".to_owned(), Value::Array(list));
        }
    }
}

fn upsert(
    entries: &mut Vec<Entry>,
    manager: &str,
    operation: &str,
    api_version: &str,
    part: Part,
) -> usize {
    if let Some(i) = entries
        .iter()
        .position(|e| e.same_slot(manager, operation, part))
    {
        entries[i].api_version = api_version.to_owned();
        entries[i].time = now_rfc3339();
        return i;
    }
    entries.push(Entry {
        manager: manager.to_owned(),
        operation: operation.to_owned(),
        api_version: api_version.to_owned(),
        time: now_rfc3339(),
        subresource: part.subresource().map(str::to_owned),
        fields: FieldSet::new(),
    });
    entries.len() - 1
}

/// Records an Update operation by `manager` that turned `old` into `new`: the manager owns the
/// fields it changed, other managers lose them, and fields that disappeared lose their owners.
pub(crate) fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    part: Part,
    lists: Lists<'_>,
) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let new_set = field_set(new, part, lists);
    let changed: FieldSet = new_set
        .iter()
        .filter(|p| old.and_then(|o| lookup(o, p)) != lookup(new, p))
        .cloned()
        .collect();
    for e in &mut entries {
        if e.subresource.as_deref() == part.subresource() {
            e.fields
                .retain(|p| new_set.contains(p) && !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        let i = upsert(&mut entries, manager, "Update", api_version, part);
        entries[i].fields.extend(changed);
    }
    write_entries(new, &entries);
}

/// A server-side apply that other managers' ownership refused.
#[derive(Debug, Clone)]
pub(crate) struct ApplyConflict {
    /// The message of the 409 answer.
    pub(crate) message: String,
    /// `FieldManagerConflict` causes, one per field.
    pub(crate) causes: Vec<Value>,
}

/// Server-side apply of `applied` by `manager` onto `current` (`{}`-like for a new object),
/// merging lists as `lists` says. Returns the new object with updated `managedFields`.
pub(crate) fn apply(
    current: &Value,
    applied: &Value,
    manager: &str,
    api_version: &str,
    force: bool,
    part: Part,
    lists: Lists<'_>,
) -> Result<Value, ApplyConflict> {
    let mut entries = read_entries(current);
    let applied_set = field_set(applied, part, lists);
    let mut conflicts: BTreeMap<(String, String), Vec<Path>> = BTreeMap::new();
    for e in &entries {
        if e.manager == manager || e.subresource.as_deref() != part.subresource() {
            continue;
        }
        for p in e.fields.intersection(&applied_set) {
            // Owning an item of a keyed list is about its presence, not its whole value.
            if p.last().is_some_and(|l| l == ".") {
                continue;
            }
            if lookup(current, p) != lookup(applied, p) {
                conflicts
                    .entry((e.manager.clone(), e.api_version.clone()))
                    .or_default()
                    .push(p.clone());
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    // Forced: the applier takes the conflicting fields away from their owners.
    let taken: FieldSet = conflicts.into_values().flatten().collect();
    for e in &mut entries {
        if e.manager != manager {
            e.fields.retain(|p| !taken.contains(p));
        }
    }
    let mine = upsert(&mut entries, manager, "Apply", api_version, part);
    let previous = std::mem::take(&mut entries[mine].fields);
    let others: FieldSet = entries
        .iter()
        .filter(|e| e.subresource.as_deref() == part.subresource())
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut obj = current.clone();
    // Fields this manager applied before but no longer applies, and nobody else owns, go away.
    let mut dropped: Vec<&Path> = previous
        .iter()
        .filter(|p| !applied_set.contains(*p) && !others.contains(*p))
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        remove_path(&mut obj, p);
    }
    merge_with(&mut obj, &restrict(applied, part), lists);
    entries[mine].fields = applied_set;
    write_entries(&mut obj, &entries);
    Ok(obj)
}

/// The part of `obj` a write of `part` may change.
pub(crate) fn restrict(obj: &Value, part: Part) -> Value {
    match part {
        Part::Main => {
            let mut body = obj.clone();
            if let Some(m) = body.as_object_mut() {
                m.remove("status");
            }
            body
        }
        Part::Status => json!({"status": obj.get("status").cloned().unwrap_or(Value::Null)}),
    }
}

fn conflict_error(conflicts: &BTreeMap<(String, String), Vec<Path>>) -> ApplyConflict {
    let total: usize = conflicts.values().map(Vec::len).sum();
    let mut causes = Vec::new();
    let mut parts = Vec::new();
    for ((manager, api_version), paths) in conflicts {
        let head = format!("conflict with \"{manager}\" using {api_version}");
        for p in paths {
            causes.push(json!({"reason": "FieldManagerConflict", "message": head, "field": display_path(p)}));
        }
        if total == 1 {
            parts.push(format!("{head}: {}", display_path(&paths[0])));
        } else {
            let list: Vec<String> = paths
                .iter()
                .map(|p| format!("- {}", display_path(p)))
                .collect();
            parts.push(format!(
                "conflicts with \"{manager}\" using {api_version}:\n{}",
                list.join("\n")
            ));
        }
    }
    let plural = if total == 1 { "conflict" } else { "conflicts" };
    ApplyConflict {
        message: format!("Apply failed with {total} {plural}: {}", parts.join("\n")),
        causes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "web", "image": image}]}}}})
    }

    #[test]
    fn field_sets_round_trip() {
        let set = field_set(&deploy(1, "nginx"), Part::Main, Lists::Builtin);
        assert!(set.contains(&vec!["f:spec".to_owned(), "f:replicas".to_owned()]));
        assert!(set.contains(&vec![
            "f:spec".to_owned(),
            "f:template".to_owned(),
            "f:spec".to_owned(),
            "f:containers".to_owned(),
            "k:{\"name\":\"web\"}".to_owned(),
            ".".to_owned()
        ]));
        assert!(
            !set.iter()
                .any(|p| p.contains(&"f:name".to_owned()) && p.len() == 2)
        );
        let v1 = to_fields_v1(&set);
        assert_eq!(from_fields_v1(&v1), set);
        assert!(
            v1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]["."]
                .is_object()
        );
    }

    #[test]
    fn apply_conflicts_and_force() {
        let obj = apply(
            &json!({}),
            &deploy(1, "nginx"),
            "a",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap();
        assert_eq!(obj["spec"]["replicas"], 1);
        // Same value: shared ownership, no conflict.
        let obj = apply(
            &obj,
            &deploy(1, "nginx"),
            "b",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap();
        let err = apply(
            &obj,
            &deploy(3, "nginx"),
            "c",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap_err();
        assert!(
            err.message.starts_with("Apply failed with 2 conflicts"),
            "{}",
            err.message
        );
        assert_eq!(err.causes[0]["field"], ".spec.replicas");
        let obj = apply(
            &obj,
            &deploy(3, "nginx"),
            "c",
            "apps/v1",
            true,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap();
        assert_eq!(obj["spec"]["replicas"], 3);
        let entries = read_entries(&obj);
        let a = entries.iter().find(|e| e.manager == "a").unwrap();
        assert!(
            !a.fields
                .contains(&vec!["f:spec".to_owned(), "f:replicas".to_owned()])
        );
    }

    #[test]
    fn apply_removes_fields_no_longer_applied() {
        let mut first = deploy(1, "nginx");
        first["metadata"]["labels"]["extra"] = json!("x");
        let obj = apply(
            &json!({}),
            &first,
            "a",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap();
        let obj = apply(
            &obj,
            &deploy(2, "nginx:2"),
            "a",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap();
        assert!(obj["metadata"]["labels"].get("extra").is_none());
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:2"
        );
    }

    #[test]
    fn update_takes_ownership() {
        let obj = apply(
            &json!({}),
            &deploy(1, "nginx"),
            "a",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap();
        let mut new = obj.clone();
        new["spec"]["replicas"] = json!(5);
        record_update(
            Some(&obj),
            &mut new,
            "kubectl-edit",
            "apps/v1",
            Part::Main,
            Lists::Builtin,
        );
        let err = apply(
            &new,
            &deploy(1, "nginx"),
            "a",
            "apps/v1",
            false,
            Part::Main,
            Lists::Builtin,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas"
        );
    }

    #[test]
    fn custom_lists_follow_the_crd_schema() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "routes": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["host", "port"],
                       "items": {"type": "object", "properties": {
                           "host": {"type": "string"}, "port": {"type": "integer"},
                           "weight": {"type": "integer"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "containers": {"type": "array", "items": {"type": "object"}}}}}});
        let lists = Lists::custom(Some(&schema));
        let thing = |spec: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Thing",
                   "metadata": {"name": "t", "finalizers": ["f"]}, "spec": spec})
        };
        let av = "example.com/v1";
        let a = thing(
            json!({"routes": [{"host": "a", "port": 80, "weight": 1}], "tags": ["x"],
                             "containers": [{"name": "c", "image": "1"}]}),
        );
        let obj = apply(&json!({}), &a, "a", av, false, Part::Main, lists).unwrap();
        let b = thing(json!({"routes": [{"host": "a", "port": 443, "weight": 2}], "tags": ["y"]}));
        let obj = apply(&obj, &b, "b", av, false, Part::Main, lists).unwrap();
        assert_eq!(
            obj["spec"]["routes"],
            json!([{"host": "a", "port": 80, "weight": 1}, {"host": "a", "port": 443, "weight": 2}])
        );
        assert_eq!(obj["spec"]["tags"], json!(["x", "y"]));
        let entries = read_entries(&obj);
        let owned = |m: &str| {
            entries
                .iter()
                .find(|e| e.manager == m)
                .unwrap()
                .fields
                .clone()
        };
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Path>();
        assert!(owned("b").contains(&path(&[
            "f:spec",
            "f:routes",
            r#"k:{"host":"a","port":443}"#,
            "f:weight"
        ])));
        assert!(owned("b").contains(&path(&["f:spec", "f:tags", r#"v:"y""#])));
        // The schema does not key `containers`: for this type it is atomic, whatever its name.
        assert!(owned("a").contains(&path(&["f:spec", "f:containers"])));
        // metadata keeps the built-in rules: finalizers are a set.
        assert!(owned("a").contains(&path(&["f:metadata", "f:finalizers", r#"v:"f""#])));
        let c = thing(json!({"containers": [{"name": "d", "image": "2"}]}));
        let err = apply(&obj, &c, "c", av, false, Part::Main, lists).unwrap_err();
        assert_eq!(err.causes[0]["field"], ".spec.containers");
        // Changing another manager's item conflicts on that item's field only.
        let b2 = thing(json!({"routes": [{"host": "a", "port": 80, "weight": 5}]}));
        let err = apply(&obj, &b2, "b", av, false, Part::Main, lists).unwrap_err();
        assert_eq!(err.causes.len(), 1);
        assert_eq!(
            err.causes[0]["field"],
            r#".spec.routes[host="a",port=80].weight"#
        );
        // An item its manager no longer applies goes; the others' stay.
        let a2 = thing(json!({"tags": ["x"], "containers": [{"name": "c", "image": "1"}]}));
        let obj = apply(&obj, &a2, "a", av, false, Part::Main, lists).unwrap();
        assert_eq!(
            obj["spec"]["routes"],
            json!([{"host": "a", "port": 443, "weight": 2}])
        );
    }
}
