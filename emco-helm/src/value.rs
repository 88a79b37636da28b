//! The data model of templates: the subset of Go's reflect kinds that Helm charts meet.
//!
//! Maps are shared and mutable like Go maps (Sprig's `set` changes the map every holder sees);
//! lists are immutable and copied on change like the Sprig list functions do.

use emco_core::poison::{read, write};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Deepest nesting of lists and maps that printing, copying and comparing follow; only a map
/// that contains itself (`set $d "self" $d`) nests deeper.
pub const MAX_NESTING: usize = 100;

/// A Go value as templates see it.
#[derive(Clone, Debug, Default)]
pub enum Value {
    /// A nil interface (also what a missing map key yields).
    #[default]
    Nil,
    /// A `bool`.
    Bool(bool),
    /// A Go `int` (integer constants, `len`, Sprig's `int`).
    Int(i64),
    /// A Go `int64` (Sprig's arithmetic results, `--set` integers).
    Int64(i64),
    /// A `float64` (every number of a values file, as Helm decodes YAML through JSON).
    Float(f64),
    /// A `string`.
    String(String),
    /// A `[]interface{}`.
    List(Arc<Vec<Value>>),
    /// A `map[string]interface{}`, iterated in sorted key order.
    Map(Map),
    /// An object with fields and methods (`.Files`, `.Capabilities`, a semver version).
    Object(Arc<dyn Object>),
}

/// A data object whose fields and methods templates can reach (`.Files.Get "x"`).
pub trait Object: fmt::Debug + Send + Sync {
    /// The Go type name used in error messages and by `typeOf` (`*chart.Files`).
    fn type_name(&self) -> &str;
    /// Resolves field or method `name` called with `args`; `None` when there is no such member.
    ///
    /// # Errors
    /// The method's own error message.
    fn member(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>>;
    /// Whether `name` is a method (methods take arguments, fields do not).
    fn is_method(&self, name: &str) -> bool;
    /// How `%v` prints the object (Go's `String()` method where the type has one).
    fn display(&self) -> String;
    /// The entries `range` visits when the object is a Go map type (`.Files.Glob` results).
    fn entries(&self) -> Option<Vec<(String, Value)>> {
        None
    }
    /// The length when the object is a Go map or slice type; `None` for struct-like objects.
    /// It decides truth (`if`, `empty`) and `len`, as for Go maps.
    fn len(&self) -> Option<usize> {
        None
    }
    /// The exported fields in declaration order when the object is a Go struct value, as
    /// `encoding/json` (and so `toJson`/`toYaml`) writes it; `None` for other objects.
    fn struct_fields(&self) -> Option<Vec<(String, Value)>> {
        None
    }
    /// The Go reflect kind, as Sprig's `kindOf` prints it (`ptr` for `*chart.Metadata`,
    /// `struct` for `time.Time`, `map` for `engine.files`, `slice` for a `VersionSet`).
    fn kind(&self) -> &'static str {
        "ptr"
    }
    /// The string the type's `MarshalJSON` writes (`time.Time`: RFC 3339 with nanoseconds), used
    /// by `toJson` and `toYaml`; `None` writes [`Object::display`].
    fn json_text(&self) -> Option<String> {
        None
    }
    /// The concrete object, for functions that take one Go type (`time.Time`) and need its
    /// state; `None` for objects only reached through their members.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// Whether the object is a Go map or slice type with no elements.
    fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
    /// The content when the object is a Go `[]byte` ([`Bytes`]): Sprig's `strval` (so
    /// `toString`, `quote`) and `printf`'s `%s`/`%q`/`%x` read it as text.
    fn bytes(&self) -> Option<&[u8]> {
        None
    }
}

/// A Go `[]byte`, as `.Files.GetBytes` and the entries of `.Files` hold it.
///
/// Only these produce one (Sprig's functions, `randBytes` included, return strings), so it
/// lives as an object rather than a value kind. Go treats it apart from a string: `{{ }}` and
/// `%v` print the byte numbers (`[104 105]`), `len`/`index`/`range` see bytes, `toJson` and
/// `toYaml` write base64, `toString`/`quote`/`printf "%s"` give the text, and functions taking
/// a `string` (`b64enc`, `sha256sum`, `upper`) reject it as `[]uint8`.
#[derive(Debug, Clone, Default)]
pub struct Bytes(pub Arc<Vec<u8>>);

