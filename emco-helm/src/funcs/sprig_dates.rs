//! Sprig's date functions with Go's reference-time layouts (`2006-01-02T15:04:05Z07:00`).
//!
//! The local zone is UTC. `dateInZone` and `htmlDateInZone` read named zones from the system's
//! zoneinfo files (a name that does not load is UTC, as in Sprig); a time parsed by `toDate`
//! keeps the zone it was written in.

use std::sync::Arc;

use emco_go::time::{format_duration, parse_duration};

use super::gotime::{self, Time};
use super::{FResult, Param, Registry, func, godur, s};
use crate::value::{Object, Value};

impl Object for Time {
    fn type_name(&self) -> &str {
        "time.Time"
    }

    fn member(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        Some(Ok(match (name, args) {
            ("Unix", []) => Value::Int64(self.secs),
            ("UnixNano", []) => Value::Int64(i64::try_from(self.unix_nanos()).unwrap_or(i64::MAX)),
            ("Year", []) => Value::Int(self.civil().0),
            ("YearDay", []) => Value::Int(i64::from(self.civil().7)),
            ("Day", []) => Value::Int(i64::from(self.civil().2)),
            ("Hour", []) => Value::Int(i64::from(self.civil().3)),
            ("Minute", []) => Value::Int(i64::from(self.civil().4)),
            ("Second", []) => Value::Int(i64::from(self.civil().5)),
            ("Nanosecond", []) => Value::Int(i64::from(self.nanos)),
            ("UTC", []) => Value::Object(Arc::new(self.in_utc())),
            ("IsZero", []) => Value::Bool(*self == Time::zero()),
            ("Format", [Value::String(layout)]) => Value::String(self.format(layout)),
            ("Format", _) => return Some(Err("wrong arguments for Format".to_owned())),
            ("String", []) => Value::String(self.string()),
            _ => return None,
        }))
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(
            name,
            "Unix"
                | "UnixNano"
                | "Year"
                | "YearDay"
                | "Day"
                | "Hour"
                | "Minute"
                | "Second"
                | "Nanosecond"
                | "UTC"
                | "IsZero"
                | "Format"
                | "String"
        )
    }

    fn display(&self) -> String {
        self.string()
    }

