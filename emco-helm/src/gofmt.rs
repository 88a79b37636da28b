//! Go's `fmt` formatting: `%v` printing of values, `Sprintf` verbs and Go's float formats.

use crate::value::Value;
pub use emco_go::strconv::{
    format_float_e, format_float_f, format_float_g, format_float_json, quote,
};

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    zero: bool,
    space: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

impl Spec {
    fn pad(&self, body: String) -> String {
        let Some(width) = self.width else { return body };
        let len = body.chars().count();
        if len >= width {
            return body;
        }
        let fill = width - len;
        if self.minus {
            format!("{body}{}", " ".repeat(fill))
        } else if self.zero {
            // Zero padding goes after the sign.
            let (sign, rest) = match body.strip_prefix(['-', '+']) {
                Some(rest) => (&body[..1], rest),
                None => ("", body.as_str()),
            };
            format!("{sign}{}{rest}", "0".repeat(fill))
        } else {
            format!("{}{body}", " ".repeat(fill))
        }
    }

    fn signed(&self, negative: bool, digits: String) -> String {
        if negative {
            format!("-{digits}")
        } else if self.plus {
            format!("+{digits}")
        } else if self.space {
            format!(" {digits}")
        } else {
            digits
        }
    }
}

fn bad_verb(verb: char, v: &Value) -> String {
    match v {
        Value::Nil => format!("%!{verb}(<nil>)"),
        _ => format!("%!{verb}({}={})", v.type_name(), v.to_go_string()),
    }
}

fn format_int(verb: char, spec: &Spec, i: i64, v: &Value) -> String {
    let neg = i < 0;
    let abs = i.unsigned_abs();
    let mut digits = match verb {
        'd' | 'v' => abs.to_string(),
        'b' => format!("{abs:b}"),
        'o' => format!("{abs:o}"),
        'O' => format!("0o{abs:o}"),
        'x' => format!("{abs:x}"),
        'X' => format!("{abs:X}"),
        'c' => return spec.pad(char::from_u32(i as u32).unwrap_or('\u{fffd}').to_string()),
        'q' => {
            let c = char::from_u32(i as u32).unwrap_or('\u{fffd}');
            let q = quote(&c.to_string());
            return spec.pad(format!("'{}'", &q[1..q.len() - 1].replace("\\\"", "\"")));
        }
        'U' => return spec.pad(format!("U+{abs:04X}")),
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' | 's' | 't' => return bad_verb(verb, v),
        _ => return bad_verb(verb, v),
    };
    if let Some(p) = spec.prec.filter(|p| digits.len() < *p) {
        digits = format!("{}{digits}", "0".repeat(p - digits.len()));
    }
    if spec.sharp {
        match verb {
            'x' => digits = format!("0x{digits}"),
            'X' => digits = format!("0X{digits}"),
            'o' => digits = format!("0{digits}"),
            'b' => digits = format!("0b{digits}"),
            _ => {}
        }
    }
    spec.pad(spec.signed(neg, digits))
}

fn format_float(verb: char, spec: &Spec, f: f64, v: &Value) -> String {
    let body = match verb {
        'v' | 'g' => format_float_g(f, spec.prec),
        'G' => format_float_g(f, spec.prec).to_uppercase(),
        'e' | 'E' => format_float_e(f, spec.prec.unwrap_or(6), verb == 'E'),
        'f' | 'F' => format_float_f(f, spec.prec.unwrap_or(6)),
        _ => return bad_verb(verb, v),
    };
    let (neg, digits) = match body.strip_prefix('-') {
        Some(rest) => (true, rest.to_owned()),
        None => (false, body),
    };
    spec.pad(spec.signed(neg, digits))
}

fn format_string(verb: char, spec: &Spec, s: &str, v: &Value) -> String {
    let s = match spec.prec {
        Some(p) if matches!(verb, 's' | 'v' | 'q') => s.chars().take(p).collect::<String>(),
        _ => s.to_owned(),
    };
    match verb {
        's' | 'v' => spec.pad(s),
        'q' => spec.pad(quote(&s)),
        'x' | 'X' => hex_bytes(verb, spec, s.as_bytes()),
        _ => bad_verb(verb, v),
    }
}

