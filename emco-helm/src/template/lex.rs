//! The lexer of Go's `text/template`: text, `{{ }}` actions with `-` trim markers, comments.

use std::fmt;

/// A token of an action, or text between actions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Text(String),
    LeftDelim,
    RightDelim,
    Ident(String),
    Keyword(&'static str),
    Field(String),
    Variable(String),
    Dot,
    Str { value: String, raw: String },
    Char { value: i64, raw: String },
    Number(String),
    Bool(bool),
    Nil,
    Pipe,
    LParen,
    RParen,
    Declare,
    Assign,
    Comma,
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Text(t) => write!(f, "{t:?}"),
            Tok::LeftDelim => f.write_str("<{{>"),
            Tok::RightDelim => f.write_str("<}}>"),
            Tok::Ident(s) | Tok::Field(s) | Tok::Variable(s) | Tok::Number(s) => write!(f, "<{s}>"),
            Tok::Keyword(k) => write!(f, "<{k}>"),
            Tok::Dot => f.write_str("<.>"),
            Tok::Str { raw, .. } | Tok::Char { raw, .. } => write!(f, "<{raw}>"),
            Tok::Bool(b) => write!(f, "<{b}>"),
            Tok::Nil => f.write_str("<nil>"),
            Tok::Pipe => f.write_str("<|>"),
            Tok::LParen => f.write_str("<(>"),
            Tok::RParen => f.write_str("<)>"),
            Tok::Declare => f.write_str("<:=>"),
            Tok::Assign => f.write_str("<=>"),
            Tok::Comma => f.write_str("<,>"),
            Tok::Eof => f.write_str("EOF"),
        }
    }
}

/// A token with its byte offset and whether white space came right before it.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: usize,
    pub space_before: bool,
}

/// A lexing failure at byte offset `pos`.
#[derive(Debug)]
pub(crate) struct LexError {
    pub pos: usize,
    pub message: String,
}

const KEYWORDS: [&str; 11] = [
    "block", "break", "continue", "define", "else", "end", "if", "range", "template", "with", "nil",
];

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Splits `src` into tokens.
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, LexError> {
    Lexer {
        src,
        pos: 0,
        toks: Vec::new(),
        paren_depth: 0,
    }
    .run()
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    toks: Vec<Token>,
    paren_depth: usize,
}

