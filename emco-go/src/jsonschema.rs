//! JSON Schema validation as `github.com/xeipuuv/gojsonschema` v1.2.0 does it, which is how
//! EMCO's Go services check request bodies (`validation.ValidateJsonSchemaData`): the same
//! keywords (its default "hybrid" draft: draft-04 to draft-07), the same English texts, every
//! error in the order the Go code finds them, and the same choice of branch whose errors a
//! failed `anyOf`/`oneOf` reports.
//!
//! One thing is not reproducible: Go visits the `properties` of a schema in map order, a random
//! rotation of the file's order. [`Schema`] visits them in the order the schema text lists
//! them, the order Go picks most often; a document with errors in several sibling properties
//! may list them in another order in EMCO.
//!
//! ```
//! use emco_go::jsonschema::Schema;
//! let schema = Schema::parse(r#"{"properties": {"name": {"type": "string", "maxLength": 3,
//!     "pattern": "^[a-z]+$"}, "port": {"type": "integer", "minimum": 1}}}"#).unwrap();
//! let errors = schema.validate(&serde_json::json!({"name": "Abcd", "port": 0}));
//! assert_eq!(errors, [
//!     "String length must be less than or equal to 3",
//!     "Does not match pattern '^[a-z]+$'",
//!     "Must be greater than or equal to 1",
//! ]);
//! ```

use std::collections::HashMap;

