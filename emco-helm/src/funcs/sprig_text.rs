//! Sprig's text helpers built on `goutils`/`xstrings` (`abbrev`, `wrap`, `initials`, ...) and the
//! remaining checksums.

use rand::seq::SliceRandom as _;

use super::case::lower_case_words;
use super::sprig_strings::hex;
use super::{FResult, Param, Registry, func, i, s};
use crate::value::Value;

const S: &[Param] = &[Param::Str];
const IS: &[Param] = &[Param::Int, Param::Str];

const MARKER: &str = "...";

fn string(v: impl Into<String>) -> FResult {
    Ok(Value::String(v.into()))
}

/// Bytes `start..end` of `s`; Go slices strings by byte, so a cut inside a character prints as
/// replacement characters rather than failing.
fn bytes(s: &str, start: usize, end: usize) -> String {
    String::from_utf8_lossy(&s.as_bytes()[start..end]).into_owned()
}

/// `goutils.AbbreviateFull`; `None` where goutils returns an error (which Sprig prints as "").
fn abbreviate(s: &str, offset: usize, width: usize) -> Option<String> {
    let len = s.len();
    if s.is_empty() {
        return Some(String::new());
    }
    if width < 4 {
        return None;
    }
    if len <= width {
        return Some(s.to_owned());
    }
    let mut offset = offset.min(len);
    if len - offset < width - 3 {
        offset = len - (width - 3);
    }
    if offset <= 4 {
        return Some(bytes(s, 0, width - 3) + MARKER);
    }
    if width < 7 {
        return None;
    }
    if offset + width - 3 < len {
        let rest = bytes(s, offset, len);
        return abbreviate(&rest, 0, width - 3).map(|r| format!("{MARKER}{r}"));
    }
    Some(format!("{MARKER}{}", bytes(s, len - (width - 3), len)))
}

