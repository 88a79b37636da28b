//! Sprig's dictionary functions, with Go's shared-map semantics (`set` changes the map in place).

use std::collections::BTreeMap;

use super::{FResult, Param, Registry, func, s, strval};
use crate::value::{Map, Value};

const MS: &[Param] = &[Param::Map, Param::Str];

fn map_of(v: &Value) -> Option<&Map> {
    match v {
        Value::Map(m) => Some(m),
        _ => None,
    }
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "dict",
        func(&[], Some(Param::Any), |_, a| {
            let mut d = BTreeMap::new();
            for pair in a.chunks(2) {
                d.insert(
                    strval(&pair[0]),
                    pair.get(1).cloned().unwrap_or_else(|| Value::str("")),
                );
            }
            Ok(Value::map(d))
        }),
    );
    m.insert(
        "get",
        func(MS, None, |_, a| {
            Ok(map_of(&a[0])
                .and_then(|m| m.get(s(&a[1])))
                .unwrap_or_else(|| Value::str("")))
        }),
    );
    m.insert(
        "set",
        func(
            &[Param::Map, Param::Str, Param::Any],
            None,
            |_, a| match map_of(&a[0]) {
                Some(m) => {
                    m.insert(s(&a[1]), a[2].clone());
                    Ok(a[0].clone())
                }
                None => Err("assignment to entry in nil map".to_owned()),
            },
        ),
    );
    m.insert(
        "unset",
        func(MS, None, |_, a| {
            if let Some(m) = map_of(&a[0]) {
                m.remove(s(&a[1]));
            }
            Ok(a[0].clone())
        }),
    );
    m.insert(
        "hasKey",
        func(MS, None, |_, a| {
            Ok(Value::Bool(
                map_of(&a[0]).is_some_and(|m| m.contains_key(s(&a[1]))),
            ))
        }),
    );
    m.insert(
        "keys",
        func(&[], Some(Param::Map), |_, a| {
            // Go's map order is random; Sprig users sort (`keys . | sortAlpha`), we give sorted keys.
            let mut keys: Vec<String> = a.iter().filter_map(map_of).flat_map(Map::keys).collect();
            keys.sort();
            Ok(Value::list(keys.into_iter().map(Value::String).collect()))
        }),
    );
    m.insert(
        "values",
        func(&[Param::Map], None, |_, a| {
            Ok(Value::list(
                map_of(&a[0])
                    .map(|m| m.snapshot().into_values().collect())
                    .unwrap_or_default(),
            ))
        }),
    );
    m.insert(
        "pluck",
        func(&[Param::Str], Some(Param::Map), |_, a| {
            let key = s(&a[0]);
            Ok(Value::list(
                a[1..]
                    .iter()
                    .filter_map(map_of)
                    .filter_map(|m| m.get(key))
                    .collect(),
            ))
        }),
    );
    m.insert(
        "pick",
        func(&[Param::Map], Some(Param::Str), |_, a| {
            let mut out = BTreeMap::new();
            if let Some(m) = map_of(&a[0]) {
                for k in &a[1..] {
                    if let Some(v) = m.get(s(k)) {
                        out.insert(s(k).to_owned(), v);
                    }
                }
            }
            Ok(Value::map(out))
        }),
    );
    m.insert(
        "omit",
        func(&[Param::Map], Some(Param::Str), |_, a| {
            let omit: Vec<&str> = a[1..].iter().map(s).collect();
            let mut out = map_of(&a[0]).map(Map::snapshot).unwrap_or_default();
            out.retain(|k, _| !omit.contains(&k.as_str()));
            Ok(Value::map(out))
        }),
    );
    m.insert(
        "merge",
        func(&[Param::Map], Some(Param::Map), |_, a| merge_all(a, false)),
    );
    m.insert(
        "mergeOverwrite",
        func(&[Param::Map], Some(Param::Map), |_, a| merge_all(a, true)),
    );
    m.insert(
        "deepCopy",
        func(&[Param::Any], None, |_, a| Ok(a[0].deep_copy())),
    );
    m.insert("dig", func(&[], Some(Param::Any), |_, a| {
        if a.len() < 3 {
            return Err("dig needs at least three arguments".to_owned());
        }
        let n = a.len();
        let default = a[n - 2].clone();
        let Value::Map(mut cur) = a[n - 1].clone() else {
            return Err(format!("interface conversion: interface {{}} is {}, not map[string]interface {{}}", a[n - 1].type_name()));
        };
        let keys = &a[..n - 2];
        for (idx, k) in keys.iter().enumerate() {
            let Value::String(k) = k else {
                return Err(format!("interface conversion: interface {{}} is {}, not string", k.type_name()));
            };
            let Some(step) = cur.get(k) else { return Ok(default) };
            if idx == keys.len() - 1 {
                return Ok(step);
            }
            match step {
                Value::Map(next) => cur = next,
                other => {
                    return Err(format!("interface conversion: interface {{}} is {}, not map[string]interface {{}}", other.type_name()));
                }
            }
        }
        Ok(default)
    }));
}

fn merge_all(a: Vec<Value>, overwrite: bool) -> FResult {
    let dst = match &a[0] {
        Value::Map(m) => m.clone(),
        _ => Map::default(),
    };
    for src in a[1..].iter().filter_map(map_of) {
        if !src.ptr_eq(&dst) {
            merge_into(&dst, &src.snapshot(), overwrite, 0);
        }
    }
    Ok(Value::Map(dst))
}

/// mergo's `Merge` (and `WithOverride`) on `map[string]interface{}`: nested maps merge in place;
/// other values fill keys that are missing or hold an empty value, or always when overwriting.
pub(crate) fn merge_into(dst: &Map, src: &BTreeMap<String, Value>, overwrite: bool, depth: usize) {
    for (k, sv) in src {
        let dv = dst.get(k);
        if sv.is_nil() {
            if overwrite {
                dst.insert(k.clone(), Value::Nil);
            }
            continue;
        }
        if let (Value::Map(sm), Some(Value::Map(dm))) = (sv, &dv) {
            if depth < 64 && !sm.ptr_eq(dm) {
                merge_into(dm, &sm.snapshot(), overwrite, depth + 1);
            }
            continue;
        }
        let dst_empty = dv.as_ref().is_none_or(|v| !v.is_true());
        if overwrite || dst_empty {
            dst.insert(k.clone(), sv.clone());
        }
    }
}