/// `%x`/`%X` of a string or `[]byte`: two hex digits a byte (space-separated with `% x`).
fn hex_bytes(verb: char, spec: &Spec, bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, b) in bytes.iter().enumerate() {
        if spec.space && i > 0 {
            out.push(' ');
        }
        if verb == 'x' {
            out.push_str(&format!("{b:02x}"));
        } else {
            out.push_str(&format!("{b:02X}"));
        }
    }
    spec.pad(out)
}

/// Go's `fmtBytes`: `%s`/`%q` print the text, `%x`/`%X` hex, other verbs each byte as a
/// `uint8` inside brackets (`%v` gives `[104 105]`).
fn format_bytes(verb: char, spec: &Spec, bytes: &[u8], v: &Value) -> String {
    match verb {
        's' | 'q' => format_string(verb, spec, &String::from_utf8_lossy(bytes), v),
        'x' | 'X' => hex_bytes(verb, spec, bytes),
        _ => {
            let parts: Vec<String> = bytes
                .iter()
                .map(|b| format_value(verb, spec, &Value::Int(i64::from(*b))))
                .collect();
            format!("[{}]", parts.join(" "))
        }
    }
}

fn format_value(verb: char, spec: &Spec, v: &Value) -> String {
    match v {
        Value::Nil => match verb {
            'v' => spec.pad("<nil>".to_owned()),
            _ => bad_verb(verb, v),
        },
        Value::Bool(b) => match verb {
            't' | 'v' => spec.pad(b.to_string()),
            _ => bad_verb(verb, v),
        },
        Value::Int(i) | Value::Int64(i) => format_int(verb, spec, *i, v),
        Value::Float(f) => format_float(verb, spec, *f, v),
        Value::String(s) => format_string(verb, spec, s, v),
        Value::List(items) => {
            let parts: Vec<String> = items.iter().map(|e| format_value(verb, spec, e)).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Map(m) => {
            let parts: Vec<String> = m
                .snapshot()
                .iter()
                .map(|(k, e)| {
                    format!(
                        "{}:{}",
                        format_value(verb, spec, &Value::str(k.as_str())),
                        format_value(verb, spec, e)
                    )
                })
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        Value::Object(o) if o.bytes().is_some() => {
            format_bytes(verb, spec, o.bytes().unwrap_or_default(), v)
        }
        Value::Object(o) => match verb {
            'v' | 's' => spec.pad(o.display()),
            'q' => spec.pad(quote(&o.display())),
            _ => bad_verb(verb, v),
        },
    }
}

/// Go's `fmt.Sprintf`.
#[must_use]
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut next = 0usize;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                '0' => spec.zero = !spec.minus,
                ' ' => spec.space = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = read_number(&mut chars, args, &mut next);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.prec = Some(read_number(&mut chars, args, &mut next).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        match args.get(next) {
            Some(arg) => {
                next += 1;
                if verb == 'T' {
                    out.push_str(&spec.pad(arg.type_name()));
                } else {
                    out.push_str(&format_value(verb, &spec, arg));
                }
            }
            None => out.push_str(&format!("%!{verb}(MISSING)")),
        }
    }
    if next < args.len() {
        out.push_str("%!(EXTRA ");
        let extra: Vec<String> = args[next..]
            .iter()
            .map(|a| match a {
                Value::Nil => "<nil>".to_owned(),
                _ => format!("{}={}", a.type_name(), a.to_go_string()),
            })
            .collect();
        out.push_str(&extra.join(", "));
        out.push(')');
    }
    out
}

fn read_number(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    args: &[Value],
    next: &mut usize,
) -> Option<usize> {
    if chars.peek() == Some(&'*') {
        chars.next();
        let n = match args.get(*next) {
            Some(Value::Int(i) | Value::Int64(i)) => usize::try_from(*i).ok(),
            _ => None,
        };
        *next += 1;
        return n;
    }
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        chars.next();
        n = Some(
            n.unwrap_or(0)
                .saturating_mul(10)
                .saturating_add(d as usize)
                .min(1_000_000),
        );
    }
    n
}

