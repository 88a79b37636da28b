//! YAML as Helm reads and writes it.
//!
//! Reading follows `sigs.k8s.io/yaml` over go-yaml v2: YAML 1.1 scalars (`yes`/`on` are
//! booleans, `0777` is octal), duplicate keys accepted with the last one winning, merge keys,
//! and every number turned into a float64 by the JSON round trip. The event parser is
//! `saphyr-parser`; the typing of scalars is done here.
//!
//! Writing follows `sigs.k8s.io/yaml.Marshal`: a JSON round trip, then go-yaml v2's emitter:
//! keys sorted with its natural order, 2-space indentation, sequences not indented inside
//! mappings, strings quoted only where a plain scalar would read back differently, literal
//! blocks for multi-line strings, and plain or quoted scalars folded at 80 columns.

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::gofmt::{format_float_g, format_float_json};
use crate::value::{Map, Value};

/// Deepest nesting of collections accepted in a YAML document.
const MAX_DEPTH: usize = 512;
/// Most nodes that aliases may expand a document to (a "billion laughs" guard).
const MAX_NODES: usize = 5_000_000;

/// Parses the first document of `text` as Helm parses values files and `fromYaml` input.
/// An empty document is `Nil`.
///
/// # Errors
/// `error converting YAML to JSON: yaml: line N: ...` for malformed YAML or a value JSON
/// cannot hold.
pub fn parse_values_document(text: &str) -> Result<Value, String> {
    let mut b = Builder {
        parser: Parser::new_from_str(text),
        anchors: BTreeMap::new(),
        nodes: 0,
    };
    b.document()
        .map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: BTreeMap<usize, Value>,
    nodes: usize,
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, usize), String> {
        match self.parser.next_event() {
            Some(Ok((ev, span))) => Ok((ev, span.start.line())),
            Some(Err(e)) => Err(format!("line {}: {}", e.marker().line(), e.info())),
            None => Ok((Event::StreamEnd, 0)),
        }
    }

    fn document(&mut self) -> Result<Value, String> {
        loop {
            let (ev, line) = self.next()?;
            match ev {
                Event::StreamStart | Event::Nothing => {}
                Event::DocumentStart(_) => {
                    let (ev, line) = self.next()?;
                    if let Event::DocumentEnd | Event::StreamEnd = ev {
                        return Ok(Value::Nil);
                    }
                    return self.node(ev, line, 0);
                }
                Event::StreamEnd => return Ok(Value::Nil),
                other => return self.node(other, line, 0),
            }
        }
    }

    fn count(&mut self, n: usize) -> Result<(), String> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err("document expands to too many nodes".to_owned());
        }
        Ok(())
    }

    fn node(&mut self, ev: Event<'a>, line: usize, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("line {line}: exceeded max depth of {MAX_DEPTH}"));
        }
        self.count(1)?;
        match ev {
            Event::Alias(id) => {
                let v = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| format!("line {line}: unknown anchor"))?;
                self.count(node_count(&v))?;
                Ok(v.deep_copy())
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                let v = scalar(&text, style, tag.as_deref(), line)?;
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let (ev, l) = self.next()?;
                    if let Event::SequenceEnd = ev {
                        break;
                    }
                    items.push(self.node(ev, l, depth + 1)?);
                }
                let v = Value::list(items);
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            Event::MappingStart(anchor, _) => {
                let map = Map::default();
                loop {
                    let (ev, l) = self.next()?;
                    if let Event::MappingEnd = ev {
                        break;
                    }
                    let is_merge =
                        matches!(&ev, Event::Scalar(t, ScalarStyle::Plain, _, None) if t == "<<");
                    let key = self.node(ev, l, depth + 1)?;
                    let (vev, vl) = self.next()?;
                    let value = self.node(vev, vl, depth + 1)?;
                    if is_merge {
                        merge_key(&map, &value, l)?;
                        continue;
                    }
                    map.insert(key_string(&key, l)?, value);
                }
                let v = Value::Map(map);
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            other => Err(format!("line {line}: unexpected event {other:?}")),
        }
    }
}

fn node_count(v: &Value) -> usize {
    match v {
        Value::List(l) => 1 + l.iter().map(node_count).sum::<usize>(),
        Value::Map(m) => 1 + m.snapshot().values().map(node_count).sum::<usize>(),
        _ => 1,
    }
}

/// go-yaml v2's `<<`: a mapping, or a sequence of mappings, whose keys are set into `map`.
fn merge_key(map: &Map, value: &Value, line: usize) -> Result<(), String> {
    let bad = || format!("line {line}: map merge requires map or sequence of maps as the value");
    match value {
        Value::Map(m) => {
            for (k, v) in m.snapshot() {
                map.insert(k, v);
            }
            Ok(())
        }
        Value::List(l) => {
            for item in l.iter().rev() {
                let Value::Map(m) = item else {
                    return Err(bad());
                };
                for (k, v) in m.snapshot() {
                    map.insert(k, v);
                }
            }
            Ok(())
        }
        _ => Err(bad()),
    }
}

