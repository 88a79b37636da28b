//! Helm's own functions: `include`, `tpl`, `required`, `lookup` and the YAML/JSON converters.

use super::{Param, Registry, func, s};
use crate::render::{WARN_END, WARN_START};
use crate::value::Value;
use crate::{json, yaml};

const A: &[Param] = &[Param::Any];

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "include",
        func(&[Param::Str, Param::Any], None, |ex, a| {
            let name = s(&a[0]).to_owned();
            ex.include(&name, a[1].clone())
                .map(Value::String)
                .map_err(|e| e.to_string())
        }),
    );
    m.insert(
        "tpl",
        func(&[Param::Str, Param::Any], None, |ex, a| {
            let text = s(&a[0]).to_owned();
            match ex.execute_text("gotpl", &text, a[1].clone()) {
                Ok(out) => Ok(Value::String(out.replace("<no value>", ""))),
                Err(e) => Err(format!(
                    "error during tpl function execution for {:?}: {e}",
                    text
                )),
            }
        }),
    );
    // The message is marked so that the renderer can report it as Helm does
    // (`execution error at (FILE:LINE:COL): MESSAGE`).
    m.insert(
        "required",
        func(&[Param::Str, Param::Any], None, |_, a| match &a[1] {
            Value::Nil => Err(format!("{WARN_START}{}{WARN_END}", s(&a[0]))),
            Value::String(v) if v.is_empty() => Err(format!("{WARN_START}{}{WARN_END}", s(&a[0]))),
            v => Ok(v.clone()),
        }),
    );
    // Helm replaces Sprig's `fail` so that its message is reported like `required`'s.
    m.insert(
        "fail",
        func(&[Param::Str], None, |_, a| {
            Err(format!("{WARN_START}{}{WARN_END}", s(&a[0])))
        }),
    );
    // Client-only rendering has no cluster to look objects up in: Helm answers an empty map.
    m.insert(
        "lookup",
        func(
            &[Param::Str, Param::Str, Param::Str, Param::Str],
            None,
            |_, _| Ok(Value::empty_map()),
        ),
    );
    m.insert(
        "toYaml",
        func(A, None, |_, a| Ok(Value::String(to_yaml(&a[0])))),
    );
    m.insert(
        "mustToYaml",
        func(A, None, |_, a| {
            yaml::to_yaml(&a[0]).map(|y| Value::String(y.trim_end_matches('\n').to_owned()))
        }),
    );
    m.insert(
        "fromYaml",
        func(&[Param::Str], None, |_, a| Ok(from_yaml(s(&a[0])))),
    );
    m.insert("fromYamlArray", func(&[Param::Str], None, |_, a| {
        Ok(match yaml::parse_values_document(s(&a[0])) {
            Ok(Value::List(l)) => Value::List(l),
            Ok(Value::Nil) => Value::list(Vec::new()),
            Ok(other) => Value::list(vec![Value::String(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
                json_kind(&other)
            ))]),
            Err(e) => Value::list(vec![Value::String(e)]),
        })
    }));
    m.insert(
        "toJson",
        func(A, None, |_, a| {
            Ok(Value::String(
                json::to_json(&a[0], true).unwrap_or_default(),
            ))
        }),
    );
    m.insert(
        "mustToJson",
        func(A, None, |_, a| {
            json::to_json(&a[0], true).map(Value::String)
        }),
    );
    m.insert(
        "toRawJson",
        func(A, None, |_, a| {
            Ok(Value::String(
                json::to_json(&a[0], false).unwrap_or_default(),
            ))
        }),
    );
    m.insert(
        "mustToRawJson",
        func(A, None, |_, a| {
            json::to_json(&a[0], false).map(Value::String)
        }),
    );
    m.insert(
        "mustToPrettyJson",
        func(A, None, |_, a| {
            json::to_json_pretty(&a[0]).map(Value::String)
        }),
    );
    m.insert(
        "toPrettyJson",
        func(A, None, |_, a| {
            Ok(Value::String(
                json::to_json_pretty(&a[0]).unwrap_or_default(),
            ))
        }),
    );
    m.insert(
        "fromJson",
        func(&[Param::Str], None, |_, a| {
            Ok(match json::from_json(s(&a[0])) {
                Ok(v @ Value::Map(_)) => v,
                Ok(other) => error_map(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    json_kind(&other)
                )),
                Err(e) => error_map(e),
            })
        }),
    );
    m.insert(
        "fromJsonArray",
        func(&[Param::Str], None, |_, a| {
            Ok(match json::from_json(s(&a[0])) {
                Ok(v @ Value::List(_)) => v,
                Ok(other) => Value::list(vec![Value::String(format!(
                    "json: cannot unmarshal {} into Go value of type []interface {{}}",
                    json_kind(&other)
                ))]),
                Err(e) => Value::list(vec![Value::String(e)]),
            })
        }),
    );
}

/// Helm's `toYaml`: errors are swallowed into an empty string, the final newline is dropped.
fn to_yaml(v: &Value) -> String {
    yaml::to_yaml(v)
        .map(|y| y.strip_suffix('\n').map(str::to_owned).unwrap_or(y))
        .unwrap_or_default()
}

/// Helm's `fromYaml`: a map, or a map whose `Error` key holds the parse error.
fn from_yaml(text: &str) -> Value {
    match yaml::parse_values_document(text) {
        Ok(v @ Value::Map(_)) => v,
        Ok(Value::Nil) => Value::empty_map(),
        Ok(other) => error_map(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        )),
        Err(e) => error_map(e),
    }
}

fn error_map(message: String) -> Value {
    let m = Value::empty_map();
    if let Value::Map(inner) = &m {
        inner.insert("Error", Value::String(message));
    }
    m
}

/// How encoding/json names the JSON kind of a value in unmarshal errors.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::Int64(_) | Value::Float(_) => "number",
        Value::List(_) => "array",
        Value::Map(_) | Value::Object(_) => "object",
        Value::Nil => "null",
    }
}
