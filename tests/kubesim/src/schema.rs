//! The field types of the built-in kinds, and the three ways a real API server checks a body
//! against them:
//!
//! - decoding JSON into the Go type (create, update): Go's `encoding/json` rules, the first
//!   type error in the message (`json: cannot unmarshal string into Go struct field
//!   DeploymentSpec.spec.replicas of type int32`), unknown fields reported by path;
//! - typing a server-side apply patch (structured-merge-diff): every type error and unknown
//!   field with its field path (`.spec.template.spec.containers[name="c"].image: expected
//!   string, got ...`);
//! - converting an unstructured map into the Go type (strategic merge patch, and the second
//!   step of server-side apply): the first conversion error (`cannot convert float64 to int32`).
//!
//! The table (`data/builtin-schema.json`) is generated from the OpenAPI v3 documents of a
//! kube-apiserver v1.32 by `tools/builtin_schema.py`. Messages follow that server: see the
//! differential test in `tests/e2e/tests/differential.rs`. Where the real server iterates a Go
//! map (random order), objects are walked in key order here, one of the orders it may take.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::resources::ResourceType;

/// A field's type.
#[derive(Debug)]
enum Ty {
    String,
    Bool,
    Int32,
    Int64,
    Float64,
    /// `[]byte`: base64 text on the wire.
    Bytes,
    /// `metav1.Time`: RFC 3339 text.
    Time,
    Quantity,
    IntOrString,
    /// Anything (`RawExtension`, `JSON`, objects without declared fields).
    Any,
    /// A struct, by definition name.
    Struct(String),
    List(Box<List>),
    /// `map[string]T`.
    Map(Box<Ty>),
}

#[derive(Debug)]
struct List {
    kind: ListKind,
    keys: Vec<String>,
    /// Defaults of key fields, which fill a missing key in an element's path.
    defaults: Map<String, Value>,
    of: Ty,
}

#[derive(Debug, PartialEq)]
enum ListKind {
    Atomic,
    Set,
    Map,
}

struct Table {
    /// `apps/v1/Deployment` -> definition name.
    kinds: HashMap<String, String>,
    /// Definition name -> fields.
    types: HashMap<String, BTreeMap<String, Ty>>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let raw: Value = serde_json::from_str(include_str!("../data/builtin-schema.json"))
        .expect("the generated schema table is JSON");
    let kinds = raw["kinds"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    let types = raw["types"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, fields)| {
            let fields = fields
                .as_object()
                .into_iter()
                .flatten()
                .map(|(f, t)| (f.clone(), ty(t)))
                .collect();
            (name.clone(), fields)
        })
        .collect();
    Table { kinds, types }
});