/// A key as `sigs.k8s.io/yaml` turns it into a JSON object key.
fn key_string(key: &Value, line: usize) -> Result<String, String> {
    match key {
        Value::String(s) => Ok(s.clone()),
        Value::Float(f) => Ok(format_float_g(*f, None)),
        Value::Int(i) | Value::Int64(i) => Ok(i.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Nil => Ok("null".to_owned()),
        _ => Err(format!(
            "line {line}: invalid map key: {}",
            key.to_go_string()
        )),
    }
}

/// Types a scalar like go-yaml v2 does, then turns numbers into float64 like the JSON round trip.
fn scalar(text: &str, style: ScalarStyle, tag: Option<&str>, line: usize) -> Result<Value, String> {
    let resolved = match (style, tag) {
        (_, Some("tag:yaml.org,2002:str" | "!")) => Resolved::Str,
        (_, Some("tag:yaml.org,2002:binary")) => {
            use base64::Engine as _;
            let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean)
                .map_err(|_| format!("line {line}: !!binary value contains invalid base64 data"))?;
            return Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        }
        (ScalarStyle::Plain, _) | (_, Some(_)) => resolve(text),
        _ => Resolved::Str,
    };
    let checked = |want: &str, ok: bool| -> Result<(), String> {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "line {line}: cannot decode !!str `{text}` as a {want}"
            ))
        }
    };
    match tag {
        Some("tag:yaml.org,2002:int") => checked(
            "!!int",
            matches!(resolved, Resolved::Int(_) | Resolved::Uint(_)),
        )?,
        Some("tag:yaml.org,2002:float") => {
            checked(
                "!!float",
                matches!(
                    resolved,
                    Resolved::Int(_) | Resolved::Uint(_) | Resolved::Float(_)
                ),
            )?;
        }
        Some("tag:yaml.org,2002:bool") => checked("!!bool", matches!(resolved, Resolved::Bool(_)))?,
        Some("tag:yaml.org,2002:null") => checked("!!null", matches!(resolved, Resolved::Null))?,
        _ => {}
    }
    match resolved {
        Resolved::Null => Ok(Value::Nil),
        Resolved::Bool(b) => Ok(Value::Bool(b)),
        Resolved::Int(i) => Ok(Value::Float(i as f64)),
        Resolved::Uint(u) => Ok(Value::Float(u as f64)),
        Resolved::Float(f) if f.is_finite() => Ok(Value::Float(f)),
        Resolved::Float(f) => Err(format!(
            "json: unsupported value: {}",
            format_float_g(f, None)
        )),
        Resolved::Str => Ok(Value::String(text.to_owned())),
    }
}

/// The type a plain scalar resolves to under go-yaml v2's rules.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str,
}

fn resolve(s: &str) -> Resolved {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
            return Resolved::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False" | "FALSE" => {
            return Resolved::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let Some(first) = s.bytes().next() else {
        return Resolved::Null;
    };
    match first {
        b'.' => s.parse::<f64>().map_or(Resolved::Str, Resolved::Float),
        b'0'..=b'9' | b'+' | b'-' => {
            if is_timestamp(s) {
                // go-yaml v2 leaves timestamps as strings when decoding into interface{}, but
                // they do not read back as plain strings, so the encoder must quote them.
                return Resolved::Str;
            }
            let plain = s.replace('_', "");
            if let Some(i) = crate::funcs::parse_int_base0_pub(&plain) {
                return Resolved::Int(i);
            }
            if let Some(u) = parse_uint_base0(&plain) {
                return Resolved::Uint(u);
            }
            if let Some(f) = Some(&plain)
                .filter(|p| yaml_style_float(p))
                .and_then(|p| p.parse::<f64>().ok())
            {
                return Resolved::Float(f);
            }
            if let Some(i) = plain
                .strip_prefix("0b")
                .and_then(|b| i64::from_str_radix(b, 2).ok())
            {
                return Resolved::Int(i);
            }
            if let Some(i) = plain
                .strip_prefix("-0b")
                .and_then(|b| i64::from_str_radix(b, 2).ok())
            {
                return Resolved::Int(-i);
            }
            Resolved::Str
        }
        _ => Resolved::Str,
    }
}

fn parse_uint_base0(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    if let Some(d) = lower.strip_prefix("0x") {
        u64::from_str_radix(d, 16).ok()
    } else if let Some(d) = lower.strip_prefix("0o") {
        u64::from_str_radix(d, 8).ok()
    } else if lower.len() > 1 && lower.starts_with('0') {
        u64::from_str_radix(&lower[1..], 8).ok()
    } else {
        lower.parse().ok()
    }
}

