//! JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

use serde_json::{Map, Value};

use crate::resources::{ListType, Lists};

/// Applies a JSON merge patch to `target` in place.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Applies a strategic merge patch: like a merge patch, except that the well-known keyed lists of
/// built-in types merge item by item, set lists (finalizers) merge as sets, and the `$patch`
/// directives `delete` and `replace` are honoured.
pub(crate) fn strategic_merge(target: &mut Value, patch: &Value) {
    merge_with(target, patch, Lists::Builtin);
}

/// A strategic merge whose lists merge as `lists` says (a custom resource's schema, for
/// server-side apply).
pub(crate) fn merge_with(target: &mut Value, patch: &Value, lists: Lists<'_>) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replaced = patch.clone();
        strip_directives(&mut replaced);
        *target = replaced;
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(del)) = (t.get_mut(field), v) {
                items.retain(|i| !del.contains(i));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                t.remove(k);
            }
            Value::Array(items) => {
                let first = items
                    .first()
                    .or_else(|| t.get(k).and_then(|c| c.as_array()?.first()));
                let field = lists.field(k);
                match (field.list_type(k, first), t.get_mut(k)) {
                    (ListType::Map(keys), Some(Value::Array(current))) => {
                        merge_keyed_list(current, items, &keys, field.items())
                    }
                    (ListType::Set, Some(Value::Array(current))) => {
                        for item in items {
                            if !current.contains(item) {
                                current.push(item.clone());
                            }
                        }
                    }
                    _ => {
                        let mut list = v.clone();
                        strip_directives(&mut list);
                        if let Value::Array(l) = &mut list {
                            l.retain(|i| i.get("$patch").is_none());
                        }
                        t.insert(k.clone(), list);
                    }
                }
            }
            Value::Object(_) => {
                if v.get("$patch").and_then(Value::as_str) == Some("delete") {
                    t.remove(k);
                } else {
                    merge_with(t.entry(k.clone()).or_insert(Value::Null), v, lists.field(k));
                }
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    // kubectl sends `$retainKeys` with a changed union (a Deployment's strategy type): fields it
    // does not list go, such as the `rollingUpdate` a `Recreate` strategy may not keep.
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        t.retain(|k, _| keep.iter().any(|r| r.as_str() == Some(k.as_str())));
    }
}

fn merge_keyed_list(current: &mut Vec<Value>, patch: &[Value], keys: &[String], items: Lists<'_>) {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *current = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .cloned()
            .collect();
        return;
    }
    for item in patch {
        let keyed = keys.iter().any(|k| item.get(k).is_some());
        let pos = current
            .iter()
            .position(|c| keyed && keys.iter().all(|k| c.get(k) == item.get(k)));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(pos) = pos {
                current.remove(pos);
            }
            continue;
        }
        match pos {
            Some(pos) => merge_with(&mut current[pos], item, items),
            None => {
                let mut new = item.clone();
                strip_directives(&mut new);
                current.push(new);
            }
        }
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

/// Applies a JSON patch. Errors name the failing operation.
pub(crate) fn json_patch(target: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).ok_or("missing op")?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or("missing path")?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("{kind} {path}: missing value"))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{kind} {path}: missing from"))
        };
        match kind {
            "add" => add(target, path, value()?)?,
            "remove" => {
                remove(target, path)?;
            }
            "replace" => {
                remove(target, path)?;
                add(target, path, value()?)?;
            }
            "move" => {
                let v = remove(target, from()?)?;
                add(target, path, v)?;
            }
            "copy" => {
                let v = target
                    .pointer(from()?)
                    .cloned()
                    .ok_or_else(|| format!("copy: {path}: source does not exist"))?;
                add(target, path, v)?;
            }
            "test" => {
                if target.pointer(path) != Some(&value()?) {
                    return Err(format!("test operation for path {path} failed"));
                }
            }
            other => return Err(format!("unexpected kind of operation: {other}")),
        }
    }
    Ok(())
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_parent(path: &str) -> Result<(&str, String), String> {
    let idx = path
        .rfind('/')
        .ok_or_else(|| format!("invalid path {path:?}"))?;
    Ok((&path[..idx], unescape(&path[idx + 1..])))
}

fn add(target: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *target = value;
        return Ok(());
    }
    let (parent, last) = split_parent(path)?;
    match target.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.insert(last, value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let idx = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| format!("add {path}: bad index"))?
            };
            if idx > a.len() {
                return Err(format!(
                    "add operation does not apply: index out of range: {path}"
                ));
            }
            a.insert(idx, value);
            Ok(())
        }
        _ => Err(format!(
            "add operation does not apply: doc is missing path: {path:?}"
        )),
    }
}

fn remove(target: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split_parent(path)?;
    let missing = || format!("remove operation does not apply: doc is missing path: {path:?}");
    match target.pointer_mut(parent) {
        Some(Value::Object(m)) => m.remove(&last).ok_or_else(missing),
        Some(Value::Array(a)) => {
            let idx = last.parse::<usize>().map_err(|_| missing())?;
            if idx < a.len() {
                Ok(a.remove(idx))
            } else {
                Err(missing())
            }
        }
        _ => Err(missing()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut t, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(t, json!({"a": "z", "c": {"d": "e"}}));
        merge_patch(&mut t, &json!({"list": [1]}));
        assert_eq!(t["list"], json!([1]));
    }

    #[test]
    fn strategic_merge_keyed_lists() {
        let mut t = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "b:1"}], "finalizers": ["x"]}});
        strategic_merge(
            &mut t,
            &json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "ports": [{"containerPort": 81}]},
            {"name": "b", "$patch": "delete"},
            {"name": "c", "image": "c:1"}], "finalizers": ["y"]}}),
        );
        assert_eq!(t["spec"]["containers"][0]["image"], "a:2");
        assert_eq!(
            t["spec"]["containers"][0]["ports"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(t["spec"]["containers"][1]["name"], "c");
        assert_eq!(t["spec"]["containers"].as_array().unwrap().len(), 2);
        assert_eq!(t["spec"]["finalizers"], json!(["x", "y"]));
        strategic_merge(
            &mut t,
            &json!({"spec": {"args": ["1"], "$deleteFromPrimitiveList/finalizers": ["x"]}}),
        );
        assert_eq!(t["spec"]["finalizers"], json!(["y"]));
        let mut d =
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}});
        strategic_merge(
            &mut d,
            &json!({"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}),
        );
        assert_eq!(d, json!({"strategy": {"type": "Recreate"}}));
        strategic_merge(&mut t, &json!({"spec": {"$patch": "replace", "only": 1}}));
        assert_eq!(t["spec"], json!({"only": 1}));
    }

    #[test]
    fn json_patch_rfc6902() {
        let mut t = json!({"a": {"b": [1, 2]}, "x": 1});
        json_patch(
            &mut t,
            &json!([
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "replace", "path": "/x", "value": 2},
                {"op": "copy", "from": "/x", "path": "/y"},
                {"op": "move", "from": "/y", "path": "/a/z"},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "test", "path": "/x", "value": 2},
            ]),
        )
        .unwrap();
        assert_eq!(t, json!({"a": {"b": [2, 3], "z": 2}, "x": 2}));
        assert!(json_patch(&mut t, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        assert!(json_patch(&mut t, &json!([{"op": "test", "path": "/x", "value": 9}])).is_err());
    }
}
