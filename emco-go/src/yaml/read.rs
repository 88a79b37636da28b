//! Reading YAML as `sigs.k8s.io/yaml` does over go-yaml v2: YAML 1.1 scalars (`yes`/`on` are
//! booleans, `0744` is the octal 484), duplicate keys with the last one winning, merge keys,
//! anchors, and non-string keys turned into JSON object keys. The event parser is
//! `saphyr-parser`; the typing of scalars is done here.

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Number, Value};

use super::{Error, Rules};
use crate::strconv::{format_float_g, parse_int_base0};

/// Deepest nesting of collections accepted in a YAML document.
const MAX_DEPTH: usize = 512;
/// Most nodes that aliases may expand a document to (a "billion laughs" guard).
const MAX_NODES: usize = 5_000_000;

/// The documents of a YAML stream as JSON, each with the line (from 1) it starts on. An empty
/// document is `null`.
pub(super) fn documents(text: &str, rules: Rules) -> Result<Vec<(usize, Value)>, Error> {
    match read_documents(text, rules) {
        Err(e) if e.message.starts_with("tabs disallowed") => {
            read_documents(&indent_flow_lines(text), rules).map_err(|_| e)
        }
        other => other,
    }
}

fn read_documents(text: &str, rules: Rules) -> Result<Vec<(usize, Value)>, Error> {
    let mut b = Builder {
        parser: Parser::new_from_str(text),
        anchors: BTreeMap::new(),
        nodes: 0,
        rules,
    };
    let mut out = Vec::new();
    loop {
        let (ev, line) = b.next()?;
        match ev {
            Event::StreamStart | Event::Nothing | Event::DocumentEnd => {}
            Event::StreamEnd => return Ok(out),
            Event::DocumentStart(_) => {
                let (ev, l) = b.next()?;
                if let Event::DocumentEnd | Event::StreamEnd = ev {
                    out.push((line, Value::Null));
                    if let Event::StreamEnd = ev {
                        return Ok(out);
                    }
                    continue;
                }
                b.anchors.clear();
                out.push((l, b.node(ev, l, 0)?));
            }
            other => {
                b.anchors.clear();
                out.push((line, b.node(other, line, 0)?));
            }
        }
    }
}

/// go-yaml ignores how the lines inside a flow collection are indented, tabs included; the YAML
/// 1.2 parser refuses tabs there when the collection sits in an indented block (EMCO's gac
/// example files write JSON patches that way). Called after that refusal: every line that
/// starts inside a flow collection gets its leading white space replaced by spaces, indented
/// past the line the collection opened on. Leading white space inside a flow collection means
/// nothing to go-yaml (line folding drops it even in quoted scalars), so the document reads the
/// same.
fn indent_flow_lines(text: &str) -> String {
    #[derive(Clone, Copy, PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut out = String::with_capacity(text.len() + 64);
    let (mut depth, mut quote) = (0usize, Quote::None);
    // Indentation of the line the outermost open flow collection started on.
    let mut opener_indent = 0usize;
    // Indentation of the line that introduced a block scalar being skipped.
    let mut block_scalar: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.trim_start_matches([' ', '\t']);
        let indent = line.len() - body.len();
        let blank = body.trim().is_empty();
        if let Some(parent) = block_scalar {
            if blank || indent > parent {
                out.push_str(line);
                continue;
            }
            block_scalar = None;
        }
        if depth > 0 || quote != Quote::None {
            out.push_str(&" ".repeat(opener_indent + 1));
            out.push_str(body);
        } else {
            out.push_str(line);
        }
        let mut prev = ' ';
        let mut chars = body.chars().peekable();
        while let Some(c) = chars.next() {
            match quote {
                Quote::Double => match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => quote = Quote::None,
                    _ => {}
                },
                Quote::Single if c == '\'' => {
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                    } else {
                        quote = Quote::None;
                    }
                }
                Quote::Single => {}
                Quote::None => {
                    let token_start =
                        prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':' | '-' | '?');
                    match c {
                        '#' if prev.is_whitespace() => break,
                        '"' if token_start => quote = Quote::Double,
                        '\'' if token_start => quote = Quote::Single,
                        '[' | '{' if depth > 0 || token_start => {
                            if depth == 0 {
                                opener_indent = indent;
                            }
                            depth += 1;
                        }
                        ']' | '}' if depth > 0 => depth -= 1,
                        _ => {}
                    }
                }
            }
            prev = c;
        }
        if depth == 0 && quote == Quote::None {
            let content = body.split(" #").next().unwrap_or(body).trim_end();
            let last = content.rsplit([' ', '\t']).next().unwrap_or("");
            if last.starts_with(['|', '>'])
                && last[1..]
                    .chars()
                    .all(|c| matches!(c, '+' | '-' | '0'..='9'))
            {
                block_scalar = Some(indent);
            }
        }
    }
    out
}

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: BTreeMap<usize, Value>,
    nodes: usize,
    rules: Rules,
}