/// go-yaml v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// go-yaml v2's `parseTimestamp` formats: `2006-1-2`, with a time part `T15:4:5[.9][Z07:00]`,
/// `t...`, or ` 15:4:5[.9]`.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let num = |i: &mut usize, max: usize| -> Option<u32> {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() && *i - start < max {
            *i += 1;
        }
        if *i == start {
            None
        } else {
            s[start..*i].parse().ok()
        }
    };
    let mut i = 5;
    let Some(month) = num(&mut i, 2) else {
        return false;
    };
    if b.get(i) != Some(&b'-') {
        return false;
    }
    i += 1;
    let Some(day) = num(&mut i, 2) else {
        return false;
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let zone_allowed = match b[i] {
        b'T' | b't' => true,
        b' ' => false,
        _ => return false,
    };
    i += 1;
    let time_ok = |i: &mut usize| -> bool {
        let Some(h) = num(i, 2) else { return false };
        if b.get(*i) != Some(&b':') {
            return false;
        }
        *i += 1;
        let Some(m) = num(i, 2) else { return false };
        if b.get(*i) != Some(&b':') {
            return false;
        }
        *i += 1;
        let Some(sec) = num(i, 2) else { return false };
        if b.get(*i) == Some(&b'.') {
            *i += 1;
            if num(i, 9).is_none() {
                return false;
            }
        }
        h < 24 && m < 60 && sec < 60
    };
    if !time_ok(&mut i) {
        return false;
    }
    if i == b.len() {
        return true;
    }
    if !zone_allowed {
        return false;
    }
    match &s[i..] {
        "Z" => true,
        z => {
            let zb = z.as_bytes();
            zb.len() == 6
                && matches!(zb[0], b'+' | b'-')
                && zb[1..3].iter().all(u8::is_ascii_digit)
                && zb[3] == b':'
                && zb[4..6].iter().all(u8::is_ascii_digit)
        }
    }
}

/// go-yaml v2's `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 2 {
            i += 1;
        }
        let g = &s[start..i];
        let ok = match g.len() {
            1 => true,
            2 => g.as_bytes()[0] <= b'5',
            _ => false,
        };
        if !ok {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

// ---------------------------------------------------------------------------------------------
// Emitting

/// `sigs.k8s.io/yaml.Marshal`: the YAML text, ending in a newline.
///
/// # Errors
/// `json: unsupported value: NaN` and the like, as the JSON step of the round trip reports them.
pub fn to_yaml(v: &Value) -> Result<String, String> {
    let node = Node::from_value(v, 0)?;
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
    };
    e.node(&node, -1, Ctx::Root);
    if !e.out.ends_with('\n') {
        e.out.push('\n');
    }
    Ok(e.out)
}

/// A value after the JSON round trip, as go-yaml v2 sees it.
enum Node {
    Null,
    Bool(bool),
    /// An integer or float already in its final text.
    Number(String),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    fn from_value(v: &Value, depth: usize) -> Result<Node, String> {
        if depth > crate::value::MAX_NESTING {
            return Err(format!(
                "json: unsupported value: encountered a cycle via {}",
                v.type_name()
            ));
        }
        Ok(match v {
            Value::Nil => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Int(i) | Value::Int64(i) => Node::Number(i.to_string()),
            Value::Float(f) => {
                if !f.is_finite() {
                    return Err(format!(
                        "json: unsupported value: {}",
                        format_float_g(*f, None)
                    ));
                }
                let text = format_float_json(*f);
                if text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok() {
                    Node::Number(text)
                } else {
                    let parsed: f64 = text.parse().unwrap_or(*f);
                    Node::Number(format_float_g(parsed, None))
                }
            }
            Value::String(s) => Node::Str(s.clone()),
            Value::Object(o) => match o.struct_fields() {
                Some(fields) => {
                    Node::from_value(&Value::map(fields.into_iter().collect()), depth + 1)?
                }
                None => Node::Str(o.json_text().unwrap_or_else(|| o.display())),
            },
            Value::List(l) => Node::Seq(
                l.iter()
                    .map(|e| Node::from_value(e, depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Map(m) => {
                let entries: Vec<(String, Node)> = m
                    .snapshot()
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), Node::from_value(v, depth + 1)?)))
                    .collect::<Result<_, String>>()?;
                Node::Map(merge_sort_by(entries, &|a, b| key_order(&a.0, &b.0)))
            }
        })
    }
}

/// A stable merge sort that tolerates an inconsistent comparator: go-yaml's `keyList.Less`
/// is not a total order (digit runs that overflow `int` wrap, as in Go), which Go's
/// `sort.Sort` accepts but `slice::sort_by` may answer with a panic.
fn merge_sort_by<T>(mut v: Vec<T>, cmp: &dyn Fn(&T, &T) -> std::cmp::Ordering) -> Vec<T> {
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
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
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

#[cfg(test)]
mod tests;
