//! Writing YAML as `sigs.k8s.io/yaml.Marshal` does: a JSON round trip, then go-yaml v2's
//! emitter: keys sorted in its natural order, 2-space indentation, sequences not indented inside
//! mappings, strings quoted only where a plain scalar would read back differently, literal blocks
//! for multi-line strings, and plain or quoted scalars folded at 80 columns.

use serde_json::Value;

use super::Error;
use super::read::{Resolved, is_base60_float, is_timestamp, resolve};
use crate::strconv::{format_float_g, format_float_json};

/// Deepest nesting written (deeper input is refused, as Go's encoder refuses cycles).
const MAX_NESTING: usize = 10_000;

/// A value as go-yaml v2 sees it after the JSON round trip.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer or float already in its final text.
    Number(String),
    /// A string, quoted as needed when written.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping in the order it is written; build it with [`Node::map`] to get go-yaml's order.
    Map(Vec<(String, Node)>),
}

impl Node {
    /// A mapping with its keys in go-yaml v2's order.
    #[must_use]
    pub fn map(entries: Vec<(String, Node)>) -> Node {
        Node::Map(merge_sort_by(entries, &|a, b| key_order(&a.0, &b.0)))
    }

    /// A float as the JSON round trip leaves it: integral values as integers, others in Go's
    /// shortest `%g` form.
    ///
    /// # Errors
    /// `json: unsupported value: NaN` (or `+Inf`, `-Inf`).
    pub fn float(f: f64) -> Result<Node, Error> {
        if !f.is_finite() {
            return Err(Error::json(format!(
                "json: unsupported value: {}",
                format_float_g(f, None)
            )));
        }
        let text = format_float_json(f);
        if text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
            Ok(Node::Number(text))
        } else {
            let parsed: f64 = text.parse().unwrap_or(f);
            Ok(Node::Number(format_float_g(parsed, None)))
        }
    }

    /// The node of a JSON value.
    ///
    /// # Errors
    /// For nesting deeper than Go's encoder accepts.
    pub fn from_json(v: &Value) -> Result<Node, Error> {
        Self::from_json_at(v, 0)
    }

    fn from_json_at(v: &Value, depth: usize) -> Result<Node, Error> {
        if depth > MAX_NESTING {
            return Err(Error::json(
                "json: unsupported value: nested too deeply".to_owned(),
            ));
        }
        Ok(match v {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Node::Number(i.to_string()),
                (None, Some(u)) => Node::Number(u.to_string()),
                _ => Node::float(n.as_f64().unwrap_or(0.0))?,
            },
            Value::String(s) => Node::Str(s.clone()),
            Value::Array(items) => Node::Seq(
                items
                    .iter()
                    .map(|i| Self::from_json_at(i, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => Node::map(
                m.iter()
                    .map(|(k, v)| Ok((k.clone(), Self::from_json_at(v, depth + 1)?)))
                    .collect::<Result<_, Error>>()?,
            ),
        })
    }
}

/// The YAML text of `node`, ending in a newline.
#[must_use]
pub fn emit(node: &Node) -> String {
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
    };
    e.node(node, -1, Ctx::Root);
    if !e.out.ends_with('\n') {
        e.out.push('\n');
    }
    e.out
}

/// A stable merge sort that tolerates an inconsistent comparator: go-yaml's `keyList.Less`
/// is not a total order (digit runs that overflow `int` wrap, as in Go), which Go's
/// `sort.Sort` accepts but `slice::sort_by` may answer with a panic.
pub(crate) fn merge_sort_by<T>(
    mut v: Vec<T>,
    cmp: &dyn Fn(&T, &T) -> std::cmp::Ordering,
) -> Vec<T> {
    if v.len() <= 1 {
        return v;
    }
    let right = v.split_off(v.len() / 2);
    let (left, right) = (merge_sort_by(v, cmp), merge_sort_by(right, cmp));
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut left, mut right) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_right = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => cmp(r, l) == std::cmp::Ordering::Less,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => break,
        };
        out.extend(if take_right {
            right.next()
        } else {
            left.next()
        });
    }
    out
}

