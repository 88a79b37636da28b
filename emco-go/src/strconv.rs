//! Go's `strconv` number formats and parsing, as Go programs print and read numbers.

/// Decimal digits and exponent of a finite, non-negative float: `value = 0.d1d2d3... * 10^dp`.
struct Digits {
    digits: Vec<u8>,
    /// Position of the decimal point relative to the first digit.
    dp: i32,
}

/// Shortest (round-trip) digits of `f`, or digits rounded to `sig` significant digits.
fn float_digits(f: f64, sig: Option<usize>) -> Digits {
    let f = f.abs();
    let text = match sig {
        None => format!("{f:e}"),
        Some(p) => format!("{:.*e}", p.saturating_sub(1), f),
    };
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits == [b'0'] {
        return Digits { digits, dp: 1 };
    }
    Digits {
        digits,
        dp: exp + 1,
    }
}

fn push_exponent(out: &mut String, exp: i32, upper: bool) {
    out.push(if upper { 'E' } else { 'e' });
    out.push(if exp < 0 { '-' } else { '+' });
    let abs = exp.unsigned_abs();
    if abs < 10 {
        out.push('0');
    }
    out.push_str(&abs.to_string());
}

/// `%e` layout of `d` with `frac` digits after the point (`None`: all digits).
fn layout_e(d: &Digits, frac: Option<usize>, upper: bool) -> String {
    let mut out = String::new();
    out.push(char::from(d.digits[0]));
    let frac = frac.unwrap_or(d.digits.len() - 1);
    if frac > 0 {
        out.push('.');
        for i in 1..=frac {
            out.push(char::from(*d.digits.get(i).unwrap_or(&b'0')));
        }
    }
    let exp = if d.digits == [b'0'] { 0 } else { d.dp - 1 };
    push_exponent(&mut out, exp, upper);
    out
}

/// `%f` layout of `d` with `frac` digits after the point.
fn layout_f(d: &Digits, frac: usize) -> String {
    let mut out = String::new();
    if d.dp > 0 {
        for i in 0..d.dp as usize {
            out.push(char::from(*d.digits.get(i).unwrap_or(&b'0')));
        }
    } else {
        out.push('0');
    }
    if frac > 0 {
        out.push('.');
        for i in 0..frac as i32 {
            let idx = d.dp + i;
            let c = if idx < 0 {
                b'0'
            } else {
                *d.digits.get(idx as usize).unwrap_or(&b'0')
            };
            out.push(char::from(c));
        }
    }
    out
}

fn special(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".to_owned())
    } else if f.is_infinite() {
        Some(if f > 0.0 {
            "+Inf".to_owned()
        } else {
            "-Inf".to_owned()
        })
    } else {
        None
    }
}

/// Go's `strconv.Quote`.
#[must_use]
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() || c == '\u{feff}' => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.FormatFloat(f, 'g', prec, 64)` (`None`: shortest), as `%v` and `%g` print floats.
#[must_use]
pub fn format_float_g(f: f64, prec: Option<usize>) -> String {
    if let Some(s) = special(f) {
        return s;
    }
    let d = float_digits(f, prec.map(|p| p.max(1)));
    let mut eprec = match prec {
        None => 6,
        Some(p) => p.max(1) as i32,
    };
    if prec.is_some() && eprec > d.digits.len() as i32 && d.digits.len() as i32 >= d.dp {
        eprec = d.digits.len() as i32;
    }
    let exp = d.dp - 1;
    let body = if d.digits != [b'0'] && (exp < -4 || exp >= eprec) {
        layout_e(&d, None, false)
    } else {
        layout_f(&d, (d.digits.len() as i32 - d.dp).max(0) as usize)
    };
    sign(f, body)
}

fn sign(f: f64, body: String) -> String {
    if f.is_sign_negative() && f != 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

/// Go's `%e` with `prec` digits after the point.
#[must_use]
pub fn format_float_e(f: f64, prec: usize, upper: bool) -> String {
    if let Some(s) = special(f) {
        return s;
    }
    let d = float_digits(f, Some(prec + 1));
    sign(f, layout_e(&d, Some(prec), upper))
}

/// Go's `%f` with `prec` digits after the point.
#[must_use]
pub fn format_float_f(f: f64, prec: usize) -> String {
    if let Some(s) = special(f) {
        return s;
    }
    let body = format!("{:.*}", prec, f.abs());
    sign(f, body)
}

/// How `encoding/json` prints a float64.
#[must_use]
pub fn format_float_json(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let d = float_digits(f, None);
        let mut s = sign(f, layout_e(&d, None, false));
        // encoding/json writes e-07 as e-7.
        if let Some(pos) = s.find("e-0") {
            s.replace_range(pos..pos + 3, "e-");
        }
        if let Some(pos) = s.find("e+0") {
            s.replace_range(pos..pos + 3, "e+");
        }
        s
    } else {
        let body = format!("{}", f.abs());
        sign(f, body)
    }
}

/// `strconv.ParseInt(s, 0, 64)`: decimal, `0x`, `0o`, `0b`, or octal with a leading `0`;
/// `None` when it does not parse or overflows.
#[must_use]
pub fn parse_int_base0(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_owned())
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_owned())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_owned())
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_owned())
    } else {
        (10, lower)
    };
    let digits = if radix == 10 {
        digits
    } else {
        digits.replace('_', "")
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let v = i128::from_str_radix(&digits, radix).ok()?;
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}
