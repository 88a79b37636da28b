//! Helm's `toToml`: a dict encoded like `github.com/BurntSushi/toml`'s encoder.
//!
//! That encoder writes a table's plain keys before its sub-tables, each group sorted, indents
//! nested tables by two spaces per level, writes maps inside arrays as inline tables, and skips
//! nil values. Helm prints the encoder's error text instead of failing.

use std::fmt::Write as _;

use super::{Param, Registry, func};
use crate::value::Value;

/// What the encoder makes of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Table,
    TableArray,
    Skip,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Nil => Kind::Skip,
        Value::Map(_) => Kind::Table,
        Value::List(l) if matches!(l.first(), Some(Value::Map(_))) => Kind::TableArray,
        _ => Kind::Plain,
    }
}

/// A key part bare when TOML allows it, else as a basic string.
fn key_part(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.to_owned()
    } else {
        quoted(k)
    }
}

fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c < ' ' || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Encoder {
    out: String,
}

impl Encoder {
    fn newline(&mut self) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
    }

    fn indent(&mut self, path: &[String]) {
        for _ in 1..path.len() {
            self.out.push_str("  ");
        }
    }

    fn header(path: &[String]) -> String {
        path.iter()
            .map(|k| key_part(k))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// A value under `path` (empty at the top).
    fn encode(&mut self, path: &[String], v: &Value) -> Result<(), String> {
        match kind(v) {
            Kind::Skip => Ok(()),
            Kind::Table => self.table(path, v),
            Kind::TableArray => self.table_array(path, v),
            Kind::Plain => {
                let Some(last) = path.last() else {
                    return Err("toml: top-level values must be Go maps or structs".to_owned());
                };
                self.indent(path);
                self.out.push_str(&key_part(last));
                self.out.push_str(" = ");
                self.element(path, v)?;
                self.newline();
                Ok(())
            }
        }
    }

    fn table(&mut self, path: &[String], v: &Value) -> Result<(), String> {
        if path.len() == 1 {
            // An extra newline between top-level tables.
            self.newline();
        }
        if !path.is_empty() {
            self.indent(path);
            let _ = write!(self.out, "[{}]", Self::header(path));
            self.newline();
        }
        self.body(path, v)
    }

    fn table_array(&mut self, path: &[String], v: &Value) -> Result<(), String> {
        if path.is_empty() {
            return Err("toml: top-level values must be Go maps or structs".to_owned());
        }
        let Value::List(items) = v else {
            return Ok(());
        };
        for item in items.iter() {
            if item.is_nil() {
                continue;
            }
            self.newline();
            self.indent(path);
            let _ = write!(self.out, "[[{}]]", Self::header(path));
            self.newline();
            self.body(path, item)?;
        }
        Ok(())
    }

    /// The keys of a table: plain ones first, then sub-tables.
    fn body(&mut self, path: &[String], v: &Value) -> Result<(), String> {
        let Value::Map(m) = v else {
            return Err(format!(
                "toml: cannot encode a {} inside an array of tables",
                v.type_name()
            ));
        };
        let entries = m.snapshot();
        let (plain, sub): (Vec<_>, Vec<_>) = entries
            .iter()
            .partition(|(_, v)| !matches!(kind(v), Kind::Table | Kind::TableArray));
        for (k, v) in plain.into_iter().chain(sub) {
            let mut child = path.to_vec();
            child.push(k.clone());
            self.encode(&child, v)?;
        }
        Ok(())
    }

    /// A value on the right of `=` or inside an array.
    fn element(&mut self, path: &[String], v: &Value) -> Result<(), String> {
        match v {
            Value::String(s) => self.out.push_str(&quoted(s)),
            Value::Bool(b) => {
                let _ = write!(self.out, "{b}");
            }
            Value::Int(i) | Value::Int64(i) => {
                let _ = write!(self.out, "{i}");
            }
            Value::Float(f) => self.out.push_str(&float(*f)),
            Value::List(items) => {
                if items.iter().any(Value::is_nil) {
                    return Err("toml: cannot encode array with nil element".to_owned());
                }
                self.out.push('[');
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        self.out.push_str(", ");
                    }
                    self.element(path, item)?;
                }
                self.out.push(']');
            }
            Value::Map(m) => {
                // An inline table: plain keys, then tables, comma-separated.
                let entries = m.snapshot();
                let (plain, sub): (Vec<_>, Vec<_>) = entries
                    .iter()
                    .filter(|(_, v)| !v.is_nil())
                    .partition(|(_, v)| !matches!(kind(v), Kind::Table | Kind::TableArray));
                self.out.push('{');
                for (n, (k, v)) in plain.into_iter().chain(sub).enumerate() {
                    if n > 0 {
                        self.out.push_str(", ");
                    }
                    self.out.push_str(&key_part(k));
                    self.out.push_str(" = ");
                    self.element(path, v)?;
                }
                self.out.push('}');
            }
            Value::Nil | Value::Object(_) => {
                return Err(format!(
                    "toml: unsupported type for key '{}': {}",
                    Self::header(path),
                    v.type_name()
                ));
            }
        }
        Ok(())
    }
}

/// `strconv.FormatFloat(f, 'f', -1, 64)` with `.0` added to whole numbers.
fn float(f: f64) -> String {
    if f.is_nan() {
        "nan".to_owned()
    } else if f.is_infinite() {
        if f < 0.0 { "-inf" } else { "+inf" }.to_owned()
    } else {
        // Rust's `Display` is the shortest round-trip form without an exponent, like Go's.
        let s = format!("{f}");
        if s.contains('.') { s } else { format!("{s}.0") }
    }
}

/// The TOML document for `v`, or the encoder's error text.
fn to_toml(v: &Value) -> String {
    let mut enc = Encoder { out: String::new() };
    match enc.encode(&[], v) {
        Ok(()) => enc.out,
        Err(e) => e,
    }
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "toToml",
        func(&[Param::Any], None, |_, a| {
            Ok(Value::String(to_toml(&a[0])))
        }),
    );
}