/// Go's `fmt.Sprint`: operands separated by a space when neither side is a string.
#[must_use]
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        let is_string = matches!(a, Value::String(_));
        if i > 0 && !is_string && !matches!(args[i - 1], Value::String(_)) {
            out.push(' ');
        }
        a.write_go(&mut out);
    }
    out
}

/// Go's `fmt.Sprintln`: operands always separated by spaces, with a final newline.
#[must_use]
pub fn sprintln(args: &[Value]) -> String {
    let parts: Vec<String> = args.iter().map(Value::to_go_string).collect();
    format!("{}\n", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_go() {
        let cases = [
            (3.0, "3"),
            (1.5, "1.5"),
            (100000.0, "100000"),
            (1_000_000.0, "1e+06"),
            (1_234_567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (0.0, "0"),
            (f64::INFINITY, "+Inf"),
        ];
        for (f, want) in cases {
            assert_eq!(format_float_g(f, None), want, "{f}");
        }
        assert_eq!(format_float_g(1234.0, Some(3)), "1.23e+03");
        assert_eq!(format_float_g(1.0, Some(3)), "1");
        assert_eq!(format_float_e(1234.5678, 2, false), "1.23e+03");
        assert_eq!(format_float_f(2.5, 2), "2.50");
        assert_eq!(format_float_json(1e21), "1e+21");
        assert_eq!(format_float_json(1e20), "100000000000000000000");
        assert_eq!(format_float_json(0.0000001), "1e-7");
        assert_eq!(format_float_json(3.0), "3");
    }

    #[test]
    fn sprintf_verbs() {
        let s = Value::str;
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            ("%s-%d", vec![s("a"), Value::Int(5)], "a-5"),
            ("%d", vec![Value::Float(8080.0)], "%!d(float64=8080)"),
            ("%v", vec![Value::Float(8080.0)], "8080"),
            ("%q", vec![s("a\"b")], "\"a\\\"b\""),
            ("%5s|%-5s|", vec![s("ab"), s("cd")], "   ab|cd   |"),
            ("%05d", vec![Value::Int(-42)], "-0042"),
            ("%x", vec![Value::Int(255)], "ff"),
            ("%x", vec![s("hi")], "6869"),
            ("%.2f", vec![Value::Float(1.23456)], "1.23"),
            ("%t", vec![Value::Bool(true)], "true"),
            ("%d%%", vec![Value::Int(50)], "50%"),
            ("%s", vec![], "%!s(MISSING)"),
            ("a", vec![Value::Int(1)], "a%!(EXTRA int=1)"),
            ("%s", vec![Value::Nil], "%!s(<nil>)"),
            ("%v", vec![Value::Nil], "<nil>"),
            ("%s", vec![Value::list(vec![s("a"), s("b")])], "[a b]"),
            ("%s", vec![Value::Int(3)], "%!s(int=3)"),
            ("%.3s", vec![s("abcdef")], "abc"),
            ("%+d", vec![Value::Int(3)], "+3"),
            ("%c", vec![Value::Int(65)], "A"),
            ("%T", vec![Value::Float(1.0)], "float64"),
        ];
        for (f, args, want) in cases {
            assert_eq!(sprintf(f, &args), want, "{f}");
        }
    }

    #[test]
    fn sprint_spacing() {
        assert_eq!(
            sprint(&[
                Value::str("a"),
                Value::Int(1),
                Value::Int(2),
                Value::str("b")
            ]),
            "a1 2b"
        );
        assert_eq!(sprintln(&[Value::str("a"), Value::Int(1)]), "a 1\n");
    }
}
