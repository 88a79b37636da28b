//! Sprig's conversions (`strval`, and `cast.ToInt64`/`ToFloat64` with their lenient rules).

use crate::value::Value;

/// Sprig's `strval`: strings as they are, a `[]byte` as its text, anything else as `%v`
/// prints it.
pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) if o.bytes().is_some() => {
            String::from_utf8_lossy(o.bytes().unwrap_or_default()).into_owned()
        }
        other => other.to_go_string(),
    }
}

/// `cast.ToInt64`: numbers truncate, strings parse (base prefixes allowed), failures give 0.
pub(crate) fn to_int64(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => parse_int_base0(trim_zero_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// `cast.ToFloat64`.
pub(crate) fn to_float64(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => s.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// cast's `trimZeroDecimal`: "12.000" -> "12".
fn trim_zero_decimal(s: &str) -> &str {
    match s.split_once('.') {
        Some((int, frac))
            if !int.is_empty() && !frac.is_empty() && frac.bytes().all(|b| b == b'0') =>
        {
            int
        }
        _ => s,
    }
}

pub(crate) use emco_go::strconv::parse_int_base0;