    fn kind(&self) -> &'static str {
        "struct"
    }

    fn json_text(&self) -> Option<String> {
        Some(self.format("2006-01-02T15:04:05.999999999Z07:00"))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// The `time.Time` inside a value.
fn time_arg(v: &Value) -> Option<Time> {
    match v {
        Value::Object(o) => o.as_any().and_then(|a| a.downcast_ref::<Time>()).cloned(),
        _ => None,
    }
}

/// Sprig's reading of a date argument: a time, Unix seconds (`int`, `int64`, `int32`), or else
/// now; shown in the local zone (UTC) as Sprig's `t.In(loc)` does.
fn as_time(v: &Value) -> Time {
    match v {
        Value::Int(i) | Value::Int64(i) => Time::utc(*i, 0),
        v => time_arg(v).map_or_else(Time::now, |t| t.in_utc()),
    }
}

/// Go rejects a `time.Time` parameter given anything else.
fn want_time(v: &Value) -> Result<Time, String> {
    time_arg(v).ok_or_else(|| {
        format!(
            "wrong type for value; expected time.Time; got {}",
            v.type_name()
        )
    })
}

/// `Duration.Round(time.Second)`: halves round away from zero.
fn round_to_second(ns: i64) -> i64 {
    const S: i64 = 1_000_000_000;
    let r = ns % S;
    let down = ns - r;
    if r.abs() * 2 < S {
        down
    } else {
        down.saturating_add(if ns < 0 { -S } else { S })
    }
}

fn time_value(t: Time) -> FResult {
    Ok(Value::Object(Arc::new(t)))
}

fn text(v: String) -> FResult {
    Ok(Value::String(v))
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "now",
        func(&[], None, |_, _| Ok(Value::Object(Arc::new(Time::now())))),
    );
    m.insert(
        "date",
        func(&[Param::Str, Param::Any], None, |_, a| {
            text(as_time(&a[1]).format(s(&a[0])))
        }),
    );
    m.insert(
        "dateInZone",
        func(&[Param::Str, Param::Any, Param::Str], None, |_, a| {
            let loc = gotime::load_location(s(&a[2]));
            text(as_time(&a[1]).in_location(loc.as_deref()).format(s(&a[0])))
        }),
    );
    m.insert(
        "htmlDate",
        func(&[Param::Any], None, |_, a| {
            text(as_time(&a[0]).format("2006-01-02"))
        }),
    );
    m.insert(
        "htmlDateInZone",
        func(&[Param::Any, Param::Str], None, |_, a| {
            let loc = gotime::load_location(s(&a[1]));
            text(
                as_time(&a[0])
                    .in_location(loc.as_deref())
                    .format("2006-01-02"),
            )
        }),
    );
    m.insert(
        "dateModify",
        func(&[Param::Str, Param::Any], None, |_, a| {
            let t = want_time(&a[1])?;
            // Sprig returns the date unchanged when the modification does not parse.
            time_value(match parse_duration(s(&a[0])) {
                Ok(d) => t.add(d),
                Err(_) => t,
            })
        }),
    );
    m.insert(
        "mustDateModify",
        func(&[Param::Str, Param::Any], None, |_, a| {
            let t = want_time(&a[1])?;
            time_value(t.add(parse_duration(s(&a[0])).map_err(|e| e.to_string())?))
        }),
    );
    m.insert(
        "ago",
        func(&[Param::Any], None, |_, a| {
            // Sprig's `dateAgo`: a time, Unix seconds, or else now (so "0s").
            let t = match &a[0] {
                Value::Int(i) | Value::Int64(i) => Time::utc(*i, 0),
                v => time_arg(v).unwrap_or_else(Time::now),
            };
            text(format_duration(round_to_second(t.since())))
        }),
    );
    m.insert(
        "duration",
        func(&[Param::Any], None, |_, a| {
            // Sprig reads only a decimal string or an int64 as seconds; any other type is 0.
            let secs = match &a[0] {
                Value::String(s) => s.parse::<i64>().unwrap_or(0),
                Value::Int64(i) => *i,
                _ => 0,
            };
            text(format_duration(secs.wrapping_mul(1_000_000_000)))
        }),
    );
    m.insert(
        "durationRound",
        func(&[Param::Any], None, |_, a| {
            // A duration string, int64 nanoseconds, or the time elapsed since a time.
            let ns = match &a[0] {
                Value::String(s) => parse_duration(s).unwrap_or(0),
                Value::Int64(i) => *i,
                v => time_arg(v).map_or(0, |t| t.since()),
            };
            text(godur::round(ns))
        }),
    );
    m.insert(
        "toDate",
        func(&[Param::Str, Param::Str], None, |_, a| {
            // Sprig drops the parse error and answers Go's zero time.
            time_value(gotime::parse(s(&a[0]), s(&a[1])).unwrap_or_else(|_| Time::zero()))
        }),
    );
    m.insert(
        "mustToDate",
        func(&[Param::Str, Param::Str], None, |_, a| {
            time_value(gotime::parse(s(&a[0]), s(&a[1]))?)
        }),
    );
    // Sprig's older snake_case names.
    for (alias, name) in [
        ("date_in_zone", "dateInZone"),
        ("date_modify", "dateModify"),
        ("must_date_modify", "mustDateModify"),
    ] {
        if let Some(f) = m.get(name).copied() {
            m.insert(alias, f);
        }
    }
    m.insert(
        "unixEpoch",
        func(&[Param::Any], None, |_, a| {
            text(as_time(&a[0]).secs.to_string())
        }),
    );
}
