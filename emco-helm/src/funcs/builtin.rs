//! Go's `text/template` builtin functions.

use super::{FResult, Func, Param, Registry, func};
use crate::gofmt;
use crate::template::Exec;
use crate::value::Value;

const ANY: &[Param] = &[Param::Any];
const ANY2: &[Param] = &[Param::Any, Param::Any];

pub(super) fn register(m: &mut Registry) {
    let lazy = Func {
        params: ANY,
        variadic: Some(Param::Any),
        imp: |_, _| Ok(Value::Nil),
        short_circuit: true,
    };
    m.insert("and", lazy);
    m.insert("or", lazy);
    m.insert(
        "not",
        func(ANY, None, |_, a| Ok(Value::Bool(!a[0].is_true()))),
    );
    m.insert("len", func(ANY, None, len));
    // The executor puts the callee's expression text first, as Go's `evalCall` does. No
    // template value is a Go func (data is maps, lists, scalars and method-bearing objects),
    // so `call` always ends in Go's error for a nil or a non-function.
    m.insert(
        "call",
        func(ANY, Some(Param::Any), |_, a| {
            let name = a.first().and_then(Value::as_str).unwrap_or("");
            Err(match a.get(1) {
                None | Some(Value::Nil) => "call of nil".to_owned(),
                Some(v) => format!("non-function {name} of type {}", v.type_name()),
            })
        }),
    );
    m.insert("index", func(ANY, Some(Param::Any), index));
    m.insert("slice", func(ANY, Some(Param::Any), slice));
    m.insert(
        "print",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::String(gofmt::sprint(&a)))
        }),
    );
    m.insert(
        "println",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::String(gofmt::sprintln(&a)))
        }),
    );
    m.insert(
        "printf",
        func(&[Param::Str], Some(Param::Any), |_, a| {
            Ok(Value::String(gofmt::sprintf(super::s(&a[0]), &a[1..])))
        }),
    );
    m.insert(
        "html",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::String(html_escape(&eval_args(&a))))
        }),
    );
    m.insert(
        "js",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::String(js_escape(&eval_args(&a))))
        }),
    );
    m.insert(
        "urlquery",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::String(query_escape(&eval_args(&a))))
        }),
    );
    m.insert("eq", func(ANY, Some(Param::Any), eq));
    m.insert(
        "ne",
        func(ANY2, None, |_, a| Ok(Value::Bool(!equal(&a[0], &a[1])?))),
    );
    m.insert(
        "lt",
        func(ANY2, None, |_, a| Ok(Value::Bool(less(&a[0], &a[1])?))),
    );
    m.insert(
        "le",
        func(ANY2, None, |_, a| Ok(Value::Bool(less_eq(&a[0], &a[1])?))),
    );
    m.insert(
        "gt",
        func(ANY2, None, |_, a| Ok(Value::Bool(!less_eq(&a[0], &a[1])?))),
    );
    m.insert(
        "ge",
        func(ANY2, None, |_, a| Ok(Value::Bool(!less(&a[0], &a[1])?))),
    );
}

/// Go's `evalArgs`: a single string argument as is, otherwise `fmt.Sprint`.
fn eval_args(a: &[Value]) -> String {
    match a {
        [Value::String(s)] => s.clone(),
        _ => gofmt::sprint(a),
    }
}

fn len(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let n = match &a[0] {
        Value::String(s) => s.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        Value::Object(o) if o.len().is_some() => o.len().unwrap_or(0),
        Value::Nil => return Err("len of nil pointer".to_owned()),
        other => return Err(format!("len of type {}", other.type_name())),
    };
    Ok(Value::Int(n as i64))
}