fn err(line: usize, msg: impl std::fmt::Display) -> Error {
    Error::at(line, msg.to_string())
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, usize), Error> {
        match self.parser.next_event() {
            Some(Ok((ev, span))) => Ok((ev, span.start.line())),
            Some(Err(e)) => Err(err(e.marker().line(), e.info())),
            None => Ok((Event::StreamEnd, 0)),
        }
    }

    fn count(&mut self, n: usize, line: usize) -> Result<(), Error> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(err(line, "document expands to too many nodes"));
        }
        Ok(())
    }

    fn node(&mut self, ev: Event<'a>, line: usize, depth: usize) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err(err(line, format!("exceeded max depth of {MAX_DEPTH}")));
        }
        self.count(1, line)?;
        match ev {
            Event::Alias(id) => {
                let v = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| err(line, "unknown anchor"))?;
                self.count(node_count(&v), line)?;
                Ok(v)
            }
            Event::Scalar(text, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                let v = scalar(&text, style, tag.as_deref(), line, self.rules)?;
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
                let v = Value::Array(items);
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            Event::MappingStart(anchor, _) => {
                let mut map = Map::new();
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
                        merge_key(&mut map, value, l)?;
                        continue;
                    }
                    map.insert(key_string(&key, l)?, value);
                }
                let v = Value::Object(map);
                if anchor > 0 {
                    self.anchors.insert(anchor, v.clone());
                }
                Ok(v)
            }
            other => Err(err(line, format!("unexpected event {other:?}"))),
        }
    }
}

fn node_count(v: &Value) -> usize {
    match v {
        Value::Array(l) => 1 + l.iter().map(node_count).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(node_count).sum::<usize>(),
        _ => 1,
    }
}

/// go-yaml v2's `<<`: a mapping, or a sequence of mappings, whose keys are set into `map`.
fn merge_key(map: &mut Map<String, Value>, value: Value, line: usize) -> Result<(), Error> {
    let bad = || {
        err(
            line,
            "map merge requires map or sequence of maps as the value",
        )
    };
    match value {
        Value::Object(m) => {
            map.extend(m);
            Ok(())
        }
        Value::Array(l) => {
            for item in l.into_iter().rev() {
                let Value::Object(m) = item else {
                    return Err(bad());
                };
                map.extend(m);
            }
            Ok(())
        }
        _ => Err(bad()),
    }
}

/// A key as `sigs.k8s.io/yaml` turns it into a JSON object key.
fn key_string(key: &Value, line: usize) -> Result<String, Error> {
    match key {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            // As `strconv.FormatFloat(k, 'g', -1, 32)`: the shortest float32 digits.
            (None, None, Some(f)) => {
                format_float_g(format!("{:e}", f as f32).parse().unwrap_or(f), None)
            }
            _ => n.to_string(),
        }),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Ok("null".to_owned()),
        other => Err(err(line, format!("invalid map key: {other}"))),
    }
}

/// Types a scalar like go-yaml (`rules`) does; numbers keep being integers or floats, as in JSON.
fn scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&str>,
    line: usize,
    rules: Rules,
) -> Result<Value, Error> {
    let resolved = match (style, tag) {
        (_, Some("tag:yaml.org,2002:str" | "!")) => Resolved::Str,
        (_, Some("tag:yaml.org,2002:binary")) => {
            use base64::Engine as _;
            let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean)
                .map_err(|_| err(line, "!!binary value contains invalid base64 data"))?;
            return Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        }
        (ScalarStyle::Plain, _) | (_, Some(_)) => match resolve(text) {
            // YAML 1.2's core schema: only true and false are booleans.
            Resolved::Bool(_) if rules == Rules::GoYamlV3 && !is_core_bool(text) => Resolved::Str,
            r => r,
        },
        _ => Resolved::Str,
    };
    let checked = |want: &str, ok: bool| -> Result<(), Error> {
        if ok {
            Ok(())
        } else {
            Err(err(
                line,
                format!("cannot decode !!str `{text}` as a {want}"),
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
        Resolved::Null => Ok(Value::Null),
        Resolved::Bool(b) => Ok(Value::Bool(b)),
        Resolved::Int(i) => Ok(Value::Number(i.into())),
        Resolved::Uint(u) => Ok(Value::Number(u.into())),
        Resolved::Float(f) => Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            Error::json(format!(
                "json: unsupported value: {}",
                format_float_g(f, None)
            ))
        }),
        Resolved::Str => Ok(Value::String(text.to_owned())),
    }
}

/// Whether a boolean of YAML 1.1 is one of YAML 1.2 too (go-yaml v3's).
fn is_core_bool(s: &str) -> bool {
    matches!(s, "true" | "True" | "TRUE" | "false" | "False" | "FALSE")
}

/// The type a plain scalar resolves to under go-yaml v2's rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str,
}

pub(super) fn resolve(s: &str) -> Resolved {
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
            if let Some(i) = parse_int_base0(&plain) {
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
pub(super) fn is_timestamp(s: &str) -> bool {
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
pub(super) fn is_base60_float(s: &str) -> bool {
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
