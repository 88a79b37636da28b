//! Sprig's defaults, type tests, conversions, math and semver functions.

use std::sync::Arc;

use super::{Param, Registry, func, s, strval, to_float64, to_int64};
use crate::semver::{Constraints, Version, VersionObject};
use crate::value::Value;

const A: &[Param] = &[Param::Any];
const AA: &[Param] = &[Param::Any, Param::Any];

/// Sprig's `empty`.
fn empty(v: &Value) -> bool {
    !v.is_true()
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "default",
        func(A, Some(Param::Any), |_, a| {
            Ok(match a.get(1) {
                Some(given) if !empty(given) => given.clone(),
                _ => a[0].clone(),
            })
        }),
    );
    m.insert("empty", func(A, None, |_, a| Ok(Value::Bool(empty(&a[0])))));
    m.insert(
        "coalesce",
        func(&[], Some(Param::Any), |_, a| {
            Ok(a.into_iter().find(|v| !empty(v)).unwrap_or_default())
        }),
    );
    m.insert(
        "all",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::Bool(a.iter().all(|v| !empty(v))))
        }),
    );
    m.insert(
        "any",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::Bool(a.iter().any(|v| !empty(v))))
        }),
    );
    m.insert(
        "ternary",
        func(&[Param::Any, Param::Any, Param::Bool], None, |_, a| {
            Ok(if matches!(a[2], Value::Bool(true)) {
                a[0].clone()
            } else {
                a[1].clone()
            })
        }),
    );
    m.insert(
        "kindOf",
        func(A, None, |_, a| Ok(Value::str(a[0].kind_name()))),
    );
    m.insert(
        "kindIs",
        func(&[Param::Str, Param::Any], None, |_, a| {
            Ok(Value::Bool(s(&a[0]) == a[1].kind_name()))
        }),
    );
    m.insert(
        "typeOf",
        func(A, None, |_, a| Ok(Value::String(a[0].type_name()))),
    );
    m.insert(
        "typeIs",
        func(&[Param::Str, Param::Any], None, |_, a| {
            Ok(Value::Bool(s(&a[0]) == a[1].type_name()))
        }),
    );
    m.insert(
        "deepEqual",
        func(AA, None, |_, a| Ok(Value::Bool(a[0].deep_equal(&a[1])))),
    );
    m.insert("int", func(A, None, |_, a| Ok(Value::Int(to_int64(&a[0])))));
    m.insert(
        "int64",
        func(A, None, |_, a| Ok(Value::Int64(to_int64(&a[0])))),
    );
    m.insert(
        "float64",
        func(A, None, |_, a| Ok(Value::Float(to_float64(&a[0])))),
    );
    m.insert(
        "atoi",
        func(&[Param::Str], None, |_, a| {
            Ok(Value::Int(s(&a[0]).parse::<i64>().unwrap_or(0)))
        }),
    );
    m.insert(
        "add",
        func(&[], Some(Param::Any), |_, a| {
            Ok(Value::Int64(
                a.iter().map(to_int64).fold(0i64, i64::wrapping_add),
            ))
        }),
    );
    m.insert(
        "add1",
        func(A, None, |_, a| {
            Ok(Value::Int64(to_int64(&a[0]).wrapping_add(1)))
        }),
    );
    m.insert(
        "sub",
        func(AA, None, |_, a| {
            Ok(Value::Int64(to_int64(&a[0]).wrapping_sub(to_int64(&a[1]))))
        }),
    );
    m.insert(
        "mul",
        func(A, Some(Param::Any), |_, a| {
            Ok(Value::Int64(
                a.iter().map(to_int64).fold(1i64, i64::wrapping_mul),
            ))
        }),
    );
    m.insert(
        "div",
        func(AA, None, |_, a| {
            let d = to_int64(&a[1]);
            if d == 0 {
                return Err("runtime error: integer divide by zero".to_owned());
            }
            Ok(Value::Int64(to_int64(&a[0]).wrapping_div(d)))
        }),
    );
    m.insert(
        "mod",
        func(AA, None, |_, a| {
            let d = to_int64(&a[1]);
            if d == 0 {
                return Err("runtime error: integer divide by zero".to_owned());
            }
            Ok(Value::Int64(to_int64(&a[0]).wrapping_rem(d)))
        }),
    );
    m.insert(
        "max",
        func(A, Some(Param::Any), |_, a| {
            Ok(Value::Int64(a.iter().map(to_int64).max().unwrap_or(0)))
        }),
    );
    m.insert(
        "min",
        func(A, Some(Param::Any), |_, a| {
            Ok(Value::Int64(a.iter().map(to_int64).min().unwrap_or(0)))
        }),
    );
    m.insert(
        "floor",
        func(A, None, |_, a| Ok(Value::Float(to_float64(&a[0]).floor()))),
    );
    m.insert(
        "ceil",
        func(A, None, |_, a| Ok(Value::Float(to_float64(&a[0]).ceil()))),
    );
    m.insert(
        "round",
        func(&[Param::Any, Param::Int], Some(Param::Float), |_, a| {
            let (v, places) = (to_float64(&a[0]), super::i(&a[1]));
            let half = match a.get(2) {
                Some(Value::Float(f)) => *f,
                _ => 0.5,
            };
            let pow = 10f64.powi(i32::try_from(places).unwrap_or(0));
            let digit = pow * v;
            let (int, frac) = (digit.trunc(), digit.fract());
            let rounded = if frac.abs() >= half {
                int + frac.signum()
            } else {
                int
            };
            Ok(Value::Float(rounded / pow))
        }),
    );
    m.insert(
        "semver",
        func(&[Param::Str], None, |_, a| {
            Ok(Value::Object(Arc::new(VersionObject(Version::parse(s(
                &a[0],
            ))?))))
        }),
    );
    m.insert(
        "semverCompare",
        func(&[Param::Str, Param::Str], None, |_, a| {
            let c = Constraints::parse(s(&a[0]))?;
            let v = Version::parse(s(&a[1]))?;
            Ok(Value::Bool(c.check(&v)))
        }),
    );
    m.insert(
        "fail",
        func(&[Param::Str], None, |_, a| Err(s(&a[0]).to_owned())),
    );
    m.insert(
        "uuidv4",
        func(&[], None, |_, _| {
            let mut b: [u8; 16] = rand::random();
            b[6] = (b[6] & 0x0f) | 0x40;
            b[8] = (b[8] & 0x3f) | 0x80;
            let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
            Ok(Value::String(format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            )))
        }),
    );
    m.insert(
        "toDecimal",
        func(A, None, |_, a| {
            Ok(Value::Int64(
                i64::from_str_radix(&strval(&a[0]), 8).unwrap_or(0),
            ))
        }),
    );
}