fn index_arg(index: &Value, cap: usize) -> Result<usize, String> {
    let x = match index {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Nil => return Err("cannot index slice/array with nil".to_owned()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ));
        }
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn index(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let mut item = a[0].clone();
    if item.is_nil() {
        return Err("index of untyped nil".to_owned());
    }
    let mut first = true;
    for idx in &a[1..] {
        if item.is_nil() && !first {
            return Err("index of nil pointer".to_owned());
        }
        first = false;
        item = match &item {
            Value::List(l) => {
                let x = index_arg(idx, l.len())?;
                l.get(x)
                    .cloned()
                    .ok_or_else(|| format!("index out of range: {x}"))?
            }
            Value::String(s) => {
                let x = index_arg(idx, s.len())?;
                Value::Int(i64::from(
                    *s.as_bytes()
                        .get(x)
                        .ok_or_else(|| format!("index out of range: {x}"))?,
                ))
            }
            // A `[]byte`: the byte, a `uint8` (modelled as an `int`).
            Value::Object(o) if o.bytes().is_some() => {
                let b = o.bytes().unwrap_or_default();
                let x = index_arg(idx, b.len())?;
                Value::Int(i64::from(
                    *b.get(x).ok_or_else(|| format!("index out of range: {x}"))?,
                ))
            }
            Value::Map(m) => match idx {
                Value::String(k) => m.get(k).unwrap_or_default(),
                Value::Nil => return Err("value is nil; should be of type string".to_owned()),
                other => {
                    return Err(format!(
                        "value has type {}; should be string",
                        other.type_name()
                    ));
                }
            },
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

fn slice(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let item = &a[0];
    let idx = &a[1..];
    if idx.len() > 3 {
        return Err(format!("too many slice indexes: {}", idx.len()));
    }
    let cap = match item {
        Value::String(s) => {
            if idx.len() == 3 {
                return Err("cannot 3-index slice a string".to_owned());
            }
            s.len()
        }
        Value::List(l) => l.len(),
        Value::Nil => return Err("slice of untyped nil".to_owned()),
        other => return Err(format!("can't slice item of type {}", other.type_name())),
    };
    let mut bounds = [0, cap, cap];
    for (i, v) in idx.iter().enumerate() {
        bounds[i] = index_arg(v, cap)?;
    }
    if bounds[0] > bounds[1] {
        return Err(format!(
            "invalid slice index: {} > {}",
            bounds[0], bounds[1]
        ));
    }
    if idx.len() == 3 && bounds[1] > bounds[2] {
        return Err(format!(
            "invalid slice index: {} > {}",
            bounds[1], bounds[2]
        ));
    }
    Ok(match item {
        Value::String(s) => {
            Value::String(String::from_utf8_lossy(&s.as_bytes()[bounds[0]..bounds[1]]).into_owned())
        }
        Value::List(l) => Value::list(l[bounds[0]..bounds[1]].to_vec()),
        _ => Value::Nil,
    })
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Basic {
    Bool,
    Int,
    Float,
    String,
    Other,
}

fn basic(v: &Value) -> Basic {
    match v {
        Value::Bool(_) => Basic::Bool,
        Value::Int(_) | Value::Int64(_) => Basic::Int,
        Value::Float(_) => Basic::Float,
        Value::String(_) => Basic::String,
        _ => Basic::Other,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";

/// Go's `eq` of two values.
fn equal(a: &Value, b: &Value) -> Result<bool, String> {
    let (ka, kb) = (basic(a), basic(b));
    if ka != kb {
        if a.is_nil() || b.is_nil() {
            return Ok(false);
        }
        return Err(BAD_COMPARISON.to_owned());
    }
    Ok(match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Nil, Value::Nil) => true,
        (Value::Nil, _) | (_, Value::Nil) => false,
        (Value::Object(x), Value::Object(y)) => std::sync::Arc::ptr_eq(x, y),
        (x, y) if x.type_name() != y.type_name() => {
            return Err(format!(
                "non-comparable types {}: {}, {}: {}",
                x.to_go_string(),
                x.type_name(),
                y.type_name(),
                y.to_go_string()
            ));
        }
        (_, y) => {
            return Err(format!(
                "non-comparable type {}: {}",
                y.to_go_string(),
                y.type_name()
            ));
        }
    })
}

fn eq(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    if a.len() < 2 {
        return Err("missing argument for comparison".to_owned());
    }
    for b in &a[1..] {
        if equal(&a[0], b)? {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

fn less(a: &Value, b: &Value) -> Result<bool, String> {
    let (ka, kb) = (basic(a), basic(b));
    if ka == Basic::Other || kb == Basic::Other {
        return Err("invalid type for comparison".to_owned());
    }
    if ka != kb {
        return Err(BAD_COMPARISON.to_owned());
    }
    match (a, b) {
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => Ok(x < y),
        (Value::Float(x), Value::Float(y)) => Ok(x < y),
        (Value::String(x), Value::String(y)) => Ok(x < y),
        _ => Err("invalid type for comparison".to_owned()),
    }
}

fn less_eq(a: &Value, b: &Value) -> Result<bool, String> {
    Ok(less(a, b)? || equal(a, b)?)
}

/// Go's `template.HTMLEscapeString`.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{fffd}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`.
fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c if !c.is_ascii() && c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Go's `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