impl Object for Bytes {
    fn type_name(&self) -> &str {
        "[]uint8"
    }

    fn member(&self, _name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        None
    }

    fn is_method(&self, _name: &str) -> bool {
        false
    }

    fn display(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(u8::to_string).collect();
        format!("[{}]", parts.join(" "))
    }

    /// `range` visits index and byte (a `uint8`, modelled as an `int`).
    fn entries(&self) -> Option<Vec<(String, Value)>> {
        Some(
            self.0
                .iter()
                .enumerate()
                .map(|(i, b)| (i.to_string(), Value::Int(i64::from(*b))))
                .collect(),
        )
    }

    fn len(&self) -> Option<usize> {
        Some(self.0.len())
    }

    fn kind(&self) -> &'static str {
        "slice"
    }

    /// `encoding/json` writes a `[]byte` as a base64 string.
    fn json_text(&self) -> Option<String> {
        use base64::Engine as _;
        Some(base64::engine::general_purpose::STANDARD.encode(self.0.as_slice()))
    }

    fn bytes(&self) -> Option<&[u8]> {
        Some(self.0.as_slice())
    }
}

/// A shared, mutable `map[string]interface{}`.
#[derive(Clone, Default)]
pub struct Map(Arc<RwLock<BTreeMap<String, Value>>>);

impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.read().iter()).finish()
    }
}

impl Map {
    /// A new map holding `entries`.
    #[must_use]
    pub fn from_btree(entries: BTreeMap<String, Value>) -> Self {
        Self(Arc::new(RwLock::new(entries)))
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Value>> {
        read(&self.0)
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Value>> {
        write(&self.0)
    }

    /// The value at `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Value> {
        self.read().get(key).cloned()
    }

    /// Whether `key` is present.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.read().contains_key(key)
    }

    /// Sets `key` (visible to every holder of this map).
    pub fn insert(&self, key: impl Into<String>, value: Value) {
        self.write().insert(key.into(), value);
    }

