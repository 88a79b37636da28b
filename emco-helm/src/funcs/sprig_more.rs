//! The rest of Sprig: paths (`base`, `dir`, `clean`, `ext`, `isAbs` and their `os*` twins),
//! base32, `seq`, `randInt`, `randAscii`, `typeIsLike`, `mustFromJson`, `regexQuoteMeta`,
//! `getHostByName` (DNS off, as Helm's default), `urlParse`/`urlJoin` and the alias names (`tuple`, `biggest`, `trimall`).

use std::collections::BTreeMap;

use rand::Rng as _;

use super::sprig_lists::until_step;
use super::{FResult, Param, Registry, func, i, s};
use crate::json;
use crate::value::Value;

fn text(v: impl Into<String>) -> FResult {
    Ok(Value::String(v.into()))
}

/// Go's `path.Clean`: the shortest equivalent path by purely lexical processing.
pub(crate) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Go's `path.Base`.
fn base(path: &str) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_owned();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_owned()
}

/// Go's `path.Dir`.
fn dir(path: &str) -> String {
    let cut = path.rfind('/').map_or(0, |i| i + 1);
    clean(&path[..cut])
}

/// Go's `path.Ext`.
fn ext(path: &str) -> String {
    for (i, c) in path.char_indices().rev() {
        if c == '/' {
            break;
        }
        if c == '.' {
            return path[i..].to_owned();
        }
    }
    String::new()
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// `base32.StdEncoding.EncodeToString`.
fn b32_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = u64::from_be_bytes([0, 0, 0, buf[0], buf[1], buf[2], buf[3], buf[4]]);
        let chars = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for k in 0..8 {
            if k < chars {
                out.push(char::from(B32[((n >> (35 - 5 * k)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `base32.StdEncoding.DecodeString`, with Go's `illegal base32 data at input byte N`.
fn b32_decode(input: &str) -> Result<Vec<u8>, String> {
    // Go skips newlines.
    let clean: Vec<u8> = input
        .bytes()
        .filter(|b| *b != b'\n' && *b != b'\r')
        .collect();
    let err = |at: usize| format!("illegal base32 data at input byte {at}");
    if !clean.len().is_multiple_of(8) {
        return Err(err(clean.len() / 8 * 8));
    }
    let mut out = Vec::new();
    for (ci, chunk) in clean.chunks(8).enumerate() {
        let pad = chunk.iter().rev().take_while(|b| **b == b'=').count();
        let data_len = 8 - pad;
        let bytes = match data_len {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => return Err(err(ci * 8 + data_len)),
        };
        if pad > 0 && ci + 1 != clean.len() / 8 {
            return Err(err(ci * 8 + data_len));
        }
        let mut n: u64 = 0;
        for (k, &c) in chunk[..data_len].iter().enumerate() {
            let v = B32
                .iter()
                .position(|&x| x == c)
                .ok_or_else(|| err(ci * 8 + k))?;
            n |= (v as u64) << (35 - 5 * k);
        }
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[3..3 + bytes]);
    }
    Ok(out)
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The parts of a URL as Go's `url.Parse` splits them (without Go's escaping validation).
#[derive(Debug, Default, PartialEq, Eq)]
struct Url {
    scheme: String,
    opaque: String,
    userinfo: String,
    host: String,
    path: String,
    query: String,
    fragment: String,
}

/// `%XX` decoding as Go's `unescape` for paths and fragments.
fn unescape(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
            let Some(hex) = hex else {
                let bad = s.get(i..(i + 3).min(s.len())).unwrap_or("%");
                return Err(format!("invalid URL escape {}", crate::gofmt::quote(bad)));
            };
            out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `url.Parse` for the parts Sprig reads.
fn parse_url(raw: &str) -> Result<Url, String> {
    let mut u = Url::default();
    let (rest, fragment) = match raw.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (raw, None),
    };
    if let Some(f) = fragment {
        u.fragment = unescape(f)?;
    }
    let mut rest = rest;
    // A scheme is letters first, then letters, digits, `+`, `-`, `.`, up to a colon.
    if let Some(colon) = rest.find(':') {
        let cand = &rest[..colon];
        let valid = cand.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && cand
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if valid {
            u.scheme = cand.to_ascii_lowercase();
            rest = &rest[colon + 1..];
        } else if colon == 0 {
            return Err("missing protocol scheme".to_owned());
        }
    }
    if let Some((r, q)) = rest.split_once('?') {
        u.query = q.to_owned();
        rest = r;
    }
    if !rest.starts_with('/') && !u.scheme.is_empty() {
        u.opaque = rest.to_owned();
        return Ok(u);
    }
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find('/').unwrap_or(after.len());
        let authority = &after[..end];
        rest = &after[end..];
        let host = match authority.rsplit_once('@') {
            Some((user, host)) => {
                u.userinfo = user.to_owned();
                host
            }
            None => authority,
        };
        u.host = unescape(host)?;
    }
    u.path = unescape(rest)?;
    Ok(u)
}

/// Go's `url.URL.Hostname()`: the host without port or IPv6 brackets.
fn hostname(host: &str) -> String {
    if let Some(inner) = host.strip_prefix('[') {
        return inner.split(']').next().unwrap_or("").to_owned();
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|c| c.is_ascii_digit()) => h.to_owned(),
        _ => host.to_owned(),
    }
}

/// Go's `shouldEscape` for paths: unreserved characters and `$&+,/:;=@` stay as they are.
fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Go's `url.URL.String()`.
fn url_string(u: &Url) -> String {
    let mut out = String::new();
    if !u.scheme.is_empty() {
        out.push_str(&u.scheme);
        out.push(':');
    }
    if !u.opaque.is_empty() {
        out.push_str(&u.opaque);
    } else {
        if !u.scheme.is_empty() || !u.host.is_empty() || !u.userinfo.is_empty() {
            if !u.host.is_empty() || !u.path.is_empty() || !u.userinfo.is_empty() {
                out.push_str("//");
            }
            if !u.userinfo.is_empty() {
                out.push_str(&u.userinfo);
                out.push('@');
            }
            out.push_str(&u.host);
        }
        let path = escape_path(&u.path);
        if !path.is_empty() && !path.starts_with('/') && !u.host.is_empty() {
            out.push('/');
        }
        out.push_str(&path);
    }
    if !u.query.is_empty() {
        out.push('?');
        out.push_str(&u.query);
    }
    if !u.fragment.is_empty() {
        out.push('#');
        out.push_str(&escape_path(&u.fragment));
    }
    out
}

pub(super) fn register(m: &mut Registry) {
    for (alias, name) in [
        ("tuple", "list"),
        ("biggest", "max"),
        ("trimall", "trimAll"),
    ] {
        if let Some(f) = m.get(name).copied() {
            m.insert(alias, f);
        }
    }
    m.insert("hello", func(&[], None, |_, _| text("Hello!")));
    // Helm runs on Unix, where `path/filepath` behaves as `path`.
    for (name, imp) in [
        (
            "base",
            func(&[Param::Str], None, |_, a| text(base(s(&a[0])))),
        ),
        ("dir", func(&[Param::Str], None, |_, a| text(dir(s(&a[0]))))),
        (
            "clean",
            func(&[Param::Str], None, |_, a| text(clean(s(&a[0])))),
        ),
        ("ext", func(&[Param::Str], None, |_, a| text(ext(s(&a[0]))))),
    ] {
        m.insert(name, imp);
    }
    for (os_name, name) in [
        ("osBase", "base"),
        ("osDir", "dir"),
        ("osClean", "clean"),
        ("osExt", "ext"),
    ] {
        if let Some(f) = m.get(name).copied() {
            m.insert(os_name, f);
        }
    }
    let is_abs = func(&[Param::Str], None, |_, a| {
        Ok(Value::Bool(s(&a[0]).starts_with('/')))
    });
    m.insert("isAbs", is_abs);
    m.insert("osIsAbs", is_abs);
    m.insert(
        "b32enc",
        func(&[Param::Str], None, |_, a| {
            text(b32_encode(s(&a[0]).as_bytes()))
        }),
    );
    m.insert(
        "b32dec",
        func(&[Param::Str], None, |_, a| {
            // Sprig prints the decoding error in place of the text.
            text(match b32_decode(s(&a[0])) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => e,
            })
        }),
    );
    m.insert(
        "seq",
        func(&[], Some(Param::Int), |_, a| {
            let p: Vec<i64> = a.iter().map(i).collect();
            let l = match p.as_slice() {
                [end] => {
                    let inc = if *end < 1 { -1 } else { 1 };
                    until_step(1, end + inc, inc)?
                }
                [start, end] => {
                    let step = if end < start { -1 } else { 1 };
                    until_step(*start, end + step, step)?
                }
                [start, step, end] => {
                    let inc = if end < start { -1 } else { 1 };
                    if end < start && *step > 0 {
                        return text("");
                    }
                    until_step(*start, end + inc, *step)?
                }
                _ => return text(""),
            };
            let Value::List(items) = l else {
                return text("");
            };
            text(
                items
                    .iter()
                    .map(Value::to_go_string)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        }),
    );
    m.insert(
        "randInt",
        func(&[Param::Int, Param::Int], None, |_, a| {
            let (lo, hi) = (i(&a[0]), i(&a[1]));
            let n = hi.wrapping_sub(lo);
            if n <= 0 {
                return Err("invalid argument to Intn".to_owned());
            }
            Ok(Value::Int(rand::rng().random_range(0..n) + lo))
        }),
    );
    m.insert(
        "randAscii",
        func(&[Param::Int], None, |_, a| {
            let n = usize::try_from(i(&a[0]))
                .unwrap_or(0)
                .min(super::sprig_strings::MAX_BUILD);
            let mut rng = rand::rng();
            text(
                (0..n)
                    .map(|_| char::from(rng.random_range(32u8..127)))
                    .collect::<String>(),
            )
        }),
    );
    m.insert(
        "typeIsLike",
        func(&[Param::Str, Param::Any], None, |_, a| {
            let t = a[1].type_name();
            let want = s(&a[0]);
            Ok(Value::Bool(t == want || t == format!("*{want}")))
        }),
    );
    m.insert(
        "mustFromJson",
        func(&[Param::Str], None, |_, a| json::from_json(s(&a[0]))),
    );
    m.insert(
        "regexQuoteMeta",
        func(&[Param::Str], None, |_, a| text(quote_meta(s(&a[0])))),
    );
    // Helm replaces Sprig's DNS lookup unless `--enable-dns` is given, which `helm template`
    // rendering here never does: the answer is always "".
    m.insert("getHostByName", func(&[Param::Str], None, |_, _| text("")));
    m.insert(
        "urlParse",
        func(&[Param::Str], None, |_, a| {
            let u = parse_url(s(&a[0])).map_err(|e| {
                format!(
                    "unable to parse url: parse {}: {e}",
                    crate::gofmt::quote(s(&a[0]))
                )
            })?;
            let host = hostname(&u.host);
            let entries: BTreeMap<String, Value> = [
                ("scheme", u.scheme),
                ("host", u.host),
                ("hostname", host),
                ("path", u.path),
                ("query", u.query),
                ("opaque", u.opaque),
                ("fragment", u.fragment),
                ("userinfo", u.userinfo),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v)))
            .collect();
            Ok(Value::map(entries))
        }),
    );
    m.insert(
        "urlJoin",
        func(&[Param::Map], None, |_, a| {
            let Value::Map(d) = &a[0] else {
                return Err("interface conversion: interface {} is nil, not string".to_owned());
            };
            let field = |k: &str| -> Result<String, String> {
                match d.get(k) {
                    Some(Value::String(s)) => Ok(s),
                    Some(Value::Nil) | None => Ok(String::new()),
                    Some(other) => Err(format!(
                        "interface conversion: interface {{}} is {}, not string",
                        other.type_name()
                    )),
                }
            };
            let u = Url {
                scheme: field("scheme")?,
                host: field("host")?,
                path: field("path")?,
                query: field("query")?,
                opaque: field("opaque")?,
                fragment: field("fragment")?,
                userinfo: field("userinfo")?,
            };
            text(url_string(&u))
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_path_functions() {
        for (p, want) in [
            ("", "."),
            ("a/../../b", "../b"),
            ("/../a//b/./c/", "/a/b/c"),
            ("a/b/..", "a"),
            ("/", "/"),
        ] {
            assert_eq!(clean(p), want, "{p}");
        }
        assert_eq!(base("/a/b.txt/"), "b.txt");
        assert_eq!(base("///"), "/");
        assert_eq!(dir("/a/b/c"), "/a/b");
        assert_eq!(dir("c"), ".");
        assert_eq!(ext("a/b.tar.gz"), ".gz");
        assert_eq!(ext("a.b/c"), "");
    }

    #[test]
    fn base32_round_trips_like_go() {
        for (plain, enc) in [
            ("", ""),
            ("f", "MY======"),
            ("fo", "MZXQ===="),
            ("foo", "MZXW6==="),
            ("foob", "MZXW6YQ="),
            ("fooba", "MZXW6YTB"),
            ("foobar", "MZXW6YTBOI======"),
        ] {
            assert_eq!(b32_encode(plain.as_bytes()), enc);
            assert_eq!(b32_decode(enc).expect("decode"), plain.as_bytes());
        }
        assert_eq!(
            b32_decode("MZXW6YT!").err().as_deref(),
            Some("illegal base32 data at input byte 7")
        );
    }

    #[test]
    fn urls_parse_and_join() {
        let u = parse_url("https://user:pw@example.com:8443/a%20b/c?x=1&y=2#frag").expect("url");
        assert_eq!(u.scheme, "https");
        assert_eq!(u.userinfo, "user:pw");
        assert_eq!(u.host, "example.com:8443");
        assert_eq!(hostname(&u.host), "example.com");
        assert_eq!(u.path, "/a b/c");
        assert_eq!(u.query, "x=1&y=2");
        assert_eq!(u.fragment, "frag");
        assert_eq!(
            url_string(&u),
            "https://user:pw@example.com:8443/a%20b/c?x=1&y=2#frag"
        );
        let m = parse_url("mailto:someone@example.com").expect("opaque");
        assert_eq!(m.opaque, "someone@example.com");
        assert_eq!(url_string(&m), "mailto:someone@example.com");
        assert_eq!(quote_meta("a.b*c[d]"), r"a\.b\*c\[d\]");
    }
}