/// go-yaml v2's key order (`keyList.Less`): digit runs compare as numbers, letters sort
/// after other characters at the first difference.
pub(crate) fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let less = |x: &[char], y: &[char]| -> bool {
        let mut i = 0;
        while i < x.len() && i < y.len() {
            if x[i] == y[i] {
                i += 1;
                continue;
            }
            let al = x[i].is_alphabetic();
            let bl = y[i].is_alphabetic();
            if al && bl {
                return x[i] < y[i];
            }
            if al || bl {
                return bl;
            }
            let (mut an, mut bn): (i64, i64) = (0, 0);
            if x[i] == '0' || y[i] == '0' {
                let mut j = i;
                while j > 0 && x[j - 1].is_ascii_digit() {
                    j -= 1;
                    if x[j] != '0' {
                        an = 1;
                        bn = 1;
                        break;
                    }
                }
            }
            let mut ai = i;
            while ai < x.len() && x[ai].is_ascii_digit() {
                an = an
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(x[ai] as u8 - b'0'));
                ai += 1;
            }
            let mut bi = i;
            while bi < y.len() && y[bi].is_ascii_digit() {
                bn = bn
                    .wrapping_mul(10)
                    .wrapping_add(i64::from(y[bi] as u8 - b'0'));
                bi += 1;
            }
            if an != bn {
                return an < bn;
            }
            if ai != bi {
                return ai < bi;
            }
            return x[i] < y[i];
        }
        x.len() < y.len()
    };
    if less(&ar, &br) {
        Ordering::Less
    } else if less(&br, &ar) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// Longest key, in bytes, that go-yaml writes as a simple key.
const MAX_SIMPLE_KEY: usize = 128;

#[derive(Clone, Copy, PartialEq)]
enum Ctx {
    Root,
    MapValue,
    SeqItem,
}

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// Emitter state as libyaml keeps it: the column, and whether the last character written was
/// white space or indentation.
struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
}

const BEST_WIDTH: usize = 80;
const BEST_INDENT: isize = 2;

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0a
        || (0x20..=0x7e).contains(&u)
        || u == 0x85
        || (0xa0..=0xd7ff).contains(&u)
        || ((0xe000..=0xfffd).contains(&u) && u != 0xfeff)
        || (0x10000..=0x10ffff).contains(&u)
}

/// What libyaml's `analyze_scalar` allows for a string.
struct Analysis {
    multiline: bool,
    block_plain: bool,
    single_quoted: bool,
    block: bool,
}