fn ty(v: &Value) -> Ty {
    match v {
        Value::String(s) => match s.as_str() {
            "string" => Ty::String,
            "bool" => Ty::Bool,
            "int32" => Ty::Int32,
            "int64" => Ty::Int64,
            "float64" => Ty::Float64,
            "bytes" => Ty::Bytes,
            "time" => Ty::Time,
            "quantity" => Ty::Quantity,
            "int-or-string" => Ty::IntOrString,
            s => match s.strip_prefix('@') {
                Some(def) => Ty::Struct(def.to_owned()),
                None => Ty::Any,
            },
        },
        Value::Object(o) if o.contains_key("map") => Ty::Map(Box::new(ty(&o["map"]))),
        Value::Object(o) => Ty::List(Box::new(List {
            kind: match o.get("list").and_then(Value::as_str) {
                Some("set") => ListKind::Set,
                Some("map") => ListKind::Map,
                _ => ListKind::Atomic,
            },
            keys: o
                .get("keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|k| Some(k.as_str()?.to_owned()))
                .collect(),
            defaults: o
                .get("defaults")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            of: ty(&o["of"]),
        })),
        _ => Ty::Any,
    }
}

/// The schema of a built-in kind, or None for custom resources and kinds the table lacks.
pub(crate) struct Schema {
    root: &'static str,
}

impl Schema {
    pub(crate) fn of(rt: &ResourceType) -> Option<Self> {
        if rt.custom {
            return None;
        }
        let key = format!("{}/{}", rt.api_version(), rt.kind);
        TABLE.kinds.get(&key).map(|root| Self { root })
    }

    fn root(&self) -> Ty {
        Ty::Struct(self.root.to_owned())
    }

    /// The error decoding `obj` into the Go type gives, if any: an error that stops decoding
    /// (a custom unmarshaller's) wins, else the first type error, as Go's `json.Unmarshal`.
    pub(crate) fn decode_error(&self, obj: &Value) -> Option<String> {
        let mut d = Decode::default();
        let mut path = Vec::new();
        match d.walk(&self.root(), obj, "", &mut path) {
            Err(stop) => Some(stop),
            Ok(()) => d.first,
        }
    }

    /// The fields of `obj` its Go type lacks, as the real server's `unknown field` texts name
    /// them (`spec.template.spec.containers[0].bar`).
    pub(crate) fn unknown_fields(&self, obj: &Value) -> Vec<Vec<Seg>> {
        let mut out = Vec::new();
        unknown(&self.root(), obj, &mut Vec::new(), &mut out);
        out
    }

    /// The errors typing a server-side apply patch gives (structured-merge-diff), each as
    /// `path: message`.
    pub(crate) fn typed_errors(&self, obj: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        typed(&self.root(), obj, &mut String::new(), &mut errs);
        errs
    }

    /// The first error converting the unstructured `obj` into the Go type gives.
    pub(crate) fn conversion_error(&self, obj: &Value) -> Option<String> {
        convert(&self.root(), obj).err()
    }
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seg {
    Field(String),
    Index(usize),
}

/// A path as the real server's decoder names it: `a.b[0].c`.
pub(crate) fn dotted(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(f) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(f);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Removes the field at `path`, as decoding into the Go type drops unknown fields.
pub(crate) fn remove(obj: &mut Value, path: &[Seg]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for seg in parents {
        let next = match seg {
            Seg::Field(f) => cur.get_mut(f.as_str()),
            Seg::Index(i) => cur.get_mut(*i),
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let (Seg::Field(f), Some(o)) = (last, cur.as_object_mut()) {
        o.remove(f);
    }
}

fn go_type(t: &Ty) -> String {
    match t {
        Ty::String | Ty::Time => "string".into(),
        Ty::Bool => "bool".into(),
        Ty::Int32 | Ty::IntOrString => "int32".into(),
        Ty::Int64 => "int64".into(),
        Ty::Float64 => "float64".into(),
        Ty::Bytes => "[]uint8".into(),
        Ty::Quantity => "resource.Quantity".into(),
        Ty::Any => "interface {}".into(),
        Ty::Struct(def) => {
            let mut parts = def.rsplit('.');
            let name = parts.next().unwrap_or_default();
            format!("{}.{name}", parts.next().unwrap_or_default())
        }
        Ty::List(l) => format!("[]{}", go_type(&l.of)),
        Ty::Map(e) => format!("map[string]{}", go_type(e)),
    }
}

fn struct_name(def: &str) -> &str {
    def.rsplit('.').next().unwrap_or(def)
}

/// How Go's decoder names a JSON value in a type error.
fn json_kind(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Number(_) => "number".into(),
        Value::Null => "null".into(),
    }
}

fn fits(v: &Value, min: i64, max: i64) -> bool {
    v.as_i64().is_some_and(|n| (min..=max).contains(&n))
}

#[derive(Default)]
struct Decode {
    first: Option<String>,
}

impl Decode {
    fn type_error(strukt: &str, path: &[&str], value: String, ty: &str) -> String {
        format!(
            "json: cannot unmarshal {value} into Go struct field {strukt}.{} of type {ty}",
            path.join(".")
        )
    }

    fn save(&mut self, strukt: &str, path: &[&str], value: String, t: &Ty) {
        if self.first.is_none() {
            self.first = Some(Self::type_error(strukt, path, value, &go_type(t)));
        }
    }

    /// Walks `v` as Go's decoder fills `t`; `Err` is an error that stops decoding.
    fn walk<'a>(
        &mut self,
        t: &Ty,
        v: &'a Value,
        strukt: &str,
        path: &mut Vec<&'a str>,
    ) -> Result<(), String> {
        if v.is_null() {
            return Ok(());
        }
        let number = |v: &Value| format!("number {v}");
        match t {
            Ty::Any => {}
            Ty::String if !v.is_string() => self.save(strukt, path, json_kind(v), t),
            Ty::Bool if !v.is_boolean() => self.save(strukt, path, json_kind(v), t),
            Ty::Float64 if !v.is_number() => self.save(strukt, path, json_kind(v), t),
            Ty::Int32 | Ty::Int64 => {
                let ok = match t {
                    Ty::Int32 => fits(v, i32::MIN.into(), i32::MAX.into()),
                    _ => v.is_i64(),
                };
                if v.is_number() && !ok {
                    self.save(strukt, path, number(v), t);
                } else if !v.is_number() {
                    self.save(strukt, path, json_kind(v), t);
                }
            }
            Ty::Bytes => match v.as_str() {
                Some(s) => {
                    if let Err(e) = go_base64(s)
                        && self.first.is_none()
                    {
                        self.first = Some(e);
                    }
                }
                None => self.save(strukt, path, json_kind(v), t),
            },
            // Custom unmarshallers: their errors stop decoding.
            Ty::Time if !v.is_string() => {
                return Err(Self::type_error(strukt, path, json_kind(v), "string"));
            }
            Ty::IntOrString => {
                if v.is_number() && !fits(v, i32::MIN.into(), i32::MAX.into()) {
                    return Err(Self::type_error(strukt, path, number(v), "int32"));
                }
                if !v.is_number() && !v.is_string() {
                    return Err(Self::type_error(strukt, path, json_kind(v), "int32"));
                }
            }
            Ty::Quantity => quantity(v)?,
            Ty::Struct(def) => match v.as_object() {
                Some(o) => {
                    let fields = &TABLE.types[def];
                    for (k, child) in o {
                        if let Some(ft) = fields.get(k) {
                            path.push(k);
                            let r = self.walk(ft, child, struct_name(def), path);
                            path.pop();
                            r?;
                        }
                    }
                }
                None => self.save(strukt, path, json_kind(v), t),
            },
            Ty::List(l) => match v.as_array() {
                Some(items) => {
                    for item in items {
                        self.walk(&l.of, item, strukt, path)?;
                    }
                }
                None => self.save(strukt, path, json_kind(v), t),
            },
            Ty::Map(e) => match v.as_object() {
                Some(o) => {
                    for child in o.values() {
                        self.walk(e, child, strukt, path)?;
                    }
                }
                None => self.save(strukt, path, json_kind(v), t),
            },
            _ => {}
        }
        Ok(())
    }
}

/// Go's `base64.StdEncoding` check: the offset of the first byte it refuses.
fn go_base64(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let bad = |i: usize| Err(format!("illegal base64 data at input byte {i}"));
    let alphabet = |c: u8| c.is_ascii_alphanumeric() || c == b'+' || c == b'/';
    let body = b.iter().take_while(|&&c| alphabet(c)).count();
    let pad = b[body..].iter().take_while(|&&c| c == b'=').count();
    if body + pad < b.len() {
        return bad(body + pad);
    }
    let rem = body % 4;
    match (rem, pad) {
        (0, 0) | (2, 2) | (3, 1) => Ok(()),
        (1, _) => bad(body - 1 + usize::from(pad == 0)),
        (_, 0) => bad(body),
        _ => bad(body + if rem == 2 { pad } else { 1 }),
    }
}

const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// `resource.ParseQuantity` of a JSON value, as `Quantity.UnmarshalJSON` reads it.
fn quantity(v: &Value) -> Result<(), String> {
    let text = match v {
        Value::String(s) => s.trim().to_owned(),
        other => other.to_string(),
    };
    let body = text.strip_prefix(['+', '-']).unwrap_or(&text);
    let digits = body
        .bytes()
        .take_while(|c| c.is_ascii_digit() || *c == b'.')
        .count();
    let (num, suffix) = body.split_at(digits);
    let sfx_letters = suffix
        .bytes()
        .take_while(|c| b"eEinumkKMGTP".contains(c))
        .count();
    let (_, exp) = suffix.split_at(sfx_letters);
    let exp_ok = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    if num.is_empty() || !exp_ok.bytes().all(|c| c.is_ascii_digit()) {
        return Err(QUANTITY_FORMAT.to_owned());
    }
    if num.matches('.').count() > 1 || num == "." {
        return Err("unable to parse numeric part of quantity".to_owned());
    }
    let known = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || (suffix.starts_with(['e', 'E'])
        && suffix.len() > 1
        && suffix[1..]
            .strip_prefix(['+', '-'])
            .unwrap_or(&suffix[1..])
            .bytes()
            .all(|c| c.is_ascii_digit()));
    if !known {
        return Err("unable to parse quantity's suffix".to_owned());
    }
    Ok(())
}

fn unknown(t: &Ty, v: &Value, path: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    match (t, v) {
        (Ty::Struct(def), Value::Object(o)) => {
            let fields = &TABLE.types[def];
            for (k, child) in o {
                path.push(Seg::Field(k.clone()));
                match fields.get(k) {
                    Some(ft) => unknown(ft, child, path, out),
                    None => out.push(path.clone()),
                }
                path.pop();
            }
        }
        (Ty::List(l), Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                unknown(&l.of, item, path, out);
                path.pop();
            }
        }
        (Ty::Map(e), Value::Object(o)) => {
            for (k, child) in o {
                path.push(Seg::Field(k.clone()));
                unknown(e, child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// structured-merge-diff's typing of an apply patch.
fn typed(t: &Ty, v: &Value, path: &mut String, errs: &mut Vec<String>) {
    if v.is_null() {
        return;
    }
    let mut err = |m: String| errs.push(format!("{path}: {m}"));
    match t {
        Ty::String | Ty::Time | Ty::Bytes if !v.is_string() => {
            err(format!(
                "expected string, got &value.valueUnstructured{{Value:{}}}",
                go_sharp_v(v)
            ));
        }
        Ty::Bool if !v.is_boolean() => err(format!("expected boolean, got &{{{}}}", go_v(v))),
        Ty::Int32 | Ty::Int64 | Ty::Float64 if !v.is_number() => err(format!(
            "expected numeric (int or float), got {}",
            go_dynamic_type(v)
        )),
        Ty::Struct(def) => match v.as_object() {
            Some(o) => {
                let fields = &TABLE.types[def];
                let len = path.len();
                for (k, child) in sorted(o) {
                    path.push('.');
                    path.push_str(k);
                    match fields.get(k) {
                        Some(ft) => typed(ft, child, path, errs),
                        None => {
                            // The real walk stops at a map's first undeclared field.
                            errs.push(format!("{path}: field not declared in schema"));
                            path.truncate(len);
                            break;
                        }
                    }
                    path.truncate(len);
                }
            }
            None => err(format!("expected map, got &{{{}}}", go_v(v))),
        },
        Ty::Map(e) => match v.as_object() {
            Some(o) => {
                let len = path.len();
                for (k, child) in sorted(o) {
                    path.push('.');
                    path.push_str(k);
                    typed(e, child, path, errs);
                    path.truncate(len);
                }
            }
            None => err(format!("expected map, got &{{{}}}", go_v(v))),
        },
        Ty::List(l) => match v.as_array() {
            Some(items) => typed_list(l, items, path, errs),
            None => err(format!("expected list, got &{{{}}}", go_v(v))),
        },
        _ => {}
    }
}

fn typed_list(l: &List, items: &[Value], path: &mut String, errs: &mut Vec<String>) {
    let len = path.len();
    let mut seen = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let element = match l.kind {
            ListKind::Atomic => Ok(format!("[{i}]")),
            ListKind::Map => match item {
                Value::Null => Err("associative list with keys may not have a null element"),
                Value::Object(o) => {
                    let keys: Vec<String> = l
                        .keys
                        .iter()
                        .filter_map(|k| {
                            let v = o.get(k).or_else(|| l.defaults.get(k))?;
                            Some(format!("{k}={v}"))
                        })
                        .collect();
                    Ok(format!("[{}]", keys.join(",")))
                }
                _ => Err("associative list with keys may not have non-map elements"),
            },
            ListKind::Set => match item {
                Value::Object(_) => {
                    Err("associative list without keys has an element that's a map type")
                }
                Value::Array(_) => Err("not supported: associative list with lists as elements"),
                Value::Null => {
                    Err("associative list without keys has an element that's an explicit null")
                }
                v => Ok(format!("[={v}]")),
            },
        };
        match element {
            Err(m) => errs.push(format!("{path}: element {i}: {m}")),
            Ok(pe) => {
                if l.kind != ListKind::Atomic {
                    if seen.contains(&pe) {
                        errs.push(format!("{path}: duplicate entries for key {pe}"));
                    }
                    seen.push(pe.clone());
                }
                path.push_str(&pe);
                typed(&l.of, item, path, errs);
                path.truncate(len);
            }
        }
    }
}

/// `runtime.DefaultUnstructuredConverter.FromUnstructured` into the Go type.
fn convert(t: &Ty, v: &Value) -> Result<(), String> {
    if v.is_null() {
        return Ok(());
    }
    let kind = go_kind(v);
    let scalar = |dest: &str| -> Result<(), String> {
        let same = matches!(
            (dest, v),
            ("string", Value::String(_)) | ("bool", Value::Bool(_))
        ) || (dest != "string" && dest != "bool" && v.is_number());
        if same {
            if dest.starts_with("int") && v.is_f64() {
                let f = v.as_f64().unwrap_or_default();
                if f != f.trunc() {
                    return Err(format!("cannot convert float64 to {dest}"));
                }
            }
            return Ok(());
        }
        // Go converts integers to strings (to a rune), so that pair is "cannot convert".
        if dest == "string" && v.is_i64() {
            return Err(format!("cannot convert int64 to {dest}"));
        }
        Err(format!("unrecognized type: {dest}"))
    };
    match t {
        Ty::Any => Ok(()),
        Ty::String | Ty::Time => scalar("string"),
        Ty::Bool => scalar("bool"),
        Ty::Int32 => scalar("int32"),
        Ty::Int64 => scalar("int64"),
        Ty::Float64 => scalar("float64"),
        Ty::Bytes if v.is_string() => Ok(()),
        Ty::Bytes => Err(format!("cannot restore slice from {kind}")),
        Ty::Quantity => quantity(v),
        Ty::IntOrString => match v {
            Value::String(_) => Ok(()),
            Value::Number(_) if fits(v, i32::MIN.into(), i32::MAX.into()) => Ok(()),
            Value::Number(_) => Err(format!(
                "json: cannot unmarshal number {v} into Go value of type int32"
            )),
            _ => Err(format!(
                "json: cannot unmarshal {} into Go value of type int32",
                json_kind(v)
            )),
        },
        Ty::Struct(def) => {
            let o = v
                .as_object()
                .ok_or_else(|| format!("cannot restore struct from: {kind}"))?;
            let fields = &TABLE.types[def];
            for (k, child) in sorted(o) {
                if let Some(ft) = fields.get(k) {
                    convert(ft, child)?;
                }
            }
            Ok(())
        }
        Ty::List(l) => {
            let items = v
                .as_array()
                .ok_or_else(|| format!("cannot restore slice from {kind}"))?;
            items.iter().try_for_each(|i| convert(&l.of, i))
        }
        Ty::Map(e) => {
            let o = v
                .as_object()
                .ok_or_else(|| format!("cannot restore map from {kind}"))?;
            sorted(o).into_iter().try_for_each(|(_, c)| convert(e, c))
        }
    }
}

/// An object's fields in key order: the real server's typed walks report errors in path order
/// (the decoder's walk follows the document instead).
fn sorted(o: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut v: Vec<_> = o.iter().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

/// The `reflect.Kind` of an unstructured value.
fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
        Value::Null => "invalid",
    }
}

/// Go's `%T` of an unstructured value.
fn go_dynamic_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
        Value::Null => "<nil>",
        other => go_kind(other),
    }
}

fn go_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => emco_go::strconv::format_float_g(f, None),
        _ => n.to_string(),
    }
}

/// Go's `%v` of an unstructured value (`map[a:1 b:[x <nil>]]`).
pub(crate) fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_v).collect::<Vec<_>>().join(" ")),
        Value::Object(o) => format!(
            "map[{}]",
            sorted(o)
                .into_iter()
                .map(|(k, v)| format!("{k}:{}", go_v(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// Go's `%#v` of an unstructured value (`map[string]interface {}{"a":1}`).
fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Array(a) => format!(
            "[]interface {{}}{{{}}}",
            a.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) => format!(
            "map[string]interface {{}}{{{}}}",
            sorted(o)
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), go_sharp_v(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => go_v(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN_TYPES;
    use serde_json::json;

    fn schema(plural: &str) -> Schema {
        let rt = BUILTIN_TYPES.iter().find(|t| t.plural == plural).unwrap();
        Schema::of(rt).unwrap()
    }

    fn deployment(container: Value, pod: Value, spec: Value) -> Value {
        let mut c = json!({"name": "c", "image": "nginx"});
        c.as_object_mut()
            .unwrap()
            .extend(container.as_object().unwrap().clone());
        let mut p = json!({"containers": [c]});
        p.as_object_mut()
            .unwrap()
            .extend(pod.as_object().unwrap().clone());
        let mut s = json!({"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": p}});
        s.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": s})
    }

    // Every expected text below was answered by kube-apiserver v1.32 to the same body.
    #[test]
    fn decoding_names_the_go_struct_field_and_type() {
        let s = schema("deployments");
        let cases = [
            (
                json!({}),
                json!({}),
                json!({"replicas": "2"}),
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({"ports": [{"containerPort": "80"}]}),
                json!({}),
                json!({}),
                "json: cannot unmarshal string into Go struct field ContainerPort.spec.template.spec.containers.ports.containerPort of type int32",
            ),
            (
                json!({}),
                json!({}),
                json!({"replicas": 1.5}),
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({}),
                json!({}),
                json!({"replicas": 99_999_999_999_i64}),
                "json: cannot unmarshal number 99999999999 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                json!({}),
                json!({"hostNetwork": "true"}),
                json!({}),
                "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.hostNetwork of type bool",
            ),
            (
                json!({}),
                json!({}),
                json!({"template": "x"}),
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec",
            ),
            (
                json!({}),
                json!({}),
                json!({"selector": ["a"]}),
                "json: cannot unmarshal array into Go struct field DeploymentSpec.spec.selector of type v1.LabelSelector",
            ),
            (
                json!({"env": [{"name": "A", "value": 5}]}),
                json!({}),
                json!({}),
                "json: cannot unmarshal number into Go struct field EnvVar.spec.template.spec.containers.env.value of type string",
            ),
            (
                json!({"args": ["x", 5]}),
                json!({}),
                json!({}),
                "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.args of type string",
            ),
            (
                json!({"resources": {"limits": {"cpu": "abc"}}}),
                json!({}),
                json!({}),
                QUANTITY_FORMAT,
            ),
            (
                json!({"resources": {"limits": {"cpu": true}}}),
                json!({}),
                json!({}),
                QUANTITY_FORMAT,
            ),
            (
                json!({}),
                json!({}),
                json!({"strategy": {"rollingUpdate": {"maxSurge": true}}}),
                "json: cannot unmarshal bool into Go struct field RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32",
            ),
        ];
        for (c, p, sp, want) in cases {
            let d = deployment(c, p, sp);
            assert_eq!(s.decode_error(&d).as_deref(), Some(want), "{d}");
        }
        let mut labels = deployment(json!({}), json!({}), json!({}));
        labels["metadata"]["labels"] = json!({"a": 1});
        assert_eq!(
            s.decode_error(&labels).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
            )
        );
        for fine in [
            json!({"replicas": null}),
            json!({"replicas": 3}),
            json!({"strategy": {"rollingUpdate": {"maxSurge": "25%"}}}),
        ] {
            assert_eq!(
                s.decode_error(&deployment(json!({}), json!({}), fine)),
                None
            );
        }
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": 1}});
        assert_eq!(
            schema("configmaps").decode_error(&cm).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )
        );
    }

    #[test]
    fn apply_typing_names_list_keys_and_go_values() {
        let s = schema("deployments");
        let prefix = ".spec.template.spec.containers[name=\"c\"]";
        let cases = [
            (json!({"ports": [{"containerPort": "80"}]}), json!({}), json!({}),
             format!("{prefix}.ports[containerPort=\"80\",protocol=\"TCP\"].containerPort: expected numeric (int or float), got string")),
            (json!({}), json!({"hostNetwork": "true"}), json!({}),
             ".spec.template.spec.hostNetwork: expected boolean, got &{true}".to_owned()),
            (json!({}), json!({"hostNetwork": {"a": 1}}), json!({}),
             ".spec.template.spec.hostNetwork: expected boolean, got &{map[a:1]}".to_owned()),
            (json!({"image": true}), json!({}), json!({}),
             format!("{prefix}.image: expected string, got &value.valueUnstructured{{Value:true}}")),
            (json!({"imagePullPolicy": {"a": "b"}}), json!({}), json!({}),
             format!("{prefix}.imagePullPolicy: expected string, got &value.valueUnstructured{{Value:map[string]interface {{}}{{\"a\":\"b\"}}}}")),
            (json!({"args": [1e21]}), json!({}), json!({}),
             format!("{prefix}.args[0]: expected string, got &value.valueUnstructured{{Value:1e+21}}")),
            (json!({"args": [1.0]}), json!({}), json!({}),
             format!("{prefix}.args[0]: expected string, got &value.valueUnstructured{{Value:1}}")),
            (json!({}), json!({}), json!({"replicas": {"a": 1}}),
             ".spec.replicas: expected numeric (int or float), got map[string]interface {}".to_owned()),
            (json!({}), json!({}), json!({"selector": ["a"]}),
             ".spec.selector: expected map, got &{[a]}".to_owned()),
            (json!({"args": "x"}), json!({}), json!({}),
             format!("{prefix}.args: expected list, got &{{x}}")),
            (json!({"env": [{"name": "A", "value": 5}]}), json!({}), json!({}),
             format!("{prefix}.env[name=\"A\"].value: expected string, got &value.valueUnstructured{{Value:5}}")),
            (json!({}), json!({"volumes": [{"name": "v", "configMap": {"defaultMode": "0744"}}]}), json!({}),
             ".spec.template.spec.volumes[name=\"v\"].configMap.defaultMode: expected numeric (int or float), got string".to_owned()),
            (json!({}), json!({"tolerations": [{"key": "k", "tolerationSeconds": "5"}]}), json!({}),
             ".spec.template.spec.tolerations[0].tolerationSeconds: expected numeric (int or float), got string".to_owned()),
            (json!({"env": [{"name": "a"}, {"name": "a"}]}), json!({}), json!({}),
             format!("{prefix}.env: duplicate entries for key [name=\"a\"]")),
            (json!({"env": [null]}), json!({}), json!({}),
             format!("{prefix}.env: element 0: associative list with keys may not have a null element")),
            (json!({}), json!({"bar": "x"}), json!({}),
             ".spec.template.spec.bar: field not declared in schema".to_owned()),
        ];
        for (c, p, sp, want) in cases {
            let d = deployment(c, p, sp);
            assert_eq!(s.typed_errors(&d), vec![want], "{d}");
        }
        let d = deployment(
            json!({"foo": 1}),
            json!({"zzz": "x", "hostNetwork": "x"}),
            json!({"replicas": "x"}),
        );
        assert_eq!(
            s.typed_errors(&d),
            [
                ".spec.replicas: expected numeric (int or float), got string",
                ".spec.template.spec.containers[name=\"c\"].foo: field not declared in schema",
                ".spec.template.spec.hostNetwork: expected boolean, got &{x}",
                ".spec.template.spec.zzz: field not declared in schema",
            ]
        );
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a", 5]}});
        assert_eq!(
            schema("configmaps").typed_errors(&cm),
            [".metadata.finalizers[=5]: expected string, got &value.valueUnstructured{Value:5}"]
        );
        let nested = deployment(
            json!({"args": [{"b": [1, "x", true, null, {"c": 2.5}], "a": "y"}]}),
            json!({}),
            json!({}),
        );
        assert_eq!(
            s.typed_errors(&nested),
            [format!(
                "{prefix}.args[0]: expected string, got &value.valueUnstructured{{Value:map[string]interface {{}}{{\"a\":\"y\", \"b\":[]interface {{}}{{1, \"x\", true, interface {{}}(nil), map[string]interface {{}}{{\"c\":2.5}}}}}}}}"
            )]
        );
    }

    #[test]
    fn conversion_refuses_what_the_go_types_cannot_hold() {
        let s = schema("deployments");
        let cases = [
            (
                json!({}),
                json!({"replicas": 1.5}),
                "cannot convert float64 to int32",
            ),
            (
                json!({}),
                json!({"replicas": "3"}),
                "unrecognized type: int32",
            ),
            (json!({}), json!({"paused": "x"}), "unrecognized type: bool"),
            (
                json!({"hostname": 5}),
                json!({}),
                "cannot convert int64 to string",
            ),
            (
                json!({}),
                json!({"selector": "x"}),
                "cannot restore struct from: string",
            ),
            (
                json!({}),
                json!({"strategy": {"rollingUpdate": {"maxSurge": true}}}),
                "json: cannot unmarshal bool into Go value of type int32",
            ),
        ];
        for (p, sp, want) in cases {
            let d = deployment(json!({}), p, sp);
            assert_eq!(s.conversion_error(&d).as_deref(), Some(want), "{d}");
        }
        assert_eq!(
            s.conversion_error(&deployment(json!({}), json!({}), json!({"replicas": 2.0}))),
            None
        );
    }

    #[test]
    fn unknown_fields_are_found_at_any_depth_and_removed() {
        let s = schema("deployments");
        let mut d = deployment(json!({"bar": 1}), json!({"foo": 2}), json!({}));
        d["metadata"]["lables"] = json!({});
        let unknown = s.unknown_fields(&d);
        let names: Vec<String> = unknown.iter().map(|p| dotted(p)).collect();
        assert_eq!(
            names,
            [
                "metadata.lables",
                "spec.template.spec.containers[0].bar",
                "spec.template.spec.foo"
            ]
        );
        for p in &unknown {
            remove(&mut d, p);
        }
        assert!(s.unknown_fields(&d).is_empty());
    }

    #[test]
    fn base64_and_quantities_as_go_reads_them() {
        assert!(go_base64("YWJj").is_ok());
        assert!(go_base64("YWI=").is_ok());
        assert_eq!(
            go_base64("YW*j").unwrap_err(),
            "illegal base64 data at input byte 2"
        );
        for ok in ["1", "500m", "1.5Gi", "1e3", "+2Ki"] {
            assert!(quantity(&json!(ok)).is_ok(), "{ok}");
        }
        assert!(quantity(&json!(0.5)).is_ok());
        assert_eq!(quantity(&json!("abc")).unwrap_err(), QUANTITY_FORMAT);
        assert_eq!(
            quantity(&json!("1Qi")).unwrap_err(),
            QUANTITY_FORMAT,
            "Q is no suffix letter"
        );
        assert_eq!(
            quantity(&json!("1iK")).unwrap_err(),
            "unable to parse quantity's suffix"
        );
    }
}
