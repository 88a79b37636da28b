//! Go's `time.Duration` text: [`parse_duration`] reads what `time.ParseDuration` accepts and
//! [`format_duration`] writes what `Duration.String` does (`8760h` reads as 8760 hours and is
//! written back `8760h0m0s`), in nanoseconds as Go keeps them.

use crate::strconv::quote;

/// A duration Go's `time.ParseDuration` refused, worded as Go words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

/// Nanoseconds per second.
pub const SECOND: u64 = 1_000_000_000;

/// The digits of `v % 10^prec` with trailing zeros dropped, after a point; empty when zero.
fn frac(v: u64, prec: u32) -> String {
    let digits = format!("{:0width$}", v % 10u64.pow(prec), width = prec as usize);
    let digits = digits.trim_end_matches('0');
    if digits.is_empty() {
        String::new()
    } else {
        format!(".{digits}")
    }
}

/// Writes `ns` as Go's `Duration.String`: `72h3m0.5s`, `1m30s`, `1.5ms`, `0s`.
#[must_use]
pub fn format_duration(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    let body = if u == 0 {
        "0s".to_owned()
    } else if u < 1_000 {
        format!("{u}ns")
    } else if u < 1_000_000 {
        format!("{}{}µs", u / 1_000, frac(u, 3))
    } else if u < SECOND {
        format!("{}{}ms", u / 1_000_000, frac(u, 6))
    } else {
        let secs = u / SECOND;
        let s = format!("{}{}s", secs % 60, frac(u, 9));
        if secs < 60 {
            s
        } else if secs < 3600 {
            format!("{}m{s}", secs / 60)
        } else {
            format!("{}h{}m{s}", secs / 3600, secs / 60 % 60)
        }
    };
    format!("{sign}{body}")
}

/// Nanoseconds per unit, as `time.ParseDuration` spells the units.
fn unit(u: &str) -> Option<u64> {
    Some(match u {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => SECOND,
        "m" => 60 * SECOND,
        "h" => 3600 * SECOND,
        _ => return None,
    })
}

/// Parses `orig` as Go's `time.ParseDuration`: an optional sign, then one or more decimal
/// numbers (with an optional fraction, whose digits beyond what fits are dropped as Go's
/// `leadingFraction` does) each followed by a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`); a
/// bare `0` is zero. Returns nanoseconds.
///
/// # Errors
/// Go's texts: `time: invalid duration "..."`, `time: missing unit in duration "..."`,
/// `time: unknown unit "..." in duration "..."`.
pub fn parse_duration(orig: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError(format!("time: invalid duration {}", quote(orig)));
    let (neg, mut s) = match orig.as_bytes().first() {
        Some(b'-') => (true, &orig[1..]),
        Some(b'+') => (false, &orig[1..]),
        _ => (false, orig),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for b in s[..int_len].bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u64::from(b - b'0')))
                .ok_or_else(invalid)?;
        }
        s = &s[int_len..];
        // The fraction keeps the digits that still fit, like Go's leadingFraction.
        let (mut fnum, mut fscale, mut post) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            post = n > 0;
            let mut overflow = false;
            for b in rest[..n].bytes() {
                if overflow {
                    continue;
                }
                match fnum
                    .checked_mul(10)
                    .and_then(|f| f.checked_add(u64::from(b - b'0')))
                {
                    Some(f) if f <= i64::MAX as u64 => {
                        fnum = f;
                        fscale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            s = &rest[n..];
        }
        if int_len == 0 && !post {
            return Err(invalid());
        }
        let ulen = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        let u = &s[..ulen];
        if u.is_empty() {
            return Err(DurationError(format!(
                "time: missing unit in duration {}",
                quote(orig)
            )));
        }
        let per = unit(u).ok_or_else(|| {
            DurationError(format!(
                "time: unknown unit {} in duration {}",
                quote(u),
                quote(orig)
            ))
        })?;
        s = &s[ulen..];
        let mut v = whole.checked_mul(per).ok_or_else(invalid)?;
        if fnum > 0 {
            v = v
                .checked_add((fnum as f64 * (per as f64 / fscale)) as u64)
                .ok_or_else(invalid)?;
        }
        total = total.checked_add(v).ok_or_else(invalid)?;
    }
    let limit = i64::MAX as u64;
    if neg {
        if total > limit + 1 {
            return Err(invalid());
        }
        Ok(0i64.wrapping_sub_unsigned(total))
    } else if total > limit {
        Err(invalid())
    } else {
        Ok(total as i64)
    }
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

    #[test]
    fn formats_like_go() {
        for (ns, want) in [
            (0, "0s"),
            (999, "999ns"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (-1_000_000, "-1ms"),
            (SECOND as i64, "1s"),
            (90_500_000_000, "1m30.5s"),
            (3_600 * SECOND as i64, "1h0m0s"),
            (3_661 * SECOND as i64 + 1, "1h1m1.000000001s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (i64::MAX, "2562047h47m16.854775807s"),
        ] {
            assert_eq!(format_duration(ns), want, "{ns}");
        }
    }

    #[test]
    fn parses_like_go() {
        for (text, want) in [
            ("0", 0),
            ("-0", 0),
            ("1.5h", 5_400 * SECOND as i64),
            ("1h30m", 5_400 * SECOND as i64),
            ("-1.5us", -1_500),
            ("1µs2μs3us", 6_000),
            (".5s", 500_000_000),
            ("5.s", 5 * SECOND as i64),
            ("+2ms", 2_000_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("1.0000000000000000000001s", SECOND as i64),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for (text, want) in [
            ("", "time: invalid duration \"\""),
            ("x", "time: invalid duration \"x\""),
            (".s", "time: invalid duration \".s\""),
            ("1", "time: missing unit in duration \"1\""),
            ("1x", "time: unknown unit \"x\" in duration \"1x\""),
            ("9223372036854775808ns", "time: invalid duration"),
            ("3000000h", "time: invalid duration"),
        ] {
            let got = parse_duration(text).unwrap_err().to_string();
            assert!(got.starts_with(want), "{text}: {got}");
        }
    }
}
