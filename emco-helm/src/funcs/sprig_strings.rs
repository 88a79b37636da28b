//! Sprig's string functions.

use base64::Engine as _;
use rand::Rng as _;
use sha2::Digest as _;

use super::{FResult, Param, Registry, func, i, s, strval};
use crate::template::Exec;
use crate::value::Value;

const S: &[Param] = &[Param::Str];
const SS: &[Param] = &[Param::Str, Param::Str];
const SSS: &[Param] = &[Param::Str, Param::Str, Param::Str];
const IS: &[Param] = &[Param::Int, Param::Str];

/// Largest string a function may build (`repeat`, `indent` of huge counts).
pub(super) const MAX_BUILD: usize = 64 << 20;

fn string(v: impl Into<String>) -> FResult {
    Ok(Value::String(v.into()))
}

/// A byte range of `s` as a string, as Go's byte slicing followed by printing would show it.
fn byte_slice(s: &str, start: usize, end: usize) -> String {
    String::from_utf8_lossy(&s.as_bytes()[start..end]).into_owned()
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "upper",
        func(S, None, |_, a| string(s(&a[0]).to_uppercase())),
    );
    m.insert(
        "lower",
        func(S, None, |_, a| string(s(&a[0]).to_lowercase())),
    );
    m.insert("title", func(S, None, |_, a| string(title(s(&a[0])))));
    m.insert("untitle", func(S, None, |_, a| string(untitle(s(&a[0])))));
    m.insert("trim", func(S, None, |_, a| string(s(&a[0]).trim())));
    m.insert(
        "trimAll",
        func(SS, None, |_, a| {
            let cut: Vec<char> = s(&a[0]).chars().collect();
            string(s(&a[1]).trim_matches(cut.as_slice()))
        }),
    );
    m.insert(
        "trimPrefix",
        func(SS, None, |_, a| {
            string(s(&a[1]).strip_prefix(s(&a[0])).unwrap_or(s(&a[1])))
        }),
    );
    m.insert(
        "trimSuffix",
        func(SS, None, |_, a| {
            string(s(&a[1]).strip_suffix(s(&a[0])).unwrap_or(s(&a[1])))
        }),
    );
    m.insert("trunc", func(IS, None, trunc));
    m.insert(
        "substr",
        func(&[Param::Int, Param::Int, Param::Str], None, substr),
    );
    m.insert("repeat", func(IS, None, repeat));
    m.insert(
        "nospace",
        func(S, None, |_, a| {
            string(
                s(&a[0])
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect::<String>(),
            )
        }),
    );
    m.insert(
        "replace",
        func(SSS, None, |_, a| {
            string(go_replace(s(&a[2]), s(&a[0]), s(&a[1])))
        }),
    );
    m.insert(
        "contains",
        func(SS, None, |_, a| {
            Ok(Value::Bool(s(&a[1]).contains(s(&a[0]))))
        }),
    );
    m.insert(
        "hasPrefix",
        func(SS, None, |_, a| {
            Ok(Value::Bool(s(&a[1]).starts_with(s(&a[0]))))
        }),
    );
    m.insert(
        "hasSuffix",
        func(SS, None, |_, a| {
            Ok(Value::Bool(s(&a[1]).ends_with(s(&a[0]))))
        }),
    );
    m.insert(
        "quote",
        func(&[], Some(Param::Any), |_, a| {
            let parts: Vec<String> = a
                .iter()
                .filter(|v| !v.is_nil())
                .map(|v| crate::gofmt::quote(&strval(v)))
                .collect();
            string(parts.join(" "))
        }),
    );
    m.insert(
        "squote",
        func(&[], Some(Param::Any), |_, a| {
            let parts: Vec<String> = a
                .iter()
                .filter(|v| !v.is_nil())
                // Sprig writes `'%v'` here (not `strval`): a `[]byte` prints as numbers.
                .map(|v| format!("'{}'", v.to_go_string()))
                .collect();
            string(parts.join(" "))
        }),
    );
    m.insert(
        "cat",
        func(&[], Some(Param::Any), |_, a| {
            let parts: Vec<String> = a
                .iter()
                .filter(|v| !v.is_nil())
                .map(Value::to_go_string)
                .collect();
            string(parts.join(" "))
        }),
    );
    m.insert(
        "indent",
        func(IS, None, |_, a| indent(i(&a[0]), s(&a[1])).and_then(string)),
    );
    m.insert(
        "nindent",
        func(IS, None, |_, a| {
            indent(i(&a[0]), s(&a[1])).and_then(|t| string(format!("\n{t}")))
        }),
    );
    m.insert(
        "join",
        func(&[Param::Str, Param::Any], None, |_, a| {
            string(strslice(&a[1]).join(s(&a[0])))
        }),
    );
    m.insert(
        "split",
        func(SS, None, |_, a| {
            let parts = go_split(s(&a[1]), s(&a[0]), None);
            Ok(Value::map(
                parts
                    .into_iter()
                    .enumerate()
                    .map(|(n, p)| (format!("_{n}"), Value::String(p)))
                    .collect(),
            ))
        }),
    );
    m.insert(
        "splitn",
        func(&[Param::Str, Param::Int, Param::Str], None, |_, a| {
            let n = i(&a[1]);
            let parts = if n < 0 {
                go_split(s(&a[2]), s(&a[0]), None)
            } else {
                go_split(s(&a[2]), s(&a[0]), Some(n as usize))
            };
            Ok(Value::map(
                parts
                    .into_iter()
                    .enumerate()
                    .map(|(n, p)| (format!("_{n}"), Value::String(p)))
                    .collect(),
            ))
        }),
    );
    m.insert(
        "splitList",
        func(SS, None, |_, a| {
            Ok(Value::list(
                go_split(s(&a[1]), s(&a[0]), None)
                    .into_iter()
                    .map(Value::String)
                    .collect(),
            ))
        }),
    );
    m.insert(
        "toString",
        func(&[Param::Any], None, |_, a| string(strval(&a[0]))),
    );
    m.insert(
        "toStrings",
        func(&[Param::Any], None, |_, a| {
            Ok(Value::list(
                strslice(&a[0]).into_iter().map(Value::String).collect(),
            ))
        }),
    );
    m.insert(
        "b64enc",
        func(S, None, |_, a| {
            string(base64::engine::general_purpose::STANDARD.encode(s(&a[0])))
        }),
    );
    m.insert(
        "b64dec",
        func(
            S,
            None,
            |_, a| match base64::engine::general_purpose::STANDARD.decode(s(&a[0])) {
                Ok(bytes) => string(String::from_utf8_lossy(&bytes).into_owned()),
                Err(e) => string(go_base64_error(&e)),
            },
        ),
    );
    m.insert(
        "sha256sum",
        func(S, None, |_, a| {
            string(hex(&sha2::Sha256::digest(s(&a[0]).as_bytes())))
        }),
    );
    m.insert(
        "randAlphaNum",
        func(&[Param::Int], None, |_, a| {
            random(
                i(&a[0]),
                b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
            )
        }),
    );
    m.insert(
        "randAlpha",
        func(&[Param::Int], None, |_, a| {
            random(
                i(&a[0]),
                b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
            )
        }),
    );
    m.insert(
        "randNumeric",
        func(&[Param::Int], None, |_, a| random(i(&a[0]), b"0123456789")),
    );
    m.insert(
        "regexMatch",
        func(SS, None, |_, a| {
            Ok(Value::Bool(
                regex::Regex::new(s(&a[0])).is_ok_and(|r| r.is_match(s(&a[1]))),
            ))
        }),
    );
    m.insert(
        "mustRegexMatch",
        func(SS, None, |_, a| {
            Ok(Value::Bool(compile(s(&a[0]))?.is_match(s(&a[1]))))
        }),
    );
    m.insert(
        "regexReplaceAll",
        func(SSS, None, |_, a| {
            string(
                compile(s(&a[0]))?
                    .replace_all(s(&a[1]), s(&a[2]))
                    .into_owned(),
            )
        }),
    );
    m.insert(
        "regexReplaceAllLiteral",
        func(SSS, None, |_, a| {
            string(
                compile(s(&a[0]))?
                    .replace_all(s(&a[1]), regex::NoExpand(s(&a[2])))
                    .into_owned(),
            )
        }),
    );
    m.insert(
        "regexFind",
        func(SS, None, |_, a| {
            string(
                compile(s(&a[0]))?
                    .find(s(&a[1]))
                    .map(|m| m.as_str().to_owned())
                    .unwrap_or_default(),
            )
        }),
    );
    m.insert(
        "regexFindAll",
        func(&[Param::Str, Param::Str, Param::Int], None, |_, a| {
            let r = compile(s(&a[0]))?;
            let n = i(&a[2]);
            let limit = if n < 0 { usize::MAX } else { n as usize };
            Ok(Value::list(
                r.find_iter(s(&a[1]))
                    .take(limit)
                    .map(|m| Value::str(m.as_str()))
                    .collect(),
            ))
        }),
    );
    m.insert(
        "regexSplit",
        func(&[Param::Str, Param::Str, Param::Int], None, |_, a| {
            let r = compile(s(&a[0]))?;
            let n = i(&a[2]);
            let parts: Vec<Value> = if n < 0 {
                r.split(s(&a[1])).map(Value::str).collect()
            } else if n == 0 {
                Vec::new()
            } else {
                r.splitn(s(&a[1]), n as usize).map(Value::str).collect()
            };
            Ok(Value::list(parts))
        }),
    );
}