/// `goutils.WrapCustom`: breaks at the last space that keeps a line within `width` bytes;
/// a word longer than `width` is cut when `long_words`, else kept whole.
fn wrap(s: &str, width: i64, sep: &str, long_words: bool) -> String {
    if s.is_empty() {
        return String::new();
    }
    let sep = if sep.is_empty() { "\n" } else { sep };
    let width = usize::try_from(width).unwrap_or(0).max(1);
    let b = s.as_bytes();
    let len = b.len();
    let mut out = String::new();
    let mut offset = 0;
    while len - offset > width {
        if b[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = width + offset + 1;
        if let Some(sp) = b[offset..end].iter().rposition(|&c| c == b' ') {
            let at = offset + sp;
            out.push_str(&bytes(s, offset, at));
            out.push_str(sep);
            offset = at + 1;
        } else if long_words {
            out.push_str(&bytes(s, offset, offset + width));
            out.push_str(sep);
            offset += width;
        } else {
            let end = offset + width;
            match b[end..].iter().position(|&c| c == b' ') {
                None => {
                    out.push_str(&bytes(s, offset, len));
                    offset = len;
                }
                Some(p) => {
                    let at = end + p;
                    out.push_str(&bytes(s, offset, at));
                    out.push_str(sep);
                    offset = at + 1;
                }
            }
        }
    }
    out.push_str(&bytes(s, offset, len));
    out
}

/// `goutils.Initials`: the first character after each run of whitespace.
fn initials(s: &str) -> String {
    let mut gap = true;
    let mut out = String::new();
    for c in s.chars() {
        if c.is_whitespace() {
            gap = true;
        } else if gap {
            out.push(c);
            gap = false;
        }
    }
    out
}

/// Go's `unicode.ToUpper`: a one-to-one mapping, so characters whose upper case is several
/// characters (`ß`) stay as they are.
fn upper(c: char) -> char {
    single(c.to_uppercase()).unwrap_or(c)
}

/// Go's `unicode.ToLower` (see [`upper`]).
fn lower(c: char) -> char {
    single(c.to_lowercase()).unwrap_or(c)
}

fn single(mut it: impl Iterator<Item = char>) -> Option<char> {
    let c = it.next()?;
    it.next().is_none().then_some(c)
}

/// `xstrings.SwapCase`: upper and title case become lower, lower becomes upper.
fn swapcase(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_uppercase() {
            out.push(lower(c));
        } else if c.is_lowercase() {
            out.push(upper(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// `xstrings.ToCamelCase`: leading underscores are kept, an underscore before a letter is
/// dropped and upper-cases it, runs of underscores keep all but the last, every other character
/// is lower-cased and the first one upper-cased.
fn camelcase(s: &str) -> String {
    let body = s.trim_start_matches('_');
    let mut out = String::from(&s[..s.len() - body.len()]);
    let mut chars = body.chars();
    let Some(first) = chars.next() else {
        return out;
    };
    let mut prev = upper(first);
    for c in chars {
        if prev == '_' && c == '_' {
            out.push('_');
            continue;
        }
        let cur = if prev == '_' { upper(c) } else { lower(c) };
        if prev != '_' {
            out.push(prev);
        }
        prev = cur;
    }
    out.push(prev);
    out
}

/// `hash/adler32` checksum.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the largest run whose sums cannot overflow u32 before the reduction.
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "abbrev",
        func(IS, None, |_, a| {
            let (w, text) = (i(&a[0]), s(&a[1]));
            // Sprig returns the input unchanged below the minimum width.
            match usize::try_from(w) {
                Ok(w) if w >= 4 => string(abbreviate(text, 0, w).unwrap_or_default()),
                _ => string(text),
            }
        }),
    );
    m.insert(
        "abbrevboth",
        func(&[Param::Int, Param::Int, Param::Str], None, |_, a| {
            let (left, right, text) = (i(&a[0]), i(&a[1]), s(&a[2]));
            if right < 4 || (left > 0 && right < 7) {
                return string(text);
            }
            let off = usize::try_from(left).unwrap_or(0);
            let w = usize::try_from(right).unwrap_or(0);
            string(abbreviate(text, off, w).unwrap_or_default())
        }),
    );
    m.insert(
        "wrap",
        func(IS, None, |_, a| string(wrap(s(&a[1]), i(&a[0]), "", false))),
    );
    m.insert(
        "wrapWith",
        func(&[Param::Int, Param::Str, Param::Str], None, |_, a| {
            string(wrap(s(&a[2]), i(&a[0]), s(&a[1]), true))
        }),
    );
    m.insert(
        "plural",
        func(&[Param::Str, Param::Str, Param::Int], None, |_, a| {
            string(if i(&a[2]) == 1 { s(&a[0]) } else { s(&a[1]) })
        }),
    );
    m.insert("initials", func(S, None, |_, a| string(initials(s(&a[0])))));
    m.insert(
        "shuffle",
        func(S, None, |_, a| {
            // `xstrings.Shuffle`: a uniformly random permutation of the characters.
            let mut chars: Vec<char> = s(&a[0]).chars().collect();
            chars.shuffle(&mut rand::rng());
            string(chars.into_iter().collect::<String>())
        }),
    );
    m.insert(
        "snakecase",
        func(S, None, |_, a| string(lower_case_words(s(&a[0]), '_'))),
    );
    m.insert(
        "kebabcase",
        func(S, None, |_, a| string(lower_case_words(s(&a[0]), '-'))),
    );
    m.insert(
        "camelcase",
        func(S, None, |_, a| string(camelcase(s(&a[0])))),
    );
    m.insert("swapcase", func(S, None, |_, a| string(swapcase(s(&a[0])))));
    m.insert(
        "sha1sum",
        func(S, None, |_, a| {
            use sha1::Digest as _;
            string(hex(&sha1::Sha1::digest(s(&a[0]).as_bytes())))
        }),
    );
    m.insert(
        "adler32sum",
        func(S, None, |_, a| {
            string(adler32(s(&a[0]).as_bytes()).to_string())
        }),
    );
}
