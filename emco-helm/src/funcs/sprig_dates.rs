//! Sprig's date functions with Go's reference-time layouts (`2006-01-02T15:04:05Z07:00`).
//!
//! Times are kept in UTC: the renderer has no time zone database, so `Local` and every zone
//! name other than `UTC` resolve to UTC, as Sprig does when `time.LoadLocation` fails.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{FResult, Param, Registry, func, godur, s};
use crate::value::{Object, Value};

/// A `time.Time` in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Time {
    secs: i64,
    nanos: u32,
}

impl Time {
    fn now() -> Time {
        let now = SystemTime::now();
        Time {
            secs: emco_core::time::unix_seconds(now),
            nanos: now
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos()),
        }
    }

    /// Nanoseconds since the Unix epoch.
    fn unix_nanos(self) -> i128 {
        i128::from(self.secs) * 1_000_000_000 + i128::from(self.nanos)
    }

    /// `t.Add(d)`.
    fn add(self, ns: i64) -> Time {
        let total = self.unix_nanos() + i128::from(ns);
        Time {
            secs: i64::try_from(total.div_euclid(1_000_000_000)).unwrap_or(i64::MAX),
            nanos: u32::try_from(total.rem_euclid(1_000_000_000)).unwrap_or(0),
        }
    }

    /// `time.Since(t)`, saturating like Go's `Time.Sub`.
    fn since(self) -> i64 {
        let d = Time::now().unix_nanos() - self.unix_nanos();
        i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
    }

    /// Year, month (1-12), day, hour, minute, second, day of week (0 = Sunday), day of year.
    fn civil(self) -> (i64, u32, u32, u32, u32, u32, u32, u32) {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400) as u32;
        let (year, month, day) = emco_core::time::civil_from_days(days);
        let weekday = (days + 4).rem_euclid(7) as u32;
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        const CUM: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
        let yday = CUM[(month - 1) as usize] + day + u32::from(leap && month > 2);
        (
            year,
            month,
            day,
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            weekday,
            yday,
        )
    }

    /// Go's `Time.Format(layout)` for a UTC time.
    fn format(self, layout: &str) -> String {
        const MONTHS: [&str; 12] = [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ];
        const DAYS: [&str; 7] = [
            "Sunday",
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
        ];
        let (year, month, day, hour, min, sec, wday, yday) = self.civil();
        let mut out = String::new();
        let mut rest = layout;
        while !rest.is_empty() {
            if let Some(frac) = fraction_token(rest) {
                let digits = format!("{:09}", self.nanos);
                let n = frac.len() - 1;
                let sep = &rest[..1];
                if frac.as_bytes()[1] == b'0' {
                    out.push_str(sep);
                    out.push_str(&digits[..n.min(9)]);
                } else {
                    let kept = digits[..n.min(9)].trim_end_matches('0');
                    if !kept.is_empty() {
                        out.push_str(sep);
                        out.push_str(kept);
                    }
                }
                rest = &rest[frac.len()..];
                continue;
            }
            match TOKENS.iter().find(|t| rest.starts_with(**t)) {
                Some(t) => {
                    let h12 = if hour % 12 == 0 { 12 } else { hour % 12 };
                    let pm = hour >= 12;
                    let text = match *t {
                        "January" => MONTHS[(month - 1) as usize].to_owned(),
                        "Jan" => MONTHS[(month - 1) as usize][..3].to_owned(),
                        "Monday" => DAYS[wday as usize].to_owned(),
                        "Mon" => DAYS[wday as usize][..3].to_owned(),
                        "MST" => "UTC".to_owned(),
                        "2006" => format!("{year:04}"),
                        z if z.starts_with('Z') => "Z".to_owned(),
                        "-07:00:00" => "+00:00:00".to_owned(),
                        "-070000" => "+000000".to_owned(),
                        "-07:00" => "+00:00".to_owned(),
                        "-0700" => "+0000".to_owned(),
                        "-07" => "+00".to_owned(),
                        "002" => format!("{yday:03}"),
                        "__2" => format!("{yday:>3}"),
                        "_2" => format!("{day:>2}"),
                        "01" => format!("{month:02}"),
                        "02" => format!("{day:02}"),
                        "03" => format!("{h12:02}"),
                        "04" => format!("{min:02}"),
                        "05" => format!("{sec:02}"),
                        "06" => format!("{:02}", year.rem_euclid(100)),
                        "15" => format!("{hour:02}"),
                        "PM" => (if pm { "PM" } else { "AM" }).to_owned(),
                        "pm" => (if pm { "pm" } else { "am" }).to_owned(),
                        "1" => month.to_string(),
                        "2" => day.to_string(),
                        "3" => h12.to_string(),
                        "4" => min.to_string(),
                        _ => sec.to_string(),
                    };
                    out.push_str(&text);
                    rest = &rest[t.len()..];
                }
                None => {
                    let c = rest.chars().next().unwrap_or(' ');
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
        out
    }
}

/// Layout elements, longest first as Go's `nextStdChunk` tells them apart.
const TOKENS: [&str; 33] = [
    "January",
    "Jan",
    "Monday",
    "Mon",
    "MST",
    "2006",
    "Z07:00:00",
    "Z070000",
    "Z07:00",
    "Z0700",
    "Z07",
    "-07:00:00",
    "-070000",
    "-07:00",
    "-0700",
    "-07",
    "002",
    "__2",
    "_2",
    "01",
    "02",
    "03",
    "04",
    "05",
    "06",
    "15",
    "PM",
    "pm",
    "1",
    "2",
    "3",
    "4",
    "5",
];

/// `.000` / `,999` style fractional-second tokens (a run of one digit after `.` or `,`, not
/// followed by another digit).
fn fraction_token(rest: &str) -> Option<&str> {
    let b = rest.as_bytes();
    if b.len() < 2 || !(b[0] == b'.' || b[0] == b',') || !(b[1] == b'0' || b[1] == b'9') {
        return None;
    }
    let digit = b[1];
    let mut n = 1;
    while n < b.len() && b[n] == digit {
        n += 1;
    }
    if b.get(n).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some(&rest[..n])
}

impl Object for Time {
    fn type_name(&self) -> &str {
        "time.Time"
    }

    fn member(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        Some(Ok(match (name, args) {
            ("Unix", []) => Value::Int64(self.secs),
            ("Year", []) => Value::Int(self.civil().0),
            ("Format", [Value::String(layout)]) => Value::String(self.format(layout)),
            ("Format", _) => return Some(Err("wrong arguments for Format".to_owned())),
            ("String", []) => Value::String(self.display()),
            _ => return None,
        }))
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(name, "Unix" | "Year" | "Format" | "String")
    }

    fn display(&self) -> String {
        self.format("2006-01-02 15:04:05.999999999 -0700 MST")
    }
}

/// Sprig's `toTime` reading of a date argument: a time, or Unix seconds; anything else is now.
fn as_time(v: &Value) -> Time {
    match v {
        Value::Int(i) | Value::Int64(i) => Time { secs: *i, nanos: 0 },
        Value::Object(o) if o.type_name() == "time.Time" => match o.member("Unix", &[]) {
            Some(Ok(Value::Int64(secs))) => {
                let nanos = o
                    .member("Format", &[Value::str(".000000000")])
                    .and_then(Result::ok)
                    .and_then(|f| {
                        f.as_str()
                            .and_then(|t| t.trim_start_matches('.').parse().ok())
                    })
                    .unwrap_or(0);
                Time { secs, nanos }
            }
            _ => Time::now(),
        },
        _ => Time::now(),
    }
}

/// The time inside a `time.Time` argument.
fn time_arg(v: &Value) -> Option<Time> {
    matches!(v, Value::Object(o) if o.type_name() == "time.Time").then(|| as_time(v))
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
            text(as_time(&a[1]).format(s(&a[0])))
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
            text(as_time(&a[0]).format("2006-01-02"))
        }),
    );
    m.insert(
        "dateModify",
        func(&[Param::Str, Param::Any], None, |_, a| {
            let t = want_time(&a[1])?;
            // Sprig returns the date unchanged when the modification does not parse.
            time_value(godur::parse(s(&a[0])).map_or(t, |d| t.add(d)))
        }),
    );
    m.insert(
        "mustDateModify",
        func(&[Param::Str, Param::Any], None, |_, a| {
            let t = want_time(&a[1])?;
            time_value(t.add(godur::parse(s(&a[0]))?))
        }),
    );
    m.insert(
        "ago",
        func(&[Param::Any], None, |_, a| {
            // Sprig's `dateAgo`: a time, Unix seconds, or else now (so "0s").
            let t = match &a[0] {
                Value::Int(i) | Value::Int64(i) => Time { secs: *i, nanos: 0 },
                v => time_arg(v).unwrap_or_else(Time::now),
            };
            text(godur::format(round_to_second(t.since())))
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
            text(godur::format(secs.wrapping_mul(1_000_000_000)))
        }),
    );
    m.insert(
        "durationRound",
        func(&[Param::Any], None, |_, a| {
            // A duration string, int64 nanoseconds, or the time elapsed since a time.
            let ns = match &a[0] {
                Value::String(s) => godur::parse(s).unwrap_or(0),
                Value::Int64(i) => *i,
                v => time_arg(v).map_or(0, Time::since),
            };
            text(godur::round(ns))
        }),
    );
    m.insert(
        "unixEpoch",
        func(&[Param::Any], None, |_, a| {
            text(as_time(&a[0]).secs.to_string())
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_go_layouts() {
        // 2009-11-10 23:04:05.012 UTC, a Tuesday.
        let t = Time {
            secs: 1_257_894_245,
            nanos: 12_000_000,
        };
        let cases = [
            ("2006-01-02T15:04:05Z07:00", "2009-11-10T23:04:05Z"),
            (
                "Mon Jan _2 15:04:05 MST 2006",
                "Tue Nov 10 23:04:05 UTC 2009",
            ),
            (
                "Monday, January 2, 2006 3:04PM",
                "Tuesday, November 10, 2009 11:04PM",
            ),
            ("06/1/2 03pm -0700", "09/11/10 11pm +0000"),
            ("15:04:05.000", "23:04:05.012"),
            ("15:04:05.999999", "23:04:05.012"),
            ("2006-002", "2009-314"),
            ("20060102", "20091110"),
        ];
        for (layout, want) in cases {
            assert_eq!(t.format(layout), want, "{layout}");
        }
        assert_eq!(t.display(), "2009-11-10 23:04:05.012 +0000 UTC");
        assert_eq!(
            Time { secs: 0, nanos: 0 }.format("2006-01-02 Mon"),
            "1970-01-01 Thu"
        );
        assert_eq!(
            Time {
                secs: 951_782_400,
                nanos: 0
            }
            .format("2006-01-02 002"),
            "2000-02-29 060"
        );
        assert_eq!(
            Time {
                secs: -86_400,
                nanos: 0
            }
            .format("2006-01-02"),
            "1969-12-31"
        );
    }
}
