//! Go's `time.Duration` text: [`parse_duration`] reads what `time.ParseDuration` accepts and
//! [`format_duration`] writes what `Duration.String` does (`8760h` reads as 8760 hours and is
//! written back `8760h0m0s`), in nanoseconds as Go keeps them.

/// Nanoseconds per unit, Go's unit names.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// A duration Go's `time.ParseDuration` refused, worded as Go words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

fn invalid(text: &str) -> DurationError {
    DurationError(format!("time: invalid duration {text:?}"))
}

/// Parses `text` as Go's `time.ParseDuration`: an optional sign, then one or more decimal
/// numbers (with an optional fraction) each followed by a unit (`ns`, `us`/`µs`, `ms`, `s`,
/// `m`, `h`); a bare `0` is zero. Returns nanoseconds.
///
/// # Errors
/// Go's texts: `time: invalid duration "..."`, `time: missing unit in duration "..."`,
/// `time: unknown unit "..." in duration "..."`.
pub fn parse_duration(text: &str) -> Result<i64, DurationError> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid(text));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let whole = &rest[..whole_end];
        rest = &rest[whole_end..];
        let mut fraction = "";
        if let Some(after) = rest.strip_prefix('.') {
            let end = after
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after.len());
            fraction = &after[..end];
            rest = &after[end..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid(text));
        }
        let unit_end = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        if unit.is_empty() {
            return Err(DurationError(format!(
                "time: missing unit in duration {text:?}"
            )));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(DurationError(format!(
                "time: unknown unit {unit:?} in duration {text:?}"
            )));
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid(text))?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(|| invalid(text))?;
        // The fraction, to the nanosecond (Go drops what is finer).
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            part += u128::from(digit - b'0') * place;
        }
        total = total.checked_add(part).ok_or_else(|| invalid(text))?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return Err(invalid(text));
        }
    }
    let total = i128::try_from(total).map_err(|_| invalid(text))?;
    let signed = if negative { -total } else { total };
    i64::try_from(signed).map_err(|_| invalid(text))
}

/// Writes `nanos` as Go's `Duration.String`: `72h3m0.5s`, `1m30s`, `1.5ms`, `0s`.
#[must_use]
pub fn format_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let n = u128::from(nanos.unsigned_abs());
    if n == 0 {
        return "0s".to_owned();
    }
    if n < 1_000_000_000 {
        let (scale, unit) = match n {
            0..1_000 => (1, "ns"),
            1_000..1_000_000 => (1_000, "µs"),
            _ => (1_000_000, "ms"),
        };
        return format!("{sign}{}{unit}", decimal(n, scale));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = n / 60_000_000_000 % 60;
    let seconds = decimal(n % 60_000_000_000, 1_000_000_000);
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}s")
    } else {
        format!("{sign}{seconds}s")
    }
}

/// `n / scale` with the fraction's trailing zeros dropped.
fn decimal(n: u128, scale: u128) -> String {
    let whole = n / scale;
    let rest = n % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let fraction = format!("{rest:0width$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go 1.22's answers (`time.ParseDuration(x).String()`).
    #[test]
    fn reads_and_writes_as_go() {
        for (text, back) in [
            ("8760h", "8760h0m0s"),
            ("2160h", "2160h0m0s"),
            ("1h30m", "1h30m0s"),
            ("90m", "1h30m0s"),
            ("1.5h", "1h30m0s"),
            ("90s", "1m30s"),
            ("1.5s", "1.5s"),
            ("300ms", "300ms"),
            ("1500us", "1.5ms"),
            ("2µs", "2µs"),
            ("7ns", "7ns"),
            ("0", "0s"),
            ("-1m", "-1m0s"),
            ("+5s", "5s"),
            ("1h0.5s", "1h0m0.5s"),
            (".5s", "500ms"),
        ] {
            assert_eq!(
                format_duration(parse_duration(text).unwrap()),
                back,
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_as_go() {
        for (text, error) in [
            ("", "time: invalid duration \"\""),
            ("8760", "time: missing unit in duration \"8760\""),
            ("1d", "time: unknown unit \"d\" in duration \"1d\""),
            ("h", "time: invalid duration \"h\""),
            ("-", "time: invalid duration \"-\""),
            (
                "9999999999999999h",
                "time: invalid duration \"9999999999999999h\"",
            ),
        ] {
            assert_eq!(
                parse_duration(text).unwrap_err().to_string(),
                error,
                "{text}"
            );
        }
    }
}