impl Lexer<'_> {
    fn err<T>(&self, pos: usize, message: impl Into<String>) -> Result<T, LexError> {
        Err(LexError {
            pos,
            message: message.into(),
        })
    }

    fn push(&mut self, tok: Tok, pos: usize, space_before: bool) {
        self.toks.push(Token {
            tok,
            pos,
            space_before,
        });
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn run(mut self) -> Result<Vec<Token>, LexError> {
        let mut trim_next_text = false;
        while self.pos < self.src.len() {
            let start = self.pos;
            let (text_end, found) = match self.rest().find("{{") {
                Some(i) => (start + i, true),
                None => (self.src.len(), false),
            };
            let mut text = &self.src[start..text_end];
            if trim_next_text {
                text = text.trim_start_matches([' ', '\t', '\r', '\n']);
            }
            let after = &self.src[text_end..];
            let left_trim = found
                && after.len() >= 4
                && after.as_bytes()[2] == b'-'
                && is_space(after.as_bytes()[3]);
            if left_trim {
                text = text.trim_end_matches([' ', '\t', '\r', '\n']);
            }
            if !text.is_empty() {
                self.push(Tok::Text(text.to_owned()), start, false);
            }
            if !found {
                self.pos = self.src.len();
                break;
            }
            self.pos = text_end + 2 + if left_trim { 2 } else { 0 };
            trim_next_text = self.action(text_end)?;
        }
        self.push(Tok::Eof, self.src.len(), false);
        Ok(self.toks)
    }

    /// Lexes one action whose `{{` is at `open`; returns whether its `}}` trims the following text.
    fn action(&mut self, open: usize) -> Result<bool, LexError> {
        if self.rest().starts_with("/*") {
            return self.comment(open);
        }
        self.push(Tok::LeftDelim, open, false);
        self.paren_depth = 0;
        let mut space = false;
        loop {
            let bytes = self.rest().as_bytes();
            if bytes.is_empty() {
                return self.err(self.pos, "unclosed action");
            }
            if is_space(bytes[0]) {
                let ws = bytes.iter().take_while(|b| is_space(**b)).count();
                self.pos += ws;
                space = true;
                if self.rest().starts_with("-}}") {
                    let p = self.pos;
                    self.pos += 3;
                    self.check_closed(p)?;
                    self.push(Tok::RightDelim, p, true);
                    return Ok(true);
                }
                continue;
            }
            if self.rest().starts_with("}}") {
                let p = self.pos;
                self.pos += 2;
                self.check_closed(p)?;
                self.push(Tok::RightDelim, p, space);
                return Ok(false);
            }
            self.item(space)?;
            space = false;
        }
    }

    fn check_closed(&self, pos: usize) -> Result<(), LexError> {
        if self.paren_depth > 0 {
            return self.err(pos, "unclosed left paren");
        }
        Ok(())
    }

    fn comment(&mut self, open: usize) -> Result<bool, LexError> {
        let Some(end) = self.rest().find("*/") else {
            return self.err(open, "unclosed comment");
        };
        self.pos += end + 2;
        if self.rest().starts_with("}}") {
            self.pos += 2;
            Ok(false)
        } else if self.rest().len() >= 4
            && is_space(self.rest().as_bytes()[0])
            && self.rest()[1..].starts_with("-}}")
        {
            self.pos += 4;
            Ok(true)
        } else {
            self.err(open, "comment ends before closing delimiter")
        }
    }

    fn item(&mut self, space: bool) -> Result<(), LexError> {
        let start = self.pos;
        let Some(c) = self.rest().chars().next() else {
            return self.err(start, "unclosed action");
        };
        match c {
            '"' => {
                let (value, len) = self.quoted(start)?;
                let raw = self.src[start..start + len].to_owned();
                self.pos += len;
                self.push(Tok::Str { value, raw }, start, space);
            }
            '`' => {
                let Some(end) = self.rest()[1..].find('`') else {
                    return self.err(start, "unterminated raw quoted string");
                };
                let raw = self.src[start..start + end + 2].to_owned();
                let value = raw[1..raw.len() - 1].replace('\r', "");
                self.pos += end + 2;
                self.push(Tok::Str { value, raw }, start, space);
            }
            '\'' => {
                let (value, len) = self.char_constant(start)?;
                let raw = self.src[start..start + len].to_owned();
                self.pos += len;
                self.push(Tok::Char { value, raw }, start, space);
            }
            '$' => {
                let len = 1 + self.rest()[1..]
                    .chars()
                    .take_while(|c| is_alnum(*c))
                    .map(char::len_utf8)
                    .sum::<usize>();
                let name = self.src[start..start + len].to_owned();
                self.pos += len;
                self.check_terminator()?;
                self.push(Tok::Variable(name), start, space);
            }
            '.' => {
                let next = self.rest()[1..].chars().next();
                match next {
                    Some(d) if d.is_ascii_digit() => self.number(start, space)?,
                    Some(a) if is_alnum(a) => {
                        let len = 1 + self.rest()[1..]
                            .chars()
                            .take_while(|c| is_alnum(*c))
                            .map(char::len_utf8)
                            .sum::<usize>();
                        let name = self.src[start + 1..start + len].to_owned();
                        self.pos += len;
                        self.check_terminator()?;
                        self.push(Tok::Field(name), start, space);
                    }
                    _ => {
                        self.pos += 1;
                        self.push(Tok::Dot, start, space);
                    }
                }
            }
            '|' => {
                self.pos += 1;
                self.push(Tok::Pipe, start, space);
            }
            '(' => {
                self.pos += 1;
                self.paren_depth += 1;
                self.push(Tok::LParen, start, space);
            }
            ')' => {
                self.pos += 1;
                if self.paren_depth == 0 {
                    return self.err(start, "unexpected right paren");
                }
                self.paren_depth -= 1;
                self.push(Tok::RParen, start, space);
            }
            ':' => {
                if !self.rest().starts_with(":=") {
                    return self.err(start, "expected :=");
                }
                self.pos += 2;
                self.push(Tok::Declare, start, space);
            }
            '=' => {
                self.pos += 1;
                self.push(Tok::Assign, start, space);
            }
            ',' => {
                self.pos += 1;
                self.push(Tok::Comma, start, space);
            }
            '+' | '-' | '0'..='9' => self.number(start, space)?,
            c if is_alnum(c) => {
                let len = self
                    .rest()
                    .chars()
                    .take_while(|c| is_alnum(*c))
                    .map(char::len_utf8)
                    .sum::<usize>();
                let word = &self.src[start..start + len];
                self.pos += len;
                self.check_terminator()?;
                let tok = match word {
                    "true" => Tok::Bool(true),
                    "false" => Tok::Bool(false),
                    "nil" => Tok::Nil,
                    w => match KEYWORDS.iter().find(|k| **k == w) {
                        Some(k) => Tok::Keyword(k),
                        None => Tok::Ident(w.to_owned()),
                    },
                };
                self.push(tok, start, space);
            }
            c => {
                return self.err(
                    start,
                    format!("unrecognized character in action: {}", go_rune(c)),
                );
            }
        }
        Ok(())
    }

    /// Go requires an identifier to be followed by a space, `.`, `,`, `|`, `:`, `(`, `)` or `}}`.
    fn check_terminator(&self) -> Result<(), LexError> {
        let rest = self.rest();
        match rest.chars().next() {
            None => Ok(()),
            Some(c) if c.is_ascii() && is_space(c as u8) => Ok(()),
            Some('.' | ',' | '|' | ':' | ')' | '(' | '=') => Ok(()),
            Some(_) if rest.starts_with("}}") => Ok(()),
            Some(c) => self.err(self.pos, format!("bad character {}", go_rune(c))),
        }
    }

    fn number(&mut self, start: usize, space: bool) -> Result<(), LexError> {
        let b = self.rest().as_bytes();
        let mut i = 0;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let mut digits: &[u8] = b"0123456789_";
        let mut decimal = true;
        if i < b.len() && b[i] == b'0' {
            i += 1;
            match b.get(i) {
                Some(b'x' | b'X') => {
                    i += 1;
                    digits = b"0123456789abcdefABCDEF_";
                    decimal = false;
                }
                Some(b'o' | b'O') => {
                    i += 1;
                    digits = b"01234567_";
                    decimal = false;
                }
                Some(b'b' | b'B') => {
                    i += 1;
                    digits = b"01_";
                    decimal = false;
                }
                _ => {}
            }
        }
        let run = |i: &mut usize, set: &[u8]| {
            while *i < b.len() && set.contains(&b[*i]) {
                *i += 1;
            }
        };
        run(&mut i, digits);
        if i < b.len() && b[i] == b'.' {
            i += 1;
            run(&mut i, digits);
        }
        if decimal && i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                i += 1;
            }
            run(&mut i, b"0123456789_");
        }
        if i < b.len() && b[i] == b'i' {
            i += 1;
        }
        let bad = self.rest()[i..].chars().next().is_some_and(is_alnum);
        let text = &self.src[start..start + i];
        if bad || text == "+" || text == "-" {
            let end = start + i + self.rest()[i..].chars().next().map_or(0, char::len_utf8);
            return self.err(
                start,
                format!("bad number syntax: {:?}", &self.src[start..end]),
            );
        }
        self.pos += i;
        self.push(Tok::Number(text.to_owned()), start, space);
        Ok(())
    }

    /// Unquotes a Go interpreted string literal at the start of the rest; returns it and its length.
    fn quoted(&self, start: usize) -> Result<(String, usize), LexError> {
        let rest = self.rest();
        let mut out = String::new();
        let mut chars = rest.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Ok((out, i + 1)),
                '\n' => return self.err(start, "unterminated quoted string"),
                '\\' => {
                    let Some((_, e)) = chars.next() else { break };
                    self.escape(start, e, &mut chars, &mut out, '"')?;
                }
                c => out.push(c),
            }
        }
        self.err(start, "unterminated quoted string")
    }

    fn escape(
        &self,
        start: usize,
        e: char,
        chars: &mut impl Iterator<Item = (usize, char)>,
        out: &mut String,
        quote: char,
    ) -> Result<(), LexError> {
        let mut hex = |n: usize| -> Result<u32, LexError> {
            let mut v = 0u32;
            for _ in 0..n {
                let d = chars.next().and_then(|(_, c)| c.to_digit(16));
                match d {
                    Some(d) => v = v * 16 + d,
                    None => {
                        return Err(LexError {
                            pos: start,
                            message: "invalid syntax".into(),
                        });
                    }
                }
            }
            Ok(v)
        };
        let c = match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'v' => '\u{b}',
            '\\' => '\\',
            'x' => {
                let v = hex(2)?;
                // \x escapes are bytes; above 0x7f they would be invalid UTF-8 on their own.
                char::from_u32(v).unwrap_or('\u{fffd}')
            }
            'u' => char::from_u32(hex(4)?).unwrap_or('\u{fffd}'),
            'U' => char::from_u32(hex(8)?).unwrap_or('\u{fffd}'),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.next().and_then(|(_, c)| c.to_digit(8)) {
                        Some(d) => v = v * 8 + d,
                        None => return self.err(start, "invalid syntax"),
                    }
                }
                char::from_u32(v).unwrap_or('\u{fffd}')
            }
            c if c == quote => c,
            _ => return self.err(start, "invalid syntax"),
        };
        out.push(c);
        Ok(())
    }

    fn char_constant(&self, start: usize) -> Result<(i64, usize), LexError> {
        let rest = self.rest();
        let mut chars = rest.char_indices().skip(1);
        let mut out = String::new();
        match chars.next() {
            Some((_, '\\')) => {
                let Some((_, e)) = chars.next() else {
                    return self.err(start, "unterminated character constant");
                };
                self.escape(start, e, &mut chars, &mut out, '\'')?;
            }
            Some((_, '\'' | '\n')) | None => {
                return self.err(start, "unterminated character constant");
            }
            Some((_, c)) => out.push(c),
        }
        match chars.next() {
            Some((i, '\'')) => Ok((out.chars().next().map_or(0, |c| i64::from(c as u32)), i + 1)),
            _ => self.err(start, "unterminated character constant"),
        }
    }
}

/// Go's `%#U` of a rune: `U+0021 '!'`.
fn go_rune(c: char) -> String {
    format!("U+{:04X} '{c}'", c as u32)
}