fn compile(re: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(re).map_err(|e| format!("regexp: Compile({}): {e}", crate::gofmt::quote(re)))
}

/// Go's `strings.Title` (each letter after a separator upper-cased).
fn title(s: &str) -> String {
    let mut prev = ' ';
    s.chars()
        .map(|c| {
            let out = if is_separator(prev) {
                c.to_uppercase().next().unwrap_or(c)
            } else {
                c
            };
            prev = c;
            out
        })
        .collect()
}

fn untitle(s: &str) -> String {
    let mut prev = ' ';
    s.chars()
        .map(|c| {
            let out = if is_separator(prev) {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                c
            };
            prev = c;
            out
        })
        .collect()
}

fn is_separator(c: char) -> bool {
    if c.is_ascii() {
        return !(c.is_ascii_alphanumeric() || c == '_');
    }
    if c.is_alphanumeric() {
        return false;
    }
    c.is_whitespace()
}

fn trunc(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let (c, st) = (i(&a[0]), s(&a[1]));
    let len = st.len() as i64;
    if c < 0 && len + c > 0 {
        return string(byte_slice(st, (len + c) as usize, st.len()));
    }
    if c >= 0 && len > c {
        return string(byte_slice(st, 0, c as usize));
    }
    string(st)
}

fn substr(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let (start, end, st) = (i(&a[0]), i(&a[1]), s(&a[2]));
    let len = st.len() as i64;
    let range = |from: i64, to: i64| -> Result<String, String> {
        if from < 0 || to > len || from > to {
            return Err(format!(
                "runtime error: slice bounds out of range [{from}:{to}]"
            ));
        }
        Ok(byte_slice(st, from as usize, to as usize))
    };
    if start < 0 {
        return string(range(0, end)?);
    }
    if end < 0 || end > len {
        return string(range(start, len)?);
    }
    string(range(start, end)?)
}

