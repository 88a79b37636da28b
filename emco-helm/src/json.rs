//! JSON as Go's `encoding/json` writes it: sorted keys, HTML-safe escaping, Go's float format.

use crate::gofmt::format_float_json;
use crate::value::Value;
use emco_go::json::write_string;

/// `json.Marshal` (with `escape_html`, Go's default) or an encoder with HTML escaping off
/// (Sprig's `toRawJson`).
///
/// # Errors
/// `json: unsupported value: NaN` and the like, as Go reports them.
pub fn to_json(v: &Value, escape_html: bool) -> Result<String, String> {
    let mut out = String::new();
    write(v, escape_html, None, 0, &mut out)?;
    Ok(out)
}

/// `json.MarshalIndent(v, "", "  ")`.
///
/// # Errors
/// As [`to_json`].
pub fn to_json_pretty(v: &Value) -> Result<String, String> {
    let mut out = String::new();
    write(v, true, Some("  "), 0, &mut out)?;
    Ok(out)
}

fn newline(indent: Option<&str>, depth: usize, out: &mut String) {
    if let Some(ind) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn write(
    v: &Value,
    html: bool,
    indent: Option<&str>,
    depth: usize,
    out: &mut String,
) -> Result<(), String> {
    if depth > crate::value::MAX_NESTING {
        return Err(format!(
            "json: unsupported value: encountered a cycle via {}",
            v.type_name()
        ));
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(format!(
                    "json: unsupported value: {}",
                    crate::gofmt::format_float_g(*f, None)
                ));
            }
            out.push_str(&format_float_json(*f));
        }
        Value::String(s) => write_string(s, html, out),
        Value::Object(o) => match o.struct_fields() {
            // encoding/json writes a struct's fields in declaration order.
            Some(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(indent, depth + 1, out);
                    write_string(k, html, out);
                    out.push(':');
                    if indent.is_some() {
                        out.push(' ');
                    }
                    write(v, html, indent, depth + 1, out)?;
                }
                newline(indent, depth, out);
                out.push('}');
            }
            None => write_string(&o.json_text().unwrap_or_else(|| o.display()), html, out),
        },
        Value::List(l) => {
            if l.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                write(e, html, indent, depth + 1, out)?;
            }
            newline(indent, depth, out);
            out.push(']');
        }
        Value::Map(m) => {
            let entries = m.snapshot();
            if entries.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (k, e)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(indent, depth + 1, out);
                write_string(k, html, out);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write(e, html, indent, depth + 1, out)?;
            }
            newline(indent, depth, out);
            out.push('}');
        }
    }
    Ok(())
}

/// `json.Unmarshal` into `interface{}`: numbers become float64.
///
/// # Errors
/// The parser's message for malformed JSON.
pub fn from_json(text: &str) -> Result<Value, String> {
    let parsed: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(Value::from_json(&parsed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn json_like_go() {
        let mut m = BTreeMap::new();
        m.insert("b".to_owned(), Value::Float(1.0));
        m.insert("a".to_owned(), Value::str("<x&y>"));
        m.insert(
            "c".to_owned(),
            Value::list(vec![Value::Nil, Value::Bool(true), Value::Float(0.5)]),
        );
        let v = Value::map(m);
        assert_eq!(
            to_json(&v, true).unwrap(),
            r#"{"a":"\u003cx\u0026y\u003e","b":1,"c":[null,true,0.5]}"#
        );
        assert_eq!(
            to_json(&v, false).unwrap(),
            r#"{"a":"<x&y>","b":1,"c":[null,true,0.5]}"#
        );
        assert_eq!(
            to_json_pretty(&v).unwrap(),
            "{\n  \"a\": \"\\u003cx\\u0026y\\u003e\",\n  \"b\": 1,\n  \"c\": [\n    null,\n    true,\n    0.5\n  ]\n}"
        );
        assert_eq!(to_json(&Value::empty_map(), true).unwrap(), "{}");
        assert!(to_json(&Value::Float(f64::NAN), true).is_err());
        assert_eq!(
            to_json(&Value::str("a\u{1}\u{8}"), true).unwrap(),
            "\"a\\u0001\\b\""
        );
    }
}