/// Declares statics holding schemas compiled once from files next to the calling crate's
/// sources: `emco_go::schemas! { /// doc \n pub NAME = "../schemas/x.json"; }` (the path is
/// `include_str!`'s, relative to the calling file).
#[macro_export]
macro_rules! schemas {
    ($($(#[$doc:meta])* $vis:vis $name:ident = $file:literal;)+) => {$(
        $(#[$doc])*
        $vis static $name: std::sync::LazyLock<$crate::jsonschema::Schema> =
            std::sync::LazyLock::new(|| {
                $crate::jsonschema::Schema::parse(include_str!($file))
                    .expect(concat!($file, " compiles"))
            });
    )+};
}

use regex::Regex;
use serde_json::{Map, Value};

use crate::strconv::{format_float_g, format_float_json};

/// A schema that did not compile, worded as gojsonschema words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

/// A compiled schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Value,
    patterns: HashMap<String, Regex>,
}

/// The errors of one validation and gojsonschema's score of it, which decides which failed
/// branch of an `anyOf`/`oneOf` is reported.
#[derive(Debug, Default)]
struct Outcome {
    errors: Vec<String>,
    score: i64,
}

impl Outcome {
    /// An error; gojsonschema's `addInternalError` takes 2 from the score.
    fn fail(&mut self, description: String) {
        self.errors.push(description);
        self.score -= 2;
    }

    fn merge(&mut self, other: Self) {
        self.errors.extend(other.errors);
        self.score += other.score;
    }

    fn valid(&self) -> bool {
        self.errors.is_empty()
    }
}

impl Schema {
    /// Compiles a schema from its text. As Go's `json.Decoder`, only the first JSON value of
    /// the text is read.
    ///
    /// # Errors
    /// Text that is not JSON, or a `pattern` that is not a valid regular expression.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        let Some(Ok(root)) = values.next() else {
            return Err(Error(
                "Expected: valid JSON, given: Invalid JSON".to_owned(),
            ));
        };
        let mut patterns = HashMap::new();
        collect_patterns(&root, &mut patterns)?;
        Ok(Self { root, patterns })
    }

    /// The descriptions of every error of `doc`, in gojsonschema's order; empty when valid.
    #[must_use]
    pub fn validate(&self, doc: &Value) -> Vec<String> {
        self.recurse(&self.root, doc, ROOT).errors
    }

    /// EMCO's answer for an invalid document: `Invalid Input:` and a line per error; `None`
    /// when `doc` is valid.
    #[must_use]
    pub fn invalid_input(&self, doc: &Value) -> Option<String> {
        let errors = self.validate(doc);
        (!errors.is_empty()).then(|| format!("Invalid Input:\n{}", errors.join("\n")))
    }

    /// `validateRecursive`; `field` is gojsonschema's `Field()` of `node` (`spec.port`,
    /// `(root)`).
    fn recurse(&self, schema: &Value, node: &Value, field: &str) -> Outcome {
        let mut out = Outcome::default();
        let schema = match schema {
            Value::Bool(pass) => {
                if !pass {
                    out.fail("False always fails validation".to_owned());
                }
                return out;
            }
            Value::Object(s) => s,
            _ => return out,
        };
        if let Some(Value::String(reference)) = schema.get("$ref") {
            return match self.resolve(reference) {
                Some(target) => self.recurse(target, node, field),
                None => out,
            };
        }
        let types = types(schema);
        let given = match node {
            Value::Null => "null",
            Value::Number(n) if is_integer(n) => "integer",
            Value::Number(_) => "number",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Bool(_) => "boolean",
            Value::String(_) => "string",
        };
        let allowed = types.is_empty()
            || types.contains(&given)
            || (given == "integer" && types.contains(&"number"));
        if !allowed {
            let expected = match types.as_slice() {
                [one] => (*one).to_owned(),
                many => format!("[{}]", many.join(",")),
            };
            out.fail(format!(
                "Invalid type. Expected: {expected}, given: {given}"
            ));
            return out;
        }
        self.combinators(schema, node, field, &mut out);
        match node {
            Value::Number(n) => {
                number(schema, n, &mut out);
                common(schema, node, field, &mut out);
            }
            Value::Array(items) => {
                self.array(schema, items, field, &mut out);
                common(schema, node, field, &mut out);
            }
            Value::Object(map) => {
                self.object(schema, map, field, &mut out);
                common(schema, node, field, &mut out);
                if let Some(Value::Object(props)) = schema.get("properties") {
                    for (key, sub) in props {
                        if let Some(child) = map.get(key) {
                            out.merge(self.recurse(sub, child, &child_field(field, key)));
                        }
                    }
                }
            }
            Value::String(s) => {
                common(schema, node, field, &mut out);
                self.string(schema, s, &mut out);
            }
            Value::Null | Value::Bool(_) => common(schema, node, field, &mut out),
        }
        out.score += 1;
        out
    }

    /// A `$ref` within the schema (`#/definitions/x`, any JSON pointer after `#`).
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(&self.root);
        }
        self.root.pointer(pointer)
    }

    /// `validateSchema`: anyOf, oneOf, allOf, not, dependencies, if/then/else.
    fn combinators(
        &self,
        schema: &Map<String, Value>,
        node: &Value,
        field: &str,
        out: &mut Outcome,
    ) {
        if let Some(Value::Array(branches)) = schema.get("anyOf").filter(|v| non_empty(v)) {
            any_valid(
                out,
                branches.iter().map(|b| self.recurse(b, node, field)),
                "Must validate at least one schema (anyOf)",
            );
        }
        if let Some(Value::Array(branches)) = schema.get("oneOf").filter(|v| non_empty(v)) {
            let mut best: Option<Outcome> = None;
            let mut passed = 0;
            for b in branches {
                let r = self.recurse(b, node, field);
                if r.valid() {
                    passed += 1;
                } else if passed == 0 && best.as_ref().is_none_or(|x| r.score > x.score) {
                    best = Some(r);
                }
            }
            if passed != 1 {
                out.fail("Must validate one and only one schema (oneOf)".to_owned());
                if passed == 0
                    && let Some(best) = best
                {
                    out.merge(best);
                }
            }
        }
        if let Some(Value::Array(branches)) = schema.get("allOf").filter(|v| non_empty(v)) {
            let mut passed = 0;
            for b in branches {
                let r = self.recurse(b, node, field);
                if r.valid() {
                    passed += 1;
                }
                out.merge(r);
            }
            if passed != branches.len() {
                out.fail("Must validate all the schemas (allOf)".to_owned());
            }
        }
        if let Some(not) = schema.get("not")
            && self.recurse(not, node, field).valid()
        {
            out.fail("Must not validate the schema (not)".to_owned());
        }
        if let (Some(Value::Object(deps)), Value::Object(map)) = (schema.get("dependencies"), node)
        {
            for key in map.keys() {
                match deps.get(key) {
                    Some(Value::Array(needed)) => {
                        for n in needed.iter().filter_map(Value::as_str) {
                            if !map.contains_key(n) {
                                out.fail(format!("Has a dependency on {n}"));
                            }
                        }
                    }
                    Some(dep @ (Value::Object(_) | Value::Bool(_))) => {
                        out.merge(self.recurse(dep, node, field));
                    }
                    _ => {}
                }
            }
        }
        if let Some(cond) = schema.get("if") {
            let holds = self.recurse(cond, node, field).valid();
            let (key, text) = if holds {
                ("then", "Must validate \"then\" as \"if\" was valid")
            } else {
                ("else", "Must validate \"else\" as \"if\" was not valid")
            };
            if let Some(branch) = schema.get(key) {
                let r = self.recurse(branch, node, field);
                if !r.valid() {
                    out.fail(text.to_owned());
                    out.merge(r);
                }
            }
        }
        out.score += 1;
    }

    /// `validateArray`: items (and additionalItems), minItems, maxItems, uniqueItems, contains.
    fn array(&self, schema: &Map<String, Value>, items: &[Value], field: &str, out: &mut Outcome) {
        match schema.get("items") {
            Some(single @ (Value::Object(_) | Value::Bool(_))) => {
                for (i, item) in items.iter().enumerate() {
                    out.merge(self.recurse(single, item, &child_field(field, &i.to_string())));
                }
            }
            Some(Value::Array(positional)) if !positional.is_empty() => {
                for (i, (s, item)) in positional.iter().zip(items).enumerate() {
                    out.merge(self.recurse(s, item, &child_field(field, &i.to_string())));
                }
                if positional.len() < items.len() {
                    match schema.get("additionalItems") {
                        Some(Value::Bool(false)) => {
                            out.fail("No additional items allowed on array".to_owned());
                        }
                        Some(extra @ Value::Object(_)) => {
                            for (i, item) in items.iter().enumerate().skip(positional.len()) {
                                out.merge(self.recurse(
                                    extra,
                                    item,
                                    &child_field(field, &i.to_string()),
                                ));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if let Some(min) = uint(schema, "minItems")
            && (items.len() as u64) < min
        {
            out.fail(format!("Array must have at least {min} items"));
        }
        if let Some(max) = uint(schema, "maxItems")
            && (items.len() as u64) > max
        {
            out.fail(format!("Array must have at most {max} items"));
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            let mut seen: HashMap<String, usize> = HashMap::new();
            for (j, item) in items.iter().enumerate() {
                let text = go_marshal(item);
                if let Some(i) = seen.get(&text) {
                    out.fail(format!("array items[{i},{j}] must be unique"));
                }
                seen.insert(text, j);
            }
        }
        if let Some(contains) = schema.get("contains") {
            let attempts = items
                .iter()
                .enumerate()
                .map(|(i, item)| self.recurse(contains, item, &child_field(field, &i.to_string())));
            any_valid(out, attempts, "At least one of the items must match");
        }
        out.score += 1;
    }

    /// `validateObject`: min/maxProperties, required (in the schema's order), pattern and
    /// additional properties, propertyNames.
    fn object(
        &self,
        schema: &Map<String, Value>,
        map: &Map<String, Value>,
        field: &str,
        out: &mut Outcome,
    ) {
        if let Some(min) = uint(schema, "minProperties")
            && (map.len() as u64) < min
        {
            out.fail(format!("Must have at least {min} properties"));
        }
        if let Some(max) = uint(schema, "maxProperties")
            && (map.len() as u64) > max
        {
            out.fail(format!("Must have at most {max} properties"));
        }
        if let Some(Value::Array(required)) = schema.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if map.contains_key(key) {
                    out.score += 1;
                } else {
                    out.fail(format!("{key} is required"));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let pattern_props = schema.get("patternProperties").and_then(Value::as_object);
        for (key, value) in map {
            let declared = props.is_some_and(|p| p.contains_key(key));
            let mut matched = false;
            for (pattern, sub) in pattern_props.into_iter().flatten() {
                if self.patterns.get(pattern).is_some_and(|r| r.is_match(key)) {
                    matched = true;
                    out.merge(self.recurse(sub, value, &child_field(field, key)));
                }
            }
            if matched {
                out.score += 1;
            }
            if !declared && !matched {
                match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        out.fail(format!("Additional property {key} is not allowed"));
                    }
                    Some(extra @ Value::Object(_)) => {
                        out.merge(self.recurse(extra, value, &child_field(field, key)));
                    }
                    _ => {}
                }
            }
        }
        if let Some(names) = schema.get("propertyNames") {
            for key in map.keys() {
                let r = self.recurse(names, &Value::String(key.clone()), field);
                if !r.valid() {
                    out.fail(format!("Property name of \"{key}\" does not match"));
                    out.merge(r);
                }
            }
        }
        out.score += 1;
    }

    /// `validateString`: minLength, maxLength (in code points), pattern, format.
    fn string(&self, schema: &Map<String, Value>, s: &str, out: &mut Outcome) {
        let len = s.chars().count() as u64;
        if let Some(min) = uint(schema, "minLength")
            && len < min
        {
            out.fail(format!(
                "String length must be greater than or equal to {min}"
            ));
        }
        if let Some(max) = uint(schema, "maxLength")
            && len > max
        {
            out.fail(format!("String length must be less than or equal to {max}"));
        }
        if let Some(Value::String(pattern)) = schema.get("pattern")
            && self.patterns.get(pattern).is_some_and(|r| !r.is_match(s))
        {
            out.fail(format!("Does not match pattern '{pattern}'"));
        }
        if let Some(Value::String(format)) = schema.get("format")
            && !is_format(format, s)
        {
            out.fail(format!("Does not match format '{format}'"));
        }
        out.score += 1;
    }
}

/// gojsonschema's `anyOf` and `contains`: nothing once an attempt is valid (the rest are not
/// tried), else `text` and the errors of the best-scoring attempt (the first among equals).
fn any_valid(out: &mut Outcome, attempts: impl Iterator<Item = Outcome>, text: &str) {
    let mut best: Option<Outcome> = None;
    for r in attempts {
        if r.valid() {
            return;
        }
        if best.as_ref().is_none_or(|x| r.score > x.score) {
            best = Some(r);
        }
    }
    out.fail(text.to_owned());
    if let Some(best) = best {
        out.merge(best);
    }
}

/// gojsonschema's name of the document's root in `Field()`.
const ROOT: &str = "(root)";

/// The `Field()` of a child of `field`.
fn child_field(field: &str, key: &str) -> String {
    if field == ROOT {
        key.to_owned()
    } else {
        format!("{field}.{key}")
    }
}

/// Compiles every `pattern` and `patternProperties` key of the schema.
fn collect_patterns(v: &Value, out: &mut HashMap<String, Regex>) -> Result<(), Error> {
    let mut add = |p: &str| -> Result<(), Error> {
        if !out.contains_key(p) {
            let r = Regex::new(p).map_err(|_| Error(format!("Invalid regex pattern '{p}'")))?;
            out.insert(p.to_owned(), r);
        }
        Ok(())
    };
    match v {
        Value::Object(m) => {
            if let Some(Value::String(p)) = m.get("pattern") {
                add(p)?;
            }
            if let Some(Value::Object(pp)) = m.get("patternProperties") {
                for k in pp.keys() {
                    add(k)?;
                }
            }
            for child in m.values() {
                collect_patterns(child, out)?;
            }
        }
        Value::Array(items) => {
            for child in items {
                collect_patterns(child, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The schema's `type`, one name or a list.
fn types(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn non_empty(v: &Value) -> bool {
    v.as_array().is_some_and(|a| !a.is_empty())
}

fn uint(schema: &Map<String, Value>, key: &str) -> Option<u64> {
    match schema.get(key)? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f as u64)),
        _ => None,
    }
}

/// Whether a JSON number is an integer (`big.Rat.IsInt`: `1.0` is).
fn is_integer(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// `validateNumber`: multipleOf, maximum, exclusiveMaximum, minimum, exclusiveMinimum. Bounds
/// print as `%v` of a `big.Float` (`100`, `1e+06`).
fn number(schema: &Map<String, Value>, n: &serde_json::Number, out: &mut Outcome) {
    let v = n.as_f64().unwrap_or_default();
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(m) = bound("multipleOf")
        && m != 0.0
        && (v / m).fract() != 0.0
    {
        out.fail(format!("Must be a multiple of {}", format_float_g(m, None)));
    }
    if let Some(max) = bound("maximum")
        && v > max
    {
        out.fail(format!(
            "Must be less than or equal to {}",
            format_float_g(max, None)
        ));
    }
    if let Some(max) = exclusive(schema, "exclusiveMaximum", "maximum")
        && v >= max
    {
        out.fail(format!("Must be less than {}", format_float_g(max, None)));
    }
    if let Some(min) = bound("minimum")
        && v < min
    {
        out.fail(format!(
            "Must be greater than or equal to {}",
            format_float_g(min, None)
        ));
    }
    if let Some(min) = exclusive(schema, "exclusiveMinimum", "minimum")
        && v <= min
    {
        out.fail(format!(
            "Must be greater than {}",
            format_float_g(min, None)
        ));
    }
    out.score += 1;
}

/// An exclusive bound: a number (draft 6+), or `true` beside `bound` (draft 4), which then
/// replaces the inclusive one.
fn exclusive(schema: &Map<String, Value>, key: &str, bound: &str) -> Option<f64> {
    match schema.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::Bool(true) => schema.get(bound).and_then(Value::as_f64),
        _ => None,
    }
}

/// `validateCommon`: const, then enum, compared as Go's JSON of each value.
fn common(schema: &Map<String, Value>, node: &Value, field: &str, out: &mut Outcome) {
    let text = go_marshal(node);
    if let Some(c) = schema.get("const") {
        let allowed = go_marshal(c);
        if text != allowed {
            out.fail(format!("{field} does not match: {allowed}"));
        }
    }
    if let Some(Value::Array(values)) = schema.get("enum").filter(|v| non_empty(v)) {
        let allowed: Vec<String> = values.iter().map(go_marshal).collect();
        if !allowed.contains(&text) {
            out.fail(format!(
                "{field} must be one of the following: {}",
                allowed.join(", ")
            ));
        }
    }
    out.score += 1;
}

/// The formats gojsonschema checks; others pass, as there.
fn is_format(format: &str, s: &str) -> bool {
    match format {
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        _ => true,
    }
}

/// Go's `json.Marshal` of a value decoded into `interface{}`: keys sorted, numbers as float64,
/// `<`, `>` and `&` escaped.
fn go_marshal(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format_float_json(n.as_f64().unwrap_or_default()),
        Value::String(s) => go_string(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_marshal).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_string(k), go_marshal(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
    }
}

fn go_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    crate::json::write_string(s, true, &mut out);
    out
}