fn repeat(_: &mut Exec<'_>, a: Vec<Value>) -> FResult {
    let (n, st) = (i(&a[0]), s(&a[1]));
    if n < 0 {
        return Err("strings: negative Repeat count".to_owned());
    }
    if (n as u64).saturating_mul(st.len() as u64) > MAX_BUILD as u64 {
        return Err("strings: Repeat output length overflow".to_owned());
    }
    string(st.repeat(n as usize))
}

fn indent(n: i64, st: &str) -> Result<String, String> {
    let n = usize::try_from(n).unwrap_or(0);
    let lines = st.matches('\n').count() + 1;
    if n.saturating_mul(lines) > MAX_BUILD {
        return Err("indent output too large".to_owned());
    }
    let pad = " ".repeat(n);
    Ok(format!("{pad}{}", st.replace('\n', &format!("\n{pad}"))))
}

/// Go's `strings.Replace(s, old, new, -1)`: an empty `old` inserts `new` around every rune.
fn go_replace(st: &str, old: &str, new: &str) -> String {
    if old.is_empty() {
        let mut out = String::from(new);
        for c in st.chars() {
            out.push(c);
            out.push_str(new);
        }
        return out;
    }
    st.replace(old, new)
}

/// Go's `strings.Split`/`SplitN`: an empty separator splits into runes.
fn go_split(st: &str, sep: &str, n: Option<usize>) -> Vec<String> {
    if n == Some(0) {
        return Vec::new();
    }
    if sep.is_empty() {
        let chars: Vec<String> = st.chars().map(String::from).collect();
        return match n {
            Some(n) if n < chars.len() => {
                let mut v = chars[..n - 1].to_vec();
                v.push(st.chars().skip(n - 1).collect());
                v
            }
            _ => chars,
        };
    }
    match n {
        Some(n) => st.splitn(n, sep).map(str::to_owned).collect(),
        None => st.split(sep).map(str::to_owned).collect(),
    }
}

/// Sprig's `strslice`: a list's non-nil elements as strings, a nil as no strings, else one.
pub(crate) fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l.iter().filter(|e| !e.is_nil()).map(strval).collect(),
        // Any other slice goes element by element: a `[]byte` gives its byte numbers.
        Value::Object(o) if o.bytes().is_some() => o
            .bytes()
            .unwrap_or_default()
            .iter()
            .map(u8::to_string)
            .collect(),
        Value::Nil => Vec::new(),
        other => vec![strval(other)],
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random(n: i64, alphabet: &[u8]) -> FResult {
    let n = usize::try_from(n).unwrap_or(0).min(MAX_BUILD);
    let mut rng = rand::rng();
    string(
        (0..n)
            .map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())]))
            .collect::<String>(),
    )
}

pub(super) fn go_base64_error(e: &base64::DecodeError) -> String {
    let offset = match e {
        base64::DecodeError::InvalidByte(o, _) | base64::DecodeError::InvalidLastSymbol(o, _) => *o,
        base64::DecodeError::InvalidLength(o) => *o,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {offset}")
}
