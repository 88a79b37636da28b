//! Sprig's list functions.

use super::sprig_strings::strslice;
use super::{FResult, Param, Registry, func, i, to_int64};
use crate::template::Exec;
use crate::value::Value;

const A: &[Param] = &[Param::Any];
const AA: &[Param] = &[Param::Any, Param::Any];

/// Longest list `until` and friends may build.
const MAX_LIST: i64 = 1 << 20;

/// The elements of a list argument, or Sprig's panic message for another type.
fn elems<'v>(v: &'v Value, what: &str) -> Result<&'v [Value], String> {
    match v {
        Value::List(l) => Ok(l.as_slice()),
        Value::Nil => {
            Err("runtime error: invalid memory address or nil pointer dereference".to_owned())
        }
        other => Err(format!("Cannot {what} on type {}", other.kind_name())),
    }
}

fn list(v: Vec<Value>) -> FResult {
    Ok(Value::list(v))
}

pub(super) fn register(m: &mut Registry) {
    m.insert("list", func(&[], Some(Param::Any), |_, a| list(a)));
    let push = func(AA, None, |_, a| {
        let mut l = elems(&a[0], "push")?.to_vec();
        l.push(a[1].clone());
        list(l)
    });
    m.insert("append", push);
    m.insert("push", push);
    m.insert(
        "prepend",
        func(AA, None, |_, a| {
            let mut l = vec![a[1].clone()];
            l.extend_from_slice(elems(&a[0], "prepend")?);
            list(l)
        }),
    );
    m.insert(
        "first",
        func(A, None, |_, a| {
            Ok(elems(&a[0], "find first")?
                .first()
                .cloned()
                .unwrap_or_default())
        }),
    );
    m.insert(
        "last",
        func(A, None, |_, a| {
            Ok(elems(&a[0], "find last")?
                .last()
                .cloned()
                .unwrap_or_default())
        }),
    );
    m.insert(
        "rest",
        func(A, None, |_, a| {
            let l = elems(&a[0], "find rest")?;
            if l.is_empty() {
                Ok(Value::Nil)
            } else {
                list(l[1..].to_vec())
            }
        }),
    );
    m.insert(
        "initial",
        func(A, None, |_, a| {
            let l = elems(&a[0], "find initial")?;
            if l.is_empty() {
                Ok(Value::Nil)
            } else {
                list(l[..l.len() - 1].to_vec())
            }
        }),
    );
    m.insert(
        "uniq",
        func(A, None, |_, a| {
            let mut out: Vec<Value> = Vec::new();
            for v in elems(&a[0], "find uniq")? {
                if !out.iter().any(|o| o.deep_equal(v)) {
                    out.push(v.clone());
                }
            }
            list(out)
        }),
    );
    m.insert(
        "has",
        func(AA, None, |_, a| {
            Ok(Value::Bool(match &a[1] {
                Value::List(l) => l.iter().any(|v| v.deep_equal(&a[0])),
                _ => false,
            }))
        }),
    );
    m.insert(
        "without",
        func(A, Some(Param::Any), |_, a| {
            let omit = &a[1..];
            let l = elems(&a[0], "find without")?;
            list(
                l.iter()
                    .filter(|v| !omit.iter().any(|o| o.deep_equal(v)))
                    .cloned()
                    .collect(),
            )
        }),
    );
    m.insert(
        "compact",
        func(A, None, |_, a| {
            list(
                elems(&a[0], "compact")?
                    .iter()
                    .filter(|v| v.is_true())
                    .cloned()
                    .collect(),
            )
        }),
    );
    m.insert(
        "reverse",
        func(A, None, |_, a| {
            list(
                elems(&a[0], "find reverse")?
                    .iter()
                    .rev()
                    .cloned()
                    .collect(),
            )
        }),
    );
    m.insert(
        "concat",
        func(&[], Some(Param::Any), |_, a| {
            let mut out = Vec::new();
            for v in &a {
                out.extend_from_slice(elems(v, "concat")?);
            }
            list(out)
        }),
    );
    m.insert(
        "sortAlpha",
        func(A, None, |_, a| {
            let mut v = strslice(&a[0]);
            v.sort();
            list(v.into_iter().map(Value::String).collect())
        }),
    );
    m.insert(
        "until",
        func(&[Param::Int], None, |_, a| {
            until_step(0, i(&a[0]), if i(&a[0]) < 0 { -1 } else { 1 })
        }),
    );
    m.insert(
        "untilStep",
        func(&[Param::Int, Param::Int, Param::Int], None, |_, a| {
            until_step(i(&a[0]), i(&a[1]), i(&a[2]))
        }),
    );
    m.insert("slice", func(A, Some(Param::Any), sprig_slice));
    m.insert(
        "chunk",
        func(&[Param::Int, Param::Any], None, |_, a| {
            let size = i(&a[0]);
            let l = elems(&a[1], "chunk")?;
            if size <= 0 {
                return Err("runtime error: integer divide by zero".to_owned());
            }
            list(
                l.chunks(size as usize)
                    .map(|c| Value::list(c.to_vec()))
                    .collect(),
            )
        }),
    );
}

/// Sprig's `untilStep`: integers from `start` towards `stop` by `step` (Go `int`s).
pub(super) fn until_step(start: i64, stop: i64, step: i64) -> FResult {
    let mut out = Vec::new();
    if step == 0 || (step > 0 && start >= stop) || (step < 0 && start <= stop) {
        return list(out);
    }
    let count = ((stop - start).unsigned_abs()).div_ceil(step.unsigned_abs());
    if count > MAX_LIST as u64 {
        return Err(format!(
            "list of {count} elements exceeds the limit of {MAX_LIST}"
        ));
    }
    let mut v = start;
    while (step > 0 && v < stop) || (step < 0 && v > stop) {
        out.push(Value::Int(v));
        v += step;
    }
    list(out)
}

/// Sprig's `slice` (it replaces Go's builtin in Helm): lists only, bounds as Go slicing.
fn sprig_slice(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let l = match &a[0] {
        Value::List(l) => l,
        other => {
            return Err(format!(
                "list should be type of slice or array but {}",
                other.kind_name()
            ));
        }
    };
    if l.is_empty() {
        return Ok(Value::Nil);
    }
    let start = a.get(1).map_or(0, to_int64);
    let end = if a.len() < 3 {
        l.len() as i64
    } else {
        to_int64(&a[2])
    };
    if start < 0 || end < start || end > l.len() as i64 {
        return Err(format!("reflect: slice index out of range [{start}:{end}]"));
    }
    list(l[start as usize..end as usize].to_vec())
}
