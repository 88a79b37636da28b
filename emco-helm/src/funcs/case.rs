//! `xstrings.ToSnakeCase`/`ToKebabCase` (Sprig's `snakecase`/`kebabcase`).
//!
//! The text is split into words (runs of upper case, lower-case letters, digits, connectors
//! `-`/`_`/space, punctuation, anything else); words are lower-cased and joined with the
//! connector, a number joining the word before it unless lower-case letters follow it
//! (`Bld4Floor3rd` -> `bld4_floor_3rd`, `HTTP2xx` -> `http_2xx`). `U+FFFD` is skipped over when
//! classifying, as Go's decoder reports it as an invalid rune.
//!
//! Rust's standard library has no Unicode punctuation category, so only ASCII punctuation
//! (Go's `unicode.IsPunct` subset of ASCII) counts as punctuation.

const INVALID: char = '\u{fffd}';

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    Invalid,
    Number,
    Upper,
    Alphabet,
    Connector,
    Punct,
    Other,
}

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || c.is_whitespace()
}

/// Go's `unicode.IsPunct` for ASCII (`$+<=>^`|~` are symbols, not punctuation).
fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation() && !"$+<=>^`|~".contains(c)
}

/// A letter that is not a CJK ideograph (those form words of their own).
fn is_alphabet(c: char) -> bool {
    c.is_alphabetic()
        && !matches!(c, '\u{4e00}'..='\u{9fcc}' | '\u{3400}'..='\u{4d85}' | '\u{20000}'..='\u{2b81d}')
}

/// The next character that is not `U+FFFD` and the bytes up to and including it; `prev` and
/// the rest's length when there is none.
fn next_valid(s: &str, prev: char) -> (char, usize) {
    let mut size = 0;
    for c in s.chars() {
        size += c.len_utf8();
        if c != INVALID {
            return (c, size);
        }
    }
    (prev, size)
}

/// Extends `offset` over the characters of `s` that satisfy `keep`; returns the new offset and
/// the character that stopped it.
fn extend(s: &str, mut offset: usize, mut r: char, keep: impl Fn(char) -> bool) -> (usize, char) {
    while offset < s.len() {
        let (c, size) = next_valid(&s[offset..], r);
        r = c;
        if !keep(c) {
            break;
        }
        offset += size;
    }
    (offset, r)
}

fn next_word(s: &str) -> (Word, &str, &str) {
    if s.is_empty() {
        return (Word::Invalid, "", "");
    }
    let (r, size) = next_valid(s, INVALID);
    let (kind, offset) = if r == INVALID {
        (Word::Invalid, size)
    } else if is_connector(r) {
        (Word::Connector, extend(s, size, r, is_connector).0)
    } else if is_punct(r) {
        (Word::Punct, extend(s, size, r, is_punct).0)
    } else if r.is_uppercase() {
        let mut offset = size;
        if offset < s.len() {
            let (c, csize) = next_valid(&s[offset..], r);
            if c.is_uppercase() {
                // A run of capitals; its last one starts the next word when letters follow
                // (`HTTPServer` is `HTTP` + `Server`).
                let mut last = csize;
                offset += csize;
                let mut r = c;
                while offset < s.len() {
                    let (c, csize) = next_valid(&s[offset..], r);
                    r = c;
                    if !c.is_uppercase() {
                        break;
                    }
                    last = csize;
                    offset += csize;
                }
                if offset < s.len() && is_alphabet(r) {
                    offset -= last;
                }
            } else if is_alphabet(c) {
                offset = extend(s, offset, r, |c| is_alphabet(c) && !c.is_uppercase()).0;
            }
        }
        (Word::Upper, offset)
    } else if is_alphabet(r) {
        let lower = |c: char| is_alphabet(c) && !c.is_uppercase();
        (Word::Alphabet, extend(s, size, r, lower).0)
    } else if r.is_numeric() {
        (Word::Number, extend(s, size, r, char::is_numeric).0)
    } else {
        let other = |c: char| !(is_connector(c) || is_alphabet(c) || c.is_numeric() || is_punct(c));
        (Word::Other, extend(s, size, r, other).0)
    };
    (kind, &s[..offset], &s[offset..])
}

/// Appends `word`, lower-cased and with connectors replaced when it is a capital or connector
/// word.
fn push_lower(out: &mut String, kind: Word, word: &str, conn: char) {
    if kind != Word::Upper && kind != Word::Connector {
        out.push_str(word);
        return;
    }
    for c in word.chars() {
        if is_connector(c) {
            out.push(conn);
        } else if c.is_uppercase() {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(l), None) => out.push(l),
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
}

/// Whether a connector goes between the word just written and a following word of `kind`.
fn joins(kind: Word) -> bool {
    !matches!(kind, Word::Invalid | Word::Connector | Word::Punct)
}

/// `s` in lower case with words joined by `conn`.
pub(super) fn lower_case_words(s: &str, conn: char) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let (mut kind, mut word, mut rest) = next_word(s);
    while !rest.is_empty() {
        if kind != Word::Connector {
            push_lower(&mut out, kind, word, conn);
        }
        let (prev, last) = (kind, word);
        (kind, word, rest) = next_word(rest);
        match prev {
            Word::Number => {
                while matches!(kind, Word::Alphabet | Word::Number) {
                    push_lower(&mut out, kind, word, conn);
                    (kind, word, rest) = next_word(rest);
                }
                if joins(kind) {
                    out.push(conn);
                }
            }
            Word::Connector => push_lower(&mut out, prev, last, conn),
            Word::Punct => {}
            _ => {
                if kind != Word::Number {
                    if kind != Word::Connector && kind != Word::Punct {
                        out.push(conn);
                    }
                    continue;
                }
                if rest.is_empty() {
                    continue;
                }
                let number = word;
                (kind, word, rest) = next_word(rest);
                if kind != Word::Alphabet {
                    // A number followed by no letters belongs to the word before it.
                    push_lower(&mut out, Word::Number, number, conn);
                    if kind != Word::Connector && kind != Word::Punct {
                        out.push(conn);
                    }
                    continue;
                }
                out.push(conn);
                push_lower(&mut out, Word::Number, number, conn);
                while matches!(kind, Word::Alphabet | Word::Number) {
                    push_lower(&mut out, kind, word, conn);
                    (kind, word, rest) = next_word(rest);
                }
                if joins(kind) {
                    out.push(conn);
                }
            }
        }
    }
    push_lower(&mut out, kind, word, conn);
    out
}