fn analyze(value: &str) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            block_plain: true,
            single_quoted: true,
            block: false,
        };
    }
    let chars: Vec<char> = value.chars().collect();
    let (mut block_ind, mut special) = (false, false);
    let (mut line_breaks, mut leading_space, mut leading_break) = (false, false, false);
    let (mut trailing_space, mut trailing_break, mut break_space, mut space_break) =
        (false, false, false, false);
    let (mut prev_space, mut prev_break) = (false, false);
    if value.starts_with("---") || value.starts_with("...") {
        block_ind = true;
    }
    let mut preceded_by_ws = true;
    let n = chars.len();
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_ws = i + 1 >= n || matches!(chars[i + 1], ' ' | '\t');
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => {
                    block_ind = true;
                }
                '?' | ':' | '-' if followed_by_ws => block_ind = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_ws => block_ind = true,
                '#' if preceded_by_ws => block_ind = true,
                _ => {}
            }
        }
        if !is_printable(c) {
            special = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i + 1 == n {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(c) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + 1 == n {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_space = false;
            prev_break = true;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_by_ws = matches!(c, ' ' | '\t') || is_break(c);
    }
    let mut a = Analysis {
        multiline: line_breaks,
        block_plain: true,
        single_quoted: true,
        block: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.block_plain = false;
    }
    if trailing_space {
        a.block = false;
    }
    if break_space {
        a.block_plain = false;
        a.single_quoted = false;
    }
    if space_break || special {
        a.block_plain = false;
        a.single_quoted = false;
        a.block = false;
    }
    if line_breaks || block_ind {
        a.block_plain = false;
    }
    a
}

impl Emitter {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// go-yaml's `write_break`: a `\n` is written as a line break, any other break character
    /// (`\r`, NEL, LS, PS) as itself.
    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_indent(&mut self, indent: isize) {
        let indent = indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(&mut self, ind: &str, need_ws: bool, is_ws: bool, is_indention: bool) {
        if need_ws && !self.whitespace {
            self.put(' ');
        }
        for c in ind.chars() {
            self.put(c);
        }
        self.whitespace = is_ws;
        self.indention = self.indention && is_indention;
    }

    fn node(&mut self, node: &Node, parent_indent: isize, ctx: Ctx) {
        match node {
            Node::Null => self.scalar("null", Style::Plain, parent_indent, false),
            Node::Bool(b) => self.scalar(
                if *b { "true" } else { "false" },
                Style::Plain,
                parent_indent,
                false,
            ),
            Node::Number(n) => self.scalar(n, Style::Plain, parent_indent, false),
            Node::Str(s) => {
                let style = string_style(s);
                self.scalar(s, style, parent_indent, false);
            }
            Node::Seq(items) if items.is_empty() => self.write_indicator("[]", true, false, false),
            Node::Map(entries) if entries.is_empty() => {
                self.write_indicator("{}", true, false, false)
            }
            Node::Seq(items) => {
                // Sequences inside mappings are not indented (go-yaml v2's indentless style).
                let indentless = ctx == Ctx::MapValue && !self.indention;
                let indent = if parent_indent < 0 {
                    0
                } else if indentless {
                    parent_indent
                } else {
                    parent_indent + BEST_INDENT
                };
                for item in items {
                    self.write_indent(indent);
                    self.write_indicator("-", true, false, true);
                    self.node(item, indent, Ctx::SeqItem);
                }
            }
            Node::Map(entries) => {
                let indent = if parent_indent < 0 {
                    0
                } else {
                    parent_indent + BEST_INDENT
                };
                for (k, v) in entries {
                    self.write_indent(indent);
                    let style = string_style(k);
                    // go-yaml's `check_simple_key`: a key spanning lines or longer than 128
                    // bytes is written as a complex key (`? key` then `: value`).
                    if !analyze(k).multiline && k.len() <= MAX_SIMPLE_KEY {
                        self.scalar(k, style, indent, true);
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, true);
                        self.scalar(k, style, indent, false);
                        self.write_indent(indent);
                        self.write_indicator(":", true, false, true);
                    }
                    self.node(v, indent, Ctx::MapValue);
                }
            }
        }
    }

    /// Emits a scalar; `parent_indent` is the indentation of the enclosing collection.
    fn scalar(&mut self, value: &str, requested: Style, parent_indent: isize, simple_key: bool) {
        let a = analyze(value);
        let mut style = requested;
        if simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain && (!a.block_plain || (value.is_empty() && simple_key)) {
            style = Style::Single;
        }
        if style == Style::Single && !a.single_quoted {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block || simple_key) {
            style = Style::Double;
        }
        let indent = if parent_indent < 0 {
            BEST_INDENT
        } else {
            parent_indent + BEST_INDENT
        };
        let allow_breaks = !simple_key;
        match style {
            Style::Plain => self.write_plain(value, indent, allow_breaks),
            Style::Single => self.write_single(value, indent, allow_breaks),
            Style::Double => self.write_double(value, indent, allow_breaks),
            Style::Literal => self.write_literal(value, indent),
        }
    }

    fn write_plain(&mut self, value: &str, indent: isize, allow_breaks: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent(indent);
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_single(&mut self, value: &str, indent: isize, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        let mut breaks = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i + 1 < chars.len()
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent(indent);
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent(indent);
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        if breaks {
            self.write_indent(indent);
        }
        self.write_indicator("'", false, false, false);
    }

    fn write_double(&mut self, value: &str, indent: isize, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable(c) || c == '\u{feff}' || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                let short = match c {
                    '\0' => Some('0'),
                    '\u{7}' => Some('a'),
                    '\u{8}' => Some('b'),
                    '\t' => Some('t'),
                    '\n' => Some('n'),
                    '\u{b}' => Some('v'),
                    '\u{c}' => Some('f'),
                    '\r' => Some('r'),
                    '\u{1b}' => Some('e'),
                    '"' => Some('"'),
                    '\\' => Some('\\'),
                    '\u{85}' => Some('N'),
                    '\u{a0}' => Some('_'),
                    '\u{2028}' => Some('L'),
                    '\u{2029}' => Some('P'),
                    _ => None,
                };
                match short {
                    Some(s) => self.put(s),
                    None => {
                        let u = c as u32;
                        let text = if u <= 0xff {
                            format!("x{u:02X}")
                        } else if u <= 0xffff {
                            format!("u{u:04X}")
                        } else {
                            format!("U{u:08X}")
                        };
                        for t in text.chars() {
                            self.put(t);
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i + 1 != chars.len()
                {
                    self.write_indent(indent);
                    if chars.get(i + 1) == Some(&' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
    }

    fn write_literal(&mut self, value: &str, indent: isize) {
        self.write_indicator("|", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        if chars.first().is_some_and(|c| *c == ' ' || is_break(*c)) {
            self.put(char::from(b'0' + BEST_INDENT as u8));
        }
        let last = chars.len() - 1;
        if !is_break(chars[last]) {
            self.put('-');
        } else if last == 0 || is_break(chars[last - 1]) {
            self.put('+');
        }
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for &c in &chars {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent(indent);
                    breaks = false;
                }
                self.put(c);
                self.indention = false;
            }
        }
    }
}

/// The style go-yaml v2's encoder asks for a string: quoted when a plain scalar would read back
/// as something else, literal when it spans lines.
fn string_style(s: &str) -> Style {
    if resolve(s) != Resolved::Str || is_base60_float(s) || (s.len() >= 5 && is_timestamp(s)) {
        return Style::Double;
    }
    if s.contains('\n') {
        return Style::Literal;
    }
    Style::Plain
}