    /// Removes `key`.
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.write().remove(key)
    }

    /// The number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the map is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// A copy of the entries, sorted by key (the map may change while the copy is used).
    #[must_use]
    pub fn snapshot(&self) -> BTreeMap<String, Value> {
        self.read().clone()
    }

    /// The keys, sorted.
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Whether both handles are the same map.
    #[must_use]
    pub fn ptr_eq(&self, other: &Map) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Value {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Self {
        Self::String(s.into())
    }

    /// A list value.
    #[must_use]
    pub fn list(items: Vec<Value>) -> Self {
        Self::List(Arc::new(items))
    }

    /// A new map value.
    #[must_use]
    pub fn map(entries: BTreeMap<String, Value>) -> Self {
        Self::Map(Map::from_btree(entries))
    }

    /// An empty map value.
    #[must_use]
    pub fn empty_map() -> Self {
        Self::map(BTreeMap::new())
    }

    /// Go's truth of a value for `if`, `with`, `and`, `or`, `not`.
    #[must_use]
    pub fn is_true(&self) -> bool {
        match self {
            Self::Nil => false,
            Self::Bool(b) => *b,
            Self::Int(i) | Self::Int64(i) => *i != 0,
            Self::Float(f) => *f != 0.0,
            Self::String(s) => !s.is_empty(),
            Self::List(l) => !l.is_empty(),
            Self::Map(m) => !m.is_empty(),
            Self::Object(o) => o.len().is_none_or(|n| n > 0),
        }
    }

    /// The Go type name, as Go's error messages and Sprig's `typeOf` print it.
    #[must_use]
    pub fn type_name(&self) -> String {
        match self {
            Self::Nil => "<nil>".to_owned(),
            Self::Bool(_) => "bool".to_owned(),
            Self::Int(_) => "int".to_owned(),
            Self::Int64(_) => "int64".to_owned(),
            Self::Float(_) => "float64".to_owned(),
            Self::String(_) => "string".to_owned(),
            Self::List(_) => "[]interface {}".to_owned(),
            Self::Map(_) => "map[string]interface {}".to_owned(),
            Self::Object(o) => o.type_name().to_owned(),
        }
    }

    /// The Go reflect kind name, as Sprig's `kindOf` prints it.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Nil => "invalid",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::Int64(_) => "int64",
            Self::Float(_) => "float64",
            Self::String(_) => "string",
            Self::List(_) => "slice",
            Self::Map(_) => "map",
            Self::Object(o) => o.kind(),
        }
    }

    /// The string inside, if this is a string.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// Whether this is nil.
    #[must_use]
    pub fn is_nil(&self) -> bool {
        matches!(self, Self::Nil)
    }

    /// Go's `reflect.DeepEqual` on these kinds (used by `has`, `uniq`, `without`).
    #[must_use]
    pub fn deep_equal(&self, other: &Value) -> bool {
        self.deep_equal_at(other, 0)
    }

    fn deep_equal_at(&self, other: &Value, depth: usize) -> bool {
        if depth > MAX_NESTING {
            return false;
        }
        match (self, other) {
            (Self::Nil, Self::Nil) => true,
            (Self::Bool(a), Self::Bool(b)) => a == b,
            (Self::Int(a), Self::Int(b)) | (Self::Int64(a), Self::Int64(b)) => a == b,
            (Self::Float(a), Self::Float(b)) => a == b,
            (Self::String(a), Self::String(b)) => a == b,
            (Self::List(a), Self::List(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|(x, y)| x.deep_equal_at(y, depth + 1))
            }
            (Self::Map(a), Self::Map(b)) => {
                if a.ptr_eq(b) {
                    return true;
                }
                let (a, b) = (a.snapshot(), b.snapshot());
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|((ka, va), (kb, vb))| ka == kb && va.deep_equal_at(vb, depth + 1))
            }
            (Self::Object(a), Self::Object(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// A deep copy: maps are copied recursively so that changes to the copy are not shared.
    /// Below [`MAX_NESTING`] levels (only a map that contains itself gets there) values are shared.
    #[must_use]
    pub fn deep_copy(&self) -> Value {
        self.deep_copy_at(0)
    }

    fn deep_copy_at(&self, depth: usize) -> Value {
        if depth > MAX_NESTING {
            return self.clone();
        }
        match self {
            Self::List(l) => Self::list(l.iter().map(|v| v.deep_copy_at(depth + 1)).collect()),
            Self::Map(m) => Self::map(
                m.snapshot()
                    .into_iter()
                    .map(|(k, v)| (k, v.deep_copy_at(depth + 1)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Converts JSON data the way Helm decodes values: every number becomes a `float64`.
    #[must_use]
    pub fn from_json(json: &serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Self::Nil,
            serde_json::Value::Bool(b) => Self::Bool(*b),
            serde_json::Value::Number(n) => Self::Float(n.as_f64().unwrap_or(0.0)),
            serde_json::Value::String(s) => Self::String(s.clone()),
            serde_json::Value::Array(a) => Self::list(a.iter().map(Self::from_json).collect()),
            serde_json::Value::Object(o) => Self::map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Self::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Appends Go's `%v` rendering of the value (as `fmt.Sprint` prints it) to `out`.
    pub fn write_go(&self, out: &mut String) {
        self.write_go_at(out, 0);
    }

    fn write_go_at(&self, out: &mut String, depth: usize) {
        if depth > MAX_NESTING {
            // Only a map or list that contains itself nests this deep; Go would not terminate.
            out.push_str("...");
            return;
        }
        match self {
            Self::Nil => out.push_str("<nil>"),
            Self::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Self::Int(i) | Self::Int64(i) => out.push_str(&i.to_string()),
            Self::Float(f) => out.push_str(&emco_go::strconv::format_float_g(*f, None)),
            Self::String(s) => out.push_str(s),
            Self::List(l) => {
                out.push('[');
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    v.write_go_at(out, depth + 1);
                }
                out.push(']');
            }
            Self::Map(m) => {
                out.push_str("map[");
                for (i, (k, v)) in m.snapshot().iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    out.push_str(k);
                    out.push(':');
                    v.write_go_at(out, depth + 1);
                }
                out.push(']');
            }
            Self::Object(o) => out.push_str(&o.display()),
        }
    }

    /// Go's `fmt.Sprint(v)`.
    #[must_use]
    pub fn to_go_string(&self) -> String {
        let mut out = String::new();
        self.write_go(&mut out);
        out
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}
