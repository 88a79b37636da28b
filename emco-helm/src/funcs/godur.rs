//! Go's `time.Duration`: its `String` form (`1h2m3.5s`) and `time.ParseDuration`.

use crate::gofmt::quote;

const SECOND: u64 = 1_000_000_000;

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

/// `time.Duration(ns).String()`.
pub(super) fn format(ns: i64) -> String {
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

/// `time.ParseDuration`, with Go's error messages.
pub(super) fn parse(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", quote(orig));
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
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let per = unit(u).ok_or_else(|| {
            format!(
                "time: unknown unit {} in duration {}",
                quote(u),
                quote(orig)
            )
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

/// Sprig's `durationRound`: the whole count of the largest unit the duration exceeds.
pub(super) fn round(ns: i64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (365 * 24 * 3600 * SECOND, "y"),
        (30 * 24 * 3600 * SECOND, "mo"),
        (24 * 3600 * SECOND, "d"),
        (3600 * SECOND, "h"),
        (60 * SECOND, "m"),
        (SECOND, "s"),
    ];
    let u = ns.unsigned_abs();
    UNITS.iter().find(|(size, _)| u > *size).map_or_else(
        || "0s".to_owned(),
        |(size, name)| format!("{}{name}", u / size),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(format(ns), want, "{ns}");
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
            assert_eq!(parse(text), Ok(want), "{text}");
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
            let got = parse(text).unwrap_err();
            assert!(got.starts_with(want), "{text}: {got}");
        }
    }

    #[test]
    fn rounds_to_the_largest_unit() {
        for (ns, want) in [
            (0, "0s"),
            (500_000_000, "0s"),
            (SECOND as i64, "0s"),
            (1_500_000_000, "1s"),
            (3_600 * SECOND as i64, "60m"),
            (-7_800 * SECOND as i64, "2h"),
            (8_760 * 3_600 * SECOND as i64, "12mo"),
            (9_000 * 3_600 * SECOND as i64, "1y"),
            (i64::MIN, "292y"),
        ] {
            assert_eq!(round(ns), want, "{ns}");
        }
    }
}
